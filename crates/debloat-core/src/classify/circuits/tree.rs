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

use super::libreqos::Plan;
use crate::qdisc::htb::{ClassSpec, HtbSpec};
use crate::qdisc::spec::QdiscSpec;

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

/// Build the trees; an error when the classes would not fit in HTB's 16-bit minors.
pub fn build(plan: &Plan, o: &TreeOptions) -> Result<CircuitTree, String> {
    let total = 2 + plan.nodes.len() + plan.circuits.len();
    if total > 0xfffe {
        return Err(format!(
            "{total} classes: one HTB holds 65534 (minors 1:1 to 1:fffe)"
        ));
    }
    let mut t = CircuitTree {
        down: HtbSpec {
            default: 2,
            r2q: 10,
            direct_qlen: 1000,
            classes: Vec::new(),
            release_idle: o.release_idle,
        },
        up: HtbSpec {
            default: 2,
            r2q: 10,
            direct_qlen: 1000,
            classes: Vec::new(),
            release_idle: o.release_idle,
        },
        minor: vec![0; plan.circuits.len()],
        node_minor: vec![0; plan.nodes.len()],
        warnings: Vec::new(),
    };
    let (dl, ul) = (o.down_bps, o.up_bps);
    t.down.classes.push(class(1, None, dl, dl, None));
    t.up.classes.push(class(1, None, ul, ul, None));
    for (tree, link) in [(&mut t.down, dl), (&mut t.up, ul)] {
        // LibreQoS's default class: a quarter of the link less 1 Mbit/s guaranteed, the link
        // less 1 Mbit/s as ceiling, prio 5 (after every circuit's 0).
        let ceil = link.saturating_sub(1_000_000).max(8);
        let mut d = class(2, Some(1), ceil / 4, ceil, Some(cake_diffserv4()));
        d.prio = 5;
        tree.classes.push(d);
    }
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
    let mut next = 3u16;
    let mut w = Walk {
        plan,
        t: &mut t,
        by_node: &by_node,
        kids: &kids,
        next: &mut next,
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
    next: &'a mut u16,
}

impl Walk<'_> {
    fn take(&mut self) -> u16 {
        let m = *self.next;
        *self.next += 1;
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
            let m = self.take();
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
        let m = self.take();
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
