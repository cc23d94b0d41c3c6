//! `pie`'s words, as tc-pie(8) takes them: `limit PACKETS`, `target TIME`, `tupdate TIME`,
//! `alpha 0–32`, `beta 0–32`, `ecn|noecn`, `bytemode|nobytemode`,
//! `dq_rate_estimator|no_dq_rate_estimator`. As in tc, a zero `limit`, `target`, `tupdate`,
//! `alpha` or `beta` is not sent to the kernel, which keeps its default.

use super::{ticks, ticks_to_ns, Params};
use crate::qdisc::words::{count_value, time_value, SpecError, TcForm, Tokens};
use crate::units::{fmt_time_exact, fmt_usecs};
use std::fmt;

const PIE_WORDS: &[&str] = &[
    "limit PACKETS",
    "target TIME",
    "tupdate TIME",
    "alpha 0-32",
    "beta 0-32",
    "ecn",
    "noecn",
    "bytemode",
    "nobytemode",
    "dq_rate_estimator",
    "no_dq_rate_estimator",
];

/// `pie [limit N] [target T] [tupdate T] [alpha A] [beta B] [ecn] [bytemode]
/// [dq_rate_estimator]`, with the kernel's defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PieSpec {
    /// Packets (default 1000).
    pub limit: u32,
    /// Target delay, µs as tc sends it (default 15 ms).
    pub target_us: u32,
    /// Update interval, µs (default 15 ms).
    pub tupdate_us: u32,
    /// Sixteenths (default 2 = 0.125).
    pub alpha: u32,
    /// Sixteenths (default 20 = 1.25).
    pub beta: u32,
    /// ECN marking (default off).
    pub ecn: bool,
    /// Probability scaled by packet size (default off).
    pub bytemode: bool,
    /// Delay from the drain rate (default off: from timestamps).
    pub dq_rate_estimator: bool,
}

impl Default for PieSpec {
    fn default() -> Self {
        PieSpec {
            limit: 1000,
            target_us: 15_000,
            tupdate_us: 15_000,
            alpha: 2,
            beta: 20,
            ecn: false,
            bytemode: false,
            dq_rate_estimator: false,
        }
    }
}

/// A time word in whole µs, as tc's `get_time` hands it to the kernel (0: keep the default).
fn usecs(t: &mut Tokens<'_>, w: &str) -> Result<u32, SpecError> {
    let ns = time_value(t, w)?;
    u32::try_from(ns / 1000)
        .map_err(|_| SpecError::value(&crate::units::fmt_time(ns), "must be below 4295 s"))
}

impl PieSpec {
    pub(crate) fn parse(t: &mut Tokens<'_>) -> Result<Self, SpecError> {
        let mut s = PieSpec::default();
        let keep = |v: u32, old: u32| if v == 0 { old } else { v };
        while let Some(w) = t.next() {
            match w {
                "limit" => s.limit = keep(count_value(t, w, 0, u32::MAX)?, s.limit),
                "target" => s.target_us = keep(usecs(t, w)?, s.target_us),
                "tupdate" => s.tupdate_us = keep(usecs(t, w)?, s.tupdate_us),
                "alpha" => s.alpha = keep(count_value(t, w, 0, 32)?, s.alpha),
                "beta" => s.beta = keep(count_value(t, w, 0, 32)?, s.beta),
                "ecn" => s.ecn = true,
                "noecn" => s.ecn = false,
                "bytemode" => s.bytemode = true,
                "nobytemode" => s.bytemode = false,
                "dq_rate_estimator" => s.dq_rate_estimator = true,
                "no_dq_rate_estimator" => s.dq_rate_estimator = false,
                _ => return Err(SpecError::unknown(w, "pie", PIE_WORDS)),
            }
        }
        Ok(s)
    }

    /// The controller's parameters in the kernel's units.
    pub fn params(&self) -> Params {
        Params {
            target: ticks(u64::from(self.target_us) * 1000),
            tupdate_ns: u64::from(self.tupdate_us) * 1000,
            limit: self.limit,
            alpha: self.alpha,
            beta: self.beta,
            ecn: self.ecn,
            bytemode: self.bytemode,
            dq_rate_estimator: self.dq_rate_estimator,
        }
    }

    fn fmt_with(&self, f: &mut fmt::Formatter<'_>, tc: bool) -> fmt::Result {
        let time = |us: u32| {
            if tc {
                fmt_usecs(target_as_tc_shows(us))
            } else {
                fmt_time_exact(u64::from(us) * 1000)
            }
        };
        write!(
            f,
            "limit {}p target {} tupdate {} alpha {} beta {}",
            self.limit,
            time(self.target_us),
            if tc {
                fmt_usecs(u64::from(self.tupdate_us))
            } else {
                fmt_time_exact(u64::from(self.tupdate_us) * 1000)
            },
            self.alpha,
            self.beta
        )?;
        for (on, word) in [
            (self.ecn, "ecn"),
            (self.bytemode, "bytemode"),
            (self.dq_rate_estimator, "dq_rate_estimator"),
        ] {
            if on {
                write!(f, " {word}")?;
            }
        }
        Ok(())
    }

    /// The options as `tc qdisc show` prints them (the target as the kernel keeps it).
    pub fn tc_options(&self) -> String {
        TcForm(|f| self.fmt_with(f, true)).to_string()
    }
}

/// The target as `tc qdisc show` gets it back, µs: the kernel keeps 64-ns ticks and returns
/// `(u32)ticks_to_ns / 1000`, so 1234 µs comes back as 1233 µs.
pub fn target_as_tc_shows(us: u32) -> u64 {
    u64::from(ticks_to_ns(ticks(u64::from(us) * 1000)) as u32) / 1000
}

impl fmt::Display for PieSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_with(f, false)
    }
}
