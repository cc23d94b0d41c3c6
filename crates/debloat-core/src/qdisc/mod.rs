//! The interface every queue discipline implements, and the drop reasons they report.
//!
//! # Driving contract (sans-IO)
//!
//! * Inputs: [`Qdisc::enqueue`] hands over a packet at time `now`; [`Qdisc::dequeue`] asks for
//!   the next packet to transmit at `now`.
//! * Outputs: `dequeue` returns a packet, [`Dequeue::Empty`], or [`Dequeue::NotBefore`] (a shaper
//!   holds the head: call again at that time). Packets the discipline discards — the arriving one
//!   or any queued one — come out of [`Qdisc::take_dropped`], which the driver drains after every
//!   `enqueue` and `dequeue`.
//! * `now` never goes backwards between calls. No call reads a clock, allocates per packet in
//!   steady state, or panics on any packet.
//! * Accounting: every packet handed to `enqueue` is, at any moment, exactly one of: returned by
//!   `dequeue`, returned by `take_dropped`, or counted in `qlen()`.

pub mod cake;
pub mod class_stats;
pub mod codel;
pub mod deadline;
pub mod dualpi2;
pub mod fifo;
pub mod fq;
pub mod fq_codel;
pub mod fq_pie;
pub mod htb;
pub mod list;
pub mod pfifo_fast;
pub mod pie;
pub mod pktq;
pub mod ratecfg;
pub mod spec;
pub mod stats;
pub mod tbf;
pub mod words;

use crate::packet::{Nanos, Packet};
use crate::qdisc::stats::{ClassCounters, ClassStats, QdiscStats};
use std::collections::VecDeque;

/// Why a discipline dropped a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// Queue length limit (packets or bytes) reached.
    Overlimit,
    /// Memory limit (truesize) reached.
    Overmemory,
    /// The AQM (CoDel / COBALT) decided to drop.
    Aqm,
    /// COBALT's BLUE component dropped an unresponsive flow's packet.
    Blue,
    /// CAKE's ACK filter removed a redundant ACK.
    AckFilter,
    /// The packet's sojourn exceeded the `deadline` discipline's limit.
    Deadline,
}

impl DropReason {
    /// The name used in fates files and statistics.
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::Overlimit => "overlimit",
            DropReason::Overmemory => "overmemory",
            DropReason::Aqm => "aqm",
            DropReason::Blue => "blue",
            DropReason::AckFilter => "ack_filter",
            DropReason::Deadline => "deadline",
        }
    }
}

/// A packet the discipline discarded, with the reason.
#[derive(Debug)]
pub struct Dropped<P> {
    /// The packet.
    pub packet: P,
    /// Why.
    pub reason: DropReason,
}

/// What `dequeue` returns.
#[derive(Debug)]
pub enum Dequeue<P> {
    /// A packet to transmit now.
    Packet(P),
    /// Nothing queued.
    Empty,
    /// Packets are queued but the shaper holds them until this time.
    NotBefore(Nanos),
}

impl<P> Dequeue<P> {
    /// The packet, if one was returned.
    pub fn packet(self) -> Option<P> {
        match self {
            Dequeue::Packet(p) => Some(p),
            _ => None,
        }
    }
}

/// What `enqueue` reports (Linux's NET_XMIT codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Queued; nothing of this flow was dropped.
    Queued,
    /// Queued, but the discipline dropped packets of the same flow to make room (NET_XMIT_CN).
    Congested,
    /// The arriving packet itself was dropped (NET_XMIT_DROP).
    Dropped,
}

/// A queue discipline.
pub trait Qdisc<P: Packet> {
    /// Hand a packet to the discipline at `now`.
    fn enqueue(&mut self, packet: P, now: Nanos) -> Verdict;
    /// Take the next packet to transmit at `now`.
    fn dequeue(&mut self, now: Nanos) -> Dequeue<P>;
    /// Take one packet dropped since the last call, oldest first.
    fn take_dropped(&mut self) -> Option<Dropped<P>>;
    /// Packets queued.
    fn qlen(&self) -> usize;
    /// Bytes queued (sum of `len`).
    fn backlog(&self) -> u64;
    /// Statistics in `tc -s qdisc show` terms.
    fn stats(&self) -> QdiscStats;
    /// Change the shaper's rate at run time without touching the queued packets (`tc qdisc
    /// change … bandwidth R`); bit/s, `None` = unlimited. Returns false for disciplines that
    /// have no shaper (the default).
    fn set_bandwidth(&mut self, _rate_bps: Option<u64>) -> bool {
        false
    }
    /// Take every queued packet out, neither sent nor dropped, for a discipline that replaces
    /// this one (`gateway reload`): each flow's packets in their order, flows taken in turn one
    /// packet at a time, as a round of the scheduler would. The discipline is empty after.
    fn drain(&mut self, out: &mut dyn FnMut(P));
    /// A classful discipline's classes, as `tc -s class show` shows them (by classid); none
    /// for a classless one (the default).
    fn classes(&self) -> Vec<ClassStats> {
        Vec::new()
    }
    /// Every leaf class's counters (a classful discipline's; nothing by default).
    fn leaf_counters(&self, _out: &mut Vec<ClassCounters>) {}
    /// Run class `minor` (1:N) at `rate_bps` and `ceil_bps` from now on, its other words as
    /// configured (`tc class change … rate R ceil C`), without changing the configured spec
    /// that statistics show: a worker's share of an htb tree split between workers. False for
    /// a classless discipline (the default) or no such class.
    fn set_class_rates(&mut self, _minor: u16, _rate_bps: u64, _ceil_bps: u64) -> bool {
        false
    }
    /// One class of a classful discipline by its minor (1:N), as [`Qdisc::classes`] shows it;
    /// None for a classless one (the default) or no such class.
    fn class(&self, _minor: u16) -> Option<ClassStats> {
        None
    }
    /// Take `new` in place, as `tc class change` does, when it differs from the running spec
    /// only in what can change without moving a packet (an htb's rates); the number of things
    /// changed, or None when it cannot (the default: the caller replaces the discipline).
    fn change(&mut self, _new: &spec::QdiscSpec) -> Option<usize> {
        None
    }
    /// Take `new`, of another shape, in place: a classful discipline's classes added, removed
    /// or moved with every queued packet kept (htb: `htb/reshape.rs`); what changed, or None
    /// when it cannot (the default: the caller replaces the discipline).
    fn reshape(&mut self, _new: &spec::QdiscSpec) -> Option<htb::Reshaped> {
        None
    }
}

/// One packet from each queue in turn until all are empty: the order a round-robin scheduler
/// would interleave them in. `pop(i)` takes queue `i`'s head.
pub(crate) fn drain_in_turn<P>(
    mut queues: Vec<usize>,
    mut pop: impl FnMut(usize) -> Option<P>,
    out: &mut dyn FnMut(P),
) {
    while !queues.is_empty() {
        queues.retain(|&i| match pop(i) {
            Some(p) => {
                out(p);
                true
            }
            None => false,
        });
    }
}

impl<P: Packet, Q: Qdisc<P> + ?Sized> Qdisc<P> for Box<Q> {
    fn enqueue(&mut self, packet: P, now: Nanos) -> Verdict {
        (**self).enqueue(packet, now)
    }
    fn dequeue(&mut self, now: Nanos) -> Dequeue<P> {
        (**self).dequeue(now)
    }
    fn take_dropped(&mut self) -> Option<Dropped<P>> {
        (**self).take_dropped()
    }
    fn qlen(&self) -> usize {
        (**self).qlen()
    }
    fn backlog(&self) -> u64 {
        (**self).backlog()
    }
    fn stats(&self) -> QdiscStats {
        (**self).stats()
    }
    fn set_bandwidth(&mut self, rate_bps: Option<u64>) -> bool {
        (**self).set_bandwidth(rate_bps)
    }
    fn drain(&mut self, out: &mut dyn FnMut(P)) {
        (**self).drain(out)
    }
    fn classes(&self) -> Vec<ClassStats> {
        (**self).classes()
    }
    fn change(&mut self, new: &spec::QdiscSpec) -> Option<usize> {
        (**self).change(new)
    }
    fn reshape(&mut self, new: &spec::QdiscSpec) -> Option<htb::Reshaped> {
        (**self).reshape(new)
    }
    fn class(&self, minor: u16) -> Option<ClassStats> {
        (**self).class(minor)
    }
    fn leaf_counters(&self, out: &mut Vec<ClassCounters>) {
        (**self).leaf_counters(out)
    }
    fn set_class_rates(&mut self, minor: u16, rate_bps: u64, ceil_bps: u64) -> bool {
        (**self).set_class_rates(minor, rate_bps, ceil_bps)
    }
}

/// The outbox of dropped packets each discipline keeps. Its capacity is reused, so it does not
/// allocate once warm.
#[derive(Debug)]
pub struct DropBox<P> {
    queue: VecDeque<Dropped<P>>,
}

impl<P> Default for DropBox<P> {
    fn default() -> Self {
        DropBox {
            queue: VecDeque::with_capacity(64),
        }
    }
}

impl<P> DropBox<P> {
    /// Record a drop.
    pub fn push(&mut self, packet: P, reason: DropReason) {
        self.queue.push_back(Dropped { packet, reason });
    }
    /// Take the oldest recorded drop.
    pub fn take(&mut self) -> Option<Dropped<P>> {
        self.queue.pop_front()
    }
    /// Drops not yet taken.
    pub fn len(&self) -> usize {
        self.queue.len()
    }
    /// True when no drop is waiting.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}
