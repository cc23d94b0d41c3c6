//! HTB's plans changed in place (`reshape`, as LibreQoS re-applies a network.json): every
//! packet kept, moved or counted; a changed leaf discipline takes the queued packets.

use super::*;

/// A node (1:2) with two circuits and a default class beside it.
const SITE: &str = "htb default 30 class 1:1 rate 10Mbit \
    class 1:2 parent 1:1 rate 5Mbit ceil 10Mbit \
    class 1:10 parent 1:2 rate 2Mbit ceil 4Mbit match src 198.18.0.1 \
    class 1:20 parent 1:2 rate 2Mbit ceil 4Mbit match src 198.18.0.2 \
    class 1:30 parent 1:1 rate 1Mbit ceil 10Mbit";

/// The site after a plan change: 1:20 removed, 1:40 added under the node, the default class
/// moved under the node, 1:10's ceiling lowered.
const SITE_AFTER: &str = "htb default 30 class 1:1 rate 10Mbit \
    class 1:2 parent 1:1 rate 5Mbit ceil 10Mbit \
    class 1:10 parent 1:2 rate 2Mbit ceil 3Mbit match src 198.18.0.1 \
    class 1:30 parent 1:2 rate 1Mbit ceil 10Mbit \
    class 1:40 parent 1:2 rate 2Mbit ceil 4Mbit match src 198.18.0.4";

/// Send whatever HTB lets go until it is empty (at most `secs`); the packets by source host.
fn empty_out(q: &mut dyn Qdisc<Record>, from_ns: u64, secs: u64) -> [u64; 256] {
    let mut by_host = [0u64; 256];
    let mut now = from_ns;
    while q.qlen() > 0 && now < from_ns + secs * S {
        match q.dequeue(now) {
            Dequeue::Packet(p) => {
                let h = p.meta().flow.src().map_or(0, |a| match a {
                    std::net::IpAddr::V4(v) => v.octets()[3],
                    std::net::IpAddr::V6(_) => 0,
                });
                by_host[h as usize] += 1;
            }
            Dequeue::NotBefore(t) => now = t,
            Dequeue::Empty => break,
        }
    }
    by_host
}

/// A plan of another shape taken in place: the kept classes keep their packets, buckets and
/// counters; the removed circuit's packets leave through its parent, counted in a draining
/// class no new packet is given to; the next reshape, once it is empty, removes it.
#[test]
fn a_new_shape_is_taken_with_every_packet_kept() {
    let mut q = htb(SITE);
    for i in 0..10 {
        q.enqueue(from(1, i, 1000), 0);
        q.enqueue(from(2, 100 + i, 1000), 0);
    }
    let mut sent = 0;
    while let Dequeue::Packet(_) = q.dequeue(0) {
        sent += 1;
    }
    assert!(sent > 0 && sent < 20, "the buckets ran out: {sent}");
    let before = q.class(0x10).expect("1:10");
    let queued = (q.qlen(), q.backlog());
    let r = q.reshape(&SITE_AFTER.parse().expect("valid")).expect("htb");
    let host2 = 10 - q.class(0x20).map_or(0, |c| c.packets);
    assert_eq!(
        (r.kept, r.added, r.removed, r.moved, r.rerated, r.draining),
        (4, 1, 1, 1, 1, 1),
        "{r}"
    );
    assert_eq!((r.draining_packets, r.requeued, r.refused), (host2, 0, 0));
    assert_eq!((q.qlen(), q.backlog()), queued, "nothing moved or lost");
    assert!(q.take_dropped().is_none());
    let after = q.class(0x10).expect("1:10");
    assert_eq!(
        (after.packets, after.tokens, after.ctokens, after.qlen),
        (before.packets, before.tokens, before.ctokens, before.qlen),
        "the kept class's counters and buckets"
    );
    // Host 2 has no circuit now: its new packet goes to the default class, not the draining one.
    q.enqueue(from(2, 200, 1000), 0);
    assert_eq!(q.class(0x30).expect("default").qlen, 1);
    let out = empty_out(q.as_mut(), 0, 10);
    assert_eq!(q.qlen(), 0);
    assert_eq!((out[1] + out[2]) as usize + sent, 21, "{:?}", &out[..3]);
    assert_eq!(q.class(0x20).expect("draining").packets, 10);
    let r = q.reshape(&SITE_AFTER.parse().expect("valid")).expect("htb");
    assert_eq!((r.removed, r.draining, r.added), (1, 0, 0), "{r}");
    assert!(q.class(0x20).is_none());
}

/// A kept leaf whose discipline words changed gets the new discipline, its packets moved
/// into it in order; what the new one refuses is dropped and counted.
#[test]
fn a_changed_leaf_discipline_takes_the_packets() {
    let mut q = htb(SITE);
    for i in 0..10 {
        q.enqueue(from(1, i, 1000), 0);
    }
    let small = SITE.replace(
        "match src 198.18.0.1",
        "match src 198.18.0.1 qdisc pfifo limit 3",
    );
    let r = q.reshape(&small.parse().expect("valid")).expect("htb");
    assert_eq!((r.requeued, r.refused, r.kept), (10, 7, 5), "{r}");
    assert_eq!(q.qlen(), 3);
    let mut dropped = 0;
    while q.take_dropped().is_some() {
        dropped += 1;
    }
    assert_eq!(dropped, 7);
    assert_eq!(q.stats().drops, 7);
}

/// Reshapes among three plans (a circuit removed and added back while it drains, the node
/// removed with its circuits put under the root class, leaf disciplines changed) in the middle
/// of random traffic: every packet is sent, dropped or queued, exactly once.
#[test]
fn reshapes_under_traffic_lose_nothing() {
    let flat = "htb default 30 class 1:1 rate 10Mbit \
        class 1:10 parent 1:1 rate 2Mbit ceil 4Mbit match src 198.18.0.1 qdisc pfifo limit 5 \
        class 1:20 parent 1:1 rate 2Mbit ceil 4Mbit match src 198.18.0.2 qdisc fq_codel \
        class 1:30 parent 1:1 rate 1Mbit ceil 10Mbit";
    let plans: Vec<QdiscSpec> = [SITE, SITE_AFTER, flat]
        .iter()
        .map(|w| w.parse().expect("valid"))
        .collect();
    let mut q = htb(SITE);
    let mut rng = crate::rng::SplitMix64::new(7);
    let (mut now, mut sent, mut dropped, mut id) = (0u64, 0u64, 0u64, 0u64);
    let mut reshapes = 0;
    for _ in 0..20_000 {
        match rng.next_u32() % 100 {
            0 => {
                let r = q.reshape(&plans[rng.next_u32() as usize % 3]).expect("htb");
                reshapes += 1;
                assert!(r.refused <= r.requeued, "{r}");
            }
            1..=49 => {
                id += 1;
                let host = 1 + (rng.next_u32() % 4) as u8;
                q.enqueue(from(host, id, 200 + rng.next_u32() % 1300), now);
            }
            _ => {
                now += u64::from(rng.next_u32() % 2_000_000);
                if let Dequeue::Packet(_) = q.dequeue(now) {
                    sent += 1;
                }
            }
        }
        while q.take_dropped().is_some() {
            dropped += 1;
        }
        assert_eq!(
            id,
            sent + dropped + q.qlen() as u64,
            "after {reshapes} reshapes"
        );
    }
    assert!(
        reshapes > 150 && sent > 5000,
        "{reshapes} reshapes, {sent} sent"
    );
    assert_eq!(q.stats().drops, dropped);
    let out = empty_out(q.as_mut(), now, 60);
    assert_eq!(
        q.qlen(),
        0,
        "everything leaves: {}",
        out.iter().sum::<u64>()
    );
}

/// The default class removed while `default` still names it: its packets drain under another
/// minor, and a packet no class takes goes straight out (the direct queue), not into them.
#[test]
fn a_removed_default_class_drains_under_another_minor() {
    let before = "htb default 20 class 1:1 rate 10Mbit \
        class 1:10 parent 1:1 rate 2Mbit ceil 4Mbit match src 198.18.0.1 \
        class 1:20 parent 1:1 rate 2Mbit ceil 4Mbit";
    let mut q = htb(before);
    for i in 0..5 {
        q.enqueue(from(2, i, 1000), 0);
    }
    let after = "htb default 20 class 1:1 rate 10Mbit \
        class 1:10 parent 1:1 rate 2Mbit ceil 4Mbit match src 198.18.0.1";
    let r = q.reshape(&after.parse().expect("valid")).expect("htb");
    assert_eq!((r.draining, r.draining_packets), (1, 5), "{r}");
    assert!(
        q.class(0x20).is_none(),
        "the draining class took another minor"
    );
    assert_eq!(q.class(0xfffe).expect("draining").qlen, 5);
    q.enqueue(from(2, 9, 1000), 0);
    assert_eq!(q.class(0xfffe).expect("draining").qlen, 5);
    match q.dequeue(0) {
        Dequeue::Packet(p) => assert_eq!(p.meta().len, 1000),
        _ => panic!("the direct queue sends at once"),
    }
    assert_eq!((q.qlen(), q.class(0xfffe).expect("draining").qlen), (5, 5));
}

/// A class run at a floor of 25 kbit/s for a moment (a worker's part while its leaf looked
/// idle) owes what it sent then in bytes, not in time: raised to 8 Mbit/s, its next packets
/// leave within milliseconds. In time (as `tc class change` keeps the tokens) each 1500-byte
/// packet charged at 25 kbit/s would hold it 0.48 s.
#[test]
fn a_class_raised_from_a_floor_owes_bytes_not_seconds() {
    let mut q = htb(TWO);
    assert!(q.set_class_rates(0x1, 25_000, 25_000));
    assert!(q.set_class_rates(0x10, 25_000, 25_000));
    for i in 0..10 {
        q.enqueue(from(1, i, 1500), 0);
    }
    let (mut now, mut sent) = (0, 0);
    while now < 10_000_000 {
        match q.dequeue(now) {
            Dequeue::Packet(_) => sent += 1,
            Dequeue::NotBefore(t) => now = t,
            Dequeue::Empty => break,
        }
    }
    assert!(sent < 10, "the floor held the class back: {sent} sent");
    let at = 10_000_000;
    assert!(q.set_class_rates(0x1, 8_000_000, 8_000_000));
    assert!(q.set_class_rates(0x10, 8_000_000, 8_000_000));
    let mut now = at;
    let mut left = Vec::new();
    while q.qlen() > 0 && now < at + S {
        match q.dequeue(now) {
            Dequeue::Packet(_) => left.push(now - at),
            Dequeue::NotBefore(t) => now = t,
            Dequeue::Empty => break,
        }
    }
    assert_eq!(
        left.len(),
        10 - sent,
        "every packet left within a second: {left:?}"
    );
    // 1500 bytes at 8 Mbit/s is 1.5 ms: the debt of the packets charged at the floor is a
    // packet's time at the new rate, not 0.48 s each.
    let last = left.last().copied().unwrap_or(0);
    assert!(
        last < 20_000_000,
        "the last packet left {last} ns after the change: {left:?}"
    );
}
