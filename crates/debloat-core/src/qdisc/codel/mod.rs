//! CoDel, "controlled delay" (include/net/codel.h, codel_impl.h; RFC 8289), as Linux runs it.
//!
//! One CoDel core is shared by [`Codel`](qdisc::Codel) (sch_codel) and
//! [`FqCodel`](crate::qdisc::fq_codel::FqCodel) (one per flow), exactly as the kernel shares
//! `codel_dequeue` between them.
//!
//! Faithful to Linux rather than to the RFC pseudocode where they differ:
//! * time is a `u32` in units of 1024 ns (`ns >> 10`), compared with signed differences;
//! * entering the dropping state needs `now > first_above_time` (strictly after);
//! * `1/sqrt(count)` is one Newton step per count change in Q0.16, so the second drop comes
//!   `0.5 × interval` after the first, not `0.707 ×` (docs/algorithms.md §1.3 table);
//! * re-entry: `count := count - lastcount` if that is > 1 and `drop_next` was within 16
//!   intervals, else 1;
//! * the byte floor compares the backlog remaining after the dequeue with `mtu`
//!   (the device MTU, 1514), and an empty dequeue does not clear `first_above_time`;
//! * with ECN on, a mark ends the drop loop; `ce_threshold` marks independently of `ecn`.
//!
//! Invariant: `rec_inv_sqrt` is always 1/sqrt(count) as the Newton iteration leaves it.

pub mod qdisc;
pub mod spec;

pub use qdisc::Codel;

use crate::packet::{Nanos, Packet};

/// CoDel time: nanoseconds >> 10 (units of 1.024 µs), wrapping every ~4398 s.
pub type CodelTime = u32;

/// Convert nanoseconds to CoDel time.
#[inline]
pub fn codel_time(ns: Nanos) -> CodelTime {
    (ns >> 10) as u32
}

/// Convert CoDel time (a duration) back to nanoseconds.
#[inline]
pub fn codel_time_to_ns(t: CodelTime) -> Nanos {
    u64::from(t) << 10
}

#[inline]
fn after(a: CodelTime, b: CodelTime) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

#[inline]
fn after_eq(a: CodelTime, b: CodelTime) -> bool {
    (a.wrapping_sub(b) as i32) >= 0
}

#[inline]
fn before(a: CodelTime, b: CodelTime) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// CoDel parameters, in CoDel time units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// Acceptable standing queue delay (default `MS2TIME(5)` = 4882 units).
    pub target: CodelTime,
    /// Sliding window for the minimum delay (default `MS2TIME(100)` = 97656 units).
    pub interval: CodelTime,
    /// Byte floor: never drop while the remaining backlog is at most this (psched_mtu, 1514).
    pub mtu: u32,
    /// Mark ECN-capable packets instead of dropping them.
    pub ecn: bool,
    /// Mark CE on any packet whose sojourn exceeds this; `None` disables.
    pub ce_threshold: Option<CodelTime>,
    /// Restrict `ce_threshold` to packets whose DS field & mask == selector (mask 0 = all).
    pub ce_threshold_selector: u8,
    /// See `ce_threshold_selector`.
    pub ce_threshold_mask: u8,
}

impl Params {
    /// Linux defaults: target 5 ms, interval 100 ms, mtu 1514, the given ECN setting.
    pub fn linux_default(ecn: bool) -> Params {
        Params {
            target: codel_time(5_000_000),
            interval: codel_time(100_000_000),
            mtu: crate::PSCHED_MTU,
            ecn,
            ce_threshold: None,
            ce_threshold_selector: 0,
            ce_threshold_mask: 0,
        }
    }
}

/// Per-queue CoDel state (`struct codel_vars`). Not reset when the queue empties.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Vars {
    /// Drops or marks since entering the dropping state.
    pub count: u32,
    /// `count` at the last entry into the dropping state.
    pub lastcount: u32,
    /// In the dropping state.
    pub dropping: bool,
    /// 1/sqrt(count) in Q0.16.
    pub rec_inv_sqrt: u16,
    /// When the sojourn first went (and stayed) above target, plus interval; 0 = not above.
    pub first_above_time: CodelTime,
    /// When to drop next.
    pub drop_next: CodelTime,
    /// Sojourn of the last dequeued packet.
    pub ldelay: CodelTime,
}

/// CoDel statistics (`struct codel_stats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Stats {
    /// Largest packet seen at dequeue.
    pub maxpacket: u32,
    /// Packets CE-marked by the control law.
    pub ecn_mark: u32,
    /// Packets CE-marked by `ce_threshold`.
    pub ce_mark: u32,
    /// Packets dropped by the control law.
    pub drop_count: u32,
    /// Bytes dropped by the control law.
    pub drop_len: u64,
}

/// One Newton-Raphson step of 1/sqrt(count) in Q0.16 with 64-bit intermediates
/// (`codel_Newton_step`).
pub fn newton_step(vars: &mut Vars) {
    let invsqrt = u64::from(vars.rec_inv_sqrt) << 16;
    let invsqrt2 = (invsqrt * invsqrt) >> 32;
    let mut val = (3u64 << 32).wrapping_sub(u64::from(vars.count).wrapping_mul(invsqrt2));
    val >>= 2;
    val = (val.wrapping_mul(invsqrt)) >> (32 - 2 + 1);
    vars.rec_inv_sqrt = (val >> 16) as u16;
}

/// `t + interval / sqrt(count)` (`codel_control_law`).
#[inline]
pub fn control_law(t: CodelTime, interval: CodelTime, rec_inv_sqrt: u16) -> CodelTime {
    let scaled = (u64::from(interval) * (u64::from(rec_inv_sqrt) << 16)) >> 32;
    t.wrapping_add(scaled as u32)
}

/// The queue a CoDel instance manages, as seen from `codel_dequeue`.
///
/// Linux's `dequeue_func` unlinks the head before CoDel looks at it. Here CoDel decides with the
/// head still in place ([`CodelQueue::head`]) and counts it as already gone from the backlog, so
/// the packet it lets through is moved exactly once, by the caller's [`CodelQueue::pop`]. The
/// decisions and counters are the kernel's; only the moment of unlinking differs.
pub trait CodelQueue<P> {
    /// The head packet, left in the queue (CoDel reads its metadata and may mark it CE).
    fn head(&mut self) -> Option<&mut P>;
    /// Remove the head packet, updating the backlog counters (`dequeue_func`).
    fn pop(&mut self) -> Option<P>;
    /// The backlog in bytes compared against `mtu` (fq_codel: the whole qdisc's), head included.
    fn backlog(&self) -> u32;
    /// Discard a packet the control law dropped (`drop_func`).
    fn drop_packet(&mut self, packet: P);
}

/// What `codel_should_drop` reads of the head: its length and enqueue time.
#[inline(always)]
fn head_info<P: Packet, Q: CodelQueue<P>>(q: &mut Q) -> Option<(u32, Nanos)> {
    q.head().map(|p| {
        let m = p.meta();
        (m.len, m.enqueue_ns)
    })
}

/// `codel_should_drop` for the head `(len, enqueue time)`, with the backlog as Linux sees it
/// after unlinking that head.
#[inline(always)]
fn should_drop(
    head: Option<(u32, Nanos)>,
    backlog: u32,
    vars: &mut Vars,
    params: &Params,
    stats: &mut Stats,
    now: CodelTime,
) -> bool {
    let Some((len, enqueue_ns)) = head else {
        vars.first_above_time = 0;
        return false;
    };
    vars.ldelay = now.wrapping_sub(codel_time(enqueue_ns));
    stats.maxpacket = stats.maxpacket.max(len);
    if before(vars.ldelay, params.target) || backlog.saturating_sub(len) <= params.mtu {
        vars.first_above_time = 0;
        return false;
    }
    if vars.first_above_time == 0 {
        vars.first_above_time = now.wrapping_add(params.interval);
        false
    } else {
        after(now, vars.first_above_time)
    }
}

/// Drop the head (`drop_func` after `dequeue_func`), counting it.
fn drop_head<P: Packet, Q: CodelQueue<P>>(q: &mut Q, stats: &mut Stats) {
    if let Some(p) = q.pop() {
        stats.drop_len += u64::from(p.meta().len);
        stats.drop_count += 1;
        q.drop_packet(p);
    }
}

/// Linux `codel_dequeue`: take the next packet CoDel lets through at `now`, dropping (through
/// [`CodelQueue::drop_packet`]) or marking on the way as the control law says.
#[inline]
pub fn dequeue<P: Packet, Q: CodelQueue<P>>(
    q: &mut Q,
    vars: &mut Vars,
    params: &Params,
    stats: &mut Stats,
    now_ns: Nanos,
) -> Option<P> {
    if dequeue_head(q, vars, params, stats, now_ns) {
        q.pop()
    } else {
        None
    }
}

/// [`dequeue`] without the final unlink: true when the packet now at the head of `q` is the one
/// to send (the caller pops it), false when `q` is empty (after any drops).
#[inline]
pub fn dequeue_head<P: Packet, Q: CodelQueue<P>>(
    q: &mut Q,
    vars: &mut Vars,
    params: &Params,
    stats: &mut Stats,
    now_ns: Nanos,
) -> bool {
    let now = codel_time(now_ns);
    let Some(mut head) = head_info(q) else {
        vars.dropping = false;
        return false;
    };
    let drop = should_drop(Some(head), q.backlog(), vars, params, stats, now);
    if vars.dropping {
        if !drop {
            vars.dropping = false;
        } else {
            while vars.dropping && after_eq(now, vars.drop_next) {
                vars.count = vars.count.wrapping_add(1);
                newton_step(vars);
                if params.ecn && set_ce_head(q) {
                    stats.ecn_mark += 1;
                    vars.drop_next =
                        control_law(vars.drop_next, params.interval, vars.rec_inv_sqrt);
                    ce_threshold(q, vars, params, stats);
                    return true;
                }
                drop_head(q, stats);
                match head_info(q) {
                    Some(next) => head = next,
                    None => {
                        should_drop(None, q.backlog(), vars, params, stats, now);
                        vars.dropping = false;
                        return false;
                    }
                }
                if !should_drop(Some(head), q.backlog(), vars, params, stats, now) {
                    vars.dropping = false;
                } else {
                    vars.drop_next =
                        control_law(vars.drop_next, params.interval, vars.rec_inv_sqrt);
                }
            }
        }
    } else if drop {
        if params.ecn && set_ce_head(q) {
            stats.ecn_mark += 1;
        } else {
            drop_head(q, stats);
            let next = head_info(q);
            should_drop(next, q.backlog(), vars, params, stats, now);
            enter_dropping(vars, params, now);
            if next.is_none() {
                return false;
            }
            ce_threshold(q, vars, params, stats);
            return true;
        }
        enter_dropping(vars, params, now);
    }
    ce_threshold(q, vars, params, stats);
    true
}

/// `INET_ECN_set_ce` on the head: true if it was ECN-capable and now carries CE.
#[inline]
fn set_ce_head<P: Packet, Q: CodelQueue<P>>(q: &mut Q) -> bool {
    q.head().is_some_and(|p| p.set_ce())
}

/// The re-entry rule: resume near the old drop rate if the last episode was recent.
fn enter_dropping(vars: &mut Vars, params: &Params, now: CodelTime) {
    vars.dropping = true;
    let delta = vars.count.wrapping_sub(vars.lastcount);
    if delta > 1
        && before(
            now.wrapping_sub(vars.drop_next),
            params.interval.wrapping_mul(16),
        )
    {
        vars.count = delta;
        newton_step(vars);
    } else {
        vars.count = 1;
        vars.rec_inv_sqrt = u16::MAX;
    }
    vars.lastcount = vars.count;
    vars.drop_next = control_law(now, params.interval, vars.rec_inv_sqrt);
}

#[inline]
fn ce_threshold<P: Packet, Q: CodelQueue<P>>(
    q: &mut Q,
    vars: &Vars,
    params: &Params,
    stats: &mut Stats,
) {
    if let Some(th) = params.ce_threshold {
        if after(vars.ldelay, th) {
            let Some(skb) = q.head() else { return };
            let m = skb.meta();
            let dsfield = (m.dscp << 2) | m.ecn.bits();
            let selected = params.ce_threshold_mask == 0
                || (dsfield & params.ce_threshold_mask) == params.ce_threshold_selector;
            if selected && skb.set_ce() {
                stats.ce_mark += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newton_step_matches_linux_table() {
        // docs/algorithms.md §1.3: rec_inv_sqrt after entering with count=1 and stepping.
        let mut v = Vars {
            count: 1,
            rec_inv_sqrt: u16::MAX,
            ..Vars::default()
        };
        let expect = [
            (2, 0.50002),
            (3, 0.5625),
            (4, 0.4878),
            (5, 0.4415),
            (8, 0.3515),
            (16, 0.2496),
        ];
        let mut i = 0;
        for count in 2..=16u32 {
            v.count = count;
            newton_step(&mut v);
            if i < expect.len() && expect[i].0 == count {
                let got = f64::from(v.rec_inv_sqrt) / 65536.0;
                assert!(
                    (got - expect[i].1).abs() < 0.0002,
                    "count {count}: {got} vs {}",
                    expect[i].1
                );
                i += 1;
            }
        }
        assert_eq!(i, expect.len());
    }

    #[test]
    fn default_times_match_ms2time() {
        let p = Params::linux_default(false);
        assert_eq!(p.target, 4882);
        assert_eq!(p.interval, 97656);
    }

    #[test]
    fn control_law_at_count_one_is_one_interval() {
        assert_eq!(control_law(1000, 97656, u16::MAX), 1000 + 97654);
    }
}
