//! sqm-scripts' `simple.qos` and `simplest.qos` as their `egress()` and `ingress()` build the
//! tc tree, written as one `htb` spec each way:
//!
//! * `simplest.qos`: `htb default 10`, class 1:1 at the link's rate, class 1:10 under it (prio
//!   0) with the leaf discipline.
//! * `simple.qos`, egress: `htb default 12`; 1:1 and 1:10 at the rate; 1:11 priority (128 kbit/s,
//!   ceiling a third of the rate, prio 1), 1:12 best effort (a sixth, ceiling the rate − 16
//!   kbit/s, prio 2), 1:13 background (a sixth, same ceiling, prio 3); leaves with `quantum 300`.
//!   The script's iptables marks pick the class from the DSCP — CS1 background; CS6, EF, AF42
//!   and TOS "Minimize-Delay" (any DSCP whose low four bits are 4) priority; the rest best effort
//!   — written here as `match dscp` on the classes.
//! * `simple.qos`, ingress: one tier like simplest (`squash_ingress`, sqm's default) or the
//!   three tiers with 32 kbit/s for priority, leaves' quanta 500/1500/300, and `diffserv()`'s
//!   filters on the DSCP (CS1 background; 4, EF, CS6, CS7, AF42 priority).
//!
//! Every class gets sqm's HTB quantum: the bytes 1000 µs at the rate make, at least one
//! ATM-expanded 1500-byte packet (1749 bytes). Leaves get sqm's words: `limit` (1001), the
//! target for slow links (`target` ≥ 5 ms from 33 ATM cells' time at the rate, `interval` 95 ms
//! more), `ecn`/`noecn`, `flows 1024`. With `qdisc cake`, the scripts' cake branches instead.

/// One direction's leaf settings, as sqm's options give them.
pub(super) struct Leaf<'a> {
    /// The leaf discipline (`qdisc`, fq_codel by default).
    pub qdisc: &'a str,
    /// `ilimit`/`elimit`.
    pub limit: Option<&'a str>,
    /// `itarget`/`etarget`.
    pub target: Option<&'a str>,
    /// `ingress_ecn`/`egress_ecn`: `ECN` or `NOECN`.
    pub ecn: &'a str,
    /// `iqdisc_opts`/`eqdisc_opts`.
    pub opts: &'a str,
}

fn codel_like(q: &str) -> bool {
    q.ends_with("codel") || q.ends_with("pie")
}

/// sqm's `get_target`: a target for slow links (and codel's interval to match).
fn target(l: &Leaf<'_>, kbps: u64) -> String {
    if !codel_like(l.qdisc) {
        return String::new();
    }
    match l.target {
        Some("default") => String::new(),
        Some(t) if t != "auto" && t.starts_with(|c: char| c.is_ascii_digit()) => {
            format!("target {t}")
        }
        _ => {
            let t = (13_992_000 / kbps.max(1)).max(5000);
            if l.qdisc.ends_with("codel") {
                format!("target {t}us interval {}us", 95_000 + t)
            } else {
                format!("target {t}us")
            }
        }
    }
}

/// The leaf's words: limit, target, ECN, quantum (fq_codel and fq_pie), flows (fq_codel).
fn leaf(l: &Leaf<'_>, kbps: u64, quantum: Option<u32>) -> String {
    let q = l.qdisc;
    let mut w = vec![q.to_string()];
    if codel_like(q) || matches!(q, "pfifo_fast" | "pfifo") {
        w.push(format!("limit {}", l.limit.unwrap_or("1001")));
    } else if q == "bfifo" {
        let n: u64 = l.limit.and_then(|x| x.parse().ok()).unwrap_or(1001);
        w.push(format!("limit {}", n * 1500));
    }
    w.push(target(l, kbps));
    if codel_like(q) || q.ends_with("red") {
        w.push(if l.ecn == "NOECN" { "noecn" } else { "ecn" }.into());
    }
    if let (Some(n), true) = (quantum, q.ends_with("fq_codel") || q == "fq_pie") {
        w.push(format!("quantum {n}"));
    }
    if q.ends_with("fq_codel") {
        w.push("flows 1024".into());
    }
    w.push(l.opts.to_string());
    w.retain(|x| !x.is_empty());
    w.join(" ")
}

/// sqm's `get_htb_quantum` for a 1500-byte MTU: 1000 µs at the rate, at least 1749 bytes.
fn htb_quantum(kbps: u64) -> u64 {
    (1000 * kbps / 8000).max(1749)
}

/// A class line with sqm's quantum and link-layer words.
fn class(
    id: &str,
    parent: Option<&str>,
    rate: u64,
    ceil: u64,
    prio: Option<u8>,
    q: u64,
    lla: &str,
) -> String {
    let parent = parent.map(|p| format!(" parent {p}")).unwrap_or_default();
    let prio = prio.map(|p| format!(" prio {p}")).unwrap_or_default();
    format!("class {id}{parent} rate {rate}kbit ceil {ceil}kbit{prio} quantum {q} {lla}")
}

/// DSCPs simple.qos's egress iptables rules mark as priority (CS6, EF, AF42, and the TOS
/// match "Minimize-Delay": 0x10 under the mask 0x3f, so any DSCP whose low four bits are 4).
const EGRESS_PRIORITY: [u8; 6] = [48, 46, 36, 4, 20, 52];
/// DSCPs `diffserv()`'s ingress filters send to priority (0x10, EF, 0xc0, 0xe0, AF42).
const INGRESS_PRIORITY: [u8; 5] = [4, 46, 48, 56, 36];

fn matches(dscps: &[u8]) -> String {
    dscps.iter().map(|d| format!("match dscp {d} ")).collect()
}

/// `simplest.qos`, either direction.
pub(super) fn simplest(kbps: u64, l: &Leaf<'_>, lla: &str) -> String {
    let q = htb_quantum(kbps);
    format!(
        "htb default 10 {} {} qdisc {}",
        class("1:1", None, kbps, kbps, None, q, lla),
        class("1:10", Some("1:1"), kbps, kbps, Some(0), q, lla),
        leaf(l, kbps, None)
    )
}

/// `simple.qos`'s three tiers: egress (`ingress` false) or ingress with DSCP filtering.
pub(super) fn simple(kbps: u64, l: &Leaf<'_>, lla: &str, ingress: bool) -> String {
    let q = htb_quantum(kbps);
    let (prio, be, bk, be_ceil) = (kbps / 3, kbps / 6, kbps / 6, kbps.saturating_sub(16));
    let (prio_rate, quanta, prio_dscps): (u64, [u32; 3], &[u8]) = if ingress {
        (32, [500, 1500, 300], &INGRESS_PRIORITY)
    } else {
        (128, [300, 300, 300], &EGRESS_PRIORITY)
    };
    // Each leaf's flows count from its own rate, which at 1024 (sqm's AUTOFLOW off) is moot.
    format!(
        "htb default 12 {} {} {} {}qdisc {} {} qdisc {} {} match dscp 8 qdisc {}",
        class("1:1", None, kbps, kbps, None, q, lla),
        class("1:10", Some("1:1"), kbps, kbps, Some(0), q, lla),
        class("1:11", Some("1:1"), prio_rate, prio, Some(1), q, lla),
        matches(prio_dscps),
        leaf(l, kbps, Some(quanta[0])),
        class("1:12", Some("1:1"), be, be_ceil, Some(2), q, lla),
        leaf(l, kbps, Some(quanta[1])),
        class("1:13", Some("1:1"), bk, be_ceil, Some(3), q, lla),
        leaf(l, kbps, Some(quanta[2])),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use debloat_core::QdiscSpec;

    fn fq(target: Option<&'static str>, ecn: &'static str) -> Leaf<'static> {
        Leaf {
            qdisc: "fq_codel",
            limit: None,
            target,
            ecn,
            opts: "",
        }
    }

    /// simple.qos's egress at 10 Mbit/s: the tiers' rates and ceilings as the script's shell
    /// arithmetic makes them, sqm's quantum, the leaves' words, the DSCPs its marks pick.
    #[test]
    fn simple_egress_is_the_scripts_tree() {
        let s = simple(10_000, &fq(None, "ECN"), "", false);
        let spec: QdiscSpec = s.parse().expect("a valid spec");
        let QdiscSpec::Htb(h) = spec else {
            panic!("htb")
        };
        let rates: Vec<(u16, u64, u64, u8)> = h
            .classes
            .iter()
            .map(|c| (c.id, c.rate_bps, c.ceil_bps, c.prio))
            .collect();
        assert_eq!(
            rates,
            vec![
                (0x1, 10_000_000, 10_000_000, 0),
                (0x10, 10_000_000, 10_000_000, 0),
                (0x11, 128_000, 3_333_000, 1),
                (0x12, 1_666_000, 9_984_000, 2),
                (0x13, 1_666_000, 9_984_000, 3),
            ]
        );
        assert!(h.classes.iter().all(|c| c.quantum == Some(1749)), "{s}");
        assert_eq!(h.default, 0x12);
        assert!(s.contains("qdisc fq_codel limit 1001 target 5000us interval 100000us ecn quantum 300 flows 1024"), "{s}");
        assert_eq!(h.classes[2].matches.len(), 6);
        assert!(s.contains("match dscp 8 qdisc"), "{s}");
    }

    /// A slow link gets sqm's longer target and interval; an explicit target is kept.
    #[test]
    fn targets_follow_the_link() {
        assert!(simplest(1000, &fq(None, "NOECN"), "")
            .contains("target 13992us interval 108992us noecn"));
        assert!(simplest(1000, &fq(Some("7ms"), "ECN"), "").contains("target 7ms ecn"));
        let s = simplest(
            50_000,
            &fq(None, "ECN"),
            "overhead 18 mpu 64 linklayer ethernet",
        );
        assert!(
            s.contains("quantum 6250 overhead 18 mpu 64 linklayer ethernet"),
            "{s}"
        );
        assert!(s.parse::<QdiscSpec>().is_ok(), "{s}");
    }
}
