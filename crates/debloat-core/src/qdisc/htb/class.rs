//! One HTB class: its two token buckets (`rate` with `buffer`, `ceil` with `cbuffer`), its
//! mode, where it sits in the tree, and its counters (`struct htb_class`).

use super::rr::RrSet;
use crate::packet::Nanos;
use crate::qdisc::ratecfg::RateCfg;

/// `TC_HTB_NUMPRIO`.
pub(crate) const NUMPRIO: usize = 8;
/// `TC_HTB_MAXDEPTH`: levels 0 (leaves) to 7 (classes at the root).
pub(crate) const MAXDEPTH: usize = 8;
/// `mbuffer`: how far tokens may run into debt, and the longest idle time counted (60 s).
pub(crate) const MBUFFER: i64 = 60_000_000_000;

/// `enum htb_cmode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Out of ceil tokens.
    CantSend,
    /// Out of rate tokens, may borrow from an ancestor.
    MayBorrow,
    /// Has rate tokens.
    CanSend,
}

/// An inner class's children and feeds.
#[derive(Debug, Default)]
pub(crate) struct Inner {
    /// Children's indices, by classid (a child's `sib_rank` is its place here).
    pub(crate) children: Vec<u32>,
    /// Per priority, the children that may borrow from this class.
    pub(crate) feed: [RrSet; NUMPRIO],
}

/// What the statistics show of a class.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Counters {
    pub(crate) bytes: u64,
    pub(crate) packets: u64,
    pub(crate) drops: u64,
    pub(crate) overlimits: u64,
    pub(crate) lends: u64,
    pub(crate) borrows: u64,
}

#[derive(Debug)]
pub(crate) struct Class {
    /// Major:minor.
    pub(crate) id: u32,
    pub(crate) parent: Option<u32>,
    /// 0 for a leaf; 7 for an inner class at the root, one less per generation below.
    pub(crate) level: u8,
    pub(crate) prio: u8,
    pub(crate) quantum: i64,
    pub(crate) rate: RateCfg,
    pub(crate) ceil: RateCfg,
    /// ns of sending at `rate` the bucket holds.
    pub(crate) buffer: i64,
    pub(crate) cbuffer: i64,
    pub(crate) tokens: i64,
    pub(crate) ctokens: i64,
    /// When the buckets were last charged.
    pub(crate) t_c: Nanos,
    pub(crate) mode: Mode,
    /// Priorities this class is active in (a bit each).
    pub(crate) prio_activity: u8,
    /// Place by classid among the classes of its level (its rank in rows and wait queues).
    pub(crate) row_rank: u32,
    /// Place by classid among its siblings (its rank in the parent's feeds).
    pub(crate) sib_rank: u32,
    pub(crate) inner: Option<Box<Inner>>,
    /// A leaf's discipline, an index into the leaves.
    pub(crate) leaf: Option<u32>,
    /// A leaf's deficit, per level it was served from.
    pub(crate) deficit: [i64; MAXDEPTH],
    pub(crate) counters: Counters,
}

impl Class {
    /// `htb_class_mode`: the mode `diff` ns after the last charge (no hysteresis, the kernel's
    /// default); when not `CanSend`, `diff` becomes how long until the mode changes.
    pub(crate) fn mode_after(&self, diff: &mut i64) -> Mode {
        let toks = self.ctokens + *diff;
        if toks < 0 {
            *diff = -toks;
            return Mode::CantSend;
        }
        let toks = self.tokens + *diff;
        if toks >= 0 {
            return Mode::CanSend;
        }
        *diff = -toks;
        Mode::MayBorrow
    }

    /// `htb_accnt_tokens`: `bytes` charged at `rate` after `diff` ns of refill.
    pub(crate) fn charge_rate(&mut self, bytes: u32, diff: i64) {
        self.tokens = account(self.tokens, self.buffer, self.rate.l2t_ns(bytes), diff);
    }

    /// `htb_accnt_ctokens`: the same against `ceil`.
    pub(crate) fn charge_ceil(&mut self, bytes: u32, diff: i64) {
        self.ctokens = account(self.ctokens, self.cbuffer, self.ceil.l2t_ns(bytes), diff);
    }

    /// ns since the last charge, at most `mbuffer`.
    pub(crate) fn since_charge(&self, now: Nanos) -> i64 {
        now.saturating_sub(self.t_c).min(MBUFFER as u64) as i64
    }
}

fn account(tokens: i64, buffer: i64, cost: u64, diff: i64) -> i64 {
    let toks = (diff + tokens).min(buffer) - cost.min(i64::MAX as u64) as i64;
    if toks <= -MBUFFER {
        1 - MBUFFER
    } else {
        toks
    }
}
