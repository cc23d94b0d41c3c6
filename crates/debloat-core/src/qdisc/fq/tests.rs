//! fq: pacing by timestamps and `maxrate`, DRR between flows, the bands' weights, the limits,
//! the horizon, CE marks, collection and the fast path, with the kernel's defaults and text.

use super::*;
use crate::packet::{Ecn, Record};
use crate::qdisc::spec::QdiscSpec;
use crate::testutil::{pkt_in, udp_flow};

const MS: u64 = 1_000_000;

fn spec(words: &str) -> FqSpec {
    match words.parse::<QdiscSpec>() {
        Ok(QdiscSpec::Fq(s)) => s,
        other => panic!("{other:?}"),
    }
}

fn fq(words: &str) -> Fq<Record> {
    Fq::new(&spec(words), FlowHasher::new([1, 2]))
}

/// A socket's packet stamped to leave at `t` (0: no stamp).
fn sock(id: u64, socket: u32, t: Nanos) -> Record {
    let mut r = pkt_in(id, 1514, udp_flow(1, 2, socket as u16));
    r.meta.socket = socket;
    r.meta.tstamp = t;
    r
}

#[test]
fn defaults_and_text_are_the_kernels() {
    // `tc -s qdisc show` of Linux 7.2.7 in the lab (iproute2 6.1), 2026-11-27.
    let s = spec("fq");
    assert_eq!(
        s.tc_options(),
        "limit 10000p flow_limit 100p buckets 1024 orphan_mask 1023 quantum 3028b initial_quantum 15140b low_rate_threshold 550Kbit refill_delay 40ms timer_slack 10us horizon 10s horizon_drop"
    );
    let s = spec("fq limit 500 flow_limit 50 quantum 3000 initial_quantum 15000 maxrate 10Mbit refill_delay 20ms ce_threshold 3ms horizon 2s horizon_cap low_rate_threshold 1Mbit orphan_mask 511 buckets 256 nopacing");
    assert_eq!(
        s.tc_options(),
        "limit 500p flow_limit 50p buckets 256 orphan_mask 511 nopacing quantum 3000b initial_quantum 15000b maxrate 10Mbit low_rate_threshold 1Mbit refill_delay 20ms ce_threshold 3ms timer_slack 10us horizon 2s horizon_cap"
    );
    let idle = fq("fq").stats().to_tc_string();
    assert!(
        idle.ends_with(
            " backlog 0b 0p requeues 0\n  flows 0 (inactive 0 throttled 0)\n  gc 0 highprio 0 throttled 0\n"
        ),
        "{idle}"
    );
    for words in [
        "fq",
        "fq priomap 0 0 0 0 1 1 1 1 2 2 2 2 0 0 0 0 weights 16384 20000 30000 timer_slack 20us",
        "fq maxrate 1234567bit ce_threshold 1500us horizon_cap buckets 3",
    ] {
        let q: QdiscSpec = words.parse().expect("valid");
        assert_eq!(
            q.to_string().parse::<QdiscSpec>().ok(),
            Some(q.clone()),
            "{q}"
        );
    }
    assert_eq!(
        spec("fq buckets 3").buckets_log,
        2,
        "rounded up, as tc's ilog2"
    );
    for bad in [
        "fq weights 16383 1 1",
        "fq priomap 0 1 2 3 0 0 0 0 0 0 0 0 0 0 0 0",
        "fq priomap 0 1",
        "fq quantum 2mb",
        "fq buckets 1",
        "fq flowlimit 10",
    ] {
        assert!(bad.parse::<QdiscSpec>().is_err(), "{bad}");
    }
    let e = "fq flowlimit 10".parse::<QdiscSpec>().expect_err("typo");
    assert!(e.to_string().contains("did you mean `flow_limit`"), "{e}");
}

/// `defrate` is accepted and changes nothing, as Linux ignores it; `offload_horizon` is
/// refused above 0, as Linux refuses it on a device that does not offload pacing.
#[test]
fn defrate_is_ignored_and_offload_horizon_needs_a_device_that_offloads() {
    assert_eq!(spec("fq defrate 10Mbit"), spec("fq"));
    assert_eq!(
        spec("fq defrate 10Mbit").tc_options(),
        spec("fq").tc_options()
    );
    assert_eq!(
        spec("fq offload_horizon 0us maxrate 1Mbit"),
        spec("fq maxrate 1Mbit")
    );
    let e = "fq offload_horizon 1ms"
        .parse::<QdiscSpec>()
        .expect_err("no device offloads pacing");
    assert!(e.to_string().contains("invalid offload_horizon"), "{e}");
    assert!("fq defrate".parse::<QdiscSpec>().is_err());
}

#[test]
fn a_packet_waits_for_its_departure_time() {
    let mut q = fq("fq");
    // A TCP sender paced at 1514 B per ms stamps 1 ms apart, 10 packets ahead (TSQ's ~1 ms).
    for k in 0..10 {
        assert_eq!(q.enqueue(sock(k, 7, 5 * MS + k * MS), MS), Verdict::Queued);
    }
    assert!(matches!(q.dequeue(MS), Dequeue::NotBefore(t) if t == 5 * MS));
    let mut now = MS;
    let mut times = vec![];
    while q.qlen() > 0 {
        match q.dequeue(now) {
            Dequeue::Packet(p) => {
                assert_eq!(p.meta.tstamp, 0, "the stamp does not leave the host");
                times.push(now);
            }
            Dequeue::NotBefore(t) => now = t,
            Dequeue::Empty => panic!("packets queued"),
        }
    }
    let want: Vec<Nanos> = (0..10).map(|k| 5 * MS + k * MS).collect();
    assert_eq!(times, want);
    let st = q.stats();
    let Xstats::Fq(x) = st.xstats else { panic!() };
    assert_eq!((x.flows, x.inactive_flows, x.throttled), (1, 1, 10));
}

/// Send everything `q` holds, taking each packet as soon as it may leave: (time, packet).
fn run_out(q: &mut Fq<Record>, mut now: Nanos, until: Nanos) -> Vec<(Nanos, Record)> {
    let mut out = vec![];
    while now < until {
        match q.dequeue(now) {
            Dequeue::Packet(p) => out.push((now, p)),
            Dequeue::NotBefore(t) => now = t,
            Dequeue::Empty => break,
        }
    }
    out
}

#[test]
fn maxrate_caps_a_flow_without_stamps() {
    // 1.2 Mbit/s = 150000 B/s. After its first 15140 B of credit, the flow goes a quantum
    // (3028 B) per 3028/150000 s, whatever the packet size.
    let mut q = fq("fq maxrate 1200kbit flow_limit 1000");
    let flow = udp_flow(1, 2, 9);
    for k in 0..600 {
        q.enqueue(pkt_in(k, 1514, flow), 0);
    }
    let out = run_out(&mut q, 0, 10_000 * MS);
    assert_eq!(out.len(), 600);
    // Bytes sent from the 20th to the last packet over the time between them.
    let (t0, t1) = (out[20].0, out[599].0);
    let rate = 579.0 * 1514.0 / ((t1 - t0) as f64 / 1e9);
    assert!((rate - 150_000.0).abs() / 150_000.0 < 0.01, "{rate} B/s");
    // The first 10 go at once: the initial quantum (15140 B) covers them.
    assert!(out[..10].iter().all(|(t, _)| *t == 0));
    assert!(out[11].0 > 0);
}

#[test]
fn flows_share_by_quantum_and_bands_by_weight() {
    // Two flows in one band: round robin of 3028 B (two 1514-B packets) each.
    let mut q = fq("fq initial_quantum 3028");
    for k in 0..40 {
        q.enqueue(pkt_in(k, 1514, udp_flow(1, 2, (k % 2) as u16)), 0);
    }
    let order: Vec<u16> = run_out(&mut q, 0, MS)
        .into_iter()
        .map(|(_, p)| p.id as u16 % 2)
        .collect();
    // The first 8 find no eligible flow and take the fast path, in arrival order.
    assert_eq!(q.counters().fastpath_packets, 8);
    assert_eq!(&order[..8], &[0, 1, 0, 1, 0, 1, 0, 1]);
    assert_eq!(&order[8..16], &[0, 0, 1, 1, 0, 0, 1, 1]);
    // Three backlogged flows, one per band (priority 6 → band 0, 0 → 1, 1 → 2): bytes 9 : 3 : 1.
    let mut q = fq("fq flow_limit 10000 limit 10000");
    for k in 0..30_000u64 {
        let prio = [6, 0, 1][(k % 3) as usize];
        let mut p = pkt_in(k, 1000, udp_flow(1, 2, prio as u16));
        p.meta.priority = prio;
        q.enqueue(p, 0);
    }
    let mut bytes = [0u64; 3];
    // Ten rounds of 9 + 3 + 1 × 64 KiB, every band still backlogged at the end.
    for _ in 0..8520 {
        if let Dequeue::Packet(p) = q.dequeue(0) {
            bytes[[1, 2, 0, 0, 0, 0, 0][p.meta.priority as usize]] += 1000;
        }
    }
    let share = |b: u64| b as f64 / bytes.iter().sum::<u64>() as f64;
    assert!((share(bytes[0]) - 9.0 / 13.0).abs() < 0.01, "{bytes:?}");
    assert!((share(bytes[1]) - 3.0 / 13.0).abs() < 0.01, "{bytes:?}");
}

#[test]
fn limits_drop_arrivals_and_count_them() {
    let mut q = fq("fq flow_limit 3 limit 5");
    // Stamped in the future so nothing takes the fast path.
    for k in 0..4 {
        q.enqueue(sock(k, 1, MS), 0);
    }
    assert_eq!(q.qlen(), 3);
    assert_eq!(q.counters().flows_plimit, 1);
    for k in 0..3 {
        q.enqueue(sock(10 + k, 2, MS), 0);
    }
    assert_eq!(q.qlen(), 5, "the band holds 5");
    assert_eq!(q.counters().band_drops, [0, 1, 0]);
    let mut dropped = 0;
    while let Some(d) = q.take_dropped() {
        assert_eq!(d.reason, DropReason::Overlimit);
        dropped += 1;
    }
    assert_eq!(dropped, 2);
    // The horizon: 10 s by default, dropping; `horizon_cap` moves the stamp to the horizon.
    let mut q = fq("fq");
    assert_eq!(q.enqueue(sock(20, 3, 11_000 * MS), 0), Verdict::Dropped);
    assert_eq!(q.counters().horizon_drops, 1);
    let mut q = fq("fq horizon 1s horizon_cap");
    assert_eq!(q.enqueue(sock(21, 3, 5_000 * MS), 0), Verdict::Queued);
    assert!(matches!(q.dequeue(0), Dequeue::NotBefore(t) if t == 1_000 * MS));
    assert_eq!(q.counters().horizon_caps, 1);
}

#[test]
fn a_late_packet_is_marked_past_ce_threshold() {
    let mut q = fq("fq ce_threshold 2ms");
    for k in 0..2 {
        let mut p = sock(k, 1, MS);
        p.meta.ecn = Ecn::Ect1;
        q.enqueue(p, 0);
    }
    let Dequeue::Packet(p) = q.dequeue(2 * MS) else {
        panic!()
    };
    assert_eq!(p.meta.ecn, Ecn::Ect1, "1 ms late: not past 2 ms");
    let Dequeue::Packet(p) = q.dequeue(3 * MS + 1) else {
        panic!()
    };
    assert_eq!(p.meta.ecn, Ecn::Ce);
    assert_eq!(q.counters().ce_mark, 1);
}

#[test]
fn light_traffic_takes_the_fast_path_and_idle_flows_are_collected() {
    let mut q = fq("fq buckets 2");
    // Due now, queue empty: the fast path, no flow made.
    q.enqueue(pkt_in(0, 100, udp_flow(1, 2, 1)), 0);
    assert_eq!((q.counters().fastpath_packets, q.flow_count()), (1, 0));
    assert!(q.dequeue(0).packet().is_some());
    // Sockets stamped ahead make flows; emptied, they may be collected 3 s later by a lookup
    // in their bucket.
    for s in 1..=6u32 {
        q.enqueue(sock(u64::from(s), s, 1), 0);
    }
    assert_eq!(q.flow_count(), 6);
    run_out(&mut q, 0, 10 * MS);
    run_out(&mut q, 10 * MS, 20 * MS);
    assert_eq!(q.flow_count(), 6, "empty flows stay allocated");
    for s in 7..=40u32 {
        q.enqueue(sock(u64::from(s), s, 5_000 * MS), 4_000 * MS);
    }
    assert!(q.counters().gc_flows >= 1, "{:?}", q.counters());
    assert_eq!(
        q.flow_count() as u64 + q.counters().gc_flows,
        40,
        "each flow made is live or collected"
    );
}

#[test]
fn drain_hands_over_everything_in_turn() {
    let mut q = fq("fq");
    for k in 0..6 {
        q.enqueue(sock(k, 1 + (k % 2) as u32, MS), 0);
    }
    let mut out = vec![];
    q.drain(&mut |p| out.push(p.id));
    assert_eq!(out, vec![0, 1, 2, 3, 4, 5]);
    assert_eq!((q.qlen(), q.backlog()), (0, 0));
    q.enqueue(sock(9, 1, 0), 2 * MS);
    assert!(q.dequeue(2 * MS).packet().is_some(), "usable after a drain");
}
