//! Arbitrary bytes as DNS answers crossing the marking stage: as a UDP and a TCP payload from
//! port 53 inside a real frame, and as a bare message. Nothing may panic, and a packet marked
//! afterwards still gets one of the DSCPs the rules or the default name.
//!
//! Run: `cargo +nightly fuzz run dns_snoop` (from the repository root; needs cargo-fuzz).
#![no_main]

use debloat_core::classify::qosify::{parse_uci, Classifier, Direction};
use debloat_core::classify::{classify, LinkType};
use debloat_core::flow::FlowKey;
use debloat_core::packet::PacketMeta;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut cfg = parse_uci("q", "config defaults\n\toption dscp_default_tcp CS0\n").expect("uci");
    cfg.add_map("m", "dns:*.example.com AF41\ndns_c:/^r[0-9]+\\.cdn\\. CS1\n")
        .expect("map");
    let mut c = Classifier::new(cfg, 64, debloat_core::FlowHasher::new([1, 2]));
    for tcp in [false, true] {
        let b = etherparse::PacketBuilder::ethernet2([4; 6], [2; 6]).ipv4([198, 18, 2, 53], [198, 18, 1, 2], 64);
        let mut f = Vec::new();
        let ok = if tcp {
            b.tcp(53, 40000, 1, 1000).write(&mut f, data).is_ok()
        } else {
            b.udp(53, 40000).write(&mut f, data).is_ok()
        };
        if ok {
            if let Ok(m) = classify(&f, f.len() as u32, LinkType::Ethernet) {
                c.snoop(&f, LinkType::Ethernet, &m.flow, 1);
            }
        }
    }
    c.snoop(data, LinkType::RawIp, &FlowKey::ip([198, 18, 2, 53].into(), [198, 18, 1, 2].into(), 53, 1, 17), 2);
    let mut m = PacketMeta::new(100, FlowKey::ip([198, 18, 1, 2].into(), [198, 18, 9, 9].into(), 1, 443, 6));
    c.mark(&mut m, Direction::Up, 3);
    assert!([0, 8, 34].contains(&m.dscp));
});
