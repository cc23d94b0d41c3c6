//! LibreQoS's circuits in the simulator: `debloat sim --network network.json --devices
//! ShapedDevices.csv --load profile.toml` — "what happens to this AP's subscribers at 8 pm?"
//! asked before anything changes.
//!
//! The two HTB trees the gateway would build from the files ([`debloat_core::classify::circuits`])
//! shape the two directions of the simulated link, and the gateway's circuit stage classifies
//! every packet by its subscriber's address, as it would in the gateway. Each circuit chosen
//! by the load profile becomes a subscriber host with its own address (its first device's
//! first address in ShapedDevices.csv), with the TCP transfers and the ping the profile gives
//! it, against one server `rtt` away. The results are per circuit (goodput each way, the
//! rate its class sent at, ping percentiles) and per node (the sums of the circuits under it).
//!
//! The profile (TOML; unknown keys are errors):
//!
//! ```toml
//! length = 60          # seconds simulated
//! rtt = "20ms"         # base round trip, subscriber ↔ server
//! seed = 1             # which circuits `active` picks, and the wire's randomness
//! [[group]]            # any number; a circuit in several groups gets all their flows
//! node = "AP_A"        # the circuits under this node (any depth) …
//! # circuits = ["c1", "c2"]   … or these circuit IDs, or `all = true`
//! active = 0.6         # the fraction of them active (chosen by the seed), default 1
//! download = 1         # TCP downloads per active circuit (default 1)
//! upload = 0           # TCP uploads per active circuit (default 0)
//! ping = true          # a ping per active circuit, every 200 ms (default true)
//! start = 0            # seconds (default 0); stop = length by default
//! cc = "cubic"
//! ```
//!
//! Deviation: the physical link beyond the trees runs at the trees' root rates (LibreQoS's
//! downlink and uplink), so the shaper is the bottleneck as it is meant to be.

use crate::scenario::{summarise, Config, Summary, Test};
use crate::tcp::cc::Algorithm;
use crate::world::{Dir, World};
use debloat_core::classify::circuits::{CircuitTree, Circuits, Plan};
use debloat_core::units::parse_time;
use debloat_core::QdiscSpec;
use serde::{Deserialize, Serialize};
use std::net::IpAddr;

/// A load profile's top level.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Seconds simulated.
    pub length: f64,
    /// Base round trip, subscriber ↔ server.
    pub rtt: String,
    /// Seed.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Sampling step, s (default 0.2).
    #[serde(default)]
    pub step: Option<f64>,
    /// The groups of circuits and their traffic.
    #[serde(default, rename = "group")]
    pub groups: Vec<Group>,
}

/// Circuits and what each active one does.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Group {
    /// Every circuit under this node, at any depth.
    #[serde(default)]
    pub node: Option<String>,
    /// These circuit IDs.
    #[serde(default)]
    pub circuits: Option<Vec<String>>,
    /// Every circuit.
    #[serde(default)]
    pub all: bool,
    /// Fraction active, 0 to 1.
    #[serde(default)]
    pub active: Option<f64>,
    /// TCP downloads per active circuit.
    #[serde(default)]
    pub download: Option<u32>,
    /// TCP uploads per active circuit.
    #[serde(default)]
    pub upload: Option<u32>,
    /// A ping per active circuit.
    #[serde(default)]
    pub ping: Option<bool>,
    /// Start, s.
    #[serde(default)]
    pub start: Option<f64>,
    /// Stop, s.
    #[serde(default)]
    pub stop: Option<f64>,
    /// Congestion control of its TCP flows.
    #[serde(default)]
    pub cc: Option<String>,
}

/// One circuit's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct CircuitResult {
    /// Circuit ID.
    pub id: String,
    /// Circuit name.
    pub name: String,
    /// Its parent node's name (empty for none).
    pub parent: String,
    /// The address its subscriber host had.
    pub address: String,
    /// Whether the profile made it active.
    pub active: bool,
    /// TCP goodput of its downloads, Mbit/s.
    pub down_mbps: f64,
    /// TCP goodput of its uploads, Mbit/s.
    pub up_mbps: f64,
    /// What its download class sent, on the wire, Mbit/s (HTB's own count).
    pub down_class_mbps: f64,
    /// What its upload class sent, Mbit/s.
    pub up_class_mbps: f64,
    /// Packets its two classes' leaves dropped.
    pub drops: u64,
    /// Its ping while loaded: median and 99th percentile, ms.
    pub ping_p50_ms: Option<f64>,
    /// See `ping_p50_ms`.
    pub ping_p99_ms: Option<f64>,
    /// ShapedDevices.csv's rates, Mbit/s: download min and max.
    pub down_min_mbps: f64,
    /// See `down_min_mbps`.
    pub down_max_mbps: f64,
}

/// A node's outcome: the sums over the circuits under it.
#[derive(Debug, Clone, Serialize)]
pub struct NodeResult {
    /// Node name.
    pub name: String,
    /// Active circuits under it.
    pub active: usize,
    /// Their download goodput, Mbit/s.
    pub down_mbps: f64,
    /// Their upload goodput, Mbit/s.
    pub up_mbps: f64,
    /// Its own download class's rate on the wire, Mbit/s.
    pub down_class_mbps: f64,
    /// Its configured download rate, Mbit/s.
    pub down_max_mbps: f64,
}

/// A circuit run: per circuit, per node, the usual summary and the world.
pub struct CircuitRun {
    /// Every circuit, in ShapedDevices.csv's order.
    pub circuits: Vec<CircuitResult>,
    /// Every node, in network.json's order.
    pub nodes: Vec<NodeResult>,
    /// The flows' and pings' summary, as `sim` gives it.
    pub summary: Summary,
    /// The simulated network at the end (its two trees: `World::qdisc`).
    pub world: World,
    /// Seconds simulated.
    pub length_s: f64,
    /// The profile's seed.
    pub seed: u64,
}

/// Why a profile was refused.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// Not TOML, or a key this reader does not know.
    #[error("{0}")]
    Toml(#[from] toml::de::Error),
    /// A value out of range or a name that is not in the files.
    #[error("{what}: {why}")]
    Value {
        /// The key (and group).
        what: String,
        /// What is wrong, and what would do.
        why: String,
    },
}

fn bad(what: impl Into<String>, why: impl Into<String>) -> ProfileError {
    ProfileError::Value {
        what: what.into(),
        why: why.into(),
    }
}

/// A circuit's subscriber address: its first device's first address.
fn address(plan: &Plan, c: usize) -> Option<IpAddr> {
    plan.circuits[c]
        .devices
        .iter()
        .flat_map(|d| d.nets.first())
        .map(|n| n.addr())
        .next()
}

/// Whether node `n` is `ancestor` or under it.
fn under(plan: &Plan, mut n: Option<usize>, ancestor: usize) -> bool {
    while let Some(i) = n {
        if i == ancestor {
            return true;
        }
        n = plan.nodes[i].parent;
    }
    false
}

/// The circuits a group names, in the files' order.
fn members(plan: &Plan, g: &Group, k: usize) -> Result<Vec<usize>, ProfileError> {
    let what = format!("group {}", k + 1);
    let named =
        usize::from(g.node.is_some()) + usize::from(g.circuits.is_some()) + usize::from(g.all);
    if named != 1 {
        return Err(bad(
            what,
            "name its circuits with exactly one of node = \"…\", circuits = [\"…\"] or all = true",
        ));
    }
    if g.all {
        return Ok((0..plan.circuits.len()).collect());
    }
    if let Some(node) = &g.node {
        let Some(n) = plan.nodes.iter().position(|x| &x.name == node) else {
            let names: Vec<&str> = plan
                .nodes
                .iter()
                .take(12)
                .map(|x| x.name.as_str())
                .collect();
            return Err(bad(
                format!("{what}: node \"{node}\""),
                format!("not in network.json; nodes: {}", names.join(", ")),
            ));
        };
        return Ok((0..plan.circuits.len())
            .filter(|&c| under(plan, plan.circuits[c].parent, n))
            .collect());
    }
    let mut out = Vec::new();
    for id in g.circuits.iter().flatten() {
        match plan.circuits.iter().position(|c| &c.id == id) {
            Some(c) => out.push(c),
            None => {
                return Err(bad(
                    format!("{what}: circuit \"{id}\""),
                    "not in ShapedDevices.csv",
                ))
            }
        }
    }
    Ok(out)
}

/// The `n` of `from` that the seed picks (a seeded shuffle's first `n`, back in file order).
fn pick(from: &[usize], n: usize, seed: u64) -> Vec<usize> {
    let mut v: Vec<(u64, usize)> = from
        .iter()
        .map(|&c| {
            (
                splitmix(seed ^ (c as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
                c,
            )
        })
        .collect();
    v.sort_unstable();
    let mut out: Vec<usize> = v.into_iter().take(n).map(|x| x.1).collect();
    out.sort_unstable();
    out
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// What the world was given for one circuit: its flows (index, direction) and its probe.
#[derive(Default, Clone)]
struct Placed {
    flows: Vec<(usize, Dir)>,
    probe: Option<usize>,
}

mod place;
mod results;

/// Read `profile` and run it over the trees and stage built from `plan` (the same files the
/// gateway reads). `progress` gets the fraction done.
pub fn run(
    profile: &str,
    plan: &Plan,
    tree: &CircuitTree,
    stage: Circuits,
    (down_bps, up_bps): (u64, u64),
    progress: impl FnMut(f64),
) -> Result<CircuitRun, ProfileError> {
    let p: Profile = toml::from_str(profile)?;
    if !(p.length > 0.0 && p.length.is_finite()) {
        return Err(bad("length", "a positive number of seconds, e.g. 60"));
    }
    let rtt = parse_time(&p.rtt).map_err(|e| bad(format!("rtt \"{}\"", p.rtt), e.to_string()))?;
    let seed = p.seed.unwrap_or(1);
    let mut cfg = Config::wired(
        Test::Custom,
        (down_bps, up_bps),
        rtt,
        (
            QdiscSpec::Htb(tree.up.clone()),
            QdiscSpec::Htb(tree.down.clone()),
        ),
        seed,
    );
    cfg.length_s = p.length;
    cfg.delay_s = 0.0;
    cfg.step_s = p.step.unwrap_or(0.2);
    let end = (p.length * 1e9) as u64;
    let mut w = crate::scenario::build_world(&cfg, end, rtt, None);
    w.set_stage(Box::new(stage));
    let placed = place::place(&mut w, plan, &p, seed, end)?;
    w.run(progress);
    let summary = summarise(&cfg, &w, 0, end);
    let mut r = results::collect(plan, tree, &placed, summary, w, p.length);
    r.seed = seed;
    Ok(r)
}

/// The congestion control a group names.
fn cc(g: &Group, k: usize) -> Result<Algorithm, ProfileError> {
    g.cc.as_deref()
        .unwrap_or("cubic")
        .parse()
        .map_err(|e: crate::tcp::cc::UnknownCc| bad(format!("group {}: cc", k + 1), e.to_string()))
}
