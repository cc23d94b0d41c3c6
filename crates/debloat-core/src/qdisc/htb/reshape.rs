//! Taking a tree of another shape in place (`Qdisc::reshape`): classes added, removed or
//! moved to another parent, as a changed LibreQoS plan asks, without dropping a queued packet
//! and without starting the classes that stay afresh.
//!
//! Classes are matched by minor (the circuit tree keeps a circuit's minor across reloads,
//! `classify::circuits::tree::build_keeping`). The new tree is built, then every class that is
//! in both keeps its buckets (tokens, ctokens, the time of its last charge — held to a smaller
//! bucket), its deficit and counters, and, when it stays a leaf with the same discipline
//! words, its very discipline: queued packets stay where they are, with their flows' state and
//! their sojourn stamps. A leaf whose discipline words changed gets a new one and its packets
//! move into it in order (counted as requeued; what the new one refuses is dropped and
//! counted, as `Path::replace_qdisc` counts it). A removed leaf (or one that gained children)
//! that holds packets stays as a *draining* class under its nearest ancestor that is still an
//! inner class, with its own rates and discipline: its packets leave through that parent's
//! buckets, counted in its class and the tree's statistics; no packet is classified to it; it
//! goes at the next reshape once empty. Modes are worked out again from the carried buckets
//! at the tree's last dequeue time, and classes with packets join their rows and feeds anew.
//!
//! Linux has no such operation: `tc class del` refuses a class with children and frees a
//! leaf's packets, a leaf that gains a child has its queue purged, and a class cannot change
//! parent; LibreQoS reloads whole trees for structural changes. This is debloat's own.

use super::spec::{ClassSpec, HtbSpec};
use super::Htb;
use crate::packet::{Nanos, Packet};
use crate::qdisc::Qdisc;
use std::collections::{BTreeMap, BTreeSet};

/// What a reshape changed.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Reshaped {
    /// Classes in both trees.
    pub kept: usize,
    /// Classes only in the new tree.
    pub added: usize,
    /// Classes only in the old tree.
    pub removed: usize,
    /// Kept classes under another parent.
    pub moved: usize,
    /// Kept classes with other rates, bursts, quantum or priority.
    pub rerated: usize,
    /// Removed leaves that still hold packets, now draining through an ancestor.
    pub draining: usize,
    /// The packets they hold.
    pub draining_packets: u64,
    /// Packets moved into a leaf whose discipline changed.
    pub requeued: u64,
    /// Of those, packets the new discipline refused (dropped, counted as drops).
    pub refused: u64,
}

impl std::fmt::Display for Reshaped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} classes added, {} removed, {} moved, {} re-rated, {} kept; {} packets draining through their parents in {} classes, {} requeued ({} refused)",
            self.added,
            self.removed,
            self.moved,
            self.rerated,
            self.kept,
            self.draining_packets,
            self.draining,
            self.requeued,
            self.refused
        )
    }
}

/// A class's words that decide its rates (what `tc class change` sets).
fn rates_of(c: &ClassSpec) -> impl PartialEq + '_ {
    (
        c.rate_bps,
        c.ceil_bps,
        c.burst,
        c.cburst,
        c.quantum,
        c.prio,
        (c.mtu, c.mpu, c.overhead, c.linklayer),
    )
}

/// The lowest minor from 0xfffe down that `used` does not hold.
fn free_minor(used: &BTreeSet<u16>) -> Option<u16> {
    (3..=0xfffe).rev().find(|m| !used.contains(m))
}

impl<P: Packet + 'static> Htb<P> {
    /// The new spec with a draining class for every old leaf that holds packets and is not
    /// a leaf of `new`: (spec, per draining class its old class index).
    fn with_draining(&self, new: &HtbSpec) -> (HtbSpec, Vec<usize>) {
        let old = &self.spec;
        let index: BTreeMap<u16, usize> = old
            .classes
            .iter()
            .enumerate()
            .map(|(i, c)| (c.id, i))
            .collect();
        let inner: BTreeSet<u16> = new.classes.iter().filter_map(|c| c.parent).collect();
        let ids: BTreeSet<u16> = new.classes.iter().map(|c| c.id).collect();
        // Minors a draining class may not take: the new classes', and the default's even when
        // no class has it (a draining class there would be given the unclassified packets).
        let mut used = ids.clone();
        used.insert(new.default);
        let mut spec = new.clone();
        let mut from = Vec::new();
        for (i, c) in old.classes.iter().enumerate() {
            let stays_leaf = ids.contains(&c.id) && !inner.contains(&c.id);
            if stays_leaf || self.tree.classes[i].leaf.is_none() || self.leaf_empty(i as u32) {
                continue;
            }
            let mut parent = c.parent;
            while let Some(p) = parent.filter(|p| !inner.contains(p)) {
                parent = index.get(&p).and_then(|&k| old.classes[k].parent);
            }
            let Some(id) = Some(c.id)
                .filter(|m| !used.contains(m))
                .or_else(|| free_minor(&used))
            else {
                continue; // 65534 classes in use: the caller moves its packets instead
            };
            used.insert(id);
            let mut d = c.clone();
            (d.id, d.parent) = (id, parent);
            d.matches.clear();
            spec.classes.push(d);
            from.push(i);
        }
        (spec, from)
    }

    /// Take `new`, of any shape, in place (see the module's doc).
    pub(super) fn reshape_to(&mut self, new: &HtbSpec) -> Reshaped {
        let (spec, drains) = self.with_draining(new);
        let now = self.tree.now;
        let mut next = self.successor(spec);
        let ids: BTreeSet<u16> = new.classes.iter().map(|c| c.id).collect();
        let mut r = Reshaped {
            removed: self
                .spec
                .classes
                .iter()
                .filter(|c| !ids.contains(&c.id))
                .count(),
            draining: drains.len(),
            ..Reshaped::default()
        };
        let changed = self.carry(&mut next, new.classes.len(), &drains, &mut r);
        for c in 0..next.tree.classes.len() as u32 {
            next.tree.restore_mode(c);
        }
        for (nl, q) in changed {
            requeue(q, &mut next, &mut r, |next, p| {
                next.on_leaf(nl, |q| q.enqueue(p, now));
            });
        }
        // Old leaves that found no place (no free minor): their packets go where the new tree
        // classifies them.
        for l in 0..self.leaves.len() {
            if let Some(q) = self.leaves[l].take() {
                requeue(q, &mut next, &mut r, |next, p| {
                    next.enqueue(p, now);
                });
            }
        }
        next.draining = next.spec.classes[new.classes.len()..]
            .iter()
            .map(|c| c.id)
            .collect();
        next.draining.sort_unstable();
        next.settle(now);
        *self = next;
        r
    }

    /// The tree built from `spec`, with this one's clock, direct queue, drops and totals.
    fn successor(&mut self, spec: HtbSpec) -> Htb<P> {
        let mut next = Htb::owning(spec, self.hasher, self.seed);
        next.tree.now = self.tree.now;
        next.tree.overlimits = self.tree.overlimits;
        next.direct = std::mem::take(&mut self.direct);
        next.dropped = std::mem::take(&mut self.dropped);
        (next.direct_pkts, next.sent_bytes) = (self.direct_pkts, self.sent_bytes);
        (next.sent_pkts, next.drops) = (self.sent_pkts, self.drops);
        next
    }

    /// Every class of `next` that was in this tree (by minor; the first `kept` of `next`'s
    /// classes are the new spec's, the rest the draining ones, `drains` their old indices)
    /// takes its buckets, deficit, counters and, with the same discipline words, its leaf;
    /// the leaves whose words changed are returned, with their place in `next`.
    fn carry(
        &mut self,
        next: &mut Htb<P>,
        kept: usize,
        drains: &[usize],
        r: &mut Reshaped,
    ) -> Vec<(usize, Box<dyn Qdisc<P>>)> {
        let index: BTreeMap<u16, usize> = self
            .spec
            .classes
            .iter()
            .enumerate()
            .map(|(i, c)| (c.id, i))
            .collect();
        let mut changed = Vec::new();
        for (j, c) in next.spec.classes.iter().enumerate() {
            let from = match j.checked_sub(kept) {
                Some(k) => Some(drains[k]),
                None => index.get(&c.id).copied(),
            };
            let Some(i) = from else {
                r.added += 1;
                continue;
            };
            let was = &self.spec.classes[i];
            if j < kept {
                r.kept += 1;
                r.moved += usize::from(was.parent != c.parent);
                r.rerated += usize::from(rates_of(was) != rates_of(c));
            }
            let (o, n) = (&self.tree.classes[i], &mut next.tree.classes[j]);
            n.tokens = o.tokens.min(n.buffer);
            n.ctokens = o.ctokens.min(n.cbuffer);
            (n.t_c, n.deficit) = (o.t_c, o.deficit);
            if j < kept || c.id == was.id {
                n.counters = o.counters;
            }
            let (Some(ol), Some(nl)) = (o.leaf, n.leaf) else {
                continue;
            };
            let Some(q) = self.leaves[ol as usize].take() else {
                continue;
            };
            if j >= kept {
                r.draining_packets += q.qlen() as u64;
            }
            if was.qdisc == c.qdisc {
                next.idle_since[nl as usize] = self.idle_since[ol as usize];
                next.leaves[nl as usize] = Some(q);
            } else {
                changed.push((nl as usize, q));
            }
        }
        changed
    }

    /// After a reshape (modes restored): classes with packets active, the tree's packet and
    /// byte counts, and empty leaves in the idle queue, oldest first.
    fn settle(&mut self, now: Nanos) {
        let (mut qlen, mut backlog) = (self.direct.len(), 0u64);
        let mut idle = Vec::new();
        backlog += self
            .direct
            .iter()
            .map(|p| u64::from(p.meta().len))
            .sum::<u64>();
        for l in 0..self.leaves.len() {
            let c = self.leaf_class[l];
            match self.leaves[l].as_ref().map(|q| (q.qlen(), q.backlog())) {
                Some((n, b)) if n > 0 => {
                    (qlen, backlog) = (qlen + n, backlog + b);
                    self.idle_since[l] = Nanos::MAX;
                    self.tree.activate(c);
                }
                Some(_) if !self.queued[l] => {
                    let since = self.idle_since[l];
                    idle.push((l, if since == Nanos::MAX { now } else { since }));
                }
                _ => {}
            }
        }
        idle.sort_by_key(|&(_, t)| t);
        for (l, t) in idle {
            self.note_idle(l, t);
        }
        (self.qlen, self.backlog) = (qlen, backlog);
    }

    /// Whether `minor` is a draining class (no packet is classified to it).
    pub(super) fn is_draining(&self, minor: u16) -> bool {
        self.draining.binary_search(&minor).is_ok()
    }
}

/// Move every packet `q` holds into `next` with `put`, in order, counting them as requeued and
/// what `next` refused.
fn requeue<P: Packet + 'static>(
    mut q: Box<dyn Qdisc<P>>,
    next: &mut Htb<P>,
    r: &mut Reshaped,
    mut put: impl FnMut(&mut Htb<P>, P),
) {
    let mut held = Vec::with_capacity(q.qlen());
    q.drain(&mut |p| held.push(p));
    r.requeued += held.len() as u64;
    let before = next.drops;
    for p in held {
        put(next, p);
    }
    r.refused += next.drops - before;
}
