//! Shaper-rate controllers for links whose capacity moves (LTE, 5G, Starlink, busy cable): they
//! set a shaper's rate from what the gateway sees, so the queue stays in the shaper (where the
//! AQM is) and not in the modem behind it. Sans-IO: the driver feeds signals at `now` and reads
//! the rate back; it applies the rate to the discipline ([`crate::Qdisc::set_bandwidth`]).
//!
//! Two modes:
//! * [`cake_autorate`]: cake-autorate's published algorithm (v3), driven by reflector round trips
//!   and the achieved rate — to compare against on the same trace;
//! * [`passive`] (the default, debloat's own): no reflectors; the delay *beyond* the shaper from
//!   the round trips of the TCP flows crossing the gateway, measured from the moment a segment
//!   leaves the shaper to the moment its ACK comes back (LibreQoS measures RTT passively from TCP
//!   timestamps the same way), and the rate at which those ACKs report delivery.
//!
//! And, for experiments, an [`oracle`] that reads the capacity trace being played: what no real
//! controller can know, so it bounds what any could reach.
//!
//! Every controller is bounded by `min ≤ rate ≤ max` and starts at `base` ([`Bounds`]).

pub mod cake_autorate;
pub mod driver;
pub mod oracle;
pub mod passive;
pub mod sampler;

use crate::packet::Nanos;
use serde::Serialize;
use std::fmt;

/// The rate range a controller keeps to, bit/s.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Bounds {
    /// Never below.
    pub min_bps: u64,
    /// Where it starts, and where cake-autorate decays back to when the link is idle.
    pub base_bps: u64,
    /// Never above.
    pub max_bps: u64,
}

impl Bounds {
    /// Parse `min=…,base=…,max=…` (tc rates), the words of `--autorate`.
    pub fn parse(words: &str) -> Result<Bounds, String> {
        let (mut min, mut base, mut max) = (None, None, None);
        for part in words.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}`: expected KEY=RATE with KEY min, base or max"))?;
            let r = crate::units::parse_rate(v).map_err(|e| format!("`{part}`: {e}"))?;
            match k {
                "min" => min = Some(r),
                "base" => base = Some(r),
                "max" => max = Some(r),
                _ => return Err(format!("`{k}`: unknown; the keys are min, base and max")),
            }
        }
        let (Some(min), Some(base), Some(max)) = (min, base, max) else {
            return Err("give all three: min=RATE,base=RATE,max=RATE (e.g. min=1mbit,base=5mbit,max=30mbit)".into());
        };
        if !(0 < min && min <= base && base <= max) {
            return Err("the rates must satisfy 0 < min ≤ base ≤ max".into());
        }
        Ok(Bounds {
            min_bps: min,
            base_bps: base,
            max_bps: max,
        })
    }

    /// `rate` kept within the bounds.
    pub fn clamp(&self, rate: u64) -> u64 {
        rate.clamp(self.min_bps, self.max_bps)
    }
}

/// Why the rate is what it is: the last decision.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Reason {
    /// Nothing decided yet.
    Start,
    /// The delay beyond the shaper rose: down, to this factor of the rate or the delivery rate.
    Bufferbloat {
        /// The delay that triggered it, ms.
        delay_ms: f64,
    },
    /// Load near the rate and no delay: up.
    HighLoad,
    /// Low load: back towards the base rate.
    Decay,
    /// Nothing to do (a refractory period, or no new information).
    Hold,
    /// Idle long enough to stop probing (cake-autorate's sleep).
    Sleep,
    /// Set from the capacity the trace will give (the oracle).
    Oracle,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Start => write!(f, "start"),
            Reason::Bufferbloat { delay_ms } => write!(f, "bufferbloat ({delay_ms:.1} ms)"),
            Reason::HighLoad => write!(f, "high load"),
            Reason::Decay => write!(f, "decay to base"),
            Reason::Hold => write!(f, "hold"),
            Reason::Sleep => write!(f, "sleep (idle)"),
            Reason::Oracle => write!(f, "the trace's next 50 ms"),
        }
    }
}

/// What the driver measured over one tick.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tick {
    /// The tick's length, ns.
    pub interval_ns: Nanos,
    /// Bytes the shaper sent in it.
    pub sent_bytes: u64,
    /// Bytes the far end acknowledged in it (passive mode's delivery rate; 0 if unknown).
    pub acked_bytes: u64,
    /// The lowest round trip beyond the shaper sampled in it, ns (passive mode).
    pub min_rtt_ns: Option<Nanos>,
    /// Bytes queued in the shaper at the tick's end.
    pub backlog_bytes: u64,
}

/// A shaper-rate controller.
pub trait Controller: Send {
    /// A reflector's round trip (active probes; cake-autorate mode's only delay signal).
    fn on_reflector(&mut self, _now: Nanos, _rtt_ns: Nanos) {}
    /// The end of a tick, with what the driver measured.
    fn on_tick(&mut self, now: Nanos, tick: &Tick);
    /// The rate to shape at now, bit/s.
    fn rate_bps(&self) -> u64;
    /// Why.
    fn reason(&self) -> Reason;
    /// The mode's name.
    fn name(&self) -> &'static str;
}

/// The modes, by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Mode {
    /// [`passive`].
    Passive,
    /// [`cake_autorate`].
    CakeAutorate,
    /// [`oracle`] (experiments: it reads the capacity trace being played), shaping to this
    /// share of it, thousandths (`oracle` is 950; `oracle:0.7` is 700).
    Oracle(u16),
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Mode, String> {
        match s {
            "passive" | "debloat" => Ok(Mode::Passive),
            "cake-autorate" => Ok(Mode::CakeAutorate),
            "oracle" => Ok(Mode::Oracle(oracle::SHARE_PERMILLE as u16)),
            _ if s.starts_with("oracle:") => {
                let share: f64 = s["oracle:".len()..]
                    .parse()
                    .map_err(|_| format!("`{s}`: oracle:SHARE takes a share such as 0.8"))?;
                if !(0.01..=1.0).contains(&share) {
                    return Err(format!("`{s}`: the share must be 0.01 to 1"));
                }
                Ok(Mode::Oracle((share * 1000.0).round() as u16))
            }
            _ => Err(format!(
                "`{s}`: the modes are passive (debloat's, no reflectors), cake-autorate, and oracle (experiments: reads the emulated link's capacity trace)"
            )),
        }
    }
}

impl Mode {
    /// A controller of this mode within `bounds`; the oracle reads `capacity` (the others
    /// ignore it).
    pub fn build(self, bounds: Bounds, capacity: Option<oracle::Capacity>) -> Box<dyn Controller> {
        match self {
            Mode::Passive => Box::new(passive::Passive::new(bounds)),
            Mode::CakeAutorate => Box::new(cake_autorate::CakeAutorate::new(bounds)),
            Mode::Oracle(share) => Box::new(oracle::Oracle::new(bounds, capacity, share)),
        }
    }

    /// Does it need reflector probes?
    pub fn needs_reflectors(self) -> bool {
        self == Mode::CakeAutorate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_parse_and_name_what_is_wrong() {
        let b = Bounds::parse("min=1mbit,base=5mbit,max=30mbit").expect("bounds");
        assert_eq!(
            (b.min_bps, b.base_bps, b.max_bps),
            (1_000_000, 5_000_000, 30_000_000)
        );
        assert_eq!(b.clamp(100), 1_000_000);
        assert!(Bounds::parse("min=1mbit,base=5mbit")
            .expect_err("max")
            .contains("all three"));
        assert!(Bounds::parse("min=5mbit,base=1mbit,max=9mbit").is_err());
        assert!(Bounds::parse("low=1mbit")
            .expect_err("key")
            .contains("`low`"));
        assert!(Bounds::parse("min=fast,base=1mbit,max=2mbit")
            .expect_err("rate")
            .contains("fast"));
        assert!("nope".parse::<Mode>().is_err());
        assert_eq!("oracle".parse::<Mode>(), Ok(Mode::Oracle(950)));
        assert_eq!("oracle:0.7".parse::<Mode>(), Ok(Mode::Oracle(700)));
        assert!("oracle:2".parse::<Mode>().is_err());
        assert!("oracle:most".parse::<Mode>().is_err());
    }
}
