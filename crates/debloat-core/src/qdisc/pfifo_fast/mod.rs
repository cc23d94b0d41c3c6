//! `pfifo_fast`: three FIFO bands served in strict priority (net/sched/sch_generic.c), the
//! default of every Linux interface before fq_codel and the "before" of the published
//! `codel_vs_pfifo_fast` runs.
//!
//! The band is the priomap's `1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1` at the packet's priority
//! (`skb->priority`, [`crate::packet::PacketMeta::priority`]). Where that comes from is the
//! kernel path's business, not the qdisc's: a host's own packets carry their socket's priority,
//! which `IP_TOS` sets to `rt_tos2priority` of the TOS ([`tos_priority`]: the old TOS bits, not
//! the DSCP — 0x10 "low delay" is band 0, 0x08 "throughput" band 2, EF and CS1 alike band 1);
//! `ip_forward` gives a routed IPv4 packet the same; a bridged frame, and any packet that
//! crossed a veth (`dev_forward_skb` clears it), has priority 0, band 1. So on a bridge, and in
//! debloat's gateway, which forwards frames as one, pfifo_fast is one FIFO; the simulator's
//! hosts set their packets' priority from their TOS, as Linux senders and routers do. Since
//! Linux 4.16 each band is a ring of `txqueuelen` packets of its own, so a full band drops its
//! arrivals while the others still take theirs (up to 3 × txqueuelen in all). There is no AQM
//! and no statistics beyond the counters.

pub mod spec;

pub use spec::PfifoFastSpec;

use crate::packet::{Nanos, Packet};
use crate::qdisc::stats::{QdiscStats, Xstats};
use crate::qdisc::{drain_in_turn, Dequeue, DropBox, DropReason, Dropped, Qdisc, Verdict};
use std::collections::VecDeque;

/// The priomap: band of each priority 0–15 (`sch_generic.c`'s `prio2band`).
pub const PRIO2BAND: [u8; 16] = [1, 2, 2, 2, 1, 2, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1];

/// `ip_tos2prio`: the priority of each value of the TOS byte's bits 1–4.
const TOS2PRIO: [u8; 16] = [0, 0, 0, 0, 2, 2, 2, 2, 6, 6, 6, 6, 4, 4, 4, 4];

/// `rt_tos2priority`: the priority `IP_TOS` gives a socket and `ip_forward` a routed IPv4
/// packet, from its DSCP (the ECN bits do not change it).
pub fn tos_priority(dscp: u8) -> u32 {
    let tos = dscp << 2;
    u32::from(TOS2PRIO[usize::from((tos & 0x1e) >> 1)])
}

/// The band a packet goes to.
pub fn band_of(meta: &crate::packet::PacketMeta) -> usize {
    usize::from(PRIO2BAND[(meta.priority & 15) as usize])
}

/// The `pfifo_fast` qdisc.
#[derive(Debug)]
pub struct PfifoFast<P> {
    spec: PfifoFastSpec,
    bands: [VecDeque<P>; 3],
    backlog: u64,
    dropped: DropBox<P>,
    sent_bytes: u64,
    sent_pkts: u64,
    drops: u64,
}

impl<P: Packet> PfifoFast<P> {
    /// A pfifo_fast from a parsed spec.
    pub fn new(spec: &PfifoFastSpec) -> Self {
        let cap = spec.txqueuelen.min(4096) as usize;
        PfifoFast {
            spec: spec.clone(),
            bands: std::array::from_fn(|_| VecDeque::with_capacity(cap)),
            backlog: 0,
            dropped: DropBox::default(),
            sent_bytes: 0,
            sent_pkts: 0,
            drops: 0,
        }
    }

    /// Packets queued in each band.
    pub fn band_lens(&self) -> [usize; 3] {
        [0, 1, 2].map(|b| self.bands[b].len())
    }
}

impl<P: Packet> Qdisc<P> for PfifoFast<P> {
    fn enqueue(&mut self, mut packet: P, now: Nanos) -> Verdict {
        let b = band_of(packet.meta());
        if self.bands[b].len() >= self.spec.txqueuelen as usize {
            self.drops += 1;
            self.dropped.push(packet, DropReason::Overlimit);
            return Verdict::Dropped;
        }
        let m = packet.meta_mut();
        m.enqueue_ns = now;
        self.backlog += u64::from(m.len);
        self.bands[b].push_back(packet);
        Verdict::Queued
    }

    fn dequeue(&mut self, _now: Nanos) -> Dequeue<P> {
        let Some(p) = self.bands.iter_mut().find_map(VecDeque::pop_front) else {
            return Dequeue::Empty;
        };
        let len = u64::from(p.meta().len);
        self.backlog -= len;
        self.sent_bytes += len;
        self.sent_pkts += 1;
        Dequeue::Packet(p)
    }

    fn take_dropped(&mut self) -> Option<Dropped<P>> {
        self.dropped.take()
    }

    fn qlen(&self) -> usize {
        self.bands.iter().map(VecDeque::len).sum()
    }

    fn backlog(&self) -> u64 {
        self.backlog
    }

    fn stats(&self) -> QdiscStats {
        QdiscStats {
            kind: "pfifo_fast".into(),
            options: spec::TC_OPTIONS.into(),
            bytes: self.sent_bytes,
            packets: self.sent_pkts,
            drops: self.drops,
            overlimits: 0,
            requeues: 0,
            backlog: self.backlog,
            qlen: self.qlen() as u64,
            xstats: Xstats::None,
        }
    }

    fn drain(&mut self, out: &mut dyn FnMut(P)) {
        // Strict priority: all of band 0, then band 1, then band 2.
        self.backlog = 0;
        for b in 0..3 {
            drain_in_turn(vec![b], |i| self.bands[i].pop_front(), out);
        }
    }
}

#[cfg(test)]
mod tests;
