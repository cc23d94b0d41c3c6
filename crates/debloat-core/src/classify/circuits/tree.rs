//! LibreQoS's plan as two HTB trees, one per direction, as LibreQoS builds its kernel classes:
//! the link's class 1:1 at the given rate; a class per node (not virtual ones) with its
//! ceiling the node's rate and its rate 95 % of that (LibreQoS's choice, "better to play with
//! ceil than rate"); a class per circuit under its node (or the root), rate its minimum and
//! ceiling its maximum, a leaf each — `cake diffserv4` unless its `sqm` cell says `fq_codel` or
//! `none` (a `pfifo`); and class 1:2, the default, for addresses no circuit has (as LibreQoS's:
//! a quarter of the link less 1 Mbit/s guaranteed, the link less 1 Mbit/s as ceiling, prio 5,
//! `cake diffserv4`). Minors are given depth first — a
//! node, its circuits, its child nodes — from 3. HTB has eight levels: nodes deeper than six
//! below the root class are put under their ancestor at the sixth, with a warning (LibreQoS
//! flattens too).
//!
//! Rebuilt from changed files ([`build_keeping`]), a circuit or node that was there before keeps
//! its minor and a new one gets a minor no class of the running tree has, so the running HTB
//! can take the new tree in place ([`crate::qdisc::Qdisc::reshape`]): classes are matched by
//! minor, and a removed circuit's minor is not handed to another while its packets drain.
//! LibreQoS numbers afresh on every full reload; this is debloat's choice.

use super::libreqos::Plan;
use crate::qdisc::htb::{ClassSpec, HtbSpec};
use crate::qdisc::spec::QdiscSpec;
use std::collections::{BTreeMap, BTreeSet};

/// What the trees are built with.
#[derive(Clone, Debug)]
pub struct TreeOptions {
    /// The link's rate down (the gateway's ingress), bit/s.
    pub down_bps: u64,
    /// Up (egress), bit/s.
    pub up_bps: u64,
    /// Release an idle circuit's queues after this long (ns); None: keep them.
    pub release_idle: Option<u64>,
}

/// Both directions' trees and where each circuit sits.
#[derive(Clone, Debug)]
pub struct CircuitTree {
    /// Download: the gateway's ingress.
    pub down: HtbSpec,
    /// Upload: its egress.
    pub up: HtbSpec,
    /// Per circuit of the plan, its class's minor (the same in both trees).
    pub minor: Vec<u16>,
    /// Per node of the plan, its class's minor (0: virtual, or too deep to have one).
    pub node_minor: Vec<u16>,
    /// What was put elsewhere than the files said.
    pub warnings: Vec<String>,
    /// Every circuit's and node's minor by its ID or name, for the next build to keep.
    pub minors: Minors,
}

/// Minors by circuit ID and by node name, as a tree gave them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Minors {
    /// Circuit ID → minor.
    pub circuits: BTreeMap<String, u16>,
    /// Node name → minor.
    pub nodes: BTreeMap<String, u16>,
}

impl Minors {
    fn all(&self) -> BTreeSet<u16> {
        self.circuits
            .values()
            .chain(self.nodes.values())
            .copied()
            .collect()
    }
}

/// How minors are given: those `keep` names, then the lowest from 3 up that no class of the
/// previous tree had and none given yet has.
struct Numbering<'a> {
    keep: Option<&'a Minors>,
    /// The previous tree's minors.
    reserved: BTreeSet<u16>,
    given: BTreeSet<u16>,
    next: u16,
}

impl Numbering<'_> {
    fn give(&mut self, kept: Option<u16>) -> u16 {
        if let Some(m) = kept.filter(|m| !self.given.contains(m)) {
            self.given.insert(m);
            return m;
        }
        while self.given.contains(&self.next) || self.reserved.contains(&self.next) {
            self.next += 1;
        }
        let m = self.next;
        self.given.insert(m);
        m
    }
}

/// The deepest level below the root class a node may sit at (root 1:1 is level 1, the
/// circuit's class takes the eighth).
const NODE_DEPTH: usize = 6;

fn mbit(m: f64) -> u64 {
    (m * 1e6).round().max(8.0) as u64
}

fn leaf(which: Option<&str>) -> QdiscSpec {
    match which {
        Some("fq_codel") => QdiscSpec::FqCodel(Default::default()),
        Some("none") => QdiscSpec::Pfifo { limit: 1000 },
        _ => cake_diffserv4(),
    }
}

fn cake_diffserv4() -> QdiscSpec {
    QdiscSpec::parse("cake diffserv4").unwrap_or(QdiscSpec::Pfifo { limit: 1000 })
}

fn class(
    id: u16,
    parent: Option<u16>,
    rate: u64,
    ceil: u64,
    qdisc: Option<QdiscSpec>,
) -> ClassSpec {
    let mut c = ClassSpec::new(id, rate.min(ceil), ceil);
    c.parent = parent;
    c.qdisc_words = qdisc.as_ref().map(ToString::to_string);
    c.qdisc = qdisc.map(Box::new);
    c
}

impl CircuitTree {
    /// Both trees with the link's class 1:1 and LibreQoS's default class 1:2, and room for
    /// the plan's circuits and nodes.
    fn rooted(plan: &Plan, o: &TreeOptions) -> CircuitTree {
        let tree = || HtbSpec {
            default: 2,
            r2q: 10,
            direct_qlen: 1000,
            classes: Vec::new(),
            release_idle: o.release_idle,
        };
        let mut t = CircuitTree {
            down: tree(),
            up: tree(),
            minor: vec![0; plan.circuits.len()],
            node_minor: vec![0; plan.nodes.len()],
            warnings: Vec::new(),
            minors: Minors::default(),
        };
        for (tree, link) in [(&mut t.down, o.down_bps), (&mut t.up, o.up_bps)] {
            tree.classes.push(class(1, None, link, link, None));
            // LibreQoS's default class: a quarter of the link less 1 Mbit/s guaranteed, the
            // link less 1 Mbit/s as ceiling, prio 5 (after every circuit's 0).
            let ceil = link.saturating_sub(1_000_000).max(8);
            let mut d = class(2, Some(1), ceil / 4, ceil, Some(cake_diffserv4()));
            d.prio = 5;
            tree.classes.push(d);
        }
        t
    }
}

/// Build the trees; an error when the classes would not fit in HTB's 16-bit minors.
pub fn build(plan: &Plan, o: &TreeOptions) -> Result<CircuitTree, String> {
    build_keeping(plan, o, None)
}

/// [`build`], keeping the minors `keep` gave every circuit and node that is still there; new
/// ones get minors `keep` does not use (all afresh when they would not fit that way).
pub fn build_keeping(
    plan: &Plan,
    o: &TreeOptions,
    keep: Option<&Minors>,
) -> Result<CircuitTree, String> {
    let total = 2 + plan.nodes.len() + plan.circuits.len();
    let reserved = keep.map(Minors::all).unwrap_or_default();
    if keep.is_some() && total + reserved.len() > 0xfffe {
        return build_keeping(plan, o, None);
    }
    if total > 0xfffe {
        return Err(format!(
            "{total} classes: one HTB holds 65534 (minors 1:1 to 1:fffe)"
        ));
    }
    let mut t = CircuitTree::rooted(plan, o);
    let mut by_node: Vec<Vec<usize>> = vec![Vec::new(); plan.nodes.len()];
    let mut kids: Vec<Vec<usize>> = vec![Vec::new(); plan.nodes.len()];
    let mut rootless = Vec::new();
    for (i, c) in plan.circuits.iter().enumerate() {
        match shaped_ancestor(plan, c.parent) {
            Some(n) => by_node[n].push(i),
            None => rootless.push(i),
        }
    }
    let mut tops = Vec::new();
    for (i, n) in plan.nodes.iter().enumerate() {
        if n.is_virtual {
            continue;
        }
        match shaped_ancestor(plan, n.parent) {
            Some(p) => kids[p].push(i),
            None => tops.push(i),
        }
    }
    let mut w = Walk {
        plan,
        t: &mut t,
        by_node: &by_node,
        kids: &kids,
        numbering: Numbering {
            keep,
            reserved,
            given: BTreeSet::from([0, 1, 2]),
            next: 3,
        },
    };
    for n in tops {
        w.node(n, 1, 1);
    }
    for i in rootless {
        w.circuit(i, 1);
    }
    Ok(t)
}

/// The nearest node at or above `n` that is shaped (not virtual).
fn shaped_ancestor(plan: &Plan, mut n: Option<usize>) -> Option<usize> {
    while let Some(i) = n {
        if !plan.nodes[i].is_virtual {
            return Some(i);
        }
        n = plan.nodes[i].parent;
    }
    None
}

struct Walk<'a> {
    plan: &'a Plan,
    t: &'a mut CircuitTree,
    by_node: &'a [Vec<usize>],
    kids: &'a [Vec<usize>],
    numbering: Numbering<'a>,
}

impl Walk<'_> {
    /// A minor for the circuit (`circuit` true) or node named `key`, recorded in the tree.
    fn take(&mut self, key: &str, circuit: bool) -> u16 {
        let kept = self.numbering.keep.and_then(|k| {
            let book = if circuit { &k.circuits } else { &k.nodes };
            book.get(key).copied()
        });
        let m = self.numbering.give(kept);
        let mine = &mut self.t.minors;
        let mine = if circuit {
            &mut mine.circuits
        } else {
            &mut mine.nodes
        };
        mine.insert(key.to_string(), m);
        m
    }

    /// A node under the class `parent` (at `depth` below the root class), its circuits, then
    /// its child nodes.
    fn node(&mut self, n: usize, parent: u16, depth: usize) {
        let node = &self.plan.nodes[n];
        let (me, depth) = if depth >= NODE_DEPTH {
            self.t.warnings.push(format!("node {} is more than {NODE_DEPTH} levels deep: its circuits are shaped under its ancestor's class 1:{parent:x}", node.name));
            (parent, depth)
        } else {
            let m = self.take(&node.name, false);
            self.t.node_minor[n] = m;
            let (d, u) = (mbit(node.down_mbps), mbit(node.up_mbps));
            let rate = |x: f64| mbit((x * 0.95).round());
            self.t
                .down
                .classes
                .push(class(m, Some(parent), rate(node.down_mbps), d, None));
            self.t
                .up
                .classes
                .push(class(m, Some(parent), rate(node.up_mbps), u, None));
            (m, depth + 1)
        };
        for &c in &self.by_node[n] {
            self.circuit(c, me);
        }
        for &k in &self.kids[n] {
            self.node(k, me, depth);
        }
    }

    fn circuit(&mut self, i: usize, parent: u16) {
        let c = &self.plan.circuits[i];
        let m = self.take(&c.id, true);
        self.t.minor[i] = m;
        let (dq, uq) = (leaf(c.sqm.0.as_deref()), leaf(c.sqm.1.as_deref()));
        self.t.down.classes.push(class(
            m,
            Some(parent),
            mbit(c.down_min),
            mbit(c.down_max),
            Some(dq),
        ));
        self.t.up.classes.push(class(
            m,
            Some(parent),
            mbit(c.up_min),
            mbit(c.up_max),
            Some(uq),
        ));
    }
}
