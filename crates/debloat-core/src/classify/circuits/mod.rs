//! Circuits: each packet to its subscriber's class, as LibreQoS's XDP program does it — the
//! longest prefix that holds the client's address (the source going up, the destination going
//! down), in a prefix trie per address family (`prefix-trie`), or the client's MAC when no
//! prefix holds it — written into the packet's `priority` as the class's id (1:N), which HTB
//! honours before its own words (`skb->priority` naming a class, as LibreQoS's tc filter sets
//! the classid). Before the leaf's own classifier (CAKE's tins), after nothing.
//!
//! `libreqos.rs` reads and lints LibreQoS's `network.json` and `ShapedDevices.csv`;
//! `tree.rs` turns them into the two directions' HTB trees; [`Circuits`] is the classify stage.

pub mod libreqos;
pub mod tree;

use super::{Admit, Classify, LinkType};
use crate::packet::{Nanos, PacketMeta};
use crate::Direction;
use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use prefix_trie::PrefixMap;
use std::any::Any;
use std::collections::BTreeMap;
use std::net::IpAddr;

pub use libreqos::{Circuit, Device, Finding, Node, Plan};
pub use tree::{CircuitTree, Minors, TreeOptions};

/// What the stage has done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CircuitCounts {
    /// Packets given a circuit by address.
    pub by_address: u64,
    /// Packets given a circuit by MAC.
    pub by_mac: u64,
    /// Packets no circuit holds (HTB's default class takes them).
    pub unknown: u64,
}

/// The classify stage: addresses and MACs to class minors.
#[derive(Clone, Debug)]
pub struct Circuits {
    v4: PrefixMap<Ipv4Net, u16>,
    v6: PrefixMap<Ipv6Net, u16>,
    macs: BTreeMap<[u8; 6], u16>,
    /// The last frame's (destination, source) MACs, from `snoop`.
    last_macs: Option<([u8; 6], [u8; 6])>,
    counts: CircuitCounts,
    /// Circuit ID → (minor, name), for `gateway stats --circuit ID`.
    ids: BTreeMap<String, (u16, String)>,
    /// Minor → Circuit ID, for per-circuit metrics.
    by_minor: BTreeMap<u16, String>,
}

impl Circuits {
    /// The stage for a plan whose circuits have these minors (`CircuitTree::minor`).
    pub fn new(plan: &Plan, minor: &[u16]) -> Circuits {
        let mut s = Circuits {
            v4: PrefixMap::new(),
            v6: PrefixMap::new(),
            macs: BTreeMap::new(),
            last_macs: None,
            counts: CircuitCounts::default(),
            ids: BTreeMap::new(),
            by_minor: BTreeMap::new(),
        };
        for (c, &m) in plan.circuits.iter().zip(minor) {
            s.ids.insert(c.id.clone(), (m, c.name.clone()));
            s.by_minor.insert(m, c.id.clone());
            for d in &c.devices {
                for n in &d.nets {
                    match n {
                        IpNet::V4(n) => s.v4.insert(*n, m),
                        IpNet::V6(n) => s.v6.insert(*n, m),
                    };
                }
                if let Some(mac) = d.mac {
                    s.macs.insert(mac, m);
                }
            }
        }
        s
    }

    /// The minor of the circuit holding `addr`, by longest prefix.
    pub fn lookup(&self, addr: IpAddr) -> Option<u16> {
        match addr {
            IpAddr::V4(a) => self.v4.get_lpm(&Ipv4Net::from(a)).map(|(_, &m)| m),
            IpAddr::V6(a) => self.v6.get_lpm(&Ipv6Net::from(a)).map(|(_, &m)| m),
        }
    }

    /// The Circuit ID whose class has this minor.
    pub fn id_of(&self, minor: u16) -> Option<&str> {
        self.by_minor.get(&minor).map(String::as_str)
    }

    /// A circuit's class minor and name, by its Circuit ID.
    pub fn circuit(&self, id: &str) -> Option<(u16, &str)> {
        self.ids.get(id).map(|(m, n)| (*m, n.as_str()))
    }

    /// What the stage has done so far.
    pub fn counts(&self) -> CircuitCounts {
        self.counts
    }
}

impl Classify for Circuits {
    fn snoop(&mut self, frame: &[u8], link: LinkType, _meta: &PacketMeta, _now: Nanos) {
        self.last_macs = match (link, frame.get(..12)) {
            (LinkType::Ethernet, Some(h)) => {
                let mut d = [0u8; 6];
                let mut s = [0u8; 6];
                d.copy_from_slice(&h[..6]);
                s.copy_from_slice(&h[6..12]);
                Some((d, s))
            }
            _ => None,
        };
    }

    fn classify(&mut self, meta: &mut PacketMeta, dir: Direction, _now: Nanos) -> Admit {
        let client = match dir {
            Direction::Up => meta.flow.src(),
            Direction::Down => meta.flow.dst(),
        };
        let macs = self.last_macs.take();
        if let Some(m) = client.and_then(|a| self.lookup(a)) {
            meta.priority = 0x1_0000 | u32::from(m);
            self.counts.by_address += 1;
            return Admit::Pass;
        }
        let mac = macs.map(|(d, s)| if dir == Direction::Up { s } else { d });
        match mac.and_then(|m| self.macs.get(&m)) {
            Some(&m) => {
                meta.priority = 0x1_0000 | u32::from(m);
                self.counts.by_mac += 1;
            }
            None => self.counts.unknown += 1,
        }
        Admit::Pass
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Read, lint and build: both files into a plan, the plan into trees and the stage. The plan
/// carries every finding; with an error in it nothing else is built.
pub fn load(
    network: (&str, &str),
    devices: (&str, &str),
    o: &TreeOptions,
) -> (Plan, Option<(CircuitTree, Circuits)>) {
    load_keeping(network, devices, o, None)
}

/// [`load`] for a reload: circuits and nodes still there keep the minors `keep` gave them
/// ([`tree::build_keeping`]).
pub fn load_keeping(
    network: (&str, &str),
    devices: (&str, &str),
    o: &TreeOptions,
    keep: Option<&Minors>,
) -> (Plan, Option<(CircuitTree, Circuits)>) {
    let mut plan = Plan::default();
    libreqos::read_network(&mut plan, network.0, network.1);
    libreqos::read_devices(&mut plan, devices.0, devices.1);
    if plan.has_errors() {
        return (plan, None);
    }
    libreqos::cross_check(&mut plan, devices.0);
    match tree::build_keeping(&plan, o, keep) {
        Ok(t) => {
            let stage = Circuits::new(&plan, &t.minor);
            (plan, Some((t, stage)))
        }
        Err(e) => {
            plan.findings.push(Finding {
                file: devices.0.into(),
                line: 1,
                error: true,
                text: e,
            });
            (plan, None)
        }
    }
}

#[cfg(test)]
mod tests;
