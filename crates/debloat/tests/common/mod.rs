//! Helpers shared by the command-line tests: run `debloat` as a user would and read its output.
#![allow(dead_code)]

pub mod bed;

use std::process::{Command, Output};

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
