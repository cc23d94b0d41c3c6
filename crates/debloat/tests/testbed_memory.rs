//! Memory under attack (root: the testbed; SKIP elsewhere, failure under CI): a flood of small
//! frames from 65,535 hosts and flows (a new source every frame, 100,000 frames a second for
//! 8 s) at a 20 Mbit/s shaper. The discipline's memory limit is what bounds the gateway: its
//! resident memory (VmRSS, sampled every 200 ms) grows by at most the limit plus a fixed
//! overhead, and every frame stays accounted for. On AF_XDP the flood also fills the UMEM: the
//! frames the discipline queues are held where they were received until the UMEM has none to
//! spare, then copied (copy on pressure), and the fill ring is never starved.

mod common;
use common::bed::*;
use common::text;
use debloat_gateway::testbed;
use std::process::Stdio;
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_debloat");
const MIB: u64 = 1 << 20;

fn rss_bytes(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn flood(tag: &str, spec: &str, limit: u64, extra: &[&str]) -> serde_json::Value {
    let bed = up_extra(tag, "20Mbit", "4ms", spec, "fq_codel", extra);
    let pid = testbed::gateway_pid(&bed.prefix).expect("the gateway's pid");
    let mac = testbed::in_ns(&ns(&bed, "server"), &["cat", "/sys/class/net/eth0/address"])
        .output()
        .expect("mac");
    let mac = String::from_utf8_lossy(&mac.stdout).trim().to_string();
    // Warm up with a little traffic, then take the baseline.
    let _ = ping(&bed, testbed::SERVER_V4, 3);
    let idle = rss_bytes(pid);
    let blast = testbed::in_ns(
        &ns(&bed, "client"),
        &[
            EXE,
            "testbed",
            "blast",
            "--iface",
            "eth0",
            "--dst-mac",
            &mac,
            "--size",
            "60",
            "--flows",
            "65535",
            "--pps",
            "100000",
            "--seconds",
            "8",
            "--spread-sources",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("blast");
    let (t, mut peak) = (Instant::now(), idle);
    while t.elapsed() < Duration::from_secs(9) {
        peak = peak.max(rss_bytes(pid));
        std::thread::sleep(Duration::from_millis(200));
    }
    let b = blast.wait_with_output().expect("blast ends");
    assert!(b.status.success(), "{}", text(&b));
    let j = gateway_stats(&bed);
    let e = &j["egress"];
    let n = |v: &serde_json::Value| v.as_u64().unwrap_or(0);
    let f = &e["frames"];
    println!(
        "{spec}: RSS idle {:.1} MiB, peak {:.1} MiB (+{:.1} MiB; limit {} MiB); {} frames in, {} dropped by the discipline, blaster: {}",
        idle as f64 / MIB as f64,
        peak as f64 / MIB as f64,
        (peak - idle) as f64 / MIB as f64,
        limit / MIB,
        n(&f["received"]),
        n(&f["qdisc_dropped"]),
        String::from_utf8_lossy(&b.stdout).trim()
    );
    assert!(n(&f["received"]) > 200_000, "the flood did not arrive: {f}");
    assert!(
        n(&f["qdisc_dropped"]) > 0,
        "the discipline never reached its limit: {f}"
    );
    assert!(accounted(e), "{e}");
    // The limit counts each frame's whole allocation (truesize); the rest is fixed: buffers the
    // receive rings and sendmmsg batches grow into, malloc's arenas.
    assert!(
        peak - idle <= limit + 16 * MIB,
        "RSS grew {} bytes",
        peak - idle
    );
    // Still forwarding once the flood is over: no ring was left without frames.
    assert_eq!(
        ping(&bed, testbed::SERVER_V4, 3).len(),
        3,
        "after the flood"
    );
    e.clone()
}

#[test]
fn a_flood_from_65535_hosts_is_bounded_by_the_memory_limit() {
    let Some(_one) = guard() else { return };
    flood("m", "cake bandwidth 20Mbit memlimit 8mb", 8 * MIB, &[]);
    flood("n", "fq_codel memory_limit 8mb", 8 * MIB, &[]);
}

/// The same flood through AF_XDP: cake's 8 MB hold about 40,000 of these frames, ten times
/// what the UMEM lets the data path hold (2,048 frames a queue, two queues), so the first
/// frames queued stay in the UMEM and the rest are copied into the heap.
#[test]
fn a_flood_through_af_xdp_spills_from_the_umem_into_the_heap() {
    let Some(_one) = guard() else { return };
    let e = flood(
        "u",
        "cake bandwidth 20Mbit memlimit 8mb",
        8 * MIB,
        &["--io", "af_xdp"],
    );
    let n = |v: &serde_json::Value| v.as_u64().unwrap_or(0);
    let (held, copied) = (n(&e["umem_held"]), n(&e["umem_copied"]));
    println!("AF_XDP: {held} frames held in the UMEM, {copied} copied");
    assert!(held > 4_096, "frames were not held in the UMEM: {e}");
    assert!(
        copied > 10_000,
        "a full UMEM did not spill into the heap: {e}"
    );
    assert_eq!(
        held + copied,
        n(&e["frames"]["received"]),
        "every frame was held or copied: {e}"
    );
}
