//! The request line a `debloat server` reads from each TCP client: parsing never panics, and a
//! request that parses prints back to a line that parses to the same request.
//!
//! Run: `cargo +nightly fuzz run probe_control_line` (from the repository root; needs cargo-fuzz).
#![no_main]

use debloat_probe::control::{verify_line, Request};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(line) = std::str::from_utf8(data) else { return };
    let _ = verify_line(line, Some(b"key"), "nonce");
    let Ok(r) = Request::parse(line) else { return };
    assert_eq!(Request::parse(&r.line()).as_ref(), Ok(&r), "{line}");
});
