//! From an [`HtbSpec`] to the scheduler's classes, in time linear in the classes (a tree of
//! 10 000 circuits builds in milliseconds): each class's level (the kernel's: leaves 0, inner
//! classes at the root 7, one less per generation), its buckets as tc computes them, its
//! children by classid, and the lookups `classify` uses.

use super::class::{Class, Counters, Inner, Mode, MAXDEPTH};
use super::rr::RrSet;
use super::spec::{ClassSpec, HtbSpec, Match};
use crate::qdisc::ratecfg::{tc_xmittime_ticks, RateCfg};
use std::collections::BTreeMap;

/// What the qdisc keeps besides the classes.
pub(crate) struct Built {
    pub(crate) classes: Vec<Class>,
    /// Class index by minor, sorted (for `priority`).
    pub(crate) by_minor: Vec<(u16, u32)>,
    /// `match` rules in the order written: (rule, class).
    pub(crate) rules: Vec<(Match, u32)>,
    /// The default class when it exists and is a leaf.
    pub(crate) default_class: Option<u32>,
    /// Per leaf (in `Class::leaf` order), the class it belongs to.
    pub(crate) leaf_class: Vec<u32>,
}

/// A class's buckets, as tc turns the words into what it hands the kernel.
pub(crate) fn bucket(rate_bps: u64, given: Option<u32>, mtu: u32) -> i64 {
    // tc: the rate over the timer's frequency (1e9 Hz with high-resolution timers) + mtu.
    let bytes = given.unwrap_or_else(|| (rate_bps / 8 / 1_000_000_000) as u32 + mtu);
    i64::from(tc_xmittime_ticks(rate_bps / 8, bytes)) << 6
}

/// A class's rates, buckets and quantum from its words (what `tc class change` sets).
pub(crate) fn rates(spec: &HtbSpec, c: &ClassSpec) -> (RateCfg, RateCfg, i64, i64, i64) {
    let quantum = match c.quantum {
        Some(q) => i64::from(q),
        None => (c.rate_bps / 8 / u64::from(spec.r2q)).clamp(1000, 200_000) as i64,
    };
    (
        RateCfg::with_link(c.rate_bps / 8, c.overhead, c.mpu, c.linklayer),
        RateCfg::with_link(c.ceil_bps / 8, c.overhead, c.mpu, c.linklayer),
        bucket(c.rate_bps, c.burst, c.mtu),
        bucket(c.ceil_bps, c.cburst, c.mtu),
        quantum,
    )
}

fn class(spec: &HtbSpec, c: &ClassSpec, level: u8) -> Class {
    let (rate, ceil, buffer, cbuffer, quantum) = rates(spec, c);
    Class {
        id: 0x1_0000 | u32::from(c.id),
        parent: None,
        level,
        prio: c.prio,
        quantum,
        rate,
        ceil,
        buffer,
        cbuffer,
        tokens: buffer,
        ctokens: cbuffer,
        t_c: 0,
        mode: Mode::CanSend,
        prio_activity: 0,
        row_rank: 0,
        sib_rank: 0,
        inner: None,
        leaf: None,
        deficit: [0; MAXDEPTH],
        counters: Counters::default(),
    }
}

/// The classes of `spec` (parents come before children, as the spec's parser holds).
pub(crate) fn build(spec: &HtbSpec) -> Built {
    let n = spec.classes.len();
    let index: BTreeMap<u16, u32> = spec
        .classes
        .iter()
        .enumerate()
        .map(|(i, c)| (c.id, i as u32))
        .collect();
    let parent: Vec<Option<u32>> = spec
        .classes
        .iter()
        .map(|c| c.parent.and_then(|p| index.get(&p).copied()))
        .collect();
    let mut kids: Vec<Vec<u32>> = vec![Vec::new(); n];
    for (i, p) in parent.iter().enumerate() {
        if let Some(p) = p {
            kids[*p as usize].push(i as u32);
        }
    }
    let mut level = vec![0u8; n];
    for i in 0..n {
        if !kids[i].is_empty() {
            level[i] =
                parent[i].map_or(MAXDEPTH as u8 - 1, |p| level[p as usize].saturating_sub(1));
        }
    }
    let mut classes: Vec<Class> = (0..n)
        .map(|i| class(spec, &spec.classes[i], level[i]))
        .collect();
    let mut leaf_class = Vec::new();
    for i in 0..n {
        classes[i].parent = parent[i];
        let mut children = std::mem::take(&mut kids[i]);
        if children.is_empty() {
            classes[i].leaf = Some(leaf_class.len() as u32);
            leaf_class.push(i as u32);
            continue;
        }
        children.sort_by_key(|&k| spec.classes[k as usize].id);
        for (rank, &k) in children.iter().enumerate() {
            classes[k as usize].sib_rank = rank as u32;
        }
        let m = children.len();
        classes[i].inner = Some(Box::new(Inner {
            children,
            feed: std::array::from_fn(|_| RrSet::new(m)),
        }));
    }
    let mut by_minor: Vec<(u16, u32)> = index.iter().map(|(&m, &i)| (m, i)).collect();
    by_minor.sort_unstable();
    let rules = spec
        .classes
        .iter()
        .enumerate()
        .flat_map(|(i, c)| c.matches.iter().map(move |m| (m.clone(), i as u32)))
        .collect();
    let default_class = index
        .get(&spec.default)
        .copied()
        .filter(|&i| level[i as usize] == 0);
    Built {
        classes,
        by_minor,
        rules,
        default_class,
        leaf_class,
    }
}
