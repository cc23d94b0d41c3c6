//! `dualpi2`: the L4S DualQ Coupled AQM (RFC 9332) as Linux has it (net/sched/sch_dualpi2.c,
//! Linux ≥ 6.17).
//!
//! Two FIFOs share one limit: packets whose ECN field matches the mask (ECT(1) and CE by
//! default: the L4S identifier of RFC 9331) go to the low-latency L queue, the rest to the
//! classic C queue. One PI controller (PI2) updates a base probability p every `tupdate` from
//! the larger of the two queues' head sojourns: p += α·(delay − target) + β·(delay − previous
//! delay). Classic packets are dropped (or marked, if ECN-capable) with p² — two rolls of p —
//! and L4S packets are marked with k·p (the coupling factor), so a scalable flow (DCTCP-like,
//! marks ∝ 1/window) and a classic one (drops ∝ 1/window²) get the same rate. On top, the L
//! queue has a step: an L4S packet that waited longer than `step_thresh` (1 ms) is marked at
//! once. A weighted round robin serves L by default but gives C `classic_protection` (10 %) of
//! the bytes when both have packets. When k·p passes 100 % (overload) L4S packets are dropped
//! as classic ones (`drop_on_overload`) or kept and marked (`overflow`). Nothing is dropped or
//! marked while both queues hold less than two MTUs. Drops happen at dequeue by default
//! (`drop_enqueue` moves them to enqueue); the limit (packets, and truesize bytes) drops
//! arrivals.
//!
//! Where this differs from the kernel:
//! * The PI2 timer runs lazily: before each packet, every update due since the last one runs in
//!   order (exact, since nothing an update reads changes between packets); the first is
//!   `tupdate` after the first packet (the kernel: after the qdisc is made). Long idle spells
//!   are skipped once p is 0.
//! * Packets are classified by ECN only: tc filters and `skb->priority` set by a classifier
//!   (the third class, "L queue without AQM") are not modelled.
//! * Random rolls come from a seeded generator, not `get_random_u32`.

pub mod spec;
#[cfg(test)]
mod tests;

pub use spec::{DualPi2Spec, Step};

use crate::packet::{Ecn, Nanos, Packet};
use crate::qdisc::stats::{DualPi2Xstats, QdiscStats, Xstats};
use crate::qdisc::{drain_in_turn, Dequeue, DropBox, DropReason, Dropped, Qdisc, Verdict};
use crate::rng::SplitMix64;
use std::collections::VecDeque;

/// The largest probability (`MAX_PROB`, 2³² − 1).
pub const MAX_PROB: u32 = u32::MAX;
const L: usize = 0;
const C: usize = 1;

/// `dualpi2_scale_alpha_beta`: tc's 1/256 Hz into the kernel's probability per 64 ns.
pub(crate) fn scale(raw: u32) -> u32 {
    (((u64::from(raw) * u64::from(MAX_PROB)) >> 2) / 1_000_000_000) as u32
}

/// `dualpi2_unscale_alpha_beta`: back into 1/256 Hz, as the kernel reports it.
pub(crate) fn unscale(v: u32) -> u32 {
    (((u64::from(v) * 1_000_000_000) << 2) / u64::from(MAX_PROB)) as u32
}

#[derive(Debug)]
struct Entry<P> {
    p: P,
    ts: Nanos,
    l4s: bool,
    apply_step: bool,
}

/// The counters of `struct tc_dualpi2_xstats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DualPi2Counters {
    /// Packets queued in C.
    pub packets_in_c: u32,
    /// Packets queued in L.
    pub packets_in_l: u32,
    /// Most packets held at an arrival.
    pub maxq: u32,
    /// CE marks, the step's included.
    pub ecn_mark: u32,
    /// CE marks by the step.
    pub step_marks: u32,
    /// Peak truesize bytes held.
    pub max_memory_used: u32,
}

/// The `dualpi2` qdisc.
#[derive(Debug)]
pub struct DualPi2<P> {
    spec: DualPi2Spec,
    alpha: u32,
    beta: u32,
    target_ns: u64,
    tupdate_ns: u64,
    queues: [VecDeque<Entry<P>>; 2],
    prob: u32,
    last_qdelay: u64,
    next_update: Option<Nanos>,
    credit: i64,
    credit_init: i64,
    memory_used: u32,
    backlog: u64,
    counters: DualPi2Counters,
    rng: SplitMix64,
    dropped: DropBox<P>,
    drops: u64,
    overlimits: u64,
    sent_bytes: u64,
    sent_pkts: u64,
    last_now: Nanos,
}

impl<P: Packet> DualPi2<P> {
    /// A dualpi2 from a parsed spec; `seed` drives the probability rolls.
    pub fn new(spec: &DualPi2Spec, seed: u64) -> Self {
        let mtu = i64::from(crate::PSCHED_MTU);
        let wc = i64::from(spec.c_protection);
        let credit_init = mtu * (wc - (100 - wc));
        DualPi2 {
            spec: spec.clone(),
            alpha: scale(spec.alpha),
            beta: scale(spec.beta),
            target_ns: u64::from(spec.target_us) * 1000,
            tupdate_ns: u64::from(spec.tupdate_us.max(1)) * 1000,
            queues: [VecDeque::with_capacity(256), VecDeque::with_capacity(256)],
            prob: 0,
            last_qdelay: 0,
            next_update: None,
            credit: credit_init,
            credit_init,
            memory_used: 0,
            backlog: 0,
            counters: DualPi2Counters::default(),
            rng: SplitMix64::new(seed ^ 0xD0A1_0912),
            dropped: DropBox::default(),
            drops: 0,
            overlimits: 0,
            sent_bytes: 0,
            sent_pkts: 0,
            last_now: 0,
        }
    }

    /// The base probability p, as a fraction of [`MAX_PROB`].
    pub fn prob(&self) -> u32 {
        self.prob
    }

    /// The counters.
    pub fn counters(&self) -> DualPi2Counters {
        self.counters
    }

    fn qlen_total(&self) -> usize {
        self.queues[L].len() + self.queues[C].len()
    }

    fn head_delay(&self, q: usize, now: Nanos) -> u64 {
        self.queues[q]
            .front()
            .map_or(0, |e| now.saturating_sub(e.ts))
    }

    /// `calculate_probability`, at time `at`.
    fn update(&mut self, at: Nanos) {
        let qdelay = self.head_delay(L, at).max(self.head_delay(C, at));
        let (a, b) = (i128::from(self.alpha), i128::from(self.beta));
        let delta = (i128::from(qdelay) - i128::from(self.target_ns)) * a
            + (i128::from(qdelay) - i128::from(self.last_qdelay)) * b;
        self.last_qdelay = qdelay;
        let step = (delta.unsigned_abs() >> 6).min(u128::from(u32::MAX)) as u32;
        let mut p = if delta > 0 {
            self.prob.checked_add(step).unwrap_or(MAX_PROB)
        } else {
            self.prob.saturating_sub(step)
        };
        if !self.spec.drop_overload {
            p = p.min(MAX_PROB / u32::from(self.spec.coupling_factor));
        }
        self.prob = p;
    }

    /// Run every PI2 update due by `now` (the kernel's hrtimer, lazily).
    fn catch_up(&mut self, now: Nanos) {
        self.last_now = now;
        let Some(mut t) = self.next_update else {
            self.next_update = Some(now + self.tupdate_ns);
            return;
        };
        while t <= now {
            if self.prob == 0 && self.last_qdelay == 0 && self.qlen_total() == 0 {
                // Idle and settled: every further update leaves p at 0.
                let skipped = (now - t) / self.tupdate_ns;
                t += skipped * self.tupdate_ns;
            }
            self.update(t);
            t += self.tupdate_ns;
        }
        self.next_update = Some(t);
    }

    fn roll(&mut self, p: u64) -> bool {
        u64::from(self.rng.next_u32()) <= p
    }

    /// `must_drop`: the PI2 verdict for a packet (it may CE-mark the packet instead).
    fn must_drop(&mut self, e: &mut Entry<P>) -> bool {
        if self.backlog < 2 * u64::from(crate::PSCHED_MTU) {
            return false;
        }
        let prob = u64::from(self.prob);
        let local_l = prob * u64::from(self.spec.coupling_factor);
        let overload = local_l > u64::from(MAX_PROB);
        let classic = |q: &mut Self| q.roll(prob) && q.roll(prob);
        let ect = e.p.meta().ecn != Ecn::NotEct;
        if !e.l4s {
            if classic(self) {
                if overload || !ect {
                    return true;
                }
                self.mark(&mut e.p);
            }
            return false;
        }
        if overload {
            if !self.spec.drop_overload || !classic(self) {
                self.mark(&mut e.p);
                return false;
            }
            return true;
        }
        if self.roll(local_l) {
            if !ect {
                return true;
            }
            self.mark(&mut e.p);
        }
        false
    }

    fn mark(&mut self, p: &mut P) -> bool {
        let ok = p.set_ce();
        if ok {
            self.counters.ecn_mark += 1;
        }
        ok
    }

    /// `do_step_aqm`: true when the L4S packet is to be dropped (not ECN-capable).
    fn step(&mut self, e: &mut Entry<P>, now: Nanos) -> bool {
        let over = match self.spec.step {
            Step::Packets(n) => self.queues[L].len() as u64 > u64::from(n),
            Step::Time(us) => now.saturating_sub(e.ts) > u64::from(us) * 1000,
        };
        if e.apply_step && over {
            if e.p.meta().ecn == Ecn::NotEct {
                return true;
            }
            if self.mark(&mut e.p) {
                self.counters.step_marks += 1;
            }
        }
        false
    }

    fn drop_it(&mut self, p: P, reason: DropReason) {
        self.drops += 1;
        self.dropped.push(p, reason);
    }

    /// `dualpi2_enqueue_skb`: one packet (a segment, when GSO is split).
    fn enqueue_one(&mut self, p: P, now: Nanos) -> Verdict {
        let truesize = p.meta().truesize;
        if self.qlen_total() >= self.spec.limit as usize
            || u64::from(self.memory_used) + u64::from(truesize) > u64::from(self.spec.memory_limit)
        {
            self.overlimits += 1;
            self.drop_it(p, DropReason::Overlimit);
            return Verdict::Dropped;
        }
        let l4s = p.meta().ecn.bits() & self.spec.ecn_mask != 0;
        let mut e = Entry {
            p,
            ts: now,
            l4s,
            apply_step: false,
        };
        if self.spec.drop_early && self.must_drop(&mut e) {
            self.drop_it(e.p, DropReason::Aqm);
            return Verdict::Dropped;
        }
        e.p.meta_mut().enqueue_ns = now;
        self.memory_used += truesize;
        self.counters.max_memory_used = self.counters.max_memory_used.max(self.memory_used);
        self.counters.maxq = self.counters.maxq.max(self.qlen_total() as u32);
        self.backlog += u64::from(e.p.meta().len);
        if l4s {
            e.apply_step = self.queues[L].len() >= self.spec.min_qlen_step as usize;
            self.counters.packets_in_l += 1;
            self.queues[L].push_back(e);
        } else {
            self.counters.packets_in_c += 1;
            self.queues[C].push_back(e);
        }
        Verdict::Queued
    }

    /// `dequeue_packet`: the WRR's pick and the credit it would cost.
    fn pick(&mut self) -> Option<(Entry<P>, i64)> {
        let (l_len, c_len) = (self.queues[L].len(), self.queues[C].len());
        let (e, weight) = if l_len > 0 && (c_len == 0 || self.credit <= 0) {
            let w = if c_len > 0 {
                i64::from(self.spec.c_protection)
            } else {
                0
            };
            (self.queues[L].pop_front()?, w)
        } else if c_len > 0 {
            let w = if l_len > 0 {
                -(100 - i64::from(self.spec.c_protection))
            } else {
                0
            };
            (self.queues[C].pop_front()?, w)
        } else {
            self.credit = self.credit_init;
            return None;
        };
        self.memory_used -= e.p.meta().truesize;
        self.backlog -= u64::from(e.p.meta().len);
        let change = weight * i64::from(e.p.meta().len);
        Some((e, change))
    }
}

impl<P: Packet> Qdisc<P> for DualPi2<P> {
    fn enqueue(&mut self, mut p: P, now: Nanos) -> Verdict {
        self.catch_up(now);
        if !self.spec.split_gso || p.meta().gso_segs <= 1 {
            return self.enqueue_one(p, now);
        }
        let mut verdict = Verdict::Dropped;
        while let Some(seg) = p.split_first_segment() {
            if self.enqueue_one(seg, now) == Verdict::Queued {
                verdict = Verdict::Queued;
            }
        }
        if self.enqueue_one(p, now) == Verdict::Queued {
            verdict = Verdict::Queued;
        }
        verdict
    }

    fn dequeue(&mut self, now: Nanos) -> Dequeue<P> {
        self.catch_up(now);
        while let Some((mut e, change)) = self.pick() {
            if !self.spec.drop_early && self.must_drop(&mut e) {
                self.drop_it(e.p, DropReason::Aqm);
                continue;
            }
            if e.l4s && self.step(&mut e, now) {
                self.drop_it(e.p, DropReason::Aqm);
                continue;
            }
            self.credit += change;
            self.sent_bytes += u64::from(e.p.meta().len);
            self.sent_pkts += 1;
            return Dequeue::Packet(e.p);
        }
        Dequeue::Empty
    }

    fn take_dropped(&mut self) -> Option<Dropped<P>> {
        self.dropped.take()
    }

    fn qlen(&self) -> usize {
        self.qlen_total()
    }

    fn backlog(&self) -> u64 {
        self.backlog
    }

    fn stats(&self) -> QdiscStats {
        let c = self.counters;
        let us = |q| (self.head_delay(q, self.last_now) / 1000).min(u64::from(u32::MAX)) as u32;
        QdiscStats {
            kind: "dualpi2".into(),
            options: self.spec.tc_options(),
            bytes: self.sent_bytes,
            packets: self.sent_pkts,
            drops: self.drops,
            overlimits: self.overlimits,
            requeues: 0,
            backlog: self.backlog,
            qlen: self.qlen_total() as u64,
            xstats: Xstats::DualPi2(Box::new(DualPi2Xstats {
                prob: self.prob,
                delay_c_us: us(C),
                delay_l_us: us(L),
                packets_in_c: c.packets_in_c,
                packets_in_l: c.packets_in_l,
                maxq: c.maxq,
                ecn_mark: c.ecn_mark,
                step_marks: c.step_marks,
                credit: self.credit.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32,
                memory_used: self.memory_used,
                max_memory_used: c.max_memory_used,
                memory_limit: self.spec.memory_limit,
            })),
        }
    }

    fn drain(&mut self, out: &mut dyn FnMut(P)) {
        let queues = &mut self.queues;
        drain_in_turn(vec![L, C], |i| queues[i].pop_front().map(|e| e.p), out);
        self.backlog = 0;
        self.memory_used = 0;
        self.credit = self.credit_init;
    }
}
