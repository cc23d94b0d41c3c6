//! LibreQoS's circuits on real TCP (root: the testbed; SKIP elsewhere, failure under CI): two
//! client addresses are two circuits of 12 and 4 Mbit/s under one access point, on a 40-Mbit/s
//! emulated link, each uploading with CUBIC; each gets its circuit's ceiling (within 5 %), the
//! gateway counts every packet by address. Then a reload of files that raise the second
//! circuit to 8 Mbit/s under load: taken in place (`tc class change`), no frame moved or
//! dropped by it, and the second circuit's rate follows. Last, files of another shape under
//! load (the first circuit moved to a new access point, the second removed, a third added):
//! the trees are reshaped in place, no frame requeued or refused, every frame accounted for;
//! the first circuit keeps its ceiling and the second's host, now in the default class, is no
//! longer held to 8 Mbit/s.

mod common;
use common::bed::*;
use common::stalls::judge_timing;
use common::text;
use debloat_gateway::testbed;
use debloat_gateway::tools::host_stalls::Watch;
use std::process::Command;
use std::time::Duration;

const EXE: &str = env!("CARGO_BIN_EXE_debloat");
const NETWORK: &str = r#"{"AP": {"downloadBandwidthMbps": 100, "uploadBandwidthMbps": 100}}"#;

/// The shape after: a second access point, the first circuit moved to it, the second gone,
/// a third (no traffic) added.
const NETWORK_AFTER: &str = r#"{"AP": {"downloadBandwidthMbps": 100, "uploadBandwidthMbps": 100},
  "AP2": {"downloadBandwidthMbps": 100, "uploadBandwidthMbps": 100}}"#;
const DEVICES_AFTER: &str = "Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment\n\
     1,first,1,a,AP2,,198.18.1.2,,1,1,12,12,\n\
     3,third,3,c,AP,,198.18.1.9,,1,1,20,20,\n";

fn devices(second_mbps: u32) -> String {
    format!(
        "Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment\n\
         1,first,1,a,AP,,198.18.1.2,,1,1,12,12,\n\
         2,second,2,b,AP,,198.18.1.3,,1,1,{second_mbps},{second_mbps},\n"
    )
}

/// Two uploads (two streams each) for `secs`, from each circuit's address to its own sink;
/// each one's goodput, Mbit/s, over the last `secs - 3` seconds.
fn uploads(bed: &Bed, secs: u32, during: impl FnOnce()) -> (f64, f64) {
    let got = uploads_from(
        bed,
        secs,
        &[(5201, "198.18.1.2"), (5202, "198.18.1.3")],
        during,
    );
    (got[0], got[1])
}

/// An upload (two streams) for `secs` from each address given to its own sink port; each
/// one's goodput, Mbit/s, over the last `secs - 3` seconds.
fn uploads_from(bed: &Bed, secs: u32, from: &[(u16, &str)], during: impl FnOnce()) -> Vec<f64> {
    let omit = ["--omit", "3"];
    let sinks: Vec<_> = from
        .iter()
        .map(|(port, _)| spawn_sink(bed, *port, secs + 3, &omit))
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let client = ns(bed, "client");
    let senders: Vec<_> = from
        .iter()
        .map(|(port, addr)| {
            let mut c = tcp_send(
                &client,
                &format!("198.18.2.2:{port}"),
                secs,
                "cubic",
                &["--streams", "2", "--bind", addr],
            );
            std::thread::spawn(move || c.output().expect("sender"))
        })
        .collect();
    during();
    for s in senders {
        let o = s.join().expect("sender thread");
        assert!(o.status.success(), "tcp-send: {}", text(&o));
    }
    sinks.into_iter().map(sink_mbps).collect()
}

/// `gateway reload` one second into `secs` of uploads from both addresses: its reply, the
/// statistics just before it, and each address's goodput.
fn reload_under_load(bed: &Bed, secs: u32) -> (String, serde_json::Value, f64, f64) {
    let from = [(5201, "198.18.1.2"), (5202, "198.18.1.3")];
    let (said, before, got) = reload_under(bed, secs, &from);
    (said, before, got[0], got[1])
}

/// `gateway reload` one second into `secs` of uploads from the addresses given: its reply,
/// the statistics just before it, and each address's goodput.
fn reload_under(
    bed: &Bed,
    secs: u32,
    from: &[(u16, &str)],
) -> (String, serde_json::Value, Vec<f64>) {
    let said = std::cell::RefCell::new(String::new());
    let before = std::cell::RefCell::new(serde_json::Value::Null);
    let got = uploads_from(bed, secs, from, || {
        std::thread::sleep(Duration::from_secs(1));
        *before.borrow_mut() = gateway_stats(bed);
        let o = Command::new(EXE)
            .args(["gateway", "reload", "--control"])
            .arg(testbed::control_socket(&bed.prefix))
            .output()
            .expect("reload");
        *said.borrow_mut() = text(&o);
    });
    (said.into_inner(), before.into_inner(), got)
}

#[test]
fn circuits_get_their_ceilings_and_change_in_place() {
    let Some(_one) = guard() else { return };
    let dir = tempfile::tempdir().expect("tmp");
    let (n, d) = (
        dir.path().join("network.json"),
        dir.path().join("ShapedDevices.csv"),
    );
    std::fs::write(&n, NETWORK).expect("write");
    std::fs::write(&d, devices(4)).expect("write");
    let (ns_, ds) = (
        n.to_string_lossy().into_owned(),
        d.to_string_lossy().into_owned(),
    );
    let bed = up_extra(
        "c",
        "40Mbit",
        "20ms",
        "fq_codel",
        "fq_codel",
        &["--network", &ns_, "--devices", &ds],
    );
    let client = ns(&bed, "client");
    let o = Command::new("ip")
        .args(["-n", &client, "addr", "add", "198.18.1.3/24", "dev", "eth0"])
        .output()
        .expect("ip");
    assert!(o.status.success(), "{}", text(&o));
    let watch = Watch::start();
    let (a, b) = uploads(&bed, 10, || {});
    let host = watch.stop();
    println!("circuit 1 (12 Mbit/s): {a:.2} Mbit/s; circuit 2 (4 Mbit/s): {b:.2} Mbit/s; meanwhile {host}");
    // Goodput is the ceiling less the headers (1448 of 1514 bytes: 4.4 %).
    for (got, ceil) in [(a, 12.0), (b, 4.0)] {
        let want = ceil * 1448.0 / 1514.0;
        let figure = format!("{got:.2} Mbit/s for a {ceil} Mbit/s circuit");
        judge_timing((got - want).abs() <= 0.05 * want, &host, &figure);
    }
    let st = gateway_stats(&bed);
    assert!(
        st["circuits"]["by_address"].as_u64().unwrap_or(0) > 1000,
        "{st}"
    );
    // The second circuit raised to 8 Mbit/s, applied under load.
    std::fs::write(&d, devices(8)).expect("write");
    let watch = Watch::start();
    let (said, before, a, b) = reload_under_load(&bed, 10);
    let host = watch.stop();
    println!("{said}after: circuit 1 {a:.2}, circuit 2 {b:.2} Mbit/s; meanwhile {host}");
    assert_eq!(
        said.matches(": 1 class changed in place, no frame moved")
            .count(),
        2,
        "{said}"
    );
    assert!(!said.contains("moved, "), "nothing replaced: {said}");
    let after = gateway_stats(&bed);
    assert!(
        accounted(&after["egress"]) && accounted(&after["ingress"]),
        "{after}"
    );
    let drops = |v: &serde_json::Value| v["egress"]["stats"]["drops"].as_u64().unwrap_or(0);
    println!(
        "egress drops before the reload {}, at the end {}",
        drops(&before),
        drops(&after)
    );
    let want = 8.0 * 1448.0 / 1514.0;
    judge_timing(
        b > 0.85 * want && b < 1.05 * want,
        &host,
        &format!("the raised circuit: {b:.2} Mbit/s"),
    );
    reshaped_under_load(&bed, &n, &d);
}

/// The third phase: files of another shape, reloaded one second into uploads from both
/// addresses.
fn reshaped_under_load(bed: &Bed, n: &std::path::Path, d: &std::path::Path) {
    std::fs::write(n, NETWORK_AFTER).expect("write");
    std::fs::write(d, DEVICES_AFTER).expect("write");
    let watch = Watch::start();
    let (said, _, a, b) = reload_under_load(bed, 7);
    let host = watch.stop();
    println!("{said}after the reshape: circuit 1 {a:.2}, the second address {b:.2} Mbit/s; meanwhile {host}");
    assert_eq!(
        said.matches(": reshaped in place: 2 classes added, 1 removed, 1 moved")
            .count(),
        2,
        "{said}"
    );
    assert_eq!(said.matches(" requeued (0 refused)").count(), 2, "{said}");
    assert!(said.contains(" 0 requeued"), "no frame moved: {said}");
    let after = gateway_stats(bed);
    assert!(
        accounted(&after["egress"]) && accounted(&after["ingress"]),
        "{after}"
    );
    let want = 12.0 * 1448.0 / 1514.0;
    judge_timing(
        (a - want).abs() <= 0.05 * want,
        &host,
        &format!("the moved circuit: {a:.2} Mbit/s"),
    );
    // No longer held to 8 Mbit/s: a plain count of more than its old ceiling, judged whatever
    // the host did.
    assert!(
        b > 1.5 * 8.0,
        "the removed circuit's host, in the default class: {b:.2} Mbit/s"
    );
}

/// Under two workers: circuit 1 has two devices whose addresses hash to different workers, so
/// its class is split between them (`htb_split`); circuit 2 has one. Each circuit is held to
/// its ceiling in all (within 5 %), every frame is accounted for, and `gateway stats --circuit`
/// sums both workers' copies of the class, listing each one's part.
#[test]
fn circuits_hold_their_ceilings_across_two_workers() {
    let Some(_one) = guard() else { return };
    let shard = |ip: &str| debloat_gateway::sys::shard_of_ip(ip.parse().expect("ip"), 2);
    assert_ne!(
        shard("198.18.1.2"),
        shard("198.18.1.4"),
        "the test's premise"
    );
    let dir = tempfile::tempdir().expect("tmp");
    let (n, d) = (
        dir.path().join("network.json"),
        dir.path().join("ShapedDevices.csv"),
    );
    std::fs::write(&n, NETWORK).expect("write");
    std::fs::write(&d, TWO_WORKERS).expect("write");
    let (ns_, ds) = (
        n.to_string_lossy().into_owned(),
        d.to_string_lossy().into_owned(),
    );
    let extra = [
        "--network",
        &ns_,
        "--devices",
        &ds,
        "--workers",
        "2",
        "--metrics",
        "9464",
    ];
    let bed = up_extra("w", "40Mbit", "20ms", "fq_codel", "fq_codel", &extra);
    let client = ns(&bed, "client");
    for a in ["198.18.1.3/24", "198.18.1.4/24"] {
        let o = Command::new("ip")
            .args(["-n", &client, "addr", "add", a, "dev", "eth0"])
            .output()
            .expect("ip");
        assert!(o.status.success(), "{}", text(&o));
    }
    let from = [
        (5201, "198.18.1.2"),
        (5202, "198.18.1.4"),
        (5203, "198.18.1.3"),
    ];
    let watch = Watch::start();
    let got = uploads_from(&bed, 10, &from, || {});
    let host = watch.stop();
    let (first, second) = (got[0] + got[1], got[2]);
    println!(
        "two workers: circuit 1 (12 Mbit/s) {first:.2} Mbit/s ({:.2} + {:.2} from its two devices); circuit 2 (4 Mbit/s) {second:.2}; meanwhile {host}",
        got[0], got[1]
    );
    for (got, ceil) in [(first, 12.0), (second, 4.0)] {
        let want = ceil * 1448.0 / 1514.0;
        let figure = format!("{got:.2} Mbit/s for a {ceil} Mbit/s circuit");
        judge_timing((got - want).abs() <= 0.05 * want, &host, &figure);
    }
    // The metrics are published once a second: let them catch up with the finished uploads.
    std::thread::sleep(Duration::from_millis(1500));
    let st = gateway_stats(&bed);
    assert_eq!(st["workers"], 2, "{st}");
    assert!(
        accounted(&st["egress"]) && accounted(&st["ingress"]),
        "{st}"
    );
    let o = Command::new(EXE)
        .args(["gateway", "stats", "--circuit", "1", "--json", "--control"])
        .arg(testbed::control_socket(&bed.prefix))
        .output()
        .expect("stats");
    assert!(o.status.success(), "{}", text(&o));
    let c: serde_json::Value = serde_json::from_slice(&o.stdout).expect("circuit JSON");
    let parts = c["per_worker"].as_array().expect("each worker's part");
    let bytes = |v: &serde_json::Value| v["upload"]["bytes"].as_u64().unwrap_or(0);
    println!(
        "circuit 1: {} bytes up in all; worker parts {:?}",
        bytes(&c),
        parts.iter().map(bytes).collect::<Vec<_>>()
    );
    assert_eq!(c["workers_not_answering"], serde_json::json!([]), "{c}");
    assert_eq!(parts.len(), 2, "{c}");
    // Both workers carried the circuit, and the answer is their sum.
    assert!(parts.iter().all(|p| bytes(p) > 1_000_000), "{c}");
    assert_eq!(bytes(&c), parts.iter().map(bytes).sum::<u64>(), "{c}");
    // Prometheus has the same sum (each worker's list of busiest circuits merged).
    let page = scrape(&bed);
    let key = "debloat_circuit_bytes_total{circuit=\"1\",direction=\"egress\"} ";
    let prom: Option<u64> = page
        .lines()
        .find_map(|l| l.strip_prefix(key)?.trim().parse().ok());
    assert_eq!(prom, Some(bytes(&c)), "{key} in\n{page}");
    let text_reply = Command::new(EXE)
        .args(["gateway", "stats", "--circuit", "1", "--control"])
        .arg(testbed::control_socket(&bed.prefix))
        .output()
        .expect("stats");
    let t = text(&text_reply);
    assert!(
        t.contains("summed over 2 of 2 workers") && t.contains("worker 1: upload"),
        "{t}"
    );
    // Circuit 1 raised to 16 Mbit/s under load: the first worker applies it and passes it on,
    // and the circuit, split between the workers, follows.
    std::fs::write(&d, TWO_WORKERS.replace(",12,12,", ",16,16,")).expect("write");
    let watch = Watch::start();
    let (said, _, got) = reload_under(&bed, 10, &from);
    let host = watch.stop();
    let first = got[0] + got[1];
    println!("{said}after: circuit 1 {first:.2} Mbit/s ({:.2} + {:.2}), circuit 2 {:.2}; meanwhile {host}", got[0], got[1], got[2]);
    assert!(said.contains("other worker"), "passed on: {said}");
    let after = gateway_stats(&bed);
    assert!(
        accounted(&after["egress"]) && accounted(&after["ingress"]),
        "{after}"
    );
    let want = 16.0 * 1448.0 / 1514.0;
    judge_timing(
        first > 0.85 * want && first < 1.05 * want,
        &host,
        &format!("the raised circuit across two workers: {first:.2} Mbit/s"),
    );
}

/// Circuit 1 with two devices (198.18.1.2 and .4, on different workers), circuit 2 with one.
const TWO_WORKERS: &str = "Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment\n\
     1,first,1,a,AP,,198.18.1.2,,1,1,12,12,\n\
     1,first,4,d,AP,,198.18.1.4,,1,1,12,12,\n\
     2,second,2,b,AP,,198.18.1.3,,1,1,4,4,\n";

/// The gateway's Prometheus page, from inside its namespace (`--metrics 9464`).
fn scrape(bed: &Bed) -> String {
    let o = testbed::in_ns(
        &ns(bed, "gw"),
        &[
            "bash",
            "-c",
            "exec 3<>/dev/tcp/127.0.0.1/9464; printf 'GET /metrics HTTP/1.0\\r\\n\\r\\n' >&3; cat <&3",
        ],
    )
    .output()
    .expect("bash runs");
    String::from_utf8_lossy(&o.stdout).into_owned()
}
