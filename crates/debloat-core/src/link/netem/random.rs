//! netem's randomness: probabilities as fractions of 2³² − 1, and the correlated generator that
//! every netem knob (delay, loss, duplicate, reorder, corrupt) may use.
//!
//! A correlated draw mixes a fresh 32-bit value with the previous draw:
//! `next = (fresh · (2³² − ρ) + last · ρ) >> 32`, with ρ the correlation scaled to 2³² (Linux
//! `get_crandom` in sch_netem.c). With ρ = 0 it is a plain draw. As in Linux, the mixed value is
//! no longer uniform (its spread shrinks as ρ grows), so a correlated `loss 10% 50%` loses fewer
//! than 10% of packets; tc-netem(8) warns about this and so do we.
//!
//! Deviation: the generator is SplitMix64 (debloat's, seeded from the gateway's seed or netem's
//! `seed` word) rather than the kernel's prandom Tausworthe generator, so a seed does not give
//! the same sequence as a seeded kernel netem; the distributions are the same.

use crate::rng::SplitMix64;

/// A probability as netem holds it: `p · (2³² − 1)`, rounded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Prob(pub u32);

impl Prob {
    /// Never.
    pub const ZERO: Prob = Prob(0);
    /// Always.
    pub const ONE: Prob = Prob(u32::MAX);

    /// From a fraction in 0..=1 (iproute2's `set_percent`).
    pub fn from_fraction(p: f64) -> Prob {
        Prob((p.clamp(0.0, 1.0) * f64::from(u32::MAX)).round() as u32)
    }

    /// As a fraction in 0..=1.
    pub fn fraction(self) -> f64 {
        f64::from(self.0) / f64::from(u32::MAX)
    }

    /// As a percentage, for display (`0.5%`).
    pub fn percent(self) -> String {
        // Four decimals as a rule; more when needed for the words to read back to this value.
        let pct = self.fraction() * 100.0;
        let mut s = format!("{pct:.4}");
        for d in 5..=12 {
            if s.parse::<f64>().map(|v| Prob::from_fraction(v / 100.0)) == Ok(self) {
                break;
            }
            s = format!("{pct:.d$}");
        }
        if s.contains('.') {
            s = s.trim_end_matches('0').trim_end_matches('.').to_string();
        }
        format!("{s}%")
    }

    /// Is this probability above zero?
    pub fn is_set(self) -> bool {
        self.0 > 0
    }
}

/// One correlated random source (Linux `struct crndstate`).
#[derive(Clone, Copy, Debug)]
pub struct Correlated {
    rho: u32,
    last: u32,
}

impl Correlated {
    /// A source with correlation `rho`; the first "previous value" is random, as in Linux.
    pub fn new(rho: Prob, rng: &mut SplitMix64) -> Correlated {
        Correlated {
            rho: rho.0,
            last: rng.next_u32(),
        }
    }

    /// The next value (Linux `get_crandom`).
    pub fn next(&mut self, rng: &mut SplitMix64) -> u32 {
        let value = u64::from(rng.next_u32());
        if self.rho == 0 {
            return value as u32;
        }
        let rho = u64::from(self.rho) + 1;
        let answer = ((value * ((1u64 << 32) - rho) + u64::from(self.last) * rho) >> 32) as u32;
        self.last = answer;
        answer
    }

    /// Does an event of probability `p` happen (netem's `p >= get_crandom()`)?
    pub fn happens(&mut self, p: Prob, rng: &mut SplitMix64) -> bool {
        p.is_set() && p.0 >= self.next(rng)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn probabilities_round_trip_as_percentages() {
        assert_eq!(Prob::from_fraction(0.005).percent(), "0.5%");
        assert_eq!(Prob::from_fraction(1.0), Prob::ONE);
        assert_eq!(Prob::from_fraction(0.25).percent(), "25%");
        assert!(!Prob::ZERO.is_set());
    }

    #[test]
    fn an_uncorrelated_source_hits_its_probability() {
        let mut rng = SplitMix64::new(7);
        let mut c = Correlated::new(Prob::ZERO, &mut rng);
        let p = Prob::from_fraction(0.1);
        let n = 200_000;
        let hits = (0..n).filter(|_| c.happens(p, &mut rng)).count();
        let rate = hits as f64 / f64::from(n);
        assert!((rate - 0.1).abs() < 0.003, "{rate}");
    }

    /// Correlation makes consecutive draws alike: the lag-1 correlation of the values grows
    /// with ρ (about ρ for this AR(1)-like mix).
    #[test]
    fn correlation_makes_consecutive_draws_alike() {
        for (rho, lo, hi) in [(0.0, -0.02, 0.02), (0.5, 0.45, 0.55), (0.9, 0.85, 0.95)] {
            let mut rng = SplitMix64::new(11);
            let mut c = Correlated::new(Prob::from_fraction(rho), &mut rng);
            let xs: Vec<f64> = (0..100_000).map(|_| f64::from(c.next(&mut rng))).collect();
            let mean = xs.iter().sum::<f64>() / xs.len() as f64;
            let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>();
            let cov = xs
                .windows(2)
                .map(|w| (w[0] - mean) * (w[1] - mean))
                .sum::<f64>();
            let r = cov / var;
            assert!((lo..hi).contains(&r), "rho {rho}: lag-1 correlation {r}");
        }
    }
}
