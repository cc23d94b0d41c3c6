//! The words every discipline's spec is made of, and how they fail: the token stream, the
//! value readers (times, counts), the error with the offending token and the valid choices,
//! and the writer that serves both the spec text and tc's. The registry (`spec.rs`) and each
//! discipline's own `spec.rs` use them; neither imports the other for them.

use crate::units::{parse_size, parse_time};
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
pub const QDISCS: &[&str] = &[
    "pfifo",
    "bfifo",
    "pfifo_fast",
    "codel",
    "fq_codel",
    "cake",
    "pie",
    "fq_pie",
    "fq",
    "dualpi2",
    "tbf",
    "htb",
    "deadline",
];

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

/// A size in bytes (tc's units: `1514`, `32Kb`, `4Mb`) from `min` to `max`.
pub(crate) fn size_value(
    t: &mut Tokens<'_>,
    keyword: &str,
    min: u64,
    max: u64,
) -> Result<u32, SpecError> {
    let v = expect_value(t, keyword, "a size such as 1514 or 32Mb")?;
    let b = parse_size(v).map_err(|e| SpecError::value(v, &e.to_string()))?;
    if !(min..=max).contains(&b) {
        let problem = if min == 0 {
            format!("{keyword} is at most {max} bytes")
        } else {
            format!("{keyword} must be from {min} to {max} bytes")
        };
        return Err(SpecError::value(v, &problem));
    }
    Ok(b.min(u64::from(u32::MAX)) as u32)
}

/// Display through a closure: one writer serves the spec text and tc's text.
pub(crate) struct TcForm<F: Fn(&mut fmt::Formatter<'_>) -> fmt::Result>(pub(crate) F);

impl<F: Fn(&mut fmt::Formatter<'_>) -> fmt::Result> fmt::Display for TcForm<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (self.0)(f)
    }
}
