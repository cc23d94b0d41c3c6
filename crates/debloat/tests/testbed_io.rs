//! The gateway on its AF_XDP back end (`--io af_xdp`, issue 42), through `debloat testbed`
//! (root only; SKIP elsewhere, a failure under CI). The other testbed tests run on the TPACKET
//! back end; `scripts/gateway-io-matrix.sh` runs all of them on AF_XDP too (long tier).
//!
//! Bands are the TPACKET back end's (tests/testbed.rs): cake at 10 Mbit/s keeps two CUBIC
//! uploads' ping p99 within 15 ms of the idle RTT at ≥ 9 Mbit/s of goodput; and every frame
//! is accounted for in both directions (in = dropped + queued + sent).

mod common;
use common::bed::*;
use common::stalls::judge_timing;
use common::text;
use debloat_gateway::testbed::{self, sh, Setup};
use debloat_gateway::tools::host_stalls::Watch;

fn stats_io(bed: &Bed) -> serde_json::Value {
    let j = gateway_stats(bed);
    serde_json::json!([j["egress"]["io"], j["ingress"]["io"], j])
}

#[test]
fn af_xdp_shapes_real_tcp_and_accounts_for_every_frame() {
    let Some(_one) = guard() else { return };
    let cake = "cake bandwidth 10Mbit";
    let bed = up_extra("x", "10Mbit", "20ms", cake, cake, &["--io", "af_xdp"]);
    let io = stats_io(&bed);
    for d in [&io[0], &io[1]] {
        assert_eq!(d["io"], "af_xdp", "{d}");
        // veth has native XDP and no zero-copy.
        assert_eq!(d["xdp"]["mode"], "native", "{d}");
        assert_eq!(d["xdp"]["zero_copy"], false, "{d}");
        // Both sides on one UMEM: a forwarded frame is sent from where it was received.
        assert_eq!(d["xdp"]["shared_umem"], true, "{d}");
    }
    let v6 = ping(&bed, testbed::SERVER_V6, 3);
    assert_eq!(v6.len(), 3, "IPv6 (neighbour discovery through XDP)");
    // 8 s rather than `load`'s 20: CI's minutes are few.
    let l = load_for(&bed, "cubic", 2, 8);
    report("cake 10 Mbit on AF_XDP, 2 × CUBIC for 8 s", &l);
    assert_near_idle_at_full_rate("cake on AF_XDP", &l);
    let j = gateway_stats(&bed);
    for dir in ["egress", "ingress"] {
        assert!(accounted(&j[dir]), "{dir}: {}", j[dir]);
    }
    // 8 s at 10 Mbit/s is about 6,600 full-size frames.
    let got = j["egress"]["frames"]["received"].as_u64().unwrap_or(0);
    assert!(got > 5_000, "egress received only {got} frames");
    let t = gateway_stats_text(&bed);
    assert!(
        t.contains(
            "io: lan0 af_xdp (native XDP, copy mode, multi-buffer frames, UMEM shared with the other side)"
        ),
        "{t}"
    );
}
/// An interface AF_XDP cannot serve (an MTU too large for four UMEM frames): `--io auto` forwards
/// through the TPACKET ring on it, says why in the log and the statistics, and keeps AF_XDP on
/// the other side; `--io af_xdp` refuses to start and says why.
#[test]
fn auto_falls_back_per_interface_and_af_xdp_refuses_with_the_reason() {
    let Some(_one) = guard() else { return };
    let bed = Bed {
        prefix: format!("dt{}fb", std::process::id() % 100_000),
    };
    testbed::build_namespaces(&bed.prefix).expect("namespaces");
    let g = ns(&bed, "gw");
    sh(&["ip", "-n", &g, "link", "set", "lan0", "mtu", "16000"]).expect("mtu");
    let setup = |io: &str| Setup {
        prefix: bed.prefix.clone(),
        exe: EXE.into(),
        gateway_args: ["--io", io].map(String::from).to_vec(),
    };
    let refused = testbed::start_gateway(&setup("af_xdp")).expect_err("af_xdp must refuse");
    let why = refused.to_string();
    assert!(why.contains("MTU 16000") && why.contains("lan0"), "{why}");
    testbed::start_gateway(&setup("auto")).expect("auto starts");
    let io = stats_io(&bed);
    assert_eq!(io[0]["io"], "packet", "{}", io[0]);
    let fallback = io[0]["fallback"].as_str().unwrap_or("");
    assert!(fallback.contains("MTU 16000"), "{}", io[0]);
    assert_eq!(io[1]["io"], "af_xdp", "{}", io[1]);
    assert!(
        testbed::read_log(&bed.prefix).contains("lan0: AF_XDP not used"),
        "{}",
        testbed::read_log(&bed.prefix)
    );
    // Mixed back ends forward both ways.
    let rtts = ping(&bed, testbed::SERVER_V4, 5);
    assert_eq!(
        rtts.len(),
        5,
        "pings across TPACKET one way and AF_XDP the other"
    );
    let j = gateway_stats(&bed);
    for dir in ["egress", "ingress"] {
        assert!(accounted(&j[dir]), "{dir}: {}", j[dir]);
    }
}

/// Jumbo frames (MTU 9000 on every link of the path) through AF_XDP: a 9,014-byte frame spans
/// three UMEM frames (multi-buffer AF_XDP, `XDP_USE_SG`, with a program loaded as one that
/// handles them), so 8,000-byte pings cross whole (don't fragment) both ways, a TCP upload with
/// 8,960-byte segments crosses cake at its rate, the statistics say "multi-buffer frames", and
/// every frame is accounted for; in native XDP and in generic (skb) XDP.
#[test]
fn jumbo_frames_cross_af_xdp_in_several_umem_frames() {
    let Some(_one) = guard() else { return };
    jumbo_through(
        "af_xdp",
        "jn",
        "af_xdp (native XDP, copy mode, multi-buffer frames, UMEM shared with the other side)",
    );
    jumbo_through(
        "af_xdp_generic",
        "js",
        "af_xdp (skb XDP, copy mode, multi-buffer frames, UMEM shared with the other side)",
    );
}

fn jumbo_through(io: &str, tag: &str, says: &str) {
    let bed = Bed {
        prefix: format!("dt{}{tag}", std::process::id() % 100_000),
    };
    testbed::build_namespaces(&bed.prefix).expect("namespaces");
    for (role, dev) in [
        ("client", "eth0"),
        ("gw", "lan0"),
        ("gw", "wan0"),
        ("server", "eth0"),
    ] {
        sh(&[
            "ip",
            "-n",
            &ns(&bed, role),
            "link",
            "set",
            dev,
            "mtu",
            "9000",
        ])
        .expect("mtu");
    }
    let cake = "cake bandwidth 50Mbit";
    let args = ["--io", io, "--egress", cake, "--ingress", cake];
    testbed::start_gateway(&Setup {
        prefix: bed.prefix.clone(),
        exe: EXE.into(),
        gateway_args: args.map(String::from).to_vec(),
    })
    .expect("the gateway starts on AF_XDP at MTU 9000");
    let t = gateway_stats_text(&bed);
    assert!(t.contains(says), "{t}");
    let jumbo = testbed::in_ns(
        &ns(&bed, "client"),
        &[
            "ping", "-n", "-c", "3", "-i", "0.2", "-W", "1", "-M", "do", "-s", "8000",
        ],
    )
    .arg(testbed::SERVER_V4)
    .output()
    .expect("ping");
    assert!(jumbo.status.success(), "8000-byte ping: {}", text(&jumbo));
    let watch = Watch::start();
    let sink = spawn_sink(&bed, 5201, 6, &[]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let sent = tcp_send(&ns(&bed, "client"), "198.18.2.2:5201", 4, "cubic", &[])
        .output()
        .expect("sender");
    assert!(sent.status.success(), "{}", text(&sent));
    let mbps = sink_mbps(sink);
    let host = watch.stop();
    let j = gateway_stats(&bed);
    let (sent, bytes) = (
        j["egress"]["stats"]["packets"].as_u64().unwrap_or(0),
        j["egress"]["stats"]["bytes"].as_u64().unwrap_or(0),
    );
    println!("jumbo frames on {io}: {mbps:.1} Mbit/s; cake sent {sent} frames, {bytes} bytes");
    println!("egress {}", j["egress"]["frames"]);
    println!("ingress {}", j["ingress"]["frames"]);
    println!(
        "tx errors {} {}",
        j["egress"]["tx_errors"], j["ingress"]["tx_errors"]
    );
    // cake at 50 Mbit/s for 4 s, the rate held (a frame lost in the UMEM would stall the
    // upload far below it), in frames of about 9,000 bytes.
    // A rate is the host's to decide when it steals the CPU (common::stalls).
    judge_timing(
        mbps > 40.0 && mbps < 52.0,
        &host,
        &format!("goodput {mbps:.1} Mbit/s"),
    );
    assert!(sent > 1_000 && bytes / sent > 8_000, "{}", j["egress"]);
    for dir in ["egress", "ingress"] {
        assert!(accounted(&j[dir]), "{dir}: {}", j[dir]);
        // A frame's descriptors all find room on the TX ring (xdpilone's reservation can come
        // back short on a stale view of the ring; the socket asks again).
        assert_eq!(j[dir]["tx_errors"], 0, "{dir}: {}", j[dir]);
    }
}

/// `--io af_xdp_generic` with two workers: the host-steering program attached as generic XDP
/// even though veth has native XDP; IPv4 and IPv6 cross both ways, the statistics say where
/// XDP runs, every frame is accounted for.
#[test]
fn generic_xdp_with_two_workers_forwards_and_says_so() {
    let Some(_one) = guard() else { return };
    let bed = up_extra(
        "xg",
        "10Mbit",
        "20ms",
        "cake bandwidth 10Mbit",
        "cake bandwidth 10Mbit",
        &["--io", "af_xdp_generic", "--workers", "2"],
    );
    let io = stats_io(&bed);
    for d in [&io[0], &io[1]] {
        assert_eq!(d["io"], "af_xdp", "{d}");
        assert_eq!(d["xdp"]["mode"], "skb", "{d}");
    }
    assert_eq!(ping(&bed, testbed::SERVER_V4, 5).len(), 5, "IPv4");
    assert_eq!(ping(&bed, testbed::SERVER_V6, 3).len(), 3, "IPv6");
    let j = gateway_stats(&bed);
    for dir in ["egress", "ingress"] {
        assert!(accounted(&j[dir]), "{dir}: {}", j[dir]);
    }
    let t = gateway_stats_text(&bed);
    assert!(
        t.contains(
            "af_xdp (skb XDP, copy mode, multi-buffer frames, UMEM shared with the other side)"
        ),
        "{t}"
    );
}

/// An interface with two receive queues (veths made with two each, as a multi-queue NIC has):
/// with two workers, each worker has a socket on every queue, so a host's frames reach its
/// worker whichever queue they arrive on. The client's transmit queue follows its CPU (XPS),
/// so pings sent from CPU 0 arrive on lan0's queue 0 and from CPU 1 on queue 1; from hosts
/// 198.18.1.2 and .4 they belong to workers 0 and 1. All four pairs are answered, the veth's
/// own counters show both queues redirecting to sockets, the statistics say "2 receive
/// queues", and every frame is accounted for.
#[test]
fn af_xdp_serves_every_receive_queue_with_every_worker() {
    let Some(_one) = guard() else { return };
    let bed = Bed {
        prefix: format!("dt{}mq", std::process::id() % 100_000),
    };
    testbed::build_namespaces_with_queues(&bed.prefix, 2).expect("namespaces");
    let (c, g) = (ns(&bed, "client"), ns(&bed, "gw"));
    let xps = "echo 1 > /sys/class/net/eth0/queues/tx-0/xps_cpus && \
               echo 2 > /sys/class/net/eth0/queues/tx-1/xps_cpus";
    sh(&["ip", "netns", "exec", &c, "sh", "-c", xps]).expect("XPS: CPU i sends on queue i");
    sh(&[
        "ip",
        "-n",
        &c,
        "addr",
        "add",
        "198.18.1.4/24",
        "dev",
        "eth0",
    ])
    .expect("host B");
    let shard = |ip: &str| debloat_gateway::sys::shard_of_ip(ip.parse().expect("ip"), 2);
    assert_ne!(
        shard("198.18.1.2"),
        shard("198.18.1.4"),
        "one host per worker"
    );
    let cake = "cake bandwidth 10Mbit";
    testbed::start_gateway(&Setup {
        prefix: bed.prefix.clone(),
        exe: EXE.into(),
        gateway_args: [
            "--io",
            "af_xdp",
            "--workers",
            "2",
            "--egress",
            cake,
            "--ingress",
            cake,
        ]
        .map(String::from)
        .to_vec(),
    })
    .expect("gateway starts");
    for cpu in ["0", "1"] {
        for from in ["198.18.1.2", "198.18.1.4"] {
            let args = ["taskset", "-c", cpu, "ping", "-n", "-c", "5", "-i", "0.05"];
            let mut args = args.to_vec();
            args.extend(["-W", "1", "-I", from, testbed::SERVER_V4]);
            let o = testbed::in_ns(&c, &args).output().expect("ping runs");
            let said = String::from_utf8_lossy(&o.stdout);
            let answered = said.matches("time=").count();
            assert_eq!(answered, 5, "from {from} on CPU {cpu}: {said}");
        }
    }
    let counters = sh(&["ip", "netns", "exec", &g, "ethtool", "-S", "lan0"]).expect("ethtool");
    let redirected = |q: u32| -> u64 {
        let key = format!("rx_queue_{q}_xdp_redirect:");
        counters
            .lines()
            .find_map(|l| l.trim().strip_prefix(&key)?.trim().parse().ok())
            .unwrap_or(0)
    };
    // 10 echo requests per queue, and whatever else (neighbour discovery) came that way.
    for q in [0, 1] {
        assert!(redirected(q) >= 10, "lan0 queue {q}: {counters}");
    }
    let io = stats_io(&bed);
    assert_eq!(io[0]["xdp"]["queues"], 2, "{}", io[0]);
    let t = gateway_stats_text(&bed);
    assert!(t.contains("copy mode, 2 receive queues"), "{t}");
    let j = gateway_stats(&bed);
    for dir in ["egress", "ingress"] {
        assert!(accounted(&j[dir]), "{dir}: {}", j[dir]);
    }
}
