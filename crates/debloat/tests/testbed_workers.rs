//! `gateway --workers 2` (issue 42) through `debloat testbed` (root only; SKIP elsewhere, a
//! failure under CI): two forwarding threads, each with a shard of the hosts, one cake
//! `dual-srchost` shaper's rate split between them by demand.
//!
//! Host A (198.18.1.2) and host B (198.18.1.4) hash to different workers (checked first). With
//! A running 8 uploads and B one, one worker's cake gives each host half (CAKE-HOSTS); two
//! workers must too, within 5 points, with the shaped rate held to 1 % and every frame
//! accounted for. With B nearly idle, A must get what B leaves — more than the half that
//! cake_mq's equal split between active queues would leave it.

mod common;
use common::bed::*;
use common::rx::Rate;
use common::rx::RxSamples;
use common::stalls::{again_if_the_host_stalled, judge_rate};
use common::text;
use debloat_gateway::testbed;
use debloat_gateway::tools::host_stalls::Watch;
use std::time::{Duration, SystemTime};

const A: &str = "198.18.1.2";
const B: &str = "198.18.1.4";
/// The shaper, bit/s, and cake's accounting of a frame: its whole length (`raw`).
const RATE: f64 = 20e6;

fn add_addresses(bed: &Bed) {
    for (n, addr) in [
        (ns(bed, "client"), "198.18.1.4/24"),
        (ns(bed, "server"), "198.18.2.3/24"),
    ] {
        let o = testbed::in_ns(&n, &["ip", "addr", "add", addr, "dev", "eth0"])
            .output()
            .expect("ip runs");
        assert!(o.status.success(), "{}", text(&o));
    }
}

#[test]
fn two_workers_keep_host_fairness_the_rate_and_give_a_busy_shard_what_an_idle_one_leaves() {
    let Some(_one) = guard() else { return };
    let shard = |ip: &str| debloat_gateway::sys::shard_of_ip(ip.parse().expect("ip"), 2);
    assert_ne!(
        shard(A),
        shard(B),
        "the test's hosts must land on different workers"
    );
    let bed = up_extra(
        "w",
        "40Mbit",
        "20ms",
        "cake bandwidth 20Mbit dual-srchost",
        "fq_codel",
        &["--workers", "2"],
    );
    add_addresses(&bed);
    host_shares_and_the_rate(&bed, "2 workers");
    let c = ns(&bed, "client");
    let send = |to: &str, from: &str, streams: &str, secs: u32| upload(&c, to, from, streams, secs);
    // 2. Host A: 2 uploads; host B: a ping every 5 ms with 1000 bytes (≈ 1.7 Mbit/s).
    let sink_a = spawn_sink(&bed, 5203, 11, &[]);
    std::thread::sleep(Duration::from_millis(300));
    let bulk = send("198.18.2.2:5203", A, "2", 8);
    let light = testbed::in_ns(
        &c,
        &[
            "ping",
            "-n",
            "-q",
            "-I",
            B,
            "-i",
            "0.005",
            "-s",
            "1000",
            "-w",
            "8",
            "198.18.2.3",
        ],
    )
    .output()
    .expect("ping runs");
    let o = bulk.join().expect("sender thread");
    assert!(o.status.success(), "tcp-send: {}", text(&o));
    let ma = sink_mbps(sink_a);
    println!(
        "2 workers, host A bulk beside host B's pings: A {ma:.2} Mbit/s; ping: {}",
        text(&light).lines().last().unwrap_or("")
    );
    // cake_mq's equal split would hold A to 10 Mbit/s on the wire (9.6 of TCP goodput).
    assert!(
        ma > 15.0,
        "host A got {ma:.2} Mbit/s beside a nearly idle shard"
    );
    let j = gateway_stats(&bed);
    for dir in ["egress", "ingress"] {
        assert!(accounted(&j[dir]), "{dir}: {}", j[dir]);
    }
    let t = gateway_stats_text(&bed);
    assert!(t.contains("; 2 workers"), "{t}");
}

/// Host A runs 8 uploads, host B one, for 11 s: each host's share within 5 points of half,
/// the shaped rate (read from 2 s to 10 s) within 1 % of 20 Mbit/s, every frame accounted for,
/// and both shards busy. (A window of 5 s read 19.78 once: single CUBIC flows backing off move
/// a short window's mean. An 8 s window read 19.71 in CI once; the run is measured again when
/// the host stalled the machine meanwhile, `common::stalls`.)
fn host_shares_and_the_rate(bed: &Bed, what: &str) {
    let half = |ma: f64, mb: f64| (ma / (ma + mb) - 0.5).abs() <= 0.05;
    let ((ma, mb, wire, _), host) = again_if_the_host_stalled(
        what,
        || uploads_and_the_wire(bed, [5201, 5202], ["8", "1"]),
        |r| half(r.0, r.1) && rate_ok(&r.2),
    );
    let share_a = ma / (ma + mb);
    println!(
        "{what}, cake 20Mbit dual-srchost: host A (8 uploads) {ma:.2} Mbit/s, host B (1) {mb:.2} Mbit/s, A's share {:.1} %; shaped rate {:.3} Mbit/s",
        share_a * 100.0,
        wire.bps / 1e6
    );
    assert!(half(ma, mb), "A's share {share_a:.3}");
    judge_rate(&wire, RATE, 0.01, &host, "shaped");
    let j = gateway_stats(bed);
    for dir in ["egress", "ingress"] {
        assert!(accounted(&j[dir]), "{dir}: {}", j[dir]);
    }
    let shards = j["shards"].as_array().cloned().unwrap_or_default();
    assert_eq!(shards.len(), 2, "{}", j["shards"]);
    for s in &shards {
        assert!(s["egress_received"].as_u64().unwrap_or(0) > 1000, "{s}");
    }
}

/// The wire's rate within 1 % of [`RATE`].
fn rate_ok(wire: &Rate) -> bool {
    (wire.bps / RATE - 1.0).abs() <= 0.01
}

/// For 11 s, uploads from host A (`streams[0]` of them, to 198.18.2.2) and host B (to
/// 198.18.2.3) to sinks on `ports`: each host's goodput (Mbit/s), the rate on the server's wire
/// from 2 s to 10 s (bit/s), and the gateway's statistics at 10 s.
fn uploads_and_the_wire(
    bed: &Bed,
    ports: [u16; 2],
    streams: [&str; 2],
) -> (f64, f64, Rate, serde_json::Value) {
    let c = ns(bed, "client");
    let sinks = ports.map(|p| spawn_sink(bed, p, 14, &[]));
    std::thread::sleep(Duration::from_millis(300));
    let senders = [
        upload(&c, &format!("198.18.2.2:{}", ports[0]), A, streams[0], 11),
        upload(&c, &format!("198.18.2.3:{}", ports[1]), B, streams[1], 11),
    ];
    let rx = RxSamples::start(bed, "server");
    std::thread::sleep(Duration::from_secs(2));
    let t0 = SystemTime::now();
    std::thread::sleep(Duration::from_secs(8));
    let t1 = SystemTime::now();
    let j = gateway_stats(bed);
    for s in senders {
        let o = s.join().expect("sender thread");
        assert!(o.status.success(), "tcp-send: {}", text(&o));
    }
    let [ma, mb] = sinks.map(sink_mbps);
    (ma, mb, rx.rate(t0, t1), j)
}

/// CUBIC uploads from the client's address `from` to `to` for `secs`, on a thread.
fn upload(
    client: &str,
    to: &str,
    from: &str,
    streams: &str,
    secs: u32,
) -> std::thread::JoinHandle<std::process::Output> {
    let args = ["--bind", from, "--streams", streams];
    let mut cmd = tcp_send(client, to, secs, "cubic", &args);
    std::thread::spawn(move || cmd.output().expect("sender runs"))
}

/// Two workers on AF_XDP, cake at 20 Mbit/s `dual-srchost`, hosts A and B on the client.
fn af_xdp_workers(tag: &str) -> Bed {
    let bed = up_extra(
        tag,
        "40Mbit",
        "20ms",
        "cake bandwidth 20Mbit dual-srchost",
        "fq_codel",
        &["--workers", "2", "--io", "af_xdp"],
    );
    add_addresses(&bed);
    bed
}

/// The same on the AF_XDP back end: both workers' sockets on each veth's one queue, all on one
/// UMEM with the other veth's (a forwarded frame is not copied), the XDP program handing each
/// worker its hosts.
#[test]
fn two_workers_on_af_xdp_keep_host_fairness_and_the_rate() {
    let Some(_one) = guard() else { return };
    let bed = af_xdp_workers("wx");
    let j = gateway_stats(&bed);
    for dir in ["egress", "ingress"] {
        assert_eq!(j[dir]["io"]["io"], "af_xdp", "{}", j[dir]["io"]);
    }
    host_shares_and_the_rate(&bed, "2 workers on AF_XDP");
    let t = gateway_stats_text(&bed);
    assert!(t.contains("; 2 workers"), "{t}");
    assert!(
        t.contains(
            "af_xdp (native XDP, copy mode, multi-buffer frames, UMEM shared with the other side)"
        ),
        "{t}"
    );
}

/// Two uploads from each of hosts A and B (one on each worker) to sinks on `ports` for `secs`:
/// the sinks (reporting a second after) and the sender threads.
fn two_hosts_upload(
    bed: &Bed,
    ports: [u16; 2],
    secs: u32,
) -> (
    [std::process::Child; 2],
    [std::thread::JoinHandle<std::process::Output>; 2],
) {
    let c = ns(bed, "client");
    let sinks = ports.map(|p| spawn_sink(bed, p, secs + 2, &[]));
    std::thread::sleep(Duration::from_millis(300));
    let send = |port: u16, to: &str, from: &str| {
        let to = format!("{to}:{port}");
        let mut cmd = tcp_send(&c, &to, secs, "cubic", &["--bind", from, "--streams", "2"]);
        std::thread::spawn(move || cmd.output().expect("sender runs"))
    };
    let senders = [
        send(ports[0], "198.18.2.2", A),
        send(ports[1], "198.18.2.3", B),
    ];
    (sinks, senders)
}

/// `gateway reload` with two workers: the first reads the file and passes it on; both take the
/// new rate together, so the shaped total follows the file (10 → 20 Mbit/s), each host keeps
/// its half, and every frame stays accounted for.
#[test]
fn two_workers_take_a_reload_together() {
    let Some(_one) = guard() else { return };
    let dir = tempfile::tempdir().expect("tmp");
    let toml = dir.path().join("gateway.toml");
    let file = |rate: &str| {
        std::fs::write(
            &toml,
            format!("egress = \"cake bandwidth {rate} dual-srchost\"\ningress = \"fq_codel\"\n"),
        )
        .expect("toml")
    };
    file("10Mbit");
    let t = toml.to_string_lossy().into_owned();
    let spec = "cake bandwidth 10Mbit dual-srchost";
    let bed = up_extra(
        "r",
        "40Mbit",
        "20ms",
        spec,
        "fq_codel",
        &["--workers", "2", "--config", &t],
    );
    add_addresses(&bed);
    let watch = Watch::start();
    let ([sink_a, sink_b], senders) = two_hosts_upload(&bed, [5211, 5212], 11);
    let rx = RxSamples::start(&bed, "server");
    let rate = |from: Duration, len: Duration| {
        std::thread::sleep(from);
        let t0 = SystemTime::now();
        std::thread::sleep(len);
        rx.rate(t0, SystemTime::now())
    };
    let before = rate(Duration::from_secs(2), Duration::from_secs(2));
    file("20Mbit");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_debloat"))
        .args(["gateway", "reload", "--control"])
        .arg(testbed::control_socket(&bed.prefix))
        .output()
        .expect("reload");
    let reply = text(&o);
    println!("reload: {}", reply.trim());
    assert!(
        o.status.success() && reply.contains("passed to the other worker"),
        "{reply}"
    );
    // TCP takes its time to double its windows: read from 3 s after the reload (after 1.5 s
    // one CI run read 19.50, the flows still growing into the new rate).
    let after = rate(Duration::from_secs(3), Duration::from_secs(3));
    for s in senders {
        let o = s.join().expect("sender thread");
        assert!(o.status.success(), "tcp-send: {}", text(&o));
    }
    let (ma, mb) = (sink_mbps(sink_a), sink_mbps(sink_b));
    let host = watch.stop();
    println!(
        "2 workers, reload 10 → 20 Mbit/s: shaped {:.3} then {:.3} Mbit/s; hosts {ma:.2} and {mb:.2} Mbit/s; meanwhile {host}",
        before.bps / 1e6,
        after.bps / 1e6
    );
    judge_rate(&before, 10e6, 0.02, &host, "before");
    judge_rate(&after, 20e6, 0.02, &host, "after");
    let share = ma / (ma + mb);
    assert!((share - 0.5).abs() <= 0.05, "A's share {share:.3}");
    let j = gateway_stats(&bed);
    for dir in ["egress", "ingress"] {
        assert!(accounted(&j[dir]), "{dir}: {}", j[dir]);
    }
}

/// `--autorate-egress` with two workers: one controller, on the first worker, drives the total
/// the workers split. The bottleneck is beyond the gateway, as an ISP's link is beyond the
/// router: the kernel's tbf at 20 Mbit/s on the gateway's WAN port, 50 ms of queue (the
/// gateway's own link emulation is left fast: with several workers each emulates its own). The shaper starts at its base, 10 Mbit/s; the passive controller,
/// hearing the round trips of the first worker's TCP flows and the load of both, must raise the
/// total toward the link's rate, with one host on each worker keeping its half.
#[test]
fn two_workers_follow_one_rate_controller() {
    let Some(_one) = guard() else { return };
    let bed = up_extra(
        "a",
        "1Gbit",
        "20ms",
        "cake bandwidth 10Mbit dual-srchost",
        "fq_codel",
        // On TPACKET whatever the matrix asks: AF_XDP's transmit goes straight to the driver,
        // past wan0's qdisc, so the tbf below would not be a bottleneck (the matrix's run on
        // 2026-11-28 put 40.0 Mbit/s on the wire through it).
        &[
            "--workers",
            "2",
            "--io",
            "packet",
            "--autorate-egress",
            "min=5Mbit,base=10Mbit,max=40Mbit",
        ],
    );
    add_addresses(&bed);
    let o = testbed::in_ns(
        &ns(&bed, "gw"),
        &[
            "tc", "qdisc", "replace", "dev", "wan0", "root", "tbf", "rate", "20mbit", "burst",
            "32kb", "latency", "50ms",
        ],
    )
    .output()
    .expect("tc runs");
    assert!(
        o.status.success(),
        "tc (the host kernel's tbf): {}",
        text(&o)
    );
    let ([sink_a, sink_b], senders) = two_hosts_upload(&bed, [5221, 5222], 10);
    let rx = RxSamples::start(&bed, "server");
    std::thread::sleep(Duration::from_secs(6));
    let (t0, start) = (SystemTime::now(), std::time::Instant::now());
    // The controller's total is read while the load runs, every 250 ms: it climbs past the
    // link's rate, the tbf's queue grows, and a bufferbloat step cuts it by up to a quarter, so
    // one reading (at the end, say) can land anywhere on that saw-tooth.
    let mut rates = Vec::new();
    while start.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(250));
        let r = gateway_stats(&bed)["egress"]["autorate"]["rate_bps"].as_f64();
        rates.push(r.unwrap_or(0.0));
    }
    let wire = rx.rate_bps(t0, SystemTime::now());
    let mean_rate = rates.iter().sum::<f64>() / rates.len().max(1) as f64;
    for s in senders {
        let o = s.join().expect("sender thread");
        assert!(o.status.success(), "tcp-send: {}", text(&o));
    }
    let (ma, mb) = (sink_mbps(sink_a), sink_mbps(sink_b));
    let j = gateway_stats(&bed);
    let a = &j["egress"]["autorate"];
    println!(
        "2 workers, one passive controller: {:.3} Mbit/s on the wire from 6 to 9 s (base 10, link 20); the controller's total {:.2} Mbit/s on average over {} readings then; hosts {ma:.2} and {mb:.2} Mbit/s; controller at the end {a}",
        wire / 1e6,
        mean_rate / 1e6,
        rates.len()
    );
    assert!(a["decisions"].as_u64().unwrap_or(0) > 100, "{a}");
    assert!(a["samples"].as_u64().unwrap_or(0) > 100, "{a}");
    assert!(
        wire > 13e6,
        "the total stayed near the base: {wire:.0} bit/s"
    );
    assert!(
        wire < 20.4e6,
        "more than the 20 Mbit/s bottleneck crossed: {wire:.0} bit/s"
    );
    assert!(
        mean_rate > 12e6,
        "the controller's total while loaded: {rates:?} bit/s"
    );
    let share = ma / (ma + mb);
    assert!((share - 0.5).abs() <= 0.05, "A's share {share:.3}");
    for dir in ["egress", "ingress"] {
        assert!(accounted(&j[dir]), "{dir}: {}", j[dir]);
    }
}

/// LAN's lan0 deleted and made again under two workers on AF_XDP. Each worker notices on its
/// own and opens an AF_PACKET socket in the LAN's fanout group (the shared AF_XDP sockets are
/// made together, at start, and the side says so): each frame lan0 receives reaches one worker,
/// not each of them, and both hosts' uploads cross with every frame accounted for.
#[test]
fn two_workers_take_a_remade_interface_into_the_fanout_group() {
    let Some(_one) = guard() else { return };
    let bed = af_xdp_workers("wr");
    testbed::remake_lan(&bed.prefix).expect("lan0 made again");
    let t = std::time::Instant::now();
    while gateway_stats(&bed)["egress"]["reopened"] != 2 && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    testbed::lan_up(&bed.prefix).expect("lan0 up");
    let c = ns(&bed, "client");
    let o = testbed::in_ns(&c, &["ip", "addr", "add", "198.18.1.4/24", "dev", "eth0"])
        .output()
        .expect("ip runs");
    assert!(o.status.success(), "{}", text(&o));
    // As the testbed leaves a host beside an AF_XDP gateway: no offloads, so lan0 counts the
    // frames the workers count (a super-frame is one frame to lan0, several once cut).
    let o = testbed::in_ns(&c, &["ethtool", "-K", "eth0", "tx", "off"])
        .output()
        .expect("ethtool runs");
    assert!(o.status.success(), "{}", text(&o));
    let rx_packets = || {
        let o = testbed::in_ns(
            &ns(&bed, "gw"),
            &["cat", "/sys/class/net/lan0/statistics/rx_packets"],
        )
        .output()
        .expect("cat");
        String::from_utf8_lossy(&o.stdout)
            .trim()
            .parse::<u64>()
            .unwrap_or(0)
    };
    let received = || {
        gateway_stats(&bed)["egress"]["frames"]["received"]
            .as_u64()
            .unwrap_or(0)
    };
    // Settled: the hosts' neighbour discovery done, the workers' numbers published.
    std::thread::sleep(Duration::from_millis(1500));
    let (r0, s0) = (rx_packets(), received());
    let (sinks, senders) = two_hosts_upload(&bed, [5211, 5212], 4);
    for s in senders {
        let o = s.join().expect("sender thread");
        assert!(o.status.success(), "tcp-send: {}", text(&o));
    }
    let [ma, mb] = sinks.map(sink_mbps);
    std::thread::sleep(Duration::from_millis(300));
    let (r1, s1) = (rx_packets(), received());
    let j = gateway_stats(&bed);
    let ratio = (s1 - s0) as f64 / (r1 - r0).max(1) as f64;
    println!(
        "2 workers, lan0 made again: reopened {}; lan0 received {} frames, the workers {} ({ratio:.3}×); hosts {ma:.2} and {mb:.2} Mbit/s; lan side: {}",
        j["egress"]["reopened"],
        r1 - r0,
        s1 - s0,
        j["egress"]["io"]
    );
    assert_eq!(j["egress"]["reopened"], 2, "{}", j["egress"]);
    assert!(r1 - r0 > 3000, "lan0 received {} frames", r1 - r0);
    assert!(
        (ratio - 1.0).abs() <= 0.01,
        "workers received {ratio:.3}× lan0's frames"
    );
    assert!(ma > 5.0 && mb > 5.0, "hosts {ma:.2} and {mb:.2} Mbit/s");
    assert_eq!(j["egress"]["io"]["io"], "packet", "{}", j["egress"]["io"]);
    let why = j["egress"]["io"]["fallback"].as_str().unwrap_or("");
    assert!(why.contains("made again under 2 workers"), "{why}");
    for dir in ["egress", "ingress"] {
        assert!(accounted(&j[dir]), "{dir}: {}", j[dir]);
    }
}

/// An htb tree with host A's class guaranteed 5 Mbit/s and host B's 15, both allowed the whole
/// 20 (the hosts on different workers).
const TREE: &str = "htb default 20 class 1:1 rate 20Mbit \
    class 1:10 parent 1:1 rate 5Mbit ceil 20Mbit match src 198.18.1.2 \
    class 1:20 parent 1:1 rate 15Mbit ceil 20Mbit match src 198.18.1.4";

/// An htb tree split between two workers class by class (`htb_split`): with both hosts busy,
/// each gets its class's rate as one htb gives it (A a quarter, within 5 points; splitting the
/// root equally between the busy workers would give A half), the tree's 20 Mbit/s held to 1 %
/// (each worker running the whole tree at its full rates would pass up to 40); with B idle, A
/// borrows what B leaves (over 17.5 Mbit/s of goodput; its rate is 5). Every frame accounted
/// for.
#[test]
fn two_workers_split_an_htb_tree_class_by_class() {
    let Some(_one) = guard() else { return };
    let bed = up_extra(
        "wh",
        "40Mbit",
        "20ms",
        TREE,
        "fq_codel",
        &["--workers", "2"],
    );
    add_addresses(&bed);
    let c = ns(&bed, "client");
    let quarter = |ma: f64, mb: f64| (ma / (ma + mb) - 0.25).abs() <= 0.05;
    let ((ma, mb, wire, j), host) = again_if_the_host_stalled(
        "htb tree",
        || uploads_and_the_wire(&bed, [5221, 5222], ["2", "2"]),
        |r| quarter(r.0, r.1) && rate_ok(&r.2),
    );
    let share_a = ma / (ma + mb);
    let parts: Vec<String> = j["shards"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|s| s["egress_rate_bps"].to_string())
        .collect();
    println!(
        "2 workers, {TREE}: host A {ma:.2} Mbit/s, host B {mb:.2} Mbit/s, A's share {:.1} %; shaped rate {:.3} Mbit/s; the workers' parts {parts:?} bit/s",
        share_a * 100.0,
        wire.bps / 1e6
    );
    assert!(quarter(ma, mb), "A's share {share_a:.3}");
    judge_rate(&wire, RATE, 0.01, &host, "shaped");
    let sink = spawn_sink(&bed, 5223, 9, &[]);
    std::thread::sleep(Duration::from_millis(300));
    let o = upload(&c, "198.18.2.2:5223", A, "2", 7)
        .join()
        .expect("sender thread");
    assert!(o.status.success(), "tcp-send: {}", text(&o));
    let alone = sink_mbps(sink);
    println!("host A alone: {alone:.2} Mbit/s");
    assert!(alone > 17.5, "host A alone got {alone:.2} Mbit/s");
    let j = gateway_stats(&bed);
    for dir in ["egress", "ingress"] {
        assert!(accounted(&j[dir]), "{dir}: {}", j[dir]);
    }
}
