//! `pfifo` and `bfifo`: tail-drop FIFOs (net/sched/sch_fifo.c), the baseline every AQM is
//! compared with. pfifo limits packets (default: the device's txqueuelen, 1000); bfifo limits
//! bytes (default: txqueuelen × MTU = 1,514,000 B). An arriving packet that would exceed the
//! limit is dropped and counted; nothing queued is ever dropped.

pub mod spec;

use crate::packet::{Nanos, Packet};
use crate::qdisc::stats::{QdiscStats, Xstats};
use crate::qdisc::{Dequeue, DropBox, DropReason, Dropped, Qdisc, Verdict};
use std::collections::VecDeque;

/// Which quantity the limit counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// At most this many packets (pfifo).
    Packets(u32),
    /// At most this many bytes (bfifo).
    Bytes(u32),
}

/// A tail-drop FIFO.
#[derive(Debug)]
pub struct Fifo<P> {
    limit: Limit,
    q: VecDeque<P>,
    backlog: u64,
    dropped: DropBox<P>,
    sent_bytes: u64,
    sent_pkts: u64,
    drops: u64,
}

impl<P: Packet> Fifo<P> {
    /// A FIFO with the given limit.
    pub fn new(limit: Limit) -> Self {
        let cap = match limit {
            Limit::Packets(n) => n.min(4096) as usize,
            Limit::Bytes(b) => (b / 1514).min(4096) as usize,
        };
        Fifo {
            limit,
            q: VecDeque::with_capacity(cap),
            backlog: 0,
            dropped: DropBox::default(),
            sent_bytes: 0,
            sent_pkts: 0,
            drops: 0,
        }
    }

    fn fits(&self, len: u32) -> bool {
        match self.limit {
            Limit::Packets(n) => self.q.len() < n as usize,
            Limit::Bytes(b) => self.backlog + u64::from(len) <= u64::from(b),
        }
    }
}

impl<P: Packet> Qdisc<P> for Fifo<P> {
    fn drain(&mut self, out: &mut dyn FnMut(P)) {
        self.backlog = 0;
        self.q.drain(..).for_each(out);
    }
    fn enqueue(&mut self, mut packet: P, now: Nanos) -> Verdict {
        let len = packet.meta().len;
        if !self.fits(len) {
            self.drops += 1;
            self.dropped.push(packet, DropReason::Overlimit);
            return Verdict::Dropped;
        }
        packet.meta_mut().enqueue_ns = now;
        self.backlog += u64::from(len);
        self.q.push_back(packet);
        Verdict::Queued
    }

    fn dequeue(&mut self, _now: Nanos) -> Dequeue<P> {
        match self.q.pop_front() {
            Some(p) => {
                let len = u64::from(p.meta().len);
                self.backlog -= len;
                self.sent_bytes += len;
                self.sent_pkts += 1;
                Dequeue::Packet(p)
            }
            None => Dequeue::Empty,
        }
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
        let (kind, options) = match self.limit {
            Limit::Packets(n) => ("pfifo", format!("limit {n}p")),
            Limit::Bytes(b) => (
                "bfifo",
                format!("limit {}", crate::units::fmt_size(u64::from(b))),
            ),
        };
        QdiscStats {
            kind: kind.into(),
            options,
            bytes: self.sent_bytes,
            packets: self.sent_pkts,
            drops: self.drops,
            overlimits: 0,
            requeues: 0,
            backlog: self.backlog,
            qlen: self.q.len() as u64,
            xstats: Xstats::None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::pkt;

    #[test]
    fn pfifo_tail_drops_the_arrival_at_limit() {
        let mut q = Fifo::new(Limit::Packets(2));
        assert_eq!(q.enqueue(pkt(1, 1000), 0), Verdict::Queued);
        assert_eq!(q.enqueue(pkt(2, 1000), 0), Verdict::Queued);
        assert_eq!(q.enqueue(pkt(3, 1000), 0), Verdict::Dropped);
        let d = q.take_dropped().expect("one drop");
        assert_eq!((d.packet.id, d.reason), (3, DropReason::Overlimit));
        assert_eq!(q.dequeue(0).packet().map(|p| p.id), Some(1));
    }

    #[test]
    fn bfifo_counts_bytes() {
        let mut q = Fifo::new(Limit::Bytes(2500));
        assert_eq!(q.enqueue(pkt(1, 1500), 0), Verdict::Queued);
        assert_eq!(q.enqueue(pkt(2, 1500), 0), Verdict::Dropped);
        assert_eq!(q.enqueue(pkt(3, 1000), 0), Verdict::Queued);
        assert_eq!(q.backlog(), 2500);
    }
}
