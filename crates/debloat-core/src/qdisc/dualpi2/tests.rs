//! dualpi2: the kernel's defaults and arithmetic, ECN classification, the coupling (k·p for
//! L4S, p² for classic), overload, the step, the WRR's classic protection and the auto-tuning
//! from RTTs.

use super::*;
use crate::packet::Record;
use crate::qdisc::spec::QdiscSpec;
use crate::testutil::{pkt_in, udp_flow};

const MS: u64 = 1_000_000;

fn spec(words: &str) -> DualPi2Spec {
    match words.parse::<QdiscSpec>() {
        Ok(QdiscSpec::DualPi2(s)) => s,
        other => panic!("{other:?}"),
    }
}

fn q(words: &str) -> DualPi2<Record> {
    DualPi2::new(&spec(words), 7)
}

fn pkt(id: u64, ecn: Ecn) -> Record {
    let mut r = pkt_in(id, 1514, udp_flow(1, 2, 1));
    r.meta.ecn = ecn;
    r
}

#[test]
fn defaults_and_text_are_the_kernels() {
    let s = spec("dualpi2");
    assert_eq!((s.limit, s.memory_limit), (10_000, 30_280_000));
    assert_eq!(
        (s.target_us, s.tupdate_us, s.alpha, s.beta),
        (15_000, 16_000, 41, 819)
    );
    // The kernel keeps alpha and beta per 64 ns and reports them back rounded down twice:
    // 41/256 Hz comes back as 40/256 = 0.156250, 819/256 as 818/256 = 3.195312.
    assert_eq!((scale(41), unscale(scale(41))), (44, 40));
    assert_eq!((scale(819), unscale(scale(819))), (879, 818));
    assert_eq!(
        s.tc_options(),
        "limit 10000p memlimit 30280000B target 15ms tupdate 16ms alpha 0.156250 beta 3.195312 step_thresh 1ms min_qlen_step 0p coupling_factor 2 drop_on_overload drop_dequeue classic_protection 10% l4s_ect split_gso"
    );
    let idle = q("dualpi2").stats().to_tc_string();
    assert!(
        idle.ends_with(" backlog 0b 0p requeues 0\nprob 0.000000 delay_c 0us delay_l 0us\npkts_in_c 0 pkts_in_l 0 maxq 0\necn_mark 0 step_mark 0\ncredit -121120 (L-queue)\nmemory_used 0 (max 0) of memory limit 30280000\n\n"),
        "{idle}"
    );
    for words in [
        "dualpi2",
        "dualpi2 limit 500 target 5ms tupdate 10ms alpha 0.3 beta 4 coupling_factor 3 any_ect step_thresh 8p min_qlen_step 2 overflow drop_enqueue classic_protection 25% no_split_gso",
        "dualpi2 memlimit 100000 step_thresh 500us",
    ] {
        let q: QdiscSpec = words.parse().expect("valid");
        assert_eq!(q.to_string().parse::<QdiscSpec>().ok(), Some(q.clone()), "{q}");
    }
    for bad in [
        "dualpi2 coupling_factor 0",
        "dualpi2 classic_protection 101",
        "dualpi2 step_thresh lots",
        "dualpi2 alpha 0.001",
        "dualpi2 max_rtt 10ms typical_rtt 20ms",
        "dualpi2 couplingfactor 2",
    ] {
        assert!(bad.parse::<QdiscSpec>().is_err(), "{bad}");
    }
}

#[test]
fn max_rtt_derives_the_controller_as_tc_does() {
    // tc: typical = max / 6; target = typical; tupdate = min(typical, max / 3);
    // alpha = 0.1 × tupdate / max², beta = 0.3 / max (Hz, kept in 1/256).
    let s = spec("dualpi2 max_rtt 100ms");
    assert_eq!((s.target_us, s.tupdate_us), (16_666, 16_666));
    assert_eq!((s.alpha, s.beta), (42, 768));
    let s = spec("dualpi2 typical_rtt 10ms");
    assert_eq!((s.target_us, s.tupdate_us), (10_000, 10_000));
    assert_eq!(
        (s.alpha, s.beta),
        ((0.1f64 * 10_000.0 / 6e4 / 6e4 * 1e6 * 256.0) as u32, 1280)
    );
}

#[test]
fn ecn_picks_the_queue() {
    let mut d = q("dualpi2");
    for (k, e) in [Ecn::NotEct, Ecn::Ect0, Ecn::Ect1, Ecn::Ce]
        .into_iter()
        .enumerate()
    {
        d.enqueue(pkt(k as u64, e), 0);
    }
    assert_eq!((d.queues[L].len(), d.queues[C].len()), (2, 2));
    let mut any = q("dualpi2 any_ect");
    for (k, e) in [Ecn::NotEct, Ecn::Ect0, Ecn::Ect1].into_iter().enumerate() {
        any.enqueue(pkt(k as u64, e), 0);
    }
    assert_eq!((any.queues[L].len(), any.queues[C].len()), (2, 1));
}

#[test]
fn the_first_update_is_the_kernels_fixed_point() {
    let mut d = q("dualpi2");
    d.enqueue(pkt(0, Ecn::NotEct), 0);
    // At 16 ms the head has waited 16 ms: delta = 1 ms × α + 16 ms × β, in 64-ns steps.
    d.catch_up(16 * MS);
    let want = ((1_000_000u64 * 44 + 16_000_000 * 879) >> 6) as u32;
    assert_eq!(d.prob(), want);
    // A queue held at 30 ms keeps raising p; empty, p falls back to 0.
    let mut last = d.prob();
    for k in 2..30u64 {
        d.enqueue(pkt(k, Ecn::NotEct), k * 16 * MS - 30 * MS);
        let _ = d.queues[C].pop_front();
        d.catch_up(k * 16 * MS);
        assert!(d.prob() >= last, "p fell at a standing 30-ms queue");
        last = d.prob();
    }
    d.queues[C].clear();
    d.catch_up(10_000 * MS);
    assert_eq!(d.prob(), 0);
}

/// Dequeue `n` packets of one class at base probability `p` with a standing backlog: how many
/// were marked and how many dropped.
fn marks_and_drops(words: &str, ecn: Ecn, p: f64, n: u64) -> (u64, u64) {
    let mut d = q(words);
    let (mut marked, mut dropped) = (0, 0);
    for k in 0..n {
        // Keep three packets queued so the backlog exceeds two MTUs.
        while d.qlen() < 4 {
            d.enqueue(pkt(k, ecn), 0);
        }
        d.prob = (p * f64::from(MAX_PROB)) as u32;
        if let Dequeue::Packet(x) = d.dequeue(0) {
            marked += u64::from(x.meta.ecn == Ecn::Ce && ecn != Ecn::Ce);
        }
        while d.take_dropped().is_some() {
            dropped += 1;
        }
    }
    (marked, dropped)
}

#[test]
fn l4s_is_marked_with_k_p_and_classic_with_p_squared() {
    let n = 20_000;
    let rate = |x: u64| x as f64 / n as f64;
    let (l, _) = marks_and_drops("dualpi2", Ecn::Ect1, 0.1, n);
    assert!((rate(l) - 0.2).abs() < 0.01, "L4S marked {}", rate(l));
    let (c, _) = marks_and_drops("dualpi2", Ecn::Ect0, 0.1, n);
    assert!(
        (rate(c) - 0.01).abs() < 0.003,
        "classic ECT marked {}",
        rate(c)
    );
    let (_, c) = marks_and_drops("dualpi2", Ecn::NotEct, 0.1, n);
    assert!(
        (rate(c) - 0.01).abs() < 0.003,
        "classic dropped {}",
        rate(c)
    );
    // Overload (k·p = 120 %): L4S dropped as classic (p² = 36 %) and the rest marked, or with
    // `overflow` all marked and none dropped.
    let (m, dr) = marks_and_drops("dualpi2", Ecn::Ect1, 0.6, n);
    assert!(
        (rate(dr) / (rate(dr) + rate(m)) - 0.36).abs() < 0.02,
        "{m} {dr}"
    );
    assert!(rate(m) > 0.5);
    let (m, dr) = marks_and_drops("dualpi2 overflow", Ecn::Ect1, 0.6, n);
    assert_eq!((m, dr), (n, 0));
}

#[test]
fn the_step_marks_l4s_that_waited_past_1_ms() {
    let mut d = q("dualpi2");
    d.enqueue(pkt(0, Ecn::Ect1), 0);
    d.enqueue(pkt(1, Ecn::Ect1), 0);
    let Dequeue::Packet(a) = d.dequeue(MS) else {
        panic!()
    };
    assert_eq!(a.meta.ecn, Ecn::Ect1, "exactly 1 ms: not past the step");
    let Dequeue::Packet(b) = d.dequeue(MS + 1) else {
        panic!()
    };
    assert_eq!(b.meta.ecn, Ecn::Ce);
    assert_eq!((d.counters().step_marks, d.counters().ecn_mark), (1, 1));
    // The step in packets: the L queue longer than 2 once this one has left.
    let mut d = q("dualpi2 step_thresh 2p");
    for k in 0..5 {
        d.enqueue(pkt(k, Ecn::Ect1), 0);
    }
    let ce: Vec<bool> = (0..5)
        .filter_map(|_| d.dequeue(0).packet())
        .map(|p| p.meta.ecn == Ecn::Ce)
        .collect();
    assert_eq!(ce, vec![true, true, false, false, false]);
}

#[test]
fn classic_protection_gives_c_its_share_of_the_bytes() {
    let mut d = q("dualpi2 limit 100000");
    for k in 0..5000 {
        d.enqueue(pkt(2 * k, Ecn::Ect1), 0);
        d.enqueue(pkt(2 * k + 1, Ecn::NotEct), 0);
    }
    let mut classic = 0;
    for _ in 0..1000 {
        if let Dequeue::Packet(p) = d.dequeue(0) {
            classic += u32::from(p.meta.ecn == Ecn::NotEct);
        }
    }
    assert!((98..=102).contains(&classic), "C sent {classic} of 1000");
    // Either queue alone takes the link, and a drain hands over everything.
    let mut out = 0;
    d.drain(&mut |_| out += 1);
    assert_eq!((out, d.qlen(), d.backlog()), (9000, 0, 0));
}
