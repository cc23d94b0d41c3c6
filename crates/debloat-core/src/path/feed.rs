//! The direct and drop-tail stages: the link asks the discipline (or the buffer in front of
//! it) whenever it is idle; the device stage's engine is `driver.rs`. Both dispatch from here.

use super::{DataPath, Event, Held, PathDrop};
use crate::packet::{Nanos, Packet};
use crate::qdisc::{Dequeue, Qdisc};

impl<P: Packet + Clone, Q: Qdisc<P>> DataPath<P, Q> {
    /// Run the stages up to `t`, in time order.
    pub(super) fn advance_to(&mut self, t: Nanos, out: &mut impl FnMut(Event<'_, P>)) {
        if matches!(self.held, Held::Driver(_)) {
            self.driver_advance(t, out);
        } else {
            self.feed_advance(t, out);
        }
        self.now = self.now.max(t);
    }

    /// The discipline and the buffer up to `t` (the buffer first on a tie: what it holds was
    /// there before what the discipline hands it now).
    fn feed_advance(&mut self, t: Nanos, out: &mut impl FnMut(Event<'_, P>)) {
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
    }

    fn attempt_qdisc(&mut self, at: Nanos, out: &mut impl FnMut(Event<'_, P>)) {
        self.now = self.now.max(at);
        let got = self.qdisc.dequeue(at);
        if let Dequeue::Packet(p) = &got {
            out(Event::Dequeued { packet: p, at });
        }
        self.drain_qdisc_drops(at, out);
        let buffered = matches!(self.held, Held::Fifo(_));
        self.qdisc_next = match got {
            Dequeue::Packet(p) if buffered => {
                self.buffer_enqueue(p, at, out);
                Some(at)
            }
            Dequeue::Packet(p) => Some(self.enter_link(p, at, out, &mut |_| {})),
            Dequeue::Empty => None,
            Dequeue::NotBefore(t) => Some(t.max(at + 1)),
        };
    }

    fn buffer_enqueue(&mut self, mut p: P, at: Nanos, out: &mut impl FnMut(Event<'_, P>)) {
        if !self.link.admit(&mut p) {
            return Self::lost(p, at, out);
        }
        let Held::Fifo(buffer) = &mut self.held else {
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
        let got = match &mut self.held {
            Held::Fifo(b) => Some(b.dequeue(at)),
            _ => None,
        };
        self.buffer_next = match got {
            Some(Dequeue::Packet(p)) => Some(self.send(p, at, out, &mut |_| {})),
            _ => None,
        };
    }

    /// `p` enters the link at `at` (it is idle): the loss model decides, then the transmitter
    /// takes it; `released` hears each copy's release time. Returns when the link is free
    /// again (`at` for a lost packet).
    pub(super) fn enter_link(
        &mut self,
        mut p: P,
        at: Nanos,
        out: &mut impl FnMut(Event<'_, P>),
        released: &mut impl FnMut(Nanos),
    ) -> Nanos {
        if self.link.admit(&mut p) {
            self.send(p, at, out, released)
        } else {
            Self::lost(p, at, out);
            at
        }
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
    fn send(
        &mut self,
        p: P,
        at: Nanos,
        out: &mut impl FnMut(Event<'_, P>),
        released: &mut impl FnMut(Nanos),
    ) -> Nanos {
        let end = self.link.tx_end(p.meta(), at);
        out(Event::Sent {
            packet: &p,
            start: at,
            end,
        });
        self.link.transmit_until(p, at, end, released);
        end
    }
}
