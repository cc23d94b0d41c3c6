//! Issue 28 on real kernel TCP (root only; SKIP without it, a failure under CI): the gateway's
//! shaper-rate controllers against cake at a fixed rate, on the Verizon LTE uplink trace as the
//! gateway's emulated link, in one test so the three runs meet the same machine.

mod common;
use common::bed::*;
use common::text;
use debloat_gateway::testbed;
use std::process::Command;

const EXE: &str = env!("CARGO_BIN_EXE_debloat");

/// A namespace of our own, removed when dropped (also when the test fails).
struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = testbed::sh(&["ip", "netns", "del", &self.0]);
    }
}

/// The reflector pinger opened inside a namespace (`--ping-netns`), with both kinds of ICMP
/// socket: where the namespace allows ping sockets (`net.ipv4.ping_group_range`, per namespace)
/// it uses them, elsewhere raw ones; either way every stream's echoes come back from the
/// namespace's own loopback (IPv4 and IPv6) and the namespace is left as it was.
#[test]
fn reflector_pings_from_a_namespace_with_either_kind_of_socket() {
    use debloat_gateway::pinger::{Pinger, PingerConfig};
    use std::time::{Duration, Instant};
    let Some(_one) = guard() else { return };
    for (tag, allow, kind) in [("dg", true, "datagram"), ("rw", false, "raw")] {
        let ns = Netns(format!("dbp{}{tag}", std::process::id() % 100_000));
        testbed::sh(&["ip", "netns", "add", &ns.0]).expect("netns");
        testbed::sh(&["ip", "-n", &ns.0, "link", "set", "lo", "up"]).expect("lo up");
        let range = if allow { "0 2147483647" } else { "1 0" };
        let set = format!("echo '{range}' > /proc/sys/net/ipv4/ping_group_range");
        testbed::sh(&["ip", "netns", "exec", &ns.0, "sh", "-c", &set]).expect("ping sockets");
        let p = Pinger::spawn(PingerConfig {
            reflectors: PingerConfig::parse_reflectors("127.0.0.1,::1").expect("addresses"),
            interval: Duration::from_millis(20),
            netns: Some(ns.0.clone()),
            device: None,
        })
        .expect("pinger");
        assert_eq!(p.socket_kind(), kind, "{range}");
        let mut per = [0usize; 2];
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline && per.iter().any(|&n| n < 10) {
            std::thread::sleep(Duration::from_millis(20));
            for s in p.drain() {
                per[s.stream] += 1;
                assert!(s.rtt_ns < 1_000_000_000, "{s:?}");
            }
        }
        assert!(
            per.iter().all(|&n| n >= 10),
            "{kind}: replies per stream {per:?}"
        );
        drop(p);
    }
}

/// One run on the Verizon LTE uplink trace (the gateway's emulated link, a modem FIFO of 200
/// packets behind cake, 40 ms base RTT): 4 CUBIC uploads for 30 s with a ping from the third
/// second. Returns goodput (Mbit/s), what the trace carried over those 30 s (Mbit/s), the
/// ping's p99 (ms) and the controller's `gateway stats` line.
fn lte_uplink(tag: &str, egress: &str, extra: &[&str]) -> (f64, f64, f64, String) {
    let path = format!(
        "{}/../../data/link-traces/Verizon-LTE-short.up.mahi",
        env!("CARGO_MANIFEST_DIR")
    );
    let body = std::fs::read_to_string(&path).expect("the traces are in the repository");
    let trace = debloat_core::link::Trace::parse(&body).expect("a valid trace");
    let rate = format!("10Mbit/trace:{path}");
    let bed = up_extra(tag, &rate, "40ms", egress, "fq_codel", extra);
    // The trace's clock starts with the gateway, just before `up` returned.
    let t0 = std::time::Instant::now();
    let sink = spawn_sink(&bed, 5201, 34, &[]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let from = t0.elapsed().as_nanos() as u64;
    let mut send = tcp_send(
        &ns(&bed, "client"),
        "198.18.2.2:5201",
        30,
        "cubic",
        &["--streams", "4"],
    );
    let sender = std::thread::spawn(move || send.output().expect("sender runs"));
    std::thread::sleep(std::time::Duration::from_secs(2));
    let loaded = ping(&bed, testbed::SERVER_V4, 135);
    let sent = sender.join().expect("sender thread");
    assert!(sent.status.success(), "tcp-send: {}", text(&sent));
    let mbps = sink_mbps(sink);
    let stats = Command::new(EXE)
        .args(["gateway", "stats", "--control"])
        .arg(testbed::control_socket(&bed.prefix))
        .output()
        .expect("stats");
    let line = String::from_utf8_lossy(&stats.stdout)
        .lines()
        .find(|l| l.contains("autorate:"))
        .unwrap_or_default()
        .to_string();
    let capacity = trace.bits_in(from, from + 30_000_000_000) as f64 / 30.0 / 1e6;
    let mode = extra
        .iter()
        .skip_while(|w| **w != "--autorate-mode")
        .nth(1)
        .unwrap_or(&"");
    println!(
        "AUTORATE {egress} {mode}: goodput {mbps:.2} of {capacity:.2} Mbit/s ({:.0} %); ping under load p50 {:.1} p95 {:.1} p99 {:.1} ms (base 40 ms; the issue's goal p99 ≤ 90 ms, goodput ≥ 60 %);{line}",
        100.0 * mbps / capacity,
        pct(&loaded, 50.0),
        pct(&loaded, 95.0),
        pct(&loaded, 99.0),
    );
    (mbps, capacity, pct(&loaded, 99.0), line)
}

/// Issue 28 on real kernel TCP: the Verizon LTE uplink trace as the gateway's emulated link
/// (a modem FIFO of 200 packets behind cake, 40 ms base RTT), 4 CUBIC uploads for 30 s with a
/// ping, first through cake fixed at the trace's median second (5.74 Mbit/s), then with
/// cake-autorate's mode (6 ping streams to the server from the client's namespace, crossing the
/// shaper and the link), then with the gateway's passive controller setting cake's rate (no
/// reflectors). Asserted: cake-autorate's mode acts on its reflectors' replies and holds a
/// lower p99 than the fixed shaper; the passive controller takes round-trip samples from the
/// real TCP flows, keeps at least 70 % of the fixed shaper's goodput and less than half its
/// ping p99. The absolute goals (p99 ≤ base + 50 ms, goodput ≥ 60 % of the trace) are
/// printed, not asserted: beyond even the oracle (the experiment below; docs/autorate.md).
#[test]
#[ignore = "long tier: scripts/long-tests.sh; dated results in docs/testing.md"]
fn autorate_follows_an_lte_uplink_on_real_tcp() {
    let Some(_one) = guard() else { return };
    let run = |tag: &str, egress: &str, extra: &[&str]| {
        let (mbps, _, p99, line) = lte_uplink(tag, egress, extra);
        (mbps, p99, line)
    };
    let (fixed_mbps, fixed_p99, _) = run("af", "cake bandwidth 5740kbit", &[]);
    let six = ["198.18.2.2"; 6].join(",");
    let (ca_mbps, ca_p99, ca_line) = run(
        "ac",
        "cake bandwidth 5740kbit",
        &[
            "--autorate-egress",
            "min=500kbit,base=5740kbit,max=13mbit",
            "--autorate-mode",
            "cake-autorate",
            "--reflectors",
            &six,
        ],
    );
    let (mbps, p99, line) = run(
        "ar",
        "cake bandwidth 5740kbit",
        &["--autorate-egress", "min=500kbit,base=5740kbit,max=13mbit"],
    );
    assert!(
        line.contains("passive") && !line.contains("samples 0 "),
        "{line}"
    );
    assert!(
        mbps >= 0.7 * fixed_mbps,
        "goodput {mbps:.2} vs fixed {fixed_mbps:.2} Mbit/s"
    );
    assert!(
        p99 < 0.5 * fixed_p99,
        "ping p99 {p99:.1} vs fixed {fixed_p99:.1} ms"
    );
    // 6 streams every 300 ms for the ~33 s the gateway runs: ≈ 660 replies; at least half.
    let samples: u64 = ca_line
        .split("samples ")
        .nth(1)
        .and_then(|r| r.split(' ').next()?.parse().ok())
        .unwrap_or(0);
    assert!(
        ca_line.contains("cake-autorate") && samples >= 300,
        "{ca_line}"
    );
    assert!(
        ca_p99 < fixed_p99,
        "cake-autorate's ping p99 {ca_p99:.1} vs fixed {fixed_p99:.1} ms"
    );
    println!(
        "TESTBED Verizon LTE uplink, 4 CUBIC: fixed {fixed_mbps:.2} Mbit/s p99 {fixed_p99:.0} ms; cake-autorate {ca_mbps:.2} Mbit/s p99 {ca_p99:.0} ms; passive {mbps:.2} Mbit/s p99 {p99:.0} ms"
    );
}

/// An experiment, run by hand (`cargo test --release -p debloat --test testbed_autorate --
/// --ignored --nocapture`; root): what the testbed goals (p99 ≤ base + 50 ms = 90 ms,
/// goodput ≥ 60 % of the trace) ask of a controller, against the oracle — cake set every
/// 50 ms to 95 % of what the trace will carry next, which no controller can know — and the
/// passive controller, `RUNS` times each, alternating (`MODES=oracle:0.7,passive` for others,
/// `BOUNDS=min=…,base=…,max=…` for another range).
#[test]
#[ignore = "an experiment (4 minutes a round): run by hand with --ignored"]
fn the_oracle_bounds_what_a_controller_reaches_on_real_tcp() {
    let Some(_one) = guard() else { return };
    let runs: usize = std::env::var("RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    let modes = std::env::var("MODES").unwrap_or_else(|_| "oracle,passive".into());
    let bounds =
        std::env::var("BOUNDS").unwrap_or_else(|_| "min=500kbit,base=5740kbit,max=13mbit".into());
    let bounds = bounds.as_str();
    for k in 0..runs {
        for (j, mode) in modes.split(',').enumerate() {
            let extra = ["--autorate-egress", bounds, "--autorate-mode", mode];
            let (mbps, cap, p99, _) =
                lte_uplink(&format!("x{j}{k}"), "cake bandwidth 5740kbit", &extra);
            println!(
                "BOUND run {k} {mode}: {:.0} % of the trace, p99 {p99:.0} ms",
                100.0 * mbps / cap
            );
        }
    }
}
