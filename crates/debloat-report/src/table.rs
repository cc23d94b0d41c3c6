//! The runs side by side as a text table, with units on every column.

use crate::summary::RunSummary;
use std::fmt::Write;

/// Column headings and units.
pub const HEADINGS: [(&str, &str); 7] = [
    ("download", "Mbit/s"),
    ("upload", "Mbit/s"),
    ("latency p50", "ms"),
    ("p90", "ms"),
    ("p99", "ms"),
    ("idle p50", "ms"),
    ("induced", "ms"),
];

/// The cells of one run, formatted ("–" where the run has no such value).
pub fn cells(s: &RunSummary) -> [String; 7] {
    let f = |v: Option<f64>, d: usize| v.map_or("–".to_string(), |v| format!("{v:.d$}"));
    let l = s.latency;
    [
        f(s.download_mbps, 2),
        f(s.upload_mbps, 2),
        f(l.map(|l| l.p50), 1),
        f(l.map(|l| l.p90), 1),
        f(l.map(|l| l.p99), 1),
        f(s.idle_ms, 1),
        f(s.induced_ms(), 1),
    ]
}

/// The table as text.
pub fn text(runs: &[RunSummary]) -> String {
    let w = runs.iter().map(|r| r.label.len()).max().unwrap_or(3).max(3);
    let mut out = String::new();
    let _ = write!(out, "{:<w$}", "run");
    for (h, _) in HEADINGS {
        let _ = write!(out, " {h:>12}");
    }
    let _ = write!(out, "\n{:<w$}", "");
    for (_, u) in HEADINGS {
        let _ = write!(out, " {u:>12}");
    }
    out.push('\n');
    for r in runs {
        let _ = write!(out, "{:<w$}", r.label);
        for c in cells(r) {
            let _ = write!(out, " {c:>12}");
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::Percentiles;

    #[test]
    fn table_has_units_and_dashes_for_missing_values() {
        let r = RunSummary {
            label: "fq_codel".into(),
            flows: vec![],
            download_mbps: Some(17.5),
            upload_mbps: None,
            latency: Some(Percentiles {
                p50: 21.0,
                p90: 22.0,
                p99: 25.0,
            }),
            idle_ms: Some(20.0),
        };
        let t = text(&[r]);
        assert!(t.contains("Mbit/s") && t.contains("ms"), "{t}");
        assert!(
            t.contains("17.50") && t.contains("–") && t.contains("1.0"),
            "{t}"
        );
    }
}
