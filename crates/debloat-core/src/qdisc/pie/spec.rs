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
        while let Some(w) = t.next() {
            if !s.keyword(w, t)? {
                return Err(SpecError::unknown(w, "pie", PIE_WORDS));
            }
        }
        Ok(s)
    }

    /// Try one of PIE's words (shared with fq_pie); Ok(false) if `w` is not one.
    pub(crate) fn keyword(&mut self, w: &str, t: &mut Tokens<'_>) -> Result<bool, SpecError> {
        let keep = |v: u32, old: u32| if v == 0 { old } else { v };
        match w {
            "limit" => self.limit = keep(count_value(t, w, 0, u32::MAX)?, self.limit),
            "target" => self.target_us = keep(usecs(t, w)?, self.target_us),
            "tupdate" => self.tupdate_us = keep(usecs(t, w)?, self.tupdate_us),
            "alpha" => self.alpha = keep(count_value(t, w, 0, 32)?, self.alpha),
            "beta" => self.beta = keep(count_value(t, w, 0, 32)?, self.beta),
            "ecn" => self.ecn = true,
            "noecn" => self.ecn = false,
            "bytemode" => self.bytemode = true,
            "nobytemode" => self.bytemode = false,
            "dq_rate_estimator" => self.dq_rate_estimator = true,
            "no_dq_rate_estimator" => self.dq_rate_estimator = false,
            _ => return Ok(false),
        }
        Ok(true)
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

    /// `target … tupdate …` as spec words (`tc == false`) or as tc prints them.
    pub(crate) fn fmt_times(&self, f: &mut fmt::Formatter<'_>, tc: bool) -> fmt::Result {
        if tc {
            write!(
                f,
                "target {} tupdate {}",
                fmt_usecs(target_as_tc_shows(self.target_us)),
                fmt_usecs(u64::from(self.tupdate_us))
            )
        } else {
            write!(
                f,
                "target {} tupdate {}",
                fmt_time_exact(u64::from(self.target_us) * 1000),
                fmt_time_exact(u64::from(self.tupdate_us) * 1000)
            )
        }
    }

    /// The flags that are on, each with a space before it.
    pub(crate) fn fmt_flags(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
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

    fn fmt_with(&self, f: &mut fmt::Formatter<'_>, tc: bool) -> fmt::Result {
        write!(f, "limit {}p ", self.limit)?;
        self.fmt_times(f, tc)?;
        write!(f, " alpha {} beta {}", self.alpha, self.beta)?;
        self.fmt_flags(f)
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
