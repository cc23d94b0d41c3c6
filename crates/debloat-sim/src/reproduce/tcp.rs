//! The TCP-dynamics experiments: PI-55, FIFO-DEPTH, SQW-20M and CAKE-HOSTS (docs/experiments.md
//! §2.1, §3.1, §2.4).

use super::{config, ping_p50, total, Band, Check, Outcome, MBIT, MS, SEC};
use crate::scenario::{self, throughput_between, Summary, Test};
use crate::tcp::cc::Algorithm;
use debloat_core::QdiscSpec;

/// PI-55: 4 CUBIC uploads over 5.5 Mbit/s (data direction), 0.5 Mbit/s reverse, base RTT
/// 0.3 ms, 60 s, as sqm-scripts "simple" (fq_codel limit 1001) or a 1000-packet FIFO.
///
/// The no-ECN drop band is today's kernel, not the paper's: the Pi's 2016 kernel dropped 19 % of
/// offered packets (23 % of sent), but Linux 6.18's TCP through `debloat gateway` on the same
/// link drops 7.0–7.4 % (`tests/testbed.rs`, `part_a_pi_55_drop_band_on_real_tcp`), and the
/// model 8.1 %. The band is 5–12 % for both (docs/experiments.md, PI-55). What was ruled out as
/// the cause of the 2016 figure: GSO super-packets (the published counters show maxpacket 1514
/// and 26 779 packets for 38.0 MB, 1418 B each, so the Pi's fq_codel saw single frames) and
/// today's loss recovery (with RACK and TLP turned off, `tcp_recovery=0`, `tcp_early_retrans=0`,
/// Linux 6.18 still drops 7.6–7.8 %, 15-s runs, 2026-11-23). The FIFO collapse (data
/// FIFO:fq_codel ≈ 1:1.8) is not reproduced either: it needs the spurious RTOs and
/// retransmissions queued behind 2 s of data that the 2016 stack showed; it is a note.
pub fn pi_55(seed: u64) -> Outcome {
    let run = |q: &str, ecn: bool| {
        let mut c = config(seed, Test::TcpNUp, 500_000, 5_500_000, 300_000, q);
        c.ecn = ecn;
        scenario::run(&c, |_| {})
    };
    let mut o = Outcome::new("PI-55");
    let fifo = run("pfifo limit 1000", false);
    let fq = run("fq_codel limit 1001 noecn", false);
    let ecn = run("fq_codel limit 1001 ecn", true);
    o.checks.push(Check::new(
        "pfifo 1000: ping median",
        ping_p50(&fifo),
        "ms",
        "2035 ms",
        Band::AtLeast { min: 1500.0 },
    ));
    o.checks.push(Check::new(
        "fq_codel: ping median",
        ping_p50(&fq),
        "ms",
        "1.75 ms",
        Band::AtMost { max: 5.0 },
    ));
    o.checks.push(Check::new(
        "fq_codel: goodput",
        total(&fq),
        "Mbit/s",
        "4.95 Mbit/s",
        Band::AtLeast { min: 0.85 * 5.5 },
    ));
    let (drops, _) = up_counts(&fq);
    o.checks.push(Check::new(
        "fq_codel, no ECN: dropped of offered",
        drops,
        "%",
        "19 % (23 % of sent)",
        Band::Within {
            min: 5.0,
            max: 12.0,
        },
    ));
    let (ecn_drops, ecn_marks) = up_counts(&ecn);
    o.checks.push(Check::new(
        "fq_codel, ECN: CE-marked of sent",
        ecn_marks,
        "%",
        "91 %",
        Band::AtLeast { min: 70.0 },
    ));
    o.checks.push(Check::new(
        "fq_codel, ECN: dropped of offered",
        ecn_drops,
        "%",
        "0.01 %",
        Band::Below { max: 1.0 },
    ));
    o.notes.push(
        "no-ECN drops: the band is Linux 6.18's TCP through debloat's testbed on this link \
         (7.0–7.4 %); the published 19 % is a 2016 kernel's and is not reproduced by today's \
         kernel either (not GSO: maxpacket 1514; not RACK/TLP: 7.6–7.8 % without them)"
            .to_string(),
    );
    o.notes.push(format!(
        "data delivered over 60 s, FIFO:fq_codel = 1:{:.2} (published ≈1:1.8). The model has SACK \
         recovery, lost-retransmission detection, RTO with backoff and ACKs sharing the 0.5 Mbit/s \
         reverse queue; it lacks GSO/TSO, TSQ, RACK/TLP and the spurious RTOs of the 2016 stack, \
         so the FIFO does not collapse here.",
        total(&fq) / total(&fifo)
    ));
    o
}

/// Drops as % of offered and CE marks as % of sent, in the data (up) direction.
fn up_counts(s: &Summary) -> (f64, f64) {
    let Some(up) = s.queues.first() else {
        return (f64::NAN, f64::NAN);
    };
    let offered = (up.sent_pkts + up.dropped) as f64;
    (
        up.dropped as f64 * 100.0 / offered,
        up.marked as f64 * 100.0 / up.sent_pkts as f64,
    )
}

/// FIFO-DEPTH: tcp_nup with 1 and 2 uploads, 20 Mbit/s both ways, base RTT 48 ms, CUBIC or
/// BBR, through pfifo 1000, pfifo 100, fq_codel and cake.
pub fn fifo_depth(seed: u64) -> Outcome {
    let run = |q: &str, n: u32, cc: Algorithm| {
        let mut c = config(seed, Test::TcpNUp, 20 * MBIT, 20 * MBIT, 48 * MS, q);
        c.streams = n;
        c.cc = cc;
        // The same 2016 runs as SQW-20M: BBR as first released (no ACK-aggregation head-room).
        c.bbr_ack_aggregation = false;
        scenario::run(&c, |_| {})
    };
    let mut o = Outcome::new("FIFO-DEPTH");
    for (n, published) in [(1, "411 ms"), (2, "559 ms")] {
        let s = run("pfifo limit 1000", n, Algorithm::Cubic);
        o.checks.push(Check::new(
            format!("pfifo 1000, {n} CUBIC: ping median"),
            ping_p50(&s),
            "ms",
            published,
            Band::AtLeast { min: 300.0 },
        ));
    }
    for (q, published) in [
        ("pfifo limit 1000", "49.5 ms"),
        ("pfifo limit 100", "49.4 ms"),
        ("fq_codel", "—"),
        ("cake bandwidth 20Mbit", "48.8 ms"),
    ] {
        let s = run(q, 1, Algorithm::Bbr);
        o.checks.push(Check::new(
            format!("{q}, 1 BBR: ping median"),
            ping_p50(&s),
            "ms",
            published,
            Band::AtMost { max: 60.0 },
        ));
    }
    for (n, cc, published) in [
        (1, Algorithm::Cubic, "48.7 ms"),
        (2, Algorithm::Cubic, "48.8 ms"),
        (2, Algorithm::Bbr, "48.7 ms"),
    ] {
        let s = run("cake bandwidth 20Mbit", n, cc);
        o.checks.push(Check::new(
            format!("cake, {n} {}: ping median", cc.name()),
            ping_p50(&s),
            "ms",
            published,
            Band::AtMost { max: 52.0 },
        ));
    }
    let two_bbr = run("pfifo limit 1000", 2, Algorithm::Bbr);
    o.notes.push(format!(
        "2 BBR flows in pfifo 1000 hold about one BDP: ping median {:.1} ms (published 99.5 ms)",
        ping_p50(&two_bbr)
    ));
    o
}

/// One SQW-20M run through `q`: the ping's median and each flow's throughput over 15–60 s, in
/// start order (BBR 1, CUBIC 2, BBR 4, CUBIC 3).
fn sqw_run(seed: u64, q: &str, ack_aggregation: bool, hosts: Option<QdiscSpec>) -> (f64, Vec<f64>) {
    let mut c = config(
        seed,
        Test::Tcp4UpSquarewave,
        20 * MBIT,
        20 * MBIT,
        48 * MS,
        q,
    );
    c.delay_s = 3.0;
    c.bbr_ack_aggregation = ack_aggregation;
    c.host_qdisc = hosts;
    let r = scenario::simulate(&c, |_| {});
    let t: Vec<f64> = (0..4)
        .map(|i| throughput_between(&r.world, i, 15 * SEC, 60 * SEC))
        .collect();
    (ping_p50(&r.summary), t)
}

/// SQW-20M: tcp_4up_squarewave with flent's -d 3 (BBR 1 at 0 s, CUBIC 2 at 3 s, BBR 4 at 9 s,
/// CUBIC 3 at 15 s, each for 60 s), 20 Mbit/s both ways, 48 ms. Measured with all four running
/// (15–60 s). The published runs (2016-09) had BBR as first released, without the
/// ACK-aggregation head-room Linux added in 5.1, so the checks run that BBR; today's BBR in the
/// two FIFOs is reported in the notes, beside what the real 6.1 kernel gave.
pub fn sqw_20m(seed: u64) -> Outcome {
    let run_hosts = |q: &str, ack_aggregation: bool, hosts: Option<QdiscSpec>| {
        sqw_run(seed, q, ack_aggregation, hosts)
    };
    let run_bbr = |q: &str, ack_aggregation: bool| run_hosts(q, ack_aggregation, None);
    let run = |q: &str| run_bbr(q, false);
    let mut o = Outcome::new("SQW-20M");
    let (ping, t) = run("cake bandwidth 20Mbit");
    for (i, (name, published)) in [
        ("BBR 1", "4.8"),
        ("CUBIC 2", "4.8"),
        ("BBR 4", "5.0"),
        ("CUBIC 3", "4.6"),
    ]
    .into_iter()
    .enumerate()
    {
        o.checks.push(Check::new(
            format!("cake: {name} throughput"),
            t[i],
            "Mbit/s",
            published,
            Band::Within { min: 4.0, max: 6.0 },
        ));
    }
    o.checks.push(Check::new(
        "cake: ping median",
        ping,
        "ms",
        "48.9 ms",
        Band::AtMost { max: 48.0 + 3.0 },
    ));
    let (ping, t) = run("pfifo limit 1000");
    o.checks.push(Check::new(
        "pfifo 1000: ping median",
        ping,
        "ms",
        "510 ms",
        Band::AtLeast { min: 400.0 },
    ));
    o.checks.push(Check::new(
        "pfifo 1000: CUBIC / BBR throughput",
        (t[1] + t[3]) / (t[0] + t[2]),
        "×",
        "10.0 / 9.5 = 1.05",
        Band::Above { min: 1.0 },
    ));
    let (_, t) = run("pfifo limit 100");
    o.checks.push(Check::new(
        "pfifo 100: BBR / CUBIC throughput",
        (t[0] + t[2]) / (t[1] + t[3]),
        "×",
        "14.8 / 4.1 = 3.6",
        Band::AtLeast { min: 2.0 },
    ));
    let (_, deep) = run_bbr("pfifo limit 1000", true);
    let (_, short) = run_bbr("pfifo limit 100", true);
    o.notes.push(format!(
        "with BBR as Linux has it since 5.1 (ACK-aggregation head-room): pfifo 1000 CUBIC / BBR {:.2} ×, pfifo 100 BBR / CUBIC {:.1} × (today's kernels: `debloat reproduce SQW-20M --kernel`)",
        (deep[1] + deep[3]) / (deep[0] + deep[2]),
        (short[0] + short[2]) / (short[1] + short[3]),
    ));
    // The published runs' hosts had sch_fq (2016's BBR needed it to pace), so CUBIC was paced
    // too; the checks above run unpaced hosts, as the lab's do.
    let fq = QdiscSpec::Fq(Default::default());
    let (_, paced) = run_hosts("pfifo limit 1000", false, Some(fq.clone()));
    let (_, paced_now) = run_hosts("pfifo limit 1000", true, Some(fq));
    o.notes.push(format!(
        "with sch_fq on the hosts (`--host-qdisc fq`: every flow paced, as on the published runs' hosts): pfifo 1000 CUBIC / BBR {:.2} ×, {:.2} × with today's BBR (the lab's: `debloat lab compare … --host-qdisc fq`, docs/kernel-lab-reproduce.md)",
        (paced[1] + paced[3]) / (paced[0] + paced[2]),
        (paced_now[1] + paced_now[3]) / (paced_now[0] + paced_now[2]),
    ));
    o
}

/// One CAKE-HOSTS run with `q` on the uplink: host A's and host B's goodput over 10–60 s,
/// Mbit/s, and the ping's median then, ms (the upper median of the samples).
fn cake_hosts_run(seed: u64, q: &str) -> (f64, f64, f64) {
    let toml = format!(
        r#"
length = 60
seed = {seed}
[link]
down = "100Mbit"
up = "20Mbit"
rtt = "20ms"
qdisc_up = "{q}"
qdisc_down = "fq_codel"
ring = 1000
[[flow]]
name = "A 1"
kind = "tcp"
client = "A"
[[flow]]
name = "A 2"
kind = "tcp"
client = "A"
start = 0.1
[[flow]]
name = "B 1"
kind = "tcp"
client = "B"
start = 0.2
[[flow]]
name = "ping"
kind = "ping"
"#
    );
    // Built-in scenario text: an error is a bug here, not input.
    let (_, r) = crate::scenario_file::run(&toml, |_| {})
        .unwrap_or_else(|e| panic!("CAKE-HOSTS scenario: {e}"));
    let t: Vec<f64> = (0..3)
        .map(|i| throughput_between(&r.world, i, 10 * SEC, 60 * SEC))
        .collect();
    let ping = r
        .world
        .probes
        .first()
        .map(|p| {
            let mut v: Vec<u64> = p
                .samples
                .iter()
                .filter(|(t, _)| *t >= 10 * SEC)
                .map(|(_, rtt)| *rtt)
                .collect();
            v.sort_unstable();
            v.get(v.len() / 2).map_or(f64::NAN, |x| *x as f64 / 1e6)
        })
        .unwrap_or(f64::NAN);
    (t[0] + t[1], t[2], ping)
}

/// CAKE-HOSTS: host A runs 2 uploads, host B 1, through a 20 Mbit/s uplink whose modem has a
/// 1000-packet FIFO; base RTT 20 ms (the post pinged several Internet hosts; no RTT given).
///
/// The modem's FIFO is modelled as a 1000-descriptor device ring (no BQL) below the gateway's
/// qdisc: what the gateway sends waits there at 20 Mbit/s, invisible to its AQM. (In the real
/// network the modem tail-drops and the router's queue stays empty; here, once the ring is
/// full, the excess waits in the gateway's qdisc and its AQM drops it. The delay and the
/// shares are the FIFO's either way.)
pub fn cake_hosts(seed: u64) -> Outcome {
    let run = |q: &str| cake_hosts_run(seed, q);
    let mut o = Outcome::new("CAKE-HOSTS");
    let (a, b, ping) = run("fq_codel");
    o.checks.push(Check::new(
        "fq_codel, no shaper: host A / host B",
        a / b,
        "×",
        "15 / 7 = 2.1",
        Band::Within { min: 1.6, max: 2.4 },
    ));
    o.checks.push(Check::new(
        "fq_codel, no shaper: ping median − base",
        ping - 20.0,
        "ms",
        "≈350 ms",
        Band::AtLeast { min: 100.0 },
    ));
    o.notes.push(format!(
        "fq_codel, no shaper: A {a:.2} Mbit/s, B {b:.2} Mbit/s (published 15 and 7)"
    ));
    for mode in ["dual-srchost", "triple-isolate"] {
        let (a, b, ping) = run(&format!("cake bandwidth 19Mbit {mode}"));
        o.checks.push(Check::new(
            format!("cake 95 % {mode}: host A / host B"),
            a / b,
            "×",
            "9 / 9 = 1.0",
            Band::Within {
                min: 0.85,
                max: 1.18,
            },
        ));
        o.checks.push(Check::new(
            format!("cake 95 % {mode}: ping median − base"),
            ping - 20.0,
            "ms",
            "≈0 ms",
            Band::AtMost { max: 10.0 },
        ));
        o.notes.push(format!(
            "cake {mode}: A {a:.2} Mbit/s, B {b:.2} Mbit/s (published ≈9 and ≈9)"
        ));
    }
    o
}
