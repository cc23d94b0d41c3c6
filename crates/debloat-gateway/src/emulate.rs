//! netem's words for the emulated link behind a discipline: `rate`, `delay` (with jitter),
//! `loss`, `duplicate`. Parsed like `tc qdisc add … netem <spec>`:
//! `"rate 10Mbit delay 20ms 2ms loss 0.5%"`.
//!
//! Deviations from netem, on purpose: jitter never reorders (each packet leaves no earlier than
//! the one before, as netem does when `rate` is set), the delay is applied after the link has
//! serialised the packet at `rate`, and loss happens on the wire (after the discipline, so the
//! discipline's counters see what it sent). Not supported yet, and rejected with that said:
//! `distribution`, `reorder`, `corrupt`, `gemodel`/`state` (Gilbert-Elliott), `slot`, `ecn`.

use debloat_core::units::{parse_rate, parse_time};
use std::fmt;

/// An emulated link.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Emulation {
    /// Link rate, bit/s (None: the link never limits).
    pub rate_bps: Option<u64>,
    /// One-way delay added after serialisation, ns.
    pub delay_ns: u64,
    /// Up to this much extra delay per packet, uniformly drawn, ns.
    pub jitter_ns: u64,
    /// Probability a packet is lost on the wire (0–1).
    pub loss: f64,
    /// Probability a packet is sent twice (0–1).
    pub duplicate: f64,
}

/// A spec that does not parse: the bad token and what was expected.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("emulation spec: {0}")]
pub struct EmulateError(pub String);

const WORDS: &str = "rate, delay, jitter, loss, duplicate";

fn percent(tok: Option<&str>, what: &str) -> Result<f64, EmulateError> {
    let t = tok.ok_or_else(|| EmulateError(format!("`{what}` needs a percentage, e.g. 0.5%")))?;
    let v: f64 = t
        .trim_end_matches('%')
        .parse()
        .map_err(|_| EmulateError(format!("`{what} {t}`: expected a percentage, e.g. 0.5%")))?;
    if !(0.0..=100.0).contains(&v) {
        return Err(EmulateError(format!("`{what} {t}`: must be 0–100%")));
    }
    Ok(v / 100.0)
}

fn time(tok: Option<&str>, what: &str) -> Result<u64, EmulateError> {
    let t = tok.ok_or_else(|| EmulateError(format!("`{what}` needs a time, e.g. 20ms")))?;
    parse_time(t).map_err(|e| EmulateError(format!("`{what} {t}`: {e}")))
}

impl std::str::FromStr for Emulation {
    type Err = EmulateError;
    fn from_str(s: &str) -> Result<Emulation, EmulateError> {
        let toks: Vec<&str> = s.split_whitespace().collect();
        let mut e = Emulation::default();
        let mut i = 0;
        if toks.first() == Some(&"netem") {
            i = 1;
        }
        while i < toks.len() {
            let next = toks.get(i + 1).copied();
            match toks[i] {
                "rate" => {
                    let t = next
                        .ok_or_else(|| EmulateError("`rate` needs a rate, e.g. 10Mbit".into()))?;
                    let r = parse_rate(t).map_err(|e| EmulateError(format!("`rate {t}`: {e}")))?;
                    if r == 0 {
                        return Err(EmulateError("`rate` must be above 0".into()));
                    }
                    e.rate_bps = Some(r);
                    i += 2;
                }
                "delay" => {
                    e.delay_ns = time(next, "delay")?;
                    i += 2;
                    // netem: `delay TIME [JITTER]`.
                    if let Some(j) = toks.get(i).and_then(|t| parse_time(t).ok()) {
                        e.jitter_ns = j;
                        i += 1;
                    }
                }
                "jitter" => {
                    e.jitter_ns = time(next, "jitter")?;
                    i += 2;
                }
                "loss" => {
                    let mut k = i + 1;
                    if toks.get(k) == Some(&"random") {
                        k += 1;
                    }
                    e.loss = percent(toks.get(k).copied(), "loss")?;
                    i = k + 1;
                }
                "duplicate" => {
                    e.duplicate = percent(next, "duplicate")?;
                    i += 2;
                }
                w @ ("distribution" | "reorder" | "corrupt" | "gemodel" | "state" | "slot"
                | "ecn" | "limit") => {
                    return Err(EmulateError(format!(
                        "`{w}` is not supported yet (supported: {WORDS})"
                    )))
                }
                w => {
                    return Err(EmulateError(format!(
                        "unknown word `{w}`: expected one of {WORDS}"
                    )))
                }
            }
        }
        Ok(e)
    }
}

impl fmt::Display for Emulation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(r) = self.rate_bps {
            parts.push(format!("rate {}", debloat_core::units::fmt_rate(r)));
        }
        if self.delay_ns > 0 || self.jitter_ns > 0 {
            parts.push(format!(
                "delay {}",
                debloat_core::units::fmt_time(self.delay_ns)
            ));
        }
        if self.jitter_ns > 0 {
            parts.push(format!(
                "jitter {}",
                debloat_core::units::fmt_time(self.jitter_ns)
            ));
        }
        if self.loss > 0.0 {
            parts.push(format!("loss {}%", self.loss * 100.0));
        }
        if self.duplicate > 0.0 {
            parts.push(format!("duplicate {}%", self.duplicate * 100.0));
        }
        if parts.is_empty() {
            parts.push("none".into());
        }
        write!(f, "{}", parts.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_netems_words() {
        let e: Emulation = "rate 10Mbit delay 20ms 2ms loss random 0.5%"
            .parse()
            .expect("valid");
        assert_eq!(e.rate_bps, Some(10_000_000));
        assert_eq!(e.delay_ns, 20_000_000);
        assert_eq!(e.jitter_ns, 2_000_000);
        assert!((e.loss - 0.005).abs() < 1e-12);
        let e: Emulation = "netem delay 10ms jitter 1ms duplicate 1%"
            .parse()
            .expect("valid");
        assert_eq!((e.delay_ns, e.jitter_ns), (10_000_000, 1_000_000));
        assert_eq!(e.rate_bps, None);
    }

    #[test]
    fn bad_words_name_the_token_and_the_choices() {
        let e = "delay 20ms colour red"
            .parse::<Emulation>()
            .expect_err("bad");
        assert!(e.0.contains("`colour`") && e.0.contains("rate"), "{e}");
        let e = "reorder 25%".parse::<Emulation>().expect_err("unsupported");
        assert!(e.0.contains("not supported yet"), "{e}");
        assert!("loss 150%".parse::<Emulation>().is_err());
        assert!("rate".parse::<Emulation>().is_err());
        assert!("rate 0bit".parse::<Emulation>().is_err());
    }
}
