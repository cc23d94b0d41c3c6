//! `debloat spec … | head` ends quietly when the reader goes away, as `tc` and `ip` do: the
//! default action of SIGPIPE, which Rust's runtime sets to "ignore" (then every print after
//! the reader left fails, and `println!` panics). `main` asks for it only for the commands that
//! compute, print and end; the gateway, the probe and the testbed keep SIGPIPE ignored, so a
//! peer that hangs up is an error on one socket, not the end of the process. The one system
//! call no safe crate wraps for this; unsafe is confined to it.
#![allow(unsafe_code)]

/// Give SIGPIPE its default action (end the process). Call before any thread starts.
pub fn quiet_on_closed_pipe() {
    // SAFETY: SIG_DFL is a valid disposition for SIGPIPE, and main calls this first, before
    // any thread exists, so no handler is replaced under another thread's feet.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
