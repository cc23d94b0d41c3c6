//! Datagrams arriving at the irtt server (`debloat server`'s UDP side) from several peers:
//! never a panic, and open sessions never exceed the limit.
//!
//! Run: `cargo +nightly fuzz run irtt_server` (from the repository root; needs cargo-fuzz).
#![no_main]

use debloat_probe::irtt::server::{Limits, Sessions};
use libfuzzer_sys::fuzz_target;
use std::time::{Duration, Instant};

fuzz_target!(|data: &[u8]| {
    let limits = Limits {
        max_sessions: 3,
        ..Limits::default()
    };
    let mut s = Sessions::new(limits);
    let t0 = Instant::now();
    // Datagrams separated by 0xff 0xfe; the first byte of each picks the peer and the clock.
    for (i, d) in data.split(|&b| b == 0xfe).enumerate() {
        let peer = d.first().copied().unwrap_or(0) % 8;
        let from = std::net::SocketAddr::from(([198, 18, 0, peer], 40_000));
        let now = t0 + Duration::from_millis(i as u64 * 7);
        let _ = s.handle(now, from, d.get(1..).unwrap_or_default());
        s.expire(now);
        assert!(s.open() <= 3);
    }
});
