//! mac80211's intermediate queues: one `struct fq` per radio whose flow table (4096 flows) is
//! shared by every station's TXQ (a "tin"), with CoDel per flow (include/net/fq.h, fq_impl.h;
//! net/mac80211/tx.c; docs/algorithms.md §5.1).
//!
//! * A packet hashes to `reciprocal_scale(hash, 4096)`. If that flow currently belongs to
//!   another tin, the packet goes to this tin's private default flow instead (a collision),
//!   so stations never share a queue.
//! * Within a tin, DRR++ with a 300-byte quantum: new flows first; an empty flow leaves the
//!   new list for the old one only if the old list has flows, otherwise it is released.
//! * CoDel per flow with mac80211's global parameters: target 20 ms, interval 100 ms, ECN on,
//!   and the byte floor applied to the flow's own backlog with mtu 0.
//! * Overflow (`limit` 8192 packets or `memory_limit` of truesize, over all tins): the fattest
//!   flow of any tin loses `max(1, min(32, qlen/2))` packets from its head, repeatedly.
//!
//! Tins are indices chosen by the caller (the simulator uses one per station and TID, as
//! mac80211 does: two TIDs per access category). The 2025-reverted
//! slow-station CoDel parameters are not modelled (6.18 behaviour).

use crate::flow::{reciprocal_scale, FlowHasher};
use crate::packet::{Nanos, Packet};
use crate::qdisc::codel::{self, CodelQueue};
use crate::qdisc::pktq::{Fifo, Pool};
use crate::qdisc::{DropBox, DropReason, Dropped};
use std::collections::VecDeque;

/// Flows in the shared table.
pub const FLOWS: u32 = 4096;
/// Default packet limit over all TXQs.
pub const LIMIT: u32 = 8192;
/// Default memory limit (16 MiB; 4 MiB when no band supports VHT).
pub const MEMORY_LIMIT: u64 = 16 << 20;
/// DRR quantum, bytes.
pub const QUANTUM: i32 = 300;

/// Limits of the shared queues (wiphy `txq_limit`, `txq_memory_limit`, `txq_quantum`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MacFqConfig {
    /// Packets over all TXQs.
    pub limit: u32,
    /// Truesize bytes over all TXQs.
    pub memory_limit: u64,
    /// DRR quantum, bytes.
    pub quantum: i32,
    /// CoDel parameters for every flow.
    pub codel: codel::Params,
}

impl Default for MacFqConfig {
    fn default() -> Self {
        MacFqConfig {
            limit: LIMIT,
            memory_limit: MEMORY_LIMIT,
            quantum: QUANTUM,
            codel: codel::Params {
                target: codel::codel_time(20_000_000),
                interval: codel::codel_time(100_000_000),
                mtu: 0,
                ecn: true,
                ce_threshold: None,
                ce_threshold_selector: 0,
                ce_threshold_mask: 0,
            },
        }
    }
}

#[derive(Debug, Default)]
struct Flow {
    q: Fifo,
    backlog: u32,
    deficit: i32,
    tin: Option<u16>,
    /// 0 none, 1 new list, 2 old list.
    list: u8,
    cvars: codel::Vars,
}

/// Per-TXQ counters, as `debugfs …/stations/*/aqm` shows them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct TinStats {
    /// Packets queued.
    pub backlog_packets: u32,
    /// Bytes queued.
    pub backlog_bytes: u64,
    /// Packets whose flow slot belonged to another TXQ.
    pub collisions: u64,
    /// Packets dropped on overflow.
    pub overlimit: u64,
    /// Packets dropped by CoDel.
    pub drops: u64,
    /// Packets CE-marked by CoDel.
    pub marks: u64,
    /// Packets sent.
    pub tx_packets: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
}

#[derive(Debug, Default)]
struct Tin {
    new_flows: VecDeque<u32>,
    old_flows: VecDeque<u32>,
    stats: TinStats,
}

#[derive(Debug)]
struct Shared<P> {
    pool: Pool<P>,
    dropped: DropBox<P>,
    qlen: u32,
    memory: u64,
}

/// The radio's shared FQ structure with one tin per station.
#[derive(Debug)]
pub struct MacFq<P> {
    cfg: MacFqConfig,
    hasher: FlowHasher,
    /// `FLOWS` table flows, then one default flow per tin.
    flows: Vec<Flow>,
    tins: Vec<Tin>,
    shared: Shared<P>,
    cstats: codel::Stats,
    overlimit: u64,
    overmemory: u64,
    collisions: u64,
}

struct FlowView<'a, P> {
    flow: &'a mut Flow,
    tin: &'a mut TinStats,
    shared: &'a mut Shared<P>,
}

impl<P: Packet> CodelQueue<P> for FlowView<'_, P> {
    fn head(&mut self) -> Option<&mut P> {
        self.shared.pool.front_mut(&self.flow.q)
    }
    fn pop(&mut self) -> Option<P> {
        let p = self.shared.pool.pop_front(&mut self.flow.q)?;
        let m = p.meta();
        self.flow.backlog -= m.len;
        self.tin.backlog_bytes -= u64::from(m.len);
        self.tin.backlog_packets -= 1;
        self.shared.qlen -= 1;
        self.shared.memory -= u64::from(m.truesize);
        Some(p)
    }
    fn backlog(&self) -> u32 {
        self.flow.backlog
    }
    fn drop_packet(&mut self, packet: P) {
        self.tin.drops += 1;
        self.shared.dropped.push(packet, DropReason::Aqm);
    }
}

impl<P: Packet> MacFq<P> {
    /// Queues for `stations` tins.
    pub fn new(stations: usize, cfg: MacFqConfig, hasher: FlowHasher) -> Self {
        let n = FLOWS as usize + stations;
        MacFq {
            cfg,
            hasher,
            flows: (0..n).map(|_| Flow::default()).collect(),
            tins: (0..stations).map(|_| Tin::default()).collect(),
            shared: Shared {
                pool: Pool::with_capacity(1024),
                dropped: DropBox::default(),
                qlen: 0,
                memory: 0,
            },
            cstats: codel::Stats::default(),
            overlimit: 0,
            overmemory: 0,
            collisions: 0,
        }
    }

    /// Packets queued over all tins.
    pub fn qlen(&self) -> usize {
        self.shared.qlen as usize
    }

    /// Packets queued for one station.
    pub fn tin_len(&self, tin: usize) -> usize {
        self.tins
            .get(tin)
            .map_or(0, |t| t.stats.backlog_packets as usize)
    }

    /// A tin's counters.
    pub fn tin_stats(&self, tin: usize) -> TinStats {
        self.tins.get(tin).map(|t| t.stats).unwrap_or_default()
    }

    /// Packets CoDel marked, over all flows.
    pub fn ecn_marks(&self) -> u32 {
        self.cstats.ecn_mark
    }

    /// Collisions over all tins (`fq->collisions`).
    pub fn collisions(&self) -> u64 {
        self.collisions
    }

    /// The flow a packet for `tin` goes to (`fq_flow_classify`), counting collisions.
    fn classify(&mut self, tin: usize, p: &P) -> usize {
        let idx = reciprocal_scale(self.hasher.flow_hash(p.meta()), FLOWS) as usize;
        match self.flows[idx].tin {
            Some(t) if usize::from(t) != tin => {
                self.tins[tin].stats.collisions += 1;
                self.collisions += 1;
                FLOWS as usize + tin
            }
            _ => idx,
        }
    }

    /// Queue a packet for station `tin` at `now`. Overflow drops come out of
    /// [`MacFq::take_dropped`]. An out-of-range tin is dropped as overlimit.
    pub fn enqueue(&mut self, tin: usize, mut p: P, now: Nanos) {
        if tin >= self.tins.len() {
            self.overlimit += 1;
            self.shared.dropped.push(p, DropReason::Overlimit);
            return;
        }
        let f = self.classify(tin, &p);
        let m = p.meta_mut();
        m.enqueue_ns = now;
        let (len, truesize) = (m.len, m.truesize);
        let flow = &mut self.flows[f];
        flow.tin = Some(tin as u16);
        self.shared.pool.push_back(&mut flow.q, p);
        flow.backlog += len;
        let t = &mut self.tins[tin];
        t.stats.backlog_bytes += u64::from(len);
        t.stats.backlog_packets += 1;
        if flow.list == 0 {
            flow.deficit = self.cfg.quantum;
            flow.list = 1;
            t.new_flows.push_back(f as u32);
        }
        self.shared.qlen += 1;
        self.shared.memory += u64::from(truesize);
        let mut oom = self.shared.memory > self.cfg.memory_limit;
        while self.shared.qlen > self.cfg.limit || oom {
            if !self.drop_fattest(oom) {
                break;
            }
            oom = self.shared.memory > self.cfg.memory_limit;
        }
    }

    /// `fq_find_fattest_flow` + `fq_flow_drop`: head-drop up to half (at most 32, at least one)
    /// of the packets of the flow with the largest byte backlog.
    fn drop_fattest(&mut self, oom: bool) -> bool {
        let mut best = None;
        let mut max = 0;
        for (i, f) in self.flows.iter().enumerate() {
            if f.backlog > max {
                max = f.backlog;
                best = Some(i);
            }
        }
        let Some(i) = best else { return false };
        let Some(tin) = self.flows[i].tin.map(usize::from) else {
            return false;
        };
        let n = (self.flows[i].q.len() / 2).clamp(1, 32);
        for _ in 0..n {
            let flow = &mut self.flows[i];
            let Some(p) = self.shared.pool.pop_front(&mut flow.q) else {
                break;
            };
            let m = p.meta();
            flow.backlog -= m.len;
            let t = &mut self.tins[tin].stats;
            t.backlog_bytes -= u64::from(m.len);
            t.backlog_packets -= 1;
            t.overlimit += 1;
            self.shared.qlen -= 1;
            self.shared.memory -= u64::from(m.truesize);
            self.overlimit += 1;
            if oom {
                self.overmemory += 1;
            }
            self.shared.dropped.push(p, DropReason::Overlimit);
        }
        true
    }

    /// `fq_tin_dequeue`: the next packet of station `tin` at `now`, after CoDel.
    pub fn dequeue(&mut self, tin: usize, now: Nanos) -> Option<P> {
        let quantum = self.cfg.quantum;
        let t = self.tins.get_mut(tin)?;
        loop {
            let (from_new, f) = match t.new_flows.front() {
                Some(&f) => (true, f as usize),
                None => (false, *t.old_flows.front()? as usize),
            };
            let flow = &mut self.flows[f];
            if flow.deficit <= 0 {
                flow.deficit += quantum;
                if from_new {
                    t.new_flows.pop_front();
                } else {
                    t.old_flows.pop_front();
                }
                flow.list = 2;
                t.old_flows.push_back(f as u32);
                continue;
            }
            let mut vars = flow.cvars;
            let mut view = FlowView {
                flow,
                tin: &mut t.stats,
                shared: &mut self.shared,
            };
            let marks = self.cstats.ecn_mark;
            let got = codel::dequeue(&mut view, &mut vars, &self.cfg.codel, &mut self.cstats, now);
            view.tin.marks += u64::from(self.cstats.ecn_mark - marks);
            let flow = view.flow;
            flow.cvars = vars;
            match got {
                None => {
                    if from_new {
                        t.new_flows.pop_front();
                    } else {
                        t.old_flows.pop_front();
                    }
                    if from_new && !t.old_flows.is_empty() {
                        flow.list = 2;
                        t.old_flows.push_back(f as u32);
                    } else {
                        flow.list = 0;
                        flow.tin = None;
                    }
                }
                Some(p) => {
                    let len = p.meta().len;
                    flow.deficit -= len as i32;
                    t.stats.tx_bytes += u64::from(len);
                    t.stats.tx_packets += 1;
                    return Some(p);
                }
            }
        }
    }

    /// The head packet's length for a station, without dequeuing (to size an aggregate).
    pub fn peek_len(&self, tin: usize) -> Option<u32> {
        let t = self.tins.get(tin)?;
        t.new_flows
            .iter()
            .chain(t.old_flows.iter())
            .find_map(|&f| self.shared.pool.front(&self.flows[f as usize].q))
            .map(|p| p.meta().len)
    }

    /// A packet this structure dropped since the last call.
    pub fn take_dropped(&mut self) -> Option<Dropped<P>> {
        self.shared.dropped.take()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::flow::FlowKey;
    use crate::packet::{PacketMeta, Record};

    fn pkt(id: u64, src: u8, port: u16, len: u32) -> Record {
        let k = FlowKey::ip(
            format!("198.18.0.{src}").parse().unwrap(),
            "198.18.1.1".parse().unwrap(),
            port,
            80,
            6,
        );
        Record::new(id, PacketMeta::new(len, k))
    }

    #[test]
    fn a_sparse_flow_overtakes_a_bulk_backlog_in_its_tin() {
        let mut q = MacFq::new(1, MacFqConfig::default(), FlowHasher::default());
        for i in 0..100 {
            q.enqueue(0, pkt(i, 1, 1000, 1514), 0);
        }
        q.dequeue(0, 0).unwrap();
        q.enqueue(0, pkt(999, 1, 2000, 100), 0);
        // The bulk flow moved to old; the ping is new and goes next.
        let mut ids = Vec::new();
        for _ in 0..2 {
            ids.push(q.dequeue(0, 0).unwrap().id);
        }
        assert!(ids.contains(&999), "{ids:?}");
    }

    #[test]
    fn quantum_is_300_bytes() {
        // Two bulk flows of 1514-byte packets alternate one packet each: 300 B quantum means a
        // flow goes negative after one packet and waits ceil(1514/300) = 6 visits for credit.
        let mut q = MacFq::new(1, MacFqConfig::default(), FlowHasher::default());
        for i in 0..20 {
            q.enqueue(0, pkt(i, 1, 1000 + (i % 2) as u16, 1514), 0);
        }
        let order: Vec<u16> = (0..10)
            .map(|_| match q.dequeue(0, 0).unwrap().meta.flow {
                FlowKey::Ip { sport, .. } => sport,
                FlowKey::NonIp { .. } => 0,
            })
            .collect();
        for w in order.windows(2) {
            assert_ne!(w[0], w[1], "{order:?}");
        }
    }

    #[test]
    fn flows_of_different_stations_never_share_a_queue() {
        let mut q = MacFq::new(2, MacFqConfig::default(), FlowHasher::default());
        // The same 5-tuple for two stations hashes to one slot: the second tin uses its default
        // flow and counts a collision.
        q.enqueue(0, pkt(1, 1, 1000, 1514), 0);
        q.enqueue(1, pkt(2, 1, 1000, 1514), 0);
        assert_eq!(q.collisions(), 1);
        assert_eq!(q.tin_stats(1).collisions, 1);
        assert_eq!(q.dequeue(0, 0).unwrap().id, 1);
        assert!(q.dequeue(0, 0).is_none());
        assert_eq!(q.dequeue(1, 0).unwrap().id, 2);
    }

    #[test]
    fn overflow_drops_half_the_fattest_flow_of_any_tin() {
        let cfg = MacFqConfig {
            limit: 100,
            ..MacFqConfig::default()
        };
        let mut q = MacFq::new(2, cfg, FlowHasher::default());
        for i in 0..80 {
            q.enqueue(0, pkt(i, 1, 1000, 1514), 0);
        }
        for i in 0..21 {
            q.enqueue(1, pkt(100 + i, 2, 3000, 1514), 0);
        }
        // 101 > 100: the fattest (tin 0's flow, 80 packets) loses min(32, 40) = 32 from its head.
        let mut n = 0;
        while let Some(d) = q.take_dropped() {
            assert!(d.packet.id < 32, "dropped {}", d.packet.id);
            n += 1;
        }
        assert_eq!(n, 32);
        assert_eq!(q.qlen(), 69);
        assert_eq!(q.tin_stats(0).overlimit, 32);
    }

    #[test]
    fn codel_at_20ms_drops_or_marks_a_standing_queue() {
        let mut q = MacFq::new(1, MacFqConfig::default(), FlowHasher::default());
        // Not-ECT bulk flow, 1000 packets queued at 0, drained one per ms: sojourn grows past
        // 20 ms for more than 100 ms, so CoDel drops.
        for i in 0..1000 {
            q.enqueue(0, pkt(i, 1, 1000, 1514), 0);
        }
        let mut sent = 0;
        for ms in 0..400u64 {
            if q.dequeue(0, ms * 1_000_000).is_some() {
                sent += 1;
            }
        }
        let mut dropped = 0;
        while q.take_dropped().is_some() {
            dropped += 1;
        }
        assert!(dropped > 0, "no CoDel drops");
        assert_eq!(sent + dropped + q.qlen(), 1000);
        assert_eq!(q.tin_stats(0).drops as usize, dropped);
    }
}
