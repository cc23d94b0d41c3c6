//! Realtime probes (SCHED_FIFO): their timer error under load, against irtt's bound, judged by
//! the host-stall rule (docs/testing.md). Part of `tests/probe.rs` (one test binary).

use super::common::{self, stalls, summary_json, text};
use super::{exe_for_nobody, root_with_setpriv, run_test, server_alone, Server, NOBODY};
use std::process::Command;

/// Each UDP probe's timer error in µs (name, mean, median) from one rrul run against `srv`,
/// with `extra` options; the summary also says the load ran and what priority the probes had.
fn rrul_timer_errors(srv: &Server, extra: &[&str]) -> (serde_json::Value, Vec<(String, f64, f64)>) {
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
    run_test(dir.path(), &args);
    let s = summary_json(dir.path());
    assert_eq!(s["errors"].as_array().map(Vec::len), Some(0), "{s}");
    let down = common::bytes_down(&s);
    assert!(down > 1e8, "the load ran: {down} bytes down");
    let probes = s["udp_probes"].as_array().expect("udp probes");
    assert_eq!(probes.len(), 3);
    let errs = probes
        .iter()
        .map(|p| {
            let t = &p["stats_ns"]["timer_error"];
            let us = |k: &str| t[k].as_f64().expect("timer error") / 1e3;
            (p["name"].to_string(), us("mean"), us("median"))
        })
        .collect();
    (s, errs)
}

/// `--realtime` keeps the probes' timers on time under load: rrul's eight loopback flows keep
/// both CPUs busy, and the same rrul runs twice, its probes at normal priority and then under
/// SCHED_FIFO 50. In the same run, on the same load, realtime must cut every probe's mean timer
/// error at least fourfold (measured here: 390–530 µs against 1.5–7.4 µs) and keep its median
/// within irtt's 100 µs loopback bound. The bound on the mean itself is a property of an
/// otherwise idle machine (a VM's stolen time or another process's softirqs show up in a mean
/// of 800 samples: 103.9 µs seen once in CI), so it is checked by the long tier's
/// `realtime_probes_mean_timer_error_is_within_irtts_bound` below. Without the privilege the
/// option is refused before the test starts, saying what is needed. Root only; it takes the
/// CPUs alone.
#[test]
fn realtime_probes_keep_their_timer_under_load() {
    if !root_with_setpriv("realtime-probe") {
        return;
    }
    // The load is this test's own: another test's flows beside it (and their servers' threads
    // at the same priority) are a condition the comparison does not speak of.
    let srv = server_alone();
    let (_, normal) = rrul_timer_errors(&srv, &[]);
    // SCHED_FIFO holds off the machine's own load, not the hypervisor taking the vCPU away: a
    // mean the host decided (common::stalls) is measured once more, then shown, not judged.
    let cut = |rt: &[(String, f64, f64)]| rt.iter().zip(&normal).all(|(r, n)| r.1 * 4.0 <= n.1);
    let ((s, rt), host) = stalls::again_if_the_host_stalled(
        "rrul under SCHED_FIFO 50",
        || rrul_timer_errors(&srv, &["--realtime", "50"]),
        |(_, rt)| cut(rt),
    );
    assert_eq!(s["probes_realtime_priority"], 50);
    for ((name, n_mean, n_median), (_, mean, median)) in normal.iter().zip(&rt) {
        println!(
            "{name}: timer error under rrul, mean {n_mean:.1} µs (median {n_median:.1}) at \
             normal priority, {mean:.1} µs (median {median:.1}) under SCHED_FIFO 50"
        );
        stalls::judge_timing(
            mean * 4.0 <= *n_mean,
            &host,
            &format!("{name}: realtime {mean:.1} µs against {n_mean:.1} µs at normal priority"),
        );
        assert!(median <= &100.0, "{name}: median {median:.1} µs");
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
    let (_, rt) = rrul_timer_errors(&srv, &["--realtime", "50"]);
    for (name, mean, _) in rt {
        println!("{name}: mean timer error {mean:.1} µs under rrul, SCHED_FIFO 50");
        assert!(mean <= 100.0, "{name}: {mean:.1} µs");
    }
}
