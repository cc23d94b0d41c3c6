//! Issue 44's disciplines in the gateway on real kernel TCP (root: the testbed; SKIP elsewhere,
//! a failure under CI): `fq` holds each flow to its `maxrate`, and `dualpi2` marks classic
//! ECN-capable flows and keeps their queue near its 15 ms target — every frame accounted for.
//! (Their arithmetic is tested in the core against the kernel's; these check that the gateway
//! runs them as a real path: flows found in real frames, time from the real clock.)

mod common;
use common::bed::*;
use common::stalls::judge_timing;
use common::text;
use debloat_gateway::testbed;

fn egress(bed: &Bed) -> serde_json::Value {
    let j = gateway_stats(bed);
    assert!(accounted(&j["egress"]), "egress: {}", j["egress"]);
    assert!(accounted(&j["ingress"]), "ingress: {}", j["ingress"]);
    j["egress"].clone()
}

/// Two uploads through `fq maxrate 3Mbit` on a 10 Mbit/s link: the forwarder has no sockets,
/// so each flow is one of fq's hashed flows, and each is paced to 3 Mbit/s on the wire — 6 in
/// all, 5.74 of TCP payload (1448 of every 1514 bytes), where the link would carry 9.6.
#[test]
fn fq_holds_each_flow_to_its_maxrate_in_the_gateway() {
    let Some(_one) = guard() else { return };
    let bed = up("q", "fq maxrate 3Mbit");
    let l = load_for(&bed, "cubic", 2, 8);
    report("fq maxrate 3Mbit, 2 × CUBIC", &l);
    // A rate is the host's to decide when it steals the CPU (common::stalls).
    judge_timing(
        (5.2..=6.0).contains(&l.goodput_mbps),
        &l.host,
        &format!("goodput {:.2} Mbit/s", l.goodput_mbps),
    );
    let e = egress(&bed);
    assert!(
        e["stats"]["xstats"]["flows"].as_u64().unwrap_or(0) >= 2,
        "{e}"
    );
}

/// Two ECN-capable CUBIC uploads (classic ECT(0)) through `dualpi2` on a 10 Mbit/s link: the
/// classic queue is marked rather than dropped, its delay held near the 15 ms target, and the
/// link kept full.
#[test]
fn dualpi2_marks_classic_ecn_flows_and_holds_its_target() {
    let Some(_one) = guard() else { return };
    let bed = up("d", "dualpi2");
    let o = testbed::in_ns(
        &ns(&bed, "client"),
        &["sysctl", "-qw", "net.ipv4.tcp_ecn=1"],
    )
    .output()
    .expect("sysctl");
    assert!(o.status.success(), "{}", text(&o));
    let l = load_for(&bed, "cubic", 2, 10);
    report("dualpi2, 2 × CUBIC with ECN", &l);
    let e = egress(&bed);
    let x = &e["stats"]["xstats"];
    let (marks, drops) = (
        x["ecn_mark"].as_u64().unwrap_or(0),
        e["stats"]["drops"].as_u64().unwrap_or(u64::MAX),
    );
    println!("dualpi2: {marks} CE marks, {drops} drops; {x}");
    assert!(marks > 20, "ECN was not used: {x}");
    assert!(drops * 10 < marks, "dropped {drops} against {marks} marks");
    // A delay and a rate are the host's to decide when it steals the CPU (common::stalls); the
    // marks and drops above are judged whatever it did.
    judge_timing(
        l.p50 < l.idle_p50 + 30.0,
        &l.host,
        &format!(
            "ping p50 {:.1} ms against idle {:.1} ms (target 15 ms)",
            l.p50, l.idle_p50
        ),
    );
    judge_timing(
        l.goodput_mbps > 8.5,
        &l.host,
        &format!("goodput {:.2} Mbit/s", l.goodput_mbps),
    );
}
