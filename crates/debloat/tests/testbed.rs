//! Real kernel TCP through `debloat testbed` (root only: network namespaces and AF_PACKET).
//! Each test builds its own testbed under a unique prefix and removes it when done, also when
//! it fails. Without root (or iproute2/ethtool/ping) the tests print a SKIP line and return;
//! under CI (`CI` set), where everything is installed and we are root, a missing prerequisite
//! fails the test instead, so it can never pass without running there.
//!
//! Bands from issue 5: with two CUBIC uploads for 20 s over a 10 Mbit/s, 20 ms emulated link,
//! `pfifo limit 1000` puts the ping median above 500 ms; `cake bandwidth 10Mbit` keeps the ping's
//! p99 within 15 ms of the idle RTT with goodput ≥ 90 % of the link, with CUBIC and with BBR.

mod common;
use common::stalls::judge_timing;
use common::text;
use debloat_gateway::tools::host_stalls::Watch;

use debloat_gateway::testbed;
use std::process::Command;

use common::bed::*;

#[test]
#[ignore = "long tier: scripts/long-tests.sh; dated results in docs/testing.md"]
fn real_cubic_through_a_1000_packet_fifo_waits_over_half_a_second() {
    let Some(_one) = guard() else { return };
    let bed = up("f", "pfifo limit 1000");
    let l = load(&bed, "cubic");
    report("pfifo 1000, 2 × CUBIC", &l);
    assert!(l.p50 > 500.0, "ping median {:.1} ms", l.p50);
}

/// BBR through the same cake (the long tier: CI keeps CUBIC's run below).
#[test]
#[ignore = "long tier: scripts/long-tests.sh; dated results in docs/testing.md"]
fn cake_keeps_real_bbr_near_idle_latency_at_full_rate() {
    let Some(_one) = guard() else { return };
    let bed = up("cb", "cake bandwidth 10Mbit");
    let l = load(&bed, "bbr");
    report("cake bandwidth 10Mbit, 2 × bbr", &l);
    assert_near_idle_at_full_rate("bbr", &l);
}

#[test]
fn cake_keeps_real_cubic_near_idle_latency_at_full_rate() {
    let Some(_one) = guard() else { return };
    let bed = up("c", "cake bandwidth 10Mbit");
    let l = load(&bed, "cubic");
    report("cake bandwidth 10Mbit, 2 × cubic", &l);
    assert_near_idle_at_full_rate("cubic", &l);
    // A rate change at run time, through the control socket.
    let set = |args: &[&str]| {
        Command::new(EXE)
            .args(["gateway", "set", "--control"])
            .arg(testbed::control_socket(&bed.prefix))
            .args(args)
            .output()
            .expect("runs")
    };
    let o = set(&["--egress", "bandwidth 5Mbit"]);
    assert!(o.status.success(), "{}", text(&o));
    let t = gateway_stats_text(&bed);
    assert!(t.contains("bandwidth 5Mbit"), "{t}");
    let o = set(&["--ingress", "bandwidth 5Mbit"]);
    assert!(!o.status.success(), "fq_codel has no shaper: {}", text(&o));
}

#[test]
fn stock_ping_and_irtt_measure_the_emulated_rtt_and_bad_frames_are_dropped() {
    let Some(_one) = guard() else { return };
    let bed = up("s", "fq_codel");
    // IPv4 and IPv6 both cross the gateway (ARP and neighbour discovery pass through it).
    for to in [testbed::SERVER_V4, testbed::SERVER_V6] {
        let v = ping(&bed, to, 10);
        assert!(v.len() >= 9, "{to}: {} of 10 answered", v.len());
        let p50 = pct(&v, 50.0);
        println!("ping {to}: p50 {p50:.2} ms");
        assert!(
            (20.0..24.0).contains(&p50),
            "{to}: idle RTT {p50:.2} ms for a 20 ms link"
        );
    }
    irtt(&bed);
    // Malformed frames from the client side: each counted and dropped, forwarding goes on.
    let c = ns(&bed, "client");
    for (ns_, dev) in [(c.as_str(), "eth0"), (&ns(&bed, "gw"), "lan0")] {
        let o = testbed::in_ns(ns_, &["ip", "link", "set", dev, "mtu", "9500"])
            .output()
            .expect("ip");
        assert!(o.status.success(), "{}", text(&o));
    }
    for kind in ["garbage", "truncated", "oversized"] {
        let o = send_frames(&c, kind, 50);
        assert!(o.status.success(), "send-frames {kind}: {}", text(&o));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let v = ping(&bed, testbed::SERVER_V4, 5);
    assert_eq!(v.len(), 5, "forwarding continues after bad frames");
    let o = Command::new(EXE)
        .args(["gateway", "stats", "--json", "--control"])
        .arg(testbed::control_socket(&bed.prefix))
        .output()
        .expect("stats");
    assert!(o.status.success(), "{}", text(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json stats");
    let eg = &j["egress"];
    println!("egress counters: {}", eg["frames"]);
    assert!(
        eg["frames"]["malformed"].as_u64() >= Some(100),
        "{}",
        eg["frames"]
    );
    assert!(eg["oversized"].as_u64() >= Some(50), "{eg}");
}

/// VLAN tags cross the gateway intact: the kernel takes the tag out of a frame before
/// AF_PACKET sees it (on both sides), and the gateway puts it back from the ring's slot
/// header. An 802.1Q frame and an 802.1ad (QinQ) frame from the client arrive at the server's
/// interface byte for byte as sent.
#[test]
fn vlan_and_qinq_tags_cross_the_gateway_intact() {
    let Some(_one) = guard() else { return };
    let bed = up("v", "fq_codel");
    let (c, v) = (ns(&bed, "client"), ns(&bed, "server"));
    for kind in ["vlan", "qinq"] {
        let cap = testbed::in_ns(
            &v,
            &[
                EXE,
                "testbed",
                "capture",
                "--iface",
                "eth0",
                "--seconds",
                "1.5",
            ],
        )
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("capture runs");
        std::thread::sleep(std::time::Duration::from_millis(300));
        let o = send_frames(&c, kind, 10);
        assert!(o.status.success(), "send-frames {kind}: {}", text(&o));
        let sent = String::from_utf8_lossy(&o.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("frame: ").map(str::to_string))
            .expect("send-frames prints the frame");
        let cap = cap.wait_with_output().expect("capture ends");
        let got = String::from_utf8_lossy(&cap.stdout);
        let same = got.lines().filter(|l| *l == sent).count();
        println!("{kind}: sent 10 frames {sent}; the server saw {same} identical");
        assert_eq!(
            same, 10,
            "{kind}: expected 10 frames byte for byte, got these:\n{got}"
        );
    }
}

/// Offloads make super-frames the gateway cannot forward: it turns GRO, GSO and TSO off on both
/// interfaces at start, says so in its log, and turns them back on when it stops.
#[test]
fn the_gateway_turns_offloads_off_while_it_runs_and_back_on_after() {
    let Some(_one) = guard() else { return };
    let bed = Bed {
        prefix: format!("dt{}o", std::process::id() % 100_000),
    };
    testbed::build_namespaces(&bed.prefix).expect("namespaces");
    let g = ns(&bed, "gw");
    let state = |dev: &str| -> Vec<String> {
        let o = testbed::in_ns(&g, &["ethtool", "-k", dev])
            .output()
            .expect("ethtool");
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| {
                l.starts_with("generic-receive-offload:")
                    || l.starts_with("generic-segmentation-offload:")
                    || l.starts_with("tcp-segmentation-offload:")
            })
            .map(str::to_string)
            .collect()
    };
    for dev in ["lan0", "wan0"] {
        let o = testbed::in_ns(
            &g,
            &[
                "ethtool", "-K", dev, "gro", "on", "gso", "on", "tso", "on", "tx", "on",
            ],
        )
        .output()
        .expect("ethtool");
        assert!(o.status.success(), "{}", text(&o));
        assert!(
            state(dev).iter().all(|l| l.ends_with(": on")),
            "{:?}",
            state(dev)
        );
    }
    testbed::start_gateway(&testbed::Setup {
        prefix: bed.prefix.clone(),
        exe: EXE.into(),
        gateway_args: Vec::new(),
    })
    .expect("gateway starts");
    for dev in ["lan0", "wan0"] {
        let s = state(dev);
        println!("{dev} while forwarding: {s:?}");
        assert!(
            s.len() == 3 && s.iter().all(|l| l.ends_with(": off")),
            "{s:?}"
        );
    }
    let log = testbed::read_log(&bed.prefix);
    assert!(
        log.contains("offloads turned off on lan0") && log.contains("offloads turned off on wan0"),
        "{log}"
    );
    testbed::stop_gateway(&bed.prefix);
    for dev in ["lan0", "wan0"] {
        let s = state(dev);
        println!("{dev} after: {s:?}");
        assert!(
            s.len() == 3 && s.iter().all(|l| l.ends_with(": on")),
            "{s:?}"
        );
    }
}

/// netem's words on a real path: `jitter 4ms distribution normal loss 10%` in both directions
/// of a 20 ms testbed. Stock ping sees RTTs of 20 ms with a standard deviation of √2 · 4 ms, and
/// about 0.9² = 81% of its echoes answered; the gateway's Prometheus endpoint (read from inside
/// the gateway's namespace) counts one lost frame per unanswered echo (a few more for ARP and
/// neighbour discovery frames lost on the way).
#[test]
fn netem_words_shape_a_real_ping_and_prometheus_counts_the_losses() {
    let Some(_one) = guard() else { return };
    let bed = up_extra(
        "n",
        "10Mbit",
        "20ms",
        "fq_codel",
        "fq_codel",
        &[
            "--impair",
            "jitter 4ms distribution normal loss 10%",
            "--metrics",
            "9464",
        ],
    );
    let sent: u32 = 300;
    let watch = Watch::start();
    let o = testbed::in_ns(
        &ns(&bed, "client"),
        &[
            "ping",
            "-n",
            "-i",
            "0.05",
            "-c",
            &sent.to_string(),
            testbed::SERVER_V4,
        ],
    )
    .output()
    .expect("ping runs");
    let host = watch.stop();
    let rtts: Vec<f64> = String::from_utf8_lossy(&o.stdout)
        .split("time=")
        .skip(1)
        .filter_map(|s| s.split_whitespace().next()?.parse().ok())
        .collect();
    let n = rtts.len() as f64;
    let mean = rtts.iter().sum::<f64>() / n;
    let sd = (rtts.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    let answered = rtts.len() as f64 / f64::from(sent);
    println!(
        "ping through `jitter 4ms distribution normal loss 10%` both ways: {} of {sent} answered ({:.0}%), RTT mean {mean:.2} ms, sd {sd:.2} ms (expected 81%, 20 ms, 5.66 ms)",
        rtts.len(),
        answered * 100.0
    );
    // Binomial(300, 0.81): sd 2.3 points; the band is about ±4 sd.
    assert!((0.72..0.90).contains(&answered), "answered {answered:.3}");
    // A delay is the host's to decide when it steals the CPU (common::stalls); the share
    // answered, netem's loss, is judged whatever it did.
    let mean_ok = (19.0..22.5).contains(&mean);
    judge_timing(mean_ok, &host, &format!("RTT mean {mean:.2} ms"));
    // The sample sd of ~240 normal draws is within ±15% of 5.66 ms at 4 sd.
    judge_timing(
        (4.6..6.9).contains(&sd),
        &host,
        &format!("RTT sd {sd:.2} ms"),
    );
    // The gateway publishes its numbers once a second.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let o = testbed::in_ns(
        &ns(&bed, "gw"),
        &[
            "bash",
            "-c",
            "exec 3<>/dev/tcp/127.0.0.1/9464; printf 'GET /metrics HTTP/1.0\\r\\n\\r\\n' >&3; cat <&3",
        ],
    )
    .output()
    .expect("bash runs");
    let page = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(page.starts_with("HTTP/1.0 200 OK"), "{}", text(&o)); // an HTTP/1.0 request is answered in 1.0
    let metric = |dir: &str, fate: &str| -> u64 {
        let key = format!("debloat_gateway_frames_total{{direction=\"{dir}\",fate=\"{fate}\"}} ");
        page.lines()
            .find_map(|l| l.strip_prefix(key.as_str())?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {key} in\n{page}"))
    };
    let lost = metric("egress", "lost") + metric("ingress", "lost");
    let unanswered = u64::from(sent) - rtts.len() as u64;
    println!(
        "prometheus: egress received {} lost {}, ingress received {} lost {}; unanswered echoes {unanswered}",
        metric("egress", "received"),
        metric("egress", "lost"),
        metric("ingress", "received"),
        metric("ingress", "lost")
    );
    assert!(
        (unanswered..=unanswered + 10).contains(&lost),
        "{lost} frames lost for {unanswered} unanswered echoes"
    );
    assert!(metric("egress", "received") >= u64::from(sent));
}

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

/// A stock irtt client against a stock irtt server across the gateway, when irtt is installed.
fn irtt(bed: &Bed) {
    if Command::new("irtt").arg("help").output().is_err() {
        println!("SKIP: irtt is not installed; the irtt check did not run (apt-get install irtt)");
        return;
    }
    let mut server = testbed::in_ns(
        &ns(bed, "server"),
        &["irtt", "server", "-b", "198.18.2.2:2112"],
    )
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .expect("irtt server");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let o = testbed::in_ns(
        &ns(bed, "client"),
        &[
            "irtt",
            "client",
            "-i",
            "20ms",
            "-d",
            "2s",
            "-Q",
            "-o",
            "-",
            "198.18.2.2:2112",
        ],
    )
    .output()
    .expect("irtt client");
    let _ = server.kill();
    let _ = server.wait();
    assert!(o.status.success(), "irtt client: {}", text(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("irtt JSON");
    let median_ms = j["stats"]["rtt"]["median"].as_f64().expect("rtt median") / 1e6;
    println!("irtt through the gateway: RTT median {median_ms:.2} ms");
    assert!(
        (20.0..24.0).contains(&median_ms),
        "irtt RTT median {median_ms:.2} ms"
    );
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
/// show maxpacket 1514). docs/experiments.md, PI-55, has the evidence.
#[test]
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

/// Kills a background process (the probe's server) when dropped.
struct Bg(std::process::Child);
impl Drop for Bg {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `debloat test NAME` from the client namespace against `debloat server` in the server
/// namespace; returns the summary JSON and the flent file read back.
fn probe_test(bed: &Bed, args: &[&str]) -> (serde_json::Value, debloat_report::Dataset) {
    let _srv = Bg(testbed::in_ns(
        &ns(bed, "server"),
        &[EXE, "server", "--bind", "0.0.0.0:2112"],
    )
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .expect("server starts"));
    std::thread::sleep(std::time::Duration::from_millis(300));
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().to_str().expect("utf-8 path").to_string();
    let mut a = vec![EXE, "test"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["--output", &out, "--no-report"]);
    let o = testbed::in_ns(&ns(bed, "client"), &a)
        .output()
        .expect("debloat test runs");
    println!("{}", text(&o));
    assert!(o.status.success(), "debloat test failed: {}", text(&o));
    let summary = common::summary_json(dir.path());
    let ds = debloat_report::Dataset::read(&common::output_file(dir.path(), ".flent.gz"))
        .expect("flent file reads");
    (summary, ds)
}

/// The probe tests' testbed: 10 Mbit/s, 20 ms, cake at the link rate both ways.
fn cake_both_ways(tag: &str) -> Bed {
    up_with(
        tag,
        "10Mbit",
        "20ms",
        "cake bandwidth 10Mbit",
        "cake bandwidth 10Mbit",
    )
}

/// Issue 6 through the testbed: rrul from the client to a debloat server across the gateway's
/// 10 Mbit/s, 20 ms link with cake both ways. Every rrul series is there, the downloads fill
/// ≥ 85 % of the link as the client counted it, and latency under load stays near idle (grade A
/// or A+).
#[test]
fn probe_rrul_through_cake_has_every_series_and_grades_well() {
    let Some(_one) = guard() else { return };
    let bed = cake_both_ways("pr");
    let watch = Watch::start();
    let (s, ds) = probe_test(
        &bed,
        &["rrul", testbed::SERVER_V4, "--length", "10", "--delay", "3"],
    );
    let host = watch.stop();
    let names: Vec<&str> = ds.series.iter().map(|x| x.name.as_str()).collect();
    for m in ["BE", "BK", "CS5", "EF"] {
        for d in ["upload", "download"] {
            let n = format!("TCP {d} {m}");
            assert!(names.contains(&n.as_str()), "{n} missing: {names:?}");
        }
    }
    for n in [
        "Ping (ms) UDP EF",
        "Ping (ms) UDP BK",
        "Ping (ms) UDP BE",
        "Ping (ms) ICMP",
    ] {
        assert!(names.contains(&n), "{n} missing: {names:?}");
    }
    assert_eq!(s["errors"].as_array().map(Vec::len), Some(0), "{s}");
    let down = common::bytes_down(&s) * 8.0 / 10.0 / 1e6;
    println!(
        "rrul through cake: downloads {down:.2} Mbit/s, grade {}; meanwhile {host}",
        s["grade"]
    );
    // A rate and a grade of latency are the host's to decide when it steals the CPU
    // (common::stalls); the series and the errors above are judged whatever it did.
    let downloads = format!("downloads carried {down:.2} Mbit/s of 10");
    judge_timing(down >= 8.5, &host, &downloads);
    let g = s["grade"]["letter"].as_str().expect("graded");
    judge_timing(
        g == "A+" || g == "A",
        &host,
        &format!("grade {g}: {}", s["grade"]),
    );
    assert!(s["rpm"]["rpm"].as_f64().unwrap_or(0.0) > 0.0, "{s}");
}

/// The probe sees bufferbloat where ping does: one CUBIC upload into a 1000-packet FIFO on a
/// 10 Mbit/s link adds hundreds of ms, graded D or F.
#[test]
fn probe_grades_a_1000_packet_fifo_as_bloated() {
    let Some(_one) = guard() else { return };
    let bed = up("pf", "pfifo limit 1000");
    let (s, _) = probe_test(
        &bed,
        &[
            "tcp_1up",
            testbed::SERVER_V4,
            "--length",
            "12",
            "--delay",
            "3",
            "--cc",
            "cubic",
        ],
    );
    let g = &s["grade"];
    println!("tcp_1up through pfifo 1000: {g}");
    let inc = g["increase_ms"].as_f64().expect("increase");
    assert!(inc > 200.0, "latency increase {inc} ms");
    let l = g["letter"].as_str().expect("letter");
    assert!(l == "D" || l == "F", "grade {l}");
}

/// DSLReports' two directions graded apart on a link bloated one way only: downloads into a
/// 1000-packet FIFO on the gateway's ingress (10 Mbit/s, 20 ms) and uploads through cake on its
/// egress. The download phase adds hundreds of ms (D or F), the upload phase almost nothing
/// (A+ or A), and the overall grade is of the mean of the two increases.
#[test]
#[ignore = "long tier: scripts/long-tests.sh; dated results in docs/testing.md"]
fn probe_bufferbloat_grades_each_direction_apart() {
    let Some(_one) = guard() else { return };
    let bed = up_with(
        "pb",
        "10Mbit",
        "20ms",
        "cake bandwidth 10Mbit",
        "pfifo limit 1000",
    );
    let (s, _) = probe_test(
        &bed,
        &[
            "bufferbloat",
            testbed::SERVER_V4,
            "--length",
            "20",
            "--delay",
            "3",
            "--cc",
            "cubic",
        ],
    );
    let g = &s["grade"];
    println!("bufferbloat, pfifo down / cake up: {g}");
    let phase = |d: &str| {
        g["phases"]
            .as_array()
            .expect("phases")
            .iter()
            .find(|p| p["direction"] == d)
            .unwrap_or_else(|| panic!("no {d} phase: {g}"))
            .clone()
    };
    let (down, up) = (phase("download"), phase("upload"));
    let inc = |p: &serde_json::Value| p["increase_ms"].as_f64().expect("increase");
    assert!(inc(&down) > 200.0, "download phase +{} ms", inc(&down));
    assert!(inc(&up) < 30.0, "upload phase +{} ms", inc(&up));
    let dl = down["letter"].as_str().expect("letter");
    let ul = up["letter"].as_str().expect("letter");
    assert!(dl == "D" || dl == "F", "download graded {dl}");
    assert!(ul == "A+" || ul == "A", "upload graded {ul}");
    let mean = (inc(&down) + inc(&up)) / 2.0;
    assert!(
        (g["increase_ms"].as_f64().expect("increase") - mean).abs() < 1e-9,
        "{g}"
    );
    assert_eq!(
        g["letter"].as_str(),
        Some(debloat_probe::grade::letter(mean))
    );
}

/// draft-09's responsiveness test through the testbed (10 Mbit/s, 20 ms, cake both ways): the
/// load ramps one connection each way per 5-s interval until goodput is stable, stops adding
/// then, and the test ends at the first interval where responsiveness is stable too, well
/// before its 70 s — with a High-confidence RPM, rated Good or better, and the link full.
#[test]
#[ignore = "long tier: scripts/long-tests.sh; dated results in docs/testing.md"]
fn probe_responsiveness_ramps_until_saturated_and_ends_when_stable() {
    let Some(_one) = guard() else { return };
    let bed = cake_both_ways("prs");
    let (s, ds) = probe_test(
        &bed,
        &["responsiveness", testbed::SERVER_V4, "--cc", "cubic"],
    );
    let r = &s["load_ramp"];
    println!("ramp: {r}\nrpm: {}", s["rpm"]);
    let sat = r["saturated_at_s"].as_f64().expect("goodput saturated");
    let end = r["ended_at_s"].as_f64().expect("responsiveness stable");
    let elapsed = s["elapsed_s"].as_f64().expect("elapsed");
    assert!(
        end >= sat && elapsed < end + 3.0 && elapsed < 65.0,
        "{r}, ran {elapsed} s"
    );
    // One step per interval from the start until saturation, none after.
    let steps = r["steps"].as_array().expect("steps");
    let last_step = steps.last().and_then(|x| x[0].as_f64()).expect("a step");
    assert!(
        last_step < sat,
        "a connection was added after saturation: {r}"
    );
    assert_eq!(steps.len() as f64, (sat - 5.0) / 5.0, "{r}");
    let n = r["flows"].as_u64().expect("flows");
    assert!((2..=16).contains(&n), "{n} connections each way");
    assert_eq!(
        s["flows"].as_array().map(Vec::len),
        Some(2 * n as usize),
        "{s}"
    );
    assert_eq!(s["rpm"]["confidence"], "High", "{}", s["rpm"]);
    let class = s["rpm"]["class"].as_str().expect("class");
    assert!(class == "Good" || class == "Excellent", "{}", s["rpm"]);
    let sum = debloat_report::RunSummary::of(&ds);
    let down = sum.download_mbps.expect("download");
    assert!(down >= 8.5, "downloads carried {down:.2} Mbit/s of 10");
}

/// `gateway --realtime` under overload (issue 5): an unshaped fq_codel gateway pinned to one
/// CPU under SCHED_FIFO, flooded by four CUBIC uploads over a 10 Gbit/s emulated link, so its
/// forwarding loop never sleeps. The loop runs as SCHED_FIFO 50 on its CPU, the control thread
/// it started still answers `gateway stats` promptly (the kernel's RT throttling leaves it 5 %
/// of that CPU at worst), traffic flows at hundreds of Mbit/s, and `testbed down` stops it.
#[test]
fn a_realtime_gateway_under_overload_still_answers_and_stops() {
    let Some(_one) = guard() else { return };
    let bed = up_extra(
        "ov",
        "10Gbit",
        "2ms",
        "fq_codel",
        "fq_codel",
        &["--cpu", "1", "--realtime", "50"],
    );
    let pid = testbed::gateway_pid(&bed.prefix).expect("gateway running");
    let chrt = Command::new("chrt")
        .args(["-p", &pid.to_string()])
        .output()
        .expect("chrt runs");
    let policy = text(&chrt);
    assert!(
        policy.contains("SCHED_FIFO") && policy.contains("priority: 50"),
        "{policy}"
    );
    let sink = spawn_sink(&bed, 5201, 12, &[]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let sender = tcp_send(
        &ns(&bed, "client"),
        "198.18.2.2:5201",
        8,
        "cubic",
        &["--streams", "4"],
    )
    .stdout(std::process::Stdio::null())
    .spawn()
    .expect("sender starts");
    std::thread::sleep(std::time::Duration::from_secs(3));
    let sock = testbed::control_socket(&bed.prefix);
    let t = std::time::Instant::now();
    let stats = Command::new(EXE)
        .args(["gateway", "stats", "--control", &sock.to_string_lossy()])
        .output()
        .expect("stats runs");
    let took = t.elapsed();
    let cpu = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rtts = ping(&bed, testbed::SERVER_V4, 10);
    let _ = sender.wait_with_output();
    let mbps = sink_mbps(sink);
    println!(
        "realtime gateway under overload: stats answered in {:.1} ms, goodput {mbps:.0} Mbit/s, \
         ping {:?} ms ({} of 10 answered); gateway stat: {}",
        took.as_secs_f64() * 1e3,
        rtts.iter()
            .map(|r| (r * 10.0).round() / 10.0)
            .collect::<Vec<_>>(),
        rtts.len(),
        cpu.split_whitespace().nth(2).unwrap_or("?")
    );
    assert!(stats.status.success(), "{}", text(&stats));
    assert!(text(&stats).contains("qdisc fq_codel"), "{}", text(&stats));
    assert!(
        took < std::time::Duration::from_secs(3),
        "stats took {took:?}"
    );
    assert!(mbps > 200.0, "goodput {mbps:.0} Mbit/s");
    let o = Command::new(EXE)
        .args(["testbed", "down", "--prefix", &bed.prefix])
        .output()
        .expect("down runs");
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        testbed::gateway_pid(&bed.prefix).is_none(),
        "the realtime gateway did not stop"
    );
}

/// CPU seconds (user + system) a process has used, from /proc/PID/stat.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command's closing parenthesis: state is the 3rd field, utime the 14th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|x| x.parse().ok())
        .collect();
    f.iter().sum::<f64>() / 100.0
}

/// `gateway --busy-poll` (issue 5's idle latency): the forwarding loop never sleeps — at idle
/// it uses its whole core — and still does the gateway's job: cake shapes two real CUBIC
/// uploads to the 10 Mbit/s link with ping near idle, and `gateway stats` answers.
#[test]
fn a_busy_polling_gateway_spins_at_idle_and_still_shapes() {
    let Some(_one) = guard() else { return };
    let bed = up_extra(
        "bp",
        "10Mbit",
        "20ms",
        "cake bandwidth 10Mbit",
        "cake bandwidth 10Mbit",
        &["--cpu", "1", "--busy-poll"],
    );
    let pid = testbed::gateway_pid(&bed.prefix).expect("gateway running");
    let (cpu0, t0) = (cpu_seconds(pid), std::time::Instant::now());
    std::thread::sleep(std::time::Duration::from_secs(2));
    let busy = (cpu_seconds(pid) - cpu0) / t0.elapsed().as_secs_f64();
    // 8 s of load rather than 20 (CI's minutes): the same bands as the sleeping gateway's.
    let l = load_for(&bed, "cubic", 2, 8);
    report("cake 10 Mbit through a busy-polling gateway, 2 × CUBIC", &l);
    println!(
        "busy-polling gateway at idle: {:.0} % of a core",
        busy * 100.0
    );
    assert!(
        busy > 0.8,
        "an idle busy-polling gateway used {busy:.2} of a core"
    );
    assert_near_idle_at_full_rate("busy-polling gateway", &l);
    let sock = testbed::control_socket(&bed.prefix);
    let stats = Command::new(EXE)
        .args(["gateway", "stats", "--control", &sock.to_string_lossy()])
        .output()
        .expect("stats runs");
    assert!(text(&stats).contains("qdisc cake"), "{}", text(&stats));
}
