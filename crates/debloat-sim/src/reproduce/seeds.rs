//! One experiment over many seeds: every check's mean, 95 % confidence interval (Student's t) and
//! min–max, and a verdict that holds for the interval, not for one lucky run.
//!
//! A check is `ok` when its whole interval lies in the band, `miss` when the interval lies wholly
//! outside it (or a seed measured nothing), and `uncertain` when the interval straddles an edge:
//! more seeds, or a model change, is needed to say which side it is on. With one seed there is no
//! interval and the verdict is the run's own (as `Check::pass`).

use super::{Band, Experiment, Outcome};
use debloat_report::stats::Spread;
use serde::Serialize;

/// A check's verdict over the seeds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The whole interval lies in the band.
    Ok,
    /// The interval straddles an edge of the band.
    Uncertain,
    /// The interval lies outside the band, or a seed measured nothing.
    Miss,
}

impl Verdict {
    /// The verdict of `values` (one per seed) against `band`.
    pub fn of(values: &[f64], band: Band) -> Verdict {
        let Some(s) = Spread::of(values) else {
            return Verdict::Miss;
        };
        if s.n < values.len() {
            return Verdict::Miss;
        }
        let (lo, hi) = (s.lo(), s.hi());
        if band.contains(lo) && band.contains(hi) {
            return Verdict::Ok;
        }
        let (bmin, bmax) = band.range();
        if lo <= bmax && hi >= bmin && s.n > 1 {
            Verdict::Uncertain
        } else {
            Verdict::Miss
        }
    }
}

/// One check over the seeds.
#[derive(Clone, Debug, Serialize)]
pub struct SeededCheck {
    /// What was measured.
    pub what: String,
    /// Its unit.
    pub unit: &'static str,
    /// The published value.
    pub published: &'static str,
    /// The band.
    pub band: Band,
    /// The value of each seed, in seed order.
    pub values: Vec<f64>,
    /// Mean, interval and min–max (`None` when no seed measured anything).
    pub spread: Option<Spread>,
    /// The verdict over the seeds.
    pub verdict: Verdict,
}

/// One experiment over the seeds.
#[derive(Clone, Debug, Serialize)]
pub struct Seeded {
    /// The experiment's id.
    pub id: &'static str,
    /// The seeds run, in order.
    pub seeds: Vec<u64>,
    /// The checks, in the experiment's order.
    pub checks: Vec<SeededCheck>,
    /// The first seed's notes (they describe one run).
    pub notes: Vec<String>,
}

impl Seeded {
    /// The worst verdict of its checks.
    pub fn verdict(&self) -> Verdict {
        let vs = self.checks.iter().map(|c| c.verdict);
        if vs.clone().any(|v| v == Verdict::Miss) {
            Verdict::Miss
        } else if vs.clone().any(|v| v == Verdict::Uncertain) {
            Verdict::Uncertain
        } else {
            Verdict::Ok
        }
    }
}

/// Run `e` with seeds 1..=n, on up to `threads` threads (each seed's run is independent and
/// deterministic, so the result does not depend on the threads).
pub fn repeat(e: &Experiment, n: u64, threads: usize) -> Seeded {
    let seeds: Vec<u64> = (1..=n.max(1)).collect();
    let outcomes = run_all(e, &seeds, threads.max(1));
    combine(e.id, seeds, outcomes)
}

fn run_all(e: &Experiment, seeds: &[u64], threads: usize) -> Vec<Outcome> {
    crate::repeat::par_map(seeds.len(), threads, |i| (e.run)(seeds[i]))
}

/// Fold the seeds' outcomes check by check (an experiment's checks are the same list for every
/// seed: built-in code, asserted here).
pub fn combine(id: &'static str, seeds: Vec<u64>, outcomes: Vec<Outcome>) -> Seeded {
    let first = outcomes.first();
    let notes = first.map(|o| o.notes.clone()).unwrap_or_default();
    let checks = first
        .map(|o| &o.checks[..])
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let values: Vec<f64> = outcomes
                .iter()
                .map(|o| {
                    let oc = &o.checks[i];
                    assert_eq!(oc.what, c.what, "{id}: checks differ between seeds");
                    oc.measured
                })
                .collect();
            SeededCheck {
                what: c.what.clone(),
                unit: c.unit,
                published: c.published,
                band: c.band,
                spread: Spread::of(&values),
                verdict: Verdict::of(&values, c.band),
                values,
            }
        })
        .collect();
    Seeded {
        id,
        seeds,
        checks,
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_follow_the_interval() {
        let band = Band::Within {
            min: 5.0,
            max: 12.0,
        };
        // Tight and inside.
        assert_eq!(Verdict::of(&[7.0, 7.2, 7.4, 7.1], band), Verdict::Ok);
        // Straddles 12: mean inside, interval not.
        assert_eq!(
            Verdict::of(&[10.0, 13.5, 11.0, 12.8], band),
            Verdict::Uncertain
        );
        // Tight and above.
        assert_eq!(Verdict::of(&[20.0, 20.5, 21.0], band), Verdict::Miss);
        // One seed: the run's own verdict, never uncertain.
        assert_eq!(Verdict::of(&[11.9], band), Verdict::Ok);
        assert_eq!(Verdict::of(&[12.1], band), Verdict::Miss);
        // A seed that measured nothing is a miss.
        assert_eq!(Verdict::of(&[7.0, f64::NAN], band), Verdict::Miss);
        assert_eq!(
            Verdict::of(&[1.0, 1.1], Band::AtLeast { min: 0.0 }),
            Verdict::Ok
        );
        assert_eq!(
            Verdict::of(&[0.5, 3.0], Band::Below { max: 1.0 }),
            Verdict::Uncertain
        );
    }
}
