//! Statistics over repeated runs: the spread of one metric over seeds (mean, Student's t 95 %
//! confidence interval, min–max) and Welch's two-sample t-test for "do these two configurations
//! differ?".
//!
//! Why t and not a bootstrap: the runs are few (flent users repeat 5–10 times), each run's metric
//! is itself an average or a percentile over thousands of samples, and Welch's test does not
//! assume equal variances. The t distribution comes from `statrs`; nothing here is our own
//! numerical code beyond the textbook formulas (mean, sample standard deviation with n − 1,
//! Welch–Satterthwaite degrees of freedom).

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

/// The confidence level of every interval here.
pub const CONFIDENCE: f64 = 0.95;

/// One metric over n runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// Number of runs (NaN values are left out).
    pub n: usize,
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation (n − 1); 0 for one run.
    pub sd: f64,
    /// Half-width of the 95 % confidence interval of the mean (Student's t, n − 1 degrees of
    /// freedom); 0 for one run, where there is no interval to give.
    pub half_width: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
}

impl Spread {
    /// The spread of `values`; NaN values (a run that measured nothing) are left out. `None`
    /// when no value is left.
    pub fn of(values: &[f64]) -> Option<Spread> {
        let v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
        let n = v.len();
        if n == 0 {
            return None;
        }
        let mean = v.iter().sum::<f64>() / n as f64;
        let (min, max) = v
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
                (lo.min(*x), hi.max(*x))
            });
        if n == 1 {
            return Some(Spread {
                n,
                mean,
                sd: 0.0,
                half_width: 0.0,
                min,
                max,
            });
        }
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        let sd = var.sqrt();
        let half_width = t_quantile(n as f64 - 1.0) * sd / (n as f64).sqrt();
        Some(Spread {
            n,
            mean,
            sd,
            half_width,
            min,
            max,
        })
    }

    /// Lower end of the confidence interval.
    pub fn lo(&self) -> f64 {
        self.mean - self.half_width
    }

    /// Upper end of the confidence interval.
    pub fn hi(&self) -> f64 {
        self.mean + self.half_width
    }
}

/// The two-sided quantile of Student's t for [`CONFIDENCE`] (e.g. 2.262 for 9 degrees of
/// freedom).
pub fn t_quantile(df: f64) -> f64 {
    match StudentsT::new(0.0, 1.0, df) {
        Ok(t) => t.inverse_cdf(1.0 - (1.0 - CONFIDENCE) / 2.0),
        Err(_) => f64::NAN,
    }
}

/// Welch's t-test of two samples: is `b`'s mean different from `a`'s?
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Welch {
    /// mean(b) − mean(a).
    pub diff: f64,
    /// 95 % confidence interval of the difference, lower end.
    pub lo: f64,
    /// 95 % confidence interval of the difference, upper end.
    pub hi: f64,
    /// The t statistic.
    pub t: f64,
    /// Welch–Satterthwaite degrees of freedom.
    pub df: f64,
    /// Two-sided p-value.
    pub p: f64,
}

impl Welch {
    /// The test, or `None` when either sample has fewer than two values (no variance to
    /// estimate).
    pub fn test(a: &[f64], b: &[f64]) -> Option<Welch> {
        let (sa, sb) = (Spread::of(a)?, Spread::of(b)?);
        if sa.n < 2 || sb.n < 2 {
            return None;
        }
        let (va, vb) = (sa.sd.powi(2) / sa.n as f64, sb.sd.powi(2) / sb.n as f64);
        let diff = sb.mean - sa.mean;
        let se = (va + vb).sqrt();
        if se == 0.0 {
            // Both samples constant: the difference is exact.
            let p = if diff == 0.0 { 1.0 } else { 0.0 };
            return Some(Welch {
                diff,
                lo: diff,
                hi: diff,
                t: if diff == 0.0 {
                    0.0
                } else {
                    diff.signum() * f64::INFINITY
                },
                df: (sa.n + sb.n - 2) as f64,
                p,
            });
        }
        let df = (va + vb).powi(2)
            / (va.powi(2) / (sa.n as f64 - 1.0) + vb.powi(2) / (sb.n as f64 - 1.0));
        let t = diff / se;
        let p = StudentsT::new(0.0, 1.0, df)
            .map(|d| 2.0 * (1.0 - d.cdf(t.abs())))
            .unwrap_or(f64::NAN);
        let h = t_quantile(df) * se;
        Some(Welch {
            diff,
            lo: diff - h,
            hi: diff + h,
            t,
            df,
            p,
        })
    }

    /// Whether the difference is significant at the 5 % level.
    pub fn differs(&self) -> bool {
        self.p < 1.0 - CONFIDENCE
    }
}

/// A p-value as people write it: "p < 0.001", "p = 0.03".
pub fn p_text(p: f64) -> String {
    if p < 0.001 {
        "p < 0.001".to_string()
    } else {
        format!("p = {p:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_of_known_sample() {
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, sample sd sqrt(32/7).
        let s = Spread::of(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).expect("values");
        assert_eq!(s.n, 8);
        assert!((s.mean - 5.0).abs() < 1e-12);
        assert!((s.sd - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
        // t(0.975, 7) = 2.3646
        assert!((s.half_width - 2.3646 * s.sd / 8f64.sqrt()).abs() < 1e-3);
        assert_eq!((s.min, s.max), (2.0, 9.0));
    }

    #[test]
    fn t_quantiles_match_the_tables() {
        for (df, q) in [(1.0, 12.706), (4.0, 2.776), (9.0, 2.262), (30.0, 2.042)] {
            assert!(
                (t_quantile(df) - q).abs() < 1e-3,
                "df {df}: {}",
                t_quantile(df)
            );
        }
    }

    #[test]
    fn one_run_has_no_interval_and_nan_is_left_out() {
        let s = Spread::of(&[3.0, f64::NAN]).expect("one value");
        assert_eq!((s.n, s.mean, s.half_width), (1, 3.0, 0.0));
        assert!(Spread::of(&[f64::NAN]).is_none());
        assert!(Spread::of(&[]).is_none());
    }

    #[test]
    fn welch_matches_a_worked_example() {
        // a = 1..=10, b = 7..=20: different n and variance, worked by hand below.
        let a: Vec<f64> = (1..=10).map(f64::from).collect();
        let b: Vec<f64> = (7..=20).map(f64::from).collect();
        let w = Welch::test(&a, &b).expect("two samples");
        assert!((w.diff - 8.0).abs() < 1e-12);
        // var(a) = 9.1667, var(b) = 17.5; se = sqrt(0.91667 + 1.25) = 1.4720
        assert!((w.t - 8.0 / 1.4720).abs() < 1e-3, "t {}", w.t);
        assert!((w.df - 21.982).abs() < 0.01, "df {}", w.df);
        assert!(w.p < 1e-4 && w.differs());
        assert!(w.lo < 8.0 && w.hi > 8.0);
    }

    #[test]
    fn constant_samples_give_an_exact_difference() {
        let w = Welch::test(&[1.0, 1.0], &[3.0, 3.0]).expect("two samples");
        assert_eq!((w.diff, w.lo, w.hi, w.p), (2.0, 2.0, 2.0, 0.0));
        assert!(Welch::test(&[1.0], &[2.0, 3.0]).is_none());
    }
}
