//! The simulated network: a client and a server joined by one link in each direction (or a
//! Wi-Fi AP and its stations, [`crate::wifi`]). Each wired direction is a queue discipline from
//! `debloat-core`, an optional device ring with BQL (`link.rs`), and the core's link model — a
//! transmitter at the link rate, then netem's impairments and the propagation delay — the same
//! [`debloat_core::link::Link`] the gateway and `debloat replay` send through. Uploads, ping
//! requests and download ACKs use the up link; downloads, ping replies and upload ACKs the down
//! link. Timers are lazy: an event carries the deadline it was scheduled for and is ignored if
//! the endpoint's deadline has moved since.
//!
//! `mod.rs` holds the world, its events and its clock; `link.rs` the links and devices;
//! `hosts.rs` the TCP transfers and probes at either end; `air.rs` the Wi-Fi glue.

use crate::engine::EventQueue;
use crate::packet::{
    Body, SimPacket, ACK_FRAME, DATA_FRAME, MSS, PING_FRAME, UDP_PROBE_FRAME, VOIP_FRAME,
};
use crate::tcp::cc::Algorithm;
use crate::tcp::{AckInfo, Receiver, Sender};
pub use crate::wire::Wire;
use debloat_core::classify::Classify;
use debloat_core::flow::FlowKey;
use debloat_core::link::{Emulation, Link as WireLink, LinkLayer};
use debloat_core::packet::{Ecn, Nanos, PacketMeta};
use debloat_core::path::{DataPath, Event as PathEvent, PathDrop, Stage};
use debloat_core::{DropReason, Qdisc};
use std::net::{IpAddr, Ipv4Addr};

mod air;
mod autorate;
mod host_qdisc;
mod hosts;
mod link;

pub use autorate::{AutorateConfig, RatePoint};
pub use debloat_core::device::DeviceConfig;
pub use hosts::{Flow, Probe};
use link::*;
pub use link::{LinkConfig, LinkStats};

/// Up (client → server) or down (server → client): the core's one [`debloat_core::Direction`],
/// by the short name the simulator's code uses.
pub use debloat_core::Direction as Dir;

enum Event {
    /// A link direction's data path asked to be polled now.
    Path(Dir),
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
    /// A direction's shaper-rate controller ticks.
    Autorate(Dir),
    /// The qdisc of the hosts sending in a direction may release a packet.
    HostWake(Dir, Nanos),
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
    /// BBR flows' ACK-aggregation head-room (see [`World::set_bbr_ack_aggregation`]).
    bbr_ack_aggregation: bool,
    /// The marking stage, shared by both directions.
    marker: Option<Box<dyn Classify>>,
    /// Shaper-rate controllers, per direction (`autorate.rs`).
    autorate: [Option<Box<autorate::Driver>>; 2],
    /// The hosts' own qdisc, per direction of what they send (`--host-qdisc`, `host_qdisc.rs`).
    hosts: [Option<host_qdisc::HostStage>; 2],
    /// TCP senders leave pacing to the hosts' fq (departure times).
    fq_pacing: bool,
    /// What a path reported during one call (kept to reuse its allocation).
    path_out: Vec<PathOut>,
    /// The wake-ups a path armed during one call (likewise).
    path_armed: Vec<Nanos>,
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

/// A capture hook: called for every packet as a link starts to send it.
pub type Tap = Box<dyn FnMut(Dir, Nanos, &SimPacket)>;

fn addr(net: u8, host: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(198, 18, net, host))
}

impl World {
    /// A client and a server joined by `up` and `down`; run for `end` ns, sampling every `step`.
    pub fn new(up: LinkConfig, down: LinkConfig, end: Nanos, step: Nanos) -> World {
        let mut w = World {
            now: 0,
            events: EventQueue::default(),
            links: [Link::new(up), Link::new(down)],
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
            bbr_ack_aggregation: true,
            marker: None,
            autorate: [None, None],
            hosts: [None, None],
            fq_pacing: false,
            path_out: Vec::new(),
            path_armed: Vec::new(),
        };
        w.events.push(step, Event::Sample);
        w
    }

    /// Watch every packet as a link starts to send it (for pcap capture).
    pub fn set_tap(&mut self, tap: Tap) {
        self.tap = Some(tap);
    }

    /// A per-step series' value at the first sample at or after `t`; `latest` when no sample
    /// is that late (the run ended first).
    pub fn sampled_at(&self, series: &[u64], t: Nanos, latest: u64) -> u64 {
        self.sample_times
            .iter()
            .position(|&x| x >= t)
            .and_then(|k| series.get(k))
            .copied()
            .unwrap_or(latest)
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
        self.autorate_forget_reflectors();
        progress(1.0);
    }

    fn handle(&mut self, e: Event) {
        match e {
            Event::Path(d) => self.fire_path(d),
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
            Event::Autorate(d) => self.autorate_tick(d),
            Event::HostWake(d, at) => self.host_wake(d, at),
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
}

impl World {
    /// Run qosify's marking stage on every packet before the bottleneck (up is egress).
    pub fn set_classifier(&mut self, c: Option<debloat_core::classify::qosify::Classifier>) {
        self.marker = c.map(|c| Box::new(c) as Box<dyn Classify>);
    }

    /// Run this classify stage on every packet before the bottleneck, both directions (the
    /// core runs it: [`debloat_core::path::DataPath::arrive_classified`]).
    pub fn set_stage(&mut self, stage: Box<dyn Classify>) {
        self.marker = Some(stage);
    }

    /// qosify's marking stage, when it is the one that runs.
    pub fn classifier(&self) -> Option<&debloat_core::classify::qosify::Classifier> {
        self.marker
            .as_deref()
            .and_then(|m| m.as_any().downcast_ref())
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
            device: DeviceConfig::default(),
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
