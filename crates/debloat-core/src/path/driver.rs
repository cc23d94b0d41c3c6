//! The device stage ([`super::Stage::Device`]): a driver in front of the transmitter, with a
//! TX ring (of 0 descriptors: none) it fills from the discipline while a descriptor is free and
//! BQL allows ([`Device::may_fill`]); the transmitter takes the ring's head (or, with no ring,
//! the discipline's next packet) whenever it is idle. The same sequence as a Linux driver's
//! `ndo_start_xmit`, TX completion and `netif_schedule`.
//!
//! Four kinds of wake-up, kept in one table in the order they were armed, so that two at the
//! same nanosecond run in that order: a transmission's completion (BQL hears of it, or arms
//! the moderated interrupt), the interrupt, a shaper's `NotBefore`, and a copy's release at the
//! far end of the wire. A discrete-event host (the simulator) learns of each as it is armed
//! ([`DataPath::take_armed`]) and runs them one at a time ([`DataPath::fire`]) among its own
//! events; [`DataPath::poll`] runs every one due.

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
    /// A copy on the wire is due at the far end.
    Release,
}

/// The driver's device, its armed wake-ups, and those not yet reported.
pub(super) struct Driver<P> {
    pub(super) dev: Device<P>,
    /// (when, order armed, what), sorted.
    timers: Vec<(Nanos, u64, Kind)>,
    armed: u64,
    /// Times armed since the host last asked, in arming order.
    fresh: Vec<Nanos>,
    /// The shaper's wake-up, while one is armed.
    wake_at: Option<Nanos>,
}

impl<P: Packet> Driver<P> {
    pub(super) fn new(dev: Device<P>) -> Self {
        Driver {
            dev,
            timers: Vec::new(),
            armed: 0,
            fresh: Vec::new(),
            wake_at: None,
        }
    }

    fn arm(&mut self, at: Nanos, kind: Kind) {
        self.armed += 1;
        let key = (at, self.armed);
        let i = self.timers.partition_point(|&(t, s, _)| (t, s) <= key);
        self.timers.insert(i, (at, self.armed, kind));
        self.fresh.push(at);
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

    /// The wake-ups armed since the last call, in arming order.
    pub(super) fn take_fresh(&mut self, into: &mut Vec<Nanos>) {
        into.append(&mut self.fresh);
    }
}

impl<P: Packet + Clone, Q: Qdisc<P>> DataPath<P, Q> {
    pub(super) fn driver(&mut self) -> Option<&mut Driver<P>> {
        match &mut self.held {
            Held::Driver(r) => Some(r),
            _ => None,
        }
    }

    /// Run the wake-ups due by `t`, in order.
    pub(super) fn driver_advance(&mut self, t: Nanos, out: &mut impl FnMut(Event<'_, P>)) {
        while self.driver_fire(t, out) {}
    }

    /// Run the first wake-up if it is due by `t`; false if none is.
    pub(super) fn driver_fire(&mut self, t: Nanos, out: &mut impl FnMut(Event<'_, P>)) -> bool {
        let Some((at, kind)) = self.driver().and_then(|r| r.take_due(t)) else {
            return false;
        };
        self.now = self.now.max(at);
        let Some(r) = self.driver() else { return false };
        match kind {
            Kind::TxDone => {
                if let Some(irq) = r.dev.completed(at) {
                    r.arm(irq, Kind::Irq);
                }
            }
            Kind::Irq => r.dev.interrupt(at),
            Kind::Wake => r.wake_at = None,
            Kind::Release => {
                if let Some(packet) = self.link.pop_due(at) {
                    out(Event::Delivered { packet, at });
                } else if let Some(next) = self.link.next_release() {
                    // netem's `slot` held the packet due: look again when it may leave.
                    if let Some(r) = self.driver() {
                        r.arm(next, Kind::Release);
                    }
                }
                return true;
            }
        }
        self.driver_transmit(at, out);
        true
    }

    /// A packet was queued at `now`: the driver runs the queue if the transmitter or the ring
    /// can take one and no shaper's wake-up is pending (the discipline is asked then).
    pub(super) fn driver_kick(&mut self, now: Nanos, out: &mut impl FnMut(Event<'_, P>)) {
        let idle = self.link.busy_until() <= now;
        if self
            .driver()
            .is_some_and(|r| (idle || r.dev.has_room()) && r.wake_at.is_none())
        {
            self.driver_transmit(now, out);
        }
    }

    /// The shaper's rate changed: ask the discipline again unless its wake-up is pending.
    pub(super) fn driver_retry(&mut self, now: Nanos, out: &mut impl FnMut(Event<'_, P>)) {
        if self.driver().is_some_and(|r| r.wake_at.is_none()) {
            self.driver_transmit(now, out);
        }
    }

    /// The driver fills the ring; if the transmitter is idle it takes the next packet.
    fn driver_transmit(&mut self, now: Nanos, out: &mut impl FnMut(Event<'_, P>)) {
        let Some(ring) = self.driver().map(|r| r.dev.has_ring()) else {
            return;
        };
        self.driver_fill(now, out);
        if self.link.busy_until() > now {
            return;
        }
        let next = if ring {
            self.driver().and_then(|r| r.dev.next_to_send())
        } else {
            self.driver_take(now, out)
        };
        let Some(p) = next else { return };
        if let Some(r) = self.driver() {
            r.dev.sending(p.meta().len);
        }
        let (mut copies, mut n) = ([0; 2], 0);
        let done = self.enter_link(p, now, out, &mut |t| {
            if let Some(slot) = copies.get_mut(n) {
                *slot = t;
                n += 1;
            }
        });
        if let Some(r) = self.driver() {
            // The completion is armed before the copies' releases.
            r.arm(done, Kind::TxDone);
            for &t in &copies[..n] {
                r.arm(t, Kind::Release);
            }
        }
        if ring {
            // A descriptor freed: the driver may take another packet.
            self.driver_fill(now, out);
        }
    }

    fn driver_fill(&mut self, now: Nanos, out: &mut impl FnMut(Event<'_, P>)) {
        while self.driver().is_some_and(|r| r.dev.may_fill()) {
            let Some(p) = self.driver_take(now, out) else {
                break;
            };
            if let Some(r) = self.driver() {
                r.dev.fill(p);
            }
        }
    }

    /// One packet from the discipline, or a wake-up armed for its shaper.
    fn driver_take(&mut self, now: Nanos, out: &mut impl FnMut(Event<'_, P>)) -> Option<P> {
        let got = match self.qdisc.dequeue(now) {
            Dequeue::Packet(p) => {
                out(Event::Dequeued {
                    packet: &p,
                    at: now,
                });
                Some(p)
            }
            Dequeue::NotBefore(t) => {
                if let Some(r) = self.driver().filter(|r| r.wake_at.is_none_or(|w| w > t)) {
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::{DataPath, Event, Stage};
    use crate::device::{dql, DeviceConfig};
    use crate::link::Link;
    use crate::packet::{Nanos, Record};
    use crate::qdisc::Qdisc;
    use crate::testutil::{addr, pkt_in};
    use crate::{FlowHasher, QdiscSpec};
    use std::collections::BTreeMap;

    type Path = DataPath<Record, Box<dyn Qdisc<Record>>>;

    fn path(spec: &str, netem: &str, dev: DeviceConfig) -> Path {
        let q = spec
            .parse::<QdiscSpec>()
            .unwrap()
            .build(FlowHasher::new([1, 2]), 1);
        let link = Link::new(netem.parse().unwrap(), 1_000_000, 7);
        DataPath::with_stage(q, Stage::Device(dev), link)
    }

    fn devices() -> [DeviceConfig; 3] {
        [
            DeviceConfig::default(),
            DeviceConfig {
                ring: 64,
                bql: Some(dql::Config::default()),
                coalesce_ns: 0,
            },
            DeviceConfig {
                ring: 256,
                bql: Some(dql::Config::default()),
                coalesce_ns: 1_000_000,
            },
        ]
    }

    /// 600 packets of 4 flows, bursts of 3 every 2 ms (12 Mbit/s, more than the 10 Mbit/s link).
    fn arrivals() -> impl Iterator<Item = (Nanos, Record)> {
        (0..600u64).map(|i| {
            let f = crate::flow::FlowKey::ip(addr(0, (i % 4) as u8), addr(1, 1), 1000, 80, 17);
            ((i / 3) * 2_000_000, pkt_in(i, 1000, f))
        })
    }

    /// Driven by `poll` (as the gateway drives a path) and driven one wake-up at a time from
    /// an event queue (as the simulator does): the same packets at the same nanoseconds, and
    /// every packet accounted for at every step.
    #[test]
    fn fired_one_at_a_time_or_polled_a_device_path_delivers_the_same() {
        let netem = "rate 10Mbit loss 2% duplicate 1% delay 1ms 500us";
        for spec in ["pfifo limit 100", "fq_codel", "cake bandwidth 8Mbit"] {
            for dev in devices() {
                let polled = {
                    let mut p = path(spec, netem, dev);
                    let mut got = Vec::new();
                    let mut on = |e: Event<'_, Record>| {
                        if let Event::Delivered { packet, at } = e {
                            got.push((packet.id, at));
                        }
                    };
                    for (t, r) in arrivals() {
                        while let Some(w) = p.next_wakeup().filter(|&w| w < t) {
                            p.poll(w, &mut on);
                        }
                        p.arrive(r, t, &mut on);
                        assert!(p.accounted(), "{spec} {dev:?}");
                    }
                    p.finish(&mut on);
                    assert!(p.accounted() && p.queued() == 0, "{spec} {dev:?}");
                    got
                };
                assert_eq!(fired(spec, netem, dev), polled, "{spec} {dev:?}");
                assert!(polled.len() > 300, "{spec} {dev:?}: {}", polled.len());
            }
        }
    }

    /// A minimal discrete-event host: one event per armed wake-up, ties in arming order.
    #[derive(Default)]
    struct Host {
        events: BTreeMap<(Nanos, u64), ()>,
        seq: u64,
        armed: Vec<Nanos>,
        got: Vec<(u64, Nanos)>,
    }

    impl Host {
        fn schedule(&mut self, p: &mut Path) {
            p.take_armed(&mut self.armed);
            for t in self.armed.drain(..) {
                self.seq += 1;
                self.events.insert((t, self.seq), ());
            }
        }

        fn run_until(&mut self, p: &mut Path, t: Nanos) {
            while let Some(&(at, s)) = self.events.keys().next().filter(|k| k.0 < t) {
                self.events.remove(&(at, s));
                let got = &mut self.got;
                let fired = p.fire(at, &mut |e| {
                    if let Event::Delivered { packet, at } = e {
                        got.push((packet.id, at));
                    }
                });
                assert!(fired, "an armed wake-up at {at} found nothing due");
                self.schedule(p);
            }
        }
    }

    fn fired(spec: &str, netem: &str, dev: DeviceConfig) -> Vec<(u64, Nanos)> {
        let mut p = path(spec, netem, dev);
        let mut h = Host::default();
        for (t, r) in arrivals() {
            h.run_until(&mut p, t);
            let got = &mut h.got;
            p.arrive(r, t, &mut |e| {
                if let Event::Delivered { packet, at } = e {
                    got.push((packet.id, at));
                }
            });
            h.schedule(&mut p);
        }
        h.run_until(&mut p, Nanos::MAX);
        assert!(p.accounted() && p.queued() == 0);
        h.got
    }

    /// A shaper behind the driver: its `NotBefore` is a wake-up, so a 1 Mbit/s cake on a
    /// 10 Mbit/s link with no ring sends a packet every 8 ms, never sooner, and loses no turn
    /// (never later); what it does not send, its AQM dropped.
    #[test]
    fn a_shapers_wake_up_paces_the_driver() {
        let mut p = path(
            "cake bandwidth 1Mbit besteffort",
            "rate 10Mbit",
            devices()[0],
        );
        let mut at = Vec::new();
        let mut on = |e: Event<'_, Record>| {
            if let Event::Sent { start, .. } = e {
                at.push(start);
            }
        };
        for (_, r) in arrivals().take(100) {
            p.arrive(r, 0, &mut on);
        }
        p.finish(&mut on);
        let dropped = p.counters().qdisc_dropped as usize;
        assert_eq!(at.len() + dropped, 100);
        assert!(at.len() > 50, "{} sent", at.len());
        // cake counts 1000 B (no overhead set) at 1 Mbit/s: 8 ms a packet.
        for w in at.windows(2) {
            assert_eq!(w[1] - w[0], 8_000_000, "{at:?}");
        }
    }
}
