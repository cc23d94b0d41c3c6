//! A classful discipline's classes as `tc -s class show` prints them, and the tree's
//! disciplines as `tc -s qdisc show` lists them (the root, then each leaf given its own).

use crate::qdisc::stats::QdiscStats;
use serde::Serialize;
use std::fmt::Write;

/// One class's numbers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ClassStats {
    /// The discipline (`htb`).
    pub kind: String,
    /// Major:minor as one number, for ordering.
    pub id: u32,
    /// `1:11`.
    pub classid: String,
    /// The parent class, `None` at the root.
    pub parent: Option<String>,
    /// The leaf discipline's handle (`11:`) when the spec gave one.
    pub leaf: Option<String>,
    /// The options as tc prints them.
    pub options: String,
    /// Bytes sent.
    pub bytes: u64,
    /// Packets sent.
    pub packets: u64,
    /// Arrivals the leaf refused.
    pub drops: u64,
    /// Times the class ran out of ceil tokens.
    pub overlimits: u64,
    /// Bytes queued in the leaf.
    pub backlog: u64,
    /// Packets queued in the leaf.
    pub qlen: u64,
    /// Packets it sent at its own rate for itself or a descendant.
    pub lended: u64,
    /// Packets it sent on an ancestor's rate.
    pub borrowed: u64,
    /// Always 0, as in Linux.
    pub giants: u64,
    /// Rate tokens, psched ticks (64 ns).
    pub tokens: i64,
    /// Ceil tokens, psched ticks.
    pub ctokens: i64,
    /// The leaf discipline's own statistics, when the spec gave one.
    pub leaf_qdisc: Option<QdiscStats>,
}

impl ClassStats {
    /// The `tc -s class show` block, blank line included.
    pub fn to_tc_string(&self) -> String {
        let mut s = String::new();
        let place = match &self.parent {
            Some(p) => format!("parent {p}"),
            None => "root".into(),
        };
        let leaf = self
            .leaf
            .as_ref()
            .map(|l| format!(" leaf {l}"))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "class {} {} {place}{leaf} {} ",
            self.kind, self.classid, self.options
        );
        let _ = writeln!(
            s,
            " Sent {} bytes {} pkt (dropped {}, overlimits {} requeues 0) ",
            self.bytes, self.packets, self.drops, self.overlimits
        );
        let _ = writeln!(s, " backlog {}b {}p requeues 0", self.backlog, self.qlen);
        let _ = writeln!(
            s,
            " lended: {} borrowed: {} giants: {}",
            self.lended, self.borrowed, self.giants
        );
        let _ = writeln!(s, " tokens: {} ctokens: {}\n", self.tokens, self.ctokens);
        s
    }
}

/// A class's counters alone (no text): what per-class metrics need, cheaply, for many
/// thousand classes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ClassCounters {
    /// The class's minor (1:N).
    pub minor: u16,
    /// Bytes sent.
    pub bytes: u64,
    /// Packets sent.
    pub packets: u64,
    /// Arrivals its leaf refused.
    pub drops: u64,
    /// Bytes its leaf holds now.
    pub backlog: u64,
}

/// `tc -s qdisc show` of a tree: the root, then each leaf given its own discipline, by classid.
pub fn tree_tc_string(root: &QdiscStats, classes: &[ClassStats]) -> String {
    let mut s = root.to_tc_string();
    for c in classes {
        if let (Some(handle), Some(q)) = (&c.leaf, &c.leaf_qdisc) {
            s.push_str(&q.to_tc_string_at(&format!("{handle} parent {}", c.classid)));
        }
    }
    s
}

/// What `tc -s qdisc show` then `tc -s class show` print for a discipline: its tree, its
/// classes in classid order (nothing more for a classless one).
pub fn tc_show<P: crate::packet::Packet>(q: &dyn crate::qdisc::Qdisc<P>) -> String {
    let classes = q.classes();
    let mut s = tree_tc_string(&q.stats(), &classes);
    for c in &classes {
        s.push_str(&c.to_tc_string());
    }
    s
}
