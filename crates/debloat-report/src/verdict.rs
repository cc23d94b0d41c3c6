//! The verdicts a probe run ends with — the bufferbloat grade (DSLReports' scale) and
//! responsiveness in RPM (draft-ietf-ippm-responsiveness-09) — as `debloat test` stores them in its
//! flent file's metadata (`DEBLOAT_VERDICT`), read back and shown at the top of the report with
//! the definition each was computed by.
//!
//! flent keeps metadata keys it does not know, so the file stays a valid flent file; a file without
//! the key (flent's own, or a simulation) has no verdict section.

use crate::html::escape;
use serde::Deserialize;
use serde_json::Value;
use std::fmt::Write;

/// The metadata key.
pub const KEY: &str = "DEBLOAT_VERDICT";

/// The bufferbloat grade of one run.
#[derive(Clone, Debug, Deserialize)]
pub struct Grade {
    /// A+ … F.
    pub letter: String,
    /// Latency statistic compared (Mean, Median, P95).
    pub stat: String,
    /// Which load the loaded latency was taken under (e.g. "bidirectional").
    #[serde(default)]
    pub direction: String,
    /// Latency before the load, ms.
    pub idle_ms: f64,
    /// Latency under the load, ms.
    pub loaded_ms: f64,
    /// Loaded minus idle, ms.
    pub increase_ms: f64,
    /// How it was computed, in words.
    #[serde(default)]
    pub definition: String,
    /// Each loaded phase when the directions were loaded in turn (`bufferbloat`); the grade
    /// is then of the mean of their increases.
    #[serde(default)]
    pub phases: Vec<Phase>,
}

/// One loaded phase of a graded run.
#[derive(Clone, Debug, Deserialize)]
pub struct Phase {
    /// download or upload.
    pub direction: String,
    /// When it ran, s from the start (the data file's x axis).
    #[serde(default)]
    pub window_s: Option<(f64, f64)>,
    /// Latency under this phase's load, ms.
    pub loaded_ms: f64,
    /// Increase over idle, ms.
    pub increase_ms: f64,
    /// This phase's own letter.
    pub letter: String,
}

/// Responsiveness of one run.
#[derive(Clone, Debug, Deserialize)]
pub struct Rpm {
    /// Round trips per minute.
    pub rpm: f64,
    /// The draft's rating (Poor, Fair, Good, Excellent).
    pub class: String,
    /// Low, Medium or High.
    pub confidence: String,
    /// From the foreign (idle-connection) probes.
    pub foreign_rpm: f64,
    /// From the load connections.
    pub loaded_rpm: f64,
    /// The P90 variant.
    #[serde(default)]
    pub p90_rpm: Option<f64>,
    /// How it was computed, in words.
    #[serde(default)]
    pub definition: String,
}

/// A run's verdicts; either may be absent (a test without idle probes has no grade).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Verdict {
    /// The grade.
    #[serde(default)]
    pub grade: Option<Grade>,
    /// The responsiveness.
    #[serde(default)]
    pub rpm: Option<Rpm>,
}

impl Verdict {
    /// The verdicts from a flent file's metadata, if it has them; a malformed entry is `Err`
    /// with what is wrong (the caller reports it and goes on without the section).
    pub fn from_metadata(meta: &serde_json::Map<String, Value>) -> Option<Result<Verdict, String>> {
        crate::flent::metadata_entry(meta, KEY)
    }

    /// The metadata value for `grade` and `rpm` as `debloat test` summarises them (JSON null
    /// where one could not be computed).
    pub fn metadata(grade: &Value, rpm: &Value) -> Value {
        serde_json::json!({ "grade": grade, "rpm": rpm })
    }
}

/// Colour of a grade letter, green (A+) to red (F).
fn colour(letter: &str) -> &'static str {
    match letter {
        "A+" | "A" => "#1a7f37",
        "B" => "#6a9a1f",
        "C" => "#b08800",
        "D" => "#d4650b",
        _ => "#c62828",
    }
}

/// The HTML section: one row per run with a verdict, then the definitions used.
pub fn html(runs: &[(&str, &Verdict)]) -> String {
    let mut h = String::new();
    h.push_str(
        "<div class=\"scroll\"><table id=\"verdict\"><thead><tr><th>run</th><th>grade</th>\
         <th>idle<br><small>ms</small></th><th>loaded<br><small>ms</small></th>\
         <th>increase<br><small>ms</small></th><th>responsiveness<br><small>RPM</small></th>\
         <th>rating</th><th>confidence</th></tr></thead><tbody>\n",
    );
    let mut defs: Vec<&str> = Vec::new();
    for (label, v) in runs {
        let _ = write!(h, "<tr><td>{}</td>", escape(label));
        match &v.grade {
            Some(g) => {
                let _ = write!(
                    h,
                    "<td><strong style=\"color:{c};font-size:1.3em\">{l}</strong> <small>({s} latency{d})</small></td>\
                     <td>{:.1}</td><td>{:.1}</td><td>+{:.1}</td>",
                    g.idle_ms,
                    g.loaded_ms,
                    g.increase_ms,
                    c = colour(&g.letter),
                    l = escape(&g.letter),
                    s = escape(&g.stat),
                    d = if g.direction.is_empty() {
                        String::new()
                    } else {
                        format!(", {} load", escape(&g.direction))
                    },
                );
                if !g.definition.is_empty() {
                    defs.push(&g.definition);
                }
            }
            None => h.push_str("<td>n/a</td><td>-</td><td>-</td><td>-</td>"),
        }
        match &v.rpm {
            Some(r) => {
                let _ = write!(
                    h,
                    "<td>{:.0}</td><td>{}</td><td>{}</td>",
                    r.rpm,
                    escape(&r.class),
                    escape(&r.confidence)
                );
                if !r.definition.is_empty() {
                    defs.push(&r.definition);
                }
            }
            None => h.push_str("<td>n/a</td><td>-</td><td>-</td>"),
        }
        h.push_str("</tr>\n");
        // A run graded over phases gets one row per phase under it (DSLReports' two directions).
        for p in v
            .grade
            .iter()
            .filter(|g| g.phases.len() > 1)
            .flat_map(|g| &g.phases)
        {
            let _ = writeln!(
                h,
                "<tr><td>&nbsp;&nbsp;{} phase</td><td><strong style=\"color:{}\">{}</strong></td>\
                 <td></td><td>{:.1}</td><td>+{:.1}</td><td colspan=\"3\"></td></tr>",
                escape(&p.direction),
                colour(&p.letter),
                escape(&p.letter),
                p.loaded_ms,
                p.increase_ms
            );
        }
    }
    h.push_str("</tbody></table></div>\n");
    defs.sort_unstable();
    defs.dedup();
    for d in defs {
        let _ = writeln!(h, "<p class=\"meta\">{}</p>", escape(d));
    }
    h
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta(v: Value) -> serde_json::Map<String, Value> {
        crate::flent::metadata_with(KEY, v)
    }

    #[test]
    fn reads_what_the_probe_writes_and_draws_it() {
        let grade = json!({"letter": "D", "stat": "Mean", "direction": "upload", "idle_ms": 20.4,
            "loaded_ms": 399.0, "increase_ms": 378.6, "definition": "DSLReports scale: A+ < 5 ms"});
        let rpm = json!({"rpm": 200.4, "class": "Poor", "confidence": "High", "foreign_rpm": 180.0,
            "loaded_rpm": 220.0, "p90_rpm": 150.0, "definition": "draft-09, TCP-only"});
        let v = Verdict::from_metadata(&meta(Verdict::metadata(&grade, &rpm)))
            .unwrap()
            .unwrap();
        assert_eq!(v.grade.as_ref().unwrap().letter, "D");
        assert_eq!(v.rpm.as_ref().unwrap().class, "Poor");
        let h = html(&[("tcp_1up <pfifo>", &v)]);
        assert!(h.contains("tcp_1up &lt;pfifo&gt;"), "{h}");
        assert!(h.contains(">D</strong>") && h.contains("+378.6") && h.contains("<td>200</td>"));
        assert!(h.contains("DSLReports scale") && h.contains("draft-09, TCP-only"));
        assert!(h.contains(colour("D")));
    }

    #[test]
    fn a_grade_over_two_phases_shows_each_phase() {
        let grade = json!({"letter": "C", "stat": "Mean", "direction": "download, upload",
        "idle_ms": 20.0, "loaded_ms": 175.0, "increase_ms": 155.0, "definition": "mean of the two",
        "phases": [
            {"direction": "download", "window_s": [5.0, 15.0], "loaded_ms": 320.0, "increase_ms": 300.0, "letter": "D"},
            {"direction": "upload", "window_s": [20.0, 30.0], "loaded_ms": 30.0, "increase_ms": 10.0, "letter": "A"}
        ]});
        let v = Verdict::from_metadata(&meta(Verdict::metadata(&grade, &Value::Null)))
            .unwrap()
            .unwrap();
        assert_eq!(v.grade.as_ref().unwrap().phases.len(), 2);
        let h = html(&[("bufferbloat", &v)]);
        assert!(h.contains(">C</strong>") && h.contains("+155.0"), "{h}");
        assert!(
            h.contains("download phase") && h.contains("+300.0") && h.contains(">D</strong>"),
            "{h}"
        );
        assert!(
            h.contains("upload phase") && h.contains("+10.0") && h.contains(">A</strong>"),
            "{h}"
        );
    }

    #[test]
    fn a_missing_verdict_is_shown_as_such_and_a_bad_one_is_an_error() {
        let v = Verdict::from_metadata(&meta(Verdict::metadata(&Value::Null, &Value::Null)))
            .unwrap()
            .unwrap();
        assert!(v.grade.is_none() && v.rpm.is_none());
        let h = html(&[("ping", &v)]);
        assert_eq!(h.matches("n/a").count(), 2, "{h}");
        assert!(Verdict::from_metadata(&serde_json::Map::new()).is_none());
        let bad = Verdict::from_metadata(&meta(json!({"grade": {"letter": 3}})));
        assert!(bad.unwrap().unwrap_err().contains(KEY));
    }
}
