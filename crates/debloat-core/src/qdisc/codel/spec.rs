//! `codel`'s words, and the CoDel knobs it shares with `fq_codel`: parsed as tc takes them,
//! printed as spec words (exact) or as `tc qdisc show` prints them.

use super::{codel_time, Params};
use crate::qdisc::words::{count_value, expect_value, time_value, SpecError, TcForm, Tokens};
use crate::units::fmt_time_exact as fmt_time;
use std::fmt;

/// The CoDel knobs shared by `codel` and `fq_codel`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodelKnobs {
    /// Target, ns.
    pub target_ns: u64,
    /// Interval, ns.
    pub interval_ns: u64,
    /// ECN marking.
    pub ecn: bool,
    /// CE threshold, ns.
    pub ce_threshold_ns: Option<u64>,
    /// CE threshold DS-field selector and mask.
    pub ce_threshold_selector: Option<(u8, u8)>,
}

impl CodelKnobs {
    pub(crate) fn defaults(ecn: bool) -> Self {
        CodelKnobs {
            target_ns: 5_000_000,
            interval_ns: 100_000_000,
            ecn,
            ce_threshold_ns: None,
            ce_threshold_selector: None,
        }
    }

    /// Try a shared keyword; Ok(false) if `w` is not one.
    pub(crate) fn keyword(&mut self, w: &str, t: &mut Tokens<'_>) -> Result<bool, SpecError> {
        match w {
            "target" => self.target_ns = time_value(t, w)?,
            "interval" => self.interval_ns = time_value(t, w)?,
            "ecn" => self.ecn = true,
            "noecn" => self.ecn = false,
            "ce_threshold" => self.ce_threshold_ns = Some(time_value(t, w)?),
            "ce_threshold_selector" => {
                let v = expect_value(t, w, "VALUE/MASK such as 0x01/0xff")?;
                let (a, b) = v
                    .split_once('/')
                    .ok_or_else(|| SpecError::value(v, "expected VALUE/MASK"))?;
                let num = |x: &str| {
                    let r = match x.strip_prefix("0x") {
                        Some(h) => u8::from_str_radix(h, 16),
                        None => x.parse(),
                    };
                    r.map_err(|_| {
                        SpecError::value(v, "selector and mask are bytes, e.g. 0x01/0xff")
                    })
                };
                self.ce_threshold_selector = Some((num(a)?, num(b)?));
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    pub(crate) fn params(&self) -> Params {
        let (sel, mask) = self.ce_threshold_selector.unwrap_or((0, 0));
        Params {
            target: codel_time(self.target_ns),
            interval: codel_time(self.interval_ns),
            mtu: crate::PSCHED_MTU,
            ecn: self.ecn,
            ce_threshold: self.ce_threshold_ns.map(codel_time),
            ce_threshold_selector: sel,
            ce_threshold_mask: mask,
        }
    }

    /// The knobs as spec words (`tc == false`: exact, they parse back to the same values) or
    /// as `tc qdisc show` prints them (`tc == true`): the value the kernel keeps and returns,
    /// printed with iproute2's three significant digits.
    pub(crate) fn fmt_into(&self, f: &mut fmt::Formatter<'_>, tc: bool) -> fmt::Result {
        let time = |ns: u64| {
            if tc {
                crate::units::fmt_usecs(codel_time_as_tc_shows(ns))
            } else {
                fmt_time(ns)
            }
        };
        // tc's order: ce_threshold between target and interval.
        write!(f, " target {}", time(self.target_ns))?;
        if let Some(ce) = self.ce_threshold_ns {
            write!(f, " ce_threshold {}", time(ce))?;
        }
        write!(f, " interval {}", time(self.interval_ns))?;
        if let Some((s, m)) = self.ce_threshold_selector {
            write!(f, " ce_threshold_selector 0x{s:02x}/0x{m:02x}")?;
        }
        Ok(())
    }
}

/// A CoDel time as `tc qdisc show` gets it back, µs: tc sends whole microseconds, the kernel
/// keeps `us * 1000 >> 10` (CoDel's 1.024-µs units) and dumps `(t << 10) / 1000`
/// (`codel_time_to_us`), so 1 s comes back as 999999 µs and 5 ms as 4999 µs.
pub fn codel_time_as_tc_shows(ns: u64) -> u64 {
    let us = ns / 1000;
    ((us * 1000) >> 10 << 10) / 1000
}

const CODEL_WORDS: &[&str] = &[
    "limit N",
    "target TIME",
    "interval TIME",
    "ecn",
    "noecn",
    "ce_threshold TIME",
];

/// `codel [limit N] [target T] [interval T] [ecn|noecn] [ce_threshold T]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodelSpec {
    /// Packets (default 1000).
    pub limit: u32,
    /// CoDel knobs (ECN off by default).
    pub knobs: CodelKnobs,
}

impl Default for CodelSpec {
    fn default() -> Self {
        CodelSpec {
            limit: 1000,
            knobs: CodelKnobs::defaults(false),
        }
    }
}

impl CodelSpec {
    pub(crate) fn parse(t: &mut Tokens<'_>) -> Result<Self, SpecError> {
        let mut s = CodelSpec::default();
        while let Some(w) = t.next() {
            if w == "limit" {
                s.limit = count_value(t, w, 1, u32::MAX)?;
            } else if !s.knobs.keyword(w, t)? {
                return Err(SpecError::unknown(w, "codel", CODEL_WORDS));
            }
        }
        Ok(s)
    }

    /// CoDel parameters in CoDel time.
    pub fn params(&self) -> Params {
        self.knobs.params()
    }
}

impl fmt::Display for CodelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_with(f, false)
    }
}

impl CodelSpec {
    fn fmt_with(&self, f: &mut fmt::Formatter<'_>, tc: bool) -> fmt::Result {
        write!(f, "limit {}p", self.limit)?;
        self.knobs.fmt_into(f, tc)?;
        if self.knobs.ecn {
            write!(f, " ecn")?;
        }
        Ok(())
    }

    /// The options as `tc qdisc show` prints them (times as the kernel returns them).
    pub fn tc_options(&self) -> String {
        TcForm(|f| self.fmt_with(f, true)).to_string()
    }
}
