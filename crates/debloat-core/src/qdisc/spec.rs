//! Queue discipline specs in tc's words: the text after `tc qdisc add dev X root`, such as
//! `fq_codel target 3ms noecn` or `cake bandwidth 20Mbit diffserv4 dual-dsthost nat overhead 44
//! mpu 84`. Parsing is the one place options are validated; defaults live with each spec and
//! equal the kernel's. A bad spec fails with the offending token and the valid choices.

use crate::flow::FlowHasher;
use crate::packet::Packet;
use crate::qdisc::cake::{Cake, CakeSpec};
use crate::qdisc::codel::Codel;
use crate::qdisc::deadline::Deadline;
use crate::qdisc::fifo::spec::parse_fifo_limit;
use crate::qdisc::fifo::{Fifo, Limit};
use crate::qdisc::fq_codel::FqCodel;
use crate::qdisc::Qdisc;
use crate::units::{fmt_size, parse_time};
use std::fmt;
use thiserror::Error;

pub use crate::qdisc::codel::spec::{codel_time_as_tc_shows, CodelKnobs, CodelSpec};
pub use crate::qdisc::deadline::spec::DeadlineSpec;
pub use crate::qdisc::fq_codel::spec::FqCodelSpec;

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

pub(crate) fn time_value(t: &mut Tokens<'_>, keyword: &str) -> Result<u64, SpecError> {
    let v = expect_value(t, keyword, "a time such as 5ms")?;
    parse_time(v).map_err(|e| SpecError::value(v, &e.to_string()))
}

pub(crate) fn count_value(
    t: &mut Tokens<'_>,
    keyword: &str,
    min: u32,
    max: u32,
) -> Result<u32, SpecError> {
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

/// Display through a closure: one writer serves the spec text and tc's text.
pub(crate) struct TcForm<F: Fn(&mut fmt::Formatter<'_>) -> fmt::Result>(pub(crate) F);

impl<F: Fn(&mut fmt::Formatter<'_>) -> fmt::Result> fmt::Display for TcForm<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (self.0)(f)
    }
}

#[cfg(test)]
mod tests;
