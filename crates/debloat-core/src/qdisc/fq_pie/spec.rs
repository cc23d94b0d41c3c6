//! `fq_pie`'s words, as tc-fq_pie(8) takes them: PIE's (`limit`, `target`, `tupdate`, `alpha`,
//! `beta`, `ecn`, `bytemode`, `dq_rate_estimator` and their `no…` forms) and `flows N`
//! (1–65536), `quantum SIZE` (1 B–1 MiB), `memory_limit SIZE`, `ecn_prob PERCENT` (0–99). As
//! in tc, a zero keeps the kernel's default.

use crate::qdisc::pie::PieSpec;
use crate::qdisc::words::{count_value, size_value, SpecError, TcForm, Tokens};
use crate::units::{fmt_size, fmt_size_tc};
use std::fmt;

const FQ_PIE_WORDS: &[&str] = &[
    "limit PACKETS",
    "flows N",
    "target TIME",
    "tupdate TIME",
    "alpha 0-32",
    "beta 0-32",
    "quantum BYTES",
    "memory_limit SIZE",
    "ecn_prob 0-99",
    "ecn",
    "noecn",
    "bytemode",
    "nobytemode",
    "dq_rate_estimator",
    "no_dq_rate_estimator",
];

/// `fq_pie [limit N] [flows N] [target T] … [quantum B] [memory_limit S] [ecn_prob P]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FqPieSpec {
    /// PIE's knobs (limit default 10240 here).
    pub pie: PieSpec,
    /// Flow queues (default 1024).
    pub flows: u32,
    /// DRR quantum, bytes (default the device's 1514).
    pub quantum: u32,
    /// Memory counted for `overmemory`, bytes (default 32 MiB).
    pub memory_limit: u32,
    /// Mark instead of drop up to this probability, percent (default 10).
    pub ecn_prob: u32,
}

impl Default for FqPieSpec {
    fn default() -> Self {
        FqPieSpec {
            pie: PieSpec {
                limit: 10 * 1024,
                ..PieSpec::default()
            },
            flows: 1024,
            quantum: crate::PSCHED_MTU,
            memory_limit: 32 << 20,
            ecn_prob: 10,
        }
    }
}

impl FqPieSpec {
    pub(crate) fn parse(t: &mut Tokens<'_>) -> Result<Self, SpecError> {
        let mut s = FqPieSpec::default();
        let keep = |v: u32, old: u32| if v == 0 { old } else { v };
        while let Some(w) = t.next() {
            match w {
                "flows" => s.flows = keep(count_value(t, w, 0, 65536)?, s.flows),
                "quantum" => s.quantum = keep(size_value(t, w, 0, 1 << 20)?, s.quantum),
                "memory_limit" => {
                    s.memory_limit = keep(size_value(t, w, 0, u64::from(u32::MAX))?, s.memory_limit)
                }
                "ecn_prob" => s.ecn_prob = keep(count_value(t, w, 0, 99)?, s.ecn_prob),
                _ => {
                    if !s.pie.keyword(w, t)? {
                        return Err(SpecError::unknown(w, "fq_pie", FQ_PIE_WORDS));
                    }
                }
            }
        }
        Ok(s)
    }

    fn fmt_with(&self, f: &mut fmt::Formatter<'_>, tc: bool) -> fmt::Result {
        let sz = |b: u32| {
            if tc {
                fmt_size_tc(u64::from(b))
            } else {
                fmt_size(u64::from(b))
            }
        };
        write!(f, "limit {}p flows {} ", self.pie.limit, self.flows)?;
        self.pie.fmt_times(f, tc)?;
        write!(
            f,
            " alpha {} beta {} quantum {} memory_limit {} ecn_prob {}",
            self.pie.alpha,
            self.pie.beta,
            sz(self.quantum),
            sz(self.memory_limit),
            self.ecn_prob
        )?;
        self.pie.fmt_flags(f)
    }

    /// The options as `tc qdisc show` prints them.
    pub fn tc_options(&self) -> String {
        TcForm(|f| self.fmt_with(f, true)).to_string()
    }
}

impl fmt::Display for FqPieSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_with(f, false)
    }
}
