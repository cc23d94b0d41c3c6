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

impl ClassStats {
    /// Add another copy's counters of the same class (another worker's, `--workers N`): bytes,
    /// packets, drops, overlimits, the backlog, lended and borrowed, and the leaf discipline's
    /// counters. The tokens and the leaf's own statistics (`xstats`) stay this copy's: they
    /// are each copy's state, not sums.
    pub fn add_counts(&mut self, o: &ClassStats) {
        for (a, b) in [
            (&mut self.bytes, o.bytes),
            (&mut self.packets, o.packets),
            (&mut self.drops, o.drops),
            (&mut self.overlimits, o.overlimits),
            (&mut self.backlog, o.backlog),
            (&mut self.qlen, o.qlen),
            (&mut self.lended, o.lended),
            (&mut self.borrowed, o.borrowed),
            (&mut self.giants, o.giants),
        ] {
            *a += b;
        }
        match (&mut self.leaf_qdisc, &o.leaf_qdisc) {
            (Some(a), Some(b)) => a.add_counts(b),
            (a @ None, Some(b)) => *a = Some(b.clone()),
            _ => {}
        }
    }
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

#[cfg(test)]
mod tests {
    use super::ClassStats;
    use crate::qdisc::stats::{QdiscStats, Xstats};

    fn class(bytes: u64, tokens: i64, leaf: Option<u64>) -> ClassStats {
        ClassStats {
            kind: "htb".into(),
            id: 0x1_0011,
            classid: "1:11".into(),
            parent: Some("1:1".into()),
            leaf: leaf.map(|_| "11:".into()),
            options: "rate 12Mbit ceil 12Mbit".into(),
            bytes,
            packets: bytes / 1000,
            drops: 1,
            overlimits: 2,
            backlog: 3000,
            qlen: 2,
            lended: 5,
            borrowed: 6,
            giants: 0,
            tokens,
            ctokens: tokens,
            leaf_qdisc: leaf.map(|b| QdiscStats {
                kind: "fq_codel".into(),
                options: String::new(),
                bytes: b,
                packets: b / 1000,
                drops: 1,
                overlimits: 0,
                requeues: 0,
                backlog: 3000,
                qlen: 2,
                xstats: Xstats::None,
            }),
        }
    }

    /// Two workers' copies of a class: the counters and the leaf's are summed; the tokens and
    /// the names stay the first copy's; a leaf only the second has is taken whole.
    #[test]
    fn copies_of_a_class_add_their_counters_and_keep_the_first_ones_state() {
        let mut a = class(10_000, 700, Some(10_000));
        a.add_counts(&class(4_000, -50, Some(4_000)));
        assert_eq!(
            (a.bytes, a.packets, a.drops, a.overlimits),
            (14_000, 14, 2, 4)
        );
        assert_eq!((a.backlog, a.qlen, a.lended, a.borrowed), (6000, 4, 10, 12));
        assert_eq!(
            (a.tokens, a.ctokens, a.classid.as_str()),
            (700, 700, "1:11")
        );
        let q = a.leaf_qdisc.expect("leaf");
        assert_eq!(
            (q.bytes, q.packets, q.drops, q.backlog, q.qlen),
            (14_000, 14, 2, 6000, 4)
        );
        let mut idle = class(0, 100, None);
        idle.add_counts(&class(2_000, 100, Some(2_000)));
        assert_eq!(idle.leaf_qdisc.map(|q| q.bytes), Some(2_000));
    }
}
