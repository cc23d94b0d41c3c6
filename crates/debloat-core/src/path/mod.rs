//! The data path, sans-IO: a discipline, a device stage, and the [`Link`]. The simulator,
//! `debloat replay` and the gateway all drive it, the same way.
//!
//! ```text
//! arrive(p, now) ─► qdisc ─► device stage ───────────────────────────► link: loss, rate, framing ─► wire ─► poll(now)
//!                     │ drops   none | drop-tail FIFO (a modem's)            (Sent)  │ lost           │ over limit,
//!                     ▼              | TX ring + BQL (completions,                   ▼                ▼ duplicated…
//!                  Dropped             interrupts: wake-ups)                  Dropped (Lost)        Delivered
//! ```
//!
//! The device stage ([`Stage`]) is what sits between the discipline and the transmitter:
//! - [`Stage::Direct`]: nothing; the discipline is the link's only queue.
//! - [`Stage::Fifo`]: the link's own drop-tail buffer of N packets (netem's queue, a modem's
//!   FIFO); the discipline hands packets on as fast as it releases them (or at its own
//!   shaper's pace) and the queue forms there unless the discipline shapes below the link.
//!   A capacity trace's modem sits behind the transmitter ([`Link::set_modem`]).
//! - [`Stage::Device`]: a driver and its NIC's TX ring, filled while BQL allows
//!   ([`crate::device`]; a ring of 0 descriptors: the driver asks the discipline each time the
//!   transmitter frees); each transmission's completion, and with interrupt moderation the
//!   interrupt that reports it, are wake-ups in [`DataPath::next_wakeup`], as Linux's
//!   `netdev_tx_completed_queue` runs from the TX completion. Its wake-ups can also be run
//!   one at a time by a discrete-event host ([`DataPath::take_armed`], [`DataPath::fire`]):
//!   the simulator does, so that its other events at the same nanosecond keep their order.
//!
//! The emulation's loss model meets each packet as it enters the link — the buffer when there
//! is one, else the transmitter (then the loss sits after the discipline and before the
//! serialisation) — so a lost packet costs the link no time, as in netem ([`crate::link::netem`]).
//!
//! The link asks the stage in front of it for a packet whenever it is idle and something is
//! queued, as the kernel's `qdisc_run` does after every enqueue and every completed
//! transmission; a shaper's [`Dequeue::NotBefore`] is a wake-up, never a lost turn.
//!
//! Contract: [`DataPath::arrive`], [`DataPath::poll`] (or [`DataPath::fire`]) and
//! [`DataPath::retry`] are the inputs,
//! in time order (`now` never goes backwards); [`Event`]s are the outputs, each with its time;
//! [`DataPath::next_wakeup`] says when to poll again. Every packet handed in is at any moment
//! exactly one of: dropped (discipline or buffer), lost or dropped by the wire (its counters),
//! queued ([`DataPath::queued`]: discipline, device stage, wire), or delivered — a duplicate
//! counts as one more packet handed in ([`DataPath::accounted`] checks it).

mod driver;
mod feed;

use crate::classify::{Admit, Classify};
use crate::device::{Device, DeviceConfig};
use crate::link::{Emulation, Link, WireCounters};
use crate::packet::{Nanos, Packet};
use crate::qdisc::fifo::{Fifo, Limit};
use crate::qdisc::{DropReason, Qdisc};
use crate::Direction;

/// Where a packet was dropped before the link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathDrop {
    /// By the classify stage in front of the discipline ([`DataPath::arrive_classified`]).
    Classify,
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
    /// The discipline released `packet` at `at` (to the device stage, or straight to the link).
    Dequeued {
        /// The packet as the discipline left it.
        packet: &'a P,
        /// When.
        at: Nanos,
    },
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
    /// Packets the classify stage dropped.
    pub classify_dropped: u64,
    /// The most packets the discipline held just after an arrival (and its drops).
    pub peak_qdisc_pkts: u64,
}

/// What sits between the discipline and the transmitter (see the module doc).
#[derive(Clone, Copy, Debug, Default)]
pub enum Stage {
    /// Nothing: the discipline feeds the link.
    #[default]
    Direct,
    /// The link's drop-tail buffer of this many packets.
    Fifo(u32),
    /// A driver with a TX ring and BQL (a `ring` of 0: no ring, the driver hands the
    /// discipline's packets to the transmitter as it frees).
    Device(DeviceConfig),
}

/// The device stage's state.
enum Held<P> {
    Direct,
    Fifo(Fifo<P>),
    Driver(Box<driver::Driver<P>>),
}

/// A discipline in front of a link.
pub struct DataPath<P, Q> {
    qdisc: Q,
    held: Held<P>,
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
        let stage = emu.buffer.map_or(Stage::Direct, Stage::Fifo);
        Self::with_stage(qdisc, stage, Link::new(emu, propagation_ns, seed))
    }

    /// `qdisc`, then `stage`, then `link` (built by the caller: a framing, a modem).
    pub fn with_stage(qdisc: Q, stage: Stage, link: Link<P>) -> Self {
        let held = match stage {
            Stage::Direct => Held::Direct,
            Stage::Fifo(n) => Held::Fifo(Fifo::new(Limit::Packets(n))),
            Stage::Device(cfg) => Held::Driver(Box::new(driver::Driver::new(Device::new(cfg)))),
        };
        DataPath {
            qdisc,
            held,
            link,
            qdisc_next: None,
            buffer_next: None,
            now: 0,
            counters: PathCounters::default(),
        }
    }

    /// The device, when the stage is one (its BQL limit, what its ring holds).
    pub fn device(&self) -> Option<&Device<P>> {
        match &self.held {
            Held::Driver(r) => Some(&r.dev),
            _ => None,
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

    /// Packets in the device stage (the link's buffer, or the TX ring).
    pub fn in_buffer(&self) -> usize {
        match &self.held {
            Held::Direct => 0,
            Held::Fifo(b) => b.qlen(),
            Held::Driver(r) => r.dev.len(),
        }
    }

    /// Packets queued anywhere on the path: discipline, device stage, wire.
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
        // What falls due at `t` itself runs after the arrival (see the module doc).
        self.advance_to(t.saturating_sub(1), out);
        self.now = t;
        self.counters.arrived += 1;
        self.qdisc.enqueue(packet, t);
        self.drain_qdisc_drops(t, out);
        let held = self.qdisc.qlen() as u64;
        self.counters.peak_qdisc_pkts = self.counters.peak_qdisc_pkts.max(held);
        self.kick(t, out);
        // An idle link takes the packet now, as the kernel's `qdisc_run` follows the enqueue
        // (the driver did, in `kick`; its wake-ups due at `t` run as they come).
        if !matches!(self.held, Held::Driver(_)) {
            self.advance_to(t, out);
        }
    }

    /// A packet arrives at `t` going `dir`, through a classify stage: the stage sees its
    /// bytes if it has any ([`Classify::snoop`]), then its metadata ([`Classify::classify`]),
    /// and either drops it here ([`PathDrop::Classify`]) or hands it on as [`DataPath::arrive`]
    /// does. The one place a stage runs, for every driver.
    pub fn arrive_classified(
        &mut self,
        mut packet: P,
        t: Nanos,
        stage: &mut dyn Classify,
        dir: Direction,
        out: &mut impl FnMut(Event<'_, P>),
    ) {
        let t = t.max(self.now);
        if let Some((frame, link)) = packet.frame() {
            stage.snoop(frame, link, packet.meta(), t);
        }
        if stage.classify(packet.meta_mut(), dir, t) == Admit::Pass {
            return self.arrive(packet, t, out);
        }
        self.advance_to(t.saturating_sub(1), out);
        self.now = t;
        self.counters.arrived += 1;
        self.counters.classify_dropped += 1;
        out(Event::Dropped {
            packet,
            reason: PathDrop::Classify,
            at: t,
        });
    }

    /// Ask the discipline again at `now` (e.g. its shaper's rate changed, so a packet it held
    /// back may go sooner): the driver's `netif_schedule`, unless the shaper's own wake-up is
    /// pending. Without a device the link already asks the discipline at every wake-up it
    /// named, so this only runs the path to `now`.
    pub fn retry(&mut self, now: Nanos, out: &mut impl FnMut(Event<'_, P>)) {
        let now = now.max(self.now);
        if matches!(self.held, Held::Driver(_)) {
            self.driver_advance(now.saturating_sub(1), out);
            self.now = now;
            self.driver_retry(now, out);
        } else {
            self.advance_to(now, out);
        }
    }

    /// Run the earliest wake-up if it is due by `now` (one only: see
    /// [`DataPath::take_armed`]); false if none is. Only the device stage arms its wake-ups
    /// one by one; the other stages run everything due, as [`DataPath::poll`] does.
    pub fn fire(&mut self, now: Nanos, out: &mut impl FnMut(Event<'_, P>)) -> bool {
        let now = now.max(self.now);
        if matches!(self.held, Held::Driver(_)) {
            let fired = self.driver_fire(now, out);
            self.now = now;
            fired
        } else {
            let due = self.next_wakeup().is_some_and(|t| t <= now);
            self.poll(now, out);
            due
        }
    }

    /// The times of the wake-ups armed since the last call, in the order they were armed
    /// (appended to `into`). A discrete-event host schedules one event per entry and calls
    /// [`DataPath::fire`] at each, so the path's wake-ups at one nanosecond run in their order
    /// among the host's other events. Without a device stage there are none: the host
    /// schedules [`DataPath::next_wakeup`].
    pub fn take_armed(&mut self, into: &mut Vec<Nanos>) {
        if let Some(r) = self.driver() {
            r.take_fresh(into);
        }
    }

    /// Something was queued at `t`: make sure the link will ask for it.
    fn kick(&mut self, t: Nanos, out: &mut impl FnMut(Event<'_, P>)) {
        if matches!(self.held, Held::Driver(_)) {
            return self.driver_kick(t, out);
        }
        if self.qdisc_next.is_none() {
            let free = match self.held {
                Held::Fifo(_) => t,
                _ => self.link.busy_until(),
            };
            self.qdisc_next = Some(t.max(free));
        }
    }

    /// Take `spec`, a classful discipline of another shape, in place at `t`
    /// ([`Qdisc::reshape`]: htb's classes added, removed or moved): the packets stay queued;
    /// those a changed leaf refuses are counted and handed out as drops. The path is first run
    /// up to `t`. None when the running discipline cannot (then replace it).
    pub fn reshape_qdisc(
        &mut self,
        spec: &crate::qdisc::spec::QdiscSpec,
        t: Nanos,
        out: &mut impl FnMut(Event<'_, P>),
    ) -> Option<crate::qdisc::htb::Reshaped> {
        let t = t.max(self.now);
        self.advance_to(t, out);
        self.drain_qdisc_drops(t, out);
        let r = self.qdisc.reshape(spec)?;
        self.drain_qdisc_drops(t, out);
        if self.qdisc.qlen() > 0 {
            self.kick(t, out);
        }
        Some(r)
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
        if self.qdisc.qlen() > 0 {
            self.kick(t, out);
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
        let ring = match &self.held {
            Held::Driver(r) => r.next_timer(),
            _ => None,
        };
        [
            self.qdisc_next,
            self.buffer_next,
            ring,
            self.link.next_release(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Handed in (duplicates included) = dropped + lost + over limit + dropped by a modem +
    /// queued + delivered.
    pub fn accounted(&self) -> bool {
        let (c, w) = (self.counters, self.wire_counters());
        c.arrived + w.duplicated
            == c.classify_dropped
                + c.qdisc_dropped
                + c.buffer_dropped
                + w.lost
                + w.overlimit
                + self.link.modem_dropped()
                + self.queued() as u64
                + w.delivered
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
mod tests;
