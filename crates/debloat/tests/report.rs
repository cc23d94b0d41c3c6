//! The demo and `debloat report`, as a person would use them: the demo's table and report,
//! reports from flent's own files (versions 3 and 4) and debloat's, and the page rendered in
//! headless Chromium (Debian's chromium package; CI installs it) with its plots checked.

mod common;
use common::{debloat, text};

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

/// The table row for `label`: its numbers in column order.
fn row(table: &str, label: &str) -> Vec<f64> {
    let line = table
        .lines()
        .find(|l| l.starts_with(label))
        .unwrap_or_else(|| panic!("no row {label} in\n{table}"));
    line[label.len()..]
        .split_whitespace()
        .map(|c| c.parse().unwrap_or(f64::NAN))
        .collect()
}

#[test]
fn demo_shows_the_fifo_collapse_and_the_cure_and_writes_a_report() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("report");
    let o = debloat(&["demo", "--output", path(&out)]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("Mbit/s") && t.contains("ms"), "{t}");
    // Columns: download, upload (Mbit/s), latency p50, p90, p99, idle, induced (ms).
    let fifo = row(&t, "pfifo 1000");
    let fq = row(&t, "fq_codel");
    let cake = row(&t, "cake");
    assert!(
        fifo[2] > 1000.0,
        "pfifo: seconds of delay under load: {fifo:?}"
    );
    for (name, r) in [("fq_codel", &fq), ("cake", &cake)] {
        assert!(r[0] > 0.85 * 20.0, "{name}: download {:.2} Mbit/s", r[0]);
        assert!(r[1] > 0.6 * 2.0, "{name}: upload {:.2} Mbit/s", r[1]);
    }
    assert!(fq[6] < 10.0, "fq_codel induced delay {:.1} ms", fq[6]);
    assert!(cake[6] < 15.0, "cake induced delay {:.1} ms", cake[6]);
    assert!(
        fifo[0] < 0.5 * fq[0],
        "the FIFO starves the downloads of ACKs: {fifo:?}"
    );
    for f in [
        "index.html",
        "timeseries.svg",
        "timeseries.png",
        "latency_cdf.svg",
        "latency_cdf.png",
        "totals.svg",
        "totals.png",
    ] {
        let p = out.join(f);
        assert!(
            std::fs::metadata(&p).is_ok_and(|m| m.len() > 1000),
            "{f} missing or empty"
        );
    }
    let flent_files: Vec<PathBuf> = std::fs::read_dir(&out)
        .expect("report dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".flent.gz"))
        .collect();
    assert_eq!(flent_files.len(), 3, "{flent_files:?}");
    let html = std::fs::read_to_string(out.join("index.html")).expect("index");
    assert_eq!(html.matches("<svg").count(), 3, "three inline plots");
    assert!(
        !html.contains("src=\"http") && !html.contains("href=\"http"),
        "the page must not load anything from the network"
    );
    // At phone width a wide table scrolls in its own box instead of being cut (issue 46).
    assert_eq!(
        html.matches("<table").count(),
        html.matches("<div class=\"scroll\"><table").count(),
        "every table in a scrolling box"
    );
    assert!(html.contains(".scroll{overflow-x:auto"), "the box scrolls");
    check_in_chromium(&out.join("index.html"), dir.path());
}

#[test]
fn report_reads_flent_written_files_and_debloat_files_together() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A file in the format flent writes (docs/measurement.md §3.9), version 4.
    let flent4 = dir
        .path()
        .join("tcp_1up-2026-01-01T120000.000000.example.flent.gz");
    write_gz(&flent4, MINIMAL_FLENT_V4);
    // A file written by debloat's simulator.
    let sim = dir.path().join("sim");
    let o = debloat(&[
        "sim",
        "tcp_1up",
        "--length",
        "10",
        "--link",
        "10Mbit",
        "--rtt",
        "20ms",
        "--qdisc",
        "fq_codel",
        "--output",
        path(&sim),
        "--title",
        "debloat_run",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let sim_file = std::fs::read_dir(&sim)
        .expect("sim output")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.to_string_lossy().ends_with(".flent.gz"))
        .expect("a flent file");
    let mut files = vec![flent4.clone(), sim_file];
    // Files written by flent itself (data-file versions 3 and 4), kept in the repository.
    let real = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/flent-real");
    let mut flents: Vec<_> = std::fs::read_dir(&real)
        .expect("tests/data/flent-real")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".flent.gz"))
        .collect();
    flents.sort();
    assert_eq!(flents.len(), 2, "{flents:?}");
    files.extend(flents);
    let out = dir.path().join("report");
    let mut args = vec!["report".to_string()];
    args.extend(files.iter().map(|f| path(f).to_string()));
    args.extend(["--output".into(), path(&out).into()]);
    let o = Command::new(env!("CARGO_BIN_EXE_debloat"))
        .args(&args)
        .output()
        .expect("runs");
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    // The §3.9 file: upload 9.1, 9.4, 9.6, 9.5 over a 1 s run (no idle cut): mean 9.40 Mbit/s.
    let ex = row(&t, "example");
    assert!((ex[1] - 9.40).abs() < 0.01, "example upload {:?}\n{t}", ex);
    let sim_row = row(&t, "debloat_run");
    assert!(
        (8.0..=10.0).contains(&sim_row[1]),
        "debloat run upload {:?}\n{t}",
        sim_row
    );
    let html = std::fs::read_to_string(out.join("index.html")).expect("index");
    assert!(html.contains("example") && html.contains("debloat_run"));
}

#[test]
fn report_errors_name_the_file_and_the_problem() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("bad.flent.gz");
    std::fs::write(&bad, b"\x1f\x8b not really gzip").expect("write");
    let o = debloat(&[
        "report",
        path(&bad),
        "--output",
        path(&dir.path().join("r")),
    ]);
    assert!(!o.status.success());
    let t = text(&o);
    assert!(t.contains("bad.flent.gz") && t.contains("gzip"), "{t}");
    let o = debloat(&["report", "/nonexistent/x.flent.gz"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("/nonexistent/x.flent.gz"), "{}", text(&o));
}

const MINIMAL_FLENT_V4: &str = r#"{
  "version": 4,
  "metadata": {
    "NAME": "tcp_1up", "TITLE": "example", "NOTE": "",
    "TIME": "2026-01-01T12:00:00.000000Z", "T0": "2026-01-01T12:00:00.000000Z",
    "HOST": "192.0.2.1", "HOSTS": ["192.0.2.1"], "LOCAL_HOST": "client",
    "LENGTH": 1, "TOTAL_LENGTH": 1, "STEP_SIZE": 0.2, "IP_VERSION": 4,
    "TEST_PARAMETERS": {}, "FLENT_VERSION": "debloat 0.1.0",
    "SERIES_META": {
      "TCP upload": {"UNITS": "Mbits/s", "RUNNER": "debloat-tcp", "CONG_CONTROL": "cubic", "DATA_TOS": 0},
      "Ping (ms) ICMP": {"UNITS": "ms", "RUNNER": "debloat-icmp"}
    }
  },
  "x_values": [0.0, 0.2, 0.4, 0.6, 0.8, 1.0],
  "results": {
    "TCP upload":     [null, 9.1, 9.4, 9.6, 9.5, null],
    "Ping (ms) ICMP": [20.1, 35.2, 60.4, 71.0, 72.3, 40.2]
  },
  "raw_values": {}
}"#;

fn write_gz(p: &Path, s: &str) {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(s.as_bytes()).expect("gzip");
    std::fs::write(p, e.finish().expect("gzip")).expect("write");
}

fn chromium(args: &[&str], profile: &Path) -> Option<Output> {
    common::chromium(None, args, profile)
}

fn check_in_chromium(index: &Path, tmp: &Path) {
    let url = format!("file://{}", index.display());
    let Some(dom) = chromium(&["--dump-dom", &url], &tmp.join("profile-dom")) else {
        return;
    };
    assert!(dom.status.success(), "chromium --dump-dom: {}", text(&dom));
    let stderr = String::from_utf8_lossy(&dom.stderr);
    assert!(
        !stderr.contains("Uncaught") && !stderr.contains(":CONSOLE"),
        "console errors: {stderr}"
    );
    let dom = String::from_utf8_lossy(&dom.stdout);
    // The browser parsed three plots; each has non-empty line paths and axis labels with units.
    assert_eq!(
        dom.matches("<svg").count(),
        3,
        "inline SVGs in the rendered DOM"
    );
    let lines_with_points = dom
        .split("<polyline")
        .skip(1)
        .filter(|p| {
            p.split("points=\"")
                .nth(1)
                .and_then(|s| s.split('"').next())
                .is_some_and(|pts| pts.split_whitespace().count() > 10)
        })
        .count();
    assert!(
        lines_with_points >= 12,
        "plotted lines with points: {lines_with_points}"
    );
    for label in [
        "throughput (Mbit/s)",
        "latency (ms, log scale)",
        "time (s)",
        "cumulative probability",
    ] {
        assert!(
            dom.contains(label),
            "axis label `{label}` missing from the rendered page"
        );
    }
    let shot = tmp.join("screenshot.png");
    let arg = format!("--screenshot={}", shot.display());
    let o = chromium(
        &[&arg, "--window-size=1200,2600", &url],
        &tmp.join("profile-shot"),
    )
    .expect("chromium was found above");
    assert!(o.status.success(), "chromium --screenshot: {}", text(&o));
    let (w, h, distinct) = png_stats(&shot);
    assert_eq!((w, h), (1200, 2600), "screenshot size");
    assert!(
        distinct > 50,
        "the screenshot is nearly blank: {distinct} distinct colours"
    );
    println!("chromium rendered the report: {w}×{h}, {distinct} distinct colours, {lines_with_points} plotted lines");
}

/// Width, height and number of distinct colours of a PNG.
fn png_stats(p: &Path) -> (u32, u32, usize) {
    let file = std::fs::File::open(p).expect("screenshot written");
    let mut dec = png::Decoder::new(std::io::BufReader::new(file));
    dec.set_transformations(png::Transformations::normalize_to_color8());
    let mut r = dec.read_info().expect("a PNG");
    let mut buf = vec![0; r.output_buffer_size()];
    let info = r.next_frame(&mut buf).expect("a frame");
    let px = info.color_type.samples();
    let colours: std::collections::HashSet<&[u8]> = buf[..info.buffer_size()].chunks(px).collect();
    (info.width, info.height, colours.len())
}

/// `debloat sim tcp_nup` with two uploads for 20 s over `link` at `rtt`, plus `extra`
/// arguments, swept over `sweep` into `out`; its printed table (the run must succeed).
fn sweep_two_uploads(link: &str, rtt: &str, extra: &[&str], sweep: &str, out: &Path) -> String {
    let mut args = vec![
        "sim",
        "tcp_nup",
        "--streams",
        "2",
        "--length",
        "20",
        "--link",
        link,
        "--rtt",
        rtt,
        "--sweep",
        sweep,
        "--output",
        path(out),
    ];
    args.extend_from_slice(extra);
    let o = debloat(&args);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    t
}

#[test]
fn sim_sweep_runs_every_value_and_compares_them_in_one_report() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("sweep");
    let t = sweep_two_uploads(
        "20Mbit",
        "48ms",
        &[],
        "qdisc=pfifo limit 1000;fq_codel",
        &out,
    );
    let fifo = row(&t, "qdisc pfifo limit 1000");
    let fq = row(&t, "qdisc fq_codel");
    // Columns: download, upload (Mbit/s), latency p50 … induced (ms); tcp_nup has no download.
    assert!(
        fifo[1] > 17.0 && fq[1] > 17.0,
        "both fill the link: {fifo:?} {fq:?}"
    );
    assert!(fifo[6] > 200.0, "the FIFO induces hundreds of ms: {fifo:?}");
    assert!(fq[6] < 10.0, "fq_codel induces a few ms: {fq:?}");
    let html = std::fs::read_to_string(out.join("index.html")).expect("report");
    assert!(html.contains("qdisc fq_codel") && html.contains("qdisc pfifo limit 1000"));
    let o = debloat(&["sim", "tcp_nup", "--sweep", "colour=red"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("expected one of qdisc"), "{}", text(&o));
}

/// `--tcp-window` (here as a sweep key) caps each flow at window / RTT: two uploads with
/// 128 KiB windows over 100 ms carry at most 2 × 90 × 1448 B × 8 / 0.1 s ≈ 20.9 Mbit/s of a
/// 50 Mbit/s link, where uncapped flows average over 40 (CUBIC's ramp at 100 ms included). A
/// size that is not one names the choices.
#[test]
fn sim_tcp_window_caps_flows_at_window_over_rtt() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("sweep");
    let t = sweep_two_uploads(
        "50Mbit",
        "100ms",
        &["--qdisc", "fq_codel"],
        "tcp-window=none;128kb",
        &out,
    );
    let free = row(&t, "tcp-window none");
    let capped = row(&t, "tcp-window 128kb");
    let cap = 2.0 * 90.0 * 1448.0 * 8.0 / 0.1 / 1e6;
    assert!(free[1] > 40.0, "uncapped flows fill the link: {free:?}");
    assert!(
        capped[1] <= cap && capped[1] > 0.9 * cap,
        "capped at {cap:.1} Mbit/s: {capped:?}"
    );
    let o = debloat(&["sim", "tcp_1up", "--tcp-window", "3 furlongs"]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("--tcp-window") && text(&o).contains("kb, mb"),
        "{}",
        text(&o)
    );
}
