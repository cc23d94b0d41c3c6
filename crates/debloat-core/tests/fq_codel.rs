//! FQ-CoDel conformance (docs/algorithms.md §2): DRR++ deficits, fat-flow batch drop, flow
//! isolation, sparse-flow priority, ECN, and Linux's empty-new-flow rule.

mod common;

use common::{mbps, run, Source};
use debloat_core::flow::FlowKey;
use debloat_core::packet::Record;
use debloat_core::qdisc::fq_codel::FqCodel;
use debloat_core::qdisc::spec::FqCodelSpec;
use debloat_core::testutil::{pkt_in, udp_flow};
use debloat_core::{Dequeue, DropReason, FlowHasher, Qdisc};

const MS: u64 = 1_000_000;
const SEC: u64 = 1_000_000_000;

fn fq(spec: FqCodelSpec) -> FqCodel<Record> {
    FqCodel::new(&spec, FlowHasher::new([7, 11]))
}

/// Two flow keys that land in different queues.
fn two_flows(q: &FqCodel<Record>) -> (FlowKey, FlowKey) {
    let a = udp_flow(1, 1, 1000);
    let ia = q.classify(&pkt_in(0, 100, a));
    let b = (1001..2000)
        .map(|p| udp_flow(1, 1, p))
        .find(|f| q.classify(&pkt_in(0, 100, *f)) != ia)
        .expect("distinct queue");
    (a, b)
}

#[test]
fn deficit_walkthrough_matches_the_reference() {
    // Quantum 90 B, 120 B packets (docs/algorithms.md §2.8; ns-3 FqCoDelQueueDiscDeficit).
    let mut q = fq(FqCodelSpec {
        quantum: 90,
        ..FqCodelSpec::default()
    });
    let (f1, f2) = two_flows(&q);
    let (i1, i2) = (
        q.classify(&pkt_in(0, 120, f1)),
        q.classify(&pkt_in(0, 120, f2)),
    );
    q.enqueue(pkt_in(1, 120, f1), 0);
    assert!(q.dequeue(0).packet().is_some());
    assert_eq!(q.flow_state(i1), (-30, Some(0)), "still on new_flows");
    q.enqueue(pkt_in(2, 120, f1), 0);
    q.enqueue(pkt_in(3, 120, f1), 0);
    assert_eq!(q.flow_state(i1), (-30, Some(0)), "no refill");
    q.enqueue(pkt_in(4, 120, f2), 0);
    q.enqueue(pkt_in(5, 120, f2), 0);
    assert_eq!(q.flow_state(i2), (90, Some(0)));
    // (packet sent, deficit of flow 1, deficit of flow 2) after each dequeue.
    let expect = [(4u64, 60, -30), (2, -60, 60), (5, 30, -60), (3, -90, 30)];
    for (k, &(id, d1, d2)) in expect.iter().enumerate() {
        let p = q.dequeue(0).packet().expect("packet");
        assert_eq!(
            (p.id, q.flow_state(i1).0, q.flow_state(i2).0),
            (id, d1, d2),
            "dequeue {k}"
        );
    }
    assert_eq!(q.flow_state(i1).0, -90);
    assert_eq!(q.flow_state(i2).0, 30);
    assert!(matches!(q.dequeue(0), Dequeue::Empty));
    assert_eq!(q.flow_state(i1), (90, None));
    assert_eq!(q.flow_state(i2), (30, None));
}

#[test]
fn overflow_head_drops_half_the_fattest_flow() {
    // limit 4: A holds 3, B holds 1; a 5th packet for B drops 2 from A's head (§2.8).
    let mut q = fq(FqCodelSpec {
        limit: 4,
        ..FqCodelSpec::default()
    });
    let (a, b) = two_flows(&q);
    for i in 0..3 {
        q.enqueue(pkt_in(i, 100, a), 0);
    }
    q.enqueue(pkt_in(10, 100, b), 0);
    q.enqueue(pkt_in(11, 100, b), 0);
    let dropped: Vec<(u64, DropReason)> = std::iter::from_fn(|| q.take_dropped())
        .map(|d| (d.packet.id, d.reason))
        .collect();
    assert_eq!(
        dropped,
        vec![(0, DropReason::Overlimit), (1, DropReason::Overlimit)]
    );
    assert_eq!(q.flow_len(q.classify(&pkt_in(0, 1, a))), 1);
    assert_eq!(q.flow_len(q.classify(&pkt_in(0, 1, b))), 2);
    assert_eq!(
        q.flow_vars(q.classify(&pkt_in(0, 1, a))).count,
        2,
        "drops added to CoDel count"
    );
}

#[test]
fn a_2_mbit_flow_gets_all_it_sends_and_an_8_mbit_flow_the_rest_of_5_mbit() {
    let q = fq(FqCodelSpec::default());
    let (fa, fb) = two_flows(&q);
    let mut a = Source::udp("a", 1, 1, 1000, 1000, 2_000_000);
    a.flow = fa;
    let mut b = Source::udp("b", 1, 1, 1001, 1000, 8_000_000);
    b.flow = fb;
    let (r, _) = run(q, Some(5_000_000), &[a, b], 12 * SEC, 2 * SEC);
    let (ta, tb) = (
        mbps(r[0].bytes_after_warmup, 10.0),
        mbps(r[1].bytes_after_warmup, 10.0),
    );
    assert_eq!(r[0].dropped, 0, "the 2 Mbit/s flow loses nothing");
    assert!((ta - 2.0).abs() / 2.0 < 0.01, "2 Mbit/s flow got {ta:.3}");
    assert!((tb - 3.0).abs() / 3.0 < 0.01, "8 Mbit/s flow got {tb:.3}");
}

#[test]
fn a_sparse_flow_waits_less_than_one_mtu_time() {
    // Four bulk flows flood a 10 Mbit/s link; a ping-like flow sends 100 B every 100 ms.
    let q = fq(FqCodelSpec::default());
    let mut srcs: Vec<Source> = (0..4)
        .map(|i| Source::udp("bulk", 1, 1, 2000 + i, 1514, 10_000_000))
        .collect();
    srcs.push(Source::udp("ping", 2, 2, 7, 100, 8_000));
    let (r, _) = run(q, Some(10_000_000), &srcs, 10 * SEC, SEC);
    let mtu_time = 1_211_200;
    let ping = &r[4];
    assert!(ping.sent >= 90 && ping.dropped == 0);
    assert!(
        ping.max_sojourn_after(SEC) <= mtu_time,
        "ping waited {} ns",
        ping.max_sojourn_after(SEC)
    );
    let bulk_p50 = {
        let mut v: Vec<u64> = r[0]
            .sojourns
            .iter()
            .filter(|s| s.0 > SEC)
            .map(|s| s.1)
            .collect();
        v.sort_unstable();
        v[v.len() / 2]
    };
    assert!(
        bulk_p50 > 4 * mtu_time,
        "bulk flows do queue ({bulk_p50} ns)"
    );
}

#[test]
fn ecn_flow_is_marked_not_dropped() {
    let q = fq(FqCodelSpec::default());
    let src = Source::udp("ect", 1, 1, 5000, 1514, 12_000_000).ecn();
    let (r, q) = run(q, Some(10_000_000), &[src], 5 * SEC, 0);
    assert!(r[0].marked > 10, "marks {}", r[0].marked);
    assert_eq!(r[0].dropped, 0);
    let debloat_core::qdisc::stats::Xstats::FqCodel { ecn_mark, .. } = q.stats().xstats else {
        panic!()
    };
    assert_eq!(u64::from(ecn_mark), r[0].marked);
}

#[test]
fn empty_new_flow_is_deactivated_when_old_list_is_empty() {
    // Linux, not RFC 8290: with old_flows empty the flow leaves the lists and re-enters as new.
    let mut q = fq(FqCodelSpec::default());
    let f = udp_flow(1, 1, 1);
    let idx = q.classify(&pkt_in(0, 100, f));
    q.enqueue(pkt_in(1, 100, f), 0);
    assert!(q.dequeue(0).packet().is_some());
    assert!(matches!(q.dequeue(0), Dequeue::Empty));
    assert_eq!(q.flow_state(idx).1, None);
    q.enqueue(pkt_in(2, 100, f), MS);
    assert_eq!(
        q.flow_state(idx),
        (1514, Some(0)),
        "fresh quantum on the new list"
    );
}

#[test]
fn memory_limit_drops_from_the_fattest_flow_and_counts_overmemory() {
    // 20 KiB of truesize holds 9 packets of 1514 B (truesize 2176 each).
    let mut q = fq(FqCodelSpec {
        memory_limit: 20 << 10,
        ..FqCodelSpec::default()
    });
    let (a, b) = two_flows(&q);
    for i in 0..8 {
        q.enqueue(pkt_in(i, 1514, a), 0);
    }
    q.enqueue(pkt_in(100, 1514, b), 0);
    q.enqueue(pkt_in(101, 1514, b), 0);
    let dropped: Vec<(u64, DropReason)> = std::iter::from_fn(|| q.take_dropped())
        .map(|d| (d.packet.id, d.reason))
        .collect();
    // Over memory on the 10th packet: A (8 packets) is fattest; half its bytes go from its head.
    assert_eq!(
        dropped.iter().map(|d| d.0).collect::<Vec<_>>(),
        vec![0, 1, 2, 3]
    );
    assert!(dropped.iter().all(|d| d.1 == DropReason::Overmemory));
    let debloat_core::qdisc::stats::Xstats::FqCodel {
        drop_overmemory,
        drop_overlimit,
        ..
    } = q.stats().xstats
    else {
        panic!()
    };
    assert_eq!((drop_overmemory, drop_overlimit), (4, 4));
}
