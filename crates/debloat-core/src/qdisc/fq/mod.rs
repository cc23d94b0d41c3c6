//! `fq`: the Fair Queue packet scheduler with per-flow pacing (net/sched/sch_fq.c, as of Linux
//! 6.7, which added its three priority bands).
//!
//! What it does. Every socket's packets are one flow; packets without a socket (a router's) are
//! flows by `hash & orphan_mask`. Flows live in `1 << buckets_log` hash buckets, are created on
//! their first packet with `initial_quantum` of credit, and are collected three seconds after they
//! empty. A flow is served round robin inside its band (new flows first, then old, a flow with
//! no credit left earning `quantum` and going to the back), and the three bands are served by a
//! weighted round robin of `weights` bytes each. A packet waits until its time: the
//! earliest-departure time its sender stamped on it (`tstamp`, as TCP has stamped every packet
//! since Linux 4.20, its pacing rate turned into a time), and for the flow, the time its last
//! packet's length at `maxrate` allows (a packet without a stamp at below `low_rate_threshold`
//! goes one per round). A flow whose next packet is not due is *throttled* — taken off the
//! round until then — and `dequeue` answers [`Dequeue::NotBefore`] when every flow with packets
//! is. While no flow is eligible, packets that are due now skip the flows through an internal
//! queue of up to 8 (6.7's fast path). A packet sent more than `ce_threshold` after its time is
//! CE-marked. Drops happen at enqueue only: a band at `limit` packets, a flow at `flow_limit`,
//! a timestamp beyond `horizon` (or it is capped there with `horizon_cap`).
//!
//! Where this differs from the kernel:
//! * A flow's packets stay in arrival order; Linux keeps a packet stamped earlier than its flow's
//!   tail in a tree and sends it first. TCP's stamps only grow, so its flows are unaffected.
//! * A socket's pacing rate reaches fq only as the timestamps its sender computed; a packet with a
//!   socket and no stamp is paced at `maxrate` only (Linux would read `sk_pacing_rate`, which
//!   UDP sockets leave unlimited).
//! * Garbage collection walks the flow's bucket up to the flow looked up (Linux walks the
//!   red-black tree's search path), at most 8 flows, as the kernel.
//! * Times are exact: no jiffies (`refill_delay` and the 3-s collection age to the µs) and no
//!   timer slack (a throttled flow is woken at its time, not up to `timer_slack` later).
//! * Drops beyond the horizon are reported as [`DropReason::Overlimit`].

pub mod spec;
mod table;
#[cfg(test)]
mod tests;

pub use spec::FqSpec;

use crate::flow::FlowHasher;
use crate::packet::{Nanos, Packet};
use crate::qdisc::list::ListSet;
use crate::qdisc::pktq::{Fifo, Pool};
use crate::qdisc::stats::{FqXstats, QdiscStats, Xstats};
use crate::qdisc::{drain_in_turn, Dequeue, DropBox, DropReason, Dropped, Qdisc, Verdict};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

const BANDS: usize = 3;
const NEW: usize = 0;
const OLD: usize = 1;
/// Flows collected per lookup at most (`FQ_GC_MAX`).
const GC_MAX: usize = 8;
/// A flow empty this long may be collected (`FQ_GC_AGE`, 3 × HZ).
const GC_AGE: Nanos = 3_000_000_000;
/// Packets the fast path holds at most.
const FASTPATH_MAX: usize = 8;
const NSEC_PER_SEC: u64 = 1_000_000_000;

/// A queued packet and what fq's control block keeps for it.
#[derive(Debug)]
struct Entry<P> {
    p: P,
    time_to_send: Nanos,
    band: u8,
    stamped: bool,
}

#[derive(Clone, Copy, Debug)]
struct Flow {
    key: u64,
    q: Fifo,
    credit: i64,
    band: u8,
    detached: bool,
    throttled: bool,
    age: Nanos,
    time_next_packet: Nanos,
}

/// The counters of `struct tc_fq_qd_stats` this model keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FqCounters {
    /// Flows collected.
    pub gc_flows: u64,
    /// Packets that took the fast path.
    pub fastpath_packets: u64,
    /// Times a flow was throttled.
    pub throttled: u64,
    /// Drops at `flow_limit`.
    pub flows_plimit: u64,
    /// Packets whose pacing delay was clamped to 1 s.
    pub pkts_too_long: u64,
    /// Packets CE-marked past `ce_threshold`.
    pub ce_mark: u64,
    /// Drops beyond the horizon.
    pub horizon_drops: u64,
    /// Timestamps capped at the horizon.
    pub horizon_caps: u64,
    /// Drops at `limit`, per band.
    pub band_drops: [u64; BANDS],
}

/// The `fq` qdisc.
#[derive(Debug)]
pub struct Fq<P> {
    spec: FqSpec,
    hasher: FlowHasher,
    flows: Vec<Flow>,
    free: Vec<u32>,
    buckets: Vec<Vec<u32>>,
    lists: ListSet<{ 2 * BANDS }>,
    band_credit: [i64; BANDS],
    band_nr: usize,
    band_pkt_count: [u32; BANDS],
    internal: Fifo,
    pool: Pool<Entry<P>>,
    delayed: BinaryHeap<Reverse<(Nanos, u64, u32)>>,
    delayed_seq: u64,
    time_next_delayed_flow: Nanos,
    unthrottle_latency_ns: u64,
    inactive_flows: u32,
    throttled_flows: u32,
    counters: FqCounters,
    qlen: usize,
    backlog: u64,
    drops: u64,
    dropped: DropBox<P>,
    sent_bytes: u64,
    sent_pkts: u64,
    last_now: Nanos,
}

impl<P: Packet> Fq<P> {
    /// An fq from a parsed spec; `hasher` hashes packets that have no socket.
    pub fn new(spec: &FqSpec, hasher: FlowHasher) -> Self {
        let buckets = 1usize << spec.buckets_log;
        Fq {
            spec: spec.clone(),
            hasher,
            flows: Vec::with_capacity(64),
            free: Vec::with_capacity(64),
            buckets: vec![Vec::new(); buckets],
            lists: ListSet::new(64),
            band_credit: [0; BANDS],
            band_nr: 0,
            band_pkt_count: [0; BANDS],
            internal: Fifo::default(),
            pool: Pool::with_capacity(1024),
            delayed: BinaryHeap::with_capacity(64),
            delayed_seq: 0,
            time_next_delayed_flow: Nanos::MAX,
            unthrottle_latency_ns: 0,
            inactive_flows: 0,
            throttled_flows: 0,
            counters: FqCounters::default(),
            qlen: 0,
            backlog: 0,
            drops: 0,
            dropped: DropBox::default(),
            sent_bytes: 0,
            sent_pkts: 0,
            last_now: 0,
        }
    }

    /// The counters.
    pub fn counters(&self) -> FqCounters {
        self.counters
    }

    /// Flows allocated (active, throttled or empty and not yet collected).
    pub fn flow_count(&self) -> u32 {
        (self.flows.len() - self.free.len()) as u32
    }

    fn drop_arrival(&mut self, p: P) -> Verdict {
        self.drops += 1;
        self.dropped.push(p, DropReason::Overlimit);
        Verdict::Dropped
    }

    /// The time the packet may leave, after the horizon check; `None` when it is dropped.
    fn time_to_send(&mut self, p: &mut P, now: Nanos) -> Option<(Nanos, bool)> {
        let t = p.meta().tstamp;
        if t == 0 {
            return Some((now, false));
        }
        let horizon = u64::from(self.spec.horizon_us) * 1000;
        if t > now.saturating_add(horizon) {
            if self.spec.horizon_drop {
                self.counters.horizon_drops += 1;
                return None;
            }
            self.counters.horizon_caps += 1;
            p.meta_mut().tstamp = now + horizon;
            return Some((now + horizon, true));
        }
        Some((t, true))
    }

    /// `fq_fastpath_check`.
    fn fastpath(&self, t: Nanos, now: Nanos) -> bool {
        if t > now || self.spec.maxrate != spec::NONE {
            return false;
        }
        if self.qlen != 0 {
            let flows = self.flow_count();
            if flows != self.inactive_flows + self.throttled_flows {
                return false;
            }
            if self.internal.len() >= FASTPATH_MAX {
                return false;
            }
        }
        true
    }

    fn list(band: u8, which: usize) -> usize {
        usize::from(band) * 2 + which
    }

    fn set_throttled(&mut self, i: u32) {
        let t = self.flows[i as usize].time_next_packet;
        self.delayed_seq += 1;
        self.delayed.push(Reverse((t, self.delayed_seq, i)));
        self.flows[i as usize].throttled = true;
        self.throttled_flows += 1;
        self.counters.throttled += 1;
        self.time_next_delayed_flow = self.time_next_delayed_flow.min(t);
    }

    /// `fq_check_throttled`: flows whose time has come go back to their band's old list.
    fn check_throttled(&mut self, now: Nanos) {
        if self.time_next_delayed_flow > now {
            return;
        }
        let sample = now - self.time_next_delayed_flow;
        self.unthrottle_latency_ns -= self.unthrottle_latency_ns >> 3;
        self.unthrottle_latency_ns += sample >> 3;
        self.time_next_delayed_flow = Nanos::MAX;
        while let Some(&Reverse((t, _, i))) = self.delayed.peek() {
            if t > now {
                self.time_next_delayed_flow = t;
                break;
            }
            self.delayed.pop();
            let f = &mut self.flows[i as usize];
            f.throttled = false;
            let l = Self::list(f.band, OLD);
            self.throttled_flows -= 1;
            self.lists.push_back(l, i);
        }
    }

    /// `fq_pband_head_select`: the list band `b` serves next, if it has credit and flows.
    fn head(&self, b: usize) -> Option<usize> {
        if self.band_credit[b] <= 0 {
            return None;
        }
        [NEW, OLD]
            .into_iter()
            .map(|w| b * 2 + w)
            .find(|&l| !self.lists.is_empty(l))
    }

    fn sent(&mut self, p: &P) {
        self.qlen -= 1;
        let len = u64::from(p.meta().len);
        self.backlog -= len;
        self.sent_bytes += len;
        self.sent_pkts += 1;
    }

    /// The pacing step after flow `i` sent `len` bytes (the tail of `fq_dequeue`).
    fn pace(&mut self, i: u32, len: u32, stamped: bool, now: Nanos) {
        if !self.spec.pacing {
            return;
        }
        let rate = u64::from(self.spec.maxrate);
        let mut plen = u64::from(len);
        let f = &mut self.flows[i as usize];
        if !stamped {
            if rate <= u64::from(self.spec.low_rate_threshold) {
                f.credit = 0;
            } else {
                plen = plen.max(u64::from(self.spec.quantum));
                if f.credit > 0 {
                    return;
                }
            }
        }
        if rate == u64::from(spec::NONE) {
            return;
        }
        // A zero rate leaves the length unscaled, as the kernel's `if (likely(rate))`.
        let mut delay = (plen * NSEC_PER_SEC)
            .checked_div(rate)
            .unwrap_or(plen * NSEC_PER_SEC);
        if delay > NSEC_PER_SEC {
            delay = NSEC_PER_SEC;
            self.counters.pkts_too_long += 1;
        }
        if f.time_next_packet != 0 {
            delay -= (delay / 2).min(now.saturating_sub(f.time_next_packet));
        }
        f.time_next_packet = now + delay;
    }

    /// Take flow `i`'s head, whose time has come: mark past `ce_threshold`, count it out.
    fn take_head(&mut self, i: u32, tnp: Nanos, now: Nanos) -> Option<Entry<P>> {
        let f = &mut self.flows[i as usize];
        let mut e = self.pool.pop_front(&mut f.q)?;
        if f.q.is_empty() {
            self.inactive_flows += 1;
        }
        let ce = u64::from(self.spec.ce_threshold_us) * 1000;
        if self.spec.ce_threshold_us != spec::NONE && now > tnp.saturating_add(ce) && e.p.set_ce() {
            self.counters.ce_mark += 1;
        }
        self.band_pkt_count[usize::from(e.band)] -= 1;
        self.sent(&e.p);
        e.p.meta_mut().tstamp = 0;
        Some(e)
    }
}

impl<P: Packet> Qdisc<P> for Fq<P> {
    fn enqueue(&mut self, mut p: P, now: Nanos) -> Verdict {
        self.last_now = now;
        let m = p.meta();
        let band = self.spec.priomap[(m.priority & 15) as usize];
        if self.band_pkt_count[usize::from(band)] >= self.spec.limit {
            self.counters.band_drops[usize::from(band)] += 1;
            return self.drop_arrival(p);
        }
        let Some((t, stamped)) = self.time_to_send(&mut p, now) else {
            return self.drop_arrival(p);
        };
        let m = p.meta();
        let key = if m.socket != 0 {
            u64::from(m.socket) << 1
        } else {
            (u64::from(self.hasher.flow_hash(m) & self.spec.orphan_mask) << 1) | 1
        };
        let len = u64::from(m.len);
        p.meta_mut().enqueue_ns = now;
        let entry = Entry {
            p,
            time_to_send: t,
            band,
            stamped,
        };
        if self.fastpath(t, now) {
            self.counters.fastpath_packets += 1;
            self.pool.push_back(&mut self.internal, entry);
        } else {
            let i = self.classify(key, now);
            let f = &mut self.flows[i as usize];
            if f.q.len() >= self.spec.flow_limit as usize {
                self.counters.flows_plimit += 1;
                return self.drop_arrival(entry.p);
            }
            if f.detached {
                f.detached = false;
                let refill = u64::from(self.spec.refill_delay_us) * 1000;
                if now > f.age + refill {
                    f.credit = f.credit.max(i64::from(self.spec.quantum));
                }
                // The flow joins the new list of the band it was last in (`fq_flow_add_tail`
                // runs before `f->band = band`), as the kernel does.
                self.lists.push_back(Self::list(f.band, NEW), i);
            }
            f.band = band;
            if f.q.is_empty() {
                self.inactive_flows -= 1;
            }
            self.band_pkt_count[usize::from(band)] += 1;
            self.pool.push_back(&mut f.q, entry);
        }
        self.qlen += 1;
        self.backlog += len;
        Verdict::Queued
    }

    fn dequeue(&mut self, now: Nanos) -> Dequeue<P> {
        self.last_now = now;
        if self.qlen == 0 {
            return Dequeue::Empty;
        }
        if let Some(mut e) = self.pool.pop_front(&mut self.internal) {
            self.sent(&e.p);
            e.p.meta_mut().tstamp = 0;
            return Dequeue::Packet(e.p);
        }
        self.check_throttled(now);
        let mut retry = 0;
        loop {
            let b = self.band_nr;
            let Some(l) = self.head(b) else {
                retry += 1;
                if retry <= BANDS {
                    self.band_nr = (self.band_nr + 1) % BANDS;
                    let (nb, q) = (self.band_nr, i64::from(self.spec.weights[self.band_nr]));
                    self.band_credit[nb] = (self.band_credit[nb] + q).min(q);
                    continue;
                }
                return match self.time_next_delayed_flow {
                    Nanos::MAX => Dequeue::Empty,
                    t => Dequeue::NotBefore(t),
                };
            };
            retry = 0;
            let Some(i) = self.lists.front(l) else {
                continue;
            };
            let f = self.flows[i as usize];
            if f.credit <= 0 {
                self.flows[i as usize].credit += i64::from(self.spec.quantum);
                self.lists.move_tail(i, Self::list(f.band, OLD));
                continue;
            }
            let Some(head) = self.pool.front(&f.q) else {
                self.lists.remove(i);
                if l % 2 == NEW {
                    self.lists.push_back(Self::list(f.band, OLD), i);
                } else {
                    let f = &mut self.flows[i as usize];
                    f.detached = true;
                    f.age = now;
                }
                continue;
            };
            let tnp = head.time_to_send.max(f.time_next_packet);
            if now < tnp {
                self.lists.remove(i);
                self.flows[i as usize].time_next_packet = tnp;
                self.set_throttled(i);
                continue;
            }
            let Some(e) = self.take_head(i, tnp, now) else {
                continue;
            };
            let len = e.p.meta().len;
            self.flows[i as usize].credit -= i64::from(len);
            self.band_credit[b] -= i64::from(len);
            self.pace(i, len, e.stamped, now);
            return Dequeue::Packet(e.p);
        }
    }

    fn take_dropped(&mut self) -> Option<Dropped<P>> {
        self.dropped.take()
    }

    fn qlen(&self) -> usize {
        self.qlen
    }

    fn backlog(&self) -> u64 {
        self.backlog
    }

    fn stats(&self) -> QdiscStats {
        let c = self.counters;
        let next = match self.time_next_delayed_flow {
            Nanos::MAX => 0,
            t => (t + u64::from(self.spec.timer_slack_ns)) as i64 - self.last_now as i64,
        };
        QdiscStats {
            kind: "fq".into(),
            options: self.spec.tc_options(),
            bytes: self.sent_bytes,
            packets: self.sent_pkts,
            drops: self.drops,
            overlimits: 0,
            requeues: 0,
            backlog: self.backlog,
            qlen: self.qlen as u64,
            xstats: Xstats::Fq(Box::new(FqXstats {
                flows: self.flow_count(),
                inactive_flows: self.inactive_flows,
                throttled_flows: self.throttled_flows,
                next_packet_delay_ns: next,
                gc_flows: c.gc_flows,
                throttled: c.throttled,
                unthrottle_latency_ns: self.unthrottle_latency_ns.min(u64::from(u32::MAX)),
                ce_mark: c.ce_mark,
                flows_plimit: c.flows_plimit,
                pkts_too_long: c.pkts_too_long,
                horizon_drops: c.horizon_drops,
                horizon_caps: c.horizon_caps,
                fastpath_packets: c.fastpath_packets,
                band_drops: c.band_drops,
                band_pkt_count: self.band_pkt_count,
            })),
        }
    }

    fn drain(&mut self, out: &mut dyn FnMut(P)) {
        while let Some(e) = self.pool.pop_front(&mut self.internal) {
            self.qlen -= 1;
            self.backlog -= u64::from(e.p.meta().len);
            out(e.p);
        }
        let active: Vec<usize> = (0..self.flows.len())
            .filter(|&i| !self.flows[i].q.is_empty())
            .collect();
        let (pool, flows) = (&mut self.pool, &mut self.flows);
        let (mut qlen, mut backlog) = (self.qlen, self.backlog);
        drain_in_turn(
            active,
            |i| {
                let e = pool.pop_front(&mut flows[i].q)?;
                qlen -= 1;
                backlog -= u64::from(e.p.meta().len);
                Some(e.p)
            },
            out,
        );
        self.qlen = qlen;
        self.backlog = backlog;
        self.band_pkt_count = [0; BANDS];
        for f in self.flows.iter_mut() {
            if !f.detached {
                f.detached = true;
                f.age = self.last_now;
            }
            f.throttled = false;
        }
        for l in 0..2 * BANDS {
            while let Some(i) = self.lists.front(l) {
                self.lists.remove(i);
            }
        }
        self.delayed.clear();
        self.throttled_flows = 0;
        self.time_next_delayed_flow = Nanos::MAX;
        self.inactive_flows = self.flow_count();
    }
}
