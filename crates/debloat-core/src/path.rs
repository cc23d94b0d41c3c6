//! The data path, sans-IO: a discipline, optionally the link's own drop-tail buffer (a modem's
//! FIFO), and the [`Link`]. `debloat replay` and the gateway drive it; the simulator drives
//! the same [`Link`] behind its device model (a TX ring with BQL), which sits where the buffer
//! sits here.
//!
//! ```text
//! arrive(p, now) ─► qdisc ─► loss ─► [buffer: drop-tail, N packets] ─► link: rate, framing ─► wire ─► poll(now)
//!                     │ drops  │                │ drops                     (Sent)              │ over limit,
//!                     ▼        ▼                ▼                                               ▼ duplicated…
//!                  Dropped   Dropped (Lost)   Dropped                                        counted   Delivered
//! ```
//!
//! The emulation's loss model meets each packet as it enters the link — the buffer when there
//! is one, else the transmitter (then the loss sits after the discipline and before the
//! serialisation) — so a lost packet costs the link no time, as in netem ([`crate::link::netem`]).
//!
//! The link asks the stage in front of it for a packet whenever it is idle and something is
//! queued, as the kernel's `qdisc_run` does after every enqueue and every completed
//! transmission; a shaper's [`Dequeue::NotBefore`] is a wake-up, never a lost turn. Without a
//! buffer the discipline is the link's only queue; with one, the discipline hands packets on
//! as fast as it releases them (or at its own shaper's pace) and the queue forms in the
//! buffer unless the discipline shapes below the link's rate.
//!
//! Contract: [`DataPath::arrive`] and [`DataPath::poll`] are the inputs, in time order;
//! [`Event`]s are the outputs; [`DataPath::next_wakeup`] says when to poll again. Every packet
//! handed in is at any moment exactly one of: dropped (discipline or buffer), lost or dropped
//! by the wire (its counters), queued ([`DataPath::queued`]), or delivered — a duplicate
//! counts as one more packet handed in ([`DataPath::accounted`] checks it).

use crate::link::{Emulation, Link, WireCounters};
use crate::packet::{Nanos, Packet};
use crate::qdisc::fifo::{Fifo, Limit};
use crate::qdisc::{Dequeue, DropReason, Qdisc};

/// Where a packet was dropped before the link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathDrop {
    /// By the discipline, for this reason.
    Qdisc(DropReason),
    /// By the link's full buffer.
    Buffer,
    /// By the emulated link's loss model as the packet entered the link (its buffer, or the
    /// transmitter): counted in the wire's counters (`lost`), as netem counts its losses.
    Lost,
}

/// Something that happened on the path.
#[derive(Debug)]
pub enum Event<'a, P> {
    /// The link started sending `packet` at `start`; it finishes at `end`.
    Sent {
        /// The packet as it left the queues (ECN and DSCP as the discipline left them).
        packet: &'a P,
        /// Start of transmission.
        start: Nanos,
        /// End of transmission.
        end: Nanos,
    },
    /// A packet was dropped in front of the link, or lost as it entered it ([`PathDrop::Lost`]).
    Dropped {
        /// The packet.
        packet: P,
        /// Where and why.
        reason: PathDrop,
        /// When.
        at: Nanos,
    },
    /// A packet reached the far end of the wire.
    Delivered {
        /// The packet.
        packet: P,
        /// When.
        at: Nanos,
    },
}

/// Counts of what the path handled, apart from the wire's own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathCounters {
    /// Packets handed in.
    pub arrived: u64,
    /// Packets the discipline dropped.
    pub qdisc_dropped: u64,
    /// Packets the buffer dropped.
    pub buffer_dropped: u64,
}

/// A discipline in front of a link.
pub struct DataPath<P, Q> {
    qdisc: Q,
    buffer: Option<Fifo<P>>,
    link: Link<P>,
    /// When the link next asks the discipline (None: it is empty, or the buffer is full).
    qdisc_next: Option<Nanos>,
    /// When the link next asks the buffer.
    buffer_next: Option<Nanos>,
    now: Nanos,
    counters: PathCounters,
}

impl<P: Packet + Clone, Q: Qdisc<P>> DataPath<P, Q> {
    /// `qdisc` in front of the link `emu` describes (its `buffer`, if any, between them),
    /// with `propagation_ns` of fixed delay and `seed` for the link's impairments.
    pub fn new(qdisc: Q, emu: Emulation, propagation_ns: Nanos, seed: u64) -> Self {
        DataPath {
            qdisc,
            buffer: emu.buffer.map(|n| Fifo::new(Limit::Packets(n))),
            link: Link::new(emu, propagation_ns, seed),
            qdisc_next: None,
            buffer_next: None,
            now: 0,
            counters: PathCounters::default(),
        }
    }

    /// The discipline.
    pub fn qdisc(&self) -> &Q {
        &self.qdisc
    }

    /// The discipline, mutably (e.g. to change a shaper's rate).
    pub fn qdisc_mut(&mut self) -> &mut Q {
        &mut self.qdisc
    }

    /// Take the discipline back.
    pub fn into_qdisc(self) -> Q {
        self.qdisc
    }

    /// The link.
    pub fn link(&self) -> &Link<P> {
        &self.link
    }

    /// The link, mutably (to change its rate, framing or impairments).
    pub fn link_mut(&mut self) -> &mut Link<P> {
        &mut self.link
    }

    /// Packets in the link's buffer.
    pub fn in_buffer(&self) -> usize {
        self.buffer.as_ref().map_or(0, |b| b.qlen())
    }

    /// Packets queued anywhere on the path: discipline, buffer, wire.
    pub fn queued(&self) -> usize {
        self.qdisc.qlen() + self.in_buffer() + self.link.wire().len()
    }

    /// The path's counters.
    pub fn counters(&self) -> PathCounters {
        self.counters
    }

    /// The wire's counters.
    pub fn wire_counters(&self) -> WireCounters {
        self.link.wire().counters
    }

    /// The latest time passed in.
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// A packet arrives at `t` (a time before the previous one is taken as that one).
    pub fn arrive(&mut self, packet: P, t: Nanos, out: &mut impl FnMut(Event<'_, P>)) {
        let t = t.max(self.now);
        self.advance_to(t, out);
        self.counters.arrived += 1;
        self.qdisc.enqueue(packet, t);
        self.drain_qdisc_drops(t, out);
        if self.qdisc_next.is_none() {
            let free = if self.buffer.is_some() {
                t
            } else {
                self.link.busy_until()
            };
            self.qdisc_next = Some(t.max(free));
        }
    }

    /// Replace the discipline at `t` with `new`, moving every packet the old one holds into it
    /// (each flow's in order, flows in turn: [`Qdisc::drain`]), so nothing queued is lost.
    /// Packets `new` refuses (a smaller limit) are its drops, counted and handed out as such.
    /// Returns the old discipline (for its statistics), how many packets moved and how many of
    /// those `new` refused. The path is first run up to `t` with the old discipline, whose own
    /// drops on the way (an AQM's, at dequeue) are counted as its drops, not as refusals. A
    /// moved packet's sojourn restarts at `t` in disciplines that stamp arrival on enqueue.
    pub fn replace_qdisc(
        &mut self,
        new: Q,
        t: Nanos,
        out: &mut impl FnMut(Event<'_, P>),
    ) -> (Q, u64, u64) {
        let t = t.max(self.now);
        self.advance_to(t, out);
        self.drain_qdisc_drops(t, out);
        let mut held = Vec::with_capacity(self.qdisc.qlen());
        self.qdisc.drain(&mut |p| held.push(p));
        let old = core::mem::replace(&mut self.qdisc, new);
        let moved = held.len() as u64;
        for p in held {
            self.qdisc.enqueue(p, t);
        }
        let before = self.counters.qdisc_dropped;
        self.drain_qdisc_drops(t, out);
        let refused = self.counters.qdisc_dropped - before;
        if self.qdisc_next.is_none() && self.qdisc.qlen() > 0 {
            let free = if self.buffer.is_some() {
                t
            } else {
                self.link.busy_until()
            };
            self.qdisc_next = Some(t.max(free));
        }
        (old, moved, refused)
    }

    /// Run the path up to `now` and hand out what the wire delivers by then.
    pub fn poll(&mut self, now: Nanos, out: &mut impl FnMut(Event<'_, P>)) {
        self.advance_to(now, out);
        while let Some(packet) = self.link.pop_due(now) {
            out(Event::Delivered { packet, at: now });
        }
    }

    /// Run until nothing is pending; returns the time the last thing happened.
    pub fn finish(&mut self, out: &mut impl FnMut(Event<'_, P>)) -> Nanos {
        while let Some(t) = self.next_wakeup() {
            self.poll(t, out);
        }
        self.now.max(self.link.busy_until())
    }

    /// When to call [`DataPath::poll`] next (None: nothing pending).
    pub fn next_wakeup(&self) -> Option<Nanos> {
        [self.qdisc_next, self.buffer_next, self.link.next_release()]
            .into_iter()
            .flatten()
            .min()
    }

    /// Handed in (duplicates included) = dropped + lost + over limit + dropped by a modem +
    /// queued + delivered.
    pub fn accounted(&self) -> bool {
        let (c, w) = (self.counters, self.wire_counters());
        c.arrived + w.duplicated
            == c.qdisc_dropped
                + c.buffer_dropped
                + w.lost
                + w.overlimit
                + self.link.modem_dropped()
                + self.queued() as u64
                + w.delivered
    }

    /// Run the discipline and the buffer up to `t`, in time order (the buffer first on a tie:
    /// what it holds was there before what the discipline hands it now).
    fn advance_to(&mut self, t: Nanos, out: &mut impl FnMut(Event<'_, P>)) {
        loop {
            let b = self.buffer_next.filter(|&a| a <= t);
            let q = self.qdisc_next.filter(|&a| a <= t);
            match (b, q) {
                (Some(b), Some(q)) if b <= q => self.attempt_buffer(b, out),
                (Some(b), None) => self.attempt_buffer(b, out),
                (_, Some(q)) => self.attempt_qdisc(q, out),
                (None, None) => break,
            }
        }
        self.now = self.now.max(t);
    }

    fn attempt_qdisc(&mut self, at: Nanos, out: &mut impl FnMut(Event<'_, P>)) {
        self.now = self.now.max(at);
        let got = self.qdisc.dequeue(at);
        self.drain_qdisc_drops(at, out);
        self.qdisc_next = match got {
            Dequeue::Packet(p) if self.buffer.is_some() => {
                self.buffer_enqueue(p, at, out);
                Some(at)
            }
            Dequeue::Packet(mut p) => {
                if self.link.admit(&mut p) {
                    Some(self.send(p, at, out))
                } else {
                    Self::lost(p, at, out);
                    Some(at)
                }
            }
            Dequeue::Empty => None,
            Dequeue::NotBefore(t) => Some(t.max(at + 1)),
        };
    }

    fn buffer_enqueue(&mut self, mut p: P, at: Nanos, out: &mut impl FnMut(Event<'_, P>)) {
        if !self.link.admit(&mut p) {
            return Self::lost(p, at, out);
        }
        let Some(buffer) = self.buffer.as_mut() else {
            return;
        };
        buffer.enqueue(p, at);
        while let Some(d) = buffer.take_dropped() {
            self.counters.buffer_dropped += 1;
            out(Event::Dropped {
                packet: d.packet,
                reason: PathDrop::Buffer,
                at,
            });
        }
        if self.buffer_next.is_none() {
            self.buffer_next = Some(at.max(self.link.busy_until()));
        }
    }

    fn attempt_buffer(&mut self, at: Nanos, out: &mut impl FnMut(Event<'_, P>)) {
        self.now = self.now.max(at);
        let got = self.buffer.as_mut().map(|b| b.dequeue(at));
        self.buffer_next = match got {
            Some(Dequeue::Packet(p)) => Some(self.send(p, at, out)),
            _ => None,
        };
    }

    /// The loss model took `p` as it entered the link (the wire counted it).
    fn lost(packet: P, at: Nanos, out: &mut impl FnMut(Event<'_, P>)) {
        out(Event::Dropped {
            packet,
            reason: PathDrop::Lost,
            at,
        });
    }

    /// The link starts sending `p` (admitted) at `at`; returns when it is free again.
    fn send(&mut self, p: P, at: Nanos, out: &mut impl FnMut(Event<'_, P>)) -> Nanos {
        let end = self.link.tx_end(p.meta(), at);
        out(Event::Sent {
            packet: &p,
            start: at,
            end,
        });
        self.link.transmit_until(p, at, end, &mut |_| {});
        end
    }

    fn drain_qdisc_drops(&mut self, at: Nanos, out: &mut impl FnMut(Event<'_, P>)) {
        while let Some(d) = self.qdisc.take_dropped() {
            self.counters.qdisc_dropped += 1;
            out(Event::Dropped {
                packet: d.packet,
                reason: PathDrop::Qdisc(d.reason),
                at,
            });
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod replace_tests {
    use super::*;
    use crate::testutil::{addr, pkt_in};
    use crate::QdiscSpec;
    use crate::{FlowHasher, Record};

    /// Every pair of disciplines: what one holds moves into the other, each flow's packets in
    /// order, and the path's accounting stays exact.
    #[test]
    fn a_replaced_discipline_hands_over_every_packet_in_flow_order() {
        let specs = [
            "pfifo limit 1000",
            "bfifo limit 2000000",
            "codel",
            "fq_codel",
            "cake bandwidth 10Mbit diffserv4",
            "cake bandwidth 5Mbit besteffort flows",
            "deadline 2s",
        ];
        for from in specs {
            for to in specs {
                let build = |s: &str| -> Box<dyn Qdisc<Record>> {
                    s.parse::<QdiscSpec>()
                        .unwrap()
                        .build(FlowHasher::new([1, 2]), 3)
                };
                let emu: Emulation = "rate 1Mbit".parse().unwrap();
                let mut p = DataPath::new(build(from), emu, 0, 1);
                let mut sent = Vec::new();
                let mut rec = |e: Event<'_, Record>| {
                    if let Event::Delivered { packet, .. } = e {
                        sent.push(packet);
                    }
                };
                // 4 flows × 50 packets, all at t = 0: the 1 Mbit/s link holds them queued.
                for i in 0..200u64 {
                    let f =
                        crate::flow::FlowKey::ip(addr(0, (i % 4) as u8), addr(1, 1), 1000, 80, 17);
                    let mut r = pkt_in(i, 1000, f);
                    r.meta.dscp = [0, 8, 34, 46][(i % 4) as usize];
                    p.arrive(r, 0, &mut rec);
                }
                let queued = p.qdisc().qlen();
                let (_old, moved, refused) = p.replace_qdisc(build(to), 1_000_000, &mut rec);
                assert_eq!(moved as usize, queued, "{from} → {to}");
                assert_eq!(refused, 0, "{from} → {to}");
                assert_eq!(p.counters().qdisc_dropped, 0, "{from} → {to}");
                assert!(p.accounted(), "{from} → {to}");
                p.finish(&mut rec);
                assert!(p.accounted(), "{from} → {to}");
                // Afterwards the new discipline's AQM may drop some: sent or dropped, never lost.
                let dropped = p.counters().qdisc_dropped as usize;
                assert_eq!(sent.len() + dropped, 200, "{from} → {to}");
                for flow in 0..4u64 {
                    let ids: Vec<u64> = sent
                        .iter()
                        .map(|r| r.id)
                        .filter(|id| id % 4 == flow)
                        .collect();
                    assert!(
                        ids.windows(2).all(|w| w[0] < w[1]),
                        "{from} → {to}: flow {flow} {ids:?}"
                    );
                }
            }
        }
    }

    /// The old discipline's own drops while the path runs up to the change (CoDel's, at
    /// dequeue) are not refusals by the new one; a smaller limit's are.
    #[test]
    fn only_the_new_disciplines_drops_count_as_refused() {
        for (from, to, expect_refused) in [
            ("codel", "pfifo limit 1000", None),
            ("fq_codel", "cake bandwidth 10Mbit", None),
            ("fq_codel", "pfifo limit 10", Some(10)),
        ] {
            let build = |s: &str| -> Box<dyn Qdisc<Record>> {
                s.parse::<QdiscSpec>()
                    .unwrap()
                    .build(FlowHasher::new([1, 2]), 3)
            };
            let mut p = DataPath::new(build(from), "rate 1Mbit".parse().unwrap(), 0, 1);
            let mut ignore = |_: Event<'_, Record>| {};
            let f = crate::flow::FlowKey::ip(addr(0, 1), addr(1, 1), 1000, 80, 17);
            // One flow, 200 × 1000 bytes at t = 0: 8 ms each on the wire, so by 600 ms the
            // head has waited far past CoDel's target for more than an interval.
            for i in 0..200u64 {
                p.arrive(pkt_in(i, 1000, f), 0, &mut ignore);
            }
            let (_old, moved, refused) = p.replace_qdisc(build(to), 600_000_000, &mut ignore);
            let aqm = p.counters().qdisc_dropped - refused;
            assert!(aqm > 0, "{from}: CoDel dropped nothing before the change");
            let want = expect_refused.map_or(0, |keep| moved - keep);
            assert_eq!(
                refused, want,
                "{from} → {to}: {moved} moved, {aqm} AQM drops"
            );
            assert!(p.accounted(), "{from} → {to}");
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod loss_tests {
    use super::*;
    use crate::testutil::pkt;
    use crate::{FlowHasher, QdiscSpec, Record};

    fn path(words: &str) -> DataPath<Record, Box<dyn Qdisc<Record>>> {
        let q = "pfifo limit 1000".parse::<QdiscSpec>().unwrap();
        DataPath::new(
            q.build(FlowHasher::new([1, 2]), 3),
            words.parse().unwrap(),
            0,
            7,
        )
    }

    /// Without a buffer the loss model stands between the discipline and the transmitter: a
    /// lost packet leaves the queue and costs the link no time (netem loses at enqueue).
    #[test]
    fn a_lost_packet_leaves_the_queue_without_taking_link_time() {
        let mut p = path("rate 8Mbit loss 30%");
        let (mut last_end, mut sent, mut lost) = (0, 0u64, 0u64);
        let mut rec = |e: Event<'_, Record>| match e {
            Event::Sent { end, .. } => (last_end, sent) = (end, sent + 1),
            Event::Dropped {
                reason: PathDrop::Lost,
                ..
            } => lost += 1,
            _ => {}
        };
        for i in 0..1000 {
            p.arrive(pkt(i, 1000), 0, &mut rec);
        }
        p.finish(&mut rec);
        assert!(p.accounted());
        assert_eq!(sent + lost, 1000);
        assert_eq!(lost, p.wire_counters().lost);
        assert!((250..350).contains(&lost), "{lost}");
        // 1000 bytes at 8 Mbit/s: 1 ms each, for the survivors only.
        assert_eq!(last_end, sent * 1_000_000);
    }

    /// With a buffer (netem's own queue) the loss model meets a packet at the buffer's entry,
    /// before its tail drop, as netem draws loss before it looks at its `limit`.
    #[test]
    fn with_a_buffer_loss_comes_before_the_tail_drop() {
        let mut p = path("rate 8Mbit loss 100% buffer 5");
        let mut rec = |_: Event<'_, Record>| {};
        for i in 0..100 {
            p.arrive(pkt(i, 1000), 0, &mut rec);
        }
        p.finish(&mut rec);
        let (c, w) = (p.counters(), p.wire_counters());
        assert_eq!((w.lost, c.buffer_dropped, w.delivered), (100, 0, 0));
        assert!(p.accounted());
        let mut p = path("rate 8Mbit buffer 5");
        for i in 0..100 {
            p.arrive(pkt(i, 1000), 0, &mut rec);
        }
        p.finish(&mut rec);
        assert_eq!(
            p.counters().buffer_dropped,
            94,
            "one on the link, five in the buffer"
        );
    }
}
