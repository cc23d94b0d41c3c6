//! A wired link direction: its configuration, the device between the discipline and the wire
//! (a TX ring the driver fills, limited by BQL, with completions per packet or per interrupt),
//! and the transmitter and wire of the core's link model; what the world does when a packet is
//! sent, when a transmission completes and when a shaper's wake-up comes.

use super::*;

/// One link direction's configuration.
pub struct LinkConfig {
    /// Rate, bit/s.
    pub rate_bps: u64,
    /// One-way propagation delay, ns.
    pub delay_ns: Nanos,
    /// The discipline in front of it.
    pub qdisc: Box<dyn Qdisc<SimPacket>>,
    /// The device below the discipline: a TX ring with BQL (the core's device stage).
    pub device: DeviceConfig,
    /// Impairments and framing of the wire itself.
    pub wire: Wire,
}

pub(super) fn cfg_seed(cfg: &LinkConfig) -> u64 {
    cfg.wire.seed ^ 0x5DEE_CE66_D1CE_4E5B
}

/// The core's link for a direction: the simulator's rate and propagation delay, the wire's
/// framing and impairments.
pub(super) fn wire_link(cfg: &LinkConfig) -> WireLink<SimPacket> {
    let emu = Emulation {
        rate_bps: Some(cfg.rate_bps),
        buffer: None,
        ..cfg.wire.impair
    };
    WireLink::new(emu, cfg.delay_ns, cfg_seed(cfg)).with_layer(LinkLayer::Cake(cfg.wire.framing))
}

/// Per-link measurements. Sojourns go into a histogram (1 µs to 1000 s, 3 significant digits),
/// so memory stays flat however long the run.
#[derive(Debug, Clone)]
pub struct LinkStats {
    /// Packets sent.
    pub sent_pkts: u64,
    /// Bytes sent.
    pub sent_bytes: u64,
    /// Packets dropped by the discipline.
    pub dropped: u64,
    /// Packets that left CE-marked by the discipline.
    pub marked: u64,
    /// Packets lost on the wire (after the discipline sent them).
    pub lost_on_wire: u64,
    /// Packets a trace-driven link's modem dropped (its FIFO full).
    pub modem_dropped: u64,
    /// Largest queue length seen, packets.
    pub max_backlog_pkts: u64,
    /// Sojourn of every sent packet, ns.
    pub sojourns: hdrhistogram::Histogram<u64>,
}

impl Default for LinkStats {
    fn default() -> Self {
        LinkStats {
            sent_pkts: 0,
            sent_bytes: 0,
            dropped: 0,
            marked: 0,
            lost_on_wire: 0,
            modem_dropped: 0,
            max_backlog_pkts: 0,
            sojourns: hdrhistogram::Histogram::new_with_bounds(1, 1_000_000_000_000, 3)
                .expect("valid histogram bounds"),
        }
    }
}

pub(super) struct Link {
    pub(super) cfg: LinkConfig,
    /// The transmitter and the wire behind it (the core's link model). Each packet placed on
    /// the wire gets an `Arrive` event at its release time, which takes the next packet due:
    /// events need only name the link, and stay small in the heap.
    pub(super) link: WireLink<SimPacket>,
    pub(super) wake_at: Option<Nanos>,
    pub(super) stats: LinkStats,
    /// The TX ring with BQL between the discipline and the transmitter (the core's device).
    pub(super) device: Device<SimPacket>,
}

impl World {
    /// Statistics of a link direction (with Wi-Fi: `Up` is the AP's queues, `Down` the
    /// stations').
    pub fn link_stats(&self, d: Dir) -> &LinkStats {
        match &self.wifi {
            Some(w) => &w.links[d.idx()],
            None => &self.links[d.idx()].stats,
        }
    }

    /// The discipline of a link direction.
    pub fn qdisc(&self, d: Dir) -> &dyn Qdisc<SimPacket> {
        self.links[d.idx()].cfg.qdisc.as_ref()
    }

    pub(super) fn send(&mut self, d: Dir, mut p: SimPacket) {
        if self.marker.is_some() {
            self.mark(d, &mut p);
        }
        if self.autorate[d.reverse().idx()].is_some() {
            self.autorate_seen(d, &p);
        }
        if self.wifi.is_some() {
            self.send_wifi(d, p);
            return;
        }
        let now = self.now;
        let l = &mut self.links[d.idx()];
        l.cfg.qdisc.enqueue(p, now);
        self.drain_drops(d);
        let l = &mut self.links[d.idx()];
        l.stats.max_backlog_pkts = l.stats.max_backlog_pkts.max(l.cfg.qdisc.qlen() as u64);
        let ring_room = l.device.has_room();
        if (l.link.busy_until() <= now || ring_room) && l.wake_at.is_none() {
            self.try_transmit(d);
        }
    }

    /// The marking stage, out of line: a run without it pays one test per packet.
    #[inline(never)]
    fn mark(&mut self, d: Dir, p: &mut SimPacket) {
        use debloat_core::classify::qosify::Direction;
        let dir = match d {
            Dir::Up => Direction::Egress,
            Dir::Down => Direction::Ingress,
        };
        if let Some(m) = self.marker.as_mut() {
            m.mark(&mut p.meta, dir, self.now);
        }
    }

    pub(super) fn drain_drops(&mut self, d: Dir) {
        while let Some(x) = self.links[d.idx()].cfg.qdisc.take_dropped() {
            self.links[d.idx()].stats.dropped += 1;
            let flow = match x.packet.body {
                Body::Data { flow, .. } => Some(flow),
                _ => None,
            };
            if let Some(f) = flow {
                if x.reason != DropReason::AckFilter {
                    self.flows[f as usize].drops += 1;
                }
            }
        }
    }

    /// The packet on the wire finished: report it to BQL now, or at the next interrupt.
    pub(super) fn complete(&mut self, d: Dir) {
        let now = self.now;
        if let Some(t) = self.links[d.idx()].device.completed(now) {
            self.events.push(t, Event::Irq(d));
        }
    }

    /// Take the next packet from the discipline, accounting for it; arms a wake-up if a shaper
    /// holds it.
    pub(super) fn take_from_qdisc(&mut self, d: Dir) -> Option<SimPacket> {
        let now = self.now;
        let l = &mut self.links[d.idx()];
        let got = l.cfg.qdisc.dequeue(now);
        let out = match got {
            Dequeue::Packet(p) => {
                if self.autorate[d.idx()].is_some() {
                    self.autorate_sent(d, &p);
                }
                let l = &mut self.links[d.idx()];
                l.stats.sent_pkts += 1;
                l.stats.sent_bytes += u64::from(p.meta.len);
                l.stats
                    .sojourns
                    .saturating_record((now - p.meta.enqueue_ns).max(1));
                if p.meta.ecn == Ecn::Ce {
                    l.stats.marked += 1;
                }
                Some(p)
            }
            Dequeue::NotBefore(t) => {
                if l.wake_at.is_none_or(|w| w > t) {
                    l.wake_at = Some(t);
                    self.events.push(t, Event::Wake(d));
                }
                None
            }
            Dequeue::Empty => None,
        };
        self.drain_drops(d);
        out
    }

    pub(super) fn try_transmit(&mut self, d: Dir) {
        // The driver fills the ring while it has room and BQL allows.
        let ring = self.links[d.idx()].device.has_ring();
        self.try_fill(d);
        let now = self.now;
        if self.links[d.idx()].link.busy_until() > now {
            return;
        }
        let next = if ring {
            self.links[d.idx()].device.next_to_send()
        } else {
            self.take_from_qdisc(d)
        };
        let Some(p) = next else { return };
        let l = &mut self.links[d.idx()];
        l.device.sending(p.meta.len);
        if let Some(tap) = self.tap.as_mut() {
            tap(d, now, &p);
        }
        // TxDone goes into the queue before the arrivals, as it always has (ties keep order).
        let (mut at, mut n) = ([0; 2], 0);
        let done = l.link.transmit(p, now, &mut |t| {
            if let Some(slot) = at.get_mut(n) {
                *slot = t;
                n += 1;
            }
        });
        self.events.push(done, Event::TxDone(d));
        for &t in &at[..n] {
            self.events.push(t, Event::Arrive(d));
        }
        l.stats.lost_on_wire = l.link.wire().counters.lost;
        l.stats.modem_dropped = l.link.modem_dropped();
        if ring {
            // A descriptor freed: the driver may take another packet.
            self.try_fill(d);
        }
    }

    pub(super) fn try_fill(&mut self, d: Dir) {
        while self.links[d.idx()].device.may_fill() {
            let Some(p) = self.take_from_qdisc(d) else {
                break;
            };
            self.links[d.idx()].device.fill(p);
        }
    }

    /// Put a trace-driven modem behind a direction's transmitter.
    pub fn set_modem(&mut self, d: Dir, modem: debloat_core::link::Modem) {
        self.links[d.idx()].link.set_modem(Some(modem));
    }

    /// The simulated time now.
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// The modem behind a direction's transmitter, if any.
    pub fn modem(&self, d: Dir) -> Option<&debloat_core::link::Modem> {
        self.links[d.idx()].link.modem()
    }

    /// BQL's current limit on a link direction, bytes (None without BQL).
    pub fn bql_limit(&self, d: Dir) -> Option<u32> {
        self.links[d.idx()].device.bql_limit()
    }
}
