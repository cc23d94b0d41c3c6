//! Repeated runs from the command line: `sim --seeds N` writes every seed's value and the
//! interval, its seed 1 is the single run, `compare` reads two such directories, and
//! `reproduce --seeds N` judges checks on their intervals.

mod common;
use common::{debloat, text};
use serde_json::Value;

const RRUL: &[&str] = &[
    "sim",
    "rrul",
    "--link",
    "20Mbit/2Mbit",
    "--rtt",
    "20ms",
    "--length",
    "10",
];

/// cake shaping both ways (its host and flow hashes differ by seed, so the runs do).
const CAKE: &[&str] = &[
    "--qdisc",
    "cake bandwidth 2Mbit",
    "--qdisc-down",
    "cake bandwidth 20Mbit",
];

fn sim(extra: &[&str], dir: &std::path::Path) -> Value {
    let mut a = RRUL.to_vec();
    if !extra.contains(&"--qdisc") {
        a.extend_from_slice(CAKE);
    }
    a.extend_from_slice(extra);
    let d = dir.to_str().expect("utf-8");
    a.extend_from_slice(&["--output", d]);
    let o = debloat(&a);
    assert!(o.status.success(), "{}", text(&o));
    let s = std::fs::read_to_string(dir.join("summary.json")).expect("summary.json");
    serde_json::from_str(&s).expect("JSON")
}

fn metric<'a>(s: &'a Value, name: &str) -> &'a Value {
    s["metrics"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["name"] == name))
        .unwrap_or_else(|| panic!("no metric {name}"))
}

#[test]
fn sim_seeds_writes_each_seeds_value_and_the_interval() {
    let tmp = tempfile::tempdir().expect("tmp");
    let many = sim(&["--seeds", "4"], &tmp.path().join("many"));
    let one = sim(&[], &tmp.path().join("one"));
    assert_eq!(many["seeds"], serde_json::json!([1, 2, 3, 4]));
    assert_eq!(many["runs"].as_array().map(Vec::len), Some(4));
    // Seed 1 of the four is the single run, number for number.
    let p50 = metric(&many, "Ping (ms) ICMP p50");
    assert_eq!(p50["values"][0], one["pings"][0]["latency_ms"]["p50"]);
    let total: f64 = one["flows"]
        .as_array()
        .expect("flows")
        .iter()
        .filter_map(|f| f["throughput_mbps"].as_f64())
        .sum();
    let t = metric(&many, "total goodput");
    assert!((t["values"][0].as_f64().expect("value") - total).abs() < 1e-9);
    // The interval is the values' mean ± t(0.975, 3) · sd / 2.
    let v: Vec<f64> = p50["values"]
        .as_array()
        .expect("values")
        .iter()
        .filter_map(Value::as_f64)
        .collect();
    let mean = v.iter().sum::<f64>() / 4.0;
    let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 3.0).sqrt();
    let s = &p50["spread"];
    assert!((s["mean"].as_f64().expect("mean") - mean).abs() < 1e-9);
    assert!((s["half_width"].as_f64().expect("hw") - 3.182446 * sd / 2.0).abs() < 1e-4);
    assert!(
        sd > 0.0,
        "cake's hashes differ by seed, so the runs do: {v:?}"
    );
    // Four flent files and the spread drawn in the report.
    let files = std::fs::read_dir(tmp.path().join("many"))
        .expect("dir")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".flent.gz"))
        })
        .count();
    assert_eq!(files, 4);
    let html = std::fs::read_to_string(tmp.path().join("many/index.html")).expect("report");
    assert!(
        html.contains("4 seeds") && html.contains("<polygon"),
        "spread band drawn"
    );
}

#[test]
fn compare_reads_two_seed_sets_and_refuses_a_single_run() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (a, b) = (tmp.path().join("cake"), tmp.path().join("fifo"));
    sim(&["--seeds", "5"], &a);
    sim(&["--seeds", "5", "--qdisc", "pfifo limit 1000"], &b);
    let (sa, sb) = (a.to_str().expect("utf-8"), b.to_str().expect("utf-8"));
    let o = debloat(&["compare", sa, sb, "--metric", "ICMP p50"]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains("fifo is higher by") && t.contains("p < 0.001"),
        "{t}"
    );
    let o = debloat(&["compare", sa, sa, "--metric", "ICMP p50"]);
    assert!(text(&o).contains("no difference found"), "{}", text(&o));
    let single = tmp.path().join("single");
    sim(&[], &single);
    let o = debloat(&["compare", sa, single.to_str().expect("utf-8")]);
    assert!(!o.status.success());
    assert!(text(&o).contains("--seeds 10"), "{}", text(&o));
}

#[test]
fn reproduce_seeds_reports_intervals_and_seed_one_is_unchanged() {
    let plain = debloat(&["reproduce", "HASH"]);
    let one = debloat(&["reproduce", "HASH", "--seeds", "1"]);
    assert!(plain.status.success() && one.status.success());
    let strip = |o: &std::process::Output| {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| !l.starts_with("HASH — "))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(strip(&plain), strip(&one));
    let o = debloat(&["reproduce", "HASH", "--seeds", "3"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(
        t.contains("mean ± 95 % CI") && t.contains("seeds 1–3"),
        "{t}"
    );
    assert!(t.contains("inside every band over 3 seeds"), "{t}");
}
