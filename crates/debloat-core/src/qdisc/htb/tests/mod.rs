//! HTB as Linux runs it: tc's text, rates and ceilings, borrowing shared by quantum and by
//! priority, the direct queue, the spec's errors.

use super::*;
use crate::packet::Record;
use crate::qdisc::stats::tc_show as tc_text;
use crate::testutil::{pkt_in, udp_flow};

const S: u64 = 1_000_000_000;

fn htb(words: &str) -> Box<dyn Qdisc<Record>> {
    let s: QdiscSpec = words.parse().expect("valid");
    s.build::<Record>(FlowHasher::new([1, 2]), 1)
}

const LAB_TREE: &str = "htb default 11 class 1:1 rate 10Mbit \
    class 1:10 parent 1:1 rate 3Mbit ceil 10Mbit prio 1 qdisc fq_codel \
    class 1:11 parent 1:1 rate 7Mbit ceil 10Mbit prio 2 quantum 1514 burst 15k cburst 3000 qdisc pfifo limit 50 \
    class 1:12 parent 1:1 rate 100kbit ceil 200kbit";

/// The text the lab's tc printed for this tree on Linux 7.2.7 (iproute2 6.1), class blocks put
/// in classid order (the kernel lists them in its hash's order).
const LAB_TEXT: &str = "\
qdisc htb 1: root refcnt 2 r2q 10 default 0x11 direct_packets_stat 0 direct_qlen 1000
 Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) 
 backlog 0b 0p requeues 0
qdisc fq_codel 10: parent 1:10 limit 10240p flows 1024 quantum 1514 target 5ms interval 100ms memory_limit 32Mb ecn drop_batch 64 
 Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) 
 backlog 0b 0p requeues 0
  maxpacket 0 drop_overlimit 0 new_flow_count 0 ecn_mark 0
  new_flows_len 0 old_flows_len 0
qdisc pfifo 11: parent 1:11 limit 50p
 Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) 
 backlog 0b 0p requeues 0
class htb 1:1 root rate 10Mbit ceil 10Mbit burst 1600b cburst 1600b 
 Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) 
 backlog 0b 0p requeues 0
 lended: 0 borrowed: 0 giants: 0
 tokens: 20000 ctokens: 20000

class htb 1:10 parent 1:1 leaf 10: prio 1 rate 3Mbit ceil 10Mbit burst 1599b cburst 1600b 
 Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) 
 backlog 0b 0p requeues 0
 lended: 0 borrowed: 0 giants: 0
 tokens: 66656 ctokens: 20000

class htb 1:11 parent 1:1 leaf 11: prio 2 rate 7Mbit ceil 10Mbit burst 15Kb cburst 3000b 
 Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) 
 backlog 0b 0p requeues 0
 lended: 0 borrowed: 0 giants: 0
 tokens: 274281 ctokens: 37500

class htb 1:12 parent 1:1 prio 0 rate 100Kbit ceil 200Kbit burst 1600b cburst 1600b 
 Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) 
 backlog 0b 0p requeues 0
 lended: 0 borrowed: 0 giants: 0
 tokens: 2000000 ctokens: 1000000

";

#[test]
fn prints_what_the_kernels_tc_prints() {
    let q = htb(LAB_TREE);
    assert_eq!(tc_text(q.as_ref()), LAB_TEXT);
}

/// Packets of class `i` come from host `i` (198.18.0.i).
fn from(host: u8, id: u64, len: u32) -> Record {
    pkt_in(id, len, udp_flow(host, 1, 1000 + u16::from(host)))
}

/// Keep every listed host's leaf backlogged for `secs`, sending whenever HTB lets a packet go
/// (an infinitely fast link), and return each host's bytes sent per second in bit/s.
fn saturate(q: &mut dyn Qdisc<Record>, hosts: &[u8], secs: u64) -> Vec<f64> {
    let mut sent = vec![0u64; hosts.len()];
    let mut id = 0;
    let mut now = 0;
    let mut queued = vec![0usize; 256];
    while now < secs * S {
        for &h in hosts {
            while queued[h as usize] < 20 {
                id += 1;
                q.enqueue(from(h, id, 1500), now);
                queued[h as usize] += 1;
            }
        }
        match q.dequeue(now) {
            Dequeue::Packet(p) => {
                let h = match p.meta.flow.src() {
                    Some(std::net::IpAddr::V4(a)) => a.octets()[3],
                    _ => 0,
                };
                queued[h as usize] -= 1;
                if let Some(i) = hosts.iter().position(|&x| x == h) {
                    sent[i] += u64::from(p.meta.len);
                }
            }
            Dequeue::NotBefore(t) => now = t,
            Dequeue::Empty => panic!("backlogged, yet empty"),
        }
        assert!(q.take_dropped().is_none(), "nothing overflows here");
    }
    sent.iter().map(|&b| b as f64 * 8.0 / secs as f64).collect()
}

const TWO: &str = "htb class 1:1 rate 10Mbit \
    class 1:10 parent 1:1 rate 2Mbit ceil 10Mbit match src 198.18.0.1 \
    class 1:20 parent 1:1 rate 2Mbit ceil 10Mbit match src 198.18.0.2";

/// Two classes of the same rate and priority, both backlogged, share their parent's 10 Mbit/s
/// equally (each its 2 Mbit/s, the 6 left by turns of equal quanta); alone, one takes the
/// parent's whole rate, its ceiling.
#[test]
fn borrowing_splits_the_parent_by_quantum() {
    let mut q = htb(TWO);
    let r = saturate(q.as_mut(), &[1, 2], 10);
    assert!(
        (r[0] - 5e6).abs() < 0.05e6 && (r[1] - 5e6).abs() < 0.05e6,
        "{r:?}"
    );
    let mut q = htb(TWO);
    let r = saturate(q.as_mut(), &[1], 10);
    assert!((r[0] - 10e6).abs() < 0.1e6, "{r:?}");
    let stats = q.classes();
    assert!(stats[1].borrowed > 0 && stats[0].lended > 0, "{stats:?}");
}

/// A class's rate is guaranteed and the rest goes to the lower `prio`: 2 + 6 against 2.
#[test]
fn the_excess_goes_to_the_better_priority() {
    let mut q = htb(&TWO.replace("match src 198.18.0.2", "prio 1 match src 198.18.0.2"));
    let r = saturate(q.as_mut(), &[1, 2], 10);
    assert!(
        (r[0] - 8e6).abs() < 0.1e6 && (r[1] - 2e6).abs() < 0.1e6,
        "{r:?}"
    );
}

/// Unequal rates: each backlogged class gets at least its rate, the excess shared by quanta
/// (rate / r2q): 3 + 7 of 10, nothing to spare.
#[test]
fn rates_are_guaranteed() {
    let w = "htb class 1:1 rate 10Mbit \
        class 1:10 parent 1:1 rate 3Mbit ceil 10Mbit match src 198.18.0.1 \
        class 1:20 parent 1:1 rate 7Mbit ceil 10Mbit match src 198.18.0.2";
    let mut q = htb(w);
    let r = saturate(q.as_mut(), &[1, 2], 10);
    assert!(
        (r[0] - 3e6).abs() < 0.1e6 && (r[1] - 7e6).abs() < 0.1e6,
        "{r:?}"
    );
}

/// A ceiling below the parent's rate holds: 4 Mbit/s alone under 10.
#[test]
fn ceil_caps_a_class() {
    let mut q = htb("htb class 1:1 rate 10Mbit class 1:10 parent 1:1 rate 1Mbit ceil 4Mbit match src 198.18.0.1");
    let r = saturate(q.as_mut(), &[1], 10);
    assert!((r[0] - 4e6).abs() < 0.05e6, "{r:?}");
    assert!(q.classes()[1].overlimits > 0);
}

/// Without a default class, what no match takes leaves at once, unshaped, counted as
/// `direct_packets_stat`; with one, it is shaped there.
#[test]
fn unmatched_packets_go_direct_or_to_the_default() {
    let mut q = htb("htb class 1:10 rate 8kbit match src 198.18.0.1");
    for i in 0..5 {
        assert_eq!(q.enqueue(from(9, i, 1000), 0), Verdict::Queued);
    }
    for _ in 0..5 {
        assert!(matches!(q.dequeue(0), Dequeue::Packet(_)));
    }
    assert!(q.stats().options.contains("direct_packets_stat 5"));
    let mut q = htb("htb default 10 class 1:10 rate 8kbit");
    for i in 0..3 {
        q.enqueue(from(9, i, 1000), 0);
    }
    // A class sends while it has tokens, even past them: the bucket's 1600 bytes let two go.
    assert!(matches!(q.dequeue(0), Dequeue::Packet(_)));
    assert!(matches!(q.dequeue(0), Dequeue::Packet(_)));
    match q.dequeue(0) {
        Dequeue::NotBefore(t) => assert!(
            t.abs_diff(2 * S / 5) < S / 1000,
            "400 bytes of debt at 1000 B/s: {t}"
        ),
        _ => panic!("shaped"),
    }
}

/// `skb->priority` naming a leaf (1:N) picks it before any match.
#[test]
fn priority_picks_a_leaf() {
    let mut q = htb("htb class 1:10 rate 1Mbit class 1:20 rate 1Mbit match src 198.18.0.1");
    let mut p = from(1, 1, 100);
    p.meta.priority = 0x1_0010;
    q.enqueue(p, 0);
    let c = q.classes();
    assert_eq!((c[0].qlen, c[1].qlen), (1, 0));
}

/// The spec's words come back as given; its mistakes are named.
#[test]
fn words_round_trip_and_errors_name_the_token() {
    let s: QdiscSpec = LAB_TREE.parse().expect("valid");
    let again: QdiscSpec = s.to_string().parse().expect("its own text parses");
    assert_eq!(s, again);
    for (bad, token) in [
        ("htb class 1:10 parent 1:1 rate 1Mbit", "1:1"),
        ("htb class 1:10 rate 1Mbit class 1:10 rate 2Mbit", "1:10"),
        ("htb class 1:10 ceil 1Mbit", "1:10"),
        ("htb class 2:10 rate 1Mbit", "2:10"),
        ("htb class 1:10 rate 1Mbit prio 8", "8"),
        (
            "htb class 1:1 rate 1Mbit match dscp 46 class 1:2 parent 1:1 rate 1Mbit",
            "1:1",
        ),
        ("htb class 1:1 rate 1Mbit match port 80", "port"),
        ("htb default 10", "htb"),
        ("htb class 1:1 rate 1Mbit ciel 2Mbit", "ciel"),
    ] {
        let e = QdiscSpec::parse(bad).expect_err(bad).to_string();
        assert!(e.contains(token), "{bad}: {e}");
    }
    let deep: String = (1..=9)
        .map(|i| {
            let parent = if i > 1 {
                format!(" parent 1:{:x}", i - 1)
            } else {
                String::new()
            };
            format!(" class 1:{i:x}{parent} rate 1Mbit")
        })
        .collect();
    let e = QdiscSpec::parse(&format!("htb{deep}"))
        .expect_err("nine levels")
        .to_string();
    assert!(e.contains("too deep"), "{e}");
}

/// The tc commands that build the tree in a kernel.
#[test]
fn tc_commands_build_the_same_tree() {
    let QdiscSpec::Htb(s) = LAB_TREE.parse().expect("valid") else {
        panic!()
    };
    let c = show::tc_commands(&s, "v0");
    assert_eq!(c[0], "qdisc add dev v0 root handle 1: htb default 11");
    assert_eq!(c[3], "class add dev v0 parent 1:1 classid 1:11 htb rate 7Mbit ceil 10Mbit burst 15360b cburst 3000b prio 2 quantum 1514");
    assert!(c.contains(&"qdisc add dev v0 parent 1:11 handle 11: pfifo limit 50".to_string()));
    let QdiscSpec::Htb(s) = TWO.parse().expect("valid") else {
        panic!()
    };
    let c = show::tc_commands(&s, "d");
    assert_eq!(c.last().map(String::as_str), Some("filter add dev d parent 1: protocol ip prio 2 u32 match ip src 198.18.0.2/32 flowid 1:20"));
}

/// What `drain` takes out is every queued packet, and the tree is empty and usable after.
#[test]
fn drain_takes_everything() {
    let mut q = htb(&format!("htb default 10 {}", &TWO[4..]));
    for i in 0..30 {
        q.enqueue(from((i % 3) as u8, i, 500), 0);
    }
    let mut n = 0;
    q.drain(&mut |_| n += 1);
    assert_eq!((n, q.qlen(), q.backlog()), (30, 0, 0));
    let r = saturate(q.as_mut(), &[1, 2], 2);
    assert!((r[0] - 5e6).abs() < 0.2e6, "{r:?}");
}

/// `release_idle`: a leaf is built on its class's first packet and released after that long
/// empty; its class's counters stay; the idle queue never holds more than one entry a leaf,
/// however often the leaf empties.
#[test]
fn idle_leaves_are_released_and_counted_on() {
    let QdiscSpec::Htb(spec) = "htb release_idle 1s class 1:1 rate 100Mbit \
        class 1:10 parent 1:1 rate 10Mbit match src 198.18.0.1 qdisc fq_codel \
        class 1:20 parent 1:1 rate 10Mbit match src 198.18.0.2 qdisc cake"
        .parse()
        .expect("valid")
    else {
        panic!("htb")
    };
    let mut q = Htb::<Record>::new(&spec, FlowHasher::new([1, 2]), 1);
    assert_eq!(q.live_leaves(), (0, 0), "nothing built before traffic");
    let ms = 1_000_000;
    for i in 0..1000u64 {
        q.enqueue(from(1, i, 500), i * ms);
        assert!(matches!(q.dequeue(i * ms), Dequeue::Packet(_)));
    }
    assert_eq!(
        q.live_leaves(),
        (1, 1),
        "one leaf, emptied a thousand times, one entry"
    );
    q.enqueue(from(2, 5000, 500), 1000 * ms);
    assert!(matches!(q.dequeue(1000 * ms), Dequeue::Packet(_)));
    assert_eq!(q.live_leaves(), (2, 2));
    assert!(matches!(q.dequeue(1999 * ms + ms / 2), Dequeue::Empty));
    assert_eq!(
        q.live_leaves(),
        (1, 1),
        "1:10, empty since 999 ms, released; 1:20, since 1000 ms, not yet"
    );
    assert!(matches!(q.dequeue(2500 * ms), Dequeue::Empty));
    assert_eq!(q.live_leaves(), (0, 0));
    let c = q.classes();
    assert_eq!(
        (c[1].packets, c[2].packets),
        (1000, 1),
        "counters outlive the leaves"
    );
    q.enqueue(from(1, 6000, 500), 3000 * ms);
    assert_eq!(q.live_leaves().0, 1, "built again on the next packet");
    assert_eq!(q.qlen(), 1);
}

/// `tc class change`: a new ceiling taken in place with packets queued, none moved or lost,
/// the new rate in force; another class or parent is not a change in place.
#[test]
fn rates_change_in_place() {
    let mut q = htb(TWO);
    for i in 0..10 {
        q.enqueue(from(1, i, 1000), 0);
    }
    let faster = TWO.replace(
        "rate 2Mbit ceil 10Mbit match src 198.18.0.1",
        "rate 2Mbit ceil 4Mbit match src 198.18.0.1",
    );
    assert_eq!(q.change(&faster.parse().expect("valid")), Some(1));
    assert_eq!((q.qlen(), q.backlog()), (10, 10_000));
    assert!(q.take_dropped().is_none());
    let r = saturate(q.as_mut(), &[1], 5);
    assert!((r[0] - 4e6).abs() < 0.05e6, "the new ceiling: {r:?}");
    let other = TWO.replace("class 1:20 parent 1:1", "class 1:20");
    assert_eq!(q.change(&other.parse().expect("valid")), None);
    assert_eq!(q.change(&"fq_codel".parse().expect("valid")), None);
}

/// A class run at other rates (a worker's share of a split tree) sends at them, with its
/// packets kept and the spec that statistics show unchanged; the leaf's counters show its
/// backlog.
#[test]
fn a_class_runs_at_rates_set_from_outside() {
    let mut q = htb(TWO);
    for i in 0..10 {
        q.enqueue(from(1, i, 1000), 0);
    }
    let mut leaves = Vec::new();
    q.leaf_counters(&mut leaves);
    assert_eq!(
        leaves
            .iter()
            .map(|l| (l.minor, l.backlog))
            .collect::<Vec<_>>(),
        [(0x10, 10_000), (0x20, 0)]
    );
    assert!(q.set_class_rates(0x1, 6_000_000, 6_000_000));
    assert!(q.set_class_rates(0x10, 1_000_000, 3_000_000));
    assert!(!q.set_class_rates(0x99, 1_000_000, 1_000_000));
    assert_eq!((q.qlen(), q.backlog()), (10, 10_000));
    let r = saturate(q.as_mut(), &[1], 5);
    assert!(
        (r[0] - 3e6).abs() < 0.05e6,
        "the class's new ceiling: {r:?}"
    );
    let r = saturate(q.as_mut(), &[1, 2], 5);
    assert!(
        (r[0] + r[1] - 6e6).abs() < 0.06e6,
        "the root's new rate: {r:?}"
    );
    assert!(
        q.classes()[0].options.contains("rate 10Mbit ceil 10Mbit"),
        "{:?}",
        q.classes()[0]
    );
}

mod reshape;
