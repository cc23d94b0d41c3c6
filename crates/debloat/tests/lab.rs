//! Ground truth from the real kernel (User-Mode Linux, Debian unstable's Linux 7.2, which the
//! lab fetches itself): `debloat spec` prints exactly what `tc -s qdisc show` prints for 34
//! specs of every discipline family and for times of any value, on a veth (MTU 1500), the
//! handle aside. Needs `kmod`, `patchelf` and apt reaching the Debian archive (once); without
//! them the test prints SKIP, and under CI (`CI` set) it fails, since `.ci/run` installs them.

mod common;
use common::{debloat, text};

const SPECS: [&str; 34] = [
    "pfifo limit 1000",
    "bfifo limit 100000",
    "pfifo_fast",
    "codel",
    "codel target 3ms interval 50ms limit 500 ecn",
    "fq_codel",
    "fq_codel limit 1001 noecn",
    "fq_codel target 3ms interval 50ms quantum 300 flows 256 memory_limit 4Mb",
    "fq_codel ce_threshold 2ms",
    "cake",
    "cake bandwidth 20Mbit",
    "cake bandwidth 20Mbit diffserv4",
    "cake bandwidth 20Mbit diffserv8 nat dual-srchost",
    "cake bandwidth 100Mbit besteffort flows ack-filter",
    "cake bandwidth 19Mbit triple-isolate rtt 20ms",
    "cake bandwidth 10Mbit atm overhead 44 mpu 84",
    "cake bandwidth 50Mbit ptm overhead 30 ingress",
    "cake bandwidth 1Gbit diffserv3 wash ack-filter-aggressive",
    "cake unlimited dual-dsthost lan",
    "cake bandwidth 2Mbit pppoe-vcmux",
    "cake bandwidth 30Mbit autorate-ingress ingress",
    "cake bandwidth 40Mbit docsis memlimit 8Mb",
    // tupdate in whole 10 ms: the lab's kernel counts it in jiffies of HZ=100 (docs/algorithms.md §6.1).
    "pie tupdate 30ms",
    "pie limit 500 target 20ms tupdate 20ms alpha 4 beta 30 ecn bytemode",
    "pie target 1234us tupdate 10ms alpha 0 dq_rate_estimator",
    "tbf rate 10Mbit burst 10kb latency 50ms",
    "tbf rate 20Mbit burst 32kb latency 400ms peakrate 40Mbit mtu 1540",
    "tbf rate 100Mbit burst 100kb limit 1mb mpu 64 overhead 24",
    "tbf rate 500kbit burst 3000 limit 500",
    // refill_delay in whole 10 ms too (jiffies of HZ=100).
    "fq",
    "fq limit 500 flow_limit 50 quantum 3000 initial_quantum 15000 maxrate 10Mbit refill_delay 20ms ce_threshold 3ms horizon 2s horizon_cap low_rate_threshold 1Mbit orphan_mask 511 buckets 256 nopacing",
    "fq buckets 3 maxrate 1234567bit ce_threshold 1500us timer_slack 20us low_rate_threshold 0",
    // htb: the qdisc and its classes (`tc -s class show`), leaves' own disciplines, tc's
    // default bursts and quanta, ATM framing, every kind of match as a tc filter.
    "htb default 11 class 1:1 rate 10Mbit class 1:10 parent 1:1 rate 3Mbit ceil 10Mbit prio 1 qdisc fq_codel class 1:11 parent 1:1 rate 7Mbit ceil 10Mbit prio 2 quantum 1514 burst 15k cburst 3000 qdisc pfifo limit 50 class 1:12 parent 1:1 rate 100kbit ceil 200kbit",
    "htb r2q 5 direct_qlen 50 class 1:1 rate 1Gbit class 1:2 rate 1Mbit ceil 2Mbit overhead 18 mpu 64 linklayer atm match dscp 46 match src 198.18.0.0/24 match dst 2001:2::/48 match mark 7 qdisc cake bandwidth 2Mbit class 1:a0 rate 500kbit",
];

#[test]
fn debloat_spec_prints_what_the_kernels_tc_prints() {
    if let Err(e) = debloat_lab::Lab::find() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have the kernel lab: {e}"
        );
        println!("SKIP debloat_spec_prints_what_the_kernels_tc_prints: {e}");
        return;
    }
    let mut args = vec!["lab", "spec"];
    args.extend_from_slice(&SPECS);
    let o = debloat(&args);
    let t = text(&o);
    println!("{t}");
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains("34 specs: debloat prints what the kernel's tc prints"),
        "{t}"
    );
    // The comparison is real: the kernel's text is in the output, e.g. cake's tin table.
    assert!(
        t.contains("                   Bulk  Best Effort        Video        Voice"),
        "{t}"
    );
}

/// Times printed as iproute2 prints them (three significant digits of what the kernel gives
/// back), for values that are not round: 53 specs from a fixed seed, one guest.
#[test]
fn times_of_any_value_print_as_the_kernels_tc_prints_them() {
    if let Err(e) = debloat_lab::Lab::find() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have the kernel lab: {e}"
        );
        println!("SKIP times_of_any_value_print_as_the_kernels_tc_prints_them: {e}");
        return;
    }
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = |lo: u64, hi: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        lo + x % (hi - lo)
    };
    let mut specs = vec!["fq_codel ce_threshold 1024000".to_string()];
    for _ in 0..13 {
        let (t, i, ce) = (next(1, 50_000), next(1, 3_000_000), next(1, 5_000_000));
        specs.push(format!(
            "fq_codel target {t}us interval {i}us ce_threshold {ce}us"
        ));
        specs.push(format!("codel target {t}us interval {i}us"));
        specs.push(format!(
            "cake bandwidth 20Mbit rtt {}us",
            next(1, 3_000_000)
        ));
        specs.push(format!("pie target {t}us tupdate 10ms"));
    }
    let mut args = vec!["lab", "spec"];
    args.extend(specs.iter().map(String::as_str));
    let o = debloat(&args);
    let t = text(&o);
    println!("{t}");
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains("53 specs: debloat prints what the kernel's tc prints (Linux "),
        "{t}"
    );
    assert!(t.contains("ce_threshold 1.02s"), "{t}");
}

#[test]
fn a_different_spec_is_reported_as_different() {
    let Ok(lab) = debloat_lab::Lab::find() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have the kernel lab"
        );
        println!("SKIP a_different_spec_is_reported_as_different: no kernel lab");
        return;
    };
    // The kernel's text for one spec against ours for another: the comparison must notice.
    let o = lab
        .run(&debloat_lab::tc_show_script(&["codel".into()]), None)
        .expect("the lab runs");
    let (_, tc) = debloat_lab::split_tc_show(&o.stdout)
        .pop()
        .expect("tc printed the qdisc");
    let ours = debloat(&["spec", "codel target 3ms"]);
    assert!(tc.starts_with("qdisc codel 1: root refcnt 2 limit 1000p target 5ms"));
    assert_ne!(tc, String::from_utf8_lossy(&ours.stdout));
}

#[test]
#[ignore = "long tier: scripts/long-tests.sh; dated results in docs/testing.md"]
fn the_kernels_cake_and_the_gateways_are_costed_in_one_guest() {
    if let Err(e) = debloat_lab::Lab::find() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have the kernel lab: {e}"
        );
        println!("SKIP the_kernels_cake_and_the_gateways_are_costed_in_one_guest: {e}");
        return;
    }
    // Short trials: this checks that the comparison is made, not what it finds (a benchmark's
    // figures belong in BENCHMARKS.md, from full runs).
    let o = debloat(&[
        "lab",
        "bench",
        "--qdisc",
        "cake besteffort",
        "--trial",
        "0.5",
        "--pings",
        "50",
    ]);
    let t = text(&o);
    println!("{t}");
    assert!(o.status.success(), "{t}");
    // The table, after the search's progress lines.
    let table = t
        .split("64 B: kpps")
        .nth(1)
        .unwrap_or_else(|| panic!("no throughput table:\n{t}"));
    let kpps_64 = |row: &str| -> f64 {
        let line = table
            .lines()
            .find(|l| l.starts_with(row))
            .unwrap_or_else(|| panic!("no row \"{row}\" in:\n{t}"));
        line[row.len()..]
            .split_whitespace()
            .next()
            .and_then(|w| w.trim_start_matches('≥').parse().ok())
            .unwrap_or_else(|| panic!("no kpps in \"{line}\""))
    };
    for row in [
        "kernel bridge  ",
        "kernel bridge + cake besteffort",
        "debloat gateway, cake besteffort",
    ] {
        assert!(kpps_64(row) > 1.0, "{row} forwarded nothing:\n{t}");
    }
    assert!(
        t.contains("gateway / kernel bridge + cake besteffort"),
        "{t}"
    );
    // The kernel's cake was in the path: it sent at least what the search's trials delivered.
    let sent: u64 = t
        .split("the kernel's cake on wan0 sent ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no count from the kernel's cake:\n{t}"));
    let delivered = kpps_64("kernel bridge + cake besteffort") * 1e3 * 0.5;
    assert!(
        sent as f64 >= delivered,
        "cake sent {sent}, trials delivered {delivered}:\n{t}"
    );
    assert!(t.contains("ns a system call (getpid)"), "{t}");
    // A spec the gateway cannot take is named before anything runs.
    let o = debloat(&["lab", "bench", "--qdisc", "cake bogus"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("bogus"), "{}", text(&o));
}
