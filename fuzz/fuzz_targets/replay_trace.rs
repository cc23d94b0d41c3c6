//! A pcap or CSV trace for `debloat replay`: loading never panics, and a trace that loads
//! replays with exactly one fate per packet (malformed ones included).
//!
//! Run: `cargo +nightly fuzz run replay_trace` (from the repository root; needs cargo-fuzz).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(trace) = debloat_replay::load(data) else { return };
    if trace.packets.len() > 5_000 {
        return;
    }
    let spec = "fq_codel".parse().expect("spec");
    let out = debloat_replay::replay(&trace, &spec, Some(10_000_000), 1).expect("replays");
    assert_eq!(out.rows.len(), trace.packets.len());
});
