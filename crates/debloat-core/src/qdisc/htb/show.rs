//! What tc shows of an htb (iproute2 6.1's text, as the lab's `tc` prints it), and the tc
//! commands that build the same tree in a kernel (for the lab).

use super::class::Class;
use super::spec::{ClassSpec, HtbSpec, Match};
use crate::qdisc::class_stats::ClassStats;
use crate::qdisc::ratecfg::{tc_xmitsize, LinkLayer};
use crate::qdisc::stats::QdiscStats;
use crate::units::{fmt_rate, fmt_rate_exact, fmt_size_tc};

/// The qdisc's options: `r2q 10 default 0x11 direct_packets_stat 0 direct_qlen 1000`.
pub(crate) fn qdisc_options(spec: &HtbSpec, direct_pkts: u64) -> String {
    let default = match spec.default {
        0 => "0".to_string(),
        d => format!("{d:#x}"),
    };
    format!(
        "r2q {} default {default} direct_packets_stat {direct_pkts} direct_qlen {}",
        spec.r2q, spec.direct_qlen
    )
}

/// A class's options: `prio 2 rate 7Mbit ceil 10Mbit burst 15Kb cburst 3000b` (a leaf shows
/// its prio; the bursts are what the kernel keeps, read back through tc's arithmetic).
fn class_options(c: &Class, s: &ClassSpec) -> String {
    let mut o = String::new();
    if c.level == 0 {
        o.push_str(&format!("prio {} ", c.prio));
    }
    o.push_str(&format!("rate {} ", fmt_rate(s.rate_bps)));
    if s.overhead != 0 {
        o.push_str(&format!("overhead {} ", s.overhead));
    }
    o.push_str(&format!("ceil {} ", fmt_rate(s.ceil_bps)));
    if s.linklayer == LinkLayer::Atm {
        o.push_str("linklayer atm ");
    }
    let burst = tc_xmitsize(s.rate_bps / 8, (c.buffer >> 6) as u32);
    let cburst = tc_xmitsize(s.ceil_bps / 8, (c.cbuffer >> 6) as u32);
    o.push_str(&format!(
        "burst {} cburst {}",
        fmt_size_tc(burst),
        fmt_size_tc(cburst)
    ));
    o
}

/// psched ticks as the kernel reports tokens: the nanoseconds shifted, held in an s32.
fn ticks(ns: i64) -> i64 {
    (ns >> 6).clamp(i64::from(i32::MIN), i64::from(i32::MAX))
}

pub(crate) fn class_stats(c: &Class, s: &ClassSpec, leaf: Option<QdiscStats>) -> ClassStats {
    let (backlog, qlen) = leaf.as_ref().map_or((0, 0), |q| (q.backlog, q.qlen));
    let given = s.qdisc.is_some();
    ClassStats {
        kind: "htb".into(),
        id: c.id,
        classid: format!("1:{:x}", s.id),
        parent: s.parent.map(|p| format!("1:{p:x}")),
        leaf: given.then(|| format!("{:x}:", s.id)),
        options: class_options(c, s),
        bytes: c.counters.bytes,
        packets: c.counters.packets,
        drops: c.counters.drops,
        overlimits: c.counters.overlimits,
        backlog,
        qlen,
        lended: c.counters.lends,
        borrowed: c.counters.borrows,
        giants: 0,
        tokens: ticks(c.tokens),
        ctokens: ticks(c.ctokens),
        leaf_qdisc: leaf.filter(|_| given),
    }
}

/// The tc commands that build this tree on `dev` (each without the leading `tc`): the qdisc,
/// the classes in order, each leaf's discipline under handle `N:`, and a u32 or fw filter per
/// `match`, in the order written.
pub fn tc_commands(spec: &HtbSpec, dev: &str) -> Vec<String> {
    let mut root = format!("qdisc add dev {dev} root handle 1: htb");
    if spec.default != 0 {
        root.push_str(&format!(" default {:x}", spec.default));
    }
    if spec.r2q != 10 {
        root.push_str(&format!(" r2q {}", spec.r2q));
    }
    if spec.direct_qlen != 1000 {
        root.push_str(&format!(" direct_qlen {}", spec.direct_qlen));
    }
    let mut out = vec![root];
    for c in &spec.classes {
        out.push(class_command(c, dev));
    }
    for c in &spec.classes {
        if let Some(q) = &c.qdisc_words {
            out.push(format!(
                "qdisc add dev {dev} parent 1:{0:x} handle {0:x}: {q}",
                c.id
            ));
        }
    }
    let mut prio = 1;
    for c in &spec.classes {
        for m in &c.matches {
            let (proto, sel) = match m {
                Match::Dscp(d) => ("ip", format!("u32 match ip dsfield {:#x} 0xfc", d << 2)),
                Match::Src(n) if n.addr().is_ipv4() => ("ip", format!("u32 match ip src {n}")),
                Match::Dst(n) if n.addr().is_ipv4() => ("ip", format!("u32 match ip dst {n}")),
                Match::Src(n) => ("ipv6", format!("u32 match ip6 src {n}")),
                Match::Dst(n) => ("ipv6", format!("u32 match ip6 dst {n}")),
                Match::Mark(k) => ("all", format!("handle {k} fw")),
            };
            out.push(format!(
                "filter add dev {dev} parent 1: protocol {proto} prio {prio} {sel} flowid 1:{:x}",
                c.id
            ));
            prio += 1;
        }
    }
    out
}

fn class_command(c: &ClassSpec, dev: &str) -> String {
    let parent = c.parent.map_or("1:".to_string(), |p| format!("1:{p:x}"));
    let mut s = format!(
        "class add dev {dev} parent {parent} classid 1:{:x} htb rate {} ceil {}",
        c.id,
        fmt_rate_exact(c.rate_bps),
        fmt_rate_exact(c.ceil_bps)
    );
    if let Some(b) = c.burst {
        s.push_str(&format!(" burst {b}b"));
    }
    if let Some(b) = c.cburst {
        s.push_str(&format!(" cburst {b}b"));
    }
    s.push_str(&format!(" prio {}", c.prio));
    if let Some(q) = c.quantum {
        s.push_str(&format!(" quantum {q}"));
    }
    if c.mtu != 1600 {
        s.push_str(&format!(" mtu {}", c.mtu));
    }
    if c.mpu != 0 {
        s.push_str(&format!(" mpu {}", c.mpu));
    }
    if c.overhead != 0 {
        s.push_str(&format!(" overhead {}", c.overhead));
    }
    if c.linklayer == LinkLayer::Atm {
        s.push_str(" linklayer atm");
    }
    s
}
