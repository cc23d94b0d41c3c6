//! `fq_codel`'s words, with the kernel's defaults; the CoDel knobs are codel's
//! ([`crate::qdisc::codel::spec::CodelKnobs`]).

use crate::qdisc::codel::spec::CodelKnobs;
use crate::qdisc::codel::Params;
use crate::qdisc::words::{count_value, expect_value, SpecError, TcForm, Tokens};
use crate::units::{fmt_size, parse_size};
use std::fmt;

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
    pub(crate) fn parse(t: &mut Tokens<'_>) -> Result<Self, SpecError> {
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
    pub fn codel_params(&self) -> Params {
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
