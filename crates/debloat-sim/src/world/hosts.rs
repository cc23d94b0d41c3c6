//! The hosts at either end: bulk TCP transfers and latency probes (pings, UDP probes, VoIP,
//! floods), how they are added and configured, what they send, and what happens when a packet
//! reaches its receiver.

use super::*;
use debloat_core::qdisc::pfifo_fast::tos_priority;

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
    pub(super) key: FlowKey,
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
    pub(super) pace_armed: Option<Nanos>,
    /// Bytes (truesize) of this flow's data in its host's qdisc: TCP Small Queues' count.
    pub(super) host_bytes: u64,
    /// Extra one-way delay between the bottleneck and this flow's remote host, ns.
    pub extra_ns: Nanos,
    /// The local (client-side) host's last address byte (198.18.1.x).
    pub client: u8,
    /// The local host's own address instead, when it has one (a LibreQoS circuit's).
    pub client_ip: Option<IpAddr>,
    /// The remote (server-side) host's last address byte (198.18.2.x).
    pub server: u8,
}

/// The 5-tuple of bulk flow `i` between `client` and server 198.18.2.`server`.
pub(super) fn flow_key(i: usize, dir: Dir, client: IpAddr, server: u8) -> FlowKey {
    let port = 40000u16.wrapping_add(i as u16);
    match dir {
        Dir::Up => FlowKey::ip(client, addr(2, server), port, 12865, 6),
        Dir::Down => FlowKey::ip(addr(2, server), client, 12865, port, 6),
    }
}

impl Flow {
    /// The client host's address: its own, else 198.18.1.`client`.
    fn client_addr(&self) -> IpAddr {
        self.client_ip.unwrap_or(addr(1, self.client))
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
    /// ECN field of requests and replies (ECT(1): an L4S probe, `l4s_mixed`).
    pub ecn: Ecn,
    pub(super) interval: Nanos,
    pub(super) seq: u32,
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
    /// The client host's own address, when not 198.18.1.3 (a LibreQoS circuit's subscriber).
    pub client_ip: Option<IpAddr>,
}

/// Whole segments in a window of `bytes` of payload (at least one).
pub(super) fn window_segments(bytes: u64) -> u64 {
    (bytes / u64::from(MSS)).max(1)
}

impl World {
    /// Limit every TCP flow, present and future, to a window of `bytes` of payload (the
    /// receive window the peer advertises, or the send buffer): `Sender::set_window`. None:
    /// no limit, only cwnd.
    pub fn set_tcp_window(&mut self, bytes: Option<u64>) {
        self.tcp_window = bytes.map(window_segments);
        for f in &mut self.flows {
            f.sender.set_window(self.tcp_window);
        }
    }

    /// BBR as Linux has it since 5.1 (`true`, the default: the window carries the recent ACK
    /// aggregation) or as released in 2016 (`false`), for every BBR flow present and future.
    pub fn set_bbr_ack_aggregation(&mut self, on: bool) {
        self.bbr_ack_aggregation = on;
        for f in &mut self.flows {
            f.sender.set_bbr_ack_aggregation(on);
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
        let key = flow_key(i, dir, addr(1, 2), 2);
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
                s.set_bbr_ack_aggregation(self.bbr_ack_aggregation);
                s.set_fq_pacing(self.fq_pacing);
                s
            },
            receiver: Receiver::new(),
            delivered_series: Vec::new(),
            cwnd_series: Vec::new(),
            drops: 0,
            pace_armed: None,
            host_bytes: 0,
            extra_ns: 0,
            client: 2,
            client_ip: None,
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
            ecn: Ecn::NotEct,
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
            client_ip: None,
        });
        self.events.push(start, Event::Probe(k));
        k
    }

    /// Place flow `i` at remote host 198.18.2.`host`, `extra_ns` one way beyond the bottleneck.
    pub fn set_flow_host(&mut self, i: usize, host: u8, extra_ns: Nanos) {
        let f = &mut self.flows[i];
        f.server = host;
        f.key = flow_key(i, f.dir, f.client_addr(), host);
        f.extra_ns = extra_ns;
    }

    /// Place flow `i` on client host 198.18.1.`host` (several client hosts share the link; host
    /// isolation such as cake's `dual-srchost` tells them apart).
    pub fn set_flow_client(&mut self, i: usize, host: u8) {
        let f = &mut self.flows[i];
        f.client = host;
        f.client_ip = None;
        f.key = flow_key(i, f.dir, f.client_addr(), f.server);
    }

    /// Place flow `i` on a client host with this address (a LibreQoS circuit's subscriber).
    pub fn set_flow_client_addr(&mut self, i: usize, ip: IpAddr) {
        let f = &mut self.flows[i];
        f.client_ip = Some(ip);
        f.key = flow_key(i, f.dir, ip, f.server);
    }

    /// Send probe `k` from (and answer it at) a client host with this address.
    pub fn set_probe_client_addr(&mut self, k: usize, ip: IpAddr) {
        self.probes[k].client_ip = Some(ip);
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

    /// Give probe `k`'s packets this ECN field (an L4S probe sends ECT(1)).
    pub fn set_probe_ecn(&mut self, k: usize, ecn: Ecn) {
        self.probes[k].ecn = ecn;
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
    pub(super) fn probe_meta(&self, k: usize, down: bool) -> PacketMeta {
        let p = &self.probes[k];
        let (client, server) = (p.client_ip.unwrap_or(addr(1, 3)), addr(2, p.host));
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
        m.ecn = p.ecn;
        m.priority = tos_priority(p.dscp);
        m
    }

    /// Hand `p` to its receiver after `delay` plus its remote host's extra delay.
    pub(super) fn deliver_after(&mut self, d: Dir, p: SimPacket, delay: Nanos) {
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

    pub(super) fn arrive(&mut self, d: Dir, p: SimPacket) {
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
                ce,
            } => {
                let i = flow as usize;
                self.flows[i].sender.on_ack(
                    &AckInfo {
                        ack,
                        sack,
                        sack_len,
                        ece,
                        echo,
                        ce: u64::from(ce),
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
                    self.autorate_reflector(k, now - sent_at);
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

    pub(super) fn send_ack(&mut self, i: usize, a: AckInfo) {
        let f = &self.flows[i];
        let key = f.key.reversed();
        let mut m = PacketMeta::new(ACK_FRAME, key);
        m.dscp = f.dscp;
        m.priority = tos_priority(f.dscp);
        m.socket = i as u32 + 1;
        let body = Body::Ack {
            flow: i as u32,
            ack: a.ack,
            sack: a.sack,
            sack_len: a.sack_len,
            ece: a.ece,
            echo: a.echo,
            ce: a.ce.min(u64::from(u32::MAX)) as u32,
        };
        let dir = f.dir.reverse();
        self.send(dir, SimPacket { meta: m, body });
    }

    /// Let flow `i` send what its window allows, and keep its timer scheduled.
    pub(super) fn pump(&mut self, i: usize) {
        let now = self.now;
        if now < self.flows[i].start {
            return;
        }
        // After `stop` the transfer ends (as netperf does), retransmissions included.
        while now < self.flows[i].stop {
            if !self.small_queue_allows(i) {
                break;
            }
            let Some(seg) = self.flows[i].sender.poll_transmit(now) else {
                break;
            };
            let f = &self.flows[i];
            let mut m = PacketMeta::new(DATA_FRAME, f.key);
            // The sending socket, and its departure time when the host's fq paces it.
            m.socket = i as u32 + 1;
            m.tstamp = f.sender.departure();
            m.dscp = f.dscp;
            // The socket's priority from its TOS (IP_TOS), as a Linux sender's and a router's.
            m.priority = tos_priority(f.dscp);
            // Prague is L4S: ECT(1) always; the others ECT(0) with --ecn (RFC 3168).
            m.ecn = match (f.cc, f.ecn) {
                (Algorithm::Prague, _) => Ecn::Ect1,
                (_, true) => Ecn::Ect0,
                _ => Ecn::NotEct,
            };
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

    pub(super) fn send_probe(&mut self, k: usize) {
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
