//! Realtime probes (SCHED_FIFO): their timer error under load, against irtt's bound, judged by
//! the host-stall rule (docs/testing.md). Part of `tests/probe.rs` (one test binary).

use super::common::{self, stalls, summary_json, text};
use super::{exe_for_nobody, root_with_setpriv, run_test, server_alone, Server, NOBODY};
use debloat_gateway::tools::host_stalls::{HostStalls, Watch};
use std::process::Command;

/// One UDP probe's timer error over one rrul run, µs.
struct Timer {
    name: String,
    /// Over every send, as the probe's statistics give it.
    mean: f64,
    median: f64,
    /// Over the sends no noted host stall touched (from the send's slot to its leaving, ±1
    /// ms), and how many of the sends those were.
    unstalled: f64,
    kept: usize,
    sent: usize,
}

/// Each UDP probe's timer error from one rrul run against `srv`, with `extra` options, under a
/// host-stall watch: the summary (which also says the load ran and the probes' priority), the
/// probes' figures, and what the host did meanwhile. Each send's own error and time come from
/// the flent file's raw records (`timer_error`, `t`).
fn rrul_timers(srv: &Server, extra: &[&str]) -> (serde_json::Value, Vec<Timer>, HostStalls) {
    let dir = tempfile::tempdir().expect("tmp");
    let mut args = vec![
        "rrul",
        &srv.1,
        "--length",
        "4",
        "--delay",
        "1",
        "--no-report",
    ];
    args.extend_from_slice(extra);
    let watch = Watch::start();
    run_test(dir.path(), &args);
    let host = watch.stop();
    let s = summary_json(dir.path());
    assert_eq!(s["errors"].as_array().map(Vec::len), Some(0), "{s}");
    let down = common::bytes_down(&s);
    assert!(down > 1e8, "the load ran: {down} bytes down");
    let flent = common::read_flent(&common::output_file(dir.path(), ".flent.gz"));
    let probes = s["udp_probes"].as_array().expect("udp probes");
    assert_eq!(probes.len(), 3);
    let timers = probes
        .iter()
        .map(|p| {
            let name = p["name"].as_str().expect("a probe's name").to_string();
            let t = &p["stats_ns"]["timer_error"];
            let us = |k: &str| t[k].as_f64().expect("timer error") / 1e3;
            let raw = flent["raw_values"][&name].as_array().cloned();
            let raw = raw.unwrap_or_default();
            let sends: Vec<(f64, f64)> = raw
                .iter()
                .filter_map(|r| Some((r["t"].as_f64()?, r["timer_error"].as_f64()? * 1e3)))
                .collect();
            assert_eq!(sends.len() as u64, t["n"].as_u64().unwrap_or(0), "{name}");
            let all = sends.iter().map(|x| x.1).sum::<f64>() / sends.len().max(1) as f64;
            assert!(
                (all - us("mean")).abs() < 0.5,
                "{name}: {all} µs per record"
            );
            let kept: Vec<f64> = sends
                .iter()
                .filter(|(at, e)| !host.touches(at - e / 1e6, *at, 1e-3))
                .map(|x| x.1)
                .collect();
            Timer {
                unstalled: kept.iter().sum::<f64>() / kept.len().max(1) as f64,
                kept: kept.len(),
                sent: sends.len(),
                mean: us("mean"),
                median: us("median"),
                name,
            }
        })
        .collect();
    (s, timers, host)
}

/// `--realtime` keeps the probes' timers on time under load: rrul's eight loopback flows keep
/// both CPUs busy, and the same rrul runs twice, its probes at normal priority and then under
/// SCHED_FIFO 50. In the same run, on the same load, realtime must cut every probe's mean timer
/// error at least fourfold (measured: 390–530 µs against 1.5–7.4 µs; on 2026-11-29, Intel, 194–539
/// against 3.4–40.7) and keep its median
/// within irtt's 100 µs loopback bound. SCHED_FIFO holds off the machine's own load, not the
/// hypervisor taking the vCPU away, and a probe sends only 30 times in the run, so one send a
/// host stall held back 4 ms moves its mean by 130 µs (CI read 139 µs so, median 1.4): the
/// means compared leave out the sends a noted stall touched (`common::stalls`, at least 20 of
/// 30 kept), and a cut that still fails while the host stole 5 % of a CPU or more is shown, not
/// judged. The bound on the mean itself is a property of an otherwise idle machine, so it is
/// checked by the long tier's `realtime_probes_mean_timer_error_is_within_irtts_bound` below.
/// Without the privilege the option is refused before the test starts, saying what is needed.
/// Root only; it takes the CPUs alone.
#[test]
fn realtime_probes_keep_their_timer_under_load() {
    if !root_with_setpriv("realtime-probe") {
        return;
    }
    // The load is this test's own: another test's flows beside it (and their servers' threads
    // at the same priority) are a condition the comparison does not speak of.
    let srv = server_alone();
    let (_, normal, n_host) = rrul_timers(&srv, &[]);
    println!("rrul at normal priority: meanwhile {n_host}");
    let (s, rt, host) = rrul_timers(&srv, &["--realtime", "50"]);
    println!("rrul under SCHED_FIFO 50: meanwhile {host}");
    assert_eq!(s["probes_realtime_priority"], 50);
    for (n, r) in normal.iter().zip(&rt) {
        println!(
            "{}: timer error under rrul, mean {:.1} µs (median {:.1}; {:.1} over the {} of {} \
             sends no stall touched) at normal priority, {:.1} µs (median {:.1}; {:.1} over {} \
             of {}) under SCHED_FIFO 50",
            n.name,
            n.mean,
            n.median,
            n.unstalled,
            n.kept,
            n.sent,
            r.mean,
            r.median,
            r.unstalled,
            r.kept,
            r.sent
        );
        let ok = r.kept >= 20 && n.kept >= 20 && r.unstalled * 4.0 <= n.unstalled;
        stalls::judge_timing(
            ok,
            &host.with_stalls_of(&n_host),
            &format!(
                "{}: realtime {:.1} µs over {} sends against {:.1} µs over {} at normal priority",
                n.name, r.unstalled, r.kept, n.unstalled, n.kept
            ),
        );
        assert!(r.median <= 100.0, "{}: median {:.1} µs", r.name, r.median);
    }

    let dir = tempfile::tempdir().expect("tmp");
    let exe = exe_for_nobody(dir.path());
    let mut a: Vec<&str> = NOBODY.to_vec();
    a.extend_from_slice(&[
        &exe,
        "test",
        "ping",
        &srv.1,
        "--length",
        "1",
        "--realtime",
        "50",
    ]);
    let o = Command::new(a[0]).args(&a[1..]).output().expect("runs");
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(
        t.contains("--realtime") && t.contains("CAP_SYS_NICE"),
        "{t}"
    );
}

/// The figure: under rrul, with the probes under SCHED_FIFO 50, every UDP probe's mean
/// timer error is within irtt's 100 µs loopback bound (1.5–7.4 µs measured). Long tier: a mean
/// speaks of the machine as much as of the program, so it is run on an otherwise idle one.
#[test]
#[ignore = "long tier: scripts/long-tests.sh; dated results in docs/testing.md"]
fn realtime_probes_mean_timer_error_is_within_irtts_bound() {
    if !root_with_setpriv("realtime-probe") {
        return;
    }
    let srv = server_alone();
    let (_, rt, host) = rrul_timers(&srv, &["--realtime", "50"]);
    for t in rt {
        println!(
            "{}: mean timer error {:.1} µs under rrul, SCHED_FIFO 50 (meanwhile {host})",
            t.name, t.mean
        );
        assert!(t.mean <= 100.0, "{}: {:.1} µs", t.name, t.mean);
    }
}
