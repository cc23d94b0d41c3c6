//! The TX ring stage: the driver fills the ring from the discipline while a descriptor is free
//! and BQL allows ([`Device::may_fill`]); the link takes the ring's head whenever it is idle.
//! Three kinds of wake-up, kept in one small table in the order they were armed (so that two
//! at the same nanosecond run in that order, as a discrete-event simulator's queue runs them):
//! a transmission's completion (BQL hears of it, or arms the moderated interrupt), the
//! interrupt, and a shaper's `NotBefore`. The same sequence as a driver's
//! `ndo_start_xmit` / TX-completion / `netif_schedule` in Linux.

use super::{DataPath, Event, Held};
use crate::device::Device;
use crate::packet::{Nanos, Packet};
use crate::qdisc::{Dequeue, Qdisc};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A transmission ended.
    TxDone,
    /// The moderated completion interrupt.
    Irq,
    /// A shaper's wake-up.
    Wake,
}

/// The ring, its BQL state, and its armed wake-ups.
pub(super) struct Ring<P> {
    pub(super) dev: Device<P>,
    /// (when, order armed, what), sorted.
    timers: Vec<(Nanos, u64, Kind)>,
    armed: u64,
    /// The shaper's wake-up, while one is armed.
    pub(super) wake_at: Option<Nanos>,
}

impl<P: Packet> Ring<P> {
    pub(super) fn new(dev: Device<P>) -> Self {
        Ring {
            dev,
            timers: Vec::new(),
            armed: 0,
            wake_at: None,
        }
    }

    fn arm(&mut self, at: Nanos, kind: Kind) {
        self.armed += 1;
        let key = (at, self.armed);
        let i = self.timers.partition_point(|&(t, s, _)| (t, s) <= key);
        self.timers.insert(i, (at, self.armed, kind));
    }

    fn take_due(&mut self, t: Nanos) -> Option<(Nanos, Kind)> {
        let &(at, _, kind) = self.timers.first().filter(|x| x.0 <= t)?;
        self.timers.remove(0);
        Some((at, kind))
    }

    /// The earliest armed wake-up.
    pub(super) fn next_timer(&self) -> Option<Nanos> {
        self.timers.first().map(|x| x.0)
    }
}

impl<P: Packet + Clone, Q: Qdisc<P>> DataPath<P, Q> {
    fn ring(&mut self) -> Option<&mut Ring<P>> {
        match &mut self.held {
            Held::Ring(r) => Some(r),
            _ => None,
        }
    }

    /// Run the ring's wake-ups due by `t`, in order.
    pub(super) fn ring_advance(&mut self, t: Nanos, out: &mut impl FnMut(Event<'_, P>)) {
        while let Some((at, kind)) = self.ring().and_then(|r| r.take_due(t)) {
            self.now = self.now.max(at);
            let Some(r) = self.ring() else { return };
            match kind {
                Kind::TxDone => {
                    if let Some(irq) = r.dev.completed(at) {
                        r.arm(irq, Kind::Irq);
                    }
                }
                Kind::Irq => r.dev.interrupt(at),
                Kind::Wake => r.wake_at = None,
            }
            self.ring_transmit(at, out);
        }
    }

    /// The driver fills the ring; if the link is idle it takes the ring's head.
    pub(super) fn ring_transmit(&mut self, now: Nanos, out: &mut impl FnMut(Event<'_, P>)) {
        self.ring_fill(now, out);
        if self.link.busy_until() > now {
            return;
        }
        let Some(r) = self.ring() else { return };
        let Some(p) = r.dev.next_to_send() else {
            return;
        };
        r.dev.sending(p.meta().len);
        let done = self.enter_link(p, now, out);
        if let Some(r) = self.ring() {
            r.arm(done, Kind::TxDone);
        }
        // A descriptor freed: the driver may take another packet.
        self.ring_fill(now, out);
    }

    fn ring_fill(&mut self, now: Nanos, out: &mut impl FnMut(Event<'_, P>)) {
        while self.ring().is_some_and(|r| r.dev.may_fill()) {
            let Some(p) = self.ring_take(now, out) else {
                break;
            };
            if let Some(r) = self.ring() {
                r.dev.fill(p);
            }
        }
    }

    /// One packet from the discipline for the ring, or a wake-up armed for its shaper.
    fn ring_take(&mut self, now: Nanos, out: &mut impl FnMut(Event<'_, P>)) -> Option<P> {
        let got = match self.qdisc.dequeue(now) {
            Dequeue::Packet(p) => {
                out(Event::Dequeued { packet: &p, at: now });
                Some(p)
            }
            Dequeue::NotBefore(t) => {
                if let Some(r) = self.ring().filter(|r| r.wake_at.is_none_or(|w| w > t)) {
                    r.wake_at = Some(t);
                    r.arm(t, Kind::Wake);
                }
                None
            }
            Dequeue::Empty => None,
        };
        self.drain_qdisc_drops(now, out);
        got
    }
}
