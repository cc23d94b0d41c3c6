//! Every rate a user gives, said in words when tc's reading may surprise (`10Mbps` is
//! megabytes per second), and refused below 64 kbit/s unless `--allow-slow-rate` says it is
//! meant (`debloat_core::rate_words`). One place, called wherever a spec, an emulated link or
//! a rate enters: flags, `gateway.toml`, imports, scenario files.

use anyhow::{bail, Result};
use debloat_core::rate_words;
use std::sync::atomic::{AtomicBool, Ordering};

static ALLOW_SLOW: AtomicBool = AtomicBool::new(false);

/// `--allow-slow-rate`: rates under 64 kbit/s are meant.
pub fn allow_slow(yes: bool) {
    ALLOW_SLOW.store(yes, Ordering::Relaxed);
}

/// Whether `--allow-slow-rate` was given (passed on to a gateway the testbed starts).
pub fn slow_allowed() -> bool {
    ALLOW_SLOW.load(Ordering::Relaxed)
}

/// One rate word (`--link`'s sides, `--rate`): a note on stderr if it needs one; an error if
/// it is too slow to be meant.
pub fn check_rate(flag: &str, word: &str) -> Result<()> {
    if let Some(note) = rate_words::explain(word) {
        eprintln!("note: {flag}: {note}");
    }
    if !ALLOW_SLOW.load(Ordering::Relaxed) {
        if let Some(why) = rate_words::too_slow(word) {
            bail!("{flag}: {why}");
        }
    }
    Ok(())
}

/// Every rate in a spec or an emulated link (`cake bandwidth 10Mbps`, `rate 2Mbps delay 5ms`).
pub fn check_spec(flag: &str, text: &str) -> Result<()> {
    for w in rate_words::rate_words(text) {
        check_rate(flag, w)?;
    }
    Ok(())
}

/// `--link DOWN/UP`'s rates (a `trace:` side has none to check).
pub fn check_link(down: &str, up: &str) -> Result<()> {
    for (side, w) in [("--link (down)", down), ("--link (up)", up)] {
        if !w.starts_with("trace:") {
            check_rate(side, w)?;
        }
    }
    Ok(())
}

/// A scenario file's rates: `down`, `up` and `rate` values, and the disciplines and
/// impairments (`qdisc…`, `impair`), each named by the file's line.
pub fn check_scenario(file: &str, text: &str) -> Result<()> {
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("");
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim().trim_matches('"'));
        let at = format!("{file}:{}: {key}", n + 1);
        match key {
            "down" | "up" | "rate" if !value.starts_with("trace:") => check_rate(&at, value)?,
            k if k.starts_with("qdisc") || k == "impair" => check_spec(&at, value)?,
            _ => {}
        }
    }
    Ok(())
}
