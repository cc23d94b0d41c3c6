//! Helpers shared by the command-line tests: run `debloat` as a user would and read its output.
#![allow(dead_code)]

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
