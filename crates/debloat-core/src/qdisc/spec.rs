//! Queue discipline specs in tc's words: the text after `tc qdisc add dev X root`, such as
//! `fq_codel target 3ms noecn` or `cake bandwidth 20Mbit diffserv4 dual-dsthost nat overhead 44
//! mpu 84`. Parsing is the one place options are validated; defaults live with each spec and
//! equal the kernel's. A bad spec fails with the offending token and the valid choices.

use crate::flow::FlowHasher;
use crate::packet::Packet;
use crate::qdisc::cake::{Cake, CakeSpec};
use crate::qdisc::codel::{self, codel_time, Codel};
use crate::qdisc::deadline::Deadline;
use crate::qdisc::fifo::{Fifo, Limit};
use crate::qdisc::fq_codel::FqCodel;
use crate::qdisc::Qdisc;
use crate::units::{fmt_size, fmt_time_exact as fmt_time, parse_size, parse_time};
use std::fmt;
use thiserror::Error;

/// Why a spec was rejected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SpecError {
    /// Nothing was given.
    #[error("empty qdisc spec: expected one of {}", QDISCS.join(", "))]
    Empty,
    /// A word the discipline does not know.
    #[error("unknown {context} option `{token}`{}; valid choices: {}",
        suggestion.map(|s| format!(": did you mean `{s}`?")).unwrap_or_default(),
        choices.join(", "))]
    Unknown {
        /// The word.
        token: String,
        /// Which discipline (or "qdisc" for the kind).
        context: &'static str,
        /// The valid word nearest to `token`, when one is near.
        suggestion: Option<&'static str>,
        /// What would have been accepted.
        choices: Vec<&'static str>,
    },
    /// A keyword that needs a value came last.
    #[error("`{keyword}` needs a value: {expected}")]
    MissingValue {
        /// The keyword.
        keyword: String,
        /// What value it takes.
        expected: &'static str,
    },
    /// A value that does not parse or is out of range.
    #[error("bad value `{token}`: {problem}")]
    Value {
        /// The value as given.
        token: String,
        /// What is wrong and how to fix it.
        problem: String,
    },
    /// A recognised option debloat does not implement.
    #[error("`{token}` is not supported yet: {hint}")]
    Unsupported {
        /// The option.
        token: String,
        /// What to do instead.
        hint: &'static str,
    },
}

impl SpecError {
    pub(crate) fn unknown(token: &str, context: &'static str, choices: &[&'static str]) -> Self {
        SpecError::Unknown {
            token: token.to_string(),
            context,
            suggestion: nearest(token, choices),
            choices: choices.to_vec(),
        }
    }
    pub(crate) fn value(token: &str, problem: &str) -> Self {
        SpecError::Value {
            token: token.to_string(),
            problem: problem.to_string(),
        }
    }
    pub(crate) fn unsupported(token: &str, hint: &'static str) -> Self {
        SpecError::Unsupported {
            token: token.to_string(),
            hint,
        }
    }
}

/// The choice nearest to `word` when it is near enough to be a slip (a typo, a missing or
/// doubled letter): Jaro-Winkler similarity of at least 0.85.
pub fn nearest(word: &str, choices: &[&'static str]) -> Option<&'static str> {
    // A choice may carry its value's name ("bandwidth RATE"): compare the keyword.
    choices
        .iter()
        .filter_map(|c| c.split(' ').next())
        .map(|c| (strsim::jaro_winkler(word, c), c))
        .filter(|(score, _)| *score >= 0.85)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

/// The disciplines debloat knows.
pub const QDISCS: &[&str] = &["pfifo", "bfifo", "codel", "fq_codel", "cake", "deadline"];

/// Whitespace-separated words of a spec.
pub type Tokens<'a> = std::iter::Peekable<std::str::SplitWhitespace<'a>>;

pub(crate) fn expect_value<'a>(
    t: &mut Tokens<'a>,
    keyword: &str,
    expected: &'static str,
) -> Result<&'a str, SpecError> {
    t.next().ok_or_else(|| SpecError::MissingValue {
        keyword: keyword.to_string(),
        expected,
    })
}

fn time_value(t: &mut Tokens<'_>, keyword: &str) -> Result<u64, SpecError> {
    let v = expect_value(t, keyword, "a time such as 5ms")?;
    parse_time(v).map_err(|e| SpecError::value(v, &e.to_string()))
}

fn count_value(t: &mut Tokens<'_>, keyword: &str, min: u32, max: u32) -> Result<u32, SpecError> {
    let v = expect_value(t, keyword, "a whole number")?;
    let digits = v.strip_suffix('p').unwrap_or(v);
    let n: u32 = digits.parse().map_err(|_| {
        SpecError::value(
            v,
            &format!("{keyword} takes a whole number from {min} to {max}"),
        )
    })?;
    if !(min..=max).contains(&n) {
        return Err(SpecError::value(
            v,
            &format!("{keyword} must be between {min} and {max}"),
        ));
    }
    Ok(n)
}

/// A parsed discipline spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QdiscSpec {
    /// `pfifo [limit N]`.
    Pfifo {
        /// Packets (default 1000, the txqueuelen).
        limit: u32,
    },
    /// `bfifo [limit SIZE]`.
    Bfifo {
        /// Bytes (default 1000 × 1514).
        limit: u32,
    },
    /// `codel …`.
    Codel(CodelSpec),
    /// `fq_codel …`.
    FqCodel(FqCodelSpec),
    /// `cake …`.
    Cake(CakeSpec),
    /// `deadline T …`.
    Deadline(DeadlineSpec),
}

impl std::str::FromStr for QdiscSpec {
    type Err = SpecError;
    fn from_str(s: &str) -> Result<Self, SpecError> {
        QdiscSpec::parse(s)
    }
}

impl QdiscSpec {
    /// Parse a spec such as `fq_codel target 3ms noecn`.
    pub fn parse(s: &str) -> Result<QdiscSpec, SpecError> {
        let mut t: Tokens<'_> = s.split_whitespace().peekable();
        let kind = t.next().ok_or(SpecError::Empty)?;
        let spec = match kind.to_ascii_lowercase().as_str() {
            "pfifo" => QdiscSpec::Pfifo {
                limit: parse_fifo_limit(&mut t, "pfifo", true)?.unwrap_or(1000),
            },
            "bfifo" => QdiscSpec::Bfifo {
                limit: parse_fifo_limit(&mut t, "bfifo", false)?
                    .unwrap_or(1000 * crate::PSCHED_MTU),
            },
            "codel" => QdiscSpec::Codel(CodelSpec::parse(&mut t)?),
            "fq_codel" => QdiscSpec::FqCodel(FqCodelSpec::parse(&mut t)?),
            "cake" => QdiscSpec::Cake(CakeSpec::parse(&mut t)?),
            "deadline" => QdiscSpec::Deadline(DeadlineSpec::parse(&mut t)?),
            "fq_pie" | "pie" | "fq" | "sfq" | "htb" | "tbf" | "netem" | "red" | "pfifo_fast" => {
                return Err(SpecError::unsupported(
                    kind,
                    "debloat implements pfifo, bfifo, codel, fq_codel, cake and deadline",
                ))
            }
            _ => return Err(SpecError::unknown(kind, "qdisc", QDISCS)),
        };
        Ok(spec)
    }

    /// The discipline's name.
    pub fn kind(&self) -> &'static str {
        match self {
            QdiscSpec::Pfifo { .. } => "pfifo",
            QdiscSpec::Bfifo { .. } => "bfifo",
            QdiscSpec::Codel(_) => "codel",
            QdiscSpec::FqCodel(_) => "fq_codel",
            QdiscSpec::Cake(_) => "cake",
            QdiscSpec::Deadline(_) => "deadline",
        }
    }

    /// Build the discipline. `hasher` keys the flow hash; `seed` drives any randomness.
    pub fn build<P: Packet + 'static>(&self, hasher: FlowHasher, seed: u64) -> Box<dyn Qdisc<P>> {
        match self {
            QdiscSpec::Pfifo { limit } => Box::new(Fifo::new(Limit::Packets(*limit))),
            QdiscSpec::Bfifo { limit } => Box::new(Fifo::new(Limit::Bytes(*limit))),
            QdiscSpec::Codel(s) => Box::new(Codel::new(s)),
            QdiscSpec::FqCodel(s) => Box::new(FqCodel::new(s, hasher)),
            QdiscSpec::Cake(s) => Box::new(Cake::new(s, hasher, seed)),
            QdiscSpec::Deadline(s) => Box::new(Deadline::new(s)),
        }
    }
}

impl fmt::Display for QdiscSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QdiscSpec::Pfifo { limit } => write!(f, "pfifo limit {limit}p"),
            QdiscSpec::Bfifo { limit } => write!(f, "bfifo limit {}", fmt_size(u64::from(*limit))),
            QdiscSpec::Codel(s) => write!(f, "codel {s}"),
            QdiscSpec::FqCodel(s) => write!(f, "fq_codel {s}"),
            QdiscSpec::Cake(s) => write!(f, "cake {s}"),
            QdiscSpec::Deadline(s) => write!(f, "deadline {s}"),
        }
    }
}

fn parse_fifo_limit(
    t: &mut Tokens<'_>,
    kind: &'static str,
    packets: bool,
) -> Result<Option<u32>, SpecError> {
    let mut limit = None;
    while let Some(w) = t.next() {
        if w != "limit" {
            return Err(SpecError::unknown(w, kind, &["limit"]));
        }
        limit = Some(if packets {
            count_value(t, "limit", 1, u32::MAX)?
        } else {
            let v = expect_value(t, "limit", "a size such as 1514000b")?;
            let b = parse_size(v).map_err(|e| SpecError::value(v, &e.to_string()))?;
            u32::try_from(b).map_err(|_| SpecError::value(v, "limit must be below 4Gb"))?
        });
    }
    Ok(limit)
}

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
    fn defaults(ecn: bool) -> Self {
        CodelKnobs {
            target_ns: 5_000_000,
            interval_ns: 100_000_000,
            ecn,
            ce_threshold_ns: None,
            ce_threshold_selector: None,
        }
    }

    /// Try a shared keyword; Ok(false) if `w` is not one.
    fn keyword(&mut self, w: &str, t: &mut Tokens<'_>) -> Result<bool, SpecError> {
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

    fn params(&self) -> codel::Params {
        let (sel, mask) = self.ce_threshold_selector.unwrap_or((0, 0));
        codel::Params {
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
    fn fmt_into(&self, f: &mut fmt::Formatter<'_>, tc: bool) -> fmt::Result {
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
    fn parse(t: &mut Tokens<'_>) -> Result<Self, SpecError> {
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
    pub fn params(&self) -> codel::Params {
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

/// Display through a closure: one writer serves the spec text and tc's text.
struct TcForm<F: Fn(&mut fmt::Formatter<'_>) -> fmt::Result>(F);

impl<F: Fn(&mut fmt::Formatter<'_>) -> fmt::Result> fmt::Display for TcForm<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (self.0)(f)
    }
}

const FQ_CODEL_WORDS: &[&str] = &[
    "limit N",
    "flows N",
    "target TIME",
    "interval TIME",
    "quantum BYTES",
    "memory_limit SIZE",
    "ecn",
    "noecn",
    "ce_threshold TIME",
    "ce_threshold_selector V/M",
    "drop_batch N",
];

/// `fq_codel …` with the kernel's defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FqCodelSpec {
    /// Packets across all flows (default 10240).
    pub limit: u32,
    /// Flow queues (default 1024, 1..65536).
    pub flows: u32,
    /// DRR quantum in bytes (default 1514; tc values below 256 become 256, as in Linux).
    pub quantum: u32,
    /// Bytes of truesize (default 32 MiB, the x86_64 value).
    pub memory_limit: u32,
    /// Packets dropped per overflow at most (default 64).
    pub drop_batch: u32,
    /// CoDel knobs (ECN on by default).
    pub knobs: CodelKnobs,
}

impl Default for FqCodelSpec {
    fn default() -> Self {
        FqCodelSpec {
            limit: 10240,
            flows: 1024,
            quantum: crate::PSCHED_MTU,
            memory_limit: 32 << 20,
            drop_batch: 64,
            knobs: CodelKnobs::defaults(true),
        }
    }
}

impl FqCodelSpec {
    fn parse(t: &mut Tokens<'_>) -> Result<Self, SpecError> {
        let mut s = FqCodelSpec::default();
        while let Some(w) = t.next() {
            match w {
                "limit" => s.limit = count_value(t, w, 1, u32::MAX)?,
                "flows" => s.flows = count_value(t, w, 1, 65536)?,
                // Linux raises a quantum below 256 to 256 (fq_codel_change) and rejects one above 2^20.
                "quantum" => s.quantum = count_value(t, w, 0, 1 << 20)?.max(256),
                "drop_batch" => s.drop_batch = count_value(t, w, 1, u32::MAX)?,
                "memory_limit" => {
                    let v = expect_value(t, w, "a size such as 32Mb")?;
                    let b = parse_size(v).map_err(|e| SpecError::value(v, &e.to_string()))?;
                    s.memory_limit = b.min(1 << 31) as u32;
                }
                _ => {
                    if !s.knobs.keyword(w, t)? {
                        return Err(SpecError::unknown(w, "fq_codel", FQ_CODEL_WORDS));
                    }
                }
            }
        }
        Ok(s)
    }

    /// CoDel parameters in CoDel time.
    pub fn codel_params(&self) -> codel::Params {
        self.knobs.params()
    }
}

impl fmt::Display for FqCodelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_with(f, false)
    }
}

impl FqCodelSpec {
    fn fmt_with(&self, f: &mut fmt::Formatter<'_>, tc: bool) -> fmt::Result {
        write!(
            f,
            "limit {}p flows {} quantum {}",
            self.limit, self.flows, self.quantum
        )?;
        self.knobs.fmt_into(f, tc)?;
        write!(
            f,
            " memory_limit {}",
            fmt_size(u64::from(self.memory_limit))
        )?;
        write!(f, " {}", if self.knobs.ecn { "ecn" } else { "noecn" })?;
        write!(f, " drop_batch {}", self.drop_batch)
    }
}

impl FqCodelSpec {
    /// The options as `tc qdisc show` prints them: like [`Display`](fmt::Display) but
    /// without `noecn` (tc prints `ecn` only when it is on), so not a spec to parse back.
    pub fn tc_options(&self) -> String {
        TcForm(|f| self.fmt_with(f, true))
            .to_string()
            .replace(" noecn", "")
    }
}

/// `deadline T [limit N] [ecn|noecn]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeadlineSpec {
    /// Maximum sojourn, ns.
    pub deadline_ns: u64,
    /// Packets (default 1000).
    pub limit: u32,
    /// Mark ECN-capable packets instead of dropping.
    pub ecn: bool,
}

impl DeadlineSpec {
    fn parse(t: &mut Tokens<'_>) -> Result<Self, SpecError> {
        let mut deadline = None;
        let mut s = DeadlineSpec {
            deadline_ns: 0,
            limit: 1000,
            ecn: false,
        };
        while let Some(w) = t.next() {
            match w {
                "limit" => s.limit = count_value(t, w, 1, u32::MAX)?,
                "ecn" => s.ecn = true,
                "noecn" => s.ecn = false,
                "target" | "deadline" => deadline = Some(time_value(t, w)?),
                _ if deadline.is_none() && w.starts_with(|c: char| c.is_ascii_digit()) => {
                    deadline = Some(parse_time(w).map_err(|e| SpecError::value(w, &e.to_string()))?)
                }
                _ => {
                    return Err(SpecError::unknown(
                        w,
                        "deadline",
                        &["TIME", "limit N", "ecn", "noecn"],
                    ))
                }
            }
        }
        s.deadline_ns = deadline.ok_or(SpecError::MissingValue {
            keyword: "deadline".into(),
            expected: "the longest sojourn allowed, e.g. `deadline 20ms`",
        })?;
        Ok(s)
    }
}

impl fmt::Display for DeadlineSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} limit {}p", fmt_time(self.deadline_ns), self.limit)?;
        if self.ecn {
            write!(f, " ecn")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
