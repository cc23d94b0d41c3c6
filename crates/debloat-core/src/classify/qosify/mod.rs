//! The marking stage, qosify's rules: packet → classify → **mark** → qdisc. Every packet of an
//! ordinary home network leaves with DSCP 0, so CAKE's `diffserv` tins sit empty unless
//! something marks them; qosify (OpenWrt's eBPF classifier in front of CAKE) does it by port,
//! address, and per flow by packet rate and size. This is its logic, sans-IO: `now` passed in,
//! a flow table allocated once, no allocation per packet.
//!
//! For each IP packet, in qosify's order (`qosify-bpf.c`):
//! 1. by protocol: TCP and UDP look up their port (the destination port on egress, the source
//!    port on ingress) in the map files' rules, else `dscp_default_tcp` / `dscp_default_udp`;
//!    ICMP and ICMPv6 take `dscp_icmp`; other protocols take the UDP default;
//! 2. an address rule (the destination on egress, the source on ingress) overrides the port's;
//! 3. a class resolves to its egress or ingress DSCP, and flow detection may then replace it —
//!    a class's own options for a class a rule named, the defaults' options for what a default
//!    decided (qosify keeps two default class entries for those): a flow above
//!    `bulk_trigger_pps` is bulk (`dscp_bulk`) until it has been under it for
//!    `bulk_trigger_timeout` seconds; a flow whose packets average at most
//!    `prio_max_avg_pkt_len` bytes is priority (`dscp_prio`); either may name a class again;
//! 4. the DSCP is written, keeping the ECN bits; a `+` value only where the DSCP was 0.
//!
//! Where debloat differs, and why:
//! * Ingress packets of a flow whose egress packets resolved to a class take that class's
//!   ingress DSCP (the reply direction follows the request); qosify classifies ingress by the
//!   source port and address only. An ISP's DSCP on arrival is noise, so the flow is the better
//!   key. Flows first seen on ingress fall back to qosify's rule.
//! * Address rules accept a prefix (`198.18.0.0/15`), longest prefix first; qosify has exact
//!   addresses only.
//! * qosify's eBPF (2022) tests the `+` flag after masking it away and tests the ECN bits, not
//!   the DSCP, for "already marked"; debloat does what its README says: `+` applies only to
//!   packets whose DSCP is 0.
//! * Names (`dns:`, `dns_c:`) are learnt by snooping the DNS answers that cross the stage
//!   ([`dns`]), as qosify does since it reads answers itself; a learnt address is checked before
//!   the files' address rules (qosify lets a learnt entry override a file's for the same
//!   address).

pub mod config;
pub mod dns;
pub mod flows;

pub use config::{parse_uci, Class, Config, ConfigError, FlowConfig, Match, Rule, Target, Value};

use crate::flow::{FlowHasher, FlowKey};
use crate::packet::{Nanos, PacketMeta};
use core::net::IpAddr;
use flows::Flows;

/// Which way a packet goes through the gateway: [`Direction::Up`] is qosify's egress (LAN →
/// WAN), [`Direction::Down`] its ingress.
pub use crate::Direction;

/// Flows the table holds (qosify's `QOSIFY_FLOW_BUCKETS` is 65536).
pub const FLOW_SLOTS: usize = 65_536;

/// What the stage counted.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counters {
    /// Packets each rule decided, in rule order.
    pub rules: Vec<u64>,
    /// Packets each class marked, egress and ingress, in class order.
    pub classes: Vec<[u64; 2]>,
    /// Packets a default decided (`dscp_default_tcp`, `_udp`, `dscp_icmp`).
    pub defaults: u64,
    /// Packets of bulk flows given `dscp_bulk`.
    pub bulk_packets: u64,
    /// Packets of priority flows given `dscp_prio`.
    pub prio_packets: u64,
    /// Flows that became bulk.
    pub bulk_flows: u64,
    /// Ingress packets that took their class from the flow's egress side.
    pub replies: u64,
    /// Packets whose DSCP changed.
    pub remarked: u64,
    /// Flows the table forgot to make room.
    pub flow_evictions: u64,
    /// DNS snooping.
    pub dns: dns::DnsCounters,
}

/// The marking stage.
#[derive(Debug)]
pub struct Classifier {
    cfg: Config,
    /// Rule index + 1 per TCP and UDP port (0: none); a later rule wins, as in qosify's maps.
    tcp: Vec<u16>,
    udp: Vec<u16>,
    /// Address rules, longest prefix first: (rule index).
    addrs: Vec<usize>,
    flows: Flows,
    dns: dns::Dns,
    counters: Counters,
    /// Leave the flow hash in `meta.hash` for the disciplines after the stage (they use the
    /// same hasher), as `skb->hash` carries one stage's hash to the next.
    share_hash: bool,
}

fn in_prefix(a: IpAddr, net: IpAddr, len: u8) -> bool {
    let (a, n, bits) = match (a, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => (u128::from(a.to_bits()), u128::from(n.to_bits()), 32),
        (IpAddr::V6(a), IpAddr::V6(n)) => (a.to_bits(), n.to_bits(), 128),
        _ => return false,
    };
    let len = u32::from(len).min(bits);
    if len == 0 {
        return true;
    }
    let shift = bits - len;
    (a >> shift) == (n >> shift)
}

impl Classifier {
    /// The stage for `cfg`, with a flow table of `slots` flows hashed with `hasher`.
    pub fn new(cfg: Config, slots: usize, hasher: FlowHasher) -> Classifier {
        let mut tcp = vec![0u16; 65_536];
        let mut udp = vec![0u16; 65_536];
        let mut addrs = Vec::new();
        for (i, r) in cfg.rules.iter().enumerate() {
            let id = (i + 1).min(usize::from(u16::MAX)) as u16;
            match r.matches {
                Match::Tcp(a, b) => tcp[usize::from(a)..=usize::from(b)].fill(id),
                Match::Udp(a, b) => udp[usize::from(a)..=usize::from(b)].fill(id),
                Match::Addr(..) => addrs.push(i),
                Match::Dns(_) | Match::DnsCname(_) => {}
            }
        }
        // Longest prefix first; among equals, the later rule first (it wins, as in qosify).
        addrs.sort_by_key(|&i| match cfg.rules[i].matches {
            Match::Addr(_, len) => (core::cmp::Reverse(len), core::cmp::Reverse(i)),
            _ => (core::cmp::Reverse(0), core::cmp::Reverse(i)),
        });
        let counters = Counters {
            rules: vec![0; cfg.rules.len()],
            classes: vec![[0; 2]; cfg.classes.len()],
            ..Counters::default()
        };
        let dns = dns::Dns::new(&cfg.rules, cfg.timeout, cfg.active_timeout);
        Classifier {
            cfg,
            tcp,
            udp,
            addrs,
            flows: Flows::new(slots, hasher),
            dns,
            counters,
            share_hash: false,
        }
    }

    /// Hand the flow hash the stage computes to the disciplines after it, in `meta.hash`: only
    /// when they were built with the same [`FlowHasher`] (the gateway and the simulator build
    /// both from one), so the value is the one they would compute and their choices are
    /// unchanged. A packet arriving with a hash keeps it (the stage's own table needs its
    /// 64-bit fingerprint, which a foreign hash does not give).
    pub fn sharing_hash(mut self) -> Self {
        self.share_hash = true;
        self
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The counters.
    pub fn counters(&self) -> Counters {
        Counters {
            flow_evictions: self.flows.evictions,
            dns: self.dns.counters(),
            ..self.counters.clone()
        }
    }

    /// Steps 1 and 2: the rule (or default) that decides, as (value, rule index).
    fn lookup(
        &mut self,
        flow: &FlowKey,
        dir: Direction,
        now: Nanos,
    ) -> Option<(Value, Option<usize>)> {
        let FlowKey::Ip {
            src,
            dst,
            sport,
            dport,
            proto,
            ..
        } = *flow
        else {
            return None;
        };
        let (port, addr) = match dir {
            Direction::Up => (dport, dst),
            Direction::Down => (sport, src),
        };
        let by_rule = |table: &[u16]| match table[usize::from(port)] {
            0 => None,
            id => Some(usize::from(id) - 1),
        };
        let mut found = match proto {
            6 => by_rule(&self.tcp).map(|i| (self.cfg.rules[i].value, Some(i))),
            1 | 58 => None,
            17 => by_rule(&self.udp).map(|i| (self.cfg.rules[i].value, Some(i))),
            _ => None,
        };
        if found.is_none() {
            let d = match proto {
                6 => self.cfg.default_tcp,
                1 | 58 => self.cfg.icmp,
                _ => self.cfg.default_udp,
            };
            found = d.map(|v| (v, None));
        }
        let by_addr = self.dns.lookup(addr, now).or_else(|| {
            self.addrs.iter().copied().find(|&i| {
                matches!(self.cfg.rules[i].matches, Match::Addr(net, len) if in_prefix(addr, net, len))
            })
        });
        if let Some(i) = by_addr {
            found = Some((self.cfg.rules[i].value, Some(i)));
        }
        found
    }

    /// A value's DSCP in a direction.
    fn dscp_of(&self, v: Value, dir: Direction) -> u8 {
        match v.target {
            Target::Dscp(d) => d,
            Target::Class(c) => {
                let c = &self.cfg.classes[usize::from(c)];
                match dir {
                    Direction::Up => c.egress,
                    Direction::Down => c.ingress,
                }
            }
        }
    }

    /// Step 3: flow detection with `fc`, for the flow `key` (egress-oriented).
    fn detect(
        &mut self,
        mut v: Value,
        fc: FlowConfig,
        h: u64,
        meta: &PacketMeta,
        now: Nanos,
    ) -> Value {
        if fc.bulk_trigger_pps == 0 && fc.prio_max_avg_pkt_len == 0 {
            return v;
        }
        let segs = u32::from(meta.gso_segs.max(1));
        let f = self.flows.entry_fp(h);
        let was_bulk = f.bulk_timeout > 0;
        if f.bulk(now, segs, fc.bulk_trigger_pps, fc.bulk_trigger_timeout) {
            if !was_bulk {
                self.counters.bulk_flows += 1;
            }
            if let Some(b) = fc.dscp_bulk {
                self.counters.bulk_packets += 1;
                v = Value {
                    fallback: v.fallback || b.fallback,
                    ..b
                };
            }
        } else if f.prio(meta.len, segs, fc.prio_max_avg_pkt_len) {
            if let Some(p) = fc.dscp_prio {
                self.counters.prio_packets += 1;
                v = Value {
                    fallback: v.fallback || p.fallback,
                    ..p
                };
            }
        }
        v
    }

    /// Whether name rules are in use (frames from port 53 should be shown to [`Self::snoop`]).
    pub fn snoops(&self) -> bool {
        self.dns.active()
    }

    /// Read the DNS answers a frame carries, learning the addresses of names the rules
    /// mention. Only frames of `flow`s from port 53 are parsed (in either direction), and only
    /// when a rule names a DNS pattern.
    pub fn snoop(
        &mut self,
        frame: &[u8],
        link: crate::classify::LinkType,
        flow: &FlowKey,
        now: Nanos,
    ) {
        if !self.dns.active()
            || !matches!(
                flow,
                FlowKey::Ip {
                    sport: 53,
                    proto: 6 | 17,
                    ..
                }
            )
        {
            return;
        }
        if let Some((payload, tcp)) = dns::port_53_payload(frame, link) {
            let d = &mut self.dns;
            dns::messages(payload, tcp, |m| d.snoop(m, now));
        }
    }

    /// Mark one packet going `dir` at `now`: set `meta.dscp` by the rules. Returns whether the
    /// DSCP changed. Non-IP packets, and IP packets no rule or default decides, pass as they are.
    pub fn mark(&mut self, meta: &mut PacketMeta, dir: Direction, now: Nanos) -> bool {
        let key = match dir {
            Direction::Up => meta.flow,
            Direction::Down => meta.flow.reversed(),
        };
        // One hash per packet, symmetric (a reply's reversed key hashes the same), computed when
        // first needed; its fold is the flow hash the disciplines would compute, handed to them
        // when they share the hasher.
        let mut hash = None;
        let mut h = |flows: &Flows| *hash.get_or_insert_with(|| flows.fingerprint(&key));
        if self.share_hash && meta.hash == 0 && meta.flow.is_ip() {
            meta.hash = crate::flow::fold(h(&self.flows));
        }
        let reply = match dir {
            Direction::Down => {
                let fp = h(&self.flows);
                self.flows.get_fp(fp).and_then(|f| f.class)
            }
            Direction::Up => None,
        };
        let (v, rule) = match reply {
            Some(c) => {
                self.counters.replies += 1;
                (
                    Value {
                        target: Target::Class(c),
                        fallback: false,
                    },
                    None,
                )
            }
            None => match self.lookup(&meta.flow, dir, now) {
                Some(found) => found,
                None => return false,
            },
        };
        match rule {
            Some(i) => self.counters.rules[i] += 1,
            None if reply.is_none() => self.counters.defaults += 1,
            None => {}
        }
        if let (Target::Class(c), Direction::Up) = (v.target, dir) {
            let fp = h(&self.flows);
            self.flows.entry_fp(fp).class = Some(c);
        }
        // A rule's class detects with its own options; a default with the defaults'.
        let fc = match (rule, reply, v.target) {
            (None, None, _) => self.cfg.flow,
            (_, _, Target::Class(c)) => self.cfg.classes[usize::from(c)].flow,
            _ => FlowConfig::default(),
        };
        let v = if fc.bulk_trigger_pps == 0 && fc.prio_max_avg_pkt_len == 0 {
            v
        } else {
            let fp = h(&self.flows);
            self.detect(v, fc, fp, meta, now)
        };
        if let Target::Class(c) = v.target {
            self.counters.classes[usize::from(c)][usize::from(dir == Direction::Down)] += 1;
        }
        let dscp = self.dscp_of(v, dir);
        if (v.fallback && meta.dscp != 0) || meta.dscp == dscp {
            return false;
        }
        meta.dscp = dscp;
        self.counters.remarked += 1;
        true
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn stage(uci: &str, map: &str) -> Classifier {
        let mut c = parse_uci("qosify", uci).unwrap();
        c.add_map("map", map).unwrap();
        Classifier::new(c, 1024, FlowHasher::new([3, 4]))
    }

    fn pkt(proto: u8, sport: u16, dport: u16, len: u32) -> PacketMeta {
        let k = FlowKey::ip(
            "198.18.1.2".parse().unwrap(),
            "198.18.2.2".parse().unwrap(),
            sport,
            dport,
            proto,
        );
        PacketMeta::new(len, k)
    }

    fn shipped() -> Classifier {
        stage(config::tests::UCI, config::tests::MAP)
    }

    #[test]
    fn ports_defaults_and_icmp_mark_as_qosify_ships_them() {
        let mut q = shipped();
        let mut dns = pkt(17, 40000, 53, 80);
        assert!(q.mark(&mut dns, Direction::Up, 1));
        assert_eq!(dns.dscp, 48, "udp:53 voice → CS6");
        let mut ssh = pkt(6, 40001, 22, 1500);
        ssh.dscp = 8;
        assert!(
            !q.mark(&mut ssh, Direction::Up, 1),
            "+video leaves a marked packet"
        );
        assert_eq!(ssh.dscp, 8);
        let mut ssh0 = pkt(6, 40002, 22, 1500);
        q.mark(&mut ssh0, Direction::Up, 1);
        assert_eq!(ssh0.dscp, 34, "+video on DSCP 0 → AF41");
        let mut other_udp = pkt(17, 40003, 9999, 1200);
        other_udp.dscp = 46;
        q.mark(&mut other_udp, Direction::Up, 1);
        assert_eq!(other_udp.dscp, 0, "dscp_default_udp besteffort re-marks");
        let mut tcp = pkt(6, 40004, 8080, 1500);
        tcp.dscp = 10;
        assert!(
            !q.mark(&mut tcp, Direction::Up, 1),
            "no TCP default: left alone"
        );
        let c = q.counters();
        assert_eq!(c.rules[1], 1, "udp:53 counted");
        assert_eq!(c.rules[3], 2, "tcp:22 counted twice");
        assert_eq!(c.defaults, 1);
    }

    #[test]
    fn an_address_rule_wins_over_the_port_and_the_longest_prefix_first() {
        let mut q = stage(
            config::tests::UCI,
            "udp:53 voice\n198.18.0.0/15 bulk\n198.18.2.2 video\n",
        );
        let mut p = pkt(17, 40000, 53, 100);
        q.mark(&mut p, Direction::Up, 1);
        assert_eq!(p.dscp, 34, "the /32 video beats the /15 and the port");
        let mut far = pkt(17, 40000, 53, 100);
        far.flow = FlowKey::ip(
            "198.18.1.2".parse().unwrap(),
            "198.19.0.1".parse().unwrap(),
            4,
            53,
            17,
        );
        q.mark(&mut far, Direction::Up, 1);
        assert_eq!(far.dscp, 1, "the /15 bulk → LE");
    }

    #[test]
    fn replies_take_the_class_of_their_flow_not_their_source_port() {
        let mut q = shipped();
        let mut out = pkt(17, 40000, 123, 90);
        q.mark(&mut out, Direction::Up, 1);
        assert_eq!(out.dscp, 48);
        // The NTP reply, re-marked AF11 by an ISP, comes back from port 123 to 40000.
        let mut back = pkt(17, 123, 40000, 90);
        back.flow = out.flow.reversed();
        back.dscp = 10;
        q.mark(&mut back, Direction::Down, 2);
        assert_eq!(back.dscp, 48, "voice's ingress DSCP");
        assert_eq!(q.counters().replies, 1);
    }

    #[test]
    fn a_voice_flow_above_100_pps_is_demoted_to_bulk_and_small_packets_promoted() {
        let mut q = shipped();
        let mut demoted = None;
        for i in 0..300u64 {
            let mut p = pkt(17, 40000, 53, 1200);
            q.mark(&mut p, Direction::Up, 1_000_000_000 + i * 4_000_000);
            if p.dscp == 0 && demoted.is_none() {
                demoted = Some(i);
            }
        }
        assert_eq!(
            demoted,
            Some(100),
            "CS0 (voice's dscp_bulk) once past 100 in a second"
        );
        assert_eq!(q.counters().bulk_flows, 1);
        // A besteffort UDP flow of small packets becomes video (the defaults' dscp_prio).
        let mut p = pkt(17, 40001, 7000, 120);
        q.mark(&mut p, Direction::Up, 5);
        assert_eq!(p.dscp, 34);
        assert!(q.counters().prio_packets >= 1);
    }

    #[test]
    fn non_ip_and_undecided_packets_pass_untouched() {
        let mut q = stage("config defaults\n", "");
        let mut arp = PacketMeta::new(60, FlowKey::NonIp { ethertype: 0x0806 });
        assert!(!q.mark(&mut arp, Direction::Up, 1));
        let mut p = pkt(6, 1, 2, 100);
        p.dscp = 12;
        assert!(!q.mark(&mut p, Direction::Down, 1));
        assert_eq!(p.dscp, 12);
    }
}
