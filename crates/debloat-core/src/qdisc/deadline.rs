//! `deadline T`: a FIFO that discards (or, with `ecn`, CE-marks) every packet whose sojourn has
//! exceeded `T` by the time it reaches the head — the "hammer" baseline that bounds delay with no
//! control law at all. Not a Linux qdisc; it exists so experiments can show what CoDel's gentler
//! signal buys over a hard delay cap. Tail-drops at `limit` packets (default 1000).

use crate::packet::{Nanos, Packet};
pub mod spec;

use crate::qdisc::stats::{QdiscStats, Xstats};
use crate::qdisc::{Dequeue, DropBox, DropReason, Dropped, Qdisc, Verdict};
pub use spec::DeadlineSpec;
use std::collections::VecDeque;

/// The `deadline` qdisc.
#[derive(Debug)]
pub struct Deadline<P> {
    spec: DeadlineSpec,
    q: VecDeque<P>,
    backlog: u64,
    dropped: DropBox<P>,
    sent_bytes: u64,
    sent_pkts: u64,
    drops: u64,
    deadline_drops: u32,
    marks: u32,
    drop_overlimit: u32,
}

impl<P: Packet> Deadline<P> {
    /// A deadline qdisc from a parsed spec.
    pub fn new(spec: &DeadlineSpec) -> Self {
        Deadline {
            spec: spec.clone(),
            q: VecDeque::with_capacity(spec.limit.min(4096) as usize),
            backlog: 0,
            dropped: DropBox::default(),
            sent_bytes: 0,
            sent_pkts: 0,
            drops: 0,
            deadline_drops: 0,
            marks: 0,
            drop_overlimit: 0,
        }
    }
}

impl<P: Packet> Qdisc<P> for Deadline<P> {
    fn drain(&mut self, out: &mut dyn FnMut(P)) {
        self.backlog = 0;
        self.q.drain(..).for_each(out);
    }
    fn enqueue(&mut self, mut packet: P, now: Nanos) -> Verdict {
        if self.q.len() >= self.spec.limit as usize {
            self.drops += 1;
            self.drop_overlimit += 1;
            self.dropped.push(packet, DropReason::Overlimit);
            return Verdict::Dropped;
        }
        packet.meta_mut().enqueue_ns = now;
        self.backlog += u64::from(packet.meta().len);
        self.q.push_back(packet);
        Verdict::Queued
    }

    fn dequeue(&mut self, now: Nanos) -> Dequeue<P> {
        while let Some(mut p) = self.q.pop_front() {
            let len = u64::from(p.meta().len);
            self.backlog -= len;
            let sojourn = now.saturating_sub(p.meta().enqueue_ns);
            if sojourn > self.spec.deadline_ns {
                if self.spec.ecn && p.set_ce() {
                    self.marks += 1;
                } else {
                    self.drops += 1;
                    self.deadline_drops += 1;
                    self.dropped.push(p, DropReason::Deadline);
                    continue;
                }
            }
            self.sent_bytes += len;
            self.sent_pkts += 1;
            return Dequeue::Packet(p);
        }
        Dequeue::Empty
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
        QdiscStats {
            kind: "deadline".into(),
            options: self.spec.to_string(),
            bytes: self.sent_bytes,
            packets: self.sent_pkts,
            drops: self.drops,
            overlimits: 0,
            requeues: 0,
            backlog: self.backlog,
            qlen: self.q.len() as u64,
            xstats: Xstats::Deadline {
                deadline_drops: self.deadline_drops,
                ecn_mark: self.marks,
                drop_overlimit: self.drop_overlimit,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{ect, pkt};

    fn spec(ms: u64, ecn: bool) -> DeadlineSpec {
        DeadlineSpec {
            deadline_ns: ms * 1_000_000,
            limit: 1000,
            ecn,
        }
    }

    #[test]
    fn drops_packets_older_than_the_deadline_and_keeps_younger() {
        let mut q = Deadline::new(&spec(10, false));
        q.enqueue(pkt(1, 100), 0);
        q.enqueue(pkt(2, 100), 5_000_000);
        // At 12 ms packet 1 has waited 12 ms (> 10): dropped; packet 2 waited 7 ms: sent.
        assert_eq!(q.dequeue(12_000_000).packet().map(|p| p.id), Some(2));
        let d = q.take_dropped().expect("dropped");
        assert_eq!((d.packet.id, d.reason), (1, DropReason::Deadline));
    }

    #[test]
    fn marks_instead_with_ecn() {
        let mut q = Deadline::new(&spec(10, true));
        q.enqueue(ect(pkt(1, 100)), 0);
        let p = q.dequeue(11_000_000).packet().expect("marked, not dropped");
        assert_eq!(p.meta.ecn, crate::packet::Ecn::Ce);
        assert!(q.take_dropped().is_none());
    }
}
