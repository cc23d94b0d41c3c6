//! The reproduction suite: every row of docs/experiments.md Part A (wired and Wi-Fi) as a named scenario that
//! runs, measures, and compares with the published value and its acceptance band.
//!
//! Each experiment returns an [`Outcome`]: a list of [`Check`]s (measured value, published value,
//! band, pass/fail) and notes that are reported but not asserted (ratios the card asks to report,
//! the mechanisms the model has or lacks). A check the model cannot reach yet carries a
//! `known_gap` saying why; it still counts as a miss (the band is not widened), so
//! `debloat reproduce` exits non-zero until the model reaches it.
//!
//! The same functions back `debloat reproduce` and the integration tests in
//! `tests/reproduce.rs`, so the command and the tests assert the same bands.

mod hash;
mod l4s;
mod links;
pub mod seeds;
mod tcp;
mod wifi;

pub use seeds::{repeat, Seeded, SeededCheck, Verdict};

use crate::scenario::{Config, Summary, Test};
use serde::Serialize;
use std::fmt;

/// An acceptance band.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Band {
    /// The value must be at least this.
    AtLeast {
        /// Lower bound, inclusive.
        min: f64,
    },
    /// The value must be at most this.
    AtMost {
        /// Upper bound, inclusive.
        max: f64,
    },
    /// The value must lie within [min, max].
    Within {
        /// Lower bound, inclusive.
        min: f64,
        /// Upper bound, inclusive.
        max: f64,
    },
    /// The value must be below this (strict).
    Below {
        /// Upper bound, exclusive.
        max: f64,
    },
    /// The value must be above this (strict).
    Above {
        /// Lower bound, exclusive.
        min: f64,
    },
}

impl Band {
    /// Whether `v` lies in the band (NaN never does).
    pub fn contains(self, v: f64) -> bool {
        match self {
            Band::AtLeast { min } => v >= min,
            Band::AtMost { max } => v <= max,
            Band::Within { min, max } => v >= min && v <= max,
            Band::Below { max } => v < max,
            Band::Above { min } => v > min,
        }
    }

    /// The band's ends, infinite where it has none (strictness aside).
    pub fn range(self) -> (f64, f64) {
        match self {
            Band::AtLeast { min } | Band::Above { min } => (min, f64::INFINITY),
            Band::AtMost { max } | Band::Below { max } => (f64::NEG_INFINITY, max),
            Band::Within { min, max } => (min, max),
        }
    }
}

impl fmt::Display for Band {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Band::AtLeast { min } => write!(f, "≥ {}", num(min)),
            Band::AtMost { max } => write!(f, "≤ {}", num(max)),
            Band::Within { min, max } => write!(f, "{}–{}", num(min), num(max)),
            Band::Below { max } => write!(f, "< {}", num(max)),
            Band::Above { min } => write!(f, "> {}", num(min)),
        }
    }
}

/// A number as people write it: no trailing zeros, at most 3 decimals.
fn num(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

/// One measured quantity against its band.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    /// What was measured, e.g. "pfifo 1000: ping median".
    pub what: String,
    /// The measured value.
    pub measured: f64,
    /// Its unit ("ms", "Mbit/s", "%", "×").
    pub unit: &'static str,
    /// The published value, as the source gives it ("2.03 s", "≈1 ms", "—").
    pub published: &'static str,
    /// The acceptance band from docs/experiments.md Part A.
    pub band: Band,
    /// Why the model cannot reach this band yet, when it cannot (the check still fails).
    pub known_gap: Option<&'static str>,
}

impl Check {
    /// A check with no known gap.
    pub fn new(
        what: impl Into<String>,
        measured: f64,
        unit: &'static str,
        published: &'static str,
        band: Band,
    ) -> Check {
        Check {
            what: what.into(),
            measured,
            unit,
            published,
            band,
            known_gap: None,
        }
    }

    /// Mark a check the model does not reach yet, with the reason.
    pub fn gap(mut self, why: &'static str) -> Check {
        self.known_gap = Some(why);
        self
    }

    /// Inside its band.
    pub fn pass(&self) -> bool {
        self.band.contains(self.measured)
    }
}

/// What one experiment measured.
#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    /// The experiment's id.
    pub id: &'static str,
    /// The asserted checks.
    pub checks: Vec<Check>,
    /// Reported, not asserted (ratios the card asks for, model notes).
    pub notes: Vec<String>,
}

impl Outcome {
    fn new(id: &'static str) -> Outcome {
        Outcome {
            id,
            checks: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Every check inside its band.
    pub fn pass(&self) -> bool {
        self.checks.iter().all(Check::pass)
    }
}

/// A named experiment.
pub struct Experiment {
    /// The id in docs/experiments.md Part A, e.g. "PI-55".
    pub id: &'static str,
    /// One line: the scenario.
    pub scenario: &'static str,
    /// Runs it with this seed (1 is the one the published comparison uses).
    pub run: fn(u64) -> Outcome,
}

/// Every experiment of Part A, in the table's order, and DUALQ-L4S (issue 44).
pub fn all() -> &'static [Experiment] {
    &[
        Experiment {
            id: "PI-55",
            scenario: "4 CUBIC uploads, 5.5 Mbit/s up / 0.5 Mbit/s down, base RTT 0.3 ms, 60 s",
            run: tcp::pi_55,
        },
        Experiment {
            id: "FIFO-DEPTH",
            scenario: "tcp_nup 1 and 2 flows, 20 Mbit/s both ways, 48 ms, CUBIC or BBR",
            run: tcp::fifo_depth,
        },
        Experiment {
            id: "SQW-20M",
            scenario: "tcp_4up_squarewave (BBR, CUBIC, BBR, CUBIC), 20 Mbit/s, 48 ms",
            run: tcp::sqw_20m,
        },
        Experiment {
            id: "CAKE-HOSTS",
            scenario:
                "host A 2 uploads, host B 1, 20 Mbit/s uplink behind a 1000-packet modem FIFO",
            run: tcp::cake_hosts,
        },
        Experiment {
            id: "RRUL-110-10",
            scenario: "rrul on 110/10 Mbit/s, 48 ms: cake, fq_codel, single-queue codel",
            run: links::rrul_110_10,
        },
        Experiment {
            id: "ACK-FILTER",
            scenario:
                "rrul_be on 1 Gbit/s down / 20 Mbit/s up, 100 ms, cake with and without ack-filter",
            run: links::ack_filter,
        },
        Experiment {
            id: "BQL",
            scenario: "100 Mbit/s, 256-descriptor TX ring, 20 TCP streams, with and without BQL",
            run: links::bql,
        },
        Experiment {
            id: "HASH",
            scenario: "Monte-Carlo: 100 flows in 1024 queues, direct-mapped and 8-way",
            run: hash::hash,
        },
        Experiment {
            id: "ATH10K-6M",
            scenario: "Wi-Fi: ath10k AP → 1 station at legacy 6 Mbit/s, rtt_fair_up, legacy vs airtime + AQL",
            run: wifi::ath10k_6m,
        },
        Experiment {
            id: "NETDEV-PING",
            scenario: "Wi-Fi: ath9k AP, near station (MCS 15) pings while a far one (MCS 12) downloads",
            run: wifi::netdev_ping,
        },
        Experiment {
            id: "ATF-ATH9K",
            scenario: "Wi-Fi: ath9k AP → 3 stations (2 × MCS 15, 1 × MCS 0), legacy vs airtime fairness",
            run: wifi::atf_ath9k,
        },
        Experiment {
            id: "MCS-FLAT",
            scenario: "Wi-Fi: ath9k AP with airtime → 2 stations at MCS 0, 7, 15, rtt_fair_up",
            run: wifi::mcs_flat,
        },
        Experiment {
            id: "DUALQ-L4S",
            scenario: "DualPI2, 40 Mbit/s, 20 ms: Prague and CUBIC uploads in four mixes, an ECT(1) and an ICMP probe",
            run: l4s::dualq_l4s,
        },
        Experiment {
            id: "AQL",
            scenario: "Wi-Fi: ath10k firmware queue at MCS 7, mac80211 FQ with AQL off vs on",
            run: wifi::aql,
        },
    ]
}

/// The experiment with this id (case-insensitive).
pub fn find(id: &str) -> Option<&'static Experiment> {
    all().iter().find(|e| e.id.eq_ignore_ascii_case(id))
}

/// The ids, for error messages.
pub fn ids() -> Vec<&'static str> {
    all().iter().map(|e| e.id).collect()
}

// ---- shared helpers for the experiments ----

const MBIT: u64 = 1_000_000;
const MS: u64 = 1_000_000;
const SEC: u64 = 1_000_000_000;

/// A flent test on a down/up link with one qdisc spec both ways (flent's defaults otherwise).
fn config(seed: u64, test: Test, down_bps: u64, up_bps: u64, rtt_ns: u64, qdisc: &str) -> Config {
    let q = parse(qdisc);
    Config::wired(test, (down_bps, up_bps), rtt_ns, (q.clone(), q), seed)
}

/// The experiments' specs are constants; a typo is a bug in this file.
fn parse(spec: &str) -> debloat_core::QdiscSpec {
    spec.parse()
        .unwrap_or_else(|e| panic!("built-in spec \"{spec}\": {e}"))
}

/// The first ping's median under load, ms (NaN without samples: fails every band).
fn ping_p50(s: &Summary) -> f64 {
    s.pings
        .first()
        .and_then(|p| p.latency_ms.as_ref())
        .map_or(f64::NAN, |l| l.p50)
}

/// Sum of the flows' goodput, Mbit/s.
fn total(s: &Summary) -> f64 {
    s.flows.iter().map(|f| f.throughput_mbps).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bands_hold_their_edges_and_reject_nan() {
        assert!(Band::AtLeast { min: 1.0 }.contains(1.0));
        assert!(!Band::AtLeast { min: 1.0 }.contains(0.99));
        assert!(Band::AtMost { max: 5.0 }.contains(5.0));
        assert!(!Band::Below { max: 1.0 }.contains(1.0));
        assert!(Band::Within { min: 1.6, max: 2.4 }.contains(2.0));
        assert!(!Band::Within { min: 1.6, max: 2.4 }.contains(2.41));
        for b in [
            Band::AtLeast { min: 0.0 },
            Band::AtMost { max: 0.0 },
            Band::Within { min: 0.0, max: 1.0 },
        ] {
            assert!(!b.contains(f64::NAN));
        }
        assert_eq!(
            Band::Within {
                min: 0.85,
                max: 1.18
            }
            .to_string(),
            "0.85–1.18"
        );
        assert_eq!(Band::AtLeast { min: 1500.0 }.to_string(), "≥ 1500");
    }

    #[test]
    fn every_part_a_wired_row_is_registered_once() {
        let ids = ids();
        for id in [
            "PI-55",
            "FIFO-DEPTH",
            "SQW-20M",
            "CAKE-HOSTS",
            "RRUL-110-10",
            "ACK-FILTER",
            "BQL",
            "HASH",
            "ATH10K-6M",
            "NETDEV-PING",
            "ATF-ATH9K",
            "MCS-FLAT",
            "AQL",
            "DUALQ-L4S",
        ] {
            assert_eq!(ids.iter().filter(|x| **x == id).count(), 1, "{id}");
        }
        assert!(find("pi-55").is_some());
        assert!(find("nope").is_none());
    }
}
