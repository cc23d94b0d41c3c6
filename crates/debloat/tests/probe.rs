//! `debloat server` and `debloat test` as a user runs them, on loopback: help and errors that
//! name the bad input, a short test that writes its files, and Ctrl-C (SIGINT) ending a long
//! test early with the results so far written.

mod common;
#[path = "probe/icmp.rs"]
mod icmp;
#[path = "probe/realtime.rs"]
mod realtime;
use common::{debloat, output_file, summary_json, text};

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_debloat");

/// A `debloat server` on a free loopback port; killed when dropped. It holds a share of the
/// CPUs (the third field) until then.
struct Server(
    std::process::Child,
    String,
    #[allow(dead_code)] Box<dyn std::any::Any>,
);
impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The tests here load loopback with real flows that can keep both CPUs busy. Most may run side
/// by side; one that checks timing (the progress line's redraws) takes the CPUs alone, so
/// another test's load cannot starve the thread it watches (seen once in CI: 3 s without a
/// redraw while a second test's flows ran).
static CPUS: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn server() -> Server {
    start_server(Box::new(CPUS.read().unwrap_or_else(|e| e.into_inner())))
}

/// A server for a test that must have the CPUs to itself.
fn server_alone() -> Server {
    start_server(Box::new(CPUS.write().unwrap_or_else(|e| e.into_inner())))
}

fn start_server(cpus: Box<dyn std::any::Any>) -> Server {
    let mut c = Command::new(EXE)
        .args(["server", "--bind", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("server starts");
    let mut line = String::new();
    BufReader::new(c.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("banner");
    // "debloat server: TCP 127.0.0.1:PORT (flows, probes), …"
    let addr = line
        .split_whitespace()
        .nth(3)
        .expect("address in the banner")
        .to_string();
    Server(c, addr, cpus)
}

/// `debloat test ARGS --output DIR` to its end; fails the test if it fails. Returns all it printed.
fn run_test(dir: &std::path::Path, args: &[&str]) -> String {
    let o = Command::new(EXE)
        .arg("test")
        .args(args)
        .arg("--output")
        .arg(dir)
        .output()
        .expect("debloat test runs");
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    out
}

#[test]
fn help_and_bad_input() {
    let o = debloat(&["test", "--help"]);
    let t = text(&o);
    assert!(
        o.status.success() && t.contains("rrul") && t.contains("--length"),
        "{t}"
    );
    let o = debloat(&["server", "--help"]);
    assert!(o.status.success() && text(&o).contains("--max-flows"));
    let o = debloat(&["test", "rrull", "127.0.0.1"]);
    let t = text(&o);
    assert!(
        !o.status.success() && t.contains("`rrull`") && t.contains("rrul_be"),
        "{t}"
    );
    let o = debloat(&["test", "rrul", "127.0.0.1", "--grade-stat", "p99"]);
    assert!(!o.status.success() && text(&o).contains("mean, median or p95"));
}

#[test]
fn ctrl_c_stops_early_and_writes_what_was_measured() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    let child = Command::new(EXE)
        .args([
            "test",
            "tcp_1down",
            &srv.1,
            "--length",
            "60",
            "--delay",
            "1",
        ])
        .arg("--output")
        .arg(dir.path())
        .arg("--no-report")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("test starts");
    std::thread::sleep(Duration::from_secs(3));
    let t = Instant::now();
    let st = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(st.success());
    let o = child.wait_with_output().expect("ends");
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "took {:?} to stop",
        t.elapsed()
    );
    assert!(out.contains("stopped early"), "{out}");
    let s = summary_json(dir.path());
    assert_eq!(s["interrupted"], true);
    assert!(
        s["flows"][0]["bytes_received"].as_f64().unwrap_or(0.0) > 1e6,
        "{s}"
    );
    output_file(dir.path(), ".flent.gz");
}

/// A short test as a user runs it, report included: the page opens with the grade and RPM the
/// summary computed (with their definitions) and the plots, and the flent file carries them so
/// `debloat report` shows them again later.
#[test]
fn a_short_test_writes_a_report_that_shows_its_grade_and_rpm() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    run_test(
        dir.path(),
        &["tcp_1up", &srv.1, "--length", "3", "--delay", "1"],
    );
    let files: Vec<std::path::PathBuf> = std::fs::read_dir(dir.path())
        .expect("dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    let json = files
        .iter()
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .expect("summary written");
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json).expect("read")).expect("json");
    let letter = s["grade"]["letter"].as_str().expect("a grade");
    let rpm = s["rpm"]["rpm"].as_f64().expect("an RPM");

    let page = std::fs::read_to_string(dir.path().join("report/index.html")).expect("report");
    let section = page
        .split("Bufferbloat grade and responsiveness")
        .nth(1)
        .expect("grade section");
    assert!(
        section.contains(&format!(">{letter}</strong>")),
        "grade {letter} not on the page"
    );
    assert!(
        section.contains(&format!("<td>{rpm:.0}</td>")),
        "RPM {rpm:.0} not on the page"
    );
    assert!(
        section.contains("DSLReports") && section.contains("draft-ietf-ippm-responsiveness-09")
    );
    assert!(page.matches("<svg").count() >= 3, "plots inline");
    for png in ["timeseries.png", "latency_cdf.png", "totals.png"] {
        let len = std::fs::metadata(dir.path().join("report").join(png))
            .map(|m| m.len())
            .unwrap_or(0);
        assert!(len > 1000, "{png}: {len} B");
    }

    // The flent file keeps the verdicts: a later `debloat report` of it shows the same grade.
    let flent = files
        .iter()
        .find(|p| p.to_string_lossy().ends_with(".flent.gz"))
        .expect("flent file");
    let again = dir.path().join("again");
    let o = debloat(&[
        "report",
        &flent.to_string_lossy(),
        "--output",
        &again.to_string_lossy(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let page = std::fs::read_to_string(again.join("index.html")).expect("report again");
    assert!(
        page.contains(&format!(">{letter}</strong>"))
            && page.contains(&format!("<td>{rpm:.0}</td>"))
    );
}

/// `debloat test bufferbloat` loads one direction, then the other, and grades as DSLReports
/// did: each phase over its own window, the overall letter from the mean of the two increases.
/// On loopback both directions are idle-fast; what matters here is the structure (the flows
/// run only in their phase, both phases graded, the mean taken, every part shown). The
/// testbed test `probe_bufferbloat_grades_each_direction_apart` shows the two directions
/// graded differently on a link bloated one way only.
#[test]
fn bufferbloat_grades_each_direction_and_averages_them() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    let out = run_test(
        dir.path(),
        &[
            "bufferbloat",
            &srv.1,
            "--length",
            "4",
            "--delay",
            "1",
            "--streams",
            "2",
        ],
    );
    assert!(
        out.contains("mean increase of the 2 phases")
            && out.contains("download ")
            && out.contains("upload "),
        "{out}"
    );
    let s = summary_json(dir.path());
    let g = &s["grade"];
    let phases = g["phases"].as_array().expect("phases");
    let dirs: Vec<&str> = phases
        .iter()
        .filter_map(|p| p["direction"].as_str())
        .collect();
    assert_eq!(dirs, ["download", "upload"], "{g}");
    let w: Vec<Vec<f64>> = phases
        .iter()
        .map(|p| {
            p["window_s"]
                .as_array()
                .expect("window")
                .iter()
                .filter_map(|x| x.as_f64())
                .collect()
        })
        .collect();
    assert_eq!(w, [vec![1.0, 3.0], vec![4.0, 6.0]], "{g}");
    let inc: Vec<f64> = phases
        .iter()
        .filter_map(|p| p["increase_ms"].as_f64())
        .collect();
    let mean = (inc[0] + inc[1]) / 2.0;
    assert!(
        (g["increase_ms"].as_f64().expect("increase") - mean).abs() < 1e-9,
        "{g}"
    );
    assert_eq!(g["direction"], "download, upload");
    assert!(g["definition"]
        .as_str()
        .unwrap_or("")
        .contains("during download and during upload"));
    // Each direction's flows carried data and ran in their own phase only.
    let ds = debloat_report::Dataset::read(&output_file(dir.path(), ".flent.gz"))
        .expect("flent file reads");
    for series in ds.series.iter().filter(|x| x.name.starts_with("TCP ")) {
        let (a, b) = if series.name.contains("download") {
            (1.0, 3.0)
        } else {
            (4.0, 6.0)
        };
        let at: Vec<f64> = series
            .values
            .iter()
            .zip(&ds.x)
            .filter_map(|(v, &x)| v.map(|_| x))
            .collect();
        assert!(at.len() >= 5, "{}: {} samples", series.name, at.len());
        assert!(
            at.iter().all(|&x| x >= a - 1e-6 && x <= b + 0.2 + 1e-6),
            "{} outside [{a}, {b}]: {at:?}",
            series.name
        );
    }
    for f in s["flows"].as_array().expect("flows") {
        assert!(f["bytes_received"].as_f64().unwrap_or(0.0) > 1e6, "{f}");
    }
    let page = std::fs::read_to_string(dir.path().join("report/index.html")).expect("report");
    assert!(page.contains("download phase") && page.contains("upload phase"));
}

/// The live progress line (issue 6, item 4): on a terminal — here a pseudo-terminal from
/// util-linux's `script` — `debloat test` redraws one line per step with the elapsed time and
/// the current down/up throughput and latency, each with its unit; piped, it prints none.
#[test]
fn the_progress_line_shows_on_a_terminal_and_not_in_a_pipe() {
    if Command::new("script").arg("--version").output().is_err() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must run this test: `script` (util-linux) is missing"
        );
        println!("SKIP: the progress-line test needs `script` (util-linux) for a terminal");
        return;
    }
    let srv = server_alone();
    let dir = tempfile::tempdir().expect("tmp");
    let cmd = format!(
        "{EXE} test tcp_1down {} --length 2 --delay 0.5 --no-report --output {}",
        srv.1,
        dir.path().display()
    );
    let o = Command::new("script")
        .args(["-q", "-e", "-c", &cmd, "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .expect("script runs");
    let tty = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success(), "{tty}");
    // Each redraw starts with a carriage return: "\r  1.2 / 3 s   down   X Mbit/s   up …".
    let redraws: Vec<&str> = tty
        .split('\r')
        .filter(|l| l.contains(" / 3 s ") && l.contains("Mbit/s") && l.contains(" ms"))
        .collect();
    assert!(redraws.len() >= 10, "{} redraws in: {tty}", redraws.len());
    let elapsed: Vec<f64> = redraws
        .iter()
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect();
    assert!(
        elapsed.windows(2).all(|w| w[1] >= w[0]) && elapsed.last().copied().unwrap_or(0.0) >= 2.5,
        "elapsed {elapsed:?}"
    );
    // While the download runs its throughput shows on the line.
    let loaded = redraws.iter().any(|l| {
        l.split("down")
            .nth(1)
            .and_then(|r| r.split_whitespace().next()?.parse::<f64>().ok())
            .is_some_and(|x| x > 1.0)
    });
    assert!(loaded, "no redraw shows the download: {redraws:?}");
    assert!(tty.contains("Ctrl-C stops early"), "{tty}");

    let t = run_test(
        dir.path(),
        &["ping", &srv.1, "--length", "1", "--no-report"],
    );
    assert!(!t.contains('\r') && !t.contains(" / 1 s "), "{t}");
}

/// Root and util-linux's `setpriv` (to run as `nobody`): true, or a SKIP line (a failure
/// under CI, which must run the test).
fn root_with_setpriv(what: &str) -> bool {
    let why = debloat_gateway::testbed::available()
        .map_err(|e| e.to_string())
        .and_then(|()| {
            Command::new("setpriv")
                .arg("--version")
                .output()
                .map(|_| ())
                .map_err(|_| "`setpriv` (util-linux) is not installed".to_string())
        });
    match why {
        Ok(()) => true,
        Err(why) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must run the {what} test, but: {why}"
            );
            println!("SKIP: {what} test did not run: {why}");
            false
        }
    }
}

/// `setpriv` arguments that run a command as `nobody` with no capabilities.
const NOBODY: [&str; 6] = [
    "setpriv",
    "--reuid=65534",
    "--regid=65534",
    "--clear-groups",
    "--inh-caps=-all",
    "--",
];

/// A copy of the binary that `nobody` can run, in `dir` (made writable for its results).
fn exe_for_nobody(dir: &std::path::Path) -> String {
    let exe = dir.join("debloat");
    std::fs::copy(EXE, &exe).expect("copy the binary");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    exe.to_string_lossy().to_string()
}

/// `debloat test responsiveness` ramps its load as draft-ietf-ippm-responsiveness-09 does: one
/// connection each way at the start and one more each way at the end of every 5-s interval
/// while goodput is not yet stable (it cannot be after two intervals: the draft's test needs
/// seven). Flows the ramp never started are not in the results.
#[test]
fn responsiveness_ramps_one_connection_each_way_per_interval() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    let out = run_test(
        dir.path(),
        &[
            "responsiveness",
            &srv.1,
            "--length",
            "12",
            "--delay",
            "1",
            "--no-report",
        ],
    );
    assert!(
        out.contains("load ramp") && out.contains("3 at 11 s"),
        "{out}"
    );
    let s = summary_json(dir.path());
    let r = &s["load_ramp"];
    assert_eq!(
        r["steps"],
        serde_json::json!([[1.0, 1], [6.0, 2], [11.0, 3]]),
        "{r}"
    );
    assert_eq!(r["goodput_mbps"].as_array().map(Vec::len), Some(2), "{r}");
    assert!(r["saturated_at_s"].is_null(), "{r}");
    let flows = s["flows"].as_array().expect("flows");
    let names: Vec<&str> = flows.iter().filter_map(|f| f["name"].as_str()).collect();
    assert_eq!(
        names,
        [
            "TCP download BE::1",
            "TCP download BE::2",
            "TCP download BE::3",
            "TCP upload BE::1",
            "TCP upload BE::2",
            "TCP upload BE::3"
        ]
    );
    for f in flows {
        assert!(f["bytes_received"].as_f64().unwrap_or(0.0) > 1e6, "{f}");
    }
    assert!(s["rpm"]["rpm"].as_f64().unwrap_or(0.0) > 0.0, "{s}");
    // Each connection's throughput starts when the ramp released it.
    let ds = debloat_report::Dataset::read(&output_file(dir.path(), ".flent.gz")).expect("reads");
    for (i, at) in [(1, 1.0), (2, 6.0), (3, 11.0)] {
        for d in ["download", "upload"] {
            let name = format!("TCP {d} BE::{i}");
            let x = ds.series.iter().find(|x| x.name == name).expect("series");
            let first = x.values.iter().zip(&ds.x).find_map(|(v, &t)| v.map(|_| t));
            assert!(
                first.is_some_and(|t| t >= at && t < at + 1.0),
                "{name} starts at {first:?}, released at {at} s"
            );
        }
    }
}

/// The server dies mid-test (killed, as a crash or a reboot would end it): the client still
/// ends on time, writes its files with what it measured until then, and names every flow the
/// server ended early.
#[test]
fn a_server_dying_mid_test_leaves_the_client_what_it_measured() {
    let mut srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    let child = Command::new(EXE)
        .args([
            "test",
            "rrul",
            &srv.1,
            "--length",
            "8",
            "--delay",
            "1",
            "--no-report",
        ])
        .arg("--output")
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("test starts");
    let t = Instant::now();
    std::thread::sleep(Duration::from_secs(3));
    srv.0.kill().expect("kill the server");
    let _ = srv.0.wait();
    let o = child.wait_with_output().expect("ends");
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        t.elapsed() < Duration::from_secs(15),
        "took {:?}",
        t.elapsed()
    );
    let s = summary_json(dir.path());
    let flows = s["flows"].as_array().expect("flows");
    assert_eq!(flows.len(), 8, "{s}");
    for f in flows {
        assert!(f["bytes_received"].as_f64().unwrap_or(0.0) > 1e6, "{f}");
        let e = f["error"].as_str().unwrap_or("");
        assert!(e.contains("the server ended the flow"), "{f}");
    }
    assert_eq!(out.matches("the server ended the flow").count(), 8, "{out}");
    output_file(dir.path(), ".flent.gz");
}
