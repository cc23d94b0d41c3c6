//! `codel`: a single FIFO under CoDel (net/sched/sch_codel.c).
//!
//! Tail-drops at `limit` packets (counted in `drop_overlimit`); CoDel runs at dequeue with the
//! qdisc's byte backlog as the floor. ECN is off by default, as in sch_codel.

use super::spec::CodelSpec;
use super::{codel_time_to_ns, CodelQueue, Params, Stats, Vars};
use crate::packet::{Nanos, Packet};
use crate::qdisc::stats::{QdiscStats, Xstats};
use crate::qdisc::{Dequeue, DropBox, DropReason, Dropped, Qdisc, Verdict};
use std::collections::VecDeque;

/// The `codel` qdisc.
#[derive(Debug)]
pub struct Codel<P> {
    spec: CodelSpec,
    params: Params,
    vars: Vars,
    cstats: Stats,
    fifo: Fifo<P>,
    drop_overlimit: u32,
    sent_bytes: u64,
    sent_pkts: u64,
    drops: u64,
    /// The latest `now` seen, so statistics can show `drop_next` relative to it as tc does.
    last_now: Nanos,
}

#[derive(Debug)]
struct Fifo<P> {
    q: VecDeque<P>,
    backlog: u64,
    dropped: DropBox<P>,
}

impl<P: Packet> CodelQueue<P> for Fifo<P> {
    fn head(&mut self) -> Option<&mut P> {
        self.q.front_mut()
    }
    fn pop(&mut self) -> Option<P> {
        let p = self.q.pop_front()?;
        self.backlog -= u64::from(p.meta().len);
        Some(p)
    }
    fn backlog(&self) -> u32 {
        self.backlog.min(u64::from(u32::MAX)) as u32
    }
    fn drop_packet(&mut self, packet: P) {
        self.dropped.push(packet, DropReason::Aqm);
    }
}

impl<P: Packet> Codel<P> {
    /// A codel qdisc from a parsed spec.
    pub fn new(spec: &CodelSpec) -> Self {
        Codel {
            spec: spec.clone(),
            params: spec.params(),
            vars: Vars::default(),
            cstats: Stats::default(),
            fifo: Fifo {
                q: VecDeque::with_capacity(spec.limit.min(4096) as usize),
                backlog: 0,
                dropped: DropBox::default(),
            },
            drop_overlimit: 0,
            sent_bytes: 0,
            sent_pkts: 0,
            drops: 0,
            last_now: 0,
        }
    }

    /// CoDel state, for tests and statistics.
    pub fn vars(&self) -> &Vars {
        &self.vars
    }
}

impl<P: Packet> Qdisc<P> for Codel<P> {
    fn drain(&mut self, out: &mut dyn FnMut(P)) {
        self.fifo.backlog = 0;
        self.fifo.q.drain(..).for_each(out);
    }
    fn enqueue(&mut self, mut packet: P, now: Nanos) -> Verdict {
        self.last_now = now;
        if self.fifo.q.len() < self.spec.limit as usize {
            let m = packet.meta_mut();
            m.enqueue_ns = now;
            self.fifo.backlog += u64::from(m.len);
            self.fifo.q.push_back(packet);
            Verdict::Queued
        } else {
            self.drop_overlimit += 1;
            self.drops += 1;
            self.fifo.dropped.push(packet, DropReason::Overlimit);
            Verdict::Dropped
        }
    }

    fn dequeue(&mut self, now: Nanos) -> Dequeue<P> {
        self.last_now = now;
        let before = self.cstats.drop_count;
        let p = super::dequeue(
            &mut self.fifo,
            &mut self.vars,
            &self.params,
            &mut self.cstats,
            now,
        );
        self.drops += u64::from(self.cstats.drop_count - before);
        match p {
            Some(p) => {
                self.sent_bytes += u64::from(p.meta().len);
                self.sent_pkts += 1;
                Dequeue::Packet(p)
            }
            None => Dequeue::Empty,
        }
    }

    fn take_dropped(&mut self) -> Option<Dropped<P>> {
        self.fifo.dropped.take()
    }

    fn qlen(&self) -> usize {
        self.fifo.q.len()
    }

    fn backlog(&self) -> u64 {
        self.fifo.backlog
    }

    fn stats(&self) -> QdiscStats {
        let v = &self.vars;
        QdiscStats {
            kind: "codel".into(),
            options: self.spec.tc_options(),
            bytes: self.sent_bytes,
            packets: self.sent_pkts,
            drops: self.drops,
            overlimits: 0,
            requeues: 0,
            backlog: self.fifo.backlog,
            qlen: self.fifo.q.len() as u64,
            xstats: Xstats::Codel {
                count: v.count,
                lastcount: v.lastcount,
                ldelay_us: codel_time_to_ns(v.ldelay) / 1000,
                dropping: v.dropping,
                drop_next_us: if v.dropping {
                    let rel = v.drop_next.wrapping_sub(super::codel_time(self.last_now)) as i32;
                    (i64::from(rel) << 10) / 1000
                } else {
                    0
                },
                maxpacket: self.cstats.maxpacket,
                ecn_mark: self.cstats.ecn_mark,
                ce_mark: self.cstats.ce_mark,
                drop_overlimit: self.drop_overlimit,
            },
        }
    }
}
