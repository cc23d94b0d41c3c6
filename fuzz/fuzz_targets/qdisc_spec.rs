//! A tc spec string for any discipline, then fuzzed packets and clocks through it. Invariants:
//! a spec that parses prints back to a spec that parses to the same configuration; the built
//! discipline keeps exact accounting (every packet enqueued is sent, dropped or queued).
//!
//! Input: the spec on the first line; each further 4 bytes a packet (length, flow, clock step).
//! Run: `cargo +nightly fuzz run qdisc_spec` (from the repository root; needs cargo-fuzz).
#![no_main]

use debloat_core::packet::{PacketMeta, Record};
use debloat_core::testutil::udp_flow;
use debloat_core::{Dequeue, FlowHasher, Qdisc, QdiscSpec};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let split = data.iter().position(|&b| b == b'\n').unwrap_or(data.len());
    let Ok(text) = std::str::from_utf8(&data[..split]) else { return };
    let Ok(spec) = text.parse::<QdiscSpec>() else { return };
    let again: QdiscSpec = spec.to_string().parse().expect("a printed spec parses");
    assert_eq!(again, spec, "{text} → {spec}");
    let mut q: Box<dyn Qdisc<Record>> = spec.build(FlowHasher::new([1, 2]), 3);
    let (mut now, mut sent, mut dropped, mut offered) = (0u64, 0u64, 0u64, 0u64);
    for (i, c) in data[split..].chunks(4).enumerate() {
        let b = |k: usize| u64::from(*c.get(k).unwrap_or(&0));
        let len = 40 + (b(0) << 3 | b(1) >> 5) as u32;
        let mut m = PacketMeta::new(len, udp_flow((b(1) & 7) as u8, (b(2) & 15) as u8, 1000));
        m.dscp = (b(2) >> 2) as u8;
        now += b(3) * 50_000;
        q.enqueue(Record::new(i as u64, m), now);
        offered += 1;
        if b(3) & 1 == 0 {
            if let Dequeue::Packet(_) = q.dequeue(now) {
                sent += 1;
            }
        }
        while q.take_dropped().is_some() {
            dropped += 1;
        }
    }
    for _ in 0..offered * 2 + 10 {
        now += 1_000_000;
        match q.dequeue(now) {
            Dequeue::Packet(_) => sent += 1,
            Dequeue::NotBefore(t) => now = t,
            Dequeue::Empty => {}
        }
        while q.take_dropped().is_some() {
            dropped += 1;
        }
    }
    assert_eq!(offered, sent + dropped + q.qlen() as u64, "{spec}");
});
