//! `debloat compare`'s statistics on synthetic result sets whose truth is known: the interval
//! of a known difference covers it about 95 % of the time, and two draws from one distribution
//! are called different about 5 % of the time (Welch's t-test, 10 seeds a side).

use debloat_report::repeats::{compare, Metric, Repeats};

/// xorshift64* and Box–Muller: normal draws, reproducible.
struct Normal(u64);

impl Normal {
    fn uniform(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d);
        ((x >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    fn draw(&mut self, mean: f64, sd: f64) -> f64 {
        let (u1, u2) = (self.uniform(), self.uniform());
        mean + sd * (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

fn set(rng: &mut Normal, n: usize, mean: f64, sd: f64) -> Repeats {
    let runs: Vec<Vec<Metric>> = (0..n)
        .map(|_| vec![Metric::new("ping p99", "ms", rng.draw(mean, sd))])
        .collect();
    Repeats::fold((1..=n as u64).collect(), &runs)
}

#[test]
fn a_known_difference_is_found_and_its_interval_covers_it() {
    let mut rng = Normal(0x5eed_0001);
    // pfifo's p99 ≈ 812 ms, cake's ≈ 629 ms: B − A = −183 ms, seed-to-seed sd 15 ms.
    let a = set(&mut rng, 10, 812.0, 15.0);
    let b = set(&mut rng, 10, 629.0, 12.0);
    let c = &compare(&a, &b)[0];
    let w = c.welch.as_ref().expect("two samples of 10");
    assert!(
        w.lo <= -183.0 && -183.0 <= w.hi,
        "CI {:.1}…{:.1}",
        w.lo,
        w.hi
    );
    assert!(w.p < 0.001 && w.differs());
    let s = c.sentence("pfifo", "cake");
    assert!(s.contains("cake is lower by"), "{s}");
}

#[test]
fn intervals_cover_the_truth_about_95_percent_of_the_time() {
    let mut rng = Normal(0x5eed_0002);
    let trials = 2000;
    let mut covered = 0;
    for _ in 0..trials {
        let a = set(&mut rng, 10, 100.0, 5.0);
        let b = set(&mut rng, 7, 103.0, 9.0); // unequal n and variance: Welch's case
        let w = compare(&a, &b)[0].welch.clone().expect("two samples");
        if w.lo <= 3.0 && 3.0 <= w.hi {
            covered += 1;
        }
    }
    let rate = covered as f64 / trials as f64;
    // 95 % nominal; with 2000 trials the sampling error is ±1 % (2 sd).
    assert!((0.93..=0.97).contains(&rate), "coverage {rate:.3}");
}

#[test]
fn two_draws_from_one_distribution_are_not_called_different() {
    let mut rng = Normal(0x5eed_0003);
    let a = set(&mut rng, 10, 50.0, 4.0);
    let b = set(&mut rng, 10, 50.0, 4.0);
    let c = &compare(&a, &b)[0];
    let w = c.welch.as_ref().expect("two samples");
    assert!(!w.differs(), "p = {}", w.p);
    assert!(w.lo <= 0.0 && 0.0 <= w.hi);
    assert!(c.sentence("a", "b").contains("no difference found"));
    // And over many pairs, the false-alarm rate is the test's 5 %.
    let trials = 2000;
    let alarms = (0..trials)
        .filter(|_| {
            let (a, b) = (set(&mut rng, 10, 50.0, 4.0), set(&mut rng, 10, 50.0, 4.0));
            compare(&a, &b)[0]
                .welch
                .as_ref()
                .is_some_and(|w| w.differs())
        })
        .count();
    let rate = alarms as f64 / trials as f64;
    assert!((0.03..=0.07).contains(&rate), "false alarms {rate:.3}");
}
