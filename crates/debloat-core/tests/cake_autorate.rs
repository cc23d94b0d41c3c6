//! CAKE's `autorate-ingress` behind a bottleneck that delivers in bursts (a modem's frames):
//! the capacity estimate finds the bottleneck's rate from above and from below, the shaper
//! follows at 15/16 of it, and the kernel's 250 ms hold-off (measured from a timestamp it
//! never updates) delays only the first reconfiguration.

mod common;

use common::{mbps, qdisc};
use debloat_core::link::Emulation;
use debloat_core::packet::{PacketMeta, Record};
use debloat_core::path::{DataPath, Event};
use debloat_core::qdisc::stats::Xstats;
use debloat_core::testutil::udp_flow;
use debloat_core::Qdisc;

/// A 10 Mbit/s bottleneck in front of the qdisc: 4 frames of 1500 B back to back (10 µs
/// apart) every 4.8 ms, from 0 to `until` ns; 4 flows take turns.
fn bursts(until: u64) -> Vec<(u64, u32)> {
    let mut out = vec![];
    let mut t = 1_000_000;
    while t < until {
        for k in 0..4u64 {
            out.push((t + k * 10_000, 1500));
        }
        t += 4_800_000;
    }
    out
}

struct Run {
    /// (time, capacity estimate bytes/s, first tin's threshold bytes/s) at each probe time.
    samples: Vec<(u64, u64, u64)>,
    /// Bytes sent by the qdisc at or after `measure_from`.
    sent_after: u64,
    dropped: u64,
}

fn cake_state(q: &dyn Qdisc<Record>) -> (u64, u64) {
    match q.stats().xstats {
        Xstats::Cake(c) => (c.capacity_estimate, c.tins[0].threshold_rate),
        _ => panic!("not cake"),
    }
}

fn run(spec: &str, until: u64, probes: &[u64], measure_from: u64) -> Run {
    let mut path = DataPath::new(qdisc(spec), Emulation::default(), 0, 1);
    let (mut sent_after, mut dropped) = (0u64, 0u64);
    let mut out = |e: Event<'_, Record>| match e {
        Event::Sent { packet, start, .. } if start >= measure_from => {
            sent_after += u64::from(packet.meta.len)
        }
        Event::Dropped { .. } => dropped += 1,
        _ => {}
    };
    let mut samples = vec![];
    let mut probes = probes.iter().peekable();
    for (i, (t, len)) in bursts(until).into_iter().enumerate() {
        while let Some(&&p) = probes.peek() {
            if p > t {
                break;
            }
            path.poll(p, &mut out);
            let (est, thr) = cake_state(path.qdisc().as_ref());
            samples.push((p, est, thr));
            probes.next();
        }
        let meta = PacketMeta::new(len, udp_flow(1, 2, (i % 4) as u16));
        path.arrive(Record::new(i as u64, meta), t, &mut out);
    }
    path.poll(until, &mut out);
    assert!(path.accounted());
    Run {
        samples,
        sent_after,
        dropped,
    }
}

const TEN_MBIT_BYTES: f64 = 1_250_000.0;

#[test]
fn from_above_the_estimate_falls_to_the_bottleneck_and_the_shaper_follows_at_15_16() {
    let r = run(
        "cake bandwidth 100mbit autorate-ingress besteffort",
        20_000_000_000,
        &[200_000_000, 10_000_000_000],
        10_000_000_000,
    );
    let (_, est0, thr0) = r.samples[0];
    // Before 250 ms nothing reconfigures: the shaper is still the configured 100 Mbit/s
    // (12.5 MB/s), while the estimate already moves.
    assert_eq!(thr0, 12_500_000);
    assert!(est0 < 12_500_000, "{est0}");
    let (_, est, thr) = r.samples[1];
    let err = (est as f64 - TEN_MBIT_BYTES).abs() / TEN_MBIT_BYTES;
    assert!(err < 0.01, "estimate {est} B/s vs 1.25 MB/s");
    assert_eq!(thr, (est * 15) >> 4);
    // The second 10 s: cake sends at 15/16 of 10 Mbit/s and drops the excess.
    let sent = mbps(r.sent_after, 10.0);
    assert!((sent - 9.375).abs() < 0.2, "{sent} Mbit/s sent");
    assert!(r.dropped > 0);
}

#[test]
fn from_below_the_estimate_climbs_within_a_second() {
    let r = run(
        "cake bandwidth 1mbit autorate-ingress besteffort",
        2_000_000_000,
        &[1_000_000_000],
        0,
    );
    let (_, est, thr) = r.samples[0];
    let err = (est as f64 - TEN_MBIT_BYTES).abs() / TEN_MBIT_BYTES;
    assert!(err < 0.02, "estimate {est} B/s after 1 s, from 125 kB/s");
    assert_eq!(thr, (est * 15) >> 4);
}

#[test]
fn a_rate_after_the_flag_turns_it_off_as_tc_parses_it() {
    // tc: `bandwidth` and `unlimited` clear an earlier `autorate-ingress`.
    let spec = |s: &str| {
        s.parse::<debloat_core::QdiscSpec>()
            .expect("spec")
            .to_string()
    };
    assert!(!spec("cake autorate-ingress bandwidth 10mbit").contains("autorate-ingress"));
    assert!(!spec("cake autorate-ingress unlimited").contains("autorate-ingress"));
    assert!(spec("cake bandwidth 10mbit autorate-ingress").contains("autorate-ingress"));
}

#[test]
fn without_the_flag_the_estimate_is_the_configured_rate() {
    let r = run(
        "cake bandwidth 100mbit besteffort",
        2_000_000_000,
        &[1_000_000_000],
        0,
    );
    assert_eq!(r.samples[0].1, 12_500_000);
    assert_eq!(r.samples[0].2, 12_500_000);
    assert_eq!(r.dropped, 0);
}
