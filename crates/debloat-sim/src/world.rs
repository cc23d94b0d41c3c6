//! The simulated network: a client and a server joined by one link in each direction. Each link
//! direction is a queue discipline from `debloat-core` in front of a transmitter that sends one
//! packet at a time at the link rate, followed by a fixed propagation delay. Uploads, ping
//! requests and download ACKs use the up link; downloads, ping replies and upload ACKs the down
//! link. Timers are lazy: an event carries the deadline it was scheduled for and is ignored if
//! the endpoint's deadline has moved since.

use crate::engine::EventQueue;
use crate::packet::{
    Body, SimPacket, ACK_FRAME, DATA_FRAME, MSS, PING_FRAME, UDP_PROBE_FRAME, VOIP_FRAME,
};
use crate::tcp::cc::Algorithm;
use crate::tcp::{AckInfo, Receiver, Sender};
pub use crate::wire::Wire;
use debloat_core::flow::FlowKey;
use debloat_core::link::{Emulation, Link as WireLink, LinkLayer};
use debloat_core::packet::{Ecn, Nanos, PacketMeta};
use debloat_core::{Dequeue, DropReason, Qdisc};
use std::net::{IpAddr, Ipv4Addr};

/// Up (client → server) or down (server → client).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Dir {
    /// Client to server.
    Up,
    /// Server to client.
    Down,
}

impl Dir {
    fn idx(self) -> usize {
        match self {
            Dir::Up => 0,
            Dir::Down => 1,
        }
    }
    fn reverse(self) -> Dir {
        match self {
            Dir::Up => Dir::Down,
            Dir::Down => Dir::Up,
        }
    }
}

/// One link direction's configuration.
pub struct LinkConfig {
    /// Rate, bit/s.
    pub rate_bps: u64,
    /// One-way propagation delay, ns.
    pub delay_ns: Nanos,
    /// The discipline in front of it.
    pub qdisc: Box<dyn Qdisc<SimPacket>>,
    /// The device below the discipline.
    pub device: Device,
    /// Impairments and framing of the wire itself.
    pub wire: Wire,
}

fn cfg_seed(cfg: &LinkConfig) -> u64 {
    cfg.wire.seed ^ 0x5DEE_CE66_D1CE_4E5B
}

/// The core's link for a direction: the simulator's rate and propagation delay, the wire's
/// framing and impairments.
fn wire_link(cfg: &LinkConfig) -> WireLink<SimPacket> {
    let emu = Emulation {
        rate_bps: Some(cfg.rate_bps),
        buffer: None,
        ..cfg.wire.impair
    };
    WireLink::new(emu, cfg.delay_ns, cfg_seed(cfg)).with_layer(LinkLayer::Cake(cfg.wire.framing))
}

/// The network device between the discipline and the wire: a TX ring the driver fills from the
/// qdisc, optionally limited in bytes by BQL (the core's DQL), with completions reported per
/// packet or in interrupt batches. `ring: 0` means no device queue: the qdisc feeds the wire.
#[derive(Clone, Copy, Debug, Default)]
pub struct Device {
    /// TX ring descriptors (packets); 0 = none.
    pub ring: usize,
    /// Byte queue limits on the ring.
    pub bql: Option<debloat_core::device::dql::Config>,
    /// Completion interrupts every this many ns (0 = as each packet finishes).
    pub coalesce_ns: Nanos,
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
            max_backlog_pkts: 0,
            sojourns: hdrhistogram::Histogram::new_with_bounds(1, 1_000_000_000_000, 3)
                .expect("valid histogram bounds"),
        }
    }
}

struct Link {
    cfg: LinkConfig,
    /// The transmitter and the wire behind it (the core's link model). Each packet placed on
    /// the wire gets an `Arrive` event at its release time, which takes the next packet due:
    /// events need only name the link, and stay small in the heap.
    link: WireLink<SimPacket>,
    wake_at: Option<Nanos>,
    stats: LinkStats,
    ring: std::collections::VecDeque<SimPacket>,
    dql: Option<debloat_core::device::dql::Dql>,
    /// Lengths of transmissions whose TxDone is pending, in order (a new transmission can start at
    /// the very instant the previous one ends, before its TxDone is handled).
    wire_lens: std::collections::VecDeque<u32>,
    uncompleted: u32,
    irq_armed: bool,
}

/// A bulk TCP transfer.
pub struct Flow {
    /// Name, e.g. "TCP upload 1".
    pub name: String,
    /// Direction of the data.
    pub dir: Dir,
    /// Congestion control.
    pub cc: Algorithm,
    /// DSCP of its packets.
    pub dscp: u8,
    /// ECN-capable.
    pub ecn: bool,
    /// When it starts and stops sending, ns.
    pub start: Nanos,
    /// See `start`.
    pub stop: Nanos,
    key: FlowKey,
    /// Sender state.
    pub sender: Sender,
    /// Receiver state.
    pub receiver: Receiver,
    /// Segments delivered in order, sampled at each step.
    pub delivered_series: Vec<u64>,
    /// Congestion window (segments), sampled at each step.
    pub cwnd_series: Vec<f64>,
    /// Packets of this flow dropped by a discipline.
    pub drops: u64,
    pace_armed: Option<Nanos>,
    /// Extra one-way delay between the bottleneck and this flow's remote host, ns.
    pub extra_ns: Nanos,
    /// The local (client-side) host's last address byte (198.18.1.x).
    pub client: u8,
    /// The remote (server-side) host's last address byte (198.18.2.x).
    pub server: u8,
}

/// The 5-tuple of bulk flow `i` between client 198.18.1.`client` and server 198.18.2.`server`.
fn flow_key(i: usize, dir: Dir, client: u8, server: u8) -> FlowKey {
    let port = 40000 + i as u16;
    match dir {
        Dir::Up => FlowKey::ip(addr(1, client), addr(2, server), port, 12865, 6),
        Dir::Down => FlowKey::ip(addr(2, server), addr(1, client), 12865, port, 6),
    }
}

/// A latency probe: a request every `interval` from the client, answered by the server.
#[derive(Debug, Clone)]
pub struct Probe {
    /// flent's series name, e.g. "Ping (ms) ICMP" or "Ping (ms) UDP EF".
    pub name: String,
    /// UDP (irtt-like) rather than ICMP.
    pub udp: bool,
    /// DSCP of requests and replies.
    pub dscp: u8,
    interval: Nanos,
    seq: u32,
    /// (sent at, rtt) in ns of each answered request.
    pub samples: Vec<(Nanos, Nanos)>,
    /// One-way delay client → server of each answered request, ns (same order as `samples`).
    pub owd_up: Vec<Nanos>,
    /// Sequence number of each answered request (same order as `samples`).
    pub seqs: Vec<u32>,
    /// An isochronous VoIP-like flow (irtt `-i 20ms -l 172`) rather than a ping.
    pub voip: bool,
    /// A one-way constant-rate UDP flood of `flood_len`-byte frames: no replies; the receiver
    /// counts what arrives.
    pub flood_len: Option<u32>,
    /// Direction of a flood.
    pub flood_dir: Dir,
    /// The remote host sends the requests and the client answers them (`ping` run on a Wi-Fi
    /// station, as in NETDEV-PING), rather than the client asking. `owd_up` then holds the
    /// one-way delay remote → client.
    pub from_remote: bool,
    /// Start sending at this time, ns.
    pub start: Nanos,
    /// Stop sending at this time (floods and scenario probes), ns.
    pub stop: Nanos,
    /// Bytes of a flood that arrived.
    pub delivered_bytes: u64,
    /// `delivered_bytes` sampled at each step.
    pub delivered_series: Vec<u64>,
    /// Requests sent.
    pub sent: u64,
    /// The remote host's last address byte (198.18.2.x).
    pub host: u8,
    /// Extra one-way delay to that host, ns.
    pub extra_ns: Nanos,
}

enum Event {
    TxDone(Dir),
    Irq(Dir),
    Wake(Dir),
    Arrive(Dir),
    /// A packet held by its remote host's extra delay (boxed: events stay small in the heap).
    Deliver(Dir, Box<SimPacket>),
    SenderTimer(usize, Nanos),
    Pace(usize, Nanos),
    ReceiverTimer(usize, Nanos),
    FlowStart(usize),
    Probe(usize),
    Sample,
    /// The Wi-Fi channel's current TXOP ends.
    Air,
    /// The AP's shaping qdisc may release a frame.
    WifiWake,
    /// A packet from the wired host reaches the AP (after the wire's one-way delay).
    ToAp(Box<SimPacket>),
}

/// The simulation: build it, add flows, `run` to the end.
pub struct World {
    now: Nanos,
    events: EventQueue<Event>,
    links: [Link; 2],
    /// The transfers.
    pub flows: Vec<Flow>,
    /// Latency probes and their results.
    pub probes: Vec<Probe>,
    step: Nanos,
    end: Nanos,
    /// Sample times, ns.
    pub sample_times: Vec<Nanos>,
    /// The Wi-Fi channel's busy time so far at each sample, ns (Wi-Fi runs).
    pub air_busy_series: Vec<Nanos>,
    tap: Option<Tap>,
    wifi: Option<Box<crate::wifi::Wifi>>,
    wired_ns: Nanos,
    air_out: Vec<(bool, SimPacket)>,
    /// Every TCP flow's window limit, segments (see [`World::set_tcp_window`]).
    tcp_window: Option<u64>,
}

/// The station behind remote host 198.18.2.`host` when `n` stations share a Wi-Fi AP: hosts
/// .11, .12, … are stations 0, 1, … (wrapping); any other host is station 0.
pub fn station_of_host(host: u8, n: usize) -> usize {
    if host >= 11 {
        usize::from(host - 11) % n.max(1)
    } else {
        0
    }
}

/// The last octet of an IPv4 address (0 for anything else): which remote host it is.
fn host_octet(a: Option<IpAddr>) -> u8 {
    match a {
        Some(IpAddr::V4(a)) => a.octets()[3],
        _ => 0,
    }
}

/// Whole segments in a window of `bytes` of payload (at least one).
fn window_segments(bytes: u64) -> u64 {
    (bytes / u64::from(MSS)).max(1)
}

/// A capture hook: called for every packet as a link starts to send it.
pub type Tap = Box<dyn FnMut(Dir, Nanos, &SimPacket)>;

fn addr(net: u8, host: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(198, 18, net, host))
}

impl World {
    /// A client and a server joined by `up` and `down`; run for `end` ns, sampling every `step`.
    pub fn new(up: LinkConfig, down: LinkConfig, end: Nanos, step: Nanos) -> World {
        let link = |cfg: LinkConfig| Link {
            dql: cfg
                .device
                .bql
                .map(|c| debloat_core::device::dql::Dql::new(c, 0)),
            link: wire_link(&cfg),
            cfg,
            wake_at: None,
            stats: LinkStats::default(),
            ring: Default::default(),
            wire_lens: Default::default(),
            uncompleted: 0,
            irq_armed: false,
        };
        let mut w = World {
            now: 0,
            events: EventQueue::default(),
            links: [link(up), link(down)],
            flows: Vec::new(),
            probes: Vec::new(),
            step,
            end,
            sample_times: Vec::new(),
            air_busy_series: Vec::new(),
            tap: None,
            wifi: None,
            wired_ns: 0,
            air_out: Vec::new(),
            tcp_window: None,
        };
        w.events.push(step, Event::Sample);
        w
    }

    /// Limit every TCP flow, present and future, to a window of `bytes` of payload (the
    /// receive window the peer advertises, or the send buffer): `Sender::set_window`. None:
    /// no limit, only cwnd.
    pub fn set_tcp_window(&mut self, bytes: Option<u64>) {
        self.tcp_window = bytes.map(window_segments);
        for f in &mut self.flows {
            f.sender.set_window(self.tcp_window);
        }
    }

    /// Limit TCP flow `i` alone to a window of `bytes` of payload (None: no limit).
    pub fn set_flow_window(&mut self, i: usize, bytes: Option<u64>) {
        if let Some(f) = self.flows.get_mut(i) {
            f.sender.set_window(bytes.map(window_segments));
        }
    }

    /// Add a bulk TCP flow; returns its index.
    #[allow(clippy::too_many_arguments)]
    pub fn add_flow(
        &mut self,
        name: &str,
        dir: Dir,
        cc: Algorithm,
        dscp: u8,
        ecn: bool,
        start: Nanos,
        stop: Nanos,
    ) -> usize {
        let i = self.flows.len();
        let key = flow_key(i, dir, 2, 2);
        self.flows.push(Flow {
            name: name.to_string(),
            dir,
            cc,
            dscp,
            ecn,
            start,
            stop,
            key,
            sender: {
                let mut s = Sender::new(cc);
                s.set_window(self.tcp_window);
                s
            },
            receiver: Receiver::new(),
            delivered_series: Vec::new(),
            cwnd_series: Vec::new(),
            drops: 0,
            pace_armed: None,
            extra_ns: 0,
            client: 2,
            server: 2,
        });
        self.events.push(start, Event::FlowStart(i));
        i
    }

    /// A latency probe from the client every `interval` from `start`; returns its index.
    pub fn add_probe(
        &mut self,
        name: &str,
        udp: bool,
        dscp: u8,
        start: Nanos,
        interval: Nanos,
    ) -> usize {
        let k = self.probes.len();
        self.probes.push(Probe {
            name: name.into(),
            udp,
            dscp,
            interval: interval.max(1),
            seq: 0,
            samples: Vec::new(),
            owd_up: Vec::new(),
            seqs: Vec::new(),
            voip: false,
            flood_len: None,
            flood_dir: Dir::Up,
            from_remote: false,
            start,
            stop: Nanos::MAX,
            delivered_bytes: 0,
            delivered_series: Vec::new(),
            sent: 0,
            host: 3,
            extra_ns: 0,
        });
        self.events.push(start, Event::Probe(k));
        k
    }

    /// Place flow `i` at remote host 198.18.2.`host`, `extra_ns` one way beyond the bottleneck.
    pub fn set_flow_host(&mut self, i: usize, host: u8, extra_ns: Nanos) {
        let f = &mut self.flows[i];
        f.server = host;
        f.key = flow_key(i, f.dir, f.client, host);
        f.extra_ns = extra_ns;
    }

    /// Place flow `i` on client host 198.18.1.`host` (several client hosts share the link; host
    /// isolation such as cake's `dual-srchost` tells them apart).
    pub fn set_flow_client(&mut self, i: usize, host: u8) {
        let f = &mut self.flows[i];
        f.client = host;
        f.key = flow_key(i, f.dir, host, f.server);
    }

    /// Make probe `k` a one-way UDP flood of `len`-byte frames in direction `dir`, sent every
    /// `interval` (given at `add_probe`) until `stop`.
    pub fn set_probe_flood(&mut self, k: usize, len: u32, dir: Dir, stop: Nanos) {
        let p = &mut self.probes[k];
        p.flood_len = Some(len);
        p.flood_dir = dir;
        p.udp = true;
        p.stop = stop;
    }

    /// Make the remote host of probe `k` send its requests (and the client answer them).
    pub fn set_probe_from_remote(&mut self, k: usize, from_remote: bool) {
        self.probes[k].from_remote = from_remote;
    }

    /// Stop probe `k` at `stop`.
    pub fn set_probe_stop(&mut self, k: usize, stop: Nanos) {
        self.probes[k].stop = stop;
    }

    /// Make probe `k` a VoIP-like flow: 172-byte UDP payloads (its interval is the caller's).
    pub fn set_probe_voip(&mut self, k: usize) {
        self.probes[k].voip = true;
        self.probes[k].udp = true;
    }

    /// Point probe `k` at remote host 198.18.2.`host`, `extra_ns` one way beyond the bottleneck.
    pub fn set_probe_host(&mut self, k: usize, host: u8, extra_ns: Nanos) {
        self.probes[k].host = host;
        self.probes[k].extra_ns = extra_ns;
    }

    /// Header of probe `k`'s packets going server → client (`down`) or client → server.
    fn probe_meta(&self, k: usize, down: bool) -> PacketMeta {
        let p = &self.probes[k];
        let (client, server) = (addr(1, 3), addr(2, p.host));
        let (src, dst) = if down {
            (server, client)
        } else {
            (client, server)
        };
        let port = 2112 + k as u16;
        let key = if p.udp {
            if down {
                FlowKey::ip(src, dst, 2112, port, 17)
            } else {
                FlowKey::ip(src, dst, port, 2112, 17)
            }
        } else {
            FlowKey::ip(src, dst, 0, 0, 1)
        };
        let len = match p.flood_len {
            Some(l) => l,
            None if p.voip => VOIP_FRAME,
            None if p.udp => UDP_PROBE_FRAME,
            None => PING_FRAME,
        };
        let mut m = PacketMeta::new(len, key);
        m.dscp = p.dscp;
        m
    }

    /// Watch every packet as a link starts to send it (for pcap capture).
    pub fn set_tap(&mut self, tap: Tap) {
        self.tap = Some(tap);
    }

    /// Statistics of a link direction (with Wi-Fi: `Up` is the AP's queues, `Down` the
    /// stations').
    pub fn link_stats(&self, d: Dir) -> &LinkStats {
        match &self.wifi {
            Some(w) => &w.links[d.idx()],
            None => &self.links[d.idx()].stats,
        }
    }

    /// Replace the two links by a Wi-Fi AP and its stations: `Up` packets go from the AP to the
    /// station of their destination host, `Down` packets from the station of their source host
    /// to the AP; `wired_ns` is the one-way delay between the AP and the wired host.
    pub fn set_wifi(&mut self, wifi: crate::wifi::Wifi, wired_ns: Nanos) {
        self.wifi = Some(Box::new(wifi));
        self.wired_ns = wired_ns;
    }

    /// The Wi-Fi network, if this world has one.
    pub fn wifi(&self) -> Option<&crate::wifi::Wifi> {
        self.wifi.as_deref()
    }

    /// The discipline of a link direction.
    pub fn qdisc(&self, d: Dir) -> &dyn Qdisc<SimPacket> {
        self.links[d.idx()].cfg.qdisc.as_ref()
    }

    /// Run until the end time. `progress` is called with the fraction done now and then.
    pub fn run(&mut self, mut progress: impl FnMut(f64)) {
        let mut next_report = 0;
        // A grace period after the end lets replies already on their way arrive; nothing new is
        // sent (probes and samples stop at the end, flows before it).
        const GRACE: Nanos = 2_000_000_000;
        while let Some((t, e)) = self.events.pop() {
            if t > self.end + GRACE {
                break;
            }
            if t > self.end && matches!(e, Event::Probe(_) | Event::Sample | Event::FlowStart(_)) {
                continue;
            }
            self.now = t;
            if t >= next_report && t <= self.end {
                progress(t as f64 / self.end as f64);
                next_report = t + self.end / 100;
            }
            self.handle(e);
        }
        self.now = self.end;
        progress(1.0);
    }

    fn handle(&mut self, e: Event) {
        match e {
            Event::TxDone(d) => {
                self.complete(d);
                self.try_transmit(d);
            }
            Event::Irq(d) => {
                let l = &mut self.links[d.idx()];
                l.irq_armed = false;
                if let Some(q) = l.dql.as_mut() {
                    let _ = q.completed(std::mem::take(&mut l.uncompleted), self.now);
                }
                self.try_transmit(d);
            }
            Event::Wake(d) => {
                self.links[d.idx()].wake_at = None;
                self.try_transmit(d);
            }
            Event::Arrive(d) => {
                let l = &mut self.links[d.idx()].link;
                if let Some(p) = l.pop_due(self.now) {
                    // Hosts beyond the bottleneck add their own delay (constant per host, so
                    // each host's packets stay in order).
                    self.deliver_after(d, p, 0);
                } else if let Some(t) = l.next_release() {
                    // netem's `slot` held the packet due: look again when it may leave.
                    self.events.push(t, Event::Arrive(d));
                }
            }
            Event::Deliver(d, p) => self.arrive(d, *p),
            Event::SenderTimer(i, at) => {
                // A transfer that has ended (netperf stopped) neither retransmits nor times out.
                if self.flows[i].sender.poll_timeout() == Some(at) && self.now < self.flows[i].stop
                {
                    self.flows[i].sender.on_timeout(self.now);
                    self.pump(i);
                }
            }
            Event::ReceiverTimer(i, at) => {
                if self.flows[i].receiver.poll_timeout() == Some(at) {
                    if let Some(a) = self.flows[i].receiver.on_timeout(self.now) {
                        self.send_ack(i, a);
                    }
                }
            }
            Event::FlowStart(i) => self.pump(i),
            Event::Pace(i, at) => {
                if self.flows[i].pace_armed == Some(at) {
                    self.flows[i].pace_armed = None;
                    self.pump(i);
                }
            }
            Event::Probe(k) => self.send_probe(k),
            Event::Air => self.air_done(),
            Event::WifiWake => {
                let now = self.now;
                if let Some(w) = self.wifi.as_mut() {
                    w.wake(now);
                }
                self.drain_wifi_drops();
                self.start_air();
            }
            Event::ToAp(p) => self.ap_receive(*p),
            Event::Sample => {
                self.sample_times.push(self.now);
                for f in &mut self.flows {
                    f.delivered_series.push(f.receiver.delivered);
                    f.cwnd_series.push(f.sender.cwnd());
                }
                for p in &mut self.probes {
                    p.delivered_series.push(p.delivered_bytes);
                }
                if let Some(w) = &self.wifi {
                    self.air_busy_series.push(w.busy_ns);
                }
                if self.now + self.step <= self.end {
                    self.events.push(self.now + self.step, Event::Sample);
                }
            }
        }
    }

    fn send(&mut self, d: Dir, p: SimPacket) {
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
        let ring_room = l.cfg.device.ring > 0 && l.ring.len() < l.cfg.device.ring;
        if (l.link.busy_until() <= now || ring_room) && l.wake_at.is_none() {
            self.try_transmit(d);
        }
    }

    /// A packet enters the Wi-Fi network: from the wired host it first crosses the wire to the
    /// AP; a station hands it to its own queue at once.
    fn send_wifi(&mut self, d: Dir, p: SimPacket) {
        match d {
            Dir::Up if self.wired_ns > 0 => {
                self.events
                    .push(self.now + self.wired_ns, Event::ToAp(Box::new(p)));
            }
            Dir::Up => self.ap_receive(p),
            Dir::Down => {
                let now = self.now;
                let Some(w) = self.wifi.as_mut() else { return };
                let n = w.config().stations.len();
                w.sta_enqueue(station_of_host(host_octet(p.meta.flow.src()), n), p, now);
                self.drain_wifi_drops();
                self.start_air();
            }
        }
    }

    /// The AP takes a packet from the wire for its station.
    fn ap_receive(&mut self, p: SimPacket) {
        let now = self.now;
        let Some(w) = self.wifi.as_mut() else { return };
        let n = w.config().stations.len();
        w.ap_enqueue(station_of_host(host_octet(p.meta.flow.dst()), n), p, now);
        self.drain_wifi_drops();
        self.start_air();
    }

    fn drain_wifi_drops(&mut self) {
        let Some(w) = self.wifi.as_mut() else { return };
        while let Some(p) = w.take_dropped() {
            if let Body::Data { flow, .. } = p.body {
                if let Some(f) = self.flows.get_mut(flow as usize) {
                    f.drops += 1;
                }
            }
        }
    }

    fn start_air(&mut self) {
        let now = self.now;
        let Some(w) = self.wifi.as_mut() else { return };
        if let Some(t) = w.start(now) {
            self.events.push(t, Event::Air);
        }
        if let Some(t) = w.take_wakeup() {
            self.events.push(t, Event::WifiWake);
        }
        self.drain_wifi_drops();
    }

    fn air_done(&mut self) {
        let now = self.now;
        let mut out = std::mem::take(&mut self.air_out);
        if let Some(w) = self.wifi.as_mut() {
            w.complete(now, &mut out);
        }
        for (down_link, p) in out.drain(..) {
            // AP → station: the station has it now; station → AP: it still crosses the wire.
            if down_link {
                self.deliver_after(Dir::Up, p, 0);
            } else {
                self.deliver_after(Dir::Down, p, self.wired_ns);
            }
        }
        self.air_out = out;
        self.start_air();
    }

    /// Hand `p` to its receiver after `delay` plus its remote host's extra delay.
    fn deliver_after(&mut self, d: Dir, p: SimPacket, delay: Nanos) {
        let extra = delay
            + match p.body {
                Body::Data { flow, .. } | Body::Ack { flow, .. } => {
                    self.flows.get(flow as usize).map_or(0, |f| f.extra_ns)
                }
                Body::Ping { probe, .. } => self
                    .probes
                    .get(usize::from(probe))
                    .map_or(0, |x| x.extra_ns),
            };
        if extra > 0 {
            self.events
                .push(self.now + extra, Event::Deliver(d, Box::new(p)));
        } else {
            self.arrive(d, p);
        }
    }

    fn drain_drops(&mut self, d: Dir) {
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
    fn complete(&mut self, d: Dir) {
        let now = self.now;
        let l = &mut self.links[d.idx()];
        let Some(len) = l.wire_lens.pop_front() else {
            return;
        };
        if l.dql.is_none() {
            return;
        }
        if l.cfg.device.coalesce_ns == 0 {
            if let Some(q) = l.dql.as_mut() {
                let _ = q.completed(len, now);
            }
        } else {
            l.uncompleted += len;
            if !l.irq_armed {
                l.irq_armed = true;
                let c = l.cfg.device.coalesce_ns;
                self.events.push((now / c + 1) * c, Event::Irq(d));
            }
        }
    }

    /// Take the next packet from the discipline, accounting for it; arms a wake-up if a shaper
    /// holds it.
    fn take_from_qdisc(&mut self, d: Dir) -> Option<SimPacket> {
        let now = self.now;
        let l = &mut self.links[d.idx()];
        let got = l.cfg.qdisc.dequeue(now);
        let out = match got {
            Dequeue::Packet(p) => {
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

    fn try_transmit(&mut self, d: Dir) {
        // The driver fills the ring while it has room and BQL allows.
        let ring = self.links[d.idx()].cfg.device.ring;
        self.try_fill(d);
        let now = self.now;
        if self.links[d.idx()].link.busy_until() > now {
            return;
        }
        let next = if ring > 0 {
            self.links[d.idx()].ring.pop_front()
        } else {
            self.take_from_qdisc(d)
        };
        let Some(p) = next else { return };
        let l = &mut self.links[d.idx()];
        l.wire_lens.push_back(p.meta.len);
        if let Some(tap) = self.tap.as_mut() {
            tap(d, now, &p);
        }
        self.events
            .push(l.link.tx_end(&p.meta, now), Event::TxDone(d));
        let events = &mut self.events;
        l.link
            .transmit(p, now, &mut |t| events.push(t, Event::Arrive(d)));
        l.stats.lost_on_wire = l.link.wire().counters.lost;
        if ring > 0 {
            // A descriptor freed: the driver may take another packet.
            self.try_fill(d);
        }
    }

    fn try_fill(&mut self, d: Dir) {
        let ring = self.links[d.idx()].cfg.device.ring;
        while ring > 0
            && self.links[d.idx()].ring.len() < ring
            && !self.links[d.idx()]
                .dql
                .as_ref()
                .is_some_and(|q| q.stopped())
        {
            let Some(p) = self.take_from_qdisc(d) else {
                break;
            };
            let l = &mut self.links[d.idx()];
            if let Some(q) = l.dql.as_mut() {
                let _ = q.sent(p.meta.len);
            }
            l.ring.push_back(p);
        }
    }

    /// BQL's current limit on a link direction, bytes (None without BQL).
    pub fn bql_limit(&self, d: Dir) -> Option<u32> {
        self.links[d.idx()].dql.as_ref().map(|q| q.limit())
    }

    fn arrive(&mut self, d: Dir, p: SimPacket) {
        let now = self.now;
        match p.body {
            Body::Data {
                flow,
                seq,
                cwr,
                sent_at,
            } => {
                let i = flow as usize;
                let ce = p.meta.ecn == Ecn::Ce;
                // Marks set by the sender (already CE) are not this hop's marks; counted at the link.
                if let Some(a) = self.flows[i].receiver.on_data(seq, ce, cwr, sent_at, now) {
                    self.send_ack(i, a);
                } else if let Some(at) = self.flows[i].receiver.poll_timeout() {
                    self.events.push(at, Event::ReceiverTimer(i, at));
                }
            }
            Body::Ack {
                flow,
                ack,
                sack,
                sack_len,
                ece,
                echo,
            } => {
                let i = flow as usize;
                self.flows[i].sender.on_ack(
                    &AckInfo {
                        ack,
                        sack,
                        sack_len,
                        ece,
                        echo,
                    },
                    now,
                );
                self.pump(i);
            }
            Body::Ping {
                probe,
                seq,
                sent_at,
                reply,
                server_at,
            } => {
                let k = usize::from(probe);
                if self.probes.get(k).is_some_and(|x| x.flood_len.is_some()) {
                    let pr = &mut self.probes[k];
                    pr.delivered_bytes += u64::from(p.meta.len);
                    pr.samples.push((sent_at, now - sent_at));
                    pr.owd_up.push(now - sent_at);
                    pr.seqs.push(seq);
                } else if reply {
                    if let Some(pr) = self.probes.get_mut(k) {
                        pr.samples.push((sent_at, now - sent_at));
                        pr.owd_up.push(server_at.saturating_sub(sent_at));
                        pr.seqs.push(seq);
                    }
                } else {
                    // The reply goes back the way the request came.
                    let r = SimPacket {
                        meta: self.probe_meta(k, d.reverse() == Dir::Down),
                        body: Body::Ping {
                            probe,
                            seq,
                            sent_at,
                            reply: true,
                            server_at: now,
                        },
                    };
                    self.send(d.reverse(), r);
                }
            }
        }
    }

    fn send_ack(&mut self, i: usize, a: AckInfo) {
        let f = &self.flows[i];
        let key = f.key.reversed();
        let mut m = PacketMeta::new(ACK_FRAME, key);
        m.dscp = f.dscp;
        let mut tcp = debloat_core::packet::TcpInfo::pure_ack(a.ack as u32);
        tcp.sack_len = a.sack_len;
        for (k, b) in a.sack.iter().enumerate().take(3) {
            tcp.sack[k] = (b.0 as u32, b.1 as u32);
        }
        if a.ece {
            tcp.flags |= debloat_core::packet::TcpInfo::ECE;
        }
        m.tcp = Some(tcp);
        let body = Body::Ack {
            flow: i as u32,
            ack: a.ack,
            sack: a.sack,
            sack_len: a.sack_len,
            ece: a.ece,
            echo: a.echo,
        };
        let dir = f.dir.reverse();
        self.send(dir, SimPacket { meta: m, body });
    }

    /// Let flow `i` send what its window allows, and keep its timer scheduled.
    fn pump(&mut self, i: usize) {
        let now = self.now;
        if now < self.flows[i].start {
            return;
        }
        // After `stop` the transfer ends (as netperf does), retransmissions included.
        while now < self.flows[i].stop {
            let Some(seg) = self.flows[i].sender.poll_transmit(now) else {
                break;
            };
            let f = &self.flows[i];
            let mut m = PacketMeta::new(DATA_FRAME, f.key);
            m.dscp = f.dscp;
            m.ecn = if f.ecn { Ecn::Ect0 } else { Ecn::NotEct };
            let mut tcp = debloat_core::packet::TcpInfo::pure_ack(0);
            tcp.payload_len = MSS;
            tcp.flags |= debloat_core::packet::TcpInfo::PSH;
            m.tcp = Some(tcp);
            let body = Body::Data {
                flow: i as u32,
                seq: seg.seq,
                cwr: seg.cwr,
                sent_at: now,
            };
            let dir = f.dir;
            self.send(dir, SimPacket { meta: m, body });
        }
        if let Some(at) = self.flows[i].sender.poll_timeout() {
            self.events.push(at, Event::SenderTimer(i, at));
        }
        if now < self.flows[i].stop {
            if let Some(at) = self.flows[i].sender.poll_pacing(now) {
                if self.flows[i].pace_armed != Some(at) {
                    self.flows[i].pace_armed = Some(at);
                    self.events.push(at, Event::Pace(i, at));
                }
            }
        }
    }

    fn send_probe(&mut self, k: usize) {
        let now = self.now;
        let p = &mut self.probes[k];
        if now >= p.stop {
            return;
        }
        p.seq += 1;
        p.sent += 1;
        let (seq, interval) = (p.seq, p.interval);
        let dir = if p.flood_len.is_some() {
            p.flood_dir
        } else if p.from_remote {
            Dir::Down
        } else {
            Dir::Up
        };
        let m = self.probe_meta(k, dir == Dir::Down);
        self.send(
            dir,
            SimPacket {
                meta: m,
                body: Body::Ping {
                    probe: k as u16,
                    seq,
                    sent_at: now,
                    reply: false,
                    server_at: 0,
                },
            },
        );
        if now + interval <= self.end {
            self.events.push(now + interval, Event::Probe(k));
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use debloat_core::{FlowHasher, QdiscSpec};

    /// An idle wired world, 10 ms each way, 100 Mbit/s up (client → remote) and 1 Mbit/s down,
    /// with one ICMP probe every 100 ms from 0 to 1 s (11), sent by the remote host if `from_remote`.
    fn probe_world(from_remote: bool) -> World {
        let link = |rate_bps| LinkConfig {
            rate_bps,
            delay_ns: 10_000_000,
            qdisc: "pfifo limit 1000"
                .parse::<QdiscSpec>()
                .unwrap()
                .build(FlowHasher::new([1, 2]), 1),
            device: Device::default(),
            wire: Wire::default(),
        };
        let mut w = World::new(
            link(100_000_000),
            link(1_000_000),
            1_000_000_000,
            100_000_000,
        );
        let k = w.add_probe("Ping (ms) ICMP", false, 0, 0, 100_000_000);
        w.set_probe_from_remote(k, from_remote);
        w.run(|_| {});
        w
    }

    #[test]
    fn a_probe_from_the_remote_host_sends_its_requests_down_the_link() {
        let ser = |bps: u64| u64::from(PING_FRAME) * 8 * 1_000_000_000 / bps;
        for (from_remote, request_bps) in [(false, 100_000_000), (true, 1_000_000)] {
            let w = probe_world(from_remote);
            let p = &w.probes[0];
            assert_eq!(
                p.samples.len(),
                11,
                "from_remote {from_remote}: every request answered"
            );
            // The request crosses the link in its own direction: its one-way delay is that
            // direction's serialisation plus 10 ms; the RTT holds both directions either way.
            for (&owd, &(_, rtt)) in p.owd_up.iter().zip(&p.samples) {
                let want = 10_000_000 + ser(request_bps);
                assert!(
                    owd.abs_diff(want) < 10_000,
                    "from_remote {from_remote}: one-way {owd} ns, want {want}"
                );
                let both = 20_000_000 + ser(100_000_000) + ser(1_000_000);
                assert!(rtt.abs_diff(both) < 10_000, "rtt {rtt} ns, want {both}");
            }
        }
    }
}
