//! `htb`: the hierarchical token bucket (net/sched/sch_htb.c), a tree of classes each with a
//! guaranteed `rate` and a `ceil` it may reach by borrowing its ancestors' unused rate, leaves
//! holding any debloat discipline. It is how sqm-scripts' `simple.qos` shapes a link and how
//! LibreQoS gives every subscriber a share of an access point's and a site's capacity.
//!
//! The scheduler is the kernel's (see `tree.rs`): a class *can send* while it has rate
//! tokens, *may borrow* while it has ceil tokens, and *cannot send* otherwise; classes that
//! can send wait in their level's row, borrowers in their parent's feed. A dequeue makes the
//! due mode changes, then looks at the levels from the leaves up and, in each, the priorities
//! from 0 up, and serves the row's turn down the feeds to a leaf: deficit round robin by
//! classid with `quantum` bytes a turn. The packet is charged to every ancestor's ceil and to
//! the rate of those at the level it was served from and above (those below borrowed it:
//! `borrowed` counts them, the lender's `lended`). Packets no class takes go to the direct
//! queue, sent first and unshaped.
//!
//! Where this differs from the kernel:
//! * Classes are picked by `match` words, `priority` and `default`, not tc filters
//!   (`spec.rs`).
//! * Every due mode change is made at a dequeue (Linux stops after two jiffies and warns).
//! * Times are exact nanoseconds: no timer slack or watchdog delay.
//! * A leaf that holds its packets back (a shaper or a pacer) reports when; that time is
//!   returned among HTB's own (Linux warns, then the leaf's watchdog wakes the root).
//! * A class's buckets start full at build, as at `tc class add`.

pub mod show;
pub mod spec;

mod build;
mod class;
mod reshape;
mod rr;
mod tree;
mod wait;

pub use reshape::Reshaped;
pub use spec::{ClassSpec, HtbSpec, Match};

use crate::flow::FlowHasher;
use crate::packet::{Nanos, Packet, PacketMeta};
use crate::qdisc::spec::QdiscSpec;
use crate::qdisc::stats::{ClassCounters, ClassStats, QdiscStats, Xstats};
use crate::qdisc::{Dequeue, DropBox, DropReason, Dropped, Qdisc, Verdict};
use class::{MAXDEPTH, NUMPRIO};
use std::collections::VecDeque;
use tree::Tree;

/// The `htb` qdisc.
pub struct Htb<P> {
    spec: HtbSpec,
    tree: Tree,
    /// Leaf disciplines, by `Class::leaf`; none until the class's first packet, and none
    /// again after `release_idle` of emptiness.
    leaves: Vec<Option<Box<dyn Qdisc<P>>>>,
    /// Per leaf, its class.
    leaf_class: Vec<u32>,
    /// Leaves that emptied, with when, oldest first (for `release_idle`).
    idle: VecDeque<(u32, Nanos)>,
    /// Per leaf, when it last emptied (`Nanos::MAX`: holding packets, or released).
    idle_since: Vec<Nanos>,
    /// Per leaf, whether it has an entry in `idle`.
    queued: Vec<bool>,
    hasher: FlowHasher,
    seed: u64,
    /// Class index by minor, for `priority` and `default`.
    by_minor: Vec<(u16, u32)>,
    /// `match` rules in order: (rule, class).
    rules: Vec<(Match, u32)>,
    /// The default class when it is a leaf.
    default_class: Option<u32>,
    /// Minors of removed classes still draining their packets (`reshape.rs`), sorted.
    draining: Vec<u16>,
    direct: VecDeque<P>,
    direct_pkts: u64,
    dropped: DropBox<P>,
    qlen: usize,
    backlog: u64,
    sent_bytes: u64,
    sent_pkts: u64,
    drops: u64,
}

impl<P> std::fmt::Debug for Htb<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Htb").field("spec", &self.spec).finish()
    }
}

impl<P: Packet + 'static> Htb<P> {
    /// An htb from a parsed spec; `hasher` and `seed` go to the leaves.
    pub fn new(spec: &HtbSpec, hasher: FlowHasher, seed: u64) -> Self {
        Self::owning(spec.clone(), hasher, seed)
    }

    /// [`Htb::new`] from a spec of its own.
    fn owning(spec: HtbSpec, hasher: FlowHasher, seed: u64) -> Self {
        let b = build::build(&spec);
        let leaves = b.leaf_class.iter().map(|_| None).collect();
        let idle_since = vec![Nanos::MAX; b.leaf_class.len()];
        let release_idle = spec.release_idle;
        let mut q = Htb {
            spec,
            tree: Tree::new(b.classes),
            leaves,
            leaf_class: b.leaf_class,
            idle: VecDeque::new(),
            queued: vec![false; idle_since.len()],
            idle_since,
            hasher,
            seed,
            by_minor: b.by_minor,
            rules: b.rules,
            default_class: b.default_class,
            draining: Vec::new(),
            direct: VecDeque::new(),
            direct_pkts: 0,
            dropped: DropBox::default(),
            qlen: 0,
            backlog: 0,
            sent_bytes: 0,
            sent_pkts: 0,
            drops: 0,
        };
        if release_idle.is_none() {
            for leaf in 0..q.leaves.len() {
                q.leaf_mut(leaf);
            }
        }
        q
    }

    /// A leaf's discipline: built with the tree (as the kernel's exists from `tc class add`),
    /// or, with `release_idle`, on its class's first packet.
    fn leaf_mut(&mut self, leaf: usize) -> &mut Box<dyn Qdisc<P>> {
        let c = self.leaf_class[leaf] as usize;
        let (hasher, seed) = (
            self.hasher,
            self.seed.wrapping_add(u64::from(self.spec.classes[c].id)),
        );
        let spec = &self.spec.classes[c].qdisc;
        self.leaves[leaf].get_or_insert_with(|| match spec {
            Some(q) => q.build(hasher, seed),
            None => QdiscSpec::Pfifo { limit: 1000 }.build(hasher, seed),
        })
    }

    /// With `release_idle`: a leaf empty since `now` is remembered, and leaves empty for that
    /// long are released (their class and its counters stay). A leaf is in the queue at most
    /// once (`queued`), so the queue never holds more entries than there are leaves.
    fn note_idle(&mut self, leaf: usize, now: Nanos) {
        if self.spec.release_idle.is_some() {
            self.idle_since[leaf] = now;
            if !self.queued[leaf] {
                self.queued[leaf] = true;
                self.idle.push_back((leaf as u32, now));
            }
        }
    }

    fn release_idle(&mut self, now: Nanos) {
        let Some(after) = self.spec.release_idle else {
            return;
        };
        while let Some(&(leaf, since)) = self.idle.front() {
            if now.saturating_sub(since) < after {
                return;
            }
            self.idle.pop_front();
            let l = leaf as usize;
            let empty = self.leaves[l].as_ref().is_none_or(|q| q.qlen() == 0);
            match self.idle_since[l] {
                // Empty all along since then: released.
                t if t <= since && empty => {
                    self.leaves[l] = None;
                    self.idle_since[l] = Nanos::MAX;
                    self.queued[l] = false;
                }
                // Emptied again later: wait from then.
                t if t != Nanos::MAX && empty => self.idle.push_back((leaf, t)),
                // Holding packets: out of the queue until it empties again.
                _ => self.queued[l] = false,
            }
        }
    }

    /// `tc class change` for every class whose rates, bursts or quantum differ, when nothing
    /// else does (the same classes, parents, priorities, leaves, matches and qdisc words):
    /// tokens are kept (held to a smaller bucket), no packet moves. None otherwise.
    fn change_rates(&mut self, new: &HtbSpec) -> Option<usize> {
        let old = &self.spec;
        let same = |a: &ClassSpec, b: &ClassSpec| {
            (a.id, a.parent, a.prio, &a.matches, &a.qdisc, a.mtu)
                == (b.id, b.parent, b.prio, &b.matches, &b.qdisc, b.mtu)
        };
        if (
            old.default,
            old.direct_qlen,
            old.release_idle,
            old.classes.len(),
        ) != (
            new.default,
            new.direct_qlen,
            new.release_idle,
            new.classes.len(),
        ) || !old
            .classes
            .iter()
            .zip(&new.classes)
            .all(|(a, b)| same(a, b))
        {
            return None;
        }
        let mut changed = 0;
        for (i, (a, b)) in old.classes.iter().zip(&new.classes).enumerate() {
            if a == b && old.r2q == new.r2q {
                continue;
            }
            let (rate, ceil, buffer, cbuffer, quantum) = build::rates(new, b);
            let c = &mut self.tree.classes[i];
            (c.rate, c.ceil, c.buffer, c.cbuffer, c.quantum) =
                (rate, ceil, buffer, cbuffer, quantum);
            c.tokens = c.tokens.min(buffer);
            c.ctokens = c.ctokens.min(cbuffer);
            changed += 1;
        }
        self.spec = new.clone();
        Some(changed)
    }

    /// Class `i` runs at `rate_bps` and `ceil_bps` (at least 8 kbit/s, the ceil at least the
    /// rate) with its configured bursts and quantum: its buckets are the words' at the new
    /// rates, as `tc class change` would make them. The spec is not changed.
    ///
    /// Where this differs from `tc class change`: the tokens keep what they hold in bytes, not
    /// in time (held to the new bucket), and the class's mode and its place in the event queue
    /// follow at once. HTB keeps a bucket as nanoseconds of sending at the class's rate, and a
    /// change leaves them as they are; that is harmless when a person changes a rate now and
    /// then, but a worker's part of a split tree (`set_class_rates`) moves every half
    /// millisecond, from a floor of a few kbit/s to megabits: a packet charged at 25 kbit/s is
    /// 0.48 s of debt, which at 8 Mbit/s would still hold the class for 0.48 s rather than
    /// 1.5 ms. Under two workers that stalled a LibreQoS circuit's TCP upload on one worker at
    /// 0.1 Mbit/s of its 8 (2026-11-29).
    fn run_at(&mut self, i: usize, rate_bps: u64, ceil_bps: u64) {
        let s = &self.spec.classes[i];
        let rate_bps = rate_bps.max(8_000);
        let ceil_bps = ceil_bps.max(rate_bps);
        let c = &mut self.tree.classes[i];
        let (rate0, ceil0) = (c.rate.rate_bytes_ps, c.ceil.rate_bytes_ps);
        c.rate =
            crate::qdisc::ratecfg::RateCfg::with_link(rate_bps / 8, s.overhead, s.mpu, s.linklayer);
        c.ceil =
            crate::qdisc::ratecfg::RateCfg::with_link(ceil_bps / 8, s.overhead, s.mpu, s.linklayer);
        c.buffer = build::bucket(rate_bps, s.burst, s.mtu);
        c.cbuffer = build::bucket(ceil_bps, s.cburst, s.mtu);
        c.tokens = same_bytes(c.tokens, rate0, c.rate.rate_bytes_ps).min(c.buffer);
        c.ctokens = same_bytes(c.ctokens, ceil0, c.ceil.rate_bytes_ps).min(c.cbuffer);
        self.tree.remode(i as u32);
    }

    /// Leaves whose discipline exists, and entries waiting in the idle queue.
    pub fn live_leaves(&self) -> (usize, usize) {
        (
            self.leaves.iter().filter(|l| l.is_some()).count(),
            self.idle.len(),
        )
    }

    fn by_minor(&self, minor: u16) -> Option<u32> {
        self.by_minor
            .binary_search_by_key(&minor, |e| e.0)
            .ok()
            .map(|i| self.by_minor[i].1)
    }

    /// `htb_classify`: the leaf a packet goes to, or `None` for the direct queue.
    fn classify(&self, m: &PacketMeta) -> Option<u32> {
        if m.priority == 0x1_0000 {
            return None; // 1:0 names the qdisc itself: direct
        }
        if m.priority >> 16 == 1 {
            if let Some(c) = self.by_minor(m.priority as u16) {
                if self.tree.classes[c as usize].level == 0 && !self.is_draining(m.priority as u16)
                {
                    return Some(c);
                }
            }
        }
        let hit = self.rules.iter().find(|(rule, _)| match rule {
            Match::Dscp(d) => m.dscp == *d,
            Match::Src(n) => m.flow.src().is_some_and(|a| n.contains(&a)),
            Match::Dst(n) => m.flow.dst().is_some_and(|a| n.contains(&a)),
            Match::Mark(k) => m.mark == *k,
        });
        match hit {
            Some(&(_, c)) => Some(c),
            None => self.default_class,
        }
    }

    /// Take a leaf's drops, counting them as the tree's.
    fn take_leaf_drops(&mut self, leaf: usize) {
        let Some(q) = self.leaves[leaf].as_mut() else {
            return;
        };
        while let Some(d) = q.take_dropped() {
            self.drops += 1;
            self.dropped.push(d.packet, d.reason);
        }
    }

    /// Run `f` on a leaf, keeping the tree's packet and byte counts in step with it.
    fn on_leaf<T>(&mut self, leaf: usize, f: impl FnOnce(&mut dyn Qdisc<P>) -> T) -> T {
        let q = self.leaf_mut(leaf);
        let (q0, b0) = (q.qlen(), q.backlog());
        let out = f(q.as_mut());
        let (q1, b1) = (q.qlen(), q.backlog());
        self.take_leaf_drops(leaf);
        self.qlen = (self.qlen + q1).saturating_sub(q0);
        self.backlog = (self.backlog + b1).saturating_sub(b0);
        out
    }

    /// `htb_dequeue_tree`: a packet from the turn of `prio`'s row at `level`; a leaf that holds
    /// its packets back lowers `wake` to when it will give one.
    fn dequeue_tree(
        &mut self,
        prio: usize,
        level: usize,
        now: Nanos,
        wake: &mut Nanos,
    ) -> Option<P> {
        let mut start = self.tree.lookup_leaf(prio, level);
        let mut cl = start;
        let (c, p) = loop {
            let c = cl?;
            let leaf = self.tree.classes[c as usize].leaf? as usize;
            if self.leaf_empty(c) {
                self.tree.deactivate(c);
                if self.tree.row_mask[level] & (1 << prio) == 0 {
                    return None;
                }
                let next = self.tree.lookup_leaf(prio, level);
                if start == Some(c) {
                    start = next;
                }
                cl = next;
                continue;
            }
            match self.on_leaf(leaf, |q| q.dequeue(now)) {
                Dequeue::Packet(p) => break (c, p),
                Dequeue::NotBefore(t) => *wake = (*wake).min(t),
                Dequeue::Empty => {}
            }
            self.tree.next_turn(c, level, prio);
            cl = self.tree.lookup_leaf(prio, level);
            if cl == start {
                return None; // every leaf of the row held back (the kernel's `qdisc_warn_nonwc`)
            }
        };
        let len = p.meta().len;
        let cl = &mut self.tree.classes[c as usize];
        cl.counters.bytes += u64::from(len);
        cl.counters.packets += 1;
        cl.deficit[level] -= i64::from(len);
        if cl.deficit[level] < 0 {
            cl.deficit[level] += cl.quantum;
            self.tree.next_turn(c, level, prio);
        }
        if self.leaf_empty(c) {
            self.tree.deactivate(c);
            if let Some(l) = self.tree.classes[c as usize].leaf {
                self.note_idle(l as usize, now);
            }
        }
        self.tree.charge(c, level as u8, len);
        Some(p)
    }

    fn leaf_empty(&self, c: u32) -> bool {
        self.tree.classes[c as usize].leaf.is_none_or(|l| {
            self.leaves[l as usize]
                .as_ref()
                .is_none_or(|q| q.qlen() == 0)
        })
    }

    /// `tc -s class show`'s numbers for every class, by classid.
    fn class_stats(&self) -> Vec<ClassStats> {
        let mut out: Vec<ClassStats> = self
            .tree
            .classes
            .iter()
            .zip(&self.spec.classes)
            .map(|(c, s)| {
                show::class_stats(
                    c,
                    s,
                    c.leaf
                        .and_then(|l| self.leaves[l as usize].as_ref().map(|q| q.stats())),
                )
            })
            .collect();
        out.sort_by_key(|c| c.id);
        out
    }
}

impl<P: Packet + 'static> Qdisc<P> for Htb<P> {
    fn enqueue(&mut self, packet: P, now: Nanos) -> Verdict {
        let len = packet.meta().len;
        let Some(c) = self.classify(packet.meta()) else {
            if self.direct.len() < self.spec.direct_qlen as usize {
                self.direct.push_back(packet);
                self.direct_pkts += 1;
                self.qlen += 1;
                self.backlog += u64::from(len);
                return Verdict::Queued;
            }
            self.drops += 1;
            self.dropped.push(packet, DropReason::Overlimit);
            return Verdict::Dropped;
        };
        let Some(leaf) = self.tree.classes[c as usize].leaf else {
            self.drops += 1;
            self.dropped.push(packet, DropReason::Overlimit);
            return Verdict::Dropped;
        };
        self.release_idle(now);
        let v = self.on_leaf(leaf as usize, |q| q.enqueue(packet, now));
        if v != Verdict::Queued {
            self.tree.classes[c as usize].counters.drops += 1;
        }
        if self.leaf_empty(c) {
            self.note_idle(leaf as usize, now);
        } else {
            self.idle_since[leaf as usize] = Nanos::MAX;
            self.tree.activate(c);
        }
        v
    }

    fn dequeue(&mut self, now: Nanos) -> Dequeue<P> {
        if let Some(p) = self.direct.pop_front() {
            self.qlen -= 1;
            self.backlog -= u64::from(p.meta().len);
            self.sent_bytes += u64::from(p.meta().len);
            self.sent_pkts += 1;
            return Dequeue::Packet(p);
        }
        self.release_idle(now);
        if self.qlen == 0 {
            return Dequeue::Empty;
        }
        self.tree.now = now;
        let mut next_event = now + 5_000_000_000;
        let mut wake = Nanos::MAX;
        for level in 0..MAXDEPTH {
            next_event = next_event.min(self.tree.events(level));
            let mask = self.tree.row_mask[level];
            for prio in (0..NUMPRIO).filter(|p| mask & (1 << p) != 0) {
                if self.tree.row_mask[level] & (1 << prio) == 0 {
                    continue;
                }
                if let Some(p) = self.dequeue_tree(prio, level, now, &mut wake) {
                    self.sent_bytes += u64::from(p.meta().len);
                    self.sent_pkts += 1;
                    return Dequeue::Packet(p);
                }
            }
        }
        if self.qlen == 0 {
            return Dequeue::Empty;
        }
        Dequeue::NotBefore(next_event.min(wake).max(now + 1))
    }

    fn take_dropped(&mut self) -> Option<Dropped<P>> {
        self.dropped.take()
    }

    fn qlen(&self) -> usize {
        self.qlen
    }

    fn backlog(&self) -> u64 {
        self.backlog
    }

    fn stats(&self) -> QdiscStats {
        QdiscStats {
            kind: "htb".into(),
            options: show::qdisc_options(&self.spec, self.direct_pkts),
            bytes: self.sent_bytes,
            packets: self.sent_pkts,
            drops: self.drops,
            overlimits: self.tree.overlimits,
            requeues: 0,
            backlog: self.backlog,
            qlen: self.qlen as u64,
            xstats: Xstats::None,
        }
    }

    fn classes(&self) -> Vec<ClassStats> {
        self.class_stats()
    }

    fn leaf_counters(&self, out: &mut Vec<ClassCounters>) {
        out.extend(self.tree.classes.iter().filter(|c| c.level == 0).map(|c| {
            ClassCounters {
                minor: c.id as u16,
                bytes: c.counters.bytes,
                packets: c.counters.packets,
                drops: c.counters.drops,
                backlog: c
                    .leaf
                    .and_then(|l| self.leaves[l as usize].as_ref())
                    .map_or(0, |q| q.backlog()),
            }
        }));
    }

    fn set_class_rates(&mut self, minor: u16, rate_bps: u64, ceil_bps: u64) -> bool {
        match self.by_minor(minor) {
            Some(i) => {
                self.run_at(i as usize, rate_bps, ceil_bps);
                true
            }
            None => false,
        }
    }

    fn class(&self, minor: u16) -> Option<ClassStats> {
        let i = self.by_minor(minor)? as usize;
        let c = &self.tree.classes[i];
        let leaf = c
            .leaf
            .and_then(|l| self.leaves[l as usize].as_ref().map(|q| q.stats()));
        Some(show::class_stats(c, &self.spec.classes[i], leaf))
    }

    fn change(&mut self, new: &QdiscSpec) -> Option<usize> {
        let QdiscSpec::Htb(new) = new else {
            return None;
        };
        self.change_rates(new)
    }

    fn reshape(&mut self, new: &QdiscSpec) -> Option<Reshaped> {
        let QdiscSpec::Htb(new) = new else {
            return None;
        };
        Some(self.reshape_to(new))
    }

    fn drain(&mut self, out: &mut dyn FnMut(P)) {
        while let Some(p) = self.direct.pop_front() {
            out(p);
        }
        for i in 0..self.leaves.len() {
            if let Some(q) = self.leaves[i].as_mut() {
                q.drain(out);
            }
        }
        for c in 0..self.tree.classes.len() as u32 {
            if self.tree.classes[c as usize].prio_activity != 0
                && self.tree.classes[c as usize].level == 0
            {
                self.tree.deactivate(c);
            }
        }
        self.qlen = 0;
        self.backlog = 0;
    }
}

/// A bucket of `t` ns of sending at `from` bytes/s, as ns at `to` bytes/s: the same bytes of
/// credit or debt (debt no deeper than `mbuffer`).
fn same_bytes(t: i64, from: u64, to: u64) -> i64 {
    if from == to || from == 0 || to == 0 {
        return t;
    }
    let v = i128::from(t) * i128::from(from) / i128::from(to);
    v.clamp(i128::from(1 - class::MBUFFER), i128::from(i64::MAX)) as i64
}

#[cfg(test)]
mod tests;
