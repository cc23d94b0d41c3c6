//! PIE's control law against RFC 8033's figures and Linux's specifics.
#![allow(clippy::field_reassign_with_default)] // each test sets the state it starts from

use super::*;
use crate::qdisc::spec::QdiscSpec;
use crate::qdisc::{Dequeue, Qdisc};
use crate::testutil::{ect, pkt};

const MS: u64 = 1_000_000;

fn params() -> Params {
    PieSpec::default().params()
}

fn frac(prob: u64) -> f64 {
    prob as f64 / MAX_PROB as f64
}

/// The kernel's defaults: target 15 ms, tupdate 15 ms, limit 1000, alpha 2/16, beta 20/16.
#[test]
fn defaults_are_the_kernels() {
    let p = params();
    assert_eq!(p.target, 15 * MS / 64);
    assert_eq!(p.tupdate_ns, 15 * MS);
    assert_eq!((p.limit, p.alpha, p.beta), (1000, 2, 20));
    assert!(!p.ecn && !p.bytemode && !p.dq_rate_estimator);
    let v = Vars::default();
    assert_eq!(v.burst_time, 150 * MS / 64);
}

/// RFC 8033 §4.2's scaling: below a probability of 0.000001 the gains are alpha/2048 and
/// beta/2048 (Linux: halved, then quartered five times). One update with the delay 15 ms above
/// target and not moving raises the probability by 0.125/2048 × 0.015 s.
#[test]
fn a_first_update_uses_the_smallest_gains() {
    let p = params();
    let mut v = Vars::default();
    v.qdelay = 30 * MS / 64;
    v.qdelay_old = v.qdelay;
    update(&p, &mut v, 100_000);
    let expect = 0.125 / 2048.0 * 0.015;
    let got = frac(v.prob);
    assert!(
        (got / expect - 1.0).abs() < 0.01,
        "prob {got:e}, expected {expect:e}"
    );
}

/// Between 1 % and 10 % the gains are halved (RFC 8033: alpha/2, beta/2): the error adds
/// 0.125/2 × 0.015, the trend 1.25/2 × the delay's change.
#[test]
fn gains_grow_with_the_probability() {
    let p = params();
    let mut v = Vars::default();
    v.prob = MAX_PROB / 20; // 5 %
    v.qdelay = 30 * MS / 64;
    v.qdelay_old = 25 * MS / 64;
    update(&p, &mut v, 100_000);
    let expect = 0.05 + 0.125 / 2.0 * 0.015 + 1.25 / 2.0 * 0.005;
    let got = frac(v.prob);
    assert!((got - expect).abs() < 1e-5, "prob {got}, expected {expect}");
}

/// At or above 10 % a step up is capped at 2 %; a delay above 250 ms adds 2 % on top.
#[test]
fn steps_are_capped_and_very_long_delays_add_two_percent() {
    let p = params();
    let mut v = Vars::default();
    v.prob = MAX_PROB / 5;
    v.qdelay = 200 * MS / 64;
    v.qdelay_old = 0;
    update(&p, &mut v, 1_000_000);
    assert!((frac(v.prob) - 0.22).abs() < 1e-6, "{}", frac(v.prob));
    v.qdelay = 300 * MS / 64;
    v.qdelay_old = 300 * MS / 64;
    let before = frac(v.prob);
    update(&p, &mut v, 1_000_000);
    // alpha (unscaled above 10 %) × 285 ms = 3.6 %, capped at 2 %, then 2 % for the delay.
    let expect = before + 0.02 + 0.02;
    assert!(
        (frac(v.prob) - expect).abs() < 1e-5,
        "{} vs {expect}",
        frac(v.prob)
    );
}

/// With no delay twice in a row the probability decays by 1/64 per update; at zero with low
/// delays the measurement restarts (a fresh 150-ms burst allowance).
#[test]
fn no_delay_decays_the_probability_and_restarts() {
    let p = params();
    let mut v = Vars::default();
    v.prob = MAX_PROB / 100;
    v.burst_time = 0;
    update(&p, &mut v, 0);
    // The error term pulls down first (no delay is 15 ms under target, gain alpha/2), then
    // the 1/64 decay: (1 % − 0.0625 × 0.015) × 63/64.
    let after = frac(v.prob);
    let expect = (0.01 - 0.0625 * 0.015) * 63.0 / 64.0;
    assert!((after - expect).abs() < 1e-6, "{after} vs {expect}");
    let mut v = Vars::default();
    v.burst_time = 0;
    update(&p, &mut v, 0);
    assert_eq!(v.burst_time, BURST_TICKS, "restarted");
}

/// De-randomisation (RFC 8033 §5.1): no drop while the accumulated probability is under 0.85,
/// a certain drop from 8.5 on; none at all while the burst allowance lasts or the backlog is
/// under two MTUs.
#[test]
fn early_drop_is_derandomised_and_guarded() {
    let p = params();
    let mut rng = SplitMix64::new(1);
    let mut v = Vars::default();
    v.prob = MAX_PROB / 2;
    v.qdelay = 20 * MS / 64;
    assert!(
        !drop_early(&p, &mut v, 100_000, 1500, 1514, &mut rng),
        "burst allowance"
    );
    v.burst_time = 0;
    assert!(
        !drop_early(&p, &mut v, 3000, 1500, 1514, &mut rng),
        "under 2 MTUs"
    );
    v.accu_prob = 0;
    assert!(
        !drop_early(&p, &mut v, 100_000, 1500, 1514, &mut rng),
        "0.5 < 0.85"
    );
    v.accu_prob = (MAX_PROB / 2) * 17;
    assert!(
        drop_early(&p, &mut v, 100_000, 1500, 1514, &mut rng),
        "≥ 8.5"
    );
    // A probability of 0.5: the packet after a drop never drops (0.5 < 0.85), each one after
    // it drops with 0.5, so one packet in 1 + 1/0.5 = 3 is dropped (not one in two).
    let mut drops = 0;
    v.accu_prob = 0;
    for _ in 0..10_000 {
        if drop_early(&p, &mut v, 100_000, 1500, 1514, &mut rng) {
            drops += 1;
            v.accu_prob = 0;
        }
    }
    assert!((3100..3600).contains(&drops), "{drops}");
}

/// The lazy timer runs exactly the updates the kernel's timer would: the first 500 ms after the
/// first packet, then every tupdate; a long idle gap is skipped once nothing changes.
#[test]
fn lazy_updates_match_a_timer() {
    let p = params();
    let (mut a, mut b) = (Vars::default(), Vars::default());
    a.qdelay = 40 * MS / 64;
    b.qdelay = a.qdelay;
    let mut lazy = Updates::default();
    lazy.catch_up(&p, &mut a, 50_000, 0);
    lazy.catch_up(&p, &mut a, 50_000, 500 * MS + 15 * MS * 9);
    for _ in 0..10 {
        update(&p, &mut b, 50_000);
    }
    assert_eq!(a, b);
    assert_eq!(lazy.next(), Some(500 * MS + 15 * MS * 10));
    // An hour idle (the last dequeue emptied the queue, so no delay): the loop stops once the
    // state settles, and the schedule stays aligned.
    a.qdelay = 0;
    lazy.catch_up(&p, &mut a, 0, 3_600_000 * MS + 7);
    let next = lazy.next().unwrap_or(0);
    assert!(next > 3_600_000 * MS && (next - 500 * MS) % (15 * MS) == 0);
}

/// A 10 Mbit/s link offered 12 Mbit/s of unresponsive traffic: once the controller has
/// converged the queue delay sits near the 15-ms target, and every packet is sent, dropped or
/// queued.
#[test]
fn an_overloaded_link_settles_near_the_target() {
    let spec: QdiscSpec = "pie".parse().expect("valid");
    let mut q = spec.build::<crate::packet::Record>(crate::FlowHasher::new([1, 2]), 7);
    let (tx, arrive) = (1500 * 8 * 1000 / 10, 1500 * 8 * 1000 / 12); // ns per packet
    let (mut next_tx, mut next_in, mut id) = (0u64, 0u64, 0u64);
    let (mut sent, mut dropped, mut delays) = (0u64, 0u64, Vec::new());
    while next_tx < 20_000 * MS {
        if next_in <= next_tx {
            q.enqueue(pkt(id, 1500), next_in);
            id += 1;
            next_in += arrive;
        } else {
            if let Dequeue::Packet(p) = q.dequeue(next_tx) {
                sent += 1;
                if next_tx > 10_000 * MS {
                    delays.push(next_tx - p.meta.enqueue_ns);
                }
            }
            next_tx += tx;
        }
        while q.take_dropped().is_some() {
            dropped += 1;
        }
    }
    assert_eq!(id, sent + dropped + q.qlen() as u64);
    delays.sort_unstable();
    let median = delays[delays.len() / 2] as f64 / MS as f64;
    assert!((8.0..25.0).contains(&median), "median delay {median} ms");
    let loss = dropped as f64 / id as f64;
    assert!(
        (0.12..0.22).contains(&loss),
        "drop share {loss} (1/6 offered over)"
    );
}

/// With `ecn`, ECN-capable packets are marked instead of dropped while the probability is at
/// most 10 %, and dropped above it.
#[test]
fn ecn_marks_up_to_ten_percent() {
    let spec: PieSpec = match "pie ecn".parse::<QdiscSpec>() {
        Ok(QdiscSpec::Pie(s)) => s,
        other => panic!("{other:?}"),
    };
    let mut q = Pie::<crate::packet::Record>::new(&spec, 1);
    for i in 0..10 {
        q.enqueue(ect(pkt(i, 1500)), 0);
    }
    q.vars.burst_time = 0;
    q.vars.qdelay = 30 * MS / 64;
    q.vars.prob = MAX_PROB / 20;
    q.vars.accu_prob = (MAX_PROB / 2) * 17;
    q.updates.next = Some(u64::MAX);
    q.enqueue(ect(pkt(10, 1500)), 1);
    assert_eq!((q.qlen(), q.pie_stats().ecn_mark), (11, 1));
    q.vars.prob = MAX_PROB / 5;
    q.vars.accu_prob = (MAX_PROB / 2) * 17;
    q.enqueue(ect(pkt(11, 1500)), 2);
    assert_eq!((q.qlen(), q.pie_stats().dropped), (11, 1));
}

#[test]
fn words_parse_and_print_as_tc() {
    let s: QdiscSpec = "pie".parse().expect("valid");
    assert_eq!(
        s.to_string(),
        "pie limit 1000p target 15ms tupdate 15ms alpha 2 beta 20"
    );
    let s: QdiscSpec = "pie limit 0 alpha 0 target 1234us ecn dq_rate_estimator"
        .parse()
        .expect("valid");
    let QdiscSpec::Pie(p) = &s else {
        panic!("{s:?}")
    };
    assert_eq!(
        (p.limit, p.alpha),
        (1000, 2),
        "zero keeps the default, as tc"
    );
    assert_eq!(
        p.tc_options(),
        "limit 1000p target 1.23ms tupdate 15ms alpha 2 beta 20 ecn dq_rate_estimator"
    );
    assert_eq!(s.to_string().parse::<QdiscSpec>().ok(), Some(s.clone()));
    let e = "pie alpha 33".parse::<QdiscSpec>().expect_err("tc refuses");
    assert!(e.to_string().contains("33"), "{e}");
    let e = "pie flows 4"
        .parse::<QdiscSpec>()
        .expect_err("not a pie word");
    assert!(e.to_string().contains("dq_rate_estimator"), "{e}");
}

/// `tc -s` prints the probability with C's `%lg`.
#[test]
fn probability_prints_as_c_g() {
    use crate::qdisc::stats::fmt_g;
    assert_eq!(fmt_g(0.0), "0");
    assert_eq!(fmt_g(0.0123), "0.0123");
    assert_eq!(fmt_g(0.000025), "2.5e-05");
    assert_eq!(fmt_g(0.16666666), "0.166667");
    assert_eq!(fmt_g(1.0), "1");
}
