//! Ground truth, side by side: the same real kernel TCP uploads through the lab kernel's (Linux 7.2)
//! discipline (bridge, HTB where the spec does not shape) and through `debloat gateway` with the
//! same spec, one after the other in one User-Mode Linux guest (`debloat lab compare`). Each
//! test asserts that every figure agrees within the tolerances of
//! `debloat_lab::side::compare` (latency added by load, goodput, host shares, drop and mark
//! rates, CAKE's tin shares) and that the figure the family is about was really exercised. A
//! comparison that differs while the host stole the machine's CPU runs once more, and a figure
//! the stolen CPU decided is printed but not judged (docs/kernel-lab.md, "the host stealing the CPU").
//! One test runs the diagnostic arrangement (`--kernel-via-gateway --kernel-first`).
//!
//! Needs `kmod`, `patchelf` and (once) apt reaching the Debian archive for the lab's kernel;
//! without them each test prints SKIP, and under CI (`CI` set) it fails, since `.ci/run`
//! installs them. The runs take turns (one guest at a time), so they do not share the two CPUs
//! with each other. Eight of the eleven are in the long tier (`scripts/long-tests.sh`,
//! docs/testing.md).

mod common;
use common::{debloat, text};
use debloat_gateway::tools::host_stalls::HostStalls;
use std::sync::Mutex;

static ONE_GUEST: Mutex<()> = Mutex::new(());

/// Run `debloat lab compare` with these arguments, 20 s a side; the result's JSON, or None
/// (SKIP).
fn compare(name: &str, args: &[&str]) -> Option<serde_json::Value> {
    compare_for(name, args, "20")
}

/// [`compare`] with this many seconds of load a side (the first 5 omitted).
fn compare_for(name: &str, args: &[&str], seconds: &str) -> Option<serde_json::Value> {
    if let Err(e) = debloat_lab::Lab::find() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have the kernel lab: {e}"
        );
        println!("SKIP {name}: {e}");
        return None;
    }
    let _turn = ONE_GUEST.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("side.json");
    let json_s = json.to_string_lossy().into_owned();
    let mut all = vec!["lab", "compare"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--seconds", seconds, "--omit", "5", "--json", &json_s]);
    let o = debloat(&all);
    let t = text(&o);
    println!("{name}:\n{t}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap_or_default())
            .unwrap_or_else(|e| panic!("{name}: no result ({e}):\n{t}"));
    assert!(
        o.status.success(),
        "{name}: the kernel and debloat differ beyond the tolerances:\n{t}"
    );
    Some(v)
}

fn num(v: &serde_json::Value, side: &str, path: &[&str]) -> f64 {
    let mut x = &v[side];
    for p in path {
        x = &x[*p];
    }
    x.as_f64().unwrap_or(f64::NAN)
}

/// Drops over offered packets of one side's up direction.
fn drop_rate(v: &serde_json::Value, side: &str) -> f64 {
    let (p, d) = (
        num(v, side, &["up", "packets"]),
        num(v, side, &["up", "drops"]),
    );
    d / (p + d)
}

/// One side's goodput, every host together, bit/s.
fn goodput(v: &serde_json::Value, side: &str) -> f64 {
    v[side]["host_bps"]
        .as_array()
        .map_or(0.0, |h| h.iter().filter_map(|x| x.as_f64()).sum())
}

/// In the long tier since 2026-11-27, session 8 (≈ 55 s of CI's 30 minutes; the PI-55 row on
/// the kernel's own qdiscs is there too, `lab_reproduce`). In CI, fq_codel stays compared with
/// the kernel's through the ECN run below and `tests/lab.rs`'s text and statistics.
#[test]
#[ignore = "long tier: scripts/long-tests.sh; dated results in docs/testing.md"]
fn fq_codel_without_ecn_drops_as_the_kernels_on_pi_55s_link() {
    let Some(v) = compare(
        "fq_codel noecn, PI-55's link",
        &[
            "fq_codel limit 1001 noecn",
            "--rate",
            "5500kbit/500kbit",
            "--delay",
            "2ms",
        ],
    ) else {
        return;
    };
    // PI-55's figure: both drop several percent of what is offered.
    for side in ["kernel", "debloat"] {
        let r = drop_rate(&v, side);
        assert!((0.02..0.15).contains(&r), "{side} dropped {r}");
    }
}

/// In the long tier since 2026-11-29, session 20 (≈ 78 s of a CI run that had reached 32.9
/// minutes on an Intel host). In CI the kernel stays compared through cake besteffort below,
/// `tests/lab.rs` compares fq_codel's words and statistics with `tc`'s, and fq_codel's ECN
/// marking by the core's tests (`debloat-core/tests/fq_codel.rs`) and over simulated TCP
/// (`with_ecn_and_fq_codel_a_flow_sees_marks_and_no_drops`).
#[test]
#[ignore = "long tier: scripts/long-tests.sh; dated results in docs/testing.md"]
fn fq_codel_with_ecn_marks_as_the_kernels() {
    let Some(v) = compare(
        "fq_codel ecn",
        &[
            "fq_codel",
            "--ecn",
            "--rate",
            "10Mbit/2Mbit",
            "--delay",
            "10ms",
        ],
    ) else {
        return;
    };
    for side in ["kernel", "debloat"] {
        let marks = num(&v, side, &["up", "marks"]);
        assert!(
            marks > 100.0,
            "{side}: {marks} CE marks: ECN was not negotiated"
        );
        assert!(
            drop_rate(&v, side) < 0.005,
            "{side} dropped instead of marking"
        );
    }
}

/// In the long tier since 2026-11-27 (about 100 s of CI's 30 minutes, paid for the Python
/// package's tests). In CI the kernel's CoDel stays compared through fq_codel above, and
/// `tests/lab.rs` compares codel's and pfifo's words and statistics with `tc`'s.
#[test]
#[ignore = "long tier: scripts/long-tests.sh; dated results in docs/testing.md"]
fn codel_and_a_short_fifo_behave_as_the_kernels() {
    for (name, spec) in [("codel", "codel"), ("pfifo limit 50", "pfifo limit 50")] {
        let Some(v) = compare(name, &[spec, "--rate", "10Mbit/2Mbit", "--delay", "10ms"]) else {
            return;
        };
        for side in ["kernel", "debloat"] {
            assert!(
                num(&v, side, &["up", "drops"]) > 0.0,
                "{name}: {side} never dropped"
            );
        }
    }
}

/// HTB as the kernel's: two classes under a 10 Mbit/s parent, guaranteed 2 and 6 Mbit/s, each
/// host's TCP in its own (by source address), both borrowing the 2 Mbit/s left over (a third
/// class, for what no match takes, holds only the pings). Each keeps its rate and the spare is
/// shared by quanta (rate / r2q: 1 : 3), so the shares are 25 % and 75 % — on both sides,
/// within 5 points of each other, the goodput within 3 %.
///
/// In the long tier since 2026-11-29, session 20 (≈ 78 s of a CI run that had reached 32.9
/// minutes; also the comparison a stall inside the guest, which the host's watch cannot see,
/// failed twice in CI: docs/kernel-lab.md). In CI, HTB stays checked by the core's conformance
/// tests, `tests/lab.rs`'s words and statistics against `tc`'s, and through the gateway on real
/// TCP (`testbed_workers`: an htb tree split over two workers).
#[test]
#[ignore = "long tier: scripts/long-tests.sh; dated results in docs/testing.md"]
fn htb_borrowing_shares_as_the_kernels() {
    let tree = "htb default 30 class 1:1 rate 10Mbit \
        class 1:10 parent 1:1 rate 2Mbit ceil 10Mbit match src 198.18.1.2 qdisc fq_codel \
        class 1:20 parent 1:1 rate 6Mbit ceil 10Mbit match src 198.18.1.3 qdisc fq_codel \
        class 1:30 parent 1:1 rate 2Mbit ceil 10Mbit qdisc fq_codel";
    let Some(v) = compare(
        "htb borrowing",
        &[
            tree,
            "--down",
            "fq_codel",
            "--rate",
            "10Mbit/2Mbit",
            "--hosts",
            "2,2",
        ],
    ) else {
        return;
    };
    let share = |side: &str| {
        let h: Vec<f64> = v[side]["host_bps"].as_array().map_or(Vec::new(), |h| {
            h.iter().filter_map(|x| x.as_f64()).collect()
        });
        100.0 * h.first().copied().unwrap_or(0.0) / h.iter().sum::<f64>()
    };
    let (k, d) = (share("kernel"), share("debloat"));
    // The class's share follows from the link being kept full, and the goodputs are rates:
    // both are the host's to decide when it stole 5 % of a CPU or more from the guest
    // (docs/kernel-lab.md; a CI-hour run read debloat's share at 29.04 % with its goodput at
    // 8.85 Mbit/s, 10.5 % stolen). The comparison's own 5-point rule above holds always.
    let host: Option<HostStalls> = serde_json::from_value(v["host"].clone()).ok();
    let decided = host.as_ref().is_some_and(HostStalls::decides_timing);
    let judge = |ok: bool, figure: String| {
        assert!(ok || decided, "{figure} (meanwhile {host:?})");
        if !ok {
            println!("NOT JUDGED, the host decided it: {figure}");
        }
    };
    for (side, s) in [("kernel", k), ("debloat", d)] {
        judge(
            (21.0..29.0).contains(&s),
            format!("{side}: the 2-Mbit/s class had {s:.1} %"),
        );
    }
    assert!((k - d).abs() <= 5.0, "shares {k:.1} % and {d:.1} %");
    let (gk, gd) = (goodput(&v, "kernel"), goodput(&v, "debloat"));
    judge(
        (gk - gd).abs() / gk <= 0.03,
        format!("goodput {gk} and {gd} bit/s"),
    );
}

/// The diagnostic arrangement: the kernel's FIFO on the veth behind a pass-through `debloat
/// gateway`, and the kernel's run first. The kernel's qdisc must see and drop the traffic the
/// forwarder hands it, and the two runs still agree.
#[test]
#[ignore = "long tier: scripts/long-tests.sh; dated results in docs/testing.md"]
fn the_kernels_fifo_behind_the_forwarder_run_first_behaves_as_debloats() {
    let Some(v) = compare(
        "pfifo limit 50, the kernel's behind the forwarder, first",
        &[
            "pfifo limit 50",
            "--rate",
            "10Mbit/2Mbit",
            "--delay",
            "10ms",
            "--kernel-via-gateway",
            "--kernel-first",
            "--no-match-rtt",
        ],
    ) else {
        return;
    };
    assert_eq!(v["plan"]["kernel_via_gateway"], true);
    assert_eq!(v["plan"]["kernel_first"], true);
    for side in ["kernel", "debloat"] {
        assert!(
            num(&v, side, &["up", "drops"]) > 0.0,
            "{side}: the FIFO never dropped"
        );
        let mbps = goodput(&v, side) / 1e6;
        assert!((9.0..10.0).contains(&mbps), "{side}: {mbps:.2} Mbit/s");
    }
}

/// One cake comparison; the tests below name which.
fn cake_side(name: &str, seconds: &str, mut args: Vec<&str>) {
    args.extend_from_slice(&["--delay", "10ms"]);
    let Some(v) = compare_for(name, &args, seconds) else {
        return;
    };
    if name.starts_with("cake diffserv4") {
        // The Bulk tin carries the CS1 host, and gets less than the best-effort one.
        let bulk = v["kernel"]["up"]["tins"][0]["sent_packets"]
            .as_f64()
            .unwrap_or(0.0);
        assert!(bulk > 100.0, "{name}: the kernel's Bulk tin sent {bulk}");
    }
    if name.starts_with("cake dual-srchost") {
        for side in ["kernel", "debloat"] {
            let h = &v[side]["host_bps"];
            let (a, b) = (h[0].as_f64().unwrap_or(0.0), h[1].as_f64().unwrap_or(0.0));
            assert!(a / b > 0.8, "{side}: one upload got {a} against four's {b}");
        }
    }
}

#[test]
fn cake_besteffort_matches_the_kernels() {
    cake_side(
        "cake besteffort",
        "20",
        vec![
            "cake bandwidth 10Mbit besteffort",
            "--down",
            "cake bandwidth 2Mbit besteffort",
        ],
    );
}

/// In the long tier since 2026-11-27, session 8 (≈ 50 s of CI's 30 minutes). In CI, CAKE's
/// host isolation stays checked by the core's conformance tests and through the gateway on real
/// TCP (`tests/testbed_workers.rs`: dual-srchost with 8 uploads against 1, one and two workers).
#[test]
#[ignore = "long tier: scripts/long-tests.sh; dated results in docs/testing.md"]
fn cake_host_isolation_matches_the_kernels() {
    cake_side(
        "cake dual-srchost, 1 upload against 4",
        "20",
        vec![
            "cake bandwidth 10Mbit dual-srchost",
            "--down",
            "cake bandwidth 2Mbit dual-dsthost",
            "--hosts",
            "1,4",
        ],
    );
}

/// In the long tier since 2026-11-27 (CI's 30 minutes; this takes 2.3 of them). In CI, CAKE's
/// tins stay checked by the core's conformance tests (tin priority and sharing) and through the
/// testbed; against the kernel's cake, CI keeps besteffort and host isolation above, and
/// `tests/lab.rs` compares diffserv4's words and statistics with `tc`'s.
#[test]
#[ignore = "long tier: scripts/long-tests.sh; dated results in docs/testing.md"]
fn cake_diffserv4_tins_match_the_kernels() {
    // diffserv4 runs 60 s a side: its Bulk tin's two flows run with windows of two or three
    // packets and 70-80 ms of sojourn, and how many of their packets COBALT drops in 15 s
    // scatters from run to run on either side (kernel 115-229, debloat 110-254 in twelve
    // pairs), taking the total drop rate from 2.2 to 3.0 % and, once in CI, past 30 % apart.
    // Over 55 s the eight rates of four pairs fell within 2.13-2.42 %.
    cake_side(
        "cake diffserv4, one host's uploads CS1",
        "60",
        vec![
            "cake bandwidth 10Mbit diffserv4",
            "--down",
            "cake bandwidth 2Mbit diffserv4",
            "--hosts",
            "2,2",
            "--tos",
            "0x20,0",
        ],
    );
}

#[test]
#[ignore = "long tier: scripts/long-tests.sh; dated results in docs/testing.md"]
fn netem_delay_jitter_rate_and_limit_behave_as_the_kernels() {
    // The kernel's netem as the uplink's root against the gateway's `--emulate-egress` with the
    // same words and `buffer 1000` (netem's own queue and default limit): one run exercises the
    // delay, its jitter, the rate, and the limit the uploads fill. Round trips are not matched:
    // with 5 ms of jitter a 10-ping idle median is too noisy to match by, and against a second
    // of queue the gateway's extra millisecond does not count. (Loss has a test of its own,
    // below; slots are compared by `scripts/lab/compare-all.sh`.)
    let Some(v) = compare(
        "netem delay, jitter, rate and limit",
        &[
            "pfifo",
            "--netem",
            "delay 20ms 5ms rate 10Mbit",
            "--rate",
            "10Mbit/2Mbit",
            "--delay",
            "1ms",
            "--no-match-rtt",
        ],
    ) else {
        return;
    };
    for side in ["kernel", "debloat"] {
        // Idle, a ping crosses netem's 20 ms ± 5 ms and the client's 1 ms base delay.
        let idle = num(&v, side, &["idle_ms"]);
        assert!((16.0..35.0).contains(&idle), "{side}: idle RTT {idle} ms");
        // The rate is what bounds the uploads: goodput just under 10 Mbit/s.
        let g = goodput(&v, side);
        assert!((8.0e6..10.0e6).contains(&g), "{side}: goodput {g} bit/s");
        // The uploads fill the 1000 packets (1.2 s at 10 Mbit/s) and overflow them.
        let flow: Vec<f64> = v[side]["ping_flows_ms"][0]
            .as_array()
            .map_or(vec![], |f| f.iter().filter_map(|x| x.as_f64()).collect());
        let median = flow.get(flow.len() / 2).copied().unwrap_or(0.0);
        assert!(median > 600.0, "{side}: a loaded ping's median {median} ms");
        let d = num(&v, side, &["up", "drops"]);
        assert!(d > 50.0, "{side}: {d} tail drops");
    }
}

/// In the long tier since 2026-11-27 (its 40 s a side paid for the HTB comparison below); the
/// loss model stays checked in CI by the core's netem tests and `one_link.rs`.
#[test]
#[ignore = "long tier: scripts/long-tests.sh; dated results in docs/testing.md"]
fn netem_loss_behaves_as_the_kernels() {
    // netem's random loss, the kernel's `netem rate 10Mbit loss 1%` against the gateway's
    // emulation of the same words. Where the loss falls matters: netem draws it as a packet
    // joins its queue, so the sender learns of it a queue-wait later than of a loss at the
    // queue's head, and keeps a longer standing queue; a lost packet never costs the rate any
    // time. debloat drew it at the head, on the wire, until the comparison showed the queue
    // 7–18 % shorter and the goodput 1 % lower (docs/kernel-lab.md). 40 s a side: over 20 s the
    // two sides' loss counts alone scatter by ±10 %.
    let Some(v) = compare_for(
        "netem loss",
        &[
            "pfifo",
            "--netem",
            "rate 10Mbit loss 1%",
            "--rate",
            "10Mbit/2Mbit",
            "--delay",
            "10ms",
        ],
        "40",
    ) else {
        return;
    };
    for side in ["kernel", "debloat"] {
        // The loss model did the dropping: about 1 % of what was offered (1000 packets of
        // netem's queue never fill under 1 % loss: ~40 ms of it stands).
        let r = drop_rate(&v, side);
        assert!(
            (0.008..0.012).contains(&r),
            "{side}: dropped {r} of offered"
        );
        // A lost packet costs the link nothing: goodput is the rate less the framing, 10 Mbit/s
        // × 1448 / 1514 = 9.56 (9.54 measured on both); a loss after serialising wasted 1 % of
        // the link (9.45–9.47 measured).
        let g = goodput(&v, side);
        assert!((9.50e6..9.60e6).contains(&g), "{side}: goodput {g} bit/s");
    }
}

/// The hosts on sch_fq (`--host-qdisc fq`, issue 44's item 5): the base delay moves to the
/// server, and the kernel's run frees each segment from its socket with a 1 µs netem in front
/// of its FIFO, so TCP Small Queues counts the hosts' fq and not the bridge's queue. What this
/// asserts is the arrangement: the 50-packet FIFO fills and drops on both sides (charged to the
/// senders, it never filled: +19.7 ms, no drops, docs/kernel-lab.md), and every figure agrees
/// within the tolerances. One host with four uploads, as the FIFO's CI comparison: with two
/// hosts of CUBIC a drop-tail FIFO's host shares scatter from run to run (5.2 points apart in a
/// first run, 2026-11-27), which is the FIFO's, not the arrangement's.
#[test]
#[ignore = "long tier: scripts/long-tests.sh; dated results in docs/testing.md"]
fn hosts_on_fq_still_fill_the_kernels_fifo() {
    let Some(v) = compare(
        "hosts on fq, pfifo limit 50",
        &[
            "pfifo limit 50",
            "--rate",
            "10Mbit/2Mbit",
            "--delay",
            "10ms",
            "--host-qdisc",
            "fq",
        ],
    ) else {
        return;
    };
    for side in ["kernel", "debloat"] {
        assert!(
            drop_rate(&v, side) > 0.001,
            "{side}: the FIFO dropped {:.4} of what it was offered",
            drop_rate(&v, side)
        );
        assert!(goodput(&v, side) > 9e6, "{side}: {}", goodput(&v, side));
    }
    assert_eq!(v["plan"]["host_qdisc"], "fq", "{}", v["plan"]);
}
