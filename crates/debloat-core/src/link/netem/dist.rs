//! Delay distributions: netem's `delay MU SIGMA [CORR] distribution NAME`.
//!
//! netem draws a delay as `mu + sigma · t / 8192`, where `t` is a random entry of a 4096-entry
//! table of the distribution's inverse CDF, scaled by 8192 (`NETEM_DIST_SCALE`) and clamped to
//! 16 bits (Linux `tabledist`). Without a table the draw is uniform over `[mu − sigma, mu + sigma)`.
//! iproute2 ships the tables as files made by small generators (normal.c, pareto.c,
//! paretonormal.c in iproute2's netem/ directory). debloat computes the same tables from the same
//! definitions at start-up:
//! - normal: entry k is the standard normal quantile at `(4k + ½) / 16384`;
//! - pareto: entry k is `(u^(−1/3) − 1.5) · 4/3` with `u = 1 − k/4096` (shape a = 3, shifted to
//!   mean 0), at most 32767;
//! - paretonormal: `(normal + 3 · pareto) / 4`, integer division, as the generator does.
//!
//! The normal quantile comes from Acklam's rational approximation (relative error below
//! 1.2 · 10⁻⁹, far finer than the table's 1/8192 steps), where iproute2 scanned erf in steps of
//! 0.00005; entries may differ from iproute2's files by one unit in the last place.

use std::sync::OnceLock;

/// Entries in a table.
pub const TABLE_SIZE: usize = 4096;
/// Scale of a table entry (Linux `NETEM_DIST_SCALE`).
pub const SCALE: i64 = 8192;

/// A delay distribution.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Distribution {
    /// Uniform over `[mu − sigma, mu + sigma)` (netem's default; no table).
    #[default]
    Uniform,
    /// Normal.
    Normal,
    /// Pareto (a = 3), long tail to the right.
    Pareto,
    /// One quarter normal, three quarters pareto.
    ParetoNormal,
}

impl Distribution {
    /// The names tc accepts.
    pub const NAMES: &'static str = "uniform, normal, pareto, paretonormal";

    /// From tc's name.
    pub fn from_name(s: &str) -> Option<Distribution> {
        Some(match s {
            "uniform" => Distribution::Uniform,
            "normal" => Distribution::Normal,
            "pareto" => Distribution::Pareto,
            "paretonormal" => Distribution::ParetoNormal,
            _ => return None,
        })
    }

    /// tc's name.
    pub fn name(self) -> &'static str {
        match self {
            Distribution::Uniform => "uniform",
            Distribution::Normal => "normal",
            Distribution::Pareto => "pareto",
            Distribution::ParetoNormal => "paretonormal",
        }
    }

    /// The table (None for uniform), built once per process.
    pub fn table(self) -> Option<&'static [i16]> {
        static NORMAL: OnceLock<Vec<i16>> = OnceLock::new();
        static PARETO: OnceLock<Vec<i16>> = OnceLock::new();
        static PARETONORMAL: OnceLock<Vec<i16>> = OnceLock::new();
        match self {
            Distribution::Uniform => None,
            Distribution::Normal => Some(NORMAL.get_or_init(|| build(normal_entry))),
            Distribution::Pareto => Some(PARETO.get_or_init(|| build(pareto_entry))),
            Distribution::ParetoNormal => Some(
                PARETONORMAL.get_or_init(|| build(|k| (normal_entry(k) + 3 * pareto_entry(k)) / 4)),
            ),
        }
    }
}

fn build(entry: impl Fn(usize) -> i64) -> Vec<i16> {
    (0..TABLE_SIZE)
        .map(|k| entry(k).clamp(i64::from(i16::MIN), i64::from(i16::MAX)) as i16)
        .collect()
}

fn normal_entry(k: usize) -> i64 {
    let p = (4.0 * k as f64 + 0.5) / 16384.0;
    (normal_quantile(p) * SCALE as f64).round() as i64
}

fn pareto_entry(k: usize) -> i64 {
    let u = (65536 - 16 * k) as f64 / 65536.0;
    let v = (u.powf(-1.0 / 3.0) - 1.5) * (4.0 / 3.0) * SCALE as f64;
    v.min(32767.0).round() as i64
}

/// The standard normal quantile (Acklam's algorithm), for 0 < p < 1.
pub fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    const P_LOW: f64 = 0.024_25;
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < P_LOW {
        tail((-2.0 * p.ln()).sqrt())
    } else if p <= 1.0 - P_LOW {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    }
}

/// A delay with mean `mu` and spread `sigma` (ns) from the 32-bit random value `rnd`
/// (Linux `tabledist`, same integer arithmetic). May be negative when `sigma > mu`.
pub fn tabledist(mu: i64, sigma: i64, rnd: u32, table: Option<&[i16]>) -> i64 {
    if sigma <= 0 {
        return mu;
    }
    let Some(table) = table else {
        // Uniform; netem computes this in 32 bits (sigma is an s32 there).
        return (i64::from(rnd) % (2 * sigma)) + mu - sigma;
    };
    let t = i64::from(table[rnd as usize % table.len()]);
    let mut x = (sigma % SCALE) * t;
    // Round half away from zero before dividing (C's division truncates towards zero, as
    // Rust's does).
    x += if x >= 0 { SCALE / 2 } else { -SCALE / 2 };
    x / SCALE + (sigma / SCALE) * t + mu
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    #[test]
    fn the_normal_quantile_matches_known_values() {
        for (p, x) in [
            (0.5, 0.0),
            (0.975, 1.959_963_985),
            (0.001, -3.090_232_306),
            (0.841_344_746, 1.0),
            (0.01, -2.326_347_874),
        ] {
            assert!(
                (normal_quantile(p) - x).abs() < 1e-6,
                "{p}: {}",
                normal_quantile(p)
            );
        }
    }

    #[test]
    fn tables_have_the_shape_of_iproute2s() {
        let n = Distribution::Normal.table().unwrap();
        assert_eq!(n.len(), TABLE_SIZE);
        assert_eq!(n[0], i16::MIN, "the far left tail is clamped");
        assert!(n.windows(2).all(|w| w[0] <= w[1]), "an inverse CDF rises");
        assert!(n[2048].abs() <= 2, "median 0: {}", n[2048]);
        let p = Distribution::Pareto.table().unwrap();
        // u = 1: (1 − 1.5) · 4/3 · 8192 = −5461.
        assert_eq!(p[0], -5461);
        assert_eq!(p[TABLE_SIZE - 1], i16::MAX, "the long tail is clamped");
        let pn = Distribution::ParetoNormal.table().unwrap();
        assert_eq!(
            i64::from(pn[1000]),
            (normal_entry(1000) + 3 * pareto_entry(1000)) / 4
        );
    }

    fn draws(dist: Distribution, mu: i64, sigma: i64) -> Vec<f64> {
        let mut rng = SplitMix64::new(3);
        (0..200_000)
            .map(|_| tabledist(mu, sigma, rng.next_u32(), dist.table()) as f64)
            .collect()
    }

    fn mean_sd(xs: &[f64]) -> (f64, f64) {
        let m = xs.iter().sum::<f64>() / xs.len() as f64;
        let v = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / xs.len() as f64;
        (m, v.sqrt())
    }

    /// `delay 20ms 2ms distribution normal`: mean 20 ms, standard deviation 2 ms.
    #[test]
    fn a_normal_delay_has_the_asked_mean_and_deviation() {
        let xs = draws(Distribution::Normal, 20_000_000, 2_000_000);
        let (m, sd) = mean_sd(&xs);
        assert!((m - 20e6).abs() < 0.01 * 2e6, "mean {m}");
        assert!((sd - 2e6).abs() < 0.02 * 2e6, "sd {sd}");
    }

    /// Uniform (no distribution word): every value in [mu − sigma, mu + sigma), mean mu.
    #[test]
    fn a_uniform_delay_spans_mu_plus_minus_sigma() {
        let xs = draws(Distribution::Uniform, 20_000_000, 2_000_000);
        assert!(xs.iter().all(|&x| (18e6..22e6).contains(&x)));
        let (m, sd) = mean_sd(&xs);
        assert!((m - 20e6).abs() < 20_000.0, "mean {m}");
        // Uniform over 2σ wide: sd = 2σ/√12.
        assert!((sd - 4e6 / 12f64.sqrt()).abs() < 20_000.0, "sd {sd}");
    }

    /// Pareto: mean about mu, the median below it, a long right tail.
    #[test]
    fn a_pareto_delay_has_a_long_right_tail() {
        let mut xs = draws(Distribution::Pareto, 20_000_000, 2_000_000);
        let (m, _) = mean_sd(&xs);
        xs.sort_by(f64::total_cmp);
        let median = xs[xs.len() / 2];
        let p999 = xs[xs.len() * 999 / 1000];
        assert!((m - 20e6).abs() < 0.05 * 2e6, "mean {m}");
        assert!(median < m - 0.2 * 2e6, "median {median} vs mean {m}");
        assert!(p999 > 20e6 + 3.0 * 2e6, "p99.9 {p999}");
        assert!(xs[0] >= 20e6 - 0.67 * 2e6, "min {}", xs[0]);
    }
}
