//! netem's loss models: independent (`loss random P [CORR]`), the 4-state Markov chain of the GI
//! model (`loss state P13 [P31 [P32 [P23 [P14]]]]`) and Gilbert-Elliott
//! (`loss gemodel P [R [1-H [1-K]]]`), each as Linux's `loss_event` decides per packet.
//!
//! 4-state chain (Salsano et al., "Definition of a general and intuitive loss model for packet
//! networks", as in sch_netem.c): state 1 = packet received in a gap, 2 = received in a burst,
//! 3 = lost in a burst, 4 = isolated loss in a gap. From 1: to 4 with P14, to 3 with P13;
//! from 3: to 2 with P32, to 1 with P31; from 2: to 3 with P23; from 4: back to 1. A packet is
//! lost when the chain enters (or stays in) a loss state. One draw decides each step.
//!
//! Gilbert-Elliott: two states; in Good, go Bad with P, lose with 1−K; in Bad, go Good with R,
//! lose with 1−H. The transition is drawn first, then the loss, each with its own draw, and the
//! loss test uses the state after the transition (as Linux does).
//!
//! Defaults are iproute2's: `state P13` alone means P31 = 1 − P13, P32 = 0, P23 = 1, P14 = 0
//! (Bernoulli-like); `gemodel P` alone means R = 1 − P, 1−H = 100% (every packet in Bad is
//! lost), 1−K = 0 (the simple Gilbert model).

use super::random::{Correlated, Prob};
use crate::rng::SplitMix64;

/// Which loss model, with its parameters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Loss {
    /// No loss.
    #[default]
    None,
    /// Independent (optionally correlated) loss with probability `p`.
    Random {
        /// Loss probability.
        p: Prob,
        /// Correlation with the previous draw.
        corr: Prob,
    },
    /// The 4-state GI model.
    State {
        /// Gap → burst loss.
        p13: Prob,
        /// Burst loss → gap.
        p31: Prob,
        /// Burst loss → burst received.
        p32: Prob,
        /// Burst received → burst loss.
        p23: Prob,
        /// Gap → isolated loss.
        p14: Prob,
    },
    /// Gilbert-Elliott.
    Gemodel {
        /// Good → Bad.
        p: Prob,
        /// Bad → Good.
        r: Prob,
        /// Probability a packet in Bad is *not* lost (tc's word is `1-h`: the loss).
        h: Prob,
        /// Probability a packet in Good is lost (tc's `1-k`).
        k1: Prob,
    },
}

/// The running state of a loss model.
#[derive(Clone, Copy, Debug)]
pub struct LossState {
    model: Loss,
    corr: Option<Correlated>,
    /// 4-state: 1..=4; Gilbert-Elliott: 1 = Good, 2 = Bad.
    state: u8,
}

impl LossState {
    /// Start a model (4-state in state 1, Gilbert-Elliott in Good, as Linux does).
    pub fn new(model: Loss, rng: &mut SplitMix64) -> LossState {
        let corr = match model {
            Loss::Random { corr, .. } => Some(Correlated::new(corr, rng)),
            _ => None,
        };
        LossState {
            model,
            corr,
            state: 1,
        }
    }

    /// Is the next packet lost?
    pub fn lose(&mut self, rng: &mut SplitMix64) -> bool {
        match self.model {
            Loss::None => false,
            Loss::Random { p, .. } => match &mut self.corr {
                Some(c) => c.happens(p, rng),
                None => false,
            },
            Loss::State {
                p13,
                p31,
                p32,
                p23,
                p14,
            } => {
                let rnd = rng.next_u32();
                let below = |a: Prob, b: Prob| u64::from(rnd) < u64::from(a.0) + u64::from(b.0);
                match self.state {
                    1 if rnd < p14.0 => {
                        self.state = 4;
                        true
                    }
                    1 if below(p13, p14) => {
                        self.state = 3;
                        true
                    }
                    2 if rnd < p23.0 => {
                        self.state = 3;
                        true
                    }
                    3 if rnd < p32.0 => {
                        self.state = 2;
                        false
                    }
                    3 if below(p31, p32) => {
                        self.state = 1;
                        false
                    }
                    3 => true,
                    4 => {
                        self.state = 1;
                        false
                    }
                    _ => false,
                }
            }
            Loss::Gemodel { p, r, h, k1 } => {
                if self.state == 1 {
                    if rng.next_u32() < p.0 {
                        self.state = 2;
                    }
                    rng.next_u32() < k1.0
                } else {
                    if rng.next_u32() < r.0 {
                        self.state = 1;
                    }
                    rng.next_u32() > h.0
                }
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn run(model: Loss, n: usize) -> Vec<bool> {
        let mut rng = SplitMix64::new(5);
        let mut s = LossState::new(model, &mut rng);
        (0..n).map(|_| s.lose(&mut rng)).collect()
    }

    fn pc(p: f64) -> Prob {
        Prob::from_fraction(p / 100.0)
    }

    /// Lengths of the runs of consecutive losses.
    fn bursts(v: &[bool]) -> Vec<usize> {
        let mut out = Vec::new();
        let mut run = 0;
        for &l in v {
            if l {
                run += 1;
            } else if run > 0 {
                out.push(run);
                run = 0;
            }
        }
        out
    }

    fn rate(v: &[bool]) -> f64 {
        v.iter().filter(|&&l| l).count() as f64 / v.len() as f64
    }

    #[test]
    fn random_loss_hits_its_rate_with_short_bursts() {
        let v = run(
            Loss::Random {
                p: pc(1.0),
                corr: Prob::ZERO,
            },
            500_000,
        );
        assert!((rate(&v) - 0.01).abs() < 0.0005, "{}", rate(&v));
        let b = bursts(&v);
        let mean = b.iter().sum::<usize>() as f64 / b.len() as f64;
        assert!(
            mean < 1.03,
            "independent losses rarely follow each other: {mean}"
        );
    }

    /// Gilbert (gemodel p r, 1-h = 100%, 1-k = 0): steady-state loss p / (p + r), mean burst 1/r.
    #[test]
    fn gilbert_elliott_losses_come_in_bursts_of_mean_one_over_r() {
        let (p, r) = (0.01, 0.25);
        let v = run(
            Loss::Gemodel {
                p: Prob::from_fraction(p),
                r: Prob::from_fraction(r),
                h: Prob::ZERO,
                k1: Prob::ZERO,
            },
            1_000_000,
        );
        let want = p / (p + r);
        assert!(
            (rate(&v) - want).abs() < 0.1 * want,
            "loss {} vs {want}",
            rate(&v)
        );
        let b = bursts(&v);
        let mean = b.iter().sum::<usize>() as f64 / b.len() as f64;
        assert!(
            (mean - 1.0 / r).abs() < 0.1 / r,
            "mean burst {mean} vs {}",
            1.0 / r
        );
    }

    /// Loss inside the Bad state (1-h = 50%) and in Good (1-k = 1%).
    #[test]
    fn gilbert_elliott_state_loss_probabilities_apply() {
        let (p, r, bad_loss, good_loss) = (0.05, 0.2, 0.5, 0.01);
        let v = run(
            Loss::Gemodel {
                p: Prob::from_fraction(p),
                r: Prob::from_fraction(r),
                h: Prob::from_fraction(1.0 - bad_loss),
                k1: Prob::from_fraction(good_loss),
            },
            1_000_000,
        );
        let in_bad = p / (p + r);
        let want = in_bad * bad_loss + (1.0 - in_bad) * good_loss;
        assert!(
            (rate(&v) - want).abs() < 0.05 * want,
            "loss {} vs {want}",
            rate(&v)
        );
    }

    /// The 4-state chain loses packets at its stationary rate (time in states 3 and 4), solved
    /// here from the transition matrix, and its losses come in bursts.
    #[test]
    fn the_four_state_model_matches_its_stationary_loss_rate() {
        let (p13, p31, p32, p23, p14) = (0.02, 0.2, 0.1, 0.4, 0.01);
        let v = run(
            Loss::State {
                p13: Prob::from_fraction(p13),
                p31: Prob::from_fraction(p31),
                p32: Prob::from_fraction(p32),
                p23: Prob::from_fraction(p23),
                p14: Prob::from_fraction(p14),
            },
            2_000_000,
        );
        // Stationary distribution by power iteration of the transition matrix.
        let t = [
            [1.0 - p13 - p14, 0.0, p13, p14],
            [0.0, 1.0 - p23, p23, 0.0],
            [p31, p32, 1.0 - p31 - p32, 0.0],
            [1.0, 0.0, 0.0, 0.0],
        ];
        let mut pi = [0.25; 4];
        for _ in 0..10_000 {
            let mut next = [0.0; 4];
            for (i, row) in t.iter().enumerate() {
                for (j, p) in row.iter().enumerate() {
                    next[j] += pi[i] * p;
                }
            }
            pi = next;
        }
        let want = pi[2] + pi[3];
        assert!(
            (rate(&v) - want).abs() < 0.05 * want,
            "loss {} vs {want}",
            rate(&v)
        );
        // A run of losses lasts while the chain stays in state 3: 1 / (P31 + P32) = 3.3
        // packets; isolated losses (state 4, a third as often) are runs of one.
        let b = bursts(&v);
        let mean = b.iter().sum::<usize>() as f64 / b.len() as f64;
        assert!((2.0..3.4).contains(&mean), "mean burst {mean}");
    }

    /// `loss state 1%` alone (iproute2's defaults) is Bernoulli-like at 1%.
    #[test]
    fn the_four_state_defaults_are_bernoulli_like() {
        let p13 = 0.01;
        let v = run(
            Loss::State {
                p13: Prob::from_fraction(p13),
                p31: Prob::from_fraction(1.0 - p13),
                p32: Prob::ZERO,
                p23: Prob::ONE,
                p14: Prob::ZERO,
            },
            500_000,
        );
        assert!((rate(&v) - 0.01).abs() < 0.001, "{}", rate(&v));
    }
}
