//! irtt's protocol (docs/measurement.md §4): UDP echo with a negotiated layout of counters and
//! timestamps, optional HMAC-MD5. The wire format comes from the `irtt-proto` crate (evaluated
//! for issue 6: small, no unsafe, Apache-2.0, encodes and decodes every packet kind with the
//! HMAC; it has no sockets, timers or statistics, which are here). Stock irtt (Debian's
//! package) is the interop oracle in `tests/irtt_interop.rs`.

pub mod client;
pub mod server;
