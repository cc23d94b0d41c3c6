//! The bufferbloat grade, DSLReports scale (measurement.md §7): the increase of round-trip
//! latency under load over the idle baseline, A+ < 5 ms, A < 30, B < 60, C < 200, D < 400,
//! F otherwise (no E).
//!
//! The baseline is the latency measured before the load starts (flent's probes run from 0,
//! the flows from DELAY); the loaded latency is taken over the load window [DELAY,
//! DELAY + LENGTH]. DSLReports averages the increase during download and during upload; a
//! flent test runs its directions together (rrul) or one only (tcp_1up), so the grade is of the
//! test's one loaded phase, labelled with its direction. The statistic is the mean by default
//! (`--grade-stat median|p95` to change it).

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
        let q = |p: f64| s[((s.len() as f64 * p).ceil() as usize).clamp(1, s.len()) - 1];
        Some(match self {
            GradeStat::Mean => s.iter().sum::<f64>() / s.len() as f64,
            GradeStat::Median => q(0.5),
            GradeStat::P95 => q(0.95),
        })
    }
}

/// A grade with what it was computed from.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Grade {
    /// The letter.
    pub letter: &'static str,
    /// Idle latency, ms.
    pub idle_ms: f64,
    /// Latency under load, ms.
    pub loaded_ms: f64,
    /// Increase, ms.
    pub increase_ms: f64,
    /// `upload`, `download` or `bidirectional`.
    pub direction: &'static str,
    /// The statistic used.
    pub stat: GradeStat,
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

/// Grade from latency samples `(t s, ms)`: idle before `load.0`, loaded within `load`.
pub fn grade(
    samples: &[(f64, f64)],
    load: (f64, f64),
    stat: GradeStat,
    direction: &'static str,
) -> Option<Grade> {
    let idle: Vec<f64> = samples
        .iter()
        .filter(|s| s.0 < load.0)
        .map(|s| s.1)
        .collect();
    let loaded: Vec<f64> = samples
        .iter()
        .filter(|s| s.0 >= load.0 && s.0 <= load.1)
        .map(|s| s.1)
        .collect();
    let (idle_ms, loaded_ms) = (stat.of(&idle)?, stat.of(&loaded)?);
    let increase_ms = loaded_ms - idle_ms;
    Some(Grade {
        letter: letter(increase_ms),
        idle_ms,
        loaded_ms,
        increase_ms,
        direction,
        stat,
        definition: "bufferbloat grade, DSLReports scale: latency increase under load over idle; A+ < 5 ms, A < 30, B < 60, C < 200, D < 400, F otherwise",
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
        let g = grade(&s, (5.0, 65.0), GradeStat::Mean, "upload").expect("grade");
        assert_eq!((g.idle_ms, g.loaded_ms, g.letter), (20.0, 120.0, "C"));
        assert!(
            grade(&s[25..], (5.0, 65.0), GradeStat::Mean, "upload").is_none(),
            "no idle baseline"
        );
        assert_eq!("p95".parse::<GradeStat>(), Ok(GradeStat::P95));
        assert!("p99"
            .parse::<GradeStat>()
            .expect_err("must fail")
            .contains("mean, median or p95"));
    }
}
