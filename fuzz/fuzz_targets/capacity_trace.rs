//! A capacity trace (mahimahi's format or `seconds,rate` steps): parsing never panics, and a
//! trace that parses drains a modem's FIFO with departures that never go back in time and never
//! precede arrival.
//!
//! Run: `cargo +nightly fuzz run capacity_trace` (from the repository root; needs cargo-fuzz).
#![no_main]

use debloat_core::link::{Modem, Trace};
use debloat_core::qdisc::fifo::Limit;
use debloat_core::packet::PacketMeta;
use debloat_core::testutil::udp_flow;
use libfuzzer_sys::fuzz_target;
use std::sync::Arc;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(t) = Trace::parse(text) else { return };
    let mut m = Modem::new(Arc::new(t), Limit::Packets(50));
    let (mut last, mut now) = (0u64, 0u64);
    for i in 0..200u32 {
        now += 3_000_000;
        let meta = PacketMeta::new(100 + (i * 37) % 1400, udp_flow(1, 1, 1000));
        if let Some(d) = m.admit(&meta, u64::from(meta.len), now) {
            assert!(d >= now && d >= last, "departure {d} at {now} after {last}");
            last = d;
        }
    }
});
