//! `dualpi2`'s words, as tc-dualpi2(8) (iproute2 ≥ 6.17) takes them: `limit PACKETS`,
//! `memlimit BYTES`, `target TIME`, `tupdate TIME`, `alpha F`, `beta F` (Hz, kept in 1/256),
//! `coupling_factor K` (1–255), `l4s_ect`/`any_ect`, `step_thresh TIME|Np`, `min_qlen_step N`,
//! `drop_on_overload`/`overflow`, `drop_enqueue`/`drop_dequeue`, `classic_protection P%`
//! (0–100), `split_gso`/`no_split_gso`, and `max_rtt TIME [typical_rtt TIME]`, from which tc
//! derives target, tupdate, alpha and beta (and then ignores those four if also given).
//! Defaults are `dualpi2_reset_default`'s: 10000 packets, memlimit 2 × MTU per packet, target
//! 15 ms, tupdate 16 ms, alpha 41/256, beta 819/256, step 1 ms, coupling 2, drop on overload,
//! drop at dequeue, 10 % classic protection, L4S by ECT(1), split GSO.

use crate::qdisc::words::{count_value, expect_value, time_value, SpecError, TcForm, Tokens};
use crate::units::{fmt_time_exact, fmt_usecs};
use std::fmt;

const DUALPI2_WORDS: &[&str] = &[
    "limit PACKETS",
    "memlimit BYTES",
    "target TIME",
    "tupdate TIME",
    "alpha HZ",
    "beta HZ",
    "coupling_factor 1-255",
    "l4s_ect",
    "any_ect",
    "step_thresh TIME|PACKETSp",
    "min_qlen_step PACKETS",
    "drop_on_overload",
    "overflow",
    "drop_enqueue",
    "drop_dequeue",
    "classic_protection PERCENT",
    "split_gso",
    "no_split_gso",
    "max_rtt TIME",
    "typical_rtt TIME",
];

/// The largest alpha or beta tc takes, in 1/256 Hz (`ALPHA_BETA_MAX` × 256 fits 31 bits).
const ALPHA_BETA_MAX: f64 = ((2u32 << 23) - 1) as f64;

/// Where the step threshold counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// The L4S packet's own sojourn, µs.
    Time(u32),
    /// The L queue's length, packets.
    Packets(u32),
}

/// `dualpi2 [limit N] [target T] [tupdate T] [alpha A] [beta B] … [max_rtt T]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DualPi2Spec {
    /// Packets in both queues (default 10000).
    pub limit: u32,
    /// Truesize bytes in both queues (default limit × 2 × 1514).
    pub memory_limit: u32,
    /// PI2's target delay, µs (default 15 ms).
    pub target_us: u32,
    /// PI2's update interval, µs (default 16 ms).
    pub tupdate_us: u32,
    /// Integral gain, 1/256 Hz as tc sends it (default 41 ≈ 0.16 Hz).
    pub alpha: u32,
    /// Proportional gain, 1/256 Hz (default 819 ≈ 3.2 Hz).
    pub beta: u32,
    /// k: the L queue's marking probability is k × the base probability (default 2).
    pub coupling_factor: u8,
    /// ECN bits that send a packet to the L queue: 1 (ECT(1) and CE, `l4s_ect`) or 3 (`any_ect`).
    pub ecn_mask: u8,
    /// The L queue's immediate step marking threshold (default 1 ms).
    pub step: Step,
    /// The step applies only while the L queue holds at least this many packets (default 0).
    pub min_qlen_step: u32,
    /// Past 100 % L probability, drop as classic (default) rather than mark and overflow.
    pub drop_overload: bool,
    /// Drop at enqueue rather than dequeue (default: dequeue).
    pub drop_early: bool,
    /// The classic queue's WRR weight, percent (default 10).
    pub c_protection: u8,
    /// Split GSO super-packets into segments on arrival (default on).
    pub split_gso: bool,
}

impl Default for DualPi2Spec {
    fn default() -> Self {
        DualPi2Spec {
            limit: 10_000,
            memory_limit: memory_for(10_000),
            target_us: 15_000,
            tupdate_us: 16_000,
            alpha: 41,
            beta: 819,
            coupling_factor: 2,
            ecn_mask: 1,
            step: Step::Time(1000),
            min_qlen_step: 0,
            drop_overload: true,
            drop_early: false,
            c_protection: 10,
            split_gso: true,
        }
    }
}

/// `get_memory_limit`: twice an MTU per packet, saturating.
fn memory_for(limit: u32) -> u32 {
    (u64::from(limit) * 2 * u64::from(crate::PSCHED_MTU)).min(u64::from(u32::MAX)) as u32
}

fn usecs(t: &mut Tokens<'_>, w: &str) -> Result<u32, SpecError> {
    let ns = time_value(t, w)?;
    Ok((ns / 1000).min(u64::from(u32::MAX)) as u32)
}

/// tc's `parse_alpha_beta`: Hz as a float, kept in 1/256 (truncated).
fn gain(t: &mut Tokens<'_>, w: &str) -> Result<u32, SpecError> {
    let v = expect_value(t, w, "a gain in Hz such as 0.16")?;
    let f: f64 = v
        .parse()
        .ok()
        .filter(|f: &f64| (0.0..=ALPHA_BETA_MAX).contains(f))
        .ok_or_else(|| SpecError::value(v, &format!("{w} takes a number of Hz, 0 to 16777215")))?;
    let raw = (f * 256.0) as u32;
    if raw == 0 {
        return Err(SpecError::value(
            v,
            &format!("{w} rounds to 0 (the kernel takes at least 1/256 Hz)"),
        ));
    }
    Ok(raw)
}

fn step(t: &mut Tokens<'_>, w: &str) -> Result<Step, SpecError> {
    let v = expect_value(t, w, "a time such as 1ms, or packets such as 5p")?;
    if let Ok(ns) = crate::units::parse_time(v) {
        return Ok(Step::Time((ns / 1000).min(u64::from(u32::MAX)) as u32));
    }
    let digits = ["packets", "packet", "pkts", "pkt", "p"]
        .iter()
        .find_map(|s| v.strip_suffix(s));
    digits
        .and_then(|d| d.parse().ok())
        .map(Step::Packets)
        .ok_or_else(|| SpecError::value(v, "step_thresh takes a time (1ms) or packets (5p)"))
}

fn percent(t: &mut Tokens<'_>, w: &str) -> Result<u8, SpecError> {
    let v = expect_value(t, w, "a percentage such as 10%")?;
    let n: f64 = v
        .strip_suffix('%')
        .unwrap_or(v)
        .parse()
        .map_err(|_| SpecError::value(v, "classic_protection takes a percentage, 0 to 100"))?;
    if !(0.0..=100.0).contains(&n) {
        return Err(SpecError::value(v, "classic_protection is 0 to 100 %"));
    }
    Ok(n.round() as u8)
}

impl DualPi2Spec {
    pub(crate) fn parse(t: &mut Tokens<'_>) -> Result<Self, SpecError> {
        let mut s = DualPi2Spec::default();
        let (mut memlimit, mut rtt_max, mut rtt_typ) = (None, 0u32, 0u32);
        while let Some(w) = t.next() {
            match w {
                "limit" => s.limit = count_value(t, w, 1, u32::MAX)?,
                "memlimit" => memlimit = Some(count_value(t, w, 1, u32::MAX)?),
                "target" => s.target_us = usecs(t, w)?,
                "tupdate" => s.tupdate_us = usecs(t, w)?.max(1),
                "alpha" => s.alpha = gain(t, w)?,
                "beta" => s.beta = gain(t, w)?,
                "coupling_factor" => s.coupling_factor = count_value(t, w, 1, 255)? as u8,
                "l4s_ect" => s.ecn_mask = 1,
                "any_ect" => s.ecn_mask = 3,
                "step_thresh" => s.step = step(t, w)?,
                "min_qlen_step" => s.min_qlen_step = count_value(t, w, 0, u32::MAX)?,
                "drop_on_overload" => s.drop_overload = true,
                "overflow" => s.drop_overload = false,
                "drop_enqueue" => s.drop_early = true,
                "drop_dequeue" => s.drop_early = false,
                "classic_protection" => s.c_protection = percent(t, w)?,
                "split_gso" => s.split_gso = true,
                "no_split_gso" => s.split_gso = false,
                "max_rtt" => rtt_max = usecs(t, w)?,
                "typical_rtt" => rtt_typ = usecs(t, w)?,
                _ => return Err(SpecError::unknown(w, "dualpi2", DUALPI2_WORDS)),
            }
        }
        s.memory_limit = memlimit.unwrap_or(memory_for(s.limit));
        if rtt_max > 0 || rtt_typ > 0 {
            s.derive_from_rtts(rtt_max, rtt_typ)?;
        }
        Ok(s)
    }

    /// tc's auto-configuration from `max_rtt` and `typical_rtt` (µs; one may be 0): target =
    /// typical, tupdate = min(typical, max / 3), alpha = 0.1 × tupdate / max², beta = 0.3 / max.
    fn derive_from_rtts(&mut self, max: u32, typ: u32) -> Result<(), SpecError> {
        let (max, typ) = match (max, typ) {
            (m, 0) => (m, (m / 6).max(1)),
            (0, t) => (t.saturating_mul(6), t),
            (m, t) if t > m => {
                return Err(SpecError::value(
                    "typical_rtt",
                    "typical_rtt must be at most max_rtt",
                ))
            }
            (m, t) => (m, t),
        };
        let (m, t) = (f64::from(max), f64::from(typ));
        let tupdate = if t < m / 3.0 { t } else { m / 3.0 };
        let tupdate = (tupdate as u32).max(1);
        let alpha = f64::from(tupdate) / m / m * 1e6 * 0.1;
        let beta = 0.3 / m * 1e6;
        if beta > ALPHA_BETA_MAX || alpha < 1.0 / 256.0 || beta < 1.0 / 256.0 {
            return Err(SpecError::value(
                "max_rtt",
                "this max_rtt makes alpha or beta round to 0 or overflow",
            ));
        }
        self.target_us = typ;
        self.tupdate_us = tupdate;
        self.alpha = (alpha * 256.0) as u32;
        self.beta = (beta * 256.0) as u32;
        Ok(())
    }

    fn fmt_with(&self, f: &mut fmt::Formatter<'_>, tc: bool) -> fmt::Result {
        let time = |us: u32| {
            if tc {
                fmt_usecs(u64::from(us))
            } else {
                fmt_time_exact(u64::from(us) * 1000)
            }
        };
        let gain = |raw: u32| {
            if tc {
                // What the kernel hands back: its 64-ns internal units, rounded twice.
                format!(
                    "{:.6}",
                    f64::from(super::unscale(super::scale(raw))) / 256.0
                )
            } else {
                format!("{}", f64::from(raw) / 256.0)
            }
        };
        let unit = if tc { "B" } else { "" };
        write!(
            f,
            "limit {}p memlimit {}{unit} target {} tupdate {} alpha {} beta {} ",
            self.limit,
            self.memory_limit,
            time(self.target_us),
            time(self.tupdate_us),
            gain(self.alpha),
            gain(self.beta)
        )?;
        match self.step {
            Step::Packets(n) => write!(f, "step_thresh {n}p ")?,
            Step::Time(us) => write!(f, "step_thresh {} ", time(us))?,
        }
        write!(
            f,
            "min_qlen_step {}{} coupling_factor {} {} {} classic_protection {}% {} {}split_gso",
            self.min_qlen_step,
            if tc { "p" } else { "" },
            self.coupling_factor,
            if self.drop_overload {
                "drop_on_overload"
            } else {
                "overflow"
            },
            if self.drop_early {
                "drop_enqueue"
            } else {
                "drop_dequeue"
            },
            self.c_protection,
            if self.ecn_mask == 1 {
                "l4s_ect"
            } else {
                "any_ect"
            },
            if self.split_gso { "" } else { "no_" }
        )
    }

    /// The options as `tc qdisc show` prints them (iproute2 6.17's `q_dualpi2.c`).
    pub fn tc_options(&self) -> String {
        TcForm(|f| self.fmt_with(f, true)).to_string()
    }
}

impl fmt::Display for DualPi2Spec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_with(f, false)
    }
}
