//! The marking stage in the simulator (`Config::classify`, `debloat sim --classify`): the same
//! qosify rules the gateway and replay run, before the bottleneck's discipline.

use debloat_core::classify::qosify::parse_uci;
use debloat_sim::scenario::{Config, Summary, Test};
use debloat_sim::tcp::cc::Algorithm;

/// qosify's shipped classes, and one map file.
fn rules(map: &str) -> debloat_core::classify::qosify::Config {
    let uci = "config defaults\nconfig class besteffort\n\toption ingress CS0\n\toption egress CS0\nconfig class bulk\n\toption ingress LE\n\toption egress LE\n";
    let mut c = parse_uci("qosify", uci).expect("uci");
    c.add_map("map", map).expect("map");
    c
}

fn rrul(classify: Option<debloat_core::classify::qosify::Config>) -> Summary {
    let q: debloat_core::QdiscSpec = "cake bandwidth 10Mbit diffserv4".parse().expect("spec");
    let c = Config {
        test: Test::Rrul,
        down_bps: 10_000_000,
        up_bps: 10_000_000,
        rtt_ns: 20_000_000,
        qdisc_up: q.clone(),
        qdisc_down: q,
        length_s: 15.0,
        delay_s: 1.0,
        step_s: 0.2,
        streams: 4,
        cc: Algorithm::Cubic,
        cc_turns: Vec::new(),
        ecn: false,
        host_qdisc: None,
        seed: 1,
        device: Default::default(),
        wire: Default::default(),
        wire_down: None,
        tcp_window: None,
        bbr_ack_aggregation: true,
        host_rtts_ns: Vec::new(),
        adaptive: Default::default(),
        classify,
        wifi: None,
    };
    debloat_sim::run(&c, |_| {})
}

/// The upload named `BK` (flent's CS1 flow) as a share of all uploads.
fn bk_share(s: &Summary) -> f64 {
    let up: Vec<_> = s
        .flows
        .iter()
        .filter(|f| f.direction == debloat_sim::world::Dir::Up && f.kind == "tcp")
        .collect();
    let total: f64 = up.iter().map(|f| f.throughput_mbps).sum();
    let bk = up
        .iter()
        .find(|f| f.name.contains("BK"))
        .map_or(0.0, |f| f.throughput_mbps);
    bk / total
}

#[test]
fn re_marking_every_packet_besteffort_puts_rruls_flows_in_one_tin() {
    // rrul marks its four uploads BE, BK (CS1), CS5 and EF: in cake diffserv4 the BK upload is
    // held to the Bulk tin's share. A rule that marks everything CS0 (no `+`: it overrides)
    // puts all four in Best Effort, where they share equally.
    let marked = rrul(None);
    let washed = rrul(Some(rules(
        "198.18.0.0/15 besteffort\n2001:2::/48 besteffort\n",
    )));
    let (before, after) = (bk_share(&marked), bk_share(&washed));
    println!("BK upload's share: {before:.3} as marked, {after:.3} re-marked CS0");
    assert!(before < 0.15, "{before}");
    assert!((0.20..0.30).contains(&after), "{after}");
}

#[test]
fn a_plus_rule_leaves_marked_packets_and_marks_the_rest() {
    // `+bulk` only touches DSCP 0: the BE upload joins BK in the Bulk tin, where they share
    // it equally; the marked CS5 and EF uploads keep their tins.
    let s = rrul(Some(rules("198.18.0.0/15 +bulk\n2001:2::/48 +bulk\n")));
    let up = |name: &str| {
        s.flows
            .iter()
            .find(|f| f.direction == debloat_sim::world::Dir::Up && f.name.ends_with(name))
            .map_or(0.0, |f| f.throughput_mbps)
    };
    let (be, bk, ef) = (up(" BE"), up(" BK"), up(" EF"));
    println!("uploads: BE {be:.2}, BK {bk:.2}, EF {ef:.2} Mbit/s");
    assert!(
        (be - bk).abs() < 0.1 * bk,
        "BE {be} and BK {bk} share the Bulk tin"
    );
    assert!(be < 0.2 * ef, "BE {be} against EF {ef}");
}
