//! `deadline`'s words.

use crate::qdisc::words::{count_value, time_value, SpecError, Tokens};
use crate::units::{fmt_time_exact as fmt_time, parse_time};
use std::fmt;

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
    pub(crate) fn parse(t: &mut Tokens<'_>) -> Result<Self, SpecError> {
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
