//! The hosts' own qdisc (`sim --host-qdisc fq`): what a Linux sender's packets pass before its
//! NIC. With `fq` the TCP senders pace through it, as Linux's do (`crate::tcp` stamps departure
//! times; fq holds each packet until its time), and TCP Small Queues keeps each socket to about
//! a millisecond of data in it.
//!
//! One qdisc per side stands for every host on that side: the hosts' NICs are modelled as
//! infinitely fast, so a packet leaves the moment fq releases it, and fq's order among flows
//! eligible at the same instant changes nothing. Per-host limits (fq's 10000 packets per band)
//! are then shared; TSQ keeps the qdisc far below them. The packet's socket and departure time
//! stay behind at the host: the bottleneck sees them cleared, as a router does.

use super::*;
use debloat_core::packet::default_truesize;
use debloat_core::{Dequeue, FlowHasher, QdiscSpec};

/// One side's host qdisc and its wake-up.
pub(super) struct HostStage {
    q: Box<dyn Qdisc<SimPacket>>,
    armed: Option<Nanos>,
    busy: bool,
    /// What it sent, dropped, marked and held, as a link's queue is counted.
    stats: LinkStats,
}

impl World {
    /// Put `spec` on the hosts of both sides (`--host-qdisc`); with `fq` (pacing on), TCP
    /// senders pace through it instead of by themselves.
    pub fn set_host_qdisc(&mut self, spec: &QdiscSpec, key: [u64; 2], seed: u64) {
        for d in [Dir::Up, Dir::Down] {
            let q = spec.build(FlowHasher::new(key), seed ^ d.idx() as u64);
            self.hosts[d.idx()] = Some(HostStage {
                q,
                armed: None,
                busy: false,
                stats: LinkStats::default(),
            });
        }
        self.fq_pacing = matches!(spec, QdiscSpec::Fq(f) if f.pacing);
        for f in &mut self.flows {
            f.sender.set_fq_pacing(self.fq_pacing);
        }
    }

    /// The hosts' qdisc on the side that sends in direction `d`, if any.
    pub fn host_qdisc(&self, d: Dir) -> Option<&dyn Qdisc<SimPacket>> {
        self.hosts[d.idx()].as_ref().map(|h| h.q.as_ref())
    }

    /// What the hosts' qdisc sending in direction `d` sent, dropped, marked and held.
    pub fn host_stats(&self, d: Dir) -> Option<&LinkStats> {
        self.hosts[d.idx()].as_ref().map(|h| &h.stats)
    }

    /// A host sends `p` in direction `d`: through its own qdisc when it has one.
    pub(super) fn send(&mut self, d: Dir, p: SimPacket) {
        let now = self.now;
        let Some(h) = self.hosts[d.idx()].as_mut() else {
            self.send_link(d, p);
            return;
        };
        let truesize = u64::from(p.meta.truesize);
        let flow = match p.body {
            Body::Data { flow, .. } => Some(flow as usize),
            _ => None,
        };
        if let Some(i) = flow {
            self.flows[i].host_bytes += truesize;
        }
        h.q.enqueue(p, now);
        h.stats.max_backlog_pkts = h.stats.max_backlog_pkts.max(h.q.qlen() as u64);
        while let Some(x) = h.q.take_dropped() {
            h.stats.dropped += 1;
            if let Body::Data { flow, .. } = x.packet.body {
                let f = &mut self.flows[flow as usize];
                f.drops += 1;
                f.host_bytes -= u64::from(x.packet.meta.truesize);
            }
        }
        if !h.busy {
            self.host_pump(d);
        }
    }

    /// Whether TCP Small Queues lets flow `i` put another segment in its host's qdisc (always
    /// without one). Like Linux, a socket with at most one segment out may always send.
    pub(super) fn small_queue_allows(&self, i: usize) -> bool {
        let f = &self.flows[i];
        if self.hosts[f.dir.idx()].is_none() {
            return true;
        }
        f.host_bytes <= f.sender.small_queue_limit(default_truesize(DATA_FRAME))
            || f.sender.outstanding() <= 1
    }

    /// Release what the host qdisc lets go now onto the bottleneck, let each flow whose packet
    /// left send more (TSQ), and arm the next wake-up.
    fn host_pump(&mut self, d: Dir) {
        let now = self.now;
        loop {
            let Some(h) = self.hosts[d.idx()].as_mut() else {
                return;
            };
            h.busy = true;
            match h.q.dequeue(now) {
                Dequeue::Packet(mut p) => {
                    let st = &mut h.stats;
                    st.sent_pkts += 1;
                    st.sent_bytes += u64::from(p.meta.len);
                    st.marked += u64::from(p.meta.ecn == Ecn::Ce);
                    st.sojourns
                        .saturating_record(now.saturating_sub(p.meta.enqueue_ns).max(1));
                    p.meta.tstamp = 0;
                    p.meta.socket = 0;
                    let flow = match p.body {
                        Body::Data { flow, .. } => Some(flow as usize),
                        _ => None,
                    };
                    if let Some(i) = flow {
                        self.flows[i].host_bytes -= u64::from(p.meta.truesize);
                    }
                    self.send_link(d, p);
                    if let Some(i) = flow {
                        self.pump(i);
                    }
                }
                Dequeue::NotBefore(t) => {
                    if h.armed != Some(t) {
                        h.armed = Some(t);
                        self.events.push(t, Event::HostWake(d, t));
                    }
                    h.busy = false;
                    return;
                }
                Dequeue::Empty => {
                    h.busy = false;
                    return;
                }
            }
        }
    }

    /// The wake-up armed for `at` came (ignored if a later call re-armed it).
    pub(super) fn host_wake(&mut self, d: Dir, at: Nanos) {
        if let Some(h) = self.hosts[d.idx()].as_mut() {
            if h.armed == Some(at) {
                h.armed = None;
                self.host_pump(d);
            }
        }
    }
}
