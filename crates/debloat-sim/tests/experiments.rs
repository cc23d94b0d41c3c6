//! TCP and device sanity checks, rrul, RTT fairness, the wire model and determinism. The Part A
//! rows themselves (PI-55, FIFO-DEPTH, SQW-20M, CAKE-HOSTS, RRUL-110-10, ACK-FILTER, BQL, HASH)
//! are in `tests/reproduce.rs`, through the same code as `debloat reproduce`. The wire model,
//! the square-wave shares and `--cc` in turn are in `experiments/wire_and_turns.rs` (one test
//! binary).

use debloat_core::QdiscSpec;
use debloat_sim::scenario::{Config, Summary, Test};
use debloat_sim::tcp::cc::Algorithm;
use debloat_sim::wire::Wire;

#[path = "experiments/wire_and_turns.rs"]
mod wire_and_turns;

#[allow(clippy::too_many_arguments)]
fn cfg(
    test: Test,
    down: u64,
    up: u64,
    rtt_ns: u64,
    qdisc: &str,
    length: f64,
    streams: u32,
    ecn: bool,
) -> Config {
    let q: QdiscSpec = qdisc.parse().expect("spec");
    Config {
        test,
        down_bps: down,
        up_bps: up,
        rtt_ns,
        qdisc_up: q.clone(),
        qdisc_down: q,
        length_s: length,
        delay_s: 5.0,
        step_s: 0.2,
        streams,
        cc: Algorithm::Cubic,
        cc_turns: Vec::new(),
        ecn,
        host_qdisc: None,
        seed: 1,
        device: Default::default(),
        wire: Default::default(),
        wire_down: None,
        tcp_window: None,
        bbr_ack_aggregation: true,
        host_rtts_ns: Vec::new(),
        adaptive: Default::default(),
        classify: None,
        wifi: None,
    }
}

fn ping_p50(s: &Summary) -> f64 {
    s.pings[0].latency_ms.as_ref().expect("ping samples").p50
}

fn total(s: &Summary) -> f64 {
    s.flows.iter().map(|f| f.throughput_mbps).sum()
}

#[test]
fn same_seed_same_output_byte_for_byte() {
    let c = cfg(
        Test::TcpNUp,
        20_000_000,
        5_000_000,
        20_000_000,
        "cake bandwidth 4Mbit",
        10.0,
        3,
        true,
    );
    let a = debloat_sim::simulate(&c, |_| {});
    let b = debloat_sim::simulate(&c, |_| {});
    let fa = debloat_sim::flent::gzip(&debloat_sim::flent::data_file(
        &a.world,
        &c,
        debloat_sim::flent::DEFAULT_EPOCH,
        "x",
    ))
    .expect("gzip");
    let fb = debloat_sim::flent::gzip(&debloat_sim::flent::data_file(
        &b.world,
        &c,
        debloat_sim::flent::DEFAULT_EPOCH,
        "x",
    ))
    .expect("gzip");
    assert_eq!(fa, fb, "flent files differ");
    assert_eq!(
        serde_json::to_string(&a.summary).ok(),
        serde_json::to_string(&b.summary).ok()
    );
    let mut c2 = c.clone();
    c2.seed = 2;
    let d = debloat_sim::simulate(&c2, |_| {});
    assert!(total(&d.summary) > 0.0);
}

#[test]
fn one_cubic_flow_fills_an_uncongested_100_mbit_path_within_2_s() {
    let s = debloat_sim::run(
        &cfg(
            Test::Tcp1Up,
            100_000_000,
            100_000_000,
            20_000_000,
            "pfifo limit 10000",
            10.0,
            1,
            false,
        ),
        |_| {},
    );
    let series = &s.series[0];
    // Samples are per 0.2 s step from t = 0; the flow starts at 5 s (step 25).
    let first = series
        .iter()
        .enumerate()
        .skip(25)
        .find(|(_, &v)| v >= 90.0)
        .map(|(i, _)| i);
    let at = first
        .map(|i| (i + 1) as f64 * 0.2 - 5.0)
        .expect("reaches 90 Mbit/s");
    assert!(at < 2.0, "90 % utilisation after {at:.1} s");
    assert!(
        s.flows[0].throughput_mbps > 90.0,
        "average {:.1}",
        s.flows[0].throughput_mbps
    );
}

/// A window cap (receive window or send buffer) limits a flow to window / RTT when the path
/// could carry more: 1 MiB over 100 ms is 1 MiB × 8 / 0.1 s ≈ 83.9 Mbit/s of payload, on a
/// 1 Gbit/s path that an uncapped flow fills.
#[test]
fn a_window_cap_limits_a_flow_to_window_over_rtt() {
    let mut c = cfg(
        Test::Tcp1Up,
        1_000_000_000,
        1_000_000_000,
        100_000_000,
        "pfifo limit 10000",
        10.0,
        1,
        false,
    );
    c.tcp_window = Some(1 << 20);
    let capped = debloat_sim::run(&c, |_| {});
    let segs = (1u64 << 20) / u64::from(debloat_sim::packet::MSS);
    let expect = segs as f64 * f64::from(debloat_sim::packet::MSS) * 8.0 / 0.1 / 1e6;
    // Samples every 0.2 s, load from 5 to 15 s (the sample at index 74 is after the stop):
    // its last 5 s, when slow start is long over.
    let tail: Vec<f64> = capped.series[0][50..74].to_vec();
    let mean = tail.iter().sum::<f64>() / tail.len() as f64;
    assert!(
        (mean - expect).abs() < 0.01 * expect,
        "capped flow {mean:.1} Mbit/s, window/RTT {expect:.1}"
    );
    eprintln!(
        "window 1 MiB at 100 ms: {mean:.1} Mbit/s (window/RTT {expect:.1}), {} retransmits",
        capped.flows[0].retransmits
    );
    assert_eq!(
        capped.flows[0].retransmits, 0,
        "nothing queued, nothing lost"
    );
    c.tcp_window = None;
    let free = debloat_sim::run(&c, |_| {});
    eprintln!("uncapped: {:.1} Mbit/s", free.flows[0].throughput_mbps);
    assert!(
        free.flows[0].throughput_mbps > 5.0 * capped.flows[0].throughput_mbps,
        "uncapped {:.0} vs capped {:.0} Mbit/s",
        free.flows[0].throughput_mbps,
        capped.flows[0].throughput_mbps
    );
}

#[test]
fn a_flow_through_a_fifo_saws_and_fills_the_queue() {
    // A 1000-packet FIFO (the Linux default) at 20 Mbit/s, 48 ms, as FIFO-DEPTH: CUBIC fills it,
    // loses, backs off by 30 %, and climbs again, over and over.
    let r = debloat_sim::simulate(
        &cfg(
            Test::Tcp1Up,
            20_000_000,
            20_000_000,
            48_000_000,
            "pfifo limit 1000",
            120.0,
            1,
            false,
        ),
        |_| {},
    );
    let f = &r.world.flows[0];
    assert!(
        f.sender.loss_events >= 5,
        "{} window reductions",
        f.sender.loss_events
    );
    // Sawtooth: the window repeatedly falls back by CUBIC's 30 % (samples every 0.2 s).
    let w: Vec<f64> = f.cwnd_series[30..].to_vec();
    let falls = w.windows(2).filter(|x| x[1] < x[0] * 0.8).count();
    let peak = w.iter().cloned().fold(0.0, f64::max);
    assert!(falls >= 5, "{falls} drops in the cwnd series");
    // The window reaches the BDP (≈80 packets) plus most of the FIFO before each fall.
    assert!(peak > 80.0 + 800.0, "peak cwnd {peak}");
    assert_eq!(r.summary.queues[0].max_backlog_pkts, 1000, "the FIFO fills");
}

#[test]
fn with_ecn_and_fq_codel_a_flow_sees_marks_and_no_drops() {
    let s = debloat_sim::run(
        &cfg(
            Test::Tcp1Up,
            10_000_000,
            10_000_000,
            40_000_000,
            "fq_codel",
            30.0,
            1,
            true,
        ),
        |_| {},
    );
    assert!(
        s.flows[0].ce_marked > 10,
        "{} CE marks",
        s.flows[0].ce_marked
    );
    assert_eq!(s.queues[0].dropped, 0);
    assert!(s.flows[0].throughput_mbps > 9.0);
}

/// rrul on a cable-like 20/2 Mbit/s link, 20 ms: a FIFO puts seconds of delay on every probe and
/// starves the downloads of ACK capacity; fq_codel keeps every probe within a few ms of idle at
/// full utilisation.
#[test]
fn rrul_fifo_versus_fq_codel() {
    let run = |q: &str| {
        debloat_sim::run(
            &cfg(
                Test::Rrul,
                20_000_000,
                2_000_000,
                20_000_000,
                q,
                30.0,
                0,
                false,
            ),
            |_| {},
        )
    };
    let fifo = run("pfifo limit 1000");
    let fq = run("fq_codel");
    assert_eq!(fq.flows.len(), 8);
    assert_eq!(
        fq.pings.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
        vec![
            "Ping (ms) ICMP",
            "Ping (ms) UDP EF",
            "Ping (ms) UDP BK",
            "Ping (ms) UDP BE"
        ]
    );
    for (f, q) in fifo.pings.iter().zip(&fq.pings) {
        let (lf, lq) = (
            f.latency_ms.as_ref().expect("samples").p50,
            q.latency_ms.as_ref().expect("samples").p50,
        );
        assert!(lf > 1000.0, "{}: FIFO median {lf:.0} ms", f.name);
        assert!(lq < 30.0, "{}: fq_codel median {lq:.1} ms", q.name);
    }
    assert!(
        total(&fq) > 0.95 * 22.0 * 0.9,
        "fq_codel total {:.2} Mbit/s",
        total(&fq)
    );
    assert!(
        total(&fq) > 3.0 * total(&fifo),
        "FIFO {:.2} vs fq_codel {:.2} Mbit/s",
        total(&fifo),
        total(&fq)
    );
}

/// BBR keeps a FIFO's queue near its BDP rather than filling it (issue 3's TCP sanity check).
#[test]
fn bbr_keeps_the_fifo_near_one_bdp_rather_than_full() {
    let mut c = cfg(
        Test::TcpNUp,
        20_000_000,
        20_000_000,
        48_000_000,
        "pfifo limit 1000",
        30.0,
        2,
        false,
    );
    c.cc = Algorithm::Bbr;
    let s = debloat_sim::run(&c, |_| {});
    // BDP at 20 Mbit/s × 48 ms ≈ 79 packets; the FIFO holds 1000.
    let q = &s.queues[0];
    assert!(
        q.max_backlog_pkts < 300,
        "max backlog {} packets",
        q.max_backlog_pkts
    );
    assert!(
        q.sojourn_ms.p50 < 70.0,
        "median sojourn {:.1} ms",
        q.sojourn_ms.p50
    );
    c.cc = Algorithm::Cubic;
    let cubic = debloat_sim::run(&c, |_| {});
    assert_eq!(cubic.queues[0].max_backlog_pkts, 1000, "CUBIC fills it");
}

/// Linux's BBR (since 5.1) adds the recent ACK aggregation to its window; in a deep FIFO shared
/// with CUBIC that head-room is queue BBR keeps. flent's tcp_4up_squarewave (BBR, CUBIC, BBR,
/// CUBIC) through a 1000-packet FIFO: CUBIC's share over BBR's falls when it is on.
#[test]
fn bbr_ack_aggregation_head_room_keeps_more_of_a_deep_fifo() {
    let mut c = cfg(
        Test::Tcp4UpSquarewave,
        20_000_000,
        20_000_000,
        48_000_000,
        "pfifo limit 1000",
        60.0,
        0,
        false,
    );
    c.delay_s = 3.0;
    let cubic_over_bbr = |c: &Config| {
        let s = debloat_sim::run(c, |_| {});
        let t: Vec<f64> = s.flows.iter().map(|f| f.throughput_mbps).collect();
        // In start order: BBR 1, CUBIC 2, BBR 4, CUBIC 3.
        (t[1] + t[3]) / (t[0] + t[2])
    };
    let today = cubic_over_bbr(&c);
    c.bbr_ack_aggregation = false;
    let first_release = cubic_over_bbr(&c);
    eprintln!("CUBIC / BBR: {today:.3} with the head-room, {first_release:.3} without");
    assert!(
        today < first_release - 0.05,
        "CUBIC / BBR with the head-room {today:.3}, without {first_release:.3}"
    );
}

/// The device model: a 256-descriptor TX ring below fq_codel holds 256 packets (≈155 ms at
/// 20 Mbit/s) that no AQM can see; BQL limits the ring to what the device needs and gives the
/// latency back without losing throughput. With completions every 1 ms, the limit settles near
/// the bytes completed per interrupt (2500 B at 20 Mbit/s).
#[test]
fn bql_takes_the_ring_out_of_the_queueing_delay() {
    use debloat_sim::world::{DeviceConfig, Dir};
    let run = |device: DeviceConfig| {
        let mut c = cfg(
            Test::TcpNUp,
            20_000_000,
            20_000_000,
            20_000_000,
            "fq_codel",
            20.0,
            2,
            false,
        );
        c.device = device;
        debloat_sim::simulate(&c, |_| {})
    };
    let ring = run(DeviceConfig {
        ring: 256,
        bql: None,
        coalesce_ns: 0,
    });
    let bql = run(DeviceConfig {
        ring: 256,
        bql: Some(Default::default()),
        coalesce_ns: 1_000_000,
    });
    assert!(
        ping_p50(&ring.summary) > 120.0,
        "ring without BQL: ping {:.1} ms",
        ping_p50(&ring.summary)
    );
    assert!(
        ping_p50(&bql.summary) < 25.0,
        "ring with BQL: ping {:.1} ms",
        ping_p50(&bql.summary)
    );
    assert!(
        total(&bql.summary) > 0.98 * total(&ring.summary),
        "BQL keeps throughput: {:.2} vs {:.2}",
        total(&bql.summary),
        total(&ring.summary)
    );
    let limit = f64::from(bql.world.bql_limit(Dir::Up).expect("BQL on"));
    assert!(
        (2500.0..=2.0 * 2500.0 + 1514.0).contains(&limit),
        "BQL limit {limit} bytes"
    );
}

/// rtt_fair_var_up with hosts at 10 ms and 100 ms: a shared FIFO favours the short-RTT flow and
/// adds its queue to both hosts' RTTs; fq_codel shares fairly and keeps each host's RTT near its
/// base.
#[test]
fn rtt_fairness_with_two_hosts() {
    let run = |q: &str| {
        let mut c = cfg(
            Test::RttFairVarUp,
            20_000_000,
            20_000_000,
            10_000_000,
            q,
            30.0,
            0,
            false,
        );
        c.host_rtts_ns = vec![10_000_000, 100_000_000];
        debloat_sim::run(&c, |_| {})
    };
    let fifo = run("pfifo limit 1000");
    let fq = run("fq_codel");
    assert_eq!(
        fq.flows.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(),
        vec!["TCP upload BE 198.18.2.11", "TCP upload BE 198.18.2.12"]
    );
    assert!(
        fifo.flows[0].throughput_mbps > 1.5 * fifo.flows[1].throughput_mbps,
        "FIFO favours the short RTT: {:.2} vs {:.2}",
        fifo.flows[0].throughput_mbps,
        fifo.flows[1].throughput_mbps
    );
    assert!(
        fq.jain_fairness.unwrap_or(0.0) > 0.97,
        "fq_codel fairness {:?}",
        fq.jain_fairness
    );
    assert!(fq.jain_fairness > fifo.jain_fairness);
    for (p, base) in fq.pings.iter().zip([10.0, 100.0]) {
        let l = p.latency_ms.as_ref().expect("samples").p50;
        assert!(l < base + 2.0, "{}: {l:.1} ms", p.name);
    }
}
