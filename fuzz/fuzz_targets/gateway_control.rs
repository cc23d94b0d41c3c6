//! Words a client sends on the gateway's control socket to change a running direction
//! (`set egress WORDS`, `set emulate-egress WORDS`), applied to a path with frames queued:
//! never a panic, and the accounting stays exact through the change.
//!
//! Run: `cargo +nightly fuzz run gateway_control` (from the repository root; needs cargo-fuzz).
#![no_main]

use debloat_gateway::path::Path;
use debloat_gateway::Emulation;
use libfuzzer_sys::fuzz_target;

fn frame(i: u16) -> Vec<u8> {
    let mut f = Vec::new();
    etherparse::PacketBuilder::ethernet2([1; 6], [2; 6])
        .ipv4([198, 18, 1, 2], [198, 18, 2, 2], 64)
        .udp(1000 + i % 7, 9)
        .write(&mut f, &[0u8; 1000])
        .expect("frame");
    f
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let spec = "cake bandwidth 1Mbit".parse().expect("spec");
    let emu: Emulation = "rate 1Mbit delay 5ms".parse().expect("emulation");
    let mut p = Path::new(&spec, emu, debloat_core::FlowHasher::new([1, 2]), 1);
    for i in 0..50 {
        p.on_frame(frame(i), u64::from(i) * 10_000);
    }
    for line in text.lines() {
        match line.split_once(' ') {
            Some(("emulate", w)) => {
                if let Ok(e) = w.parse::<Emulation>() {
                    let _ = p.change_emulation(e);
                }
            }
            Some(("replace", w)) => {
                if let Ok(s) = w.parse() {
                    p.replace_qdisc(&s, 600_000);
                }
            }
            _ => {
                let _ = p.change_qdisc(line);
            }
        }
        assert!(p.accounted(), "{line}");
    }
    while let Some(t) = p.next_wakeup() {
        p.poll(t, &mut |_| {});
    }
    assert!(p.accounted());
});
