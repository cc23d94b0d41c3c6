//! The published experiments of part A on real kernel TCP through the gateway (experiments.md):
//! CAKE-HOSTS, FIFO-DEPTH with CUBIC and BBR, PI-55 and its drop band. Part of `tests/testbed.rs`
//! (one test binary); most are in the long tier.

use super::common::bed::*;
use super::common::text;
use debloat_gateway::testbed;
use std::process::Command;

/// docs/experiments.md Part A, gateway row CAKE-HOSTS, on real kernel TCP. Host A (198.18.1.2) runs
/// two CUBIC uploads and host B (198.18.1.3, a second address in the client namespace) one,
/// through a 20 Mbit/s uplink whose modem has a 1000-packet FIFO (the emulated link's
/// `buffer 1000`), base RTT 20 ms. Bands: fq_codel at the gateway without a shaper gives
/// A/B 1.6–2.4 and a ping at least 100 ms over idle (the queue sits in the modem); cake shaped to
/// 95 % (19 Mbit/s) with `dual-srchost` or `triple-isolate` gives A/B 0.85–1.18 and a ping within
/// 10 ms of idle. Pings from host A's address, 2–19 s into the load.
///
/// Load: 40 s for fq_codel, of which the sink counts the last 30 (`tcp-sink --omit 10`, as
/// iperf3's `--omit`): CUBIC flows sharing a 600 ms drop-tail FIFO leave slow start with shares
/// set by which flow the first overflows hit, and stay there for several seconds. Counted from
/// the start, the ratio measured 1.67–2.21 over 20 s in five runs, and 2.46 (out of band) once
/// in CI over 40 s; one run in eight here put host B's flow at 4.5 Mbit/s for its first 10 s
/// (A/B 2.48 counted from the start, 2.15 without those 10 s). Without the first 10 s, twelve
/// runs measured 1.87–2.15. The published figure (A 15 / B 7 Mbit/s) is a plateau read off a
/// plot. cake: 20 s counted from the start (fair from the first seconds).
///
/// Each upload goes to a server address of its own (198.18.2.2–4, all in the server namespace),
/// as the published uploads went to Internet servers: with one shared destination,
/// `triple-isolate` weighs each flow by the larger of its source's and its destination's flow
/// count (3 for all), which is per-flow fairness, A/B = 2 (measured 2.00 here, as Linux does).
#[test]
#[ignore = "long tier: scripts/long-tests.sh; dated results in docs/testing.md"]
fn part_a_cake_hosts_on_real_tcp() {
    let Some(_one) = guard() else { return };
    for (tag, spec, fair, secs, omit) in [
        ("h", "fq_codel", false, 40, 10),
        ("i", "cake bandwidth 19Mbit dual-srchost", true, 20, 0),
        ("j", "cake bandwidth 19Mbit triple-isolate", true, 20, 0),
    ] {
        let bed = up_extra(
            tag,
            "20Mbit",
            "20ms",
            spec,
            "fq_codel",
            &["--impair", "buffer 1000"],
        );
        let c = ns(&bed, "client");
        for (n, addr) in [
            (c.clone(), "198.18.1.3/24"),
            (ns(&bed, "server"), "198.18.2.3/24"),
            (ns(&bed, "server"), "198.18.2.4/24"),
        ] {
            let o = testbed::in_ns(&n, &["ip", "addr", "add", addr, "dev", "eth0"])
                .output()
                .expect("ip runs");
            assert!(o.status.success(), "{}", text(&o));
        }
        let idle = ping(&bed, testbed::SERVER_V4, 10);
        let omit_s = omit.to_string();
        let sink = |port: u16| spawn_sink(&bed, port, secs + 4, &["--omit", &omit_s]);
        let (sink_a, sink_b) = (sink(5201), sink(5202));
        std::thread::sleep(std::time::Duration::from_millis(300));
        let send = |to: &str, from: &str| {
            let mut cmd = tcp_send(&c, to, secs, "cubic", &["--bind", from]);
            std::thread::spawn(move || cmd.output().expect("sender runs"))
        };
        // Host A: two uploads; host B: one; each to a server address of its own.
        let senders = [
            send("198.18.2.2:5201", "198.18.1.2"),
            send("198.18.2.3:5201", "198.18.1.2"),
            send("198.18.2.4:5202", "198.18.1.3"),
        ];
        std::thread::sleep(std::time::Duration::from_secs(2));
        let loaded = ping(&bed, testbed::SERVER_V4, 85);
        for s in senders {
            let o = s.join().expect("sender thread");
            assert!(o.status.success(), "tcp-send: {}", text(&o));
        }
        let (ma, mb) = (sink_mbps(sink_a), sink_mbps(sink_b));
        let (idle50, p50) = (pct(&idle, 50.0), pct(&loaded, 50.0));
        let ratio = ma / mb;
        println!(
            "CAKE-HOSTS {spec}: host A (2 uploads) {ma:.2} Mbit/s, host B (1 upload) {mb:.2} Mbit/s, A/B {ratio:.2}; ping p50 {p50:.1} ms (idle {idle50:.1} ms)"
        );
        if fair {
            assert!((0.85..=1.18).contains(&ratio), "{spec}: A/B {ratio:.2}");
            assert!(
                p50 - idle50 <= 10.0,
                "{spec}: ping {p50:.1} ms, idle {idle50:.1} ms"
            );
        } else {
            assert!((1.6..=2.4).contains(&ratio), "{spec}: A/B {ratio:.2}");
            assert!(
                p50 - idle50 >= 100.0,
                "{spec}: ping {p50:.1} ms, idle {idle50:.1} ms"
            );
        }
    }
}

/// The egress discipline's counters from the gateway: (dropped % of offered, CE-marked % of sent).
fn egress_drops_and_marks(bed: &Bed) -> (f64, f64) {
    let o = Command::new(EXE)
        .args(["gateway", "stats", "--json", "--control"])
        .arg(testbed::control_socket(&bed.prefix))
        .output()
        .expect("stats");
    assert!(o.status.success(), "{}", text(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json stats");
    let st = &j["egress"]["stats"];
    let sent = st["packets"].as_f64().unwrap_or(0.0);
    let dropped = st["drops"].as_f64().unwrap_or(0.0);
    let marked = st["xstats"]["ecn_mark"].as_f64().unwrap_or(0.0);
    (
        dropped * 100.0 / (sent + dropped).max(1.0),
        marked * 100.0 / sent.max(1.0),
    )
}

/// docs/experiments.md Part A, gateway row FIFO-DEPTH, on real kernel TCP: tcp_nup over 20 Mbit/s
/// both ways, 48 ms. Bands as in the simulator: CUBIC through pfifo 1000 ping median ≥ 300 ms;
/// one BBR flow ≤ 60 ms in any qdisc; cake ≤ 52 ms. Deviation: 20 s of load instead of 60 (CI
/// time), pings from 2 s into the load; no band widened.
#[test]
#[ignore = "long tier: scripts/long-tests.sh; dated results in docs/testing.md"]
fn part_a_fifo_depth_on_real_tcp() {
    let Some(_one) = guard() else { return };
    let fifo = fifo_depth_bed("d");
    let l = load_n(&fifo, "cubic", 1);
    report("FIFO-DEPTH pfifo 1000, 1 × CUBIC", &l);
    assert!(
        l.p50 >= 300.0,
        "pfifo 1000, CUBIC: ping median {:.1} ms",
        l.p50
    );
    drop(fifo);
    let cake = up_with(
        "e",
        "20Mbit",
        "48ms",
        "cake bandwidth 20Mbit",
        "cake bandwidth 20Mbit",
    );
    for (cc, n) in [("cubic", 1), ("cubic", 2), ("bbr", 1)] {
        let l = load_n(&cake, cc, n);
        report(&format!("FIFO-DEPTH cake, {n} × {cc}"), &l);
        assert!(
            l.p50 <= 52.0,
            "cake, {n} × {cc}: ping median {:.1} ms",
            l.p50
        );
    }
}

/// docs/experiments.md Part A, gateway row PI-55, on real kernel TCP: 4 CUBIC uploads over 5.5 Mbit/s
/// with 0.5 Mbit/s for the ACKs, base RTT 0.3 ms. Bands: pfifo 1000 ping median ≥ 1.5 s;
/// fq_codel (limit 1001, as sqm-scripts) ping median ≤ 5 ms and goodput ≥ 85 % of 5.5 Mbit/s;
/// with ECN ≥ 70 % CE-marked and < 1 % dropped. The drop band without ECN is its own test below.
///
/// Deviations, stated: 20 s of load instead of 60. The ping band is applied to the delay the load
/// adds (median − idle ≤ 5 − 0.3 ms): the Pi's idle ping was 0.3 ms, while here the idle reply
/// already spends 1.6 ms serialising on the 0.5 Mbit/s reverse link (2.3 ms idle), which the
/// published idle figure did not include.
#[test]
#[ignore = "long tier: scripts/long-tests.sh; dated results in docs/testing.md"]
fn part_a_pi_55_on_real_tcp() {
    let Some(_one) = guard() else { return };
    let fifo = pi_55_bed("p", "pfifo limit 1000");
    let l = load_n(&fifo, "cubic", 4);
    report("PI-55 pfifo 1000, 4 × CUBIC", &l);
    assert!(l.p50 >= 1500.0, "pfifo 1000: ping median {:.1} ms", l.p50);
    drop(fifo);
    let fq = pi_55_bed("q", "fq_codel limit 1001 noecn");
    let l = load_n(&fq, "cubic", 4);
    let (drops, _) = egress_drops_and_marks(&fq);
    report("PI-55 fq_codel, 4 × CUBIC", &l);
    println!("PI-55 fq_codel: {drops:.1} % of offered packets dropped (published 19 %)");
    assert!(
        l.p50 - l.idle_p50 <= 5.0 - 0.3,
        "fq_codel: ping median {:.2} ms over idle {:.2} ms",
        l.p50,
        l.idle_p50
    );
    assert!(
        l.goodput_mbps >= 0.85 * 5.5,
        "fq_codel: goodput {:.2} Mbit/s",
        l.goodput_mbps
    );
    drop(fq);
    let ecn = pi_55_bed("r", "fq_codel limit 1001 ecn");
    let o = testbed::in_ns(
        &ns(&ecn, "client"),
        &["sysctl", "-qw", "net.ipv4.tcp_ecn=1"],
    )
    .output()
    .expect("sysctl");
    assert!(o.status.success(), "{}", text(&o));
    let l = load_n(&ecn, "cubic", 4);
    let (drops, marks) = egress_drops_and_marks(&ecn);
    report("PI-55 fq_codel ECN, 4 × CUBIC", &l);
    println!(
        "PI-55 fq_codel ECN: {marks:.1} % CE-marked, {drops:.2} % dropped (published 91 %, 0.01 %)"
    );
    assert!(marks >= 70.0, "ECN: {marks:.1} % marked");
    assert!(drops < 1.0, "ECN: {drops:.2} % dropped");
}

/// FIFO-DEPTH's BBR row on real kernel TCP: one BBR upload through pfifo 1000 keeps the ping
/// median ≤ 60 ms (published ≈ 49.5 ms with 2016's BBR). Measured 51.9–52.0 ms in three runs
/// (2026-11-23). It sat at the band's edge (53.7, 53.8, 63.6 ms) while `testbed tcp-sink` read
/// its sockets only every millisecond: BBR's bandwidth estimate then rose above the link's payload
/// rate (20.2 vs 19.1 Mbit/s in `ss -ti`) and inflight climbed to the 2×BDP cwnd — as we read
/// it, a receiver that has not read its data holds back ACKs that would shrink the window, and
/// the bunched ACKs inflate BBR's delivery-rate samples. The sink
/// now reads with a blocking thread per connection, as iperf3's receiver does (52.1–52.4 ms).
#[test]
#[ignore = "long tier: scripts/long-tests.sh; dated results in docs/testing.md"]
fn part_a_fifo_depth_bbr_on_real_tcp() {
    let Some(_one) = guard() else { return };
    let fifo = fifo_depth_bed("b");
    let l = load_n(&fifo, "bbr", 1);
    report("FIFO-DEPTH pfifo 1000, 1 × BBR", &l);
    assert!(
        l.p50 <= 60.0,
        "pfifo 1000, BBR: ping median {:.1} ms",
        l.p50
    );
}

/// PI-55's drop band on real kernel TCP: fq_codel without ECN drops 5–12 % of offered packets.
/// The band is this test's own measurement of Linux 6.18 (7.0–7.4 %, 2026-11-23), beside the
/// simulator's 8.1 %; the Pi's 2016 kernel dropped 19 % (not GSO super-packets: its counters
/// show maxpacket 1514). docs/experiments.md, PI-55, has the evidence. In the long tier since
/// 2026-11-29 (≈ 26 s of CI's 30 minutes); in CI the simulator's PI-55 row keeps the band.
#[test]
#[ignore = "long tier: scripts/long-tests.sh; dated results in docs/testing.md"]
fn part_a_pi_55_drop_band_on_real_tcp() {
    let Some(_one) = guard() else { return };
    let fq = pi_55_bed("t", "fq_codel limit 1001 noecn");
    let l = load_n(&fq, "cubic", 4);
    let (drops, _) = egress_drops_and_marks(&fq);
    report("PI-55 fq_codel no ECN, 4 × CUBIC", &l);
    println!("PI-55 fq_codel no ECN on real TCP: {drops:.2} % of offered dropped (band 5–12 %)");
    assert!(
        (5.0..=12.0).contains(&drops),
        "fq_codel: {drops:.1} % dropped"
    );
}

/// FIFO-DEPTH's link: 20 Mbit/s, 48 ms, pfifo 1000 both ways.
fn fifo_depth_bed(tag: &str) -> Bed {
    up_with(
        tag,
        "20Mbit",
        "48ms",
        "pfifo limit 1000",
        "pfifo limit 1000",
    )
}

fn pi_55_bed(tag: &str, spec: &str) -> Bed {
    up_with(tag, "500kbit/5500kbit", "300us", spec, spec)
}
