//! `pie`: one FIFO under the PIE controller (net/sched/sch_pie.c).
//!
//! Tail-drops at `limit` packets (counted in `overlimit`); every other arriving packet meets
//! [`super::drop_early`], and is dropped (`dropped`) or, with `ecn` while the probability is at
//! most 10 % and the packet is ECN-capable, CE-marked (`ecn_mark`) and queued. `dropped`
//! counts both kinds of drop, as the kernel's does.

use super::spec::PieSpec;
use super::{drop_early, on_dequeue, ticks_to_ns, Params, Updates, Vars, MAX_PROB};
use crate::packet::{Nanos, Packet};
use crate::qdisc::stats::{QdiscStats, Xstats};
use crate::qdisc::{Dequeue, DropBox, DropReason, Dropped, Qdisc, Verdict};
use crate::rng::SplitMix64;
use std::collections::VecDeque;

/// `struct pie_stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PieStats {
    /// Packets queued.
    pub packets_in: u32,
    /// Packets dropped, early or at the limit.
    pub dropped: u32,
    /// Packets dropped at the limit.
    pub overlimit: u32,
    /// Packets CE-marked instead of dropped.
    pub ecn_mark: u32,
    /// The longest queue an arriving packet found, packets.
    pub maxq: u32,
}

/// The `pie` qdisc.
#[derive(Debug)]
pub struct Pie<P> {
    spec: PieSpec,
    params: Params,
    pub(super) vars: Vars,
    pub(super) updates: Updates,
    stats: PieStats,
    rng: SplitMix64,
    q: VecDeque<P>,
    backlog: u64,
    dropped: DropBox<P>,
    sent_bytes: u64,
    sent_pkts: u64,
}

impl<P: Packet> Pie<P> {
    /// A pie qdisc from a parsed spec; `seed` drives the drop test's randomness.
    pub fn new(spec: &PieSpec, seed: u64) -> Self {
        Pie {
            spec: spec.clone(),
            params: spec.params(),
            vars: Vars::default(),
            updates: Updates::default(),
            stats: PieStats::default(),
            rng: SplitMix64::new(seed),
            q: VecDeque::with_capacity(spec.limit.min(4096) as usize),
            backlog: 0,
            dropped: DropBox::default(),
            sent_bytes: 0,
            sent_pkts: 0,
        }
    }

    /// The controller's state, for tests and statistics.
    pub fn vars(&self) -> &Vars {
        &self.vars
    }

    /// The counters.
    pub fn pie_stats(&self) -> PieStats {
        self.stats
    }

    fn drop(&mut self, packet: P, reason: DropReason) -> Verdict {
        self.stats.dropped += 1;
        self.vars.accu_prob = 0;
        self.dropped.push(packet, reason);
        Verdict::Dropped
    }
}

impl<P: Packet> Qdisc<P> for Pie<P> {
    fn enqueue(&mut self, mut packet: P, now: Nanos) -> Verdict {
        self.updates
            .catch_up(&self.params, &mut self.vars, self.backlog, now);
        if self.q.len() >= self.params.limit as usize {
            self.stats.overlimit += 1;
            return self.drop(packet, DropReason::Overlimit);
        }
        let len = packet.meta().len;
        let early = drop_early(
            &self.params,
            &mut self.vars,
            self.backlog,
            len,
            crate::PSCHED_MTU,
            &mut self.rng,
        );
        if early {
            if self.params.ecn && self.vars.prob <= MAX_PROB / 10 && packet.set_ce() {
                self.stats.ecn_mark += 1;
            } else {
                return self.drop(packet, DropReason::Aqm);
            }
        }
        packet.meta_mut().enqueue_ns = now;
        self.stats.packets_in += 1;
        self.stats.maxq = self.stats.maxq.max(self.q.len() as u32);
        self.backlog += u64::from(len);
        self.q.push_back(packet);
        Verdict::Queued
    }

    fn dequeue(&mut self, now: Nanos) -> Dequeue<P> {
        self.updates
            .catch_up(&self.params, &mut self.vars, self.backlog, now);
        let Some(p) = self.q.pop_front() else {
            return Dequeue::Empty;
        };
        let m = p.meta();
        self.backlog -= u64::from(m.len);
        on_dequeue(
            &self.params,
            &mut self.vars,
            m.len,
            m.enqueue_ns,
            self.backlog,
            now,
        );
        self.sent_bytes += u64::from(m.len);
        self.sent_pkts += 1;
        Dequeue::Packet(p)
    }

    fn take_dropped(&mut self) -> Option<Dropped<P>> {
        self.dropped.take()
    }

    fn qlen(&self) -> usize {
        self.q.len()
    }

    fn backlog(&self) -> u64 {
        self.backlog
    }

    fn stats(&self) -> QdiscStats {
        let v = &self.vars;
        QdiscStats {
            kind: "pie".into(),
            options: self.spec.tc_options(),
            bytes: self.sent_bytes,
            packets: self.sent_pkts,
            drops: u64::from(self.stats.dropped),
            overlimits: 0,
            requeues: 0,
            backlog: self.backlog,
            qlen: self.q.len() as u64,
            xstats: Xstats::Pie {
                prob: v.prob << 8,
                delay_us: u64::from(ticks_to_ns(v.qdelay) as u32) / 1000,
                avg_dq_rate: self
                    .params
                    .dq_rate_estimator
                    .then(|| v.avg_dq_rate_bytes() as u32),
                packets_in: self.stats.packets_in,
                overlimit: self.stats.overlimit,
                dropped: self.stats.dropped,
                maxq: self.stats.maxq,
                ecn_mark: self.stats.ecn_mark,
            },
        }
    }

    fn drain(&mut self, out: &mut dyn FnMut(P)) {
        self.backlog = 0;
        self.q.drain(..).for_each(out);
    }
}
