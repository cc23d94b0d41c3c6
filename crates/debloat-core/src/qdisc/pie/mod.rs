//! PIE, the Proportional Integral controller Enhanced (RFC 8033), as Linux has it: the control
//! law that `pie` and `fq_pie` share (net/sched/pie.c and include/net/pie.h).
//!
//! A PI controller updates a drop probability every `tupdate` from the queue delay's distance
//! to `target` (weight `alpha`) and its change since the last update (weight `beta`); each
//! arriving packet is dropped (or CE-marked) with that probability. What Linux adds to the RFC
//! and this module keeps, down to the integer widths:
//! * times are psched ticks (64 ns); the probability is a 56-bit fixed-point fraction;
//! * `alpha` and `beta` are sixteenths (tc's 0–32 is 0–2), scaled down by 2 then by 4 per
//!   decade while the probability is below 10 %, 1 %, 0.1 % … (RFC 8033 §5.2's table as a loop);
//! * steps up are capped at 2 % once the probability is ≥ 10 %, and a delay above 250 ms adds
//!   2 % at once; two updates in a row with no delay decay it by 1/64;
//! * the 150-ms burst allowance counts down by the time between dequeues;
//! * the delay is each dequeued packet's sojourn (Linux's default since 5.6) or, with
//!   `dq_rate_estimator`, the backlog over a drain rate averaged over 16-KiB cycles (RFC 8033's
//!   original); early drop is off below 2 MTUs of backlog, and while the delay is under half
//!   the target with the probability under 20 %; de-randomisation accumulates the probability
//!   and drops at once past 8.5, never below 0.85 (RFC 8033 §5.1).
//!
//! Where this differs from the kernel, and why:
//! * Linux runs the update from a timer, first half a second after the qdisc is created, then
//!   every `tupdate` jiffies. A discipline here is driven by packets and `now`, so it runs the
//!   updates that fell due before it handles each packet ([`Updates`]); between two packets
//!   neither the backlog nor the variables change, so each update sees what the timer would
//!   have seen. The half second counts from the first packet (the discipline is not told when
//!   it was built).
//! * `tupdate` is kept to the microsecond (a HZ=1000 kernel's jiffy is 1 ms, and usecs_to_jiffies
//!   rounds up to it): on a HZ=250 kernel it rounds up to 4 ms (15 ms runs as 16 ms), on the
//!   lab's User-Mode Linux (HZ=100) to 10 ms (20 ms), and the timer re-arms from the jiffy at
//!   which it ran, so there it was measured to update every 30 ms under load
//!   (docs/kernel-lab.md); docs/algorithms.md §6.1 says how the lab comparison allows for it.
//! * `get_random_bytes` is a seeded SplitMix64 ([`crate::rng`]).

pub mod qdisc;
pub mod spec;

// fq_pie (`super::fq_pie`) runs the same law per flow.

pub use qdisc::Pie;
pub use spec::PieSpec;

use crate::packet::Nanos;
use crate::rng::SplitMix64;

/// The probability's fixed point: 1.0 is `MAX_PROB` (Linux: `U64_MAX >> 8`).
pub const MAX_PROB: u64 = u64::MAX >> 8;
/// Bytes of backlog a drain-rate measurement cycle needs (`QUEUE_THRESHOLD`).
pub const QUEUE_THRESHOLD: u64 = 16384;
/// The drain rate's fixed-point shift (`PIE_SCALE`).
const PIE_SCALE: u32 = 8;
/// psched ticks are 64 ns (`PSCHED_SHIFT`).
const PSCHED_SHIFT: u32 = 6;
/// psched ticks per second.
pub const TICKS_PER_SEC: u64 = 1_000_000_000 >> PSCHED_SHIFT;
/// No dequeue seen yet (`DTIME_INVALID`).
const DTIME_INVALID: u64 = u64::MAX;
/// The burst allowance after a (re)start: 150 ms.
const BURST_TICKS: u64 = 150_000_000 >> PSCHED_SHIFT;
/// Linux arms the first update half a second (HZ/2) after the qdisc is created.
pub const FIRST_UPDATE_NS: Nanos = 500_000_000;

/// ns → psched ticks.
pub fn ticks(ns: u64) -> u64 {
    ns >> PSCHED_SHIFT
}

/// psched ticks → ns.
pub fn ticks_to_ns(t: u64) -> u64 {
    t << PSCHED_SHIFT
}

/// The knobs, in the kernel's units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// Target delay, ticks.
    pub target: u64,
    /// Update interval, ns.
    pub tupdate_ns: u64,
    /// Packets.
    pub limit: u32,
    /// Sixteenths, 0–32.
    pub alpha: u32,
    /// Sixteenths, 0–32.
    pub beta: u32,
    /// Mark ECN-capable packets instead of dropping while the probability is ≤ 10 %.
    pub ecn: bool,
    /// Scale the probability by the packet's size over the MTU.
    pub bytemode: bool,
    /// Delay from the drain rate (Little's law) instead of each packet's sojourn.
    pub dq_rate_estimator: bool,
}

/// The controller's state (`struct pie_vars`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vars {
    /// Queue delay at the last update (or dequeue), ticks.
    pub qdelay: u64,
    /// Queue delay at the update before, ticks.
    pub qdelay_old: u64,
    /// Burst allowance left, ticks.
    pub burst_time: u64,
    /// Time of the last dequeue (or the measurement cycle's start), ticks.
    pub dq_tstamp: u64,
    /// Drop probability, a fraction of [`MAX_PROB`].
    pub prob: u64,
    /// Accumulated probability since the last drop (de-randomisation).
    pub accu_prob: u64,
    /// Bytes dequeued in this measurement cycle; None when no cycle runs (`DQCOUNT_INVALID`).
    pub dq_count: Option<u64>,
    /// Drain rate, bytes per tick << [`PIE_SCALE`].
    pub avg_dq_rate: u32,
    /// Backlog at the last update.
    pub backlog_old: u32,
}

impl Default for Vars {
    fn default() -> Self {
        let mut v = Vars {
            qdelay: 0,
            qdelay_old: 0,
            burst_time: 0,
            dq_tstamp: 0,
            prob: 0,
            accu_prob: 0,
            dq_count: None,
            avg_dq_rate: 0,
            backlog_old: 0,
        };
        v.restart();
        v
    }
}

impl Vars {
    /// `pie_vars_init`: a new measurement cycle and a fresh burst allowance.
    fn restart(&mut self) {
        self.burst_time = BURST_TICKS;
        self.dq_tstamp = DTIME_INVALID;
        self.accu_prob = 0;
        self.dq_count = None;
        self.avg_dq_rate = 0;
    }

    /// The drain rate in bytes per second, as `tc -s` reports it.
    pub fn avg_dq_rate_bytes(&self) -> u64 {
        (u64::from(self.avg_dq_rate) * TICKS_PER_SEC) >> PIE_SCALE
    }
}

/// `pie_drop_early`: whether the arriving packet of `len` bytes is dropped (or marked), with
/// `backlog` bytes queued.
pub fn drop_early(
    p: &Params,
    v: &mut Vars,
    backlog: u64,
    len: u32,
    mtu: u32,
    rng: &mut SplitMix64,
) -> bool {
    if v.burst_time > 0 {
        return false;
    }
    if v.qdelay < p.target / 2 && v.prob < MAX_PROB / 5 {
        return false;
    }
    if backlog < 2 * u64::from(mtu) {
        return false;
    }
    let local = if p.bytemode && len <= mtu {
        u64::from(len).wrapping_mul(v.prob / u64::from(mtu))
    } else {
        v.prob
    };
    if local == 0 {
        v.accu_prob = 0;
    } else {
        v.accu_prob = v.accu_prob.wrapping_add(local);
    }
    if v.accu_prob < (MAX_PROB / 100) * 85 {
        return false;
    }
    if v.accu_prob >= (MAX_PROB / 2) * 17 {
        return true;
    }
    if (rng.next_u64() >> 8) < local {
        v.accu_prob = 0;
        return true;
    }
    false
}

/// `pie_process_dequeue`: a packet of `len` bytes queued since `enqueued_ns` left at `now`,
/// leaving `backlog` bytes.
pub fn on_dequeue(
    p: &Params,
    v: &mut Vars,
    len: u32,
    enqueued_ns: Nanos,
    backlog: u64,
    now: Nanos,
) {
    let now = ticks(now);
    let dtime: u32;
    if !p.dq_rate_estimator {
        v.qdelay = now.wrapping_sub(ticks(enqueued_ns));
        let d = if v.dq_tstamp != DTIME_INVALID {
            now.wrapping_sub(v.dq_tstamp) as u32
        } else {
            0
        };
        v.dq_tstamp = now;
        if backlog == 0 {
            v.qdelay = 0;
        }
        if d == 0 {
            return;
        }
        dtime = d;
    } else {
        if backlog >= QUEUE_THRESHOLD && v.dq_count.is_none() {
            v.dq_tstamp = now;
            v.dq_count = Some(0);
        }
        let Some(count) = v.dq_count else {
            return;
        };
        let count = count + u64::from(len);
        v.dq_count = Some(count);
        if count < QUEUE_THRESHOLD {
            return;
        }
        let scaled = (count << PIE_SCALE) as u32;
        let d = now.wrapping_sub(v.dq_tstamp) as u32;
        if d == 0 {
            return;
        }
        let rate = scaled / d;
        v.avg_dq_rate = if v.avg_dq_rate == 0 {
            rate
        } else {
            (v.avg_dq_rate - (v.avg_dq_rate >> 3)).wrapping_add(rate >> 3)
        };
        if backlog < QUEUE_THRESHOLD {
            v.dq_count = None;
        } else {
            v.dq_count = Some(0);
            v.dq_tstamp = now;
        }
        dtime = d;
    }
    v.burst_time = v.burst_time.saturating_sub(u64::from(dtime));
}

/// `alpha` and `beta` in probability per tick, scaled for how high the probability is.
fn gains(p: &Params, prob: u64) -> (u64, u64) {
    let mut alpha = (u64::from(p.alpha) * (MAX_PROB / TICKS_PER_SEC)) >> 4;
    let mut beta = (u64::from(p.beta) * (MAX_PROB / TICKS_PER_SEC)) >> 4;
    if prob < MAX_PROB / 10 {
        alpha >>= 1;
        beta >>= 1;
        let mut power = 100u64;
        while prob < MAX_PROB / power && power <= 1_000_000 {
            alpha >>= 2;
            beta >>= 2;
            power *= 10;
        }
    }
    (alpha, beta)
}

/// `pie_calculate_probability`: one update, with `backlog` bytes queued.
pub fn update(p: &Params, v: &mut Vars, backlog: u64) {
    let backlog = backlog as u32;
    let (qdelay, qdelay_old) = if p.dq_rate_estimator {
        let old = v.qdelay;
        v.qdelay_old = v.qdelay;
        let q = ((u64::from(backlog) << PIE_SCALE) as u32)
            .checked_div(v.avg_dq_rate)
            .map_or(0, u64::from);
        (q, old)
    } else {
        (v.qdelay, v.qdelay_old)
    };
    let mut update_prob = !(qdelay == 0 && backlog != 0);
    let (alpha, beta) = gains(p, v.prob);
    // The kernel's products are u64 wrapping into an s64: two's complement throughout.
    let mut delta = (alpha.wrapping_mul(qdelay.wrapping_sub(p.target))) as i64;
    delta = delta.wrapping_add(beta.wrapping_mul(qdelay.wrapping_sub(qdelay_old)) as i64);
    let old = v.prob;
    if delta > (MAX_PROB / 50) as i64 && v.prob >= MAX_PROB / 10 {
        delta = ((MAX_PROB / 100) * 2) as i64;
    }
    if qdelay > ticks(250_000_000) {
        delta = delta.wrapping_add((MAX_PROB / 50) as i64);
    }
    v.prob = v.prob.wrapping_add(delta as u64);
    if delta > 0 {
        if v.prob < old {
            v.prob = MAX_PROB;
            update_prob = false;
        }
    } else if v.prob > old {
        v.prob = 0;
    }
    if qdelay == 0 && qdelay_old == 0 && update_prob {
        v.prob -= v.prob / 64;
    }
    v.qdelay = qdelay;
    v.backlog_old = backlog;
    if v.qdelay < p.target / 2
        && v.qdelay_old < p.target / 2
        && v.prob == 0
        && (!p.dq_rate_estimator || v.avg_dq_rate > 0)
    {
        v.restart();
    }
    if !p.dq_rate_estimator {
        v.qdelay_old = qdelay;
    }
}

/// The update timer, run lazily: [`Updates::catch_up`] runs every update due by `now`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Updates {
    next: Option<Nanos>,
}

impl Updates {
    /// Run the updates due at or before `now`, with `backlog` bytes queued since the last
    /// packet. Once an update leaves the variables as they were, the ones after it would too
    /// (an update depends only on them and the backlog): those are skipped at once.
    pub fn catch_up(&mut self, p: &Params, v: &mut Vars, backlog: u64, now: Nanos) {
        self.catch_up_with(p.tupdate_ns, now, || {
            let before = *v;
            update(p, v, backlog);
            *v != before
        });
    }

    /// Run `update` once for each update due at or before `now`, every `tupdate_ns`; it says
    /// whether it changed anything, and once it did not, the rest are skipped.
    pub fn catch_up_with(&mut self, tupdate_ns: u64, now: Nanos, mut update: impl FnMut() -> bool) {
        let next = self.next.get_or_insert(now + FIRST_UPDATE_NS);
        let every = tupdate_ns.max(1);
        while now >= *next {
            let changed = update();
            *next += every;
            if !changed && now >= *next {
                *next += ((now - *next) / every + 1) * every;
            }
        }
    }

    /// When the next update runs (None before the first packet).
    pub fn next(&self) -> Option<Nanos> {
        self.next
    }
}

#[cfg(test)]
mod tests;
