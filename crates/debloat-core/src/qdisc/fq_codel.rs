//! FQ-CoDel (net/sched/sch_fq_codel.c; RFC 8290), as Linux 6.18 runs it.
//!
//! Packets are hashed into `flows` queues (`reciprocal_scale(hash, flows)`). A flow that becomes
//! active joins the tail of `new_flows` with a fresh `quantum` of deficit; DRR++ serves
//! `new_flows` before `old_flows`, so a sparse flow's packet goes out ahead of the bulk
//! backlog. Each flow runs its own CoDel state, but the byte floor compares the **whole
//! qdisc's** backlog with the MTU, as Linux does.
//!
//! On overflow (`limit` packets or `memory_limit` bytes of truesize) the fattest flow — the
//! first with the largest byte backlog — loses packets from its head until `drop_batch` are
//! gone or half its bytes are, and its CoDel `count` grows by the number dropped. The arriving
//! packet is normally not the one dropped (the man page is wrong about that).
//!
//! Linux vs RFC 8290: an empty flow taken from `new_flows` moves to `old_flows` only if
//! `old_flows` is non-empty; otherwise it is deactivated and its next packet re-enters as new.

use crate::flow::{reciprocal_scale, FlowHasher};
use crate::packet::{Nanos, Packet};
use crate::qdisc::codel::{self, CodelQueue};
use crate::qdisc::list::ListSet;
use crate::qdisc::pktq::{Fifo, Pool};
pub mod spec;

use crate::qdisc::stats::{QdiscStats, Xstats};
use crate::qdisc::{Dequeue, DropBox, DropReason, Dropped, Qdisc, Verdict};
pub use spec::FqCodelSpec;

const NEW: usize = 0;
const OLD: usize = 1;

#[derive(Debug)]
struct Flow {
    q: Fifo,
    deficit: i32,
    cvars: codel::Vars,
}

/// The `fq_codel` qdisc.
#[derive(Debug)]
pub struct FqCodel<P> {
    spec: FqCodelSpec,
    cparams: codel::Params,
    hasher: FlowHasher,
    flows: Vec<Flow>,
    backlogs: Vec<u32>,
    lists: ListSet<2>,
    core: Core<P>,
    cstats: codel::Stats,
    drop_overlimit: u32,
    drop_overmemory: u32,
    new_flow_count: u32,
    sent_bytes: u64,
    sent_pkts: u64,
}

/// The counters CoDel's dequeue callbacks touch (Linux passes `sch` as the context).
#[derive(Debug)]
struct Core<P> {
    qlen: usize,
    backlog: u64,
    memory_usage: u64,
    drops: u64,
    dropped: DropBox<P>,
    pool: Pool<P>,
}

/// One flow's queue plus the qdisc counters, as `codel_dequeue` sees them.
struct FlowView<'a, P> {
    q: &'a mut Fifo,
    flow_backlog: &'a mut u32,
    core: &'a mut Core<P>,
}

impl<P: Packet> CodelQueue<P> for FlowView<'_, P> {
    #[inline]
    fn head(&mut self) -> Option<&mut P> {
        self.core.pool.front_mut(self.q)
    }
    #[inline]
    fn pop(&mut self) -> Option<P> {
        let p = self.core.pool.pop_front(self.q)?;
        let m = p.meta();
        *self.flow_backlog -= m.len;
        self.core.memory_usage -= u64::from(m.truesize);
        self.core.qlen -= 1;
        self.core.backlog -= u64::from(m.len);
        Some(p)
    }
    fn backlog(&self) -> u32 {
        self.core.backlog.min(u64::from(u32::MAX)) as u32
    }
    fn drop_packet(&mut self, packet: P) {
        self.core.drops += 1;
        self.core.dropped.push(packet, DropReason::Aqm);
    }
}

impl<P: Packet> FqCodel<P> {
    /// An fq_codel qdisc from a parsed spec, hashing flows with `hasher`.
    pub fn new(spec: &FqCodelSpec, hasher: FlowHasher) -> Self {
        let n = spec.flows as usize;
        FqCodel {
            spec: spec.clone(),
            cparams: spec.codel_params(),
            hasher,
            flows: (0..n)
                .map(|_| Flow {
                    q: Fifo::default(),
                    deficit: 0,
                    cvars: codel::Vars::default(),
                })
                .collect(),
            backlogs: vec![0; n],
            lists: ListSet::new(n),
            core: Core {
                qlen: 0,
                backlog: 0,
                memory_usage: 0,
                drops: 0,
                dropped: DropBox::default(),
                pool: Pool::with_capacity(spec.limit.min(16384) as usize),
            },
            cstats: codel::Stats::default(),
            drop_overlimit: 0,
            drop_overmemory: 0,
            new_flow_count: 0,
            sent_bytes: 0,
            sent_pkts: 0,
        }
    }

    /// Which flow queue a packet maps to.
    pub fn classify(&self, p: &P) -> u32 {
        reciprocal_scale(self.hasher.flow_hash(p.meta()), self.spec.flows)
    }

    /// A flow's current deficit and whether it is on the new (0) or old (1) list.
    pub fn flow_state(&self, idx: u32) -> (i32, Option<usize>) {
        (self.flows[idx as usize].deficit, self.lists.list_of(idx))
    }

    /// A flow's queue length in packets.
    pub fn flow_len(&self, idx: u32) -> usize {
        self.flows[idx as usize].q.len()
    }

    /// A flow's CoDel state.
    pub fn flow_vars(&self, idx: u32) -> &codel::Vars {
        &self.flows[idx as usize].cvars
    }

    /// Linux `fq_codel_drop`: head-drop a batch from the fattest flow; returns its index.
    fn drop_fattest(&mut self, reason: DropReason) -> u32 {
        let mut maxbacklog = 0;
        let mut idx = 0;
        for (i, &b) in self.backlogs.iter().enumerate() {
            if b > maxbacklog {
                maxbacklog = b;
                idx = i;
            }
        }
        let threshold = maxbacklog >> 1;
        let flow = &mut self.flows[idx];
        let (mut len, mut mem, mut i) = (0u32, 0u64, 0u32);
        while let Some(p) = self.core.pool.pop_front(&mut flow.q) {
            len += p.meta().len;
            mem += u64::from(p.meta().truesize);
            self.core.dropped.push(p, reason);
            i += 1;
            if i >= self.spec.drop_batch || len >= threshold {
                break;
            }
        }
        flow.cvars.count = flow.cvars.count.wrapping_add(i);
        self.backlogs[idx] -= len;
        self.core.memory_usage -= mem;
        self.core.drops += u64::from(i);
        self.core.backlog -= u64::from(len);
        self.core.qlen -= i as usize;
        idx as u32
    }
}

impl<P: Packet> Qdisc<P> for FqCodel<P> {
    fn drain(&mut self, out: &mut dyn FnMut(P)) {
        let active: Vec<usize> = (0..self.flows.len())
            .filter(|&i| !self.flows[i].q.is_empty())
            .collect();
        let (flows, core) = (&mut self.flows, &mut self.core);
        crate::qdisc::drain_in_turn(active, |i| core.pool.pop_front(&mut flows[i].q), out);
        self.backlogs.iter_mut().for_each(|b| *b = 0);
        (self.core.qlen, self.core.backlog, self.core.memory_usage) = (0, 0, 0);
    }
    fn enqueue(&mut self, mut packet: P, now: Nanos) -> Verdict {
        let idx = self.classify(&packet);
        let m = packet.meta_mut();
        m.enqueue_ns = now;
        let (len, truesize) = (m.len, m.truesize);
        let flow = &mut self.flows[idx as usize];
        self.core.pool.push_back(&mut flow.q, packet);
        self.backlogs[idx as usize] += len;
        self.core.backlog += u64::from(len);
        if self.lists.list_of(idx).is_none() {
            self.lists.push_back(NEW, idx);
            flow.deficit = self.spec.quantum as i32;
            self.new_flow_count += 1;
        }
        self.core.memory_usage += u64::from(truesize);
        let memory_limited = self.core.memory_usage > u64::from(self.spec.memory_limit);
        self.core.qlen += 1;
        if self.core.qlen <= self.spec.limit as usize && !memory_limited {
            return Verdict::Queued;
        }
        let prev_qlen = self.core.qlen;
        let reason = if memory_limited {
            DropReason::Overmemory
        } else {
            DropReason::Overlimit
        };
        let fat = self.drop_fattest(reason);
        let dropped = (prev_qlen - self.core.qlen) as u32;
        self.drop_overlimit += dropped;
        if memory_limited {
            self.drop_overmemory += dropped;
        }
        if fat == idx {
            // The arriving packet is the fattest flow's tail, so it survives unless the
            // batch emptied the flow.
            if self.flows[idx as usize].q.is_empty() {
                return Verdict::Dropped;
            }
            return Verdict::Congested;
        }
        Verdict::Queued
    }

    fn dequeue(&mut self, now: Nanos) -> Dequeue<P> {
        loop {
            let (list, idx) = match self.lists.front(NEW) {
                Some(i) => (NEW, i),
                None => match self.lists.front(OLD) {
                    Some(i) => (OLD, i),
                    None => return Dequeue::Empty,
                },
            };
            let flow = &mut self.flows[idx as usize];
            if flow.deficit <= 0 {
                flow.deficit += self.spec.quantum as i32;
                self.lists.rotate_front(list, OLD);
                continue;
            }
            let mut view = FlowView {
                q: &mut flow.q,
                flow_backlog: &mut self.backlogs[idx as usize],
                core: &mut self.core,
            };
            if codel::dequeue_head(
                &mut view,
                &mut flow.cvars,
                &self.cparams,
                &mut self.cstats,
                now,
            ) {
                if let Some(p) = view.pop() {
                    let len = p.meta().len;
                    flow.deficit -= len as i32;
                    self.sent_bytes += u64::from(len);
                    self.sent_pkts += 1;
                    return Dequeue::Packet(p);
                }
            }
            if list == NEW && !self.lists.is_empty(OLD) {
                self.lists.rotate_front(NEW, OLD);
            } else {
                self.lists.remove(idx);
            }
        }
    }

    fn take_dropped(&mut self) -> Option<Dropped<P>> {
        self.core.dropped.take()
    }

    fn qlen(&self) -> usize {
        self.core.qlen
    }

    fn backlog(&self) -> u64 {
        self.core.backlog
    }

    fn stats(&self) -> QdiscStats {
        QdiscStats {
            kind: "fq_codel".into(),
            options: self.spec.tc_options(),
            bytes: self.sent_bytes,
            packets: self.sent_pkts,
            drops: self.core.drops,
            overlimits: 0,
            requeues: 0,
            backlog: self.core.backlog,
            qlen: self.core.qlen as u64,
            xstats: Xstats::FqCodel {
                maxpacket: self.cstats.maxpacket,
                drop_overlimit: self.drop_overlimit,
                new_flow_count: self.new_flow_count,
                ecn_mark: self.cstats.ecn_mark,
                ce_mark: self.cstats.ce_mark,
                memory_used: self.core.memory_usage,
                drop_overmemory: self.drop_overmemory,
                new_flows_len: self.lists.len(NEW) as u32,
                old_flows_len: self.lists.len(OLD) as u32,
            },
        }
    }
}
