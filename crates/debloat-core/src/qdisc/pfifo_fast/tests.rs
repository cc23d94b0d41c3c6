//! pfifo_fast's bands, priority order and per-band limit, as Linux has them.

use super::*;
use crate::flow::FlowKey;
use crate::packet::Record;
use crate::qdisc::spec::QdiscSpec;
use crate::testutil::{pkt, pkt_in};
use std::net::{IpAddr, Ipv6Addr};

/// A packet from a socket with this IP_TOS (or routed with it): its priority set as Linux does.
fn with_tos(id: u64, tos: u8) -> Record {
    let mut p = pkt(id, 1000);
    p.meta.dscp = tos >> 2;
    p.meta.priority = tos_priority(tos >> 2);
    p
}

/// The old TOS bits decide, through ip_tos2prio and the priomap: "low delay" (0x10) is band 0,
/// "throughput" (0x08) band 2, best effort, EF (0xb8) and CS1 (0x20) band 1, "reliability"
/// (0x04) band 1.
#[test]
fn the_tos_byte_picks_the_band() {
    for (tos, band) in [
        (0x00, 1),
        (0x10, 0),
        (0x08, 2),
        (0xb8, 1),
        (0x20, 1),
        (0x04, 1),
        (0x18, 1),
        (0x28, 2),
    ] {
        assert_eq!(band_of(&with_tos(0, tos).meta), band, "tos {tos:#04x}");
    }
    // A bridged frame (priority 0) goes to band 1 whatever its TOS, as a veth leaves it.
    let mut p = pkt_in(0, 1000, FlowKey::ip(v6(1), v6(2), 1, 2, 17));
    p.meta.dscp = 0x10 >> 2;
    assert_eq!(band_of(&p.meta), 1);
    // Priorities above 15 wrap, as `& TC_PRIO_MAX` does.
    p.meta.priority = 16 + 6;
    assert_eq!(band_of(&p.meta), 0);
}

fn v6(h: u16) -> IpAddr {
    IpAddr::V6(Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, h))
}

#[test]
fn bands_are_served_in_strict_priority() {
    let mut q = PfifoFast::<Record>::new(&PfifoFastSpec::default());
    for (id, tos) in [
        (1, 0x08),
        (2, 0x00),
        (3, 0x10),
        (4, 0x08),
        (5, 0x10),
        (6, 0x00),
    ] {
        assert_eq!(q.enqueue(with_tos(id, tos), 0), Verdict::Queued);
    }
    let order: Vec<u64> = std::iter::from_fn(|| q.dequeue(1).packet().map(|p| p.id)).collect();
    assert_eq!(order, [3, 5, 2, 6, 1, 4]);
}

/// Each band is a ring of txqueuelen packets (Linux ≥ 4.16): a full bulk band drops its own
/// arrivals while best effort still gets in; every packet is sent, dropped or queued.
#[test]
fn each_band_holds_txqueuelen_packets() {
    let mut q = PfifoFast::<Record>::new(&PfifoFastSpec { txqueuelen: 10 });
    let mut dropped = 0;
    for id in 0..15 {
        if q.enqueue(with_tos(id, 0x08), 0) == Verdict::Dropped {
            dropped += 1;
        }
    }
    assert_eq!((q.band_lens(), dropped), ([0, 0, 10], 5));
    assert_eq!(q.enqueue(with_tos(99, 0x00), 0), Verdict::Queued);
    assert_eq!(q.band_lens(), [0, 1, 10]);
    assert_eq!((q.qlen(), q.backlog()), (11, 11_000));
    let mut taken = 0;
    while q.take_dropped().is_some() {
        taken += 1;
    }
    assert_eq!(taken, 5);
    assert_eq!(q.stats().drops, 5);
}

#[test]
fn words_and_tc_text() {
    let s: QdiscSpec = "pfifo_fast".parse().expect("valid");
    assert_eq!(s.to_string(), "pfifo_fast txqueuelen 1000");
    assert_eq!(s.to_string().parse::<QdiscSpec>().ok(), Some(s.clone()));
    let q = s.build::<Record>(crate::FlowHasher::new([1, 2]), 0);
    assert!(q.stats().to_tc_string().starts_with(
        "qdisc pfifo_fast 1: root refcnt 2 bands 3 priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1\n"
    ));
    let e = "pfifo_fast limit 5"
        .parse::<QdiscSpec>()
        .expect_err("tc takes no options");
    assert!(e.to_string().contains("txqueuelen"), "{e}");
}
