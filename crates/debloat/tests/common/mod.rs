//! Helpers shared by the command-line tests: run `debloat` as a user would and read its output.
#![allow(dead_code)]

pub mod bed;
pub mod rx;
pub mod stalls;

use std::path::Path;
use std::process::{Command, Output};

/// A gzipped flent data file (`*.flent.gz`) as JSON.
pub fn read_flent(p: &Path) -> serde_json::Value {
    let f = std::fs::File::open(p).expect("open");
    let mut s = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(f), &mut s).expect("gzip");
    serde_json::from_str(&s).expect("json")
}

/// Run the `debloat` binary with these arguments.
pub fn debloat(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_debloat"))
        .args(args)
        .output()
        .expect("runs")
}

/// Everything it printed, stdout then stderr.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The file in `dir` whose name ends with `suffix` (`.json`, `.flent.gz`); panics if none.
pub fn output_file(dir: &std::path::Path, suffix: &str) -> std::path::PathBuf {
    std::fs::read_dir(dir)
        .expect("output directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.to_string_lossy().ends_with(suffix))
        .unwrap_or_else(|| panic!("no {suffix} written in {}", dir.display()))
}

/// The JSON summary `debloat test` wrote in `dir`.
pub fn summary_json(dir: &std::path::Path) -> serde_json::Value {
    let p = output_file(dir, ".json");
    serde_json::from_str(&std::fs::read_to_string(&p).expect("read")).expect("summary is JSON")
}

/// Bytes the download flows of a `debloat test` summary received, in all.
pub fn bytes_down(summary: &serde_json::Value) -> f64 {
    summary["flows"]
        .as_array()
        .expect("flows")
        .iter()
        .filter(|f| f["direction"] == "down")
        .map(|f| f["bytes_received"].as_f64().unwrap_or(0.0))
        .sum()
}

/// A fates CSV (`debloat replay --output`): its header joined with commas, and its rows.
pub fn fates(p: &std::path::Path) -> (String, Vec<Vec<String>>) {
    let mut r = csv::Reader::from_path(p).expect("fates csv");
    let h: Vec<String> = r
        .headers()
        .expect("header")
        .iter()
        .map(String::from)
        .collect();
    let rows = r
        .records()
        .map(|x| x.expect("row").iter().map(String::from).collect())
        .collect();
    (h.join(","), rows)
}

/// Headless Chromium, started as the workplace's notes say (no background networking, a fresh
/// profile), in network namespace `netns` if given; None with a SKIP line when it is not
/// installed (a failure under CI).
pub fn chromium(netns: Option<&str>, args: &[&str], profile: &Path) -> Option<Output> {
    let bin = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| {
            Command::new(b)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        });
    let Some(bin) = bin else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have chromium (apt-get install chromium)"
        );
        println!(
            "SKIP: chromium is not installed; nothing was rendered (apt-get install chromium)"
        );
        return None;
    };
    let profile_arg = format!("--user-data-dir={}", profile.display());
    let mut cmd = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, bin]);
            c
        }
        None => Command::new(bin),
    };
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        "--enable-logging=stderr",
        "--v=0",
        profile_arg.as_str(),
    ]);
    cmd.args(args);
    Some(cmd.output().expect("chromium runs"))
}
