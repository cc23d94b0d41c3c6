//! The bufferbloat grade, DSLReports scale (docs/measurement.md §7): the increase of round-trip
//! latency under load over the idle baseline, A+ < 5 ms, A < 30, B < 60, C < 200, D < 400,
//! F otherwise (no E).
//!
//! The baseline is the latency measured before the first load starts (flent's probes run from
//! 0, the flows from DELAY); the loaded latency is taken over each loaded phase's window.
//! DSLReports grades (increase during download + increase during upload) / 2: a test whose
//! directions load the link one after the other (`bufferbloat`) is graded exactly so, with
//! each phase's increase and letter kept beside the overall one. A flent test runs its
//! directions together (rrul) or one only (tcp_1up); its one loaded phase is graded alone,
//! labelled with its direction. The statistic is the mean by default (`--grade-stat
//! median|p95` to change it).

/// Which statistic of the idle and loaded samples is compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub enum GradeStat {
    /// Mean (DSLReports).
    #[default]
    Mean,
    /// Median.
    Median,
    /// 95th percentile.
    P95,
}

impl std::str::FromStr for GradeStat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "mean" => Ok(GradeStat::Mean),
            "median" => Ok(GradeStat::Median),
            "p95" => Ok(GradeStat::P95),
            o => Err(format!(
                "unknown grade statistic `{o}`: choose mean, median or p95"
            )),
        }
    }
}

impl GradeStat {
    fn of(self, v: &[f64]) -> Option<f64> {
        if v.is_empty() {
            return None;
        }
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        let q = |p: f64| debloat_report::percentile::percentile(&s, p);
        match self {
            GradeStat::Mean => Some(s.iter().sum::<f64>() / s.len() as f64),
            GradeStat::Median => q(50.0),
            GradeStat::P95 => q(95.0),
        }
    }
}

/// One loaded phase: the latency under it and its own letter.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Phase {
    /// `upload`, `download` or `bidirectional`.
    pub direction: &'static str,
    /// Window, s since the test's start.
    pub window_s: (f64, f64),
    /// Latency under this load, ms.
    pub loaded_ms: f64,
    /// Increase over idle, ms.
    pub increase_ms: f64,
    /// This phase's letter alone.
    pub letter: &'static str,
}

/// A grade with what it was computed from.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Grade {
    /// The letter.
    pub letter: &'static str,
    /// Idle latency, ms.
    pub idle_ms: f64,
    /// Latency under load, ms (the mean of the phases' when there are several).
    pub loaded_ms: f64,
    /// Increase, ms (the mean of the phases' increases when there are several).
    pub increase_ms: f64,
    /// `upload`, `download`, `bidirectional`, or the phases in order (`download, upload`).
    pub direction: String,
    /// The statistic used.
    pub stat: GradeStat,
    /// Each loaded phase, in order.
    pub phases: Vec<Phase>,
    /// The scale, for the report.
    pub definition: &'static str,
}

/// The DSLReports letter for an increase in ms.
pub fn letter(increase_ms: f64) -> &'static str {
    match increase_ms {
        x if x < 5.0 => "A+",
        x if x < 30.0 => "A",
        x if x < 60.0 => "B",
        x if x < 200.0 => "C",
        x if x < 400.0 => "D",
        _ => "F",
    }
}

/// Grade from latency samples `(t s, ms)` with one loaded phase `(direction, window)` or
/// several: idle is everything before the first phase starts, each phase's loaded latency is
/// taken within its window, and the grade is of the mean of the phases' increases. A phase
/// without samples (a test stopped before it) is left out and the grade says which phases it
/// is of; None when the idle baseline or every phase has no sample.
pub fn grade(
    samples: &[(f64, f64)],
    phases: &[(&'static str, (f64, f64))],
    stat: GradeStat,
) -> Option<Grade> {
    let start = phases.iter().map(|p| p.1 .0).reduce(f64::min)?;
    let idle: Vec<f64> = samples
        .iter()
        .filter(|s| s.0 < start)
        .map(|s| s.1)
        .collect();
    let idle_ms = stat.of(&idle)?;
    let mut out = Vec::with_capacity(phases.len());
    for &(direction, (a, b)) in phases {
        let loaded: Vec<f64> = samples
            .iter()
            .filter(|s| s.0 >= a && s.0 <= b)
            .map(|s| s.1)
            .collect();
        let Some(loaded_ms) = stat.of(&loaded) else {
            continue;
        };
        out.push(Phase {
            direction,
            window_s: (a, b),
            loaded_ms,
            increase_ms: loaded_ms - idle_ms,
            letter: letter(loaded_ms - idle_ms),
        });
    }
    if out.is_empty() {
        return None;
    }
    let n = out.len() as f64;
    let increase_ms = out.iter().map(|p| p.increase_ms).sum::<f64>() / n;
    let loaded_ms = out.iter().map(|p| p.loaded_ms).sum::<f64>() / n;
    let direction = out
        .iter()
        .map(|p| p.direction)
        .collect::<Vec<_>>()
        .join(", ");
    Some(Grade {
        letter: letter(increase_ms),
        idle_ms,
        loaded_ms,
        increase_ms,
        direction,
        stat,
        phases: out,
        definition: if n > 1.0 {
            "bufferbloat grade, DSLReports scale: the mean of the latency increases over idle during download and during upload; A+ < 5 ms, A < 30, B < 60, C < 200, D < 400, F otherwise"
        } else {
            "bufferbloat grade, DSLReports scale: latency increase under load over idle; A+ < 5 ms, A < 30, B < 60, C < 200, D < 400, F otherwise"
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_are_dslreports() {
        let cases = [
            (4.9, "A+"),
            (5.0, "A"),
            (29.9, "A"),
            (30.0, "B"),
            (59.0, "B"),
            (60.0, "C"),
            (199.0, "C"),
            (200.0, "D"),
            (399.9, "D"),
            (400.0, "F"),
            (2000.0, "F"),
        ];
        for (ms, l) in cases {
            assert_eq!(letter(ms), l, "{ms} ms");
        }
    }

    #[test]
    fn increase_is_loaded_minus_idle() {
        let mut s: Vec<(f64, f64)> = (0..25).map(|i| (i as f64 * 0.2, 20.0)).collect();
        s.extend((25..325).map(|i| (i as f64 * 0.2, 120.0)));
        let up = [("upload", (5.0, 65.0))];
        let g = grade(&s, &up, GradeStat::Mean).expect("grade");
        assert_eq!((g.idle_ms, g.loaded_ms, g.letter), (20.0, 120.0, "C"));
        assert_eq!((g.direction.as_str(), g.phases.len()), ("upload", 1));
        assert!(
            grade(&s[25..], &up, GradeStat::Mean).is_none(),
            "no idle baseline"
        );
        assert_eq!("p95".parse::<GradeStat>(), Ok(GradeStat::P95));
        assert!("p99"
            .parse::<GradeStat>()
            .expect_err("must fail")
            .contains("mean, median or p95"));
    }

    /// DSLReports' rule: download and upload graded apart, the overall letter from the mean of
    /// the two increases (here +300 ms and +10 ms: D and A alone, C together), with the idle
    /// gap between the phases and the idle tail in neither.
    #[test]
    fn phases_are_graded_apart_and_averaged() {
        let at = |t: f64| match t {
            t if t < 5.0 => 20.0,
            t if t <= 15.0 => 320.0,
            t if t < 20.0 => 900.0, // the gap: a draining queue, not part of either phase
            t if t <= 30.0 => 30.0,
            _ => 5000.0,
        };
        let s: Vec<(f64, f64)> = (0..175)
            .map(|i| (i as f64 * 0.2, at(i as f64 * 0.2)))
            .collect();
        let g = grade(
            &s,
            &[("download", (5.0, 15.0)), ("upload", (20.0, 30.0))],
            GradeStat::Mean,
        )
        .expect("grade");
        let p: Vec<(&str, f64, &str)> = g
            .phases
            .iter()
            .map(|p| (p.direction, p.increase_ms, p.letter))
            .collect();
        assert_eq!(p, [("download", 300.0, "D"), ("upload", 10.0, "A")]);
        assert_eq!((g.idle_ms, g.increase_ms, g.letter), (20.0, 155.0, "C"));
        assert_eq!(g.direction, "download, upload");
        assert!(g.definition.contains("during download and during upload"));
        // Stopped before the upload phase: graded on the download phase, and labelled so.
        let g = grade(
            &s[..90],
            &[("download", (5.0, 15.0)), ("upload", (20.0, 30.0))],
            GradeStat::Mean,
        )
        .expect("grade");
        assert_eq!(
            (g.direction.as_str(), g.letter, g.phases.len()),
            ("download", "D", 1)
        );
    }
}
