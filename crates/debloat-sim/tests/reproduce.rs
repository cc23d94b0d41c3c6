//! docs/experiments.md Part A, wired and Wi-Fi rows: each experiment as an integration test asserting the
//! published bands (the same code as `debloat reproduce`). A check the model does not reach
//! yet carries its reason (`known_gap`); it is asserted by an `#[ignore]`d test of its own, so
//! `cargo test -- --ignored` shows where the model still falls short.

use debloat_sim::reproduce::{self, Outcome};

fn run(id: &str) -> Outcome {
    let e = reproduce::find(id).expect("registered");
    let o = (e.run)();
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

/// Every check that the model claims to reach is inside its band.
fn assert_reached(o: &Outcome) {
    let missed: Vec<String> = o
        .checks
        .iter()
        .filter(|c| c.known_gap.is_none() && !c.pass())
        .map(|c| format!("{}: {:.3} {} not in {}", c.what, c.measured, c.unit, c.band))
        .collect();
    assert!(missed.is_empty(), "{}: {missed:#?}", o.id);
}

/// The checks marked as model gaps.
fn assert_gaps(o: &Outcome) {
    for c in o.checks.iter().filter(|c| c.known_gap.is_some()) {
        assert!(
            c.pass(),
            "{}: {} = {:.3} {} not in {} ({})",
            o.id,
            c.what,
            c.measured,
            c.unit,
            c.band,
            c.known_gap.unwrap_or_default()
        );
    }
}

#[test]
fn pi_55() {
    assert_reached(&run("PI-55"));
}

#[test]
#[ignore = "model gap: fq_codel drops ≈8 % of offered packets, band 10–35 % (see reproduce::tcp::pi_55)"]
fn pi_55_drop_rate() {
    assert_gaps(&run("PI-55"));
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

#[test]
fn netdev_ping() {
    assert_reached(&run("NETDEV-PING"));
}

#[test]
#[ignore = "model gap: airtime gives the near station ≈15 ms, band ≤ 10 ms (see reproduce::wifi::netdev_ping)"]
fn netdev_ping_airtime() {
    assert_gaps(&run("NETDEV-PING"));
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

/// Gaps are not allowed to hide: every `known_gap` check really is outside its band today (if
/// the model improves and one passes, drop its gap marker and its ignored test).
#[test]
fn known_gaps_are_real_misses() {
    for id in ["PI-55", "NETDEV-PING"] {
        let o = run(id);
        let gaps: Vec<_> = o.checks.iter().filter(|c| c.known_gap.is_some()).collect();
        assert!(!gaps.is_empty(), "{id} has no gap marker");
        for c in gaps {
            assert!(
                !c.pass(),
                "{id}: {} now passes: remove its gap marker",
                c.what
            );
        }
    }
}
