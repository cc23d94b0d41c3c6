//! A TOML scenario for `debloat sim --scenario`: never a panic; a scenario that runs reports
//! finite, non-negative throughputs and losses between 0 and 100 %. Runs are kept short (length
//! ≤ 0.3 s, ≤ 4 flows) so inputs stay fast.
//!
//! Run: `cargo +nightly fuzz run scenario_toml` (from the repository root; needs cargo-fuzz).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(mut v) = text.parse::<toml::Table>() else { return };
    if let Some(toml::Value::Float(l)) = v.get("length") {
        v.insert("length".into(), toml::Value::Float(l.clamp(-1.0, 0.3)));
    }
    if let Some(toml::Value::Integer(l)) = v.get("length") {
        v.insert("length".into(), toml::Value::Integer((*l).min(0)));
    }
    if matches!(v.get("flow"), Some(toml::Value::Array(a)) if a.len() > 4) {
        return;
    }
    let Ok((_, run)) = debloat_sim::scenario_file::run(&v.to_string(), |_| {}) else { return };
    for f in &run.summary.flows {
        assert!(f.throughput_mbps.is_finite() && f.throughput_mbps >= 0.0, "{}", f.name);
        assert!((0.0..=100.0).contains(&f.loss_pct) || f.loss_pct.is_nan(), "{}", f.name);
    }
});
