//! debloat's one HTTP stack: every HTTP endpoint debloat serves or calls goes through here —
//! the gateway's Prometheus endpoint and live view (HTTP/1.1), and the IETF responsiveness
//! test's server and client (HTTP/2 over TLS, HTTP/1.1 where a peer has no h2).
//!
//! It is [hyper](https://hyper.rs) on a tokio runtime, with TLS from rustls (the `ring`
//! provider, so nothing needs cmake or a C++ compiler). What this crate adds is what every one
//! of debloat's servers needs because it faces whoever can reach its port ([`serve::Limits`]:
//! a cap on clients served at once, a deadline for a request head and a size limit on it, an
//! optional deadline on a whole connection), TLS set-ups from PEM files or a self-signed
//! certificate made on the spot ([`tls`]), and a client connection whose TCP and TLS handshakes
//! are timed separately, as the responsiveness test's foreign probes need ([`client`]).
//!
//! ```text
//!  std TcpListener ──► serve::spawn (tokio task per connection, Limits) ──► your handler
//!                        └─ TLS (tls::server) → ALPN h2 → HTTP/2, otherwise HTTP/1.1
//!  client::connect ──► TCP (timed) ──► TLS (timed, ALPN) ──► HTTP/2 or HTTP/1.1 sender
//! ```

pub mod body;
pub mod client;
pub mod serve;
pub mod tls;

pub use bytes::Bytes;
pub use hyper::body::Incoming;
pub use hyper::{header, Method, Request, Response, StatusCode, Uri};
pub use rustls;

/// What can go wrong setting up or using an HTTP endpoint.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A socket or file operation failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// A TLS set-up failed (a certificate that does not parse, a key that does not match).
    #[error("TLS: {0}")]
    Tls(String),
    /// The HTTP exchange failed.
    #[error("HTTP: {0}")]
    Http(#[from] hyper::Error),
    /// A URL that is not `https://HOST[:PORT]/PATH` or `http://…`.
    #[error("{0}")]
    Url(String),
}

/// A runtime for a server or client of debloat's: `threads` worker threads (1 gives a
/// current-thread runtime on the caller's thread).
pub fn runtime(threads: usize, name: &str) -> std::io::Result<tokio::runtime::Runtime> {
    if threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name(name)
            .enable_all()
            .build()
    }
}
