//! LibreQoS's circuits in the simulator, over real (simulated) TCP: 40 circuits of 25 Mbit/s
//! under an AP of 100 Mbit/s share it fairly with low latency; a circuit alone gets its
//! ceiling and no more; a circuit with a higher minimum gets it under congestion.

use debloat_core::classify::circuits::{self, CircuitTree, Circuits, Plan, TreeOptions};
use debloat_sim::circuits::{run, CircuitRun};

const NETWORK: &str = r#"{ "AP_1": { "downloadBandwidthMbps": 100, "uploadBandwidthMbps": 100 } }"#;

/// 40 circuits under AP_1, 25 Mbit/s down and 5 up at most, 1 and 1 at least (the first
/// circuit's download minimum is `first_min`), subscriber 198.19.0.(i + 1).
fn devices(first_min: u32) -> String {
    let mut s = String::from("Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment\n");
    for i in 1..=40 {
        let min = if i == 1 { first_min } else { 1 };
        s += &format!("c{i},Sub {i},d{i},cpe{i},AP_1,,198.19.0.{i},,{min},1,25,5,\n");
    }
    s
}

/// The files read and built, as the gateway builds them (a 1 Gbit/s root).
fn built(first_min: u32) -> (Plan, CircuitTree, Circuits) {
    let o = TreeOptions {
        down_bps: 1_000_000_000,
        up_bps: 1_000_000_000,
        release_idle: None,
    };
    let (plan, built) = circuits::load(
        ("network.json", NETWORK),
        ("ShapedDevices.csv", &devices(first_min)),
        &o,
    );
    let (tree, stage) = built.unwrap_or_else(|| panic!("refused: {:?}", plan.findings));
    (plan, tree, stage)
}

fn sim(first_min: u32, profile: &str) -> CircuitRun {
    let (plan, tree, stage) = built(first_min);
    run(
        profile,
        &plan,
        &tree,
        stage,
        (1_000_000_000, 1_000_000_000),
        |_| {},
    )
    .expect("runs")
}

const ALL: &str = "length = 60\nrtt = \"20ms\"\n[[group]]\nnode = \"AP_1\"\n";

#[test]
fn forty_saturated_circuits_share_the_ap_fairly_with_low_latency() {
    let r = sim(1, ALL);
    let ap = &r.nodes[0];
    assert_eq!(ap.active, 40);
    // The AP's class carried its 100 Mbit/s (less TCP's first seconds).
    assert!(
        (95.0..=100.5).contains(&ap.down_class_mbps),
        "AP class {:.1} Mbit/s",
        ap.down_class_mbps
    );
    let fair = ap.down_class_mbps / 40.0;
    for c in &r.circuits {
        let off = (c.down_class_mbps - fair).abs() / fair;
        assert!(
            off <= 0.05,
            "{}: {:.3} Mbit/s against a fair {:.3} ({:.1} % off)",
            c.id,
            c.down_class_mbps,
            fair,
            off * 100.0
        );
        let p99 = c.ping_p99_ms.expect("pinged");
        assert!(p99 <= 20.0 + 15.0, "{}: ping p99 {p99:.1} ms", c.id);
        assert!(
            c.down_mbps > 0.9 * fair * 0.95,
            "{}: goodput {:.2}",
            c.id,
            c.down_mbps
        );
    }
}

#[test]
fn a_circuit_alone_gets_its_ceiling_and_no_more() {
    let r = sim(
        1,
        "length = 20\nrtt = \"20ms\"\n[[group]]\ncircuits = [\"c7\"]\n",
    );
    let c = &r.circuits[6];
    assert!(c.active && r.circuits.iter().filter(|c| c.active).count() == 1);
    assert!(
        (24.0..=25.05).contains(&c.down_class_mbps),
        "class {:.2} Mbit/s",
        c.down_class_mbps
    );
    assert!(
        c.down_mbps <= 25.0 * 1448.0 / 1514.0 + 0.01,
        "goodput {:.2}",
        c.down_mbps
    );
    assert!(c.down_mbps > 22.0, "goodput {:.2}", c.down_mbps);
}

#[test]
fn a_circuit_with_a_higher_minimum_gets_it_under_congestion() {
    let r = sim(10, ALL);
    let first = &r.circuits[0];
    assert!(r.nodes[0].down_class_mbps > 95.0, "the AP is congested");
    assert!(
        first.down_class_mbps >= 10.0,
        "c1 (min 10) got {:.2} Mbit/s",
        first.down_class_mbps
    );
    let others = r.circuits[1..]
        .iter()
        .map(|c| c.down_class_mbps)
        .fold(f64::MAX, f64::min);
    assert!(
        first.down_class_mbps > others,
        "c1 {:.2} against the others' least {others:.2}",
        first.down_class_mbps
    );
}

#[test]
fn profiles_name_what_is_wrong() {
    let (plan, tree, stage) = built(1);
    let err = |p: &str| {
        run(
            p,
            &plan,
            &tree,
            stage.clone(),
            (1_000_000_000, 1_000_000_000),
            |_| {},
        )
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default()
    };
    assert!(
        err("length = 5\nrtt = \"20ms\"\n[[group]]\nnode = \"AP_9\"\n")
            .contains("node \"AP_9\": not in network.json; nodes: AP_1")
    );
    assert!(
        err("length = 5\nrtt = \"20ms\"\n[[group]]\ncircuits = [\"c99\"]\n")
            .contains("circuit \"c99\": not in ShapedDevices.csv")
    );
    assert!(
        err("length = 5\nrtt = \"20ms\"\n[[group]]\nall = true\nactive = 2\n")
            .contains("group 1: active")
    );
    assert!(
        err("length = 5\nrtt = \"20ms\"\n[[group]]\nall = true\nnode = \"AP_1\"\n")
            .contains("exactly one of")
    );
    assert!(err("length = 5\nrtt = \"20ms\"\nlenght = 3\n").contains("unknown field `lenght`"));
    // A seed picks which 60 % are active; the same seed, the same ones.
    let active = |stage| -> Vec<String> {
        let p = "length = 2\nrtt = \"20ms\"\nseed = 4\n[[group]]\nall = true\nactive = 0.6\n";
        let r = run(
            p,
            &plan,
            &tree,
            stage,
            (1_000_000_000, 1_000_000_000),
            |_| {},
        )
        .expect("runs");
        r.circuits
            .into_iter()
            .filter(|c| c.active)
            .map(|c| c.id)
            .collect()
    };
    let a = active(stage.clone());
    assert_eq!(a.len(), 24);
    assert_eq!(a, active(stage));
}
