//! Arbitrary bytes as frames arriving at the gateway: parsing, classification, a CE mark
//! written back, and the whole egress path (cake with ECN marking) must never panic, and every
//! frame must stay accounted for.
//!
//! Run: `cargo fuzz run gateway_frames` (from the repository root; needs cargo-fuzz).
#![no_main]

use debloat_core::packet::Packet;
use debloat_gateway::frame::Frame;
use debloat_gateway::path::Path;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(mut f) = Frame::parse(data.to_vec()) {
        let _ = f.set_ce();
        f.finish();
    }
    let spec = "cake bandwidth 1Mbit diffserv4 ack-filter"
        .parse()
        .expect("spec");
    let emu = "rate 1Mbit delay 1ms 1ms loss 1% duplicate 1% corrupt 1% reorder 5% limit 100"
        .parse()
        .expect("emulation");
    let mut p = Path::new(&spec, emu, debloat_core::FlowHasher::new([1, 2]), 1);
    // The input split into frames at each 0xfe byte, arriving 100 µs apart.
    for (i, chunk) in data.split(|&b| b == 0xfe).enumerate() {
        p.on_frame(chunk.to_vec(), i as u64 * 100_000);
        p.poll(i as u64 * 100_000, &mut |_| {});
    }
    while let Some(t) = p.next_wakeup() {
        p.poll(t, &mut |_| {});
    }
    assert!(p.accounted());
});
