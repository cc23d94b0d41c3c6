//! The wire behind the link's transmitter: netem's impairments and the delay line, sans-IO.
//!
//! A packet entering the link meets the loss model first ([`Wire::admit`]: lost, marked, or
//! on); one that finished serialising at `end` is handed to [`Wire::place`], where netem's other
//! decisions are made in netem's order (see [`super::netem`]) and each copy that survives is
//! held until its release time; [`Wire::pop_due`] hands packets out when due, reordered ones first (netem
//! hands its requeued packets out before the delayed ones), delayed ones gated by `slot`.
//!
//! Every packet placed is exactly one of: lost (the loss model; or, for a packet without bytes,
//! corrupted — the receiver's checksum would discard it), dropped over `limit`, held, or handed
//! out; a duplicate counts as one more packet placed ([`WireCounters`]).
//!
//! Deviation from netem (also in [`super::netem`]): jitter never reorders — a delayed packet
//! leaves no earlier than the delayed packet before it.

use super::netem::{Emulation, Netem, Placement};
use crate::packet::{Nanos, Packet};
use serde::Serialize;
use std::collections::VecDeque;

/// What the wire did to the packets placed on it.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct WireCounters {
    /// Packets lost (the loss model), and packets without bytes that were corrupted.
    pub lost: u64,
    /// Packets marked CE by the loss model instead of lost (`ecn`).
    pub ecn_marked: u64,
    /// Packets with one bit flipped (`corrupt`).
    pub corrupted: u64,
    /// Packets sent ahead of delayed ones (`reorder`).
    pub reordered: u64,
    /// Packets dropped because the wire held `limit` packets.
    pub overlimit: u64,
    /// Extra copies made by `duplicate`.
    pub duplicated: u64,
    /// Packets handed out at the far end.
    pub delivered: u64,
}

/// The wire: netem's decisions plus a fixed propagation delay.
pub struct Wire<P> {
    netem: Netem,
    propagation_ns: Nanos,
    /// Delayed packets, in release order.
    delayed: VecDeque<(Nanos, P)>,
    /// Reordered packets (no netem delay), in release order.
    express: VecDeque<(Nanos, P)>,
    last_release: Nanos,
    /// No impairment at all (the simulator's usual wire): every packet takes the fast path,
    /// which draws no random number and so leaves everything as the full path would.
    plain: bool,
    /// Counters.
    pub counters: WireCounters,
}

/// True when `emu` does nothing to a packet but (possibly) delay it by nothing: no loss,
/// duplication, corruption, reordering, delay, jitter, slots or limit.
fn is_plain(emu: &Emulation) -> bool {
    emu.loss == super::netem::Loss::None
        && !emu.duplicate.is_set()
        && !emu.corrupt.is_set()
        && !emu.reorder.is_set()
        && emu.delay_ns == 0
        && emu.jitter_ns == 0
        && emu.slot.is_none()
        && emu.limit.is_none()
}

impl<P: Packet + Clone> Wire<P> {
    /// A wire with these impairments (`emu`'s rate, framing and buffer are the link's, not
    /// the wire's), `propagation_ns` of fixed delay on top, seeded with `seed` unless the
    /// spec names its own.
    pub fn new(emu: Emulation, propagation_ns: Nanos, seed: u64) -> Wire<P> {
        Wire {
            plain: is_plain(&emu),
            netem: Netem::new(emu, seed),
            propagation_ns,
            delayed: VecDeque::new(),
            express: VecDeque::new(),
            last_release: 0,
            counters: WireCounters::default(),
        }
    }

    /// The impairments.
    pub fn emulation(&self) -> &Emulation {
        self.netem.emulation()
    }

    /// New impairments from now on (their random state starts afresh, as `tc qdisc change …
    /// netem` does); packets already on the wire keep their release times.
    pub fn set_emulation(&mut self, emu: Emulation, seed: u64) {
        self.plain = is_plain(&emu);
        self.netem = Netem::new(emu, seed);
    }

    /// Packets held.
    pub fn len(&self) -> usize {
        self.delayed.len() + self.express.len()
    }

    /// Nothing held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A frame enters the link: netem's loss model (step 2). True when it goes on (CE-marked
    /// instead of lost with `ecn`); false when it is lost (counted). Draws nothing on a plain
    /// wire.
    pub fn admit(&mut self, p: &mut P) -> bool {
        if self.plain || !self.netem.lose() {
            return true;
        }
        if self.netem.emulation().ecn && p.set_ce() {
            self.counters.ecn_marked += 1;
            return true;
        }
        self.counters.lost += 1;
        false
    }

    /// The link started sending `p` (admitted: [`Wire::admit`]) at `now` and finishes at
    /// `end`: netem's other decisions, in netem's order. `released` is called with the release time of every copy placed on the
    /// wire (0, 1 or 2 of them).
    ///
    /// netem looks at its slot whenever it is dequeued, and the kernel dequeues right after
    /// every enqueue: so the slot is looked at here, as each packet is placed, and when the
    /// head is due ([`Wire::pop_due`]) — never at a driver's other polls, which would make the
    /// slots depend on how often a driver looks.
    pub fn place(&mut self, mut p: P, now: Nanos, end: Nanos, released: &mut impl FnMut(Nanos)) {
        if self.plain {
            p.write_back();
            let release = end
                .saturating_add(self.propagation_ns)
                .max(self.last_release);
            self.last_release = release;
            self.delayed.push_back((release, p));
            released(release);
            return;
        }
        self.place_copy(p, end, true, released);
        if let Some(&(due, _)) = self.delayed.front() {
            self.netem.slot_gate(due, now);
        }
    }

    fn place_copy(
        &mut self,
        mut p: P,
        end: Nanos,
        original: bool,
        released: &mut impl FnMut(Nanos),
    ) {
        // The original met the loss model as it entered the link; a copy meets it now.
        if !original && !self.admit(&mut p) {
            return;
        }
        p.write_back();
        let copy = (original && self.netem.duplicate()).then(|| p.clone());
        if self.corrupt(&mut p) {
            return;
        }
        if let Some(limit) = self.netem.emulation().limit {
            if self.len() >= limit as usize {
                // netem drops the packet and its copy-to-be together.
                self.counters.overlimit += 1;
                return;
            }
        }
        if let Some(copy) = copy {
            self.counters.duplicated += 1;
            self.place_copy(copy, end, false, released);
        }
        let end = end.saturating_add(self.propagation_ns);
        match self.netem.place() {
            Placement::Now => {
                self.counters.reordered += 1;
                self.express.push_back((end, p));
                released(end);
            }
            Placement::After(delay) => {
                // A negative draw (jitter above the delay) means "at once", as in netem; and
                // never reorder: a delayed packet leaves no earlier than the one before it.
                let release = end
                    .saturating_add_signed(delay)
                    .max(end)
                    .max(self.last_release);
                self.last_release = release;
                self.delayed.push_back((release, p));
                released(release);
            }
        }
    }

    /// netem's step 3. A packet with bytes gets one bit flipped and goes on; one without
    /// (a simulator's record) cannot carry the error, so it is lost as the receiver's checksum
    /// would lose it. True when the packet is gone.
    fn corrupt(&mut self, p: &mut P) -> bool {
        let hit = match p.bytes_mut() {
            Some(data) => self.netem.corrupt(data),
            None => self.netem.corrupt(&mut [0u8]),
        };
        if !hit {
            return false;
        }
        self.counters.corrupted += 1;
        if p.bytes_mut().is_none() {
            self.counters.lost += 1;
            return true;
        }
        false
    }

    /// The next packet due by `now`, if any (reordered packets first; delayed ones only while
    /// a slot is open).
    pub fn pop_due(&mut self, now: Nanos) -> Option<P> {
        if self.plain {
            if self.delayed.front().is_some_and(|(t, _)| *t <= now) {
                self.counters.delivered += 1;
                return self.delayed.pop_front().map(|(_, p)| p);
            }
            return None;
        }
        if self.express.front().is_some_and(|(t, _)| *t <= now) {
            self.counters.delivered += 1;
            return self.express.pop_front().map(|(_, p)| p);
        }
        let due = self.delayed.front()?.0;
        if due > now || self.netem.slot_gate(due, now) > now {
            return None;
        }
        let (_, p) = self.delayed.pop_front()?;
        self.netem.slot_sent(p.meta().len as usize, now);
        self.counters.delivered += 1;
        Some(p)
    }

    /// When the next packet may leave, as things stand (None: nothing held).
    pub fn next_release(&self) -> Option<Nanos> {
        let express = self.express.front().map(|(t, _)| *t);
        let delayed = self.delayed.front().map(|(t, _)| self.netem.slot_wait(*t));
        express.into_iter().chain(delayed).min()
    }
}
