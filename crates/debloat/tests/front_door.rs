//! Issue 46's smaller items, as a new user meets them: `--help` lists exactly the tests that
//! run, `--streams 0` is refused rather than run as one, two `sim --output` runs into one folder
//! keep both files, and `autorate compare` runs from any directory (the traces are embedded).

mod common;
use common::{debloat, text};

#[test]
fn help_lists_exactly_the_tests_that_run() {
    let sim = text(&debloat(&["sim", "--help"]));
    let test = text(&debloat(&["test", "--help"]));
    let mut both = 0;
    use debloat_flent::catalog::Runs;
    for (name, _, runs) in debloat_flent::catalog::TESTS {
        let line = format!("\n  {name} ");
        let sim_only = matches!(runs, Runs::SimulatorOnly(_));
        assert_eq!(
            test.contains(&line),
            !sim_only,
            "`test --help` and {name}:\n{test}"
        );
        if sim_only {
            let o = debloat(&["test", name, "198.18.2.2"]);
            assert!(
                !o.status.success() && text(&o).contains("runs in the simulator only"),
                "test {name}: {}",
                text(&o)
            );
        }
        let real_only = matches!(runs, Runs::RealNetworkOnly(_));
        assert_eq!(
            sim.contains(&line),
            !real_only,
            "`sim --help` and {name}:\n{sim}"
        );
        if !real_only {
            both += 1;
            // Listed means it runs: one second of it in the simulator.
            let o = debloat(&["sim", name, "--length", "1", "--delay", "0"]);
            assert!(o.status.success(), "sim {name}: {}", text(&o));
        }
    }
    assert!(both >= 14, "only {both} tests run in the simulator");
}

#[test]
fn zero_streams_are_refused_not_run_as_one() {
    for args in [
        vec!["sim", "tcp_nup", "--streams", "0", "--length", "1"],
        vec!["test", "tcp_nup", "198.18.2.2", "--streams", "0"],
    ] {
        let o = debloat(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(text(&o).contains("--streams"), "{}", text(&o));
    }
}

#[test]
fn a_second_sim_run_into_one_folder_keeps_the_first() {
    let dir = tempfile::tempdir().expect("tmp");
    let d = dir.path().to_string_lossy().into_owned();
    for rtt in ["20ms", "80ms"] {
        let o = debloat(&["sim", "ping", "--length", "1", "--rtt", rtt, "--output", &d]);
        assert!(o.status.success(), "{}", text(&o));
    }
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".flent.gz"))
        .collect();
    names.sort();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(
        names[0].ends_with("-2.flent.gz") || names[1].ends_with("-2.flent.gz"),
        "{names:?}"
    );
    // Each run's own summary sits beside its data file: 20 ms and 80 ms round trips.
    let rtts: Vec<f64> = names
        .iter()
        .map(|n| {
            let p = dir.path().join(n.replace(".flent.gz", ".json"));
            let v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(p).expect("json")).expect("parse");
            v["pings"][0]["latency_ms"]["p50"].as_f64().unwrap_or(0.0)
        })
        .collect();
    assert!(rtts.iter().any(|&r| (19.0..25.0).contains(&r)), "{rtts:?}");
    assert!(rtts.iter().any(|&r| (79.0..85.0).contains(&r)), "{rtts:?}");
}

#[test]
fn autorate_compare_runs_from_any_directory() {
    let dir = tempfile::tempdir().expect("tmp");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_debloat"))
        .args(["autorate", "compare", "--length", "5"])
        .current_dir(dir.path())
        .output()
        .expect("runs");
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("Verizon-LTE-short.down.mahi"),
        "{}",
        text(&o)
    );
}

/// `testbed down` ends what still runs in its namespaces (root; SKIP elsewhere, failure under
/// CI): a process started in the client's namespace is gone afterwards, not left running in a
/// namespace without a name.
#[test]
fn testbed_down_ends_the_processes_left_in_its_namespaces() {
    use debloat_gateway::testbed;
    if let Err(w) = testbed::available() {
        assert!(std::env::var_os("CI").is_none(), "CI must run this: {w}");
        println!("SKIP: testbed: {w}");
        return;
    }
    let prefix = format!("fd{}", std::process::id() % 100_000);
    testbed::build_namespaces(&prefix).expect("namespaces");
    let [client, _, _] = testbed::namespaces(&prefix);
    let mut left = testbed::in_ns(&client, &["sleep", "60"])
        .spawn()
        .expect("sleep");
    std::thread::sleep(std::time::Duration::from_millis(200));
    let o = debloat(&["testbed", "down", "--prefix", &prefix]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains(&format!("stopped 1 process still running in {client}")),
        "{}",
        text(&o)
    );
    let t = std::time::Instant::now();
    while left.try_wait().expect("wait").is_none() && t.elapsed().as_secs() < 3 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let ended = left.try_wait().expect("wait");
    if ended.is_none() {
        let _ = left.kill();
        let _ = left.wait();
    }
    assert!(
        ended.is_some(),
        "the process in the client namespace still runs"
    );
}
