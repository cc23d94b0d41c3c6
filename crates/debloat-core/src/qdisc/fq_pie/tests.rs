//! fq_pie: PIE per flow under fq_codel's scheduler, with the kernel's defaults.

use super::*;
use crate::packet::Record;
use crate::qdisc::spec::QdiscSpec;
use crate::testutil::{pkt_in, udp_flow};

const MS: u64 = 1_000_000;

fn spec(words: &str) -> FqPieSpec {
    match words.parse::<QdiscSpec>() {
        Ok(QdiscSpec::FqPie(s)) => s,
        other => panic!("{other:?}"),
    }
}

#[test]
fn defaults_are_the_kernels() {
    let s = spec("fq_pie");
    assert_eq!((s.pie.limit, s.flows, s.quantum), (10240, 1024, 1514));
    assert_eq!((s.memory_limit, s.ecn_prob), (32 << 20, 10));
    assert_eq!((s.pie.target_us, s.pie.tupdate_us), (15_000, 15_000));
    assert_eq!(
        s.tc_options(),
        "limit 10240p flows 1024 target 15ms tupdate 15ms alpha 2 beta 20 quantum 1514b memory_limit 32Mb ecn_prob 10"
    );
    let q: QdiscSpec = "fq_pie flows 0 ecn_prob 0 quantum 300 ecn"
        .parse()
        .expect("valid");
    assert_eq!(q.to_string().parse::<QdiscSpec>().ok(), Some(q.clone()));
    for bad in [
        "fq_pie flows 65537",
        "fq_pie ecn_prob 100",
        "fq_pie quantum 2mb",
        "fq_pie interval 5ms",
    ] {
        assert!(bad.parse::<QdiscSpec>().is_err(), "{bad}");
    }
}

/// A flow that overloads the link gets early drops of its own; a sparse flow beside it keeps
/// its queue (and its probability) near zero and loses nothing. Every packet is sent, dropped
/// or queued.
#[test]
fn each_flow_has_its_own_controller() {
    let mut q = FqPie::<Record>::new(&spec("fq_pie"), FlowHasher::new([1, 2]), 3);
    let (bulk, sparse) = (udp_flow(1, 1, 1), udp_flow(2, 2, 2));
    let tx = 1500 * 8 * 1000 / 10; // 10 Mbit/s
    let (mut t, mut id, mut sent, mut dropped) = (0u64, 0u64, [0u64; 2], [0u64; 2]);
    let mut next_tx = 0;
    while t < 20_000 * MS {
        // The bulk flow offers 12 Mbit/s; the sparse one a packet every 20 ms.
        q.enqueue(pkt_in(id, 1500, bulk), t);
        id += 1;
        if t % (20 * MS) < tx * 10 / 12 {
            q.enqueue(pkt_in(id | 1 << 40, 200, sparse), t);
            id += 1;
        }
        while let Some(d) = q.take_dropped() {
            dropped[usize::from(d.packet.id >> 40 == 1)] += 1;
        }
        while next_tx <= t {
            if let Dequeue::Packet(p) = q.dequeue(next_tx) {
                sent[usize::from(p.id >> 40 == 1)] += 1;
            }
            next_tx += tx;
        }
        t += tx * 10 / 12;
    }
    assert_eq!(
        sent.iter().sum::<u64>() + dropped.iter().sum::<u64>() + q.qlen() as u64,
        id
    );
    assert_eq!(dropped[1], 0, "the sparse flow loses nothing");
    assert!(dropped[0] > 0, "the bulk flow is dropped early");
    let bulk_prob = q.flow_vars(&pkt_in(0, 1500, bulk)).prob as f64 / MAX_PROB as f64;
    let sparse_prob = q.flow_vars(&pkt_in(0, 200, sparse)).prob;
    assert!(bulk_prob > 0.05, "bulk probability {bulk_prob}");
    assert_eq!(sparse_prob, 0);
    let s = q.fq_pie_stats();
    assert_eq!(u64::from(s.dropped), dropped[0]);
    assert!(s.new_flow_count >= 2);
}

/// With `ecn` a flow's ECN-capable packets are marked while its probability is at most
/// `ecn_prob` percent, and dropped above it.
#[test]
fn ecn_prob_sets_where_marks_become_drops() {
    let mut q = FqPie::<Record>::new(&spec("fq_pie ecn ecn_prob 30"), FlowHasher::new([1, 2]), 3);
    let f = udp_flow(1, 1, 1);
    let ect = |id| crate::testutil::ect(pkt_in(id, 1500, f));
    for i in 0..5 {
        q.enqueue(ect(i), 0);
    }
    q.updates = pie::Updates::default();
    let i = q.classify(&ect(0)) as usize;
    let v = &mut q.flows[i].vars;
    v.burst_time = 0;
    v.qdelay = 30 * MS / 64;
    v.prob = MAX_PROB / 4; // 25 %: under 30
    v.accu_prob = (MAX_PROB / 2) * 17;
    q.enqueue(ect(5), 1);
    assert_eq!((q.qlen(), q.fq_pie_stats().ecn_mark), (6, 1));
    let v = &mut q.flows[i].vars;
    v.prob = MAX_PROB / 2; // 50 %: over 30
    v.accu_prob = (MAX_PROB / 2) * 17;
    q.enqueue(ect(6), 2);
    assert_eq!((q.qlen(), q.fq_pie_stats().dropped), (6, 1));
}
