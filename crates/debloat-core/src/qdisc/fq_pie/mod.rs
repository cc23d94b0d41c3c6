//! `fq_pie`: flow queues under PIE (net/sched/sch_fq_pie.c, Linux ≥ 5.6): fq_codel's flow
//! scheduler with a PIE controller per flow instead of CoDel.
//!
//! Packets hash into `flows` queues (`reciprocal_scale(hash, flows)`); a queue that becomes
//! active joins the new-flows list with a quantum of credit, and DRR serves new flows before old
//! ones, as fq_codel does. Each queue has its own PIE state ([`crate::qdisc::pie`]): the early
//! drop test sees that flow's backlog, every `tupdate` updates every flow's probability, and a
//! packet due to drop is CE-marked instead when `ecn` is on, it is ECN-capable and the flow's
//! probability is at most `ecn_prob` percent (default 10). Drops happen at enqueue only: at
//! `limit` packets (default 10240) or early. `memory_limit` (32 MiB) is counted, as the kernel
//! counts it, in `overmemory`, and drops nothing.
//!
//! Where this differs from the kernel: the per-flow updates run lazily, as `pie`'s do (the first
//! half a second after the first packet, then each `tupdate`); Linux updates at most 2048 flows
//! per timer tick and finishes a larger table on the next jiffies, debloat all of them at once.
//! tc's external classifiers (`tc filter`) are not modelled: every packet is hashed.

pub mod spec;

pub use spec::FqPieSpec;

use crate::flow::{reciprocal_scale, FlowHasher};
use crate::packet::{Nanos, Packet};
use crate::qdisc::list::ListSet;
use crate::qdisc::pie::{self, Params, Vars, MAX_PROB};
use crate::qdisc::pktq::{Fifo, Pool};
use crate::qdisc::stats::{QdiscStats, Xstats};
use crate::qdisc::{Dequeue, DropBox, DropReason, Dropped, Qdisc, Verdict};
use crate::rng::SplitMix64;

const NEW: usize = 0;
const OLD: usize = 1;

#[derive(Clone, Copy, Debug)]
struct Flow {
    vars: Vars,
    deficit: i32,
    backlog: u32,
    q: Fifo,
}

/// The counters of `struct tc_fq_pie_xstats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FqPieStats {
    /// Packets queued.
    pub packets_in: u32,
    /// Packets dropped (early or at the limit).
    pub dropped: u32,
    /// Packets dropped at the limit.
    pub overlimit: u32,
    /// Arrivals while over the memory limit (counted, not dropped).
    pub overmemory: u32,
    /// Packets CE-marked.
    pub ecn_mark: u32,
    /// Flows that became active.
    pub new_flow_count: u32,
}

/// The `fq_pie` qdisc.
#[derive(Debug)]
pub struct FqPie<P> {
    spec: FqPieSpec,
    params: Params,
    hasher: FlowHasher,
    flows: Vec<Flow>,
    lists: ListSet<2>,
    pool: Pool<P>,
    updates: pie::Updates,
    rng: SplitMix64,
    stats: FqPieStats,
    qlen: usize,
    backlog: u64,
    memory_usage: u64,
    dropped: DropBox<P>,
    sent_bytes: u64,
    sent_pkts: u64,
}

impl<P: Packet> FqPie<P> {
    /// An fq_pie from a parsed spec, hashing flows with `hasher`; `seed` drives the drop test.
    pub fn new(spec: &FqPieSpec, hasher: FlowHasher, seed: u64) -> Self {
        let n = spec.flows as usize;
        FqPie {
            spec: spec.clone(),
            params: spec.pie.params(),
            hasher,
            flows: vec![
                Flow {
                    vars: Vars::default(),
                    deficit: 0,
                    backlog: 0,
                    q: Fifo::default(),
                };
                n
            ],
            lists: ListSet::new(n),
            pool: Pool::with_capacity(spec.pie.limit.min(4096) as usize),
            updates: pie::Updates::default(),
            rng: SplitMix64::new(seed),
            stats: FqPieStats::default(),
            qlen: 0,
            backlog: 0,
            memory_usage: 0,
            dropped: DropBox::default(),
            sent_bytes: 0,
            sent_pkts: 0,
        }
    }

    /// The counters.
    pub fn fq_pie_stats(&self) -> FqPieStats {
        self.stats
    }

    /// The PIE state of the flow a packet hashes to.
    pub fn flow_vars(&self, p: &P) -> &Vars {
        &self.flows[self.classify(p) as usize].vars
    }

    fn classify(&self, p: &P) -> u32 {
        reciprocal_scale(self.hasher.flow_hash(p.meta()), self.spec.flows)
    }

    /// Every flow's update due by `now` (see [`pie::Updates`]).
    fn catch_up(&mut self, now: Nanos) {
        let (p, flows) = (&self.params, &mut self.flows);
        self.updates.catch_up_with(p.tupdate_ns, now, || {
            let mut changed = false;
            for f in flows.iter_mut() {
                let before = f.vars;
                pie::update(p, &mut f.vars, u64::from(f.backlog));
                changed |= f.vars != before;
            }
            changed
        });
    }

    fn drop(&mut self, idx: usize, packet: P, reason: DropReason) -> Verdict {
        self.stats.dropped += 1;
        self.flows[idx].vars.accu_prob = 0;
        self.dropped.push(packet, reason);
        Verdict::Dropped
    }
}

impl<P: Packet> Qdisc<P> for FqPie<P> {
    fn enqueue(&mut self, mut packet: P, now: Nanos) -> Verdict {
        self.catch_up(now);
        let idx = self.classify(&packet) as usize;
        let truesize = u64::from(packet.meta().truesize);
        if self.qlen >= self.spec.pie.limit as usize {
            self.stats.overlimit += 1;
            return self.drop(idx, packet, DropReason::Overlimit);
        }
        if self.memory_usage > u64::from(self.spec.memory_limit) + truesize {
            self.stats.overmemory += 1;
        }
        let len = packet.meta().len;
        let f = &mut self.flows[idx];
        let early = pie::drop_early(
            &self.params,
            &mut f.vars,
            u64::from(f.backlog),
            len,
            crate::PSCHED_MTU,
            &mut self.rng,
        );
        if early {
            let limit = (MAX_PROB / 100) * u64::from(self.spec.ecn_prob);
            if self.params.ecn && f.vars.prob <= limit && packet.set_ce() {
                self.stats.ecn_mark += 1;
            } else {
                return self.drop(idx, packet, DropReason::Aqm);
            }
        }
        packet.meta_mut().enqueue_ns = now;
        self.stats.packets_in += 1;
        self.memory_usage += truesize;
        self.qlen += 1;
        self.backlog += u64::from(len);
        let f = &mut self.flows[idx];
        self.pool.push_back(&mut f.q, packet);
        if self.lists.list_of(idx as u32).is_none() {
            self.lists.push_back(NEW, idx as u32);
            self.stats.new_flow_count += 1;
            f.deficit = self.spec.quantum as i32;
            f.backlog = 0;
        }
        f.backlog += len;
        Verdict::Queued
    }

    fn dequeue(&mut self, now: Nanos) -> Dequeue<P> {
        self.catch_up(now);
        loop {
            let list = if self.lists.is_empty(NEW) { OLD } else { NEW };
            let Some(i) = self.lists.front(list) else {
                return Dequeue::Empty;
            };
            let f = &mut self.flows[i as usize];
            if f.deficit <= 0 {
                f.deficit += self.spec.quantum as i32;
                self.lists.move_tail(i, OLD);
                continue;
            }
            let Some(p) = self.pool.pop_front(&mut f.q) else {
                // Force a pass through the old flows so new ones cannot starve them.
                if list == NEW && !self.lists.is_empty(OLD) {
                    self.lists.move_tail(i, OLD);
                } else {
                    self.lists.remove(i);
                }
                continue;
            };
            let m = p.meta();
            f.deficit -= m.len as i32;
            f.backlog -= m.len;
            self.qlen -= 1;
            self.backlog -= u64::from(m.len);
            self.memory_usage -= u64::from(m.truesize);
            pie::on_dequeue(
                &self.params,
                &mut f.vars,
                m.len,
                m.enqueue_ns,
                u64::from(f.backlog),
                now,
            );
            self.sent_bytes += u64::from(m.len);
            self.sent_pkts += 1;
            return Dequeue::Packet(p);
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
        let s = self.stats;
        QdiscStats {
            kind: "fq_pie".into(),
            options: self.spec.tc_options(),
            bytes: self.sent_bytes,
            packets: self.sent_pkts,
            drops: u64::from(s.dropped),
            overlimits: 0,
            requeues: 0,
            backlog: self.backlog,
            qlen: self.qlen as u64,
            xstats: Xstats::FqPie {
                packets_in: s.packets_in,
                overlimit: s.overlimit,
                overmemory: s.overmemory,
                dropped: s.dropped,
                ecn_mark: s.ecn_mark,
                new_flow_count: s.new_flow_count,
                new_flows_len: self.lists.len(NEW) as u32,
                old_flows_len: self.lists.len(OLD) as u32,
                memory_used: self.memory_usage.min(u64::from(u32::MAX)) as u32,
            },
        }
    }

    fn drain(&mut self, out: &mut dyn FnMut(P)) {
        let active: Vec<usize> = (0..self.flows.len())
            .filter(|&i| !self.flows[i].q.is_empty())
            .collect();
        let (pool, flows) = (&mut self.pool, &mut self.flows);
        crate::qdisc::drain_in_turn(active, |i| pool.pop_front(&mut flows[i].q), out);
        for f in &mut self.flows {
            f.backlog = 0;
        }
        self.qlen = 0;
        self.backlog = 0;
        self.memory_usage = 0;
    }
}

#[cfg(test)]
mod tests;
