//! A LibreQoS tree changed while it holds traffic: new rates for 1,000 of 10,000 circuits are
//! taken in place (`tc class change`), within the 50 ms, with every queued packet
//! still queued and nothing dropped; a change of structure is refused by `change` and taken
//! by `reshape`: 100 circuits removed (their packets draining through their access points),
//! 100 added and an access point moved to another site, every packet kept and then sent.

use debloat_core::classify::circuits::{self, TreeOptions};
use debloat_core::classify::Classify;
use debloat_core::flow::FlowKey;
use debloat_core::packet::{PacketMeta, Record};
use debloat_core::{Direction, FlowHasher, QdiscSpec};
use std::time::Instant;

fn files(circuits: u32, bump: u32) -> (String, String) {
    shaped(0..circuits, bump, false)
}

/// Circuits `ids` (each under AP_{id/10 % 50}_{id % 10}); the first `bump` at 150 Mbit/s;
/// `moved`: AP_0_0 under Site_1 rather than Site_0.
fn shaped(ids: std::ops::Range<u32>, bump: u32, moved: bool) -> (String, String) {
    let mut net = String::from("{");
    for s in 0..50 {
        let mut aps: Vec<(u32, u32)> = (0..10).map(|a| (s, a)).collect();
        match (moved, s) {
            (true, 0) => aps.retain(|&a| a != (0, 0)),
            (true, 1) => aps.push((0, 0)),
            _ => {}
        }
        let kids: Vec<String> = aps
            .iter()
            .map(|(s, a)| format!("\"AP_{s}_{a}\": {{\"downloadBandwidthMbps\": 1000, \"uploadBandwidthMbps\": 500}}"))
            .collect();
        let sep = if s == 0 { "" } else { "," };
        net.push_str(&format!("{sep}\"Site_{s}\": {{\"downloadBandwidthMbps\": 10000, \"uploadBandwidthMbps\": 5000, \"children\": {{{}}}}}", kids.join(",")));
    }
    net.push('}');
    let mut csv = String::from("Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment\n");
    for i in ids {
        let down = if i < bump { 150 } else { 100 };
        csv.push_str(&format!(
            "{i},c,{i},d,AP_{}_{},,100.64.{}.{},,1,1,{down},20,\n",
            (i / 10) % 50,
            i % 10,
            i >> 8,
            i & 255
        ));
    }
    (net, csv)
}

#[test]
#[allow(clippy::disallowed_methods)] // the figure is the change's wall-clock time
fn rates_of_a_thousand_circuits_change_in_place_with_traffic_queued() {
    let o = TreeOptions {
        down_bps: 10_000_000_000,
        up_bps: 5_000_000_000,
        release_idle: Some(10_000_000_000),
    };
    let (net, csv) = files(10_000, 0);
    let (p, built) = circuits::load(("network.json", &net), ("ShapedDevices.csv", &csv), &o);
    let (t, mut stage) = built.unwrap_or_else(|| panic!("{:?}", p.findings));
    let mut q = QdiscSpec::Htb(t.down.clone()).build::<Record>(FlowHasher::new([5, 6]), 1);
    // 2,000 circuits with packets queued (three each).
    for i in 0..6000u64 {
        let c = (i % 2000) as u32;
        let dst = format!("100.64.{}.{}", c >> 8, c & 255);
        let mut m = PacketMeta::new(
            1200,
            FlowKey::ip(
                "198.18.0.1".parse().expect("ip"),
                dst.parse().expect("ip"),
                443,
                1000,
                6,
            ),
        );
        let _ = stage.classify(&mut m, Direction::Down, 0);
        q.enqueue(Record::new(i, m), 0);
    }
    while q.take_dropped().is_some() {}
    let (qlen, backlog) = (q.qlen(), q.backlog());
    assert_eq!(qlen, 6000);
    let (net, csv) = files(10_000, 1000);
    let (p, built) = circuits::load(("network.json", &net), ("ShapedDevices.csv", &csv), &o);
    let (t2, _) = built.unwrap_or_else(|| panic!("{:?}", p.findings));
    let t0 = Instant::now();
    let changed = q.change(&QdiscSpec::Htb(t2.down.clone()));
    let took = t0.elapsed();
    assert_eq!(
        changed,
        Some(1000),
        "exactly the circuits whose rates changed"
    );
    assert!(
        took.as_millis() <= 50,
        "applied in {took:?}: the issue asks for 50 ms at most"
    );
    assert!(q.take_dropped().is_none(), "nothing dropped by the change");
    assert_eq!(
        (q.qlen(), q.backlog()),
        (qlen, backlog),
        "every queued packet still queued"
    );
    let c = q.classes();
    let first = c
        .iter()
        .find(|k| k.classid == format!("1:{:x}", t2.minor[0]))
        .expect("circuit 0");
    assert!(first.options.contains("ceil 150Mbit"), "{}", first.options);
    // A circuit added: not a change in place.
    let (net, csv) = files(10_001, 1000);
    let (_, built) = circuits::load(("network.json", &net), ("ShapedDevices.csv", &csv), &o);
    let (t3, _) = built.expect("built");
    assert_eq!(q.change(&QdiscSpec::Htb(t3.down)), None);
    println!("1,000 of 10,000 circuits' rates changed in {took:?}");
}

/// 2,000 of 10,000 circuits hold packets (three each, by the stage's classes).
fn loaded(stage: &mut circuits::Circuits, q: &mut dyn debloat_core::Qdisc<Record>) {
    for i in 0..6000u64 {
        let c = (i % 2000) as u32;
        let dst = format!("100.64.{}.{}", c >> 8, c & 255);
        let flow = FlowKey::ip(
            "198.18.0.1".parse().expect("ip"),
            dst.parse().expect("ip"),
            443,
            1000,
            6,
        );
        let mut m = PacketMeta::new(1200, flow);
        let _ = stage.classify(&mut m, Direction::Down, 0);
        q.enqueue(Record::new(i, m), 0);
    }
}

#[test]
#[allow(clippy::disallowed_methods)] // the change's wall-clock time is printed, not asserted
fn a_new_shape_of_ten_thousand_circuits_is_taken_in_place() {
    let o = TreeOptions {
        down_bps: 10_000_000_000,
        up_bps: 5_000_000_000,
        release_idle: Some(10_000_000_000),
    };
    let (net, csv) = shaped(0..10_000, 0, false);
    let (p, built) = circuits::load(("network.json", &net), ("ShapedDevices.csv", &csv), &o);
    let (t, mut stage) = built.unwrap_or_else(|| panic!("{:?}", p.findings));
    let mut q = QdiscSpec::Htb(t.down.clone()).build::<Record>(FlowHasher::new([5, 6]), 1);
    loaded(&mut stage, q.as_mut());
    let (qlen, backlog) = (q.qlen(), q.backlog());
    // Circuits 0–99 gone (they hold 300 packets), 10,000–10,099 new, AP_0_0 to Site_1.
    let (net, csv) = shaped(100..10_100, 0, true);
    let (p, built) = circuits::load_keeping(
        ("network.json", &net),
        ("ShapedDevices.csv", &csv),
        &o,
        Some(&t.minors),
    );
    let (t2, _) = built.unwrap_or_else(|| panic!("{:?}", p.findings));
    assert_eq!(t2.minors.circuits["500"], t.minors.circuits["500"]);
    let new = QdiscSpec::Htb(t2.down.clone());
    assert_eq!(q.change(&new), None, "not a change of rates only");
    let t0 = Instant::now();
    let r = q.reshape(&new).expect("htb");
    let took = t0.elapsed();
    println!("10,000 circuits reshaped in {took:?}: {r}");
    assert_eq!((r.added, r.removed, r.moved), (100, 100, 1), "{r}");
    assert_eq!((r.draining, r.draining_packets), (100, 300), "{r}");
    assert_eq!((r.requeued, r.refused), (0, 0));
    assert!(q.take_dropped().is_none(), "nothing dropped by the change");
    assert_eq!((q.qlen(), q.backlog()), (qlen, backlog));
    let mut sent = 0;
    let mut now = 0;
    while q.qlen() > 0 && now < 10_000_000_000 {
        match q.dequeue(now) {
            debloat_core::qdisc::Dequeue::Packet(_) => sent += 1,
            debloat_core::qdisc::Dequeue::NotBefore(t) => now = t,
            debloat_core::qdisc::Dequeue::Empty => break,
        }
    }
    assert_eq!((sent, q.take_dropped().is_none()), (6000, true));
}
