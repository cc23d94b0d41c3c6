//! Per-circuit and per-node numbers from a finished run: the flows' goodput, the HTB classes'
//! own counts, the pings.

use super::{CircuitResult, CircuitRun, NodeResult, Placed};
use crate::scenario::Summary;
use crate::world::{Dir, World};
use debloat_core::classify::circuits::{CircuitTree, Plan};
use debloat_core::qdisc::class_stats::ClassStats;

/// Bytes over `secs` as Mbit/s.
fn mbps(bytes: u64, secs: f64) -> f64 {
    bytes as f64 * 8.0 / secs / 1e6
}

/// The class with this minor among a tree's statistics.
fn class(classes: &[ClassStats], minor: u16) -> Option<&ClassStats> {
    classes.iter().find(|c| c.id & 0xffff == u32::from(minor))
}

pub(super) fn collect(
    plan: &Plan,
    tree: &CircuitTree,
    placed: &[Placed],
    summary: Summary,
    world: World,
    secs: f64,
) -> CircuitRun {
    let down = world.qdisc(Dir::Down).classes();
    let up = world.qdisc(Dir::Up).classes();
    let circuits: Vec<CircuitResult> = plan
        .circuits
        .iter()
        .enumerate()
        .map(|(c, k)| {
            let goodput = |d: Dir| -> f64 {
                placed[c]
                    .flows
                    .iter()
                    .filter(|f| f.1 == d)
                    .filter_map(|f| summary.flows.get(f.0))
                    .map(|f| f.throughput_mbps)
                    .fold(0.0, |a, b| a + b) // 0.0, not Rust's -0.0, for no flow
            };
            let ping = placed[c]
                .probe
                .and_then(|k| summary.pings.get(k))
                .and_then(|p| p.latency_ms.clone());
            let minor = tree.minor[c];
            let (cd, cu) = (class(&down, minor), class(&up, minor));
            CircuitResult {
                id: k.id.clone(),
                name: k.name.clone(),
                parent: k
                    .parent
                    .map_or(String::new(), |n| plan.nodes[n].name.clone()),
                address: super::address(plan, c).map_or(String::new(), |a| a.to_string()),
                active: !placed[c].flows.is_empty() || placed[c].probe.is_some(),
                down_mbps: goodput(Dir::Down),
                up_mbps: goodput(Dir::Up),
                down_class_mbps: cd.map_or(0.0, |s| mbps(s.bytes, secs)),
                up_class_mbps: cu.map_or(0.0, |s| mbps(s.bytes, secs)),
                drops: cd.map_or(0, |s| s.drops) + cu.map_or(0, |s| s.drops),
                ping_p50_ms: ping.as_ref().map(|l| l.p50),
                ping_p99_ms: ping.as_ref().map(|l| l.p99),
                down_min_mbps: k.down_min,
                down_max_mbps: k.down_max,
            }
        })
        .collect();
    let nodes = nodes(plan, tree, &down, &circuits, secs);
    CircuitRun {
        circuits,
        nodes,
        summary,
        world,
        length_s: secs,
        seed: 0,
    }
}

/// Every node: the sums over the circuits under it, and its own download class's rate.
fn nodes(
    plan: &Plan,
    tree: &CircuitTree,
    down: &[ClassStats],
    circuits: &[CircuitResult],
    secs: f64,
) -> Vec<NodeResult> {
    plan.nodes
        .iter()
        .enumerate()
        .map(|(n, node)| {
            let mine: Vec<&CircuitResult> = plan
                .circuits
                .iter()
                .zip(circuits)
                .filter(|(k, _)| super::under(plan, k.parent, n))
                .map(|x| x.1)
                .collect();
            NodeResult {
                name: node.name.clone(),
                active: mine.iter().filter(|c| c.active).count(),
                down_mbps: mine.iter().map(|c| c.down_mbps).fold(0.0, |a, b| a + b),
                up_mbps: mine.iter().map(|c| c.up_mbps).fold(0.0, |a, b| a + b),
                down_class_mbps: node_class(tree, down, n).map_or(0.0, |s| mbps(s.bytes, secs)),
                down_max_mbps: node.down_mbps,
            }
        })
        .collect()
}

/// A node's own class in the download tree: the class the tree builder gave it (node `n` is
/// the n-th class after the root and default, as `tree::build` numbers them).
fn node_class<'a>(
    tree: &CircuitTree,
    classes: &'a [ClassStats],
    n: usize,
) -> Option<&'a ClassStats> {
    let minor = tree.node_minor.get(n).copied()?;
    class(classes, minor)
}
