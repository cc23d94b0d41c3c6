//! Repeated runs of one configuration (`debloat sim --seeds N`): each metric's value per seed
//! and its interval, as `summary.json` carries them, and the comparison of two such sets
//! (`debloat compare`), metric by metric, with Welch's t-test.

use crate::stats::{p_text, Spread, Welch};
use serde::{Deserialize, Serialize};

/// One number a run produced: "ping p99", "ms", 812.0.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Metric {
    /// What it is, unique within a run.
    pub name: String,
    /// Its unit ("ms", "Mbit/s", "%", "packets", "").
    pub unit: String,
    /// The value.
    pub value: f64,
}

impl Metric {
    /// A metric.
    pub fn new(name: impl Into<String>, unit: &str, value: f64) -> Metric {
        Metric {
            name: name.into(),
            unit: unit.to_string(),
            value,
        }
    }
}

/// One metric over the seeds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SeededMetric {
    /// What it is.
    pub name: String,
    /// Its unit.
    pub unit: String,
    /// One value per seed, in seed order (NaN where a seed had none).
    pub values: Vec<f64>,
    /// Mean, 95 % interval, min–max (`None` when no seed had a value).
    pub spread: Option<Spread>,
}

/// A configuration run over several seeds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Repeats {
    /// The seeds, in order.
    pub seeds: Vec<u64>,
    /// Every metric any seed produced, in the first seed's order.
    pub metrics: Vec<SeededMetric>,
}

impl Repeats {
    /// Fold each seed's metrics by name. A metric a seed lacks counts as NaN there (left out
    /// of the spread, kept in `values` so the seeds stay aligned).
    pub fn fold(seeds: Vec<u64>, runs: &[Vec<Metric>]) -> Repeats {
        let mut names: Vec<(String, String)> = Vec::new();
        for m in runs.iter().flatten() {
            if !names.iter().any(|(n, _)| *n == m.name) {
                names.push((m.name.clone(), m.unit.clone()));
            }
        }
        let metrics = names
            .into_iter()
            .map(|(name, unit)| {
                let values: Vec<f64> = runs
                    .iter()
                    .map(|r| {
                        r.iter()
                            .find(|m| m.name == name)
                            .map_or(f64::NAN, |m| m.value)
                    })
                    .collect();
                SeededMetric {
                    spread: Spread::of(&values),
                    name,
                    unit,
                    values,
                }
            })
            .collect();
        Repeats { seeds, metrics }
    }

    /// Read the `seeds` and `metrics` of a `summary.json` written by `debloat sim --seeds N`
    /// (or the directory holding one). A single run's summary has no per-seed values: the
    /// error says how to make one that has.
    pub fn read(path: &std::path::Path) -> Result<Repeats, String> {
        let file = if path.is_dir() {
            path.join("summary.json")
        } else {
            path.to_path_buf()
        };
        let text =
            std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        let v: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not JSON: {e}", file.display()))?;
        if v.get("metrics").is_none() {
            return Err(format!(
                "{}: one run, no per-seed values; write one with `debloat sim … --seeds 10 \
                 --output DIR` and compare DIR/summary.json",
                file.display()
            ));
        }
        serde_json::from_value(v).map_err(|e| format!("{}: {e}", file.display()))
    }

    /// The metric with this name.
    pub fn get(&self, name: &str) -> Option<&SeededMetric> {
        self.metrics.iter().find(|m| m.name == name)
    }
}

/// One metric of B against A.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    /// The metric.
    pub name: String,
    /// Its unit.
    pub unit: String,
    /// A's mean.
    pub mean_a: f64,
    /// B's mean.
    pub mean_b: f64,
    /// Welch's test of B − A (`None` when either side has fewer than two values).
    pub welch: Option<Welch>,
}

impl Comparison {
    /// One line a person reads: "ping p99: 812.00 → 629.00 ms, lower by 183.00 ms (95 % CI
    /// 170.10–195.90 ms), p < 0.001".
    pub fn sentence(&self, a: &str, b: &str) -> String {
        let u = &self.unit;
        let head = format!(
            "{}: {a} {:.2} → {b} {:.2} {u}",
            self.name, self.mean_a, self.mean_b
        );
        let Some(w) = &self.welch else {
            return format!("{head}: not compared (needs two or more seeds on each side)");
        };
        if !w.differs() {
            return format!(
                "{head}: no difference found ({}; 95 % CI of B − A {:.2} to {:.2} {u})",
                p_text(w.p),
                w.lo,
                w.hi
            );
        }
        let (word, lo, hi) = if w.diff < 0.0 {
            ("lower", -w.hi, -w.lo)
        } else {
            ("higher", w.lo, w.hi)
        };
        format!(
            "{head}: {b} is {word} by {:.2} {u} (95 % CI {lo:.2}–{hi:.2} {u}), {}",
            w.diff.abs(),
            p_text(w.p)
        )
    }
}

/// Every metric both sets have, in A's order.
pub fn compare(a: &Repeats, b: &Repeats) -> Vec<Comparison> {
    a.metrics
        .iter()
        .filter_map(|ma| {
            let mb = b.get(&ma.name)?;
            let (sa, sb) = (ma.spread.as_ref()?, mb.spread.as_ref()?);
            Some(Comparison {
                name: ma.name.clone(),
                unit: ma.unit.clone(),
                mean_a: sa.mean,
                mean_b: sb.mean,
                welch: Welch::test(&ma.values, &mb.values),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(values: &[f64]) -> Repeats {
        let runs: Vec<Vec<Metric>> = values
            .iter()
            .map(|v| vec![Metric::new("ping p99", "ms", *v)])
            .collect();
        Repeats::fold((1..=values.len() as u64).collect(), &runs)
    }

    #[test]
    fn fold_keeps_seeds_aligned_when_a_metric_is_missing() {
        let runs = vec![
            vec![Metric::new("a", "ms", 1.0), Metric::new("b", "%", 5.0)],
            vec![Metric::new("a", "ms", 3.0)],
        ];
        let r = Repeats::fold(vec![1, 2], &runs);
        let b = r.get("b").expect("b");
        assert_eq!(b.values.len(), 2);
        assert!(b.values[1].is_nan());
        assert_eq!(b.spread.as_ref().map(|s| s.n), Some(1));
        assert_eq!(
            r.get("a").and_then(|m| m.spread.as_ref()).map(|s| s.mean),
            Some(2.0)
        );
    }

    #[test]
    fn sentences_say_which_way_and_by_how_much() {
        let a = set(&[800.0, 810.0, 820.0, 805.0, 815.0]);
        let b = set(&[630.0, 625.0, 640.0, 628.0, 632.0]);
        let c = compare(&a, &b);
        let s = c[0].sentence("pfifo", "cake");
        assert!(s.contains("cake is lower by"), "{s}");
        assert!(s.contains("p < 0.001"), "{s}");
        let same = compare(&a, &a)[0].sentence("a", "a");
        assert!(same.contains("no difference found"), "{same}");
        let one = compare(&set(&[1.0]), &b)[0].sentence("a", "b");
        assert!(one.contains("not compared"), "{one}");
    }
}
