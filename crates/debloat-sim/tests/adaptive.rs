//! Shapers on the real LTE traces (data/link-traces), 4 CUBIC downloads and a VoIP stream for
//! 120 s behind each trace's modem: debloat's passive controller against a fixed cake at the
//! trace's median and against cake-autorate's controller, same trace and seed; and the oracle
//! (cake set from what the trace will carry next) against the VoIP goal.

use debloat_core::autorate::Mode;
use debloat_core::link::Trace;
use debloat_sim::adaptive::{self, Outcome, Shaper};
use std::sync::Arc;

const SECS: u64 = 120;

fn trace(name: &str) -> Arc<Trace> {
    let path = format!(
        "{}/../../data/link-traces/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).expect("the traces are in the repository");
    Arc::new(Trace::parse(&text).expect("a valid trace"))
}

struct Rows {
    median: Outcome,
    cake_autorate: Outcome,
    passive: Outcome,
    oracle: Outcome,
}

fn rows(name: &str) -> Rows {
    let t = trace(name);
    let s = adaptive::trace_stats(&t, SECS);
    Rows {
        median: adaptive::run(&t, Shaper::Fixed(s.median_bps), 1, SECS),
        cake_autorate: adaptive::run(&t, Shaper::Controller(Mode::CakeAutorate), 1, SECS),
        passive: adaptive::run(&t, Shaper::Controller(Mode::Passive), 1, SECS),
        oracle: adaptive::run(&t, Shaper::Controller(Mode::Oracle(950)), 1, SECS),
    }
}

fn check(name: &str) {
    let r = rows(name);
    let (p, c, m) = (&r.passive, &r.cake_autorate, &r.median);
    let show = |o: &Outcome| {
        format!(
            "{:.2} Mbit/s, VoIP p95 {:.1} p99 {:.1} ms",
            o.goodput_mbps, o.voip_ms[1], o.voip_ms[2]
        )
    };
    let all = format!(
        "{name}: passive {}; cake-autorate {}; fixed median {}",
        show(p),
        show(c),
        show(m)
    );
    // At least 80 % of what the fixed median shaper delivers…
    assert!(p.goodput_mbps >= 0.8 * m.goodput_mbps, "{all}");
    // …with less delay than it (its queue sits in the modem whenever the link falls).
    assert!(
        p.voip_ms[1] < m.voip_ms[1] && p.voip_ms[2] < m.voip_ms[2],
        "{all}"
    );
    // Against cake-autorate, no reflectors: equal or better goodput and a lower p99 (and p95).
    assert!(p.goodput_mbps >= c.goodput_mbps, "{all}");
    assert!(p.voip_ms[2] < c.voip_ms[2], "{all}");
    assert!(p.voip_ms[1] < c.voip_ms[1], "{all}");
    // The controllers keep the modem's FIFO from overflowing.
    assert_eq!(p.modem_dropped, 0, "{all}");
    // The VoIP goal, p95 ≤ base + 30 ms (50 ms one way), is beyond even the oracle,
    // which sets cake from what the trace will carry next: the trace itself does not allow it.
    let o = &r.oracle;
    assert!(o.voip_ms[1] > 50.0, "oracle {}; {all}", show(o));
}

#[test]
fn verizon_lte_downlink() {
    check("Verizon-LTE-short.down.mahi");
}

#[test]
fn tmobile_lte_downlink() {
    check("TMobile-LTE-short.down.mahi");
}

#[test]
fn att_lte_driving_downlink() {
    check("ATT-LTE-driving-2016.down.mahi");
}

#[test]
fn without_a_shaper_the_queue_sits_in_the_modem() {
    let t = trace("Verizon-LTE-short.down.mahi");
    let none = adaptive::run(&t, Shaper::None, 1, SECS);
    let alone = adaptive::run(&t, Shaper::Alone, 1, SECS);
    // Full use of the link, at the price of hundreds of milliseconds and modem drops.
    assert!(none.share() > 0.9, "{}", none.share());
    assert!(
        none.voip_ms[0] > alone.voip_ms[0] + 200.0,
        "{:?} vs {:?}",
        none.voip_ms,
        alone.voip_ms
    );
    assert!(none.modem_dropped > 0);
}
