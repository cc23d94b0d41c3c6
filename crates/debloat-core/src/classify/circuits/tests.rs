//! LibreQoS's files read, linted and built into trees; the stage's longest match; the shares a
//! circuit tree gives under load.

use super::*;
use crate::packet::Record;
use crate::qdisc::{Dequeue, Qdisc};
use crate::testutil::pkt_in;
use crate::{FlowHasher, QdiscSpec};

const NETWORK: &str = r#"{
  "Site_1": {
    "downloadBandwidthMbps": 1000,
    "uploadBandwidthMbps": 1000,
    "children": {
      "AP_A": { "downloadBandwidthMbps": 500, "uploadBandwidthMbps": 500 },
      "Group": {
        "virtual": true,
        "downloadBandwidthMbps": 500,
        "uploadBandwidthMbps": 500,
        "children": {
          "AP_9": { "downloadBandwidthMbps": 200, "uploadBandwidthMbps": 100 }
        }
      }
    }
  }
}"#;

const HEADER: &str = "Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment\n";

fn devices(rows: &str) -> String {
    format!("{HEADER}{rows}")
}

fn opts() -> TreeOptions {
    TreeOptions {
        down_bps: 1_000_000_000,
        up_bps: 1_000_000_000,
        release_idle: None,
    }
}

fn plan(rows: &str) -> (Plan, Option<(CircuitTree, Circuits)>) {
    load(
        ("network.json", NETWORK),
        ("ShapedDevices.csv", &devices(rows)),
        &opts(),
    )
}

/// LibreQoS's own example rows: several addresses per device (quoted), several devices per
/// circuit, IPv6 prefixes, a circuit straight under a site; a virtual node's AP shaped under
/// the site.
#[test]
fn the_documented_example_reads_clean() {
    let rows = "1,\"968 Circle St., Gurnee, IL 60031\",1,Device 1,AP_A,,\"100.64.0.1, 100.64.0.14\",fdd7:b724:0:100::/56,1,1,155,20,\n\
                2794,\"6 Littleton Drive\",5,Device 5,AP_9,,100.64.0.5,fdd7:b724:0:500::/56,1,1,105,18,\n\
                2794,\"6 Littleton Drive\",6,Device 6,AP_9,,100.64.0.6,fdd7:b724:0:600::/56,1,1,105,18,\n\
                9,\"525 Birchpond St.\",11,Device 11,Site_1,,100.64.0.11,,1,1,105,18,\n";
    let (p, built) = plan(rows);
    assert!(p.findings.is_empty(), "{:?}", p.findings);
    assert_eq!(p.circuits.len(), 3);
    assert_eq!(p.circuits[1].devices.len(), 2);
    let (t, stage) = built.expect("built");
    // 1:1 link, 1:2 default, 1:3 Site_1, its circuit 1:4 (9), AP_A 1:5 with circuit 1:6,
    // AP_9 (under Site_1: its group is virtual) 1:7 with circuit 1:8.
    let ids: Vec<(u16, Option<u16>)> = t.down.classes.iter().map(|c| (c.id, c.parent)).collect();
    assert_eq!(
        ids,
        vec![
            (1, None),
            (2, Some(1)),
            (3, Some(1)),
            (4, Some(3)),
            (5, Some(3)),
            (6, Some(5)),
            (7, Some(3)),
            (8, Some(7))
        ]
    );
    assert_eq!(t.minor, vec![6, 8, 4]);
    let site = &t.down.classes[2];
    assert_eq!(
        (site.rate_bps, site.ceil_bps),
        (950_000_000, 1_000_000_000),
        "95 % of the ceiling"
    );
    let c = &t.up.classes[7];
    assert_eq!((c.rate_bps, c.ceil_bps), (1_000_000, 18_000_000));
    assert!(t.down.check().is_ok() && t.up.check().is_ok());
    assert_eq!(stage.lookup("100.64.0.14".parse().expect("ip")), Some(6));
    assert_eq!(
        stage.lookup("fdd7:b724:0:6ff::1".parse().expect("ip")),
        Some(8)
    );
    assert_eq!(stage.lookup("100.64.0.99".parse().expect("ip")), None);
}

/// Built again from changed files with the running tree's minors: a circuit or node still
/// there keeps its minor; a new one gets a minor the running tree did not use (so a removed
/// circuit's, whose packets may be draining, is not handed on); the running HTB takes the new
/// tree in place with the kept circuit's queue untouched.
#[test]
fn a_rebuild_keeps_the_minors() {
    let first = "1,a,1,d,AP_A,,100.64.0.1,,1,1,25,5,\n\
                 2,b,2,d,AP_A,,100.64.0.2,,1,1,25,5,\n\
                 3,c,3,d,AP_9,,100.64.0.3,,1,1,25,5,\n";
    let (_, built) = plan(first);
    let (t0, s0) = built.expect("built");
    // Circuit 2 gone, 4 new under AP_A, circuit 3 moved to the site.
    let second = "1,a,1,d,AP_A,,100.64.0.1,,1,1,25,5,\n\
                  4,d,4,d,AP_A,,100.64.0.4,,1,1,25,5,\n\
                  3,c,3,d,Site_1,,100.64.0.3,,1,1,25,5,\n";
    let (_, built) = load_keeping(
        ("network.json", NETWORK),
        ("ShapedDevices.csv", &devices(second)),
        &opts(),
        Some(&t0.minors),
    );
    let (t1, s1) = built.expect("built");
    for id in ["1", "3"] {
        assert_eq!(
            t1.minors.circuits[id], t0.minors.circuits[id],
            "circuit {id}"
        );
    }
    assert_eq!(t1.minors.nodes, t0.minors.nodes);
    let new = t1.minors.circuits["4"];
    assert!(
        !t0.down.classes.iter().any(|c| c.id == new),
        "1:{new:x} was in use"
    );
    let a = "100.64.0.1".parse().expect("ip");
    assert_eq!(s1.lookup(a), s0.lookup(a));
    assert_eq!(s1.lookup("100.64.0.2".parse().expect("ip")), None);
    assert!(t1.down.check().is_ok() && t1.up.check().is_ok());
    // The running tree takes it in place.
    let mut q = QdiscSpec::Htb(t0.down.clone()).build::<Record>(FlowHasher::new([1, 2]), 1);
    let mut p = pkt_in(1, 1000, crate::testutil::udp_flow(9, 1, 1));
    p.meta.priority = 0x1_0000 | u32::from(t0.minors.circuits["1"]);
    q.enqueue(p, 0);
    let r = q.reshape(&QdiscSpec::Htb(t1.down.clone())).expect("htb");
    assert_eq!(
        (r.added, r.removed, r.moved, r.draining),
        (1, 1, 1, 0),
        "{r}"
    );
    assert_eq!(q.qlen(), 1);
}

/// Every kind of mistake, each with its line and reason; errors refuse the files.
#[test]
fn lint_names_the_line_and_the_reason() {
    let rows = "1,a,1,d,AP_A,,100.64.0.1,,1,1,25,5,\n\
                2,b,2,d,AP_Z,,100.64.0.2,,1,1,25,5,\n\
                3,c,3,d,AP_A,,100.64.0.1,,1,1,25,5,\n\
                4,d,4,d,AP_A,,100.64.0.300,,1,1,25,5,\n\
                5,e,5,d,AP_A,,100.64.0.5,,,1,25,5,\n\
                6,f,6,d,AP_A,,100.64.0.6,,30,1,25,5,\n\
                ,g,7,d,AP_A,,100.64.0.7,,1,1,25,5,\n\
                8,h,8,d, AP_A ,,100.64.0.8,,1,1,25,5,\n\
                9,i,9,d,AP_A,,,,1,1,25,5,\n\
                10,j,10,d,AP_A,,100.64.1.0/24,,1,1,25,5,\n\
                11,k,11,d,AP_A,,100.64.1.7,,1,1,25,5,\n\
                12,l,12,d,,,100.64.2.1,,1,1,25,5,\n\
                1,a,13,d,AP_9,,100.64.3.1,,1,1,25,5,\n\
                14,n,14,d,AP_A,,100.64.4.1\n";
    let (p, built) = plan(rows);
    assert!(built.is_none(), "errors refuse the files");
    let has = |line: usize, error: bool, text: &str| {
        p.findings
            .iter()
            .any(|f| f.line == line && f.error == error && f.text.contains(text))
    };
    assert!(
        has(3, true, "Parent Node \"AP_Z\" is not a node"),
        "{:#?}",
        p.findings
    );
    assert!(
        has(4, true, "100.64.0.1/32 is also on line 2"),
        "{:#?}",
        p.findings
    );
    assert!(
        has(5, true, "\"100.64.0.300\" is not an IPv4"),
        "{:#?}",
        p.findings
    );
    assert!(
        has(6, true, "Download Min Mbps is empty"),
        "{:#?}",
        p.findings
    );
    assert!(
        has(7, true, "a minimum above its maximum"),
        "{:#?}",
        p.findings
    );
    assert!(has(8, true, "Circuit ID is empty"), "{:#?}", p.findings);
    assert!(
        has(9, false, "\" AP_A \" has spaces around it"),
        "{:#?}",
        p.findings
    );
    assert!(has(10, true, "no IPv4, IPv6 or MAC"), "{:#?}", p.findings);
    assert!(
        has(14, true, "under another parent on line 2"),
        "{:#?}",
        p.findings
    );
    assert!(has(15, true, "7 cells; a row has 13"), "{:#?}", p.findings);
    assert_eq!(
        p.findings[0].to_string(),
        "ShapedDevices.csv:3: error: Parent Node \"AP_Z\" is not a node of network.json"
    );
    // The warnings that need both files: only when the rows themselves are sound.
    let rows = "10,j,10,d,AP_A,,100.64.1.0/24,,1,1,25,5,\n\
                11,k,11,d,AP_A,,100.64.1.7,,1,1,900,5,\n\
                12,l,12,d,,,100.64.2.1,,1,1,25,5,\n";
    let (p, built) = plan(rows);
    assert!(built.is_some(), "{:#?}", p.findings);
    let has = |line: usize, text: &str| {
        p.findings
            .iter()
            .any(|f| f.line == line && !f.error && f.text.contains(text))
    };
    assert!(
        has(3, "100.64.1.7/32 lies inside 100.64.1.0/24 (line 2)"),
        "{:#?}",
        p.findings
    );
    assert!(has(3, "faster than its node AP_A"), "{:#?}", p.findings);
    assert!(has(4, "no Parent Node"), "{:#?}", p.findings);
    let (p, _) = load(
        ("network.json", "{\"A\": {\"downloadBandwidthMbps\": 10}"),
        ("d.csv", HEADER),
        &opts(),
    );
    assert!(
        p.findings
            .iter()
            .any(|f| f.error && f.text.contains("not valid JSON")),
        "{:#?}",
        p.findings
    );
}

/// The longest prefix wins; going up the source is the client, going down the destination;
/// without an address match, the frame's MAC.
#[test]
fn the_stage_picks_by_longest_prefix_then_mac() {
    let rows = "10,j,10,d,AP_A,,100.64.1.0/24,,1,1,25,5,\n\
                11,k,11,d,AP_A,,100.64.1.7,,1,1,25,5,\n\
                12,l,12,d,AP_A,02:00:00:00:00:0c,,,1,1,25,5,\n";
    let (_, built) = plan(rows);
    let (t, mut s) = built.expect("built");
    let (wide, narrow, by_mac) = (t.minor[0], t.minor[1], t.minor[2]);
    let flow = |src: &str, dst: &str| {
        crate::flow::FlowKey::ip(src.parse().expect("ip"), dst.parse().expect("ip"), 1, 2, 6)
    };
    let mut m = crate::packet::PacketMeta::new(100, flow("100.64.1.7", "198.18.9.9"));
    assert_eq!(s.classify(&mut m, Direction::Up, 0), Admit::Pass);
    assert_eq!(m.priority, 0x1_0000 | u32::from(narrow));
    let mut m = crate::packet::PacketMeta::new(100, flow("198.18.9.9", "100.64.1.8"));
    let _ = s.classify(&mut m, Direction::Down, 0);
    assert_eq!(m.priority, 0x1_0000 | u32::from(wide));
    let mut frame = vec![0u8; 60];
    frame[..6].copy_from_slice(&[2, 0, 0, 0, 0, 0x0c]);
    let mut m = crate::packet::PacketMeta::new(100, flow("198.18.9.9", "10.0.0.1"));
    s.snoop(&frame, LinkType::Ethernet, &m.clone(), 0);
    let _ = s.classify(&mut m, Direction::Down, 0);
    assert_eq!(m.priority, 0x1_0000 | u32::from(by_mac));
    let mut m = crate::packet::PacketMeta::new(100, flow("198.18.9.9", "10.0.0.1"));
    let _ = s.classify(&mut m, Direction::Down, 0);
    assert_eq!(m.priority, 0, "no frame, no address: HTB's default class");
    assert_eq!(
        s.counts(),
        CircuitCounts {
            by_address: 2,
            by_mac: 1,
            unknown: 1
        }
    );
}

/// `n` circuits under one access point, circuit i at 100.64.0.(i + 1).
fn ap_plan(ap_mbps: u32, circuits: &[(u32, u32)]) -> (CircuitTree, Circuits) {
    let net = format!(
        "{{\"AP\": {{\"downloadBandwidthMbps\": {ap_mbps}, \"uploadBandwidthMbps\": {ap_mbps}}}}}"
    );
    let rows: String = circuits
        .iter()
        .enumerate()
        .map(|(i, (min, max))| {
            format!(
                "{i},c{i},{i},d,AP,,100.64.0.{},,{min},{min},{max},{max},,none\n",
                i + 1
            )
        })
        .collect();
    let header = HEADER.trim_end().to_string() + ",sqm\n";
    let o = TreeOptions {
        down_bps: 1_000_000_000,
        up_bps: 1_000_000_000,
        release_idle: None,
    };
    let (p, built) = load(
        ("network.json", &net),
        ("ShapedDevices.csv", &format!("{header}{rows}")),
        &o,
    );
    built.unwrap_or_else(|| panic!("{:#?}", p.findings))
}

/// Keep the listed circuits backlogged for `secs` through the download tree on an infinitely
/// fast link; each circuit's rate, bit/s.
fn saturate(t: &CircuitTree, s: &mut Circuits, active: &[usize], secs: u64) -> Vec<f64> {
    let mut q = QdiscSpec::Htb(t.down.clone()).build::<Record>(FlowHasher::new([3, 4]), 1);
    let mut queued = vec![0u32; active.len()];
    let mut sent = vec![0u64; active.len()];
    let (mut now, mut id) = (0u64, 0u64);
    while now < secs * 1_000_000_000 {
        for (k, &i) in active.iter().enumerate() {
            while queued[k] < 8 {
                let dst = format!("100.64.0.{}", i + 1);
                let mut p = pkt_in(
                    id,
                    1500,
                    crate::flow::FlowKey::ip(
                        "198.18.0.1".parse().expect("ip"),
                        dst.parse().expect("ip"),
                        443,
                        1000,
                        6,
                    ),
                );
                let _ = s.classify(&mut p.meta, Direction::Down, now);
                id += 1;
                queued[k] += 1;
                q.enqueue(p, now);
            }
        }
        match q.dequeue(now) {
            Dequeue::Packet(p) => {
                let last = match p.meta.flow.dst() {
                    Some(std::net::IpAddr::V4(a)) => a.octets()[3] as usize - 1,
                    _ => usize::MAX,
                };
                let k = active
                    .iter()
                    .position(|&i| i == last)
                    .expect("an active circuit");
                queued[k] -= 1;
                sent[k] += u64::from(p.meta.len);
            }
            Dequeue::NotBefore(t) => now = t,
            Dequeue::Empty => panic!("backlogged, yet empty"),
        }
    }
    sent.iter().map(|&b| b as f64 * 8.0 / secs as f64).collect()
}

/// The issue's shares at the discipline: 40 circuits of 25 Mbit/s under a 100 Mbit/s AP, all
/// backlogged: each within 5 % of 2.5 Mbit/s; one alone gets its 25 and no more; one with a
/// 10 Mbit/s minimum (the others' 1) gets at least 10 when the AP is congested.
#[test]
fn forty_circuits_share_an_access_point() {
    let all: Vec<usize> = (0..40).collect();
    let (t, mut s) = ap_plan(100, &[(1, 25); 40]);
    let r = saturate(&t, &mut s, &all, 4);
    for (i, x) in r.iter().enumerate() {
        assert!(
            (x - 2.5e6).abs() <= 0.05 * 2.5e6,
            "circuit {i}: {x} bit/s of 2.5 Mbit/s"
        );
    }
    let r = saturate(&t, &mut s, &[7], 4);
    assert!((r[0] - 25e6).abs() <= 0.01 * 25e6, "alone: {} bit/s", r[0]);
    let mut rates = vec![(1, 25); 40];
    rates[3] = (10, 25);
    let (t, mut s) = ap_plan(100, &rates);
    let r = saturate(&t, &mut s, &all, 4);
    assert!(r[3] >= 10e6, "the 10-Mbit/s minimum got {} bit/s", r[3]);
}
