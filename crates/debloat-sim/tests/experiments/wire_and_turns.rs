//! The wire model (ATM framing, loss, jitter), tcp_2up_square's shares, and `--cc` taking its
//! algorithms in turn. Part of `tests/experiments.rs` (one test binary).

use super::*;

/// The wire: ATM framing costs what ADSL costs (a 1500 B packet takes 32 cells = 1696 B with
/// pppoe-vcmux), random loss loses about the share asked for, and jitter spreads delay without
/// losing or reordering anything.
#[test]
fn wire_framing_loss_and_jitter() {
    use debloat_core::qdisc::cake::overhead::{AtmMode, Overhead};
    let mut c = cfg(
        Test::Tcp1Up,
        8_000_000,
        1_000_000,
        30_000_000,
        "fq_codel",
        30.0,
        0,
        false,
    );
    c.wire.framing = Overhead {
        strip_l2: true,
        overhead: 32,
        mpu: 0,
        atm: AtmMode::Atm,
    };
    let atm = debloat_sim::run(&c, |_| {});
    let expect = 1448.0 / 1696.0;
    assert!(
        (atm.flows[0].throughput_mbps - expect).abs() / expect < 0.05,
        "ATM goodput {:.3} vs {expect:.3} Mbit/s",
        atm.flows[0].throughput_mbps
    );

    let mut c = cfg(
        Test::Tcp1Up,
        20_000_000,
        20_000_000,
        30_000_000,
        "fq_codel",
        30.0,
        0,
        false,
    );
    c.wire.impair = Wire::loss_and_jitter(0.01, 0);
    let lossy = debloat_sim::run(&c, |_| {});
    let up = &lossy.queues[0];
    let share = up.lost_on_wire as f64 / up.sent_pkts as f64;
    assert!(
        (0.007..=0.013).contains(&share),
        "lost {share:.4} of packets on the wire"
    );
    // The up wire also carries the ping's requests, which nobody repairs: every other loss
    // there is a segment the flow sent again.
    let pings_lost = lossy.pings[0].lost;
    assert!(
        lossy.flows[0].retransmits + pings_lost >= up.lost_on_wire,
        "every lost segment is repaired: {} retransmits, {} lost on the wire of which at most \
         {pings_lost} pings",
        lossy.flows[0].retransmits,
        up.lost_on_wire
    );

    let mut c = cfg(
        Test::Ping,
        20_000_000,
        20_000_000,
        20_000_000,
        "pfifo",
        30.0,
        0,
        false,
    );
    c.wire.impair = Wire::loss_and_jitter(0.0, 10_000_000);
    let j = debloat_sim::run(&c, |_| {});
    let l = j.pings[0].latency_ms.as_ref().expect("samples");
    assert!(
        l.p99 - l.p50 > 3.0 && l.p99 <= 20.2 + 2.0 * 10.0,
        "jitter spread p50 {:.1} p99 {:.1}",
        l.p50,
        l.p99
    );
    assert_eq!(j.pings[0].loss_pct, 0.0);
    let again = debloat_sim::run(&c, |_| {});
    assert_eq!(
        again.pings[0].latency_ms.as_ref().map(|l| l.p99),
        Some(l.p99),
        "seeded: same jitter every run"
    );
}

/// tcp_2up_square: a long CUBIC flow and a competitor switched on for DELAY and off for DELAY,
/// three times (CUBIC, Reno, Westwood+). Under fq_codel each competitor gets about half the link
/// while it runs, and the long flow gets it back when it stops.
#[test]
fn tcp_2up_square_shares_and_recovers() {
    let s = debloat_sim::simulate(
        &cfg(
            Test::Tcp2UpSquare,
            20_000_000,
            20_000_000,
            48_000_000,
            "fq_codel",
            60.0,
            0,
            false,
        ),
        |_| {},
    );
    let names: Vec<&str> = s.summary.flows.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        vec!["TCP cubic", "TCP cubic 2", "TCP reno", "TCP westwood"]
    );
    for f in &s.summary.flows[1..] {
        assert!(
            (7.0..=11.0).contains(&f.throughput_mbps),
            "{}: {:.2} Mbit/s while on",
            f.name,
            f.throughput_mbps
        );
    }
    // A transfer that stops with data outstanding does not keep timing out afterwards.
    assert_eq!(
        s.summary.flows[3].timeouts, 0,
        "westwood's timer after it stopped"
    );
    let sec = 1_000_000_000;
    let alone = debloat_sim::scenario::throughput_between(&s.world, 0, 35 * sec, 55 * sec);
    // Baseline: what one CUBIC flow alone gets through fq_codel on this path.
    let solo = debloat_sim::run(
        &cfg(
            Test::Tcp1Up,
            20_000_000,
            20_000_000,
            48_000_000,
            "fq_codel",
            60.0,
            0,
            false,
        ),
        |_| {},
    );
    let base = solo.flows[0].throughput_mbps;
    assert!(
        alone >= 0.97 * base,
        "the long flow alone again: {alone:.2} Mbit/s vs {base:.2} for a lone flow"
    );
}

/// `--cc bbr,cubic`: the TCP flows take the list in turn, in the test's order; a test that names
/// its flows' own (the square wave) keeps them.
#[test]
fn a_cc_list_is_taken_in_turn() {
    let mut c = cfg(
        Test::TcpNUp,
        20_000_000,
        20_000_000,
        20_000_000,
        "fq_codel",
        5.0,
        4,
        false,
    );
    c.delay_s = 1.0;
    c.cc_turns = vec![Algorithm::Bbr, Algorithm::Cubic];
    let in_turn = [
        Algorithm::Bbr,
        Algorithm::Cubic,
        Algorithm::Bbr,
        Algorithm::Cubic,
    ]
    .map(Some);
    let ccs = |c: &debloat_sim::scenario::Config| -> Vec<Option<Algorithm>> {
        debloat_sim::run(c, |_| {})
            .flows
            .iter()
            .map(|f| f.cc)
            .collect()
    };
    assert_eq!(ccs(&c), in_turn);
    let mut sq = cfg(
        Test::Tcp4UpSquarewave,
        20_000_000,
        20_000_000,
        20_000_000,
        "fq_codel",
        20.0,
        4,
        false,
    );
    sq.delay_s = 1.0;
    sq.cc_turns = vec![Algorithm::Reno, Algorithm::Westwood];
    assert_eq!(ccs(&sq), in_turn, "the square wave keeps its own");
}
