//! The hosts' own qdisc (`sim --host-qdisc fq`): TCP paced through sch_fq by departure times,
//! TCP Small Queues keeping each socket's share of it small, and every packet counted once.

use debloat_core::QdiscSpec;
use debloat_sim::scenario::{self, Config, QueueSummary, Summary, Test};
use debloat_sim::tcp::cc::Algorithm;

const MBIT: u64 = 1_000_000;
const MS: u64 = 1_000_000;

fn run(test: Test, rate: u64, qdisc: &str, cc: Algorithm, hosts: Option<&str>) -> Summary {
    let q: QdiscSpec = qdisc.parse().expect("spec");
    let mut c = Config::wired(test, (rate, rate), 40 * MS, (q.clone(), q), 1);
    c.length_s = 10.0;
    c.delay_s = 1.0;
    c.streams = 2;
    c.cc = cc;
    c.host_qdisc = hosts.map(|h| h.parse().expect("host spec"));
    scenario::simulate(&c, |_| {}).summary
}

fn total(s: &Summary) -> f64 {
    s.flows.iter().map(|f| f.throughput_mbps).sum()
}

fn queue<'a>(s: &'a Summary, name: &str) -> &'a QueueSummary {
    s.queues
        .iter()
        .find(|q| q.r#where == name)
        .unwrap_or_else(|| panic!("no queue {name}"))
}

/// In a FIFO of a tenth of the path's BDP (30 packets at 100 Mbit/s and 40 ms: BDP 345),
/// unpaced CUBIC loses bursts of its ACK-clocked flights and leaves the link half idle; paced by
/// fq it keeps the link busy. Measured 2026-11-27: 36.9 Mbit/s unpaced, 85.0 paced.
#[test]
fn pacing_through_fq_fills_a_shallow_buffer_that_bursts_overflow() {
    let plain = run(
        Test::Tcp1Up,
        100 * MBIT,
        "pfifo limit 30",
        Algorithm::Cubic,
        None,
    );
    let paced = run(
        Test::Tcp1Up,
        100 * MBIT,
        "pfifo limit 30",
        Algorithm::Cubic,
        Some("fq"),
    );
    let (a, b) = (total(&plain), total(&paced));
    assert!(b >= 1.5 * a, "paced {b:.1} Mbit/s, unpaced {a:.1}");
    assert!(plain.queues.iter().all(|q| !q.r#where.starts_with("hosts")));
    // Every packet the clients' fq let go reached the bottleneck: sent there or dropped there.
    let (hosts, link) = (queue(&paced, "hosts up"), queue(&paced, "bottleneck up"));
    assert_eq!(hosts.sent_pkts, link.sent_pkts + link.dropped);
    // TSQ keeps the flow far below fq's 100-packet flow limit: nothing dropped at the host.
    assert_eq!(hosts.dropped, 0);
    assert!(
        hosts.max_backlog_pkts <= 40,
        "{} packets in the host's fq",
        hosts.max_backlog_pkts
    );
    assert!(
        queue(&paced, "hosts down").sent_pkts > 0,
        "the ACKs pass the servers' fq"
    );
}

/// BBR paces itself without fq (Linux's internal pacing, 4.13+) and through fq's timestamps with
/// it: the same rate either way. Measured 2026-11-27: 18.77 and 18.78 Mbit/s for two flows.
#[test]
fn bbr_paced_by_fq_matches_bbr_pacing_itself() {
    let own = run(
        Test::TcpNUp,
        20 * MBIT,
        "pfifo limit 1000",
        Algorithm::Bbr,
        None,
    );
    let fq = run(
        Test::TcpNUp,
        20 * MBIT,
        "pfifo limit 1000",
        Algorithm::Bbr,
        Some("fq"),
    );
    let (a, b) = (total(&own), total(&fq));
    assert!((a - b).abs() / a < 0.03, "own {a:.2}, fq {b:.2} Mbit/s");
    assert!(a > 17.0, "{a}");
    let link = |s: &Summary| queue(s, "bottleneck up").sojourn_ms.p50;
    assert!(
        (link(&own) - link(&fq)).abs() < 20.0,
        "queue p50 {} vs {} ms",
        link(&own),
        link(&fq)
    );
    assert_eq!(queue(&fq, "hosts up").dropped, 0);
}

/// fq at the bottleneck too: forwarded packets reach it with no socket and no departure time
/// (the hosts' fq keeps them), so it schedules them by hash and paces nothing.
#[test]
fn the_bottleneck_fq_sees_forwarded_packets() {
    let s = run(Test::TcpNUp, 20 * MBIT, "fq", Algorithm::Cubic, Some("fq"));
    assert!(total(&s) > 18.0, "{}", total(&s));
    let link = queue(&s, "bottleneck up");
    assert!(
        link.dropped > 0,
        "fq's 100-packet flow limit is the bottleneck's buffer"
    );
    assert_eq!(
        queue(&s, "hosts up").sent_pkts,
        link.sent_pkts + link.dropped
    );
}
