//! An htb tree split between workers (`--workers N` with `--qdisc "htb …"`).
//!
//! Every worker runs the whole tree over its own hosts' frames. Every half millisecond each
//! worker publishes, per leaf class, what arrives there and whether frames stand in it
//! ([`Shards::publish_leaves`]). Then each worker computes the same allocation from everyone's
//! figures, and runs its tree at its own part of it.
//!
//! The allocation is a fluid model of one htb fed with the sum of the workers' demand:
//! - A busy leaf wants without limit. A light one wants what arrives plus [`LIGHT_MARGIN`].
//! - Each class first gets its `rate` (as much of it as it wants).
//! - What its parent has left goes to the classes that want more: the best `prio` first, and
//!   among equals by quantum, up to each class's `ceil`. This is how htb lends.
//! - A root class gets at most its rate: it has no parent to borrow from.
//!
//! A leaf's allocation is divided between the workers its frames arrive on: those that are not
//! busy get what they want, the busy ones share the rest equally. A host's frames all reach one
//! worker, so a leaf that holds one host is usually whole on one. An inner class's part is the sum of its children's parts.
//! A worker runs each class at `rate` = its part and `ceil` = its parent's part (at most the
//! class's own `ceil`). So on one worker, a leaf may borrow what a light sibling leaves, and no
//! worker's tree sends more than its roots' parts.
//!
//! Where this differs from one htb: a worker's part follows demand half a millisecond late;
//! every leaf wants at least [`FLOOR`] of an equal part of its rate on every worker, so that a
//! new flow's first frames are not held until the next split (a worker whose leaves are all
//! idle leaves these floors unused); and the model lends by quantum at
//! once, where htb lends in turns. What it costs: one pass over the tree per split per worker
//! (every worker's leaf figures read under a lock each, outside the packet path), about 50 ns a
//! class (Intel Xeon, 2026-11-28); a tree whose split takes longer than 25 µs is split less
//! often, so that splitting takes at most a twentieth of a worker's time (a 10,000-class tree
//! about every 10 ms).

use crate::frame::Frame;
use crate::shards::{Demand, Shards, STANDING_BYTES};
use crate::worker::{BUSY_SHARE, CONSTRAINED_NS, SMOOTH_NS};
use debloat_core::qdisc::htb::HtbSpec;
use debloat_core::qdisc::stats::ClassCounters;
use debloat_core::Qdisc;

/// A light leaf is allowed this much over what arrives (a quarter): room to grow into before
/// frames stand and it counts as busy.
pub const LIGHT_MARGIN: f64 = 0.25;
/// Every leaf keeps this share of an equal part of its rate on every worker.
pub const FLOOR: f64 = 0.05;

/// One class of the tree, as the model needs it.
#[derive(Clone, Debug)]
struct Node {
    minor: u16,
    parent: Option<usize>,
    children: Vec<usize>,
    rate: f64,
    ceil: f64,
    prio: u8,
    /// Its quantum (htb's default: rate / r2q, within 1,000 and 200,000 bytes).
    weight: f64,
}

/// An htb tree's classes, parents before children.
#[derive(Clone, Debug)]
pub struct Shape {
    nodes: Vec<Node>,
    /// The leaves, in the order their counters come (the spec's).
    leaves: Vec<usize>,
}

impl Shape {
    /// The tree of an htb spec.
    pub fn of(spec: &HtbSpec) -> Shape {
        // By minor, once: a search per class made a 10,000-class tree's start quadratic.
        let by_minor: std::collections::HashMap<u16, usize> = (spec.classes.iter())
            .enumerate()
            .map(|(i, c)| (c.id, i))
            .collect();
        let index = |minor: u16| by_minor.get(&minor).copied();
        let mut nodes: Vec<Node> =
            spec.classes
                .iter()
                .map(|c| Node {
                    minor: c.id,
                    parent: c.parent.and_then(index),
                    children: Vec::new(),
                    rate: c.rate_bps as f64,
                    ceil: c.ceil_bps.max(c.rate_bps) as f64,
                    prio: c.prio,
                    weight: match c.quantum {
                        Some(q) => f64::from(q),
                        None => (c.rate_bps / 8 / u64::from(spec.r2q.max(1))).clamp(1000, 200_000)
                            as f64,
                    },
                })
                .collect();
        for i in 0..nodes.len() {
            if let Some(p) = nodes[i].parent {
                nodes[p].children.push(i);
            }
        }
        let leaves = (0..nodes.len())
            .filter(|&i| nodes[i].children.is_empty())
            .collect();
        Shape { nodes, leaves }
    }

    /// How many leaves (the length of each worker's demand vector).
    pub fn leaves(&self) -> usize {
        self.leaves.len()
    }

    /// Worker `me`'s part of every class, given each worker's demand per leaf (in leaf order):
    /// `(minor, rate, ceil)` in bit/s.
    pub fn parts(&self, demand: &[Vec<Demand>], me: usize) -> Vec<(u16, u64, u64)> {
        let n = demand.len().max(1);
        let want = self.wants(demand);
        let alloc = self.allocate(&want, n);
        let mut part = vec![0.0; self.nodes.len()];
        for (k, &l) in self.leaves.iter().enumerate() {
            part[l] = divide(alloc[l], &want[k * n..(k + 1) * n], me);
        }
        // Children come after their parents: sum from the end.
        for i in (0..self.nodes.len()).rev() {
            if let Some(p) = self.nodes[i].parent {
                part[p] += part[i];
            }
        }
        self.nodes
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let above = c.parent.map_or(part[i], |p| part[p]);
                let ceil = above.min(c.ceil).max(part[i]);
                (c.minor, part[i] as u64, ceil as u64)
            })
            .collect()
    }

    /// Per leaf, what each worker wants of it (leaf by leaf, a worker's after another's):
    /// without limit when busy, else what arrives plus the margin, and never less than the
    /// floor.
    fn wants(&self, demand: &[Vec<Demand>]) -> Vec<f64> {
        let n = demand.len().max(1);
        let mut out = Vec::with_capacity(self.leaves.len() * n);
        for (k, &l) in self.leaves.iter().enumerate() {
            let floor = self.nodes[l].rate / n as f64 * FLOOR;
            out.extend((0..n).map(|w| match demand.get(w).and_then(|d| d.get(k)) {
                Some(d) if d.busy => f64::INFINITY,
                Some(d) => (d.arrival_bps * (1.0 + LIGHT_MARGIN)).max(floor),
                None => floor,
            }));
        }
        out
    }

    /// What one htb would give each class with everyone's wants summed (bit/s).
    fn allocate(&self, wants: &[f64], n: usize) -> Vec<f64> {
        let mut want = vec![0.0; self.nodes.len()];
        for (k, &l) in self.leaves.iter().enumerate() {
            want[l] = wants[k * n..(k + 1) * n].iter().sum();
        }
        for i in (0..self.nodes.len()).rev() {
            want[i] = want[i].min(self.nodes[i].ceil);
            if let Some(p) = self.nodes[i].parent {
                want[p] += want[i];
            }
        }
        let mut alloc = vec![0.0; self.nodes.len()];
        for i in 0..self.nodes.len() {
            let c = &self.nodes[i];
            if c.parent.is_none() {
                alloc[i] = want[i].min(c.rate);
            }
            if !c.children.is_empty() {
                self.lend(i, alloc[i], &want, &mut alloc);
            }
        }
        alloc
    }

    /// Share class `c`'s allocation `x` between its children: each its rate first (what it
    /// wants of it; cut in proportion if they want more than `x`), then the rest by priority
    /// and quantum up to what each wants and its ceil.
    fn lend(&self, c: usize, x: f64, want: &[f64], alloc: &mut [f64]) {
        let kids = &self.nodes[c].children;
        let first: Vec<f64> = kids
            .iter()
            .map(|&k| self.nodes[k].rate.min(want[k]))
            .collect();
        let sum: f64 = first.iter().sum();
        if sum >= x {
            let scale = if sum > 0.0 { x / sum } else { 0.0 };
            for (&k, g) in kids.iter().zip(&first) {
                alloc[k] = g * scale;
            }
            return;
        }
        let mut rest = x - sum;
        for (&k, g) in kids.iter().zip(&first) {
            alloc[k] = *g;
        }
        // Water-filling by priority: within one, the children in order of room over quantum;
        // while the next one's room is below its quantum's part of what is left, it gets its
        // room, and the others share the rest by quantum.
        let mut open: Vec<(u8, f64, usize)> = kids
            .iter()
            .map(|&k| {
                let r = room(self.nodes[k].ceil.min(want[k]), alloc[k]);
                (self.nodes[k].prio, r / self.nodes[k].weight, k)
            })
            .filter(|o| o.1 > 0.0)
            .collect();
        open.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
        for group in open.chunk_by(|a, b| a.0 == b.0) {
            let mut weight: f64 = group.iter().map(|o| self.nodes[o.2].weight).sum();
            for &(_, per_weight, k) in group {
                if rest <= 0.0 {
                    return;
                }
                let w = self.nodes[k].weight;
                let level = rest / weight;
                let give = if per_weight <= level {
                    per_weight * w
                } else {
                    level * w
                };
                alloc[k] += give;
                rest -= give;
                weight -= w;
            }
        }
    }
}

/// Worker `me`'s part of a leaf's allocation `x`: the workers that are not busy get what they
/// want (in proportion, if `x` is less), the busy ones share the rest equally.
fn divide(x: f64, want: &[f64], me: usize) -> f64 {
    let busy = want.iter().filter(|w| w.is_infinite()).count();
    let light: f64 = want.iter().filter(|w| w.is_finite()).sum();
    let scale = if light > x && light > 0.0 {
        x / light
    } else {
        1.0
    };
    match want.get(me) {
        Some(w) if w.is_finite() => {
            if busy == 0 && light > 0.0 {
                w * x / light
            } else {
                w * scale
            }
        }
        Some(_) => (x - light * scale).max(0.0) / busy as f64,
        None => 0.0,
    }
}

/// A worker's side of one direction's split tree: what each leaf had sent and held at the last
/// split, the smoothed figures made from that, and the parts last set.
#[derive(Debug)]
pub struct Watch {
    shape: Shape,
    /// Per leaf: bytes sent plus backlog at the last split.
    last: Vec<u64>,
    at: u64,
    arrival_bps: Vec<f64>,
    /// Per leaf: the smoothed share of splits at which frames waited in it.
    constrained: Vec<f64>,
    /// Per class: the part last set, `(minor, rate, ceil)`.
    set: Vec<(u16, u64, u64)>,
    counters: Vec<ClassCounters>,
    demand: Vec<Demand>,
    everyone: Vec<Vec<Demand>>,
}

impl Watch {
    /// For a tree as configured (its classes at their configured rates).
    pub fn new(spec: &HtbSpec, now: u64) -> Watch {
        let shape = Shape::of(spec);
        let n = shape.leaves();
        Watch {
            shape,
            last: vec![0; n],
            at: now,
            arrival_bps: vec![0.0; n],
            constrained: vec![0.0; n],
            set: Vec::new(),
            counters: Vec::with_capacity(n),
            demand: Vec::with_capacity(n),
            everyone: Vec::new(),
        }
    }

    /// One split of direction `dir` on worker `me`: publish what each leaf is asked for, and
    /// run every class whose part moved by more than 0.5 % at its new part. Returns the ns it
    /// took (the caller spaces the splits of a large tree by it).
    pub fn tick(
        &mut self,
        q: &mut dyn Qdisc<Frame>,
        shards: &Shards,
        me: usize,
        dir: usize,
        now: u64,
    ) -> u64 {
        let t = std::time::Instant::now();
        self.split(q, shards, me, dir, now);
        t.elapsed().as_nanos() as u64
    }

    fn split(
        &mut self,
        q: &mut dyn Qdisc<Frame>,
        shards: &Shards,
        me: usize,
        dir: usize,
        now: u64,
    ) {
        self.counters.clear();
        q.leaf_counters(&mut self.counters);
        if self.counters.len() != self.shape.leaves() {
            return;
        }
        let dt = now.saturating_sub(self.at).max(1) as f64;
        self.at = now;
        let (a, c) = ((dt / SMOOTH_NS).min(1.0), (dt / CONSTRAINED_NS).min(1.0));
        // The first split after start or a reload only reads the counters (a reloaded tree
        // keeps them): what they hold did not arrive since the last split.
        let first = self.set.is_empty();
        self.demand.clear();
        for (k, l) in self.counters.iter().enumerate() {
            let total = l.bytes + l.backlog;
            let inst = match first {
                true => 0.0,
                false => total.saturating_sub(self.last[k]) as f64 * 8.0 * 1e9 / dt,
            };
            self.last[k] = total;
            self.arrival_bps[k] += a * (inst - self.arrival_bps[k]);
            let waited = f64::from(u8::from(l.backlog > 0));
            self.constrained[k] += c * (waited - self.constrained[k]);
            self.demand.push(Demand {
                arrival_bps: self.arrival_bps[k],
                busy: self.constrained[k] >= BUSY_SHARE || l.backlog >= STANDING_BYTES,
            });
        }
        shards.publish_leaves(me, dir, &self.demand);
        shards.leaf_demands(dir, &mut self.everyone);
        let parts = self.shape.parts(&self.everyone, me);
        let fresh = self.set.len() != parts.len();
        for (i, p) in parts.iter().enumerate() {
            let was = self.set.get(i).copied();
            let moved = |a: u64, b: u64| a.abs_diff(b) * 200 > b.max(1);
            if fresh || was.is_none_or(|w| moved(w.1, p.1) || moved(w.2, p.2)) {
                q.set_class_rates(p.0, p.1, p.2);
                if let Some(w) = self.set.get_mut(i) {
                    *w = *p;
                }
            }
        }
        if fresh {
            self.set = parts;
        }
    }

    /// What this worker's tree may send in all as last set: its root classes' parts, bit/s.
    pub fn total(&self) -> Option<u64> {
        let roots = self.shape.nodes.iter().zip(&self.set);
        let sum = roots
            .filter(|(n, _)| n.parent.is_none())
            .map(|(_, p)| p.1)
            .sum();
        (!self.set.is_empty()).then_some(sum)
    }
}

/// What a class could still take, given what it has.
fn room(limit: f64, has: f64) -> f64 {
    (limit - has).max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(words: &str) -> Shape {
        let spec: debloat_core::QdiscSpec = words.parse().expect("valid");
        match spec {
            debloat_core::QdiscSpec::Htb(h) => Shape::of(&h),
            _ => unreachable!("an htb"),
        }
    }

    fn busy() -> Demand {
        Demand {
            arrival_bps: 1e9,
            busy: true,
        }
    }

    fn light(bps: f64) -> Demand {
        Demand {
            arrival_bps: bps,
            busy: false,
        }
    }

    /// 1:1 20 Mbit/s; 1:10 guaranteed 5, 1:20 guaranteed 15, both may take all 20.
    const TREE: &str = "htb class 1:1 rate 20Mbit \
        class 1:10 parent 1:1 rate 5Mbit ceil 20Mbit match src 198.18.1.2 \
        class 1:20 parent 1:1 rate 15Mbit ceil 20Mbit match src 198.18.1.4";

    fn mbit(parts: &[(u16, u64, u64)], minor: u16) -> (f64, f64) {
        let p = parts.iter().find(|p| p.0 == minor).expect("class");
        (p.1 as f64 / 1e6, p.2 as f64 / 1e6)
    }

    /// Each leaf on its own worker, both busy: each worker gets its leaf's rate (5 and 15),
    /// not half the root each (what splitting the root by busy shards would give).
    #[test]
    fn busy_leaves_on_two_workers_keep_their_rates() {
        let s = shape(TREE);
        let d = vec![vec![busy(), light(0.0)], vec![light(0.0), busy()]];
        let a = s.parts(&d, 0);
        let b = s.parts(&d, 1);
        // What each worker's tree may send in all: its root's part (its leaf's part, and the
        // other leaf's floor, which its leaf may borrow: the leaf's ceil is the root's part).
        let (ra, rb) = (mbit(&a, 1).0, mbit(&b, 1).0);
        assert!((ra + rb - 20.0).abs() < 0.01, "{a:?} {b:?}");
        assert!(
            (ra - 5.0).abs() < 0.3 && (rb - 15.0).abs() < 0.3,
            "{a:?} {b:?}"
        );
        assert_eq!(mbit(&a, 0x10).1, ra);
        assert_eq!(mbit(&b, 0x20).1, rb);
    }

    /// One leaf busy, the other idle: the busy one's worker gets the whole root, less the
    /// floors on the other worker.
    #[test]
    fn a_busy_leaf_borrows_what_an_idle_one_leaves() {
        let s = shape(TREE);
        let d = vec![vec![busy(), light(0.0)], vec![light(0.0), light(0.0)]];
        let a = s.parts(&d, 0);
        let b = s.parts(&d, 1);
        assert!(mbit(&a, 0x10).0 > 19.0, "{a:?}");
        assert!(
            (mbit(&a, 1).0 + mbit(&b, 1).0 - 20.0).abs() < 0.01,
            "{a:?} {b:?}"
        );
    }

    /// A light leaf gets what arrives and a margin; the busy one the rest, less the light
    /// one's floor on its worker; the parts of the root add up to its rate.
    #[test]
    fn a_light_leaf_is_given_what_arrives() {
        let s = shape(TREE);
        let d = vec![vec![busy(), light(0.0)], vec![light(0.0), light(2e6)]];
        let (a, b) = (s.parts(&d, 0), s.parts(&d, 1));
        assert!((mbit(&b, 0x20).0 - 2.5).abs() < 0.1, "{b:?}");
        assert!((mbit(&a, 0x10).0 - 17.0).abs() < 0.1, "{a:?}");
        assert!((mbit(&a, 1).0 + mbit(&b, 1).0 - 20.0).abs() < 0.01);
    }

    /// A better priority takes the excess first, as htb lends it (2 + 6 against 2).
    #[test]
    fn the_excess_goes_to_the_better_priority() {
        let s = shape(
            "htb class 1:1 rate 10Mbit \
             class 1:10 parent 1:1 rate 2Mbit ceil 10Mbit \
             class 1:20 parent 1:1 rate 2Mbit ceil 10Mbit prio 1",
        );
        let d = vec![vec![busy(), busy()]];
        let a = s.parts(&d, 0);
        assert!((mbit(&a, 0x10).0 - 8.0).abs() < 0.05, "{a:?}");
        assert!((mbit(&a, 0x20).0 - 2.0).abs() < 0.05, "{a:?}");
    }

    /// Equals by quantum: the one with the least room gets its room, the others share the rest
    /// (each its rate, 1, then of the 9 left: 1, 4 and 4).
    #[test]
    fn the_excess_fills_the_least_room_first() {
        let s = shape(
            "htb class 1:1 rate 12Mbit \
             class 1:10 parent 1:1 rate 1Mbit ceil 2Mbit \
             class 1:20 parent 1:1 rate 1Mbit ceil 6Mbit \
             class 1:30 parent 1:1 rate 1Mbit ceil 11Mbit",
        );
        let a = s.parts(&[vec![busy(), busy(), busy()]], 0);
        let got: Vec<f64> = [0x10, 0x20, 0x30].map(|m| mbit(&a, m).0).to_vec();
        assert!(
            got.iter()
                .zip([2.0, 5.0, 5.0])
                .all(|(g, w)| (g - w).abs() < 0.01),
            "{a:?}"
        );
    }

    /// A leaf whose hosts arrive on both workers is split between them as cake's rate is,
    /// and a ceiling below the parent holds.
    #[test]
    fn a_leaf_on_two_workers_is_split_and_its_ceil_holds() {
        let s = shape("htb class 1:1 rate 10Mbit class 1:10 parent 1:1 rate 1Mbit ceil 4Mbit");
        let d = vec![vec![busy()], vec![busy()]];
        let (a, b) = (s.parts(&d, 0), s.parts(&d, 1));
        assert!((mbit(&a, 0x10).0 - 2.0).abs() < 0.01, "{a:?}");
        assert!((mbit(&a, 0x10).0 + mbit(&b, 0x10).0 - 4.0).abs() < 0.01);
        assert!(mbit(&a, 0x10).1 <= 4.0, "{a:?}");
    }

    /// Under a node: the node's rate caps its circuits, the excess of the root goes by
    /// priority and quantum, children of an inner class on different workers add up.
    #[test]
    fn a_node_caps_its_circuits() {
        let s = shape(
            "htb class 1:1 rate 30Mbit \
             class 1:2 parent 1:1 rate 10Mbit ceil 10Mbit \
             class 1:10 parent 1:2 rate 2Mbit ceil 10Mbit \
             class 1:20 parent 1:2 rate 2Mbit ceil 10Mbit \
             class 1:30 parent 1:1 rate 5Mbit ceil 30Mbit",
        );
        let d = vec![
            vec![busy(), light(0.0), busy()],
            vec![light(0.0), busy(), light(0.0)],
        ];
        let (a, b) = (s.parts(&d, 0), s.parts(&d, 1));
        let node = mbit(&a, 2).0 + mbit(&b, 2).0;
        assert!((node - 10.0).abs() < 0.5, "{a:?} {b:?}");
        assert!((mbit(&a, 0x30).0 - 20.0).abs() < 0.5, "{a:?}");
        assert!(
            (mbit(&a, 0x10).0 - mbit(&b, 0x20).0).abs() < 0.5,
            "{a:?} {b:?}"
        );
    }
}
