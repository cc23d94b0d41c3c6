//! L4S beside classic traffic (`sim l4s_mixed`: a CUBIC and a Prague upload, a Not-ECT and an
//! ECT(1) ping) through DualPI2, fq_codel with a 1-ms CE threshold and cake, at 100 Mbit/s and
//! 20 ms (issue 44's acceptance).

use debloat_core::QdiscSpec;
use debloat_sim::scenario::{self, Config, Summary, Test};

const MBIT: u64 = 1_000_000;
const MS: u64 = 1_000_000;

fn run(qdisc: &str) -> Summary {
    let q: QdiscSpec = qdisc.parse().expect("spec");
    let mut c = Config::wired(
        Test::L4sMixed,
        (100 * MBIT, 100 * MBIT),
        20 * MS,
        (q.clone(), q),
        1,
    );
    c.length_s = 20.0;
    c.delay_s = 2.0;
    scenario::simulate(&c, |_| {}).summary
}

struct Seen {
    /// Under load minus idle, ms: the classic ping's median, the L4S ping's 99th percentile.
    classic_p50: f64,
    l4s_p99: f64,
    /// Prague's goodput over CUBIC's.
    ratio: f64,
    prague_ce: u64,
    prague_retrans: u64,
}

fn seen(s: &Summary) -> Seen {
    let ping = |name: &str| {
        let p = s.pings.iter().find(|p| p.name == name).expect(name);
        let idle = p.idle_latency_ms.as_ref().expect("idle").p50;
        let load = p.latency_ms.as_ref().expect("load");
        (load.p50 - idle, load.p99 - idle)
    };
    let flow = |name: &str| s.flows.iter().find(|f| f.name == name).expect(name);
    let (cubic, prague) = (flow("TCP upload CUBIC"), flow("TCP upload Prague"));
    Seen {
        classic_p50: ping("Ping (ms) ICMP").0,
        l4s_p99: ping("Ping (ms) UDP L4S").1,
        ratio: prague.throughput_mbps / cubic.throughput_mbps,
        prague_ce: prague.ce_marked,
        prague_retrans: prague.retransmits,
    }
}

/// DualPI2 keeps the L4S queue under 2 ms at the 99th percentile, holds the classic queue near
/// its 15-ms target, and couples the two so neither flow gets more than twice the other.
/// Measured 2026-11-27: L4S +0.3 ms p99, classic +14.7 ms p50, Prague / CUBIC 1.54.
#[test]
fn dualpi2_separates_the_queues_and_couples_the_rates() {
    let s = seen(&run("dualpi2"));
    assert!(s.l4s_p99 <= 2.0, "L4S ping p99 +{} ms", s.l4s_p99);
    assert!(
        (10.0..=20.0).contains(&s.classic_p50),
        "classic ping p50 +{} ms (target 15)",
        s.classic_p50
    );
    assert!((0.5..=2.0).contains(&s.ratio), "Prague / CUBIC {}", s.ratio);
    assert!(s.prague_ce > 0, "Prague saw marks");
    assert_eq!(s.prague_retrans, 0, "L4S: marks, no losses");
}

/// fq_codel's 1-ms CE threshold and cake isolate the flows instead: both pings stay near the
/// base RTT and the rates are even. Measured 2026-11-27: ratios 0.94 and 1.04.
#[test]
fn fq_codel_ce_threshold_and_cake_isolate_instead() {
    for q in ["fq_codel ce_threshold 1ms", "cake bandwidth 100Mbit"] {
        let s = seen(&run(q));
        assert!(s.l4s_p99 <= 2.0, "{q}: L4S ping p99 +{} ms", s.l4s_p99);
        assert!(
            s.classic_p50 <= 2.0,
            "{q}: classic ping p50 +{} ms",
            s.classic_p50
        );
        assert!(
            (0.8..=1.25).contains(&s.ratio),
            "{q}: Prague / CUBIC {}",
            s.ratio
        );
        assert!(s.prague_ce > 0, "{q}: Prague saw marks");
    }
}
