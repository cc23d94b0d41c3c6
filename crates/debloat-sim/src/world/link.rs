//! A wired link direction is the core's [`DataPath`]: the discipline, the device stage (a TX
//! ring the driver fills, limited by BQL, with completions per packet or per interrupt) and
//! the transmitter and wire of the core's link model — the same path `debloat replay` and the
//! gateway drive. The world feeds it packets and `now`, keeps one event armed at the path's
//! next wake-up, and turns what the path reports into statistics, captures and deliveries.

use super::*;

/// One link direction's configuration.
pub struct LinkConfig {
    /// Rate, bit/s.
    pub rate_bps: u64,
    /// One-way propagation delay, ns.
    pub delay_ns: Nanos,
    /// The discipline in front of it.
    pub qdisc: Box<dyn Qdisc<SimPacket>>,
    /// The device below the discipline: a TX ring with BQL (the path's device stage).
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

/// One direction's data path, as the world drives it.
pub(super) type SimPath = DataPath<SimPacket, Box<dyn Qdisc<SimPacket>>>;

/// What a path reported, owned, for the world to act on once the path has returned.
pub(super) enum PathOut {
    Dequeued(SimPacket, Nanos),
    /// Sent, or lost as it entered the link: either way the capture at the link's entry saw it.
    Tapped(SimPacket, Nanos),
    Dropped(SimPacket, DropReason),
    Delivered(SimPacket),
}

impl PathOut {
    fn of(e: PathEvent<'_, SimPacket>) -> PathOut {
        match e {
            PathEvent::Dequeued { packet, at } => PathOut::Dequeued(*packet, at),
            PathEvent::Sent { packet, start, .. } => PathOut::Tapped(*packet, start),
            PathEvent::Dropped {
                packet,
                reason: PathDrop::Lost,
                at,
            } => PathOut::Tapped(packet, at),
            PathEvent::Dropped {
                packet,
                reason: PathDrop::Qdisc(r),
                ..
            } => PathOut::Dropped(packet, r),
            // The simulator gives its paths no drop-tail buffer.
            PathEvent::Dropped { packet, .. } => PathOut::Dropped(packet, DropReason::Overlimit),
            PathEvent::Delivered { packet, .. } => PathOut::Delivered(packet),
        }
    }
}

pub(super) struct Link {
    /// The configured rate, bit/s.
    pub(super) rate_bps: u64,
    /// The discipline, the device and the wire, as the core has them.
    pub(super) path: SimPath,
    pub(super) stats: LinkStats,
}

impl Link {
    pub(super) fn new(cfg: LinkConfig) -> Link {
        let wire = wire_link(&cfg);
        Link {
            rate_bps: cfg.rate_bps,
            path: DataPath::with_stage(cfg.qdisc, Stage::Device(cfg.device), wire),
            stats: LinkStats::default(),
        }
    }
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
        self.links[d.idx()].path.qdisc().as_ref()
    }

    /// Onto the bottleneck direction `d` (past the sending host's own qdisc, if any).
    pub(super) fn send_link(&mut self, d: Dir, mut p: SimPacket) {
        if self.autorate[d.reverse().idx()].is_some() {
            self.autorate_seen(d, &p);
        }
        let now = self.now;
        if self.wifi.is_some() {
            // Wi-Fi's queues are not a DataPath: the stage runs here, as the path would run it.
            if self.marker.is_some() && !self.mark(d, &mut p) {
                if let Some(w) = self.wifi.as_mut() {
                    w.links[d.idx()].dropped += 1;
                }
                return;
            }
            self.send_wifi(d, p);
            return;
        }
        self.drive(d, |path, stage, outs| {
            let mut out = |e: PathEvent<'_, SimPacket>| outs.push(PathOut::of(e));
            match stage {
                Some(s) => path.arrive_classified(p, now, s, d, &mut out),
                None => path.arrive(p, now, &mut out),
            }
        });
    }

    /// The classify stage in front of Wi-Fi's queues, out of line: a run without it pays one
    /// test per packet. False: the stage dropped the packet.
    #[inline(never)]
    fn mark(&mut self, d: Dir, p: &mut SimPacket) -> bool {
        use debloat_core::classify::Admit;
        let now = self.now;
        self.marker
            .as_mut()
            .is_none_or(|m| m.classify(&mut p.meta, d, now) == Admit::Pass)
    }

    /// One of the path's wake-ups came: run it (each armed wake-up is one event, so those at
    /// the same nanosecond keep their order among the world's other events).
    pub(super) fn fire_path(&mut self, d: Dir) {
        let now = self.now;
        self.drive(d, |path, _, outs| {
            path.fire(now, &mut |e| outs.push(PathOut::of(e)));
        });
    }

    /// A shaper's rate changed: let the path ask its discipline again.
    pub(super) fn retry_path(&mut self, d: Dir) {
        let now = self.now;
        self.drive(d, |path, _, outs| {
            path.retry(now, &mut |e| outs.push(PathOut::of(e)))
        });
    }

    /// Call the path (with the classify stage, for arrivals), schedule the wake-ups it armed,
    /// and act on what it reports.
    fn drive(
        &mut self,
        d: Dir,
        call: impl FnOnce(&mut SimPath, Option<&mut dyn Classify>, &mut Vec<PathOut>),
    ) {
        let mut outs = std::mem::take(&mut self.path_out);
        let mut armed = std::mem::take(&mut self.path_armed);
        let l = &mut self.links[d.idx()];
        call(&mut l.path, self.marker.as_deref_mut(), &mut outs);
        l.path.take_armed(&mut armed);
        for t in armed.drain(..) {
            self.events.push(t, Event::Path(d));
        }
        self.path_armed = armed;
        for o in outs.drain(..) {
            self.on_path(d, o);
        }
        self.path_out = outs;
        let l = &mut self.links[d.idx()];
        l.stats.lost_on_wire = l.path.wire_counters().lost;
        l.stats.modem_dropped = l.path.link().modem_dropped();
        l.stats.max_backlog_pkts = l.path.counters().peak_qdisc_pkts;
    }

    fn on_path(&mut self, d: Dir, o: PathOut) {
        match o {
            PathOut::Dequeued(p, at) => {
                if self.autorate[d.idx()].is_some() {
                    self.autorate_sent(d, &p);
                }
                let st = &mut self.links[d.idx()].stats;
                st.sent_pkts += 1;
                st.sent_bytes += u64::from(p.meta.len);
                st.sojourns
                    .saturating_record(at.saturating_sub(p.meta.enqueue_ns).max(1));
                if p.meta.ecn == Ecn::Ce {
                    st.marked += 1;
                }
            }
            PathOut::Tapped(p, at) => {
                if let Some(tap) = self.tap.as_mut() {
                    tap(d, at, &p);
                }
            }
            PathOut::Dropped(p, reason) => {
                self.links[d.idx()].stats.dropped += 1;
                if let (Body::Data { flow, .. }, false) = (p.body, reason == DropReason::AckFilter)
                {
                    self.flows[flow as usize].drops += 1;
                }
            }
            // Hosts beyond the bottleneck add their own delay (constant per host, so each
            // host's packets stay in order).
            PathOut::Delivered(p) => self.deliver_after(d, p, 0),
        }
    }

    /// Put a trace-driven modem behind a direction's transmitter.
    pub fn set_modem(&mut self, d: Dir, modem: debloat_core::link::Modem) {
        self.links[d.idx()].path.link_mut().set_modem(Some(modem));
    }

    /// The simulated time now.
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// The modem behind a direction's transmitter, if any.
    pub fn modem(&self, d: Dir) -> Option<&debloat_core::link::Modem> {
        self.links[d.idx()].path.link().modem()
    }

    /// BQL's current limit on a link direction, bytes (None without BQL).
    pub fn bql_limit(&self, d: Dir) -> Option<u32> {
        self.links[d.idx()]
            .path
            .device()
            .and_then(|dev| dev.bql_limit())
    }
}
