//! docs/experiments.md Part A, wired and Wi-Fi rows: each experiment as an integration test asserting the
//! published bands (the same code as `debloat reproduce`, seed 1). Every check is asserted: no
//! row is ignored. A check marked `known_gap` would fail here too.

use debloat_sim::reproduce::{self, Outcome};

fn run(id: &str) -> Outcome {
    let e = reproduce::find(id).expect("registered");
    let o = (e.run)(1);
    for c in &o.checks {
        eprintln!(
            "{id}: {} = {:.3} {} (published {}, band {}){}",
            c.what,
            c.measured,
            c.unit,
            c.published,
            c.band,
            if c.pass() { "" } else { "  OUTSIDE" }
        );
    }
    for n in &o.notes {
        eprintln!("{id}: note: {n}");
    }
    o
}

/// Every check inside its band.
fn assert_reached(o: &Outcome) {
    let missed: Vec<String> = o
        .checks
        .iter()
        .filter(|c| !c.pass())
        .map(|c| format!("{}: {:.3} {} not in {}", c.what, c.measured, c.unit, c.band))
        .collect();
    assert!(missed.is_empty(), "{}: {missed:#?}", o.id);
}

/// PI-55 including its re-based no-ECN drop band (5–12 % of offered packets, today's kernel
/// TCP through the testbed: 7.0–7.4 %).
#[test]
fn pi_55() {
    let o = run("PI-55");
    assert_reached(&o);
    let drops = o
        .checks
        .iter()
        .find(|c| c.what == "fq_codel, no ECN: dropped of offered")
        .expect("the drop check");
    assert!((5.0..=12.0).contains(&drops.measured), "{}", drops.measured);
}

#[test]
fn fifo_depth() {
    assert_reached(&run("FIFO-DEPTH"));
}

#[test]
fn sqw_20m() {
    assert_reached(&run("SQW-20M"));
}

#[test]
fn cake_hosts() {
    assert_reached(&run("CAKE-HOSTS"));
}

#[test]
fn rrul_110_10() {
    assert_reached(&run("RRUL-110-10"));
}

#[test]
fn ack_filter() {
    assert_reached(&run("ACK-FILTER"));
}

#[test]
fn bql() {
    assert_reached(&run("BQL"));
}

#[test]
fn hash() {
    assert_reached(&run("HASH"));
}

#[test]
fn ath10k_6m() {
    assert_reached(&run("ATH10K-6M"));
}

/// NETDEV-PING including the airtime row: ≤ 20 ms and below the fq_codel row in the same run.
#[test]
fn netdev_ping() {
    let o = run("NETDEV-PING");
    assert_reached(&o);
    let get = |w: &str| {
        o.checks
            .iter()
            .find(|c| c.what == w)
            .map(|c| c.measured)
            .expect("check")
    };
    let (fq, air) = (
        get("fq_codel qdisc: ping median"),
        get("airtime: ping median"),
    );
    assert!(
        air <= 20.0 && air < fq,
        "airtime {air} ms, fq_codel {fq} ms"
    );
}

/// Two seeds of a Wi-Fi row (its backoff draws differ by seed): the checks are folded into
/// intervals whose verdicts follow the values, in seed order.
#[test]
fn seeds_fold_into_intervals() {
    let e = reproduce::find("NETDEV-PING").expect("registered");
    let s = reproduce::repeat(e, 2, 2);
    assert_eq!(s.seeds, vec![1, 2]);
    let one = (e.run)(1);
    for (c, c1) in s.checks.iter().zip(&one.checks) {
        assert_eq!(c.values.len(), 2);
        assert_eq!(
            c.values[0], c1.measured,
            "{}: seed 1 is the single run",
            c.what
        );
        let sp = c.spread.as_ref().expect("values");
        assert!(sp.min <= sp.mean && sp.mean <= sp.max);
        assert!(sp.lo() <= sp.min || sp.half_width == 0.0);
        assert_eq!(c.verdict, reproduce::Verdict::of(&c.values, c.band));
    }
    // The airtime row differs between seeds (EDCA backoff is random), so its interval is open.
    let air = s
        .checks
        .iter()
        .find(|c| c.what == "airtime: ping median")
        .expect("airtime row");
    assert_ne!(air.values[0], air.values[1]);
    assert!(air.spread.as_ref().is_some_and(|p| p.half_width > 0.0));
}

#[test]
fn atf_ath9k() {
    assert_reached(&run("ATF-ATH9K"));
}

#[test]
fn mcs_flat() {
    assert_reached(&run("MCS-FLAT"));
}

#[test]
fn aql() {
    assert_reached(&run("AQL"));
}

/// DualPI2 against the DualQ drafts' published result: an L4S flow's sub-millisecond mean queue,
/// no L4S losses, Prague and CUBIC at about the same rate, over four mixes (src/reproduce/l4s.rs).
#[test]
fn dualq_l4s() {
    assert_reached(&run("DUALQ-L4S"));
}
