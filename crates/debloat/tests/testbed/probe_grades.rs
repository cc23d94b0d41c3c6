//! The probe (`debloat test`) through the gateway against `debloat server`: rrul's series and
//! grade through cake, a FIFO graded as bloated, each direction graded apart, and the
//! responsiveness ramp. Part of `tests/testbed.rs` (one test binary).

use super::common::bed::*;
use super::common::stalls::judge_timing;
use super::common::{self, text};
use debloat_gateway::testbed;
use debloat_gateway::tools::host_stalls::Watch;

/// Kills a background process (the probe's server) when dropped.
struct Bg(std::process::Child);
impl Drop for Bg {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `debloat test NAME` from the client namespace against `debloat server` in the server
/// namespace; returns the summary JSON and the flent file read back.
fn probe_test(bed: &Bed, args: &[&str]) -> (serde_json::Value, debloat_report::Dataset) {
    let _srv = Bg(testbed::in_ns(
        &ns(bed, "server"),
        &[EXE, "server", "--bind", "0.0.0.0:2112"],
    )
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .expect("server starts"));
    std::thread::sleep(std::time::Duration::from_millis(300));
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().to_str().expect("utf-8 path").to_string();
    let mut a = vec![EXE, "test"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["--output", &out, "--no-report"]);
    let o = testbed::in_ns(&ns(bed, "client"), &a)
        .output()
        .expect("debloat test runs");
    println!("{}", text(&o));
    assert!(o.status.success(), "debloat test failed: {}", text(&o));
    let summary = common::summary_json(dir.path());
    let ds = debloat_report::Dataset::read(&common::output_file(dir.path(), ".flent.gz"))
        .expect("flent file reads");
    (summary, ds)
}

/// The probe tests' testbed: 10 Mbit/s, 20 ms, cake at the link rate both ways.
fn cake_both_ways(tag: &str) -> Bed {
    up_with(
        tag,
        "10Mbit",
        "20ms",
        "cake bandwidth 10Mbit",
        "cake bandwidth 10Mbit",
    )
}

/// Issue 6 through the testbed: rrul from the client to a debloat server across the gateway's
/// 10 Mbit/s, 20 ms link with cake both ways. Every rrul series is there, the downloads fill
/// ≥ 85 % of the link as the client counted it, and latency under load stays near idle (grade A
/// or A+).
#[test]
fn probe_rrul_through_cake_has_every_series_and_grades_well() {
    let Some(_one) = guard() else { return };
    let bed = cake_both_ways("pr");
    let watch = Watch::start();
    let (s, ds) = probe_test(
        &bed,
        &["rrul", testbed::SERVER_V4, "--length", "10", "--delay", "3"],
    );
    let host = watch.stop();
    let names: Vec<&str> = ds.series.iter().map(|x| x.name.as_str()).collect();
    for m in ["BE", "BK", "CS5", "EF"] {
        for d in ["upload", "download"] {
            let n = format!("TCP {d} {m}");
            assert!(names.contains(&n.as_str()), "{n} missing: {names:?}");
        }
    }
    for n in [
        "Ping (ms) UDP EF",
        "Ping (ms) UDP BK",
        "Ping (ms) UDP BE",
        "Ping (ms) ICMP",
    ] {
        assert!(names.contains(&n), "{n} missing: {names:?}");
    }
    assert_eq!(s["errors"].as_array().map(Vec::len), Some(0), "{s}");
    let down = common::bytes_down(&s) * 8.0 / 10.0 / 1e6;
    println!(
        "rrul through cake: downloads {down:.2} Mbit/s, grade {}; meanwhile {host}",
        s["grade"]
    );
    // A rate and a grade of latency are the host's to decide when it steals the CPU
    // (common::stalls); the series and the errors above are judged whatever it did.
    let downloads = format!("downloads carried {down:.2} Mbit/s of 10");
    judge_timing(down >= 8.5, &host, &downloads);
    let g = s["grade"]["letter"].as_str().expect("graded");
    judge_timing(
        g == "A+" || g == "A",
        &host,
        &format!("grade {g}: {}", s["grade"]),
    );
    assert!(s["rpm"]["rpm"].as_f64().unwrap_or(0.0) > 0.0, "{s}");
}

/// The probe sees bufferbloat where ping does: one CUBIC upload into a 1000-packet FIFO on a
/// 10 Mbit/s link adds hundreds of ms, graded D or F.
#[test]
fn probe_grades_a_1000_packet_fifo_as_bloated() {
    let Some(_one) = guard() else { return };
    let bed = up("pf", "pfifo limit 1000");
    let (s, _) = probe_test(
        &bed,
        &[
            "tcp_1up",
            testbed::SERVER_V4,
            "--length",
            "12",
            "--delay",
            "3",
            "--cc",
            "cubic",
        ],
    );
    let g = &s["grade"];
    println!("tcp_1up through pfifo 1000: {g}");
    let inc = g["increase_ms"].as_f64().expect("increase");
    assert!(inc > 200.0, "latency increase {inc} ms");
    let l = g["letter"].as_str().expect("letter");
    assert!(l == "D" || l == "F", "grade {l}");
}

/// DSLReports' two directions graded apart on a link bloated one way only: downloads into a
/// 1000-packet FIFO on the gateway's ingress (10 Mbit/s, 20 ms) and uploads through cake on its
/// egress. The download phase adds hundreds of ms (D or F), the upload phase almost nothing
/// (A+ or A), and the overall grade is of the mean of the two increases.
#[test]
#[ignore = "long tier: scripts/long-tests.sh; dated results in docs/testing.md"]
fn probe_bufferbloat_grades_each_direction_apart() {
    let Some(_one) = guard() else { return };
    let bed = up_with(
        "pb",
        "10Mbit",
        "20ms",
        "cake bandwidth 10Mbit",
        "pfifo limit 1000",
    );
    let (s, _) = probe_test(
        &bed,
        &[
            "bufferbloat",
            testbed::SERVER_V4,
            "--length",
            "20",
            "--delay",
            "3",
            "--cc",
            "cubic",
        ],
    );
    let g = &s["grade"];
    println!("bufferbloat, pfifo down / cake up: {g}");
    let phase = |d: &str| {
        g["phases"]
            .as_array()
            .expect("phases")
            .iter()
            .find(|p| p["direction"] == d)
            .unwrap_or_else(|| panic!("no {d} phase: {g}"))
            .clone()
    };
    let (down, up) = (phase("download"), phase("upload"));
    let inc = |p: &serde_json::Value| p["increase_ms"].as_f64().expect("increase");
    assert!(inc(&down) > 200.0, "download phase +{} ms", inc(&down));
    assert!(inc(&up) < 30.0, "upload phase +{} ms", inc(&up));
    let dl = down["letter"].as_str().expect("letter");
    let ul = up["letter"].as_str().expect("letter");
    assert!(dl == "D" || dl == "F", "download graded {dl}");
    assert!(ul == "A+" || ul == "A", "upload graded {ul}");
    let mean = (inc(&down) + inc(&up)) / 2.0;
    assert!(
        (g["increase_ms"].as_f64().expect("increase") - mean).abs() < 1e-9,
        "{g}"
    );
    assert_eq!(
        g["letter"].as_str(),
        Some(debloat_probe::grade::letter(mean))
    );
}

/// draft-09's responsiveness test through the testbed (10 Mbit/s, 20 ms, cake both ways): the
/// load ramps one connection each way per 5-s interval until goodput is stable, stops adding
/// then, and the test ends at the first interval where responsiveness is stable too, well
/// before its 70 s — with a High-confidence RPM, rated Good or better, and the link full.
#[test]
#[ignore = "long tier: scripts/long-tests.sh; dated results in docs/testing.md"]
fn probe_responsiveness_ramps_until_saturated_and_ends_when_stable() {
    let Some(_one) = guard() else { return };
    let bed = cake_both_ways("prs");
    let (s, ds) = probe_test(
        &bed,
        &["responsiveness", testbed::SERVER_V4, "--cc", "cubic"],
    );
    let r = &s["load_ramp"];
    println!("ramp: {r}\nrpm: {}", s["rpm"]);
    let sat = r["saturated_at_s"].as_f64().expect("goodput saturated");
    let end = r["ended_at_s"].as_f64().expect("responsiveness stable");
    let elapsed = s["elapsed_s"].as_f64().expect("elapsed");
    assert!(
        end >= sat && elapsed < end + 3.0 && elapsed < 65.0,
        "{r}, ran {elapsed} s"
    );
    // One step per interval from the start until saturation, none after.
    let steps = r["steps"].as_array().expect("steps");
    let last_step = steps.last().and_then(|x| x[0].as_f64()).expect("a step");
    assert!(
        last_step < sat,
        "a connection was added after saturation: {r}"
    );
    assert_eq!(steps.len() as f64, (sat - 5.0) / 5.0, "{r}");
    let n = r["flows"].as_u64().expect("flows");
    assert!((2..=16).contains(&n), "{n} connections each way");
    assert_eq!(
        s["flows"].as_array().map(Vec::len),
        Some(2 * n as usize),
        "{s}"
    );
    assert_eq!(s["rpm"]["confidence"], "High", "{}", s["rpm"]);
    let class = s["rpm"]["class"].as_str().expect("class");
    assert!(class == "Good" || class == "Excellent", "{}", s["rpm"]);
    let sum = debloat_report::RunSummary::of(&ds);
    let down = sum.download_mbps.expect("download");
    assert!(down >= 8.5, "downloads carried {down:.2} Mbit/s of 10");
}
