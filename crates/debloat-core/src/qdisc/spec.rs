//! Queue discipline specs in tc's words: the text after `tc qdisc add dev X root`, such as
//! `fq_codel target 3ms noecn` or `cake bandwidth 20Mbit diffserv4 dual-dsthost nat overhead 44
//! mpu 84`. Parsing is the one place options are validated; defaults live with each spec and
//! equal the kernel's. A bad spec fails with the offending token and the valid choices.

use crate::flow::FlowHasher;
use crate::packet::Packet;
use crate::qdisc::cake::{Cake, CakeSpec};
use crate::qdisc::codel::Codel;
use crate::qdisc::deadline::Deadline;
use crate::qdisc::dualpi2::DualPi2;
use crate::qdisc::fifo::spec::parse_fifo_limit;
use crate::qdisc::fifo::{Fifo, Limit};
use crate::qdisc::fq::Fq;
use crate::qdisc::fq_codel::FqCodel;
use crate::qdisc::fq_pie::FqPie;
use crate::qdisc::htb::Htb;
use crate::qdisc::pfifo_fast::PfifoFast;
use crate::qdisc::pie::Pie;
use crate::qdisc::tbf::Tbf;
use crate::qdisc::Qdisc;
use crate::units::fmt_size;
use std::fmt;

pub use crate::qdisc::words::{nearest, SpecError, Tokens, QDISCS};

pub use crate::qdisc::codel::spec::{codel_time_as_tc_shows, CodelKnobs, CodelSpec};
pub use crate::qdisc::deadline::spec::DeadlineSpec;
pub use crate::qdisc::dualpi2::DualPi2Spec;
pub use crate::qdisc::fq::FqSpec;
pub use crate::qdisc::fq_codel::spec::FqCodelSpec;
pub use crate::qdisc::fq_pie::FqPieSpec;
pub use crate::qdisc::htb::HtbSpec;
pub use crate::qdisc::pfifo_fast::PfifoFastSpec;
pub use crate::qdisc::pie::PieSpec;
pub use crate::qdisc::tbf::TbfSpec;

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
    /// `pie …`.
    Pie(PieSpec),
    /// `pfifo_fast [txqueuelen N]`.
    PfifoFast(PfifoFastSpec),
    /// `tbf rate R burst B (limit L | latency T) … [child SPEC…]`.
    Tbf(TbfSpec),
    /// `fq_pie …`.
    FqPie(FqPieSpec),
    /// `fq …` (sch_fq).
    Fq(FqSpec),
    /// `dualpi2 …` (RFC 9332's coupled DualQ).
    DualPi2(DualPi2Spec),
    /// `htb … class …` (a tree of classes, leaves any discipline).
    Htb(HtbSpec),
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
            "pie" => QdiscSpec::Pie(PieSpec::parse(&mut t)?),
            "pfifo_fast" => QdiscSpec::PfifoFast(PfifoFastSpec::parse(&mut t)?),
            "tbf" => QdiscSpec::Tbf(TbfSpec::parse(&mut t)?),
            "fq_pie" => QdiscSpec::FqPie(FqPieSpec::parse(&mut t)?),
            "fq" => QdiscSpec::Fq(FqSpec::parse(&mut t)?),
            "dualpi2" => QdiscSpec::DualPi2(DualPi2Spec::parse(&mut t)?),
            "htb" => QdiscSpec::Htb(HtbSpec::parse(&mut t)?),
            "sfq" | "netem" | "red" => {
                return Err(SpecError::unsupported(
                    kind,
                    "debloat implements pfifo, bfifo, pfifo_fast, codel, fq_codel, cake, pie, fq_pie, fq, dualpi2, tbf, htb and deadline",
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
            QdiscSpec::Pie(_) => "pie",
            QdiscSpec::PfifoFast(_) => "pfifo_fast",
            QdiscSpec::Tbf(_) => "tbf",
            QdiscSpec::FqPie(_) => "fq_pie",
            QdiscSpec::Fq(_) => "fq",
            QdiscSpec::DualPi2(_) => "dualpi2",
            QdiscSpec::Htb(_) => "htb",
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
            QdiscSpec::Pie(s) => Box::new(Pie::new(s, seed)),
            QdiscSpec::PfifoFast(s) => Box::new(PfifoFast::new(s)),
            QdiscSpec::Tbf(s) => Box::new(Tbf::new(s, hasher, seed)),
            QdiscSpec::FqPie(s) => Box::new(FqPie::new(s, hasher, seed)),
            QdiscSpec::Fq(s) => Box::new(Fq::new(s, hasher)),
            QdiscSpec::DualPi2(s) => Box::new(DualPi2::new(s, seed)),
            QdiscSpec::Htb(s) => Box::new(Htb::new(s, hasher, seed)),
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
            QdiscSpec::Pie(s) => write!(f, "pie {s}"),
            QdiscSpec::PfifoFast(s) => write!(f, "pfifo_fast {s}"),
            QdiscSpec::Tbf(s) => write!(f, "tbf {s}"),
            QdiscSpec::FqPie(s) => write!(f, "fq_pie {s}"),
            QdiscSpec::Fq(s) => write!(f, "fq {s}"),
            QdiscSpec::DualPi2(s) => write!(f, "dualpi2 {s}"),
            QdiscSpec::Htb(s) => write!(f, "htb {s}"),
        }
    }
}

#[cfg(test)]
mod tests;
