//! `fq`'s words, as tc-fq(8) takes them: `limit PACKETS` (per band since Linux 6.7),
//! `flow_limit PACKETS`, `buckets N` (rounded up to a power of two, 2–262144), `quantum BYTES`
//! (1 B–1 MiB), `initial_quantum BYTES`, `maxrate RATE`, `low_rate_threshold RATE`,
//! `pacing`/`nopacing`, `refill_delay TIME`, `orphan_mask MASK`, `timer_slack TIME`,
//! `ce_threshold TIME`, `horizon TIME`, `horizon_drop`/`horizon_cap`, and iproute2 ≥ 6.7's
//! `priomap P0 … P15` (bands 0–2) and `weights W0 W1 W2` (each ≥ 16384 bytes). The defaults are
//! `fq_init`'s: 10000 packets, 100 per flow, 1024 buckets, quanta of 2 and 10 device MTUs
//! (3028 B and 15140 B at 1514), 550 kbit/s, 40 ms, mask 1023, 10 µs of slack, a 10-s horizon
//! that drops, no CE threshold, the priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1 and weights
//! 589824 196608 65536.
//!
//! tc's text is iproute2 6.1's (the lab's `tc`), which predates bands: `priomap` and `weights`
//! are printed, in 6.7's form, only when they are not the defaults.
//!
//! Two words tc takes are the kernel's to refuse or ignore, and debloat does as the kernel
//! does: `defrate RATE` is accepted and ignored (Linux only logs "sch_fq: defrate N ignored."
//! and never reports it), and `offload_horizon TIME` (Linux ≥ 6.13, iproute2 ≥ 6.14) may not
//! exceed the device's pacing-offload horizon — which no device debloat drives has (nor, in
//! Linux 7.2, any in-tree driver), so only 0 is accepted, as the kernel answers "invalid
//! offload_horizon" to anything more. iproute2 6.1 prints neither.

use crate::qdisc::words::{
    count_value, expect_value, size_value, time_value, SpecError, TcForm, Tokens,
};
use crate::units::parse_rate;
use crate::units::{fmt_rate, fmt_rate_exact, fmt_size, fmt_size_tc, fmt_time, fmt_usecs};
use std::fmt;

const FQ_WORDS: &[&str] = &[
    "limit PACKETS",
    "flow_limit PACKETS",
    "buckets N",
    "quantum BYTES",
    "initial_quantum BYTES",
    "maxrate RATE",
    "low_rate_threshold RATE",
    "pacing",
    "nopacing",
    "refill_delay TIME",
    "orphan_mask MASK",
    "timer_slack TIME",
    "ce_threshold TIME",
    "horizon TIME",
    "horizon_drop",
    "horizon_cap",
    "defrate RATE",
    "offload_horizon TIME",
    "priomap P0 … P15",
    "weights W0 W1 W2",
];

/// The kernel's priority → band map (`sch_default_prio2band`).
pub const DEFAULT_PRIOMAP: [u8; 16] = [1, 2, 2, 2, 1, 2, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1];
/// The bands' byte quanta per round: 9, 3 and 1 × 64 KiB.
pub const DEFAULT_WEIGHTS: [u32; 3] = [9 << 16, 3 << 16, 1 << 16];
/// The smallest weight the kernel accepts (`FQ_MIN_WEIGHT`).
pub const MIN_WEIGHT: u32 = 16384;
/// "No limit" for `maxrate` and `ce_threshold` (`~0U`).
pub const NONE: u32 = u32::MAX;

/// `fq [limit N] [flow_limit N] [buckets N] [quantum B] … [priomap …] [weights …]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FqSpec {
    /// Packets per band (default 10000).
    pub limit: u32,
    /// Packets per flow (default 100).
    pub flow_limit: u32,
    /// log2 of the number of hash buckets of flows (default 10).
    pub buckets_log: u8,
    /// Bytes a flow may send per round (default 2 × 1514).
    pub quantum: u32,
    /// Bytes a new flow may send in its first round (default 10 × 1514).
    pub initial_quantum: u32,
    /// Each flow's rate cap, bytes/s ([`NONE`]: none).
    pub maxrate: u32,
    /// Flows paced below this rate, bytes/s, send one packet per round (default 68750 = 550 kbit/s).
    pub low_rate_threshold: u32,
    /// Pacing on (default; `nopacing` turns it off).
    pub pacing: bool,
    /// A flow idle this long gets a quantum of credit back when it returns, µs (default 40 ms).
    pub refill_delay_us: u32,
    /// Mask applied to the hash of packets without a socket (default 1023).
    pub orphan_mask: u32,
    /// Timer slack, ns (default 10 µs; reported only: see the module doc).
    pub timer_slack_ns: u32,
    /// CE-mark packets sent this much after their time, µs ([`NONE`]: never).
    pub ce_threshold_us: u32,
    /// Timestamps further ahead than this are dropped or capped, µs (default 10 s).
    pub horizon_us: u32,
    /// Drop (default) or cap packets beyond the horizon.
    pub horizon_drop: bool,
    /// Band of each priority (`skb->priority & 15`).
    pub priomap: [u8; 16],
    /// Each band's bytes per round.
    pub weights: [u32; 3],
}

impl Default for FqSpec {
    fn default() -> Self {
        FqSpec {
            limit: 10_000,
            flow_limit: 100,
            buckets_log: 10,
            quantum: 2 * crate::PSCHED_MTU,
            initial_quantum: 10 * crate::PSCHED_MTU,
            maxrate: NONE,
            low_rate_threshold: 550_000 / 8,
            pacing: true,
            refill_delay_us: 40_000,
            orphan_mask: 1023,
            timer_slack_ns: 10_000,
            ce_threshold_us: NONE,
            horizon_us: 10_000_000,
            horizon_drop: true,
            priomap: DEFAULT_PRIOMAP,
            weights: DEFAULT_WEIGHTS,
        }
    }
}

/// A rate in bytes/s as the kernel keeps it (a u32).
fn rate(t: &mut Tokens<'_>, w: &str) -> Result<u32, SpecError> {
    let v = expect_value(t, w, "a rate such as 10Mbit")?;
    let bits = parse_rate(v).map_err(|e| SpecError::value(v, &e.to_string()))?;
    let bytes = bits / 8;
    if bytes >= u64::from(NONE) {
        return Err(SpecError::value(v, &format!("{w} is at most 34Gbit")));
    }
    Ok(bytes as u32)
}

fn usecs(t: &mut Tokens<'_>, w: &str) -> Result<u32, SpecError> {
    let ns = time_value(t, w)?;
    let us = ns / 1000;
    if us >= u64::from(NONE) {
        return Err(SpecError::value(w, "at most 4294 s"));
    }
    Ok(us as u32)
}

fn list<const N: usize>(
    t: &mut Tokens<'_>,
    w: &str,
    min: u32,
    max: u32,
) -> Result<[u32; N], SpecError> {
    let mut out = [0u32; N];
    for v in out.iter_mut() {
        *v = count_value(t, w, min, max)?;
    }
    Ok(out)
}

impl FqSpec {
    pub(crate) fn parse(t: &mut Tokens<'_>) -> Result<Self, SpecError> {
        let mut s = FqSpec::default();
        while let Some(w) = t.next() {
            match w {
                "limit" => s.limit = count_value(t, w, 0, u32::MAX)?,
                "flow_limit" => s.flow_limit = count_value(t, w, 0, u32::MAX)?,
                "buckets" => {
                    let n = count_value(t, w, 2, 1 << 18)?;
                    s.buckets_log = n.next_power_of_two().trailing_zeros() as u8;
                }
                "quantum" => s.quantum = size_value(t, w, 1, 1 << 20)?,
                "initial_quantum" => s.initial_quantum = size_value(t, w, 1, i32::MAX as u64)?,
                "maxrate" => s.maxrate = rate(t, w)?,
                "low_rate_threshold" => s.low_rate_threshold = rate(t, w)?,
                "pacing" => s.pacing = true,
                "nopacing" => s.pacing = false,
                "refill_delay" => s.refill_delay_us = usecs(t, w)?,
                "orphan_mask" => s.orphan_mask = count_value(t, w, 0, u32::MAX)?,
                "timer_slack" => {
                    let ns = time_value(t, w)?;
                    s.timer_slack_ns = ns.min(u64::from(u32::MAX)) as u32;
                }
                "ce_threshold" => s.ce_threshold_us = usecs(t, w)?,
                "horizon" => s.horizon_us = usecs(t, w)?,
                "horizon_drop" => s.horizon_drop = true,
                "horizon_cap" => s.horizon_drop = false,
                // Accepted and ignored, as Linux ignores it (see the module's notes).
                "defrate" => {
                    rate(t, w)?;
                }
                "offload_horizon" => {
                    if usecs(t, w)? > 0 {
                        return Err(SpecError::value(
                            w,
                            "invalid offload_horizon: it may not exceed the device's pacing-offload horizon, and no device here offloads pacing (0 only)",
                        ));
                    }
                }
                "priomap" => {
                    let m = list::<16>(t, w, 0, 2)?;
                    s.priomap = m.map(|b| b as u8);
                }
                "weights" => s.weights = list::<3>(t, w, MIN_WEIGHT, i32::MAX as u32)?,
                "bands" => {
                    // iproute2 ≥ 6.7 prints `bands 3` before the priomap; only 3 is valid.
                    count_value(t, w, 3, 3)?;
                }
                _ => return Err(SpecError::unknown(w, "fq", FQ_WORDS)),
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
        let rate = |b: u32| {
            if tc {
                fmt_rate(u64::from(b) * 8)
            } else {
                fmt_rate_exact(u64::from(b) * 8)
            }
        };
        let us = |u: u32| {
            if tc {
                fmt_usecs(u64::from(u))
            } else {
                crate::units::fmt_time_exact(u64::from(u) * 1000)
            }
        };
        write!(
            f,
            "limit {}p flow_limit {}p buckets {} orphan_mask {}",
            self.limit,
            self.flow_limit,
            1u32 << self.buckets_log,
            self.orphan_mask
        )?;
        if !self.pacing {
            write!(f, " nopacing")?;
        }
        if self.priomap != DEFAULT_PRIOMAP || self.weights != DEFAULT_WEIGHTS {
            write!(f, " bands 3 priomap")?;
            for b in self.priomap {
                write!(f, " {b}")?;
            }
            let [a, b, c] = self.weights;
            write!(f, " weights {a} {b} {c}")?;
        }
        write!(
            f,
            " quantum {} initial_quantum {}",
            sz(self.quantum),
            sz(self.initial_quantum)
        )?;
        if self.maxrate != NONE {
            write!(f, " maxrate {}", rate(self.maxrate))?;
        }
        if self.low_rate_threshold != 0 {
            write!(f, " low_rate_threshold {}", rate(self.low_rate_threshold))?;
        }
        write!(f, " refill_delay {}", us(self.refill_delay_us))?;
        if self.ce_threshold_us != NONE {
            write!(f, " ce_threshold {}", us(self.ce_threshold_us))?;
        }
        let slack = if tc {
            fmt_time(u64::from(self.timer_slack_ns))
        } else {
            crate::units::fmt_time_exact(u64::from(self.timer_slack_ns))
        };
        write!(f, " timer_slack {slack} horizon {}", us(self.horizon_us))?;
        f.write_str(if self.horizon_drop {
            " horizon_drop"
        } else {
            " horizon_cap"
        })
    }

    /// The options as `tc qdisc show` prints them.
    pub fn tc_options(&self) -> String {
        TcForm(|f| self.fmt_with(f, true)).to_string()
    }
}

impl fmt::Display for FqSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_with(f, false)
    }
}
