//! The simulator's wire: what a link does to packets after its transmitter, in the core's link
//! model, and the words users describe it with — `--framing`/`framing` (CAKE's overhead
//! keywords), `--loss`/`loss` and `--jitter`/`jitter` (short forms), `--impair`/`impair`
//! (netem's words, as the gateway's `--emulate-*` take them). The command line and scenario
//! files both build it here, so both check it the same way.

use debloat_core::link::Emulation;
use debloat_core::packet::Nanos;
use debloat_core::qdisc::cake::overhead::Overhead;
use debloat_core::units::parse_time;
use debloat_core::QdiscSpec;

/// What the wire does to packets, in the core's link model ([`debloat_core::link`]): framing
/// that costs transmission time (ATM cells, PTM, Ethernet preamble and gaps, in CAKE's overhead
/// words), and netem's impairments after the transmitter (loss, delay and jitter, duplication,
/// corruption, reordering, slots, a limit), on top of the link's propagation delay. Seeded: the
/// same seed loses the same packets. As everywhere in debloat, jitter never reorders.
#[derive(Clone, Copy, Debug, Default)]
pub struct Wire {
    /// Link-layer framing for transmission time (default: the frame as is).
    pub framing: debloat_core::qdisc::cake::overhead::Overhead,
    /// netem's impairments (its rate, framing and buffer are not used: the link's rate is the
    /// simulator's, and its device sits where a buffer would).
    pub impair: Emulation,
    /// Seed for the impairments.
    pub seed: u64,
}

impl Wire {
    /// The simulator's short forms: `loss` (a fraction) lost at random, and a delay spread
    /// uniformly over 0..`jitter_ns` (netem's `delay J/2 J/2`).
    pub fn loss_and_jitter(loss: f64, jitter_ns: Nanos) -> Emulation {
        use debloat_core::link::netem::{Loss, Prob};
        Emulation {
            loss: if loss > 0.0 {
                Loss::Random {
                    p: Prob::from_fraction(loss),
                    corr: Prob::ZERO,
                }
            } else {
                Loss::None
            },
            delay_ns: jitter_ns / 2,
            jitter_ns: jitter_ns / 2,
            ..Emulation::default()
        }
    }
}

/// The wire as a user wrote it. Each field is what was typed, or `None`.
#[derive(Clone, Copy, Debug, Default)]
pub struct WireWords<'a> {
    /// CAKE's overhead keywords, e.g. `pppoe-vcmux` or `docsis`.
    pub framing: Option<&'a str>,
    /// Random loss, percent (0–100).
    pub loss_pct: Option<f64>,
    /// Delay spread, a time such as `2ms`.
    pub jitter: Option<&'a str>,
    /// netem's words, e.g. `delay 5ms 1ms loss gemodel 1% 10% reorder 1%`.
    pub impair: Option<&'a str>,
}

/// A word for the wire that does not parse: which (as the user typed it) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {why}")]
pub struct WireError {
    /// The option and its value (`--jitter 2x`, `link.impair "…"`).
    pub key: String,
    /// What is wrong and what would do.
    pub why: String,
}

fn wire_error(key: String, why: impl std::fmt::Display) -> WireError {
    WireError {
        key,
        why: why.to_string(),
    }
}

impl WireWords<'_> {
    /// Build the wire; `name` turns a field's name (`framing`, `loss`, `jitter`, `impair`)
    /// into what the user typed (`--loss`, `link.loss`) for error messages. `impair` and the
    /// short forms add up: the short forms set netem's loss and delay only where `impair` did
    /// not.
    pub fn build(&self, seed: u64, name: impl Fn(&str) -> String) -> Result<Wire, WireError> {
        let framing = match self.framing {
            Some(f) => match format!("cake {f}").parse::<QdiscSpec>() {
                Ok(QdiscSpec::Cake(c)) => c.overhead,
                Ok(_) => {
                    return Err(wire_error(name("framing"), "takes cake's overhead words"));
                }
                Err(e) => return Err(wire_error(format!("{} \"{f}\"", name("framing")), e)),
            },
            None => Overhead::default(),
        };
        let loss = self.loss_pct.unwrap_or(0.0);
        if !(0.0..=100.0).contains(&loss) {
            return Err(wire_error(
                format!("{} {loss}", name("loss")),
                "must be between 0 and 100 (percent)",
            ));
        }
        let jitter_ns = match self.jitter {
            Some(j) => {
                parse_time(j).map_err(|e| wire_error(format!("{} {j}", name("jitter")), e))?
            }
            None => 0,
        };
        let short = Wire::loss_and_jitter(loss / 100.0, jitter_ns);
        let impair = match self.impair {
            Some(w) => {
                let key = || format!("{} \"{w}\"", name("impair"));
                let e: Emulation = w.parse().map_err(|e| wire_error(key(), e))?;
                if e.rate_bps.is_some() || e.buffer.is_some() {
                    return Err(wire_error(
                        key(),
                        "`rate` and `buffer` are the link's, not the wire's: set the rate with \
                         --link (or link.up/link.down) and a device queue with --ring",
                    ));
                }
                merge(e, short)
            }
            None => short,
        };
        Ok(Wire {
            framing,
            impair,
            seed,
        })
    }
}

/// `impair` with the short forms' loss and delay where it has none of its own.
fn merge(mut e: Emulation, short: Emulation) -> Emulation {
    if e.loss == Default::default() {
        e.loss = short.loss;
    }
    if e.delay_ns == 0 && e.jitter_ns == 0 {
        e.delay_ns = short.delay_ns;
        e.jitter_ns = short.jitter_ns;
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli(f: &str) -> String {
        format!("--{f}")
    }

    #[test]
    fn the_short_forms_are_netems_loss_and_uniform_delay() {
        let w = WireWords {
            loss_pct: Some(0.5),
            jitter: Some("2ms"),
            ..Default::default()
        }
        .build(1, cli)
        .expect("valid");
        assert_eq!(
            (w.impair.delay_ns, w.impair.jitter_ns),
            (1_000_000, 1_000_000)
        );
        assert_eq!(w.impair.to_string(), "delay 1ms 1ms loss 0.5%");
    }

    #[test]
    fn bad_words_name_what_the_user_typed() {
        let e = WireWords {
            loss_pct: Some(150.0),
            ..Default::default()
        }
        .build(1, |f| format!("link.{f}"))
        .expect_err("out of range");
        assert_eq!(e.key, "link.loss 150", "{e}");
        let e = WireWords {
            impair: Some("rate 10mbit"),
            ..Default::default()
        }
        .build(1, cli)
        .expect_err("rate is the link's")
        .to_string();
        assert!(e.contains("--impair") && e.contains("--link"), "{e}");
        let e = WireWords {
            impair: Some("dealy 5ms"),
            ..Default::default()
        }
        .build(1, cli)
        .expect_err("misspelt");
        assert_eq!(e.key, "--impair \"dealy 5ms\"", "{e}");
    }
}
