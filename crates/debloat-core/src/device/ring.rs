//! A network device's transmit side, sans-IO: the TX ring the driver fills from the qdisc,
//! limited in bytes by BQL ([`super::dql`]), and the completions that free it — reported per
//! packet, or batched by an interrupt every `coalesce_ns` as a NIC's interrupt moderation does.
//! `ring: 0` means no device queue: the qdisc feeds the link directly.
//!
//! Driving contract: the driver asks [`Device::may_fill`] and hands over packets with
//! [`Device::fill`]; the link takes the next one with [`Device::next_to_send`] when idle and
//! reports its start with [`Device::sending`]; when a transmission ends, [`Device::completed`]
//! reports it to BQL now or says when the interrupt that reports it fires
//! ([`Device::interrupt`] then). Time never goes backwards.
//!
//! Linux's order, kept here: a packet's bytes count against BQL from the moment the driver takes
//! it (`netdev_tx_sent_queue`) until its completion is processed (`netdev_tx_completed_queue`),
//! so with coalesced interrupts the limit sees a whole interrupt's worth of bytes at once.

use super::dql::{self, Dql};
use crate::packet::{Nanos, Packet};
use std::collections::VecDeque;

/// A device's transmit queue as configured.
#[derive(Clone, Copy, Debug, Default)]
pub struct DeviceConfig {
    /// TX ring descriptors (packets); 0 = none.
    pub ring: usize,
    /// Byte queue limits on the ring.
    pub bql: Option<dql::Config>,
    /// Completion interrupts every this many ns (0 = as each packet finishes).
    pub coalesce_ns: Nanos,
}

/// The ring, its BQL state and its pending completions.
#[derive(Debug)]
pub struct Device<P> {
    cfg: DeviceConfig,
    ring: VecDeque<P>,
    dql: Option<Dql>,
    /// Lengths of transmissions whose completion is pending, in order (a new transmission can
    /// start at the very instant the previous one ends, before its completion is handled).
    sending: VecDeque<u32>,
    /// Bytes completed since the last interrupt.
    uncompleted: u32,
    irq_armed: bool,
}

impl<P: Packet> Device<P> {
    /// An empty device.
    pub fn new(cfg: DeviceConfig) -> Self {
        Device {
            dql: cfg.bql.map(|c| Dql::new(c, 0)),
            cfg,
            ring: VecDeque::new(),
            sending: VecDeque::new(),
            uncompleted: 0,
            irq_armed: false,
        }
    }

    /// The configuration.
    pub fn config(&self) -> DeviceConfig {
        self.cfg
    }

    /// Whether there is a ring at all (without one the qdisc feeds the link).
    pub fn has_ring(&self) -> bool {
        self.cfg.ring > 0
    }

    /// A descriptor is free (whatever BQL says).
    pub fn has_room(&self) -> bool {
        self.has_ring() && self.ring.len() < self.cfg.ring
    }

    /// The driver may take another packet from the qdisc: a descriptor is free and BQL has not
    /// stopped the queue.
    pub fn may_fill(&self) -> bool {
        self.has_room() && !self.dql.as_ref().is_some_and(Dql::stopped)
    }

    /// The driver puts `p` on the ring (its bytes now count against BQL).
    pub fn fill(&mut self, p: P) {
        if let Some(q) = self.dql.as_mut() {
            let _ = q.sent(p.meta().len);
        }
        self.ring.push_back(p);
    }

    /// The next packet for the link, from the ring.
    pub fn next_to_send(&mut self) -> Option<P> {
        self.ring.pop_front()
    }

    /// The link started sending a packet of `len` bytes (from the ring or straight from the
    /// qdisc); its completion comes later.
    pub fn sending(&mut self, len: u32) {
        self.sending.push_back(len);
    }

    /// The oldest transmission finished at `now`: BQL hears of it now, or at an interrupt —
    /// the time returned, when one must be armed for it.
    pub fn completed(&mut self, now: Nanos) -> Option<Nanos> {
        let len = self.sending.pop_front()?;
        let q = self.dql.as_mut()?;
        let c = self.cfg.coalesce_ns;
        if c == 0 {
            let _ = q.completed(len, now);
            return None;
        }
        self.uncompleted += len;
        if self.irq_armed {
            return None;
        }
        self.irq_armed = true;
        Some((now / c + 1) * c)
    }

    /// The completion interrupt fires at `now`: BQL hears of every completion since the last.
    pub fn interrupt(&mut self, now: Nanos) {
        self.irq_armed = false;
        if let Some(q) = self.dql.as_mut() {
            let _ = q.completed(std::mem::take(&mut self.uncompleted), now);
        }
    }

    /// BQL's current limit, bytes (None without BQL).
    pub fn bql_limit(&self) -> Option<u32> {
        self.dql.as_ref().map(Dql::limit)
    }

    /// Packets on the ring.
    pub fn len(&self) -> usize {
        self.ring.len()
    }

    /// Nothing on the ring.
    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Record;
    use crate::testutil::pkt;

    fn bql(coalesce_ns: Nanos) -> Device<Record> {
        Device::new(DeviceConfig {
            ring: 256,
            bql: Some(dql::Config::default()),
            coalesce_ns,
        })
    }

    /// BQL starts at a limit of 0: the first packet stops the queue; its completion with
    /// nothing else in flight raises the limit to that packet (docs/algorithms.md §4.5).
    #[test]
    fn the_first_packet_stops_the_queue_and_its_completion_opens_it() {
        let mut d = bql(0);
        assert!(d.may_fill());
        d.fill(pkt(1, 1514));
        assert!(!d.may_fill(), "BQL stopped the queue");
        let p = d.next_to_send().expect("on the ring");
        d.sending(p.meta.len);
        assert_eq!(d.completed(1_000), None, "reported at once");
        assert!(d.may_fill());
        assert_eq!(d.bql_limit(), Some(1514));
    }

    /// With interrupt moderation the completion waits for the next interrupt boundary, and one
    /// interrupt reports everything completed since the last.
    #[test]
    fn coalesced_completions_wait_for_the_interrupt() {
        let mut d = bql(1_000_000);
        d.fill(pkt(1, 1514));
        let p = d.next_to_send().expect("on the ring");
        d.sending(p.meta.len);
        assert_eq!(d.completed(2_500_000), Some(3_000_000));
        assert!(!d.may_fill(), "not reported yet");
        d.interrupt(3_000_000);
        assert!(d.may_fill());
    }

    #[test]
    fn without_a_ring_nothing_is_filled() {
        let d: Device<Record> = Device::new(DeviceConfig::default());
        assert!(!d.has_ring() && !d.may_fill());
    }
}
