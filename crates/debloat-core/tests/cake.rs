//! CAKE conformance (docs/algorithms.md §3): shaper rate after overhead, host isolation, DiffServ
//! priority and sharing, COBALT timing, BLUE, the ACK filter, GSO splitting and wash.

mod common;

use common::{mbps, run, Source};
use debloat_core::packet::Record;
use debloat_core::qdisc::cake::Cake;
use debloat_core::qdisc::stats::Xstats;
use debloat_core::testutil::{ack, pkt, pkt_in, udp_flow};
use debloat_core::{Dequeue, DropReason, FlowHasher, Qdisc, QdiscSpec};

const MS: u64 = 1_000_000;
const SEC: u64 = 1_000_000_000;

fn cake(spec: &str) -> Cake<Record> {
    let QdiscSpec::Cake(s) = spec.parse::<QdiscSpec>().expect("valid") else {
        panic!("not cake")
    };
    Cake::new(&s, FlowHasher::new([7, 11]), 42)
}

fn cake_stats(q: &Cake<Record>) -> debloat_core::qdisc::stats::CakeStats {
    match q.stats().xstats {
        Xstats::Cake(c) => *c,
        _ => panic!("cake stats"),
    }
}

#[test]
fn buffer_limit_follows_rate_and_rtt() {
    assert_eq!(cake("cake bandwidth 100Mbit").buffer_limit(), 5_000_000);
    assert_eq!(cake("cake bandwidth 10Mbit").buffer_limit(), 4 << 20);
    assert_eq!(cake("cake unlimited").buffer_limit(), 15_503_360);
    assert_eq!(
        cake("cake bandwidth 10Mbit memlimit 1Mb").buffer_limit(),
        1 << 20
    );
}

#[test]
fn shaper_delivers_the_configured_rate_after_overhead_within_1_percent() {
    // `ethernet`: each 1514 B frame is charged 1500 + 38 = 1538 B against 10 Mbit/s.
    let q = cake("cake bandwidth 10Mbit besteffort ethernet");
    let src = Source::udp("flood", 1, 1, 1, 1514, 20_000_000);
    let (r, _) = run(q, None, &[src], 12 * SEC, 2 * SEC);
    let charged_bits = r[0].bytes_after_warmup as f64 / 1514.0 * 1538.0 * 8.0;
    let rate = charged_bits / 10.0;
    assert!((rate - 10e6).abs() / 10e6 < 0.01, "charged rate {rate}");
    let frame_rate = mbps(r[0].bytes_after_warmup, 10.0);
    assert!((frame_rate - 9.844).abs() < 0.1, "frame rate {frame_rate}");
}

#[test]
fn back_to_back_packets_are_spaced_by_their_transmission_time() {
    let mut q = cake("cake bandwidth 10Mbit besteffort");
    for i in 0..3 {
        q.enqueue(pkt(i, 1514), 0);
    }
    assert!(q.dequeue(0).packet().is_some());
    let Dequeue::NotBefore(t) = q.dequeue(0) else {
        panic!("shaper holds the second packet")
    };
    assert!((t as i64 - 1_211_200).abs() <= 1, "next release at {t}");
    assert!(q.dequeue(t).packet().is_some());
}

/// Host A sends 1 flow, host B `n_b` flows, each to its own destination; returns A's share.
fn host_share(spec: &str, n_b: u16, same_dst: bool) -> f64 {
    let q = cake(spec);
    let dst = |i: u8| if same_dst { 9 } else { i };
    let mut srcs = vec![Source::udp("a", 1, dst(1), 100, 1514, 8_000_000)];
    for i in 0..n_b {
        srcs.push(Source::udp(
            "b",
            2,
            dst(2 + i as u8),
            200 + i,
            1514,
            8_000_000,
        ));
    }
    let (r, _) = run(q, None, &srcs, 12 * SEC, 2 * SEC);
    let a = r[0].bytes_after_warmup as f64;
    let total: f64 = r.iter().map(|x| x.bytes_after_warmup as f64).sum();
    a / total
}

#[test]
fn triple_isolate_gives_two_hosts_with_1_and_8_flows_equal_shares() {
    let share = host_share("cake bandwidth 10Mbit besteffort triple-isolate", 8, false);
    assert!((share - 0.5).abs() < 0.03, "host A share {share:.3}");
    let dual = host_share("cake bandwidth 10Mbit besteffort dual-srchost", 8, false);
    assert!((dual - 0.5).abs() < 0.03, "dual-srchost share {dual:.3}");
}

#[test]
fn flows_mode_shares_per_flow_not_per_host() {
    let share = host_share("cake bandwidth 10Mbit besteffort flows", 8, false);
    assert!((share - 1.0 / 9.0).abs() < 0.02, "host A share {share:.3}");
}

#[test]
fn triple_isolate_with_a_shared_destination_degenerates_to_per_flow() {
    // §3.13: all flows to one destination: host_load = max(src, dst) = 5 for every flow.
    let share = host_share("cake bandwidth 10Mbit besteffort triple-isolate", 4, true);
    assert!((share - 0.2).abs() < 0.03, "host A share {share:.3}");
}

fn tin_shares(spec: &str, voice_rate: u64) -> (f64, f64, u64) {
    let q = cake(spec);
    let srcs = [
        Source::udp("be", 1, 1, 1, 1514, 20_000_000),
        Source::udp("voice", 1, 2, 2, 1514, voice_rate).dscp(46),
    ];
    let (r, _) = run(q, None, &srcs, 12 * SEC, 2 * SEC);
    (
        mbps(r[0].bytes_after_warmup, 10.0),
        mbps(r[1].bytes_after_warmup, 10.0),
        r[1].max_sojourn_after(2 * SEC),
    )
}

#[test]
fn diffserv4_voice_gets_priority_up_to_its_threshold() {
    // Voice's threshold is R/4 = 2.5 Mbit/s at 10 Mbit/s. Below it, voice gets all it sends
    // with next to no queueing even while best effort floods.
    let (be, voice, voice_delay) = tin_shares("cake bandwidth 10Mbit diffserv4", 1_000_000);
    assert!(
        (voice - 1.0).abs() < 0.02,
        "voice got {voice:.3} of 1 Mbit/s"
    );
    assert!(voice_delay < 3 * 1_211_200, "voice waited {voice_delay} ns");
    assert!(be > 8.0, "best effort got {be:.3}");
    // Above it, voice is held near R/4 and best effort gets the rest.
    let (be, voice, _) = tin_shares("cake bandwidth 10Mbit diffserv4", 20_000_000);
    assert!(
        (voice / 10.0 - 0.25).abs() < 0.02,
        "voice share {:.3}",
        voice / 10.0
    );
    assert!(
        (be / 10.0 - 0.75).abs() < 0.02,
        "best-effort share {:.3}",
        be / 10.0
    );
}

#[test]
fn diffserv3_ef_and_be_share_one_quarter_three_quarters() {
    let (be, voice, _) = tin_shares("cake bandwidth 10Mbit diffserv3", 20_000_000);
    assert!(
        (voice / (be + voice) - 0.25).abs() < 0.02,
        "EF {voice:.2} BE {be:.2}"
    );
}

#[test]
fn unlimited_tins_share_bytes_1024_64_256() {
    let q = cake("cake unlimited diffserv3");
    let srcs = [
        Source::udp("be", 1, 1, 1, 1514, 20_000_000),
        Source::udp("bulk", 1, 2, 2, 1514, 20_000_000).dscp(8),
        Source::udp("voice", 1, 3, 3, 1514, 20_000_000).dscp(46),
    ];
    let (r, _) = run(q, Some(10_000_000), &srcs, 12 * SEC, 2 * SEC);
    let tot: f64 = r.iter().map(|x| x.bytes_after_warmup as f64).sum();
    let share = |i: usize| r[i].bytes_after_warmup as f64 / tot;
    let w = [1024.0 / 1344.0, 64.0 / 1344.0, 256.0 / 1344.0];
    for (i, name) in ["be", "bulk", "voice"].iter().enumerate() {
        assert!(
            (share(i) - w[i]).abs() < 0.02,
            "{name} share {:.3} vs {:.3}",
            share(i),
            w[i]
        );
    }
}

/// Fill one flow at t=0, then dequeue every `step` from `from`; return drop times.
fn cobalt_drops(q: &mut Cake<Record>, n: u64, from: u64, step: u64, until: u64) -> Vec<u64> {
    for i in 0..n {
        q.enqueue(pkt(i, 100), 0);
    }
    let mut drops = vec![];
    let mut t = from;
    while t <= until && q.qlen() > 0 {
        let _ = q.dequeue(t);
        while let Some(d) = q.take_dropped() {
            assert_eq!(d.reason, DropReason::Aqm);
            drops.push(t);
        }
        t += step;
    }
    drops
}

#[test]
fn pristine_cobalt_slot_signals_the_second_over_target_packet_at_once() {
    let mut q = cake("cake unlimited besteffort flows");
    let drops = cobalt_drops(&mut q, 10, 10 * MS, 0, 10 * MS);
    // First over-target packet passes (count 1, drop_next = now because rec_inv_sqrt is 0);
    // the very next one is dropped with no grace interval.
    assert_eq!(drops.len(), 1);
    assert_eq!(q.qlen(), 0);
}

#[test]
fn cobalt_spacing_is_interval_over_exact_sqrt_count() {
    // Pristine slot: the packet at 10 ms passes (count 1), the next is signalled at once and
    // sets count 2 with drop_next = 10 ms + 100/sqrt(2) ms; after that each signal k (count k+1)
    // follows the previous by 100/sqrt(k+1) ms, using the exact cache below 16.
    let step = 200_000;
    let mut q = cake("cake unlimited besteffort flows");
    let drops = cobalt_drops(&mut q, 3000, 10 * MS, step, 600 * MS);
    assert!(drops.len() >= 9, "{} drops", drops.len());
    assert_eq!(drops[0], 10 * MS + step, "no grace on a pristine slot");
    let first_gap = (drops[1] - 10 * MS) as f64 / 1e6;
    assert!(
        (first_gap - 100.0 / 2f64.sqrt()).abs() <= 0.2 + 1e-9,
        "first gap {first_gap}"
    );
    for k in 2..9 {
        let gap = (drops[k] - drops[k - 1]) as f64 / 1e6;
        let want = 100.0 / ((k + 1) as f64).sqrt();
        assert!(
            (gap - want).abs() <= 0.2 + 1e-9,
            "gap {k}: {gap} ms vs {want:.3}"
        );
    }
}

#[test]
fn cobalt_count_decays_one_step_at_a_time_below_target() {
    let mut q = cake("cake unlimited besteffort flows");
    let _ = cobalt_drops(&mut q, 3000, 10 * MS, 200_000, 400 * MS);
    let idx = (0..1024)
        .find(|&i| q.flow_state(0, i).0.count > 0)
        .expect("the flow");
    // Drain, then feed one fresh packet per ms (sojourn 0, below target) and watch count.
    let mut t = 400 * MS;
    while q.qlen() > 0 {
        let _ = q.dequeue(t);
    }
    while q.take_dropped().is_some() {}
    let mut seen = vec![];
    for i in 0..1000 {
        t += MS;
        q.enqueue(pkt(100_000 + i, 100), t);
        let _ = q.dequeue(t);
        seen.push((t, q.flow_state(0, idx).0.count));
    }
    let start = seen[0].1;
    assert!(start >= 4, "count after catch-up {start}");
    assert!(
        seen.windows(2).all(|w| w[1].1 + 1 >= w[0].1),
        "count fell by more than one per step"
    );
    let zero_at = seen.iter().find(|s| s.1 == 0).expect("count reaches 0").0;
    // Decaying from `start` takes one control-law step per count: far longer than a reset.
    let min: f64 = (1..=start)
        .map(|k| 100.0 / f64::from(k).sqrt())
        .sum::<f64>()
        * 0.5;
    assert!(
        (zero_at - seen[0].0) as f64 / 1e6 >= min,
        "reached 0 after {} ms",
        (zero_at - seen[0].0) / MS
    );
}

#[test]
fn blue_raises_p_drop_once_per_target_on_overflow() {
    // memlimit 20 KiB holds 9 packets of truesize 2176; 12 at 100 ms overflow at once, then one
    // more each ms keeps overflowing. Target at 1 Mbit/s is 18.17 ms, so BLUE steps at 100,
    // 119 and 138 ms (strictly more than a target apart) and not in between.
    let mut q = cake("cake bandwidth 1Mbit besteffort flows memlimit 20kb");
    for i in 0..12 {
        q.enqueue(pkt(i, 1514), 100 * MS);
    }
    for k in 1..=40 {
        q.enqueue(pkt(100 + k, 1514), 100 * MS + k * MS);
    }
    let target = q.tin_params()[0].cparams.target;
    assert_eq!(target, 18_168_000);
    let idx = (0..1024)
        .find(|&i| q.flow_state(0, i).1 > 0)
        .expect("the flow");
    assert_eq!(q.flow_state(0, idx).0.p_drop, 3 << 24);
    assert_eq!(cake_stats(&q).tins[0].unresponsive_flows, 1);
}

#[test]
fn ack_filter_drops_the_oldest_redundant_ack() {
    let mut q = cake("cake bandwidth 1Mbit besteffort ack-filter");
    for (i, a) in [1000u32, 2000, 3000].iter().enumerate() {
        q.enqueue(ack(i as u64, *a), 0);
    }
    let d = q.take_dropped().expect("an ACK dropped");
    assert_eq!((d.packet.id, d.reason), (0, DropReason::AckFilter));
    assert_eq!(q.qlen(), 2);
    let s = cake_stats(&q);
    assert_eq!(
        (s.tins[0].ack_drops, s.tins[0].drops),
        (1, 0),
        "ack drops are not tin drops"
    );
    assert_eq!(q.stats().drops, 1);
}

#[test]
fn split_gso_queues_each_segment() {
    let mut q = cake("cake unlimited besteffort");
    let mut p = pkt(1, 66 + 10 * 1448);
    p.meta.gso_segs = 10;
    p.meta.gso_size = 1448;
    p.meta.hdr_len = 66;
    q.enqueue(p, 0);
    assert_eq!(q.qlen(), 10);
    let lens: Vec<u32> = std::iter::from_fn(|| q.dequeue(0).packet())
        .map(|p| p.meta.len)
        .collect();
    assert_eq!(lens, vec![1514; 10]);
    let mut q = cake("cake unlimited besteffort no-split-gso");
    let mut p = pkt(1, 66 + 10 * 1448);
    p.meta.gso_segs = 10;
    p.meta.gso_size = 1448;
    p.meta.hdr_len = 66;
    q.enqueue(p, 0);
    assert_eq!(q.qlen(), 1);
}

#[test]
fn wash_clears_dscp_after_classifying() {
    let mut q = cake("cake unlimited diffserv3 wash");
    let mut p = pkt_in(1, 200, udp_flow(1, 1, 1));
    p.meta.dscp = 46;
    q.enqueue(p, 0);
    let s = cake_stats(&q);
    assert_eq!(
        s.tins[2].sent_packets, 1,
        "classified into Voice (tc column order: Bulk, BE, Voice)"
    );
    let out = q.dequeue(0).packet().expect("packet");
    assert_eq!(out.meta.dscp, 0);
}

#[test]
fn a_sparse_flow_waits_less_than_one_packet_time_in_cake() {
    let q = cake("cake bandwidth 10Mbit besteffort");
    let mut srcs: Vec<Source> = (0..4)
        .map(|i| Source::udp("bulk", 1, 1, 10 + i, 1514, 10_000_000))
        .collect();
    srcs.push(Source::udp("ping", 2, 2, 7, 100, 8_000));
    let (r, q) = run(q, None, &srcs, 8 * SEC, SEC);
    assert_eq!(r[4].dropped, 0);
    assert!(
        r[4].max_sojourn_after(SEC) <= 1_211_200,
        "ping waited {}",
        r[4].max_sojourn_after(SEC)
    );
    let s = cake_stats(&q);
    // sp_delay is the tin's base-delay EWMA (fast down, slow up) over *all* its packets, most of
    // them bulk: it sits near one packet time (docs/algorithms.md §3.13), far below av_delay.
    let t = &s.tins[0];
    assert!(
        t.base_delay_us * 1000 <= 1_211_200 * 3 / 2,
        "sp_delay {} us",
        t.base_delay_us
    );
    assert!(
        t.base_delay_us * 4 < t.avg_delay_us,
        "sp_delay {} vs av_delay {} us",
        t.base_delay_us,
        t.avg_delay_us
    );
}

#[test]
fn overflow_trims_the_fattest_flow_across_all_tins() {
    // memlimit 20 KiB (9 packets). Bulk (CS1) holds 6, Voice (EF) 3; a 10th packet arrives in
    // Best Effort. The Bulk flow is fattest, so it loses its head packet, not the arrival.
    let mut q = cake("cake bandwidth 10Mbit diffserv3 flows memlimit 20kb");
    let mut bulk = pkt_in(0, 1514, udp_flow(1, 1, 1));
    bulk.meta.dscp = 8;
    let mut voice = pkt_in(0, 1514, udp_flow(2, 2, 2));
    voice.meta.dscp = 46;
    for i in 0..6 {
        bulk.id = i;
        q.enqueue(bulk, 0);
    }
    for i in 10..13 {
        voice.id = i;
        q.enqueue(voice, 0);
    }
    assert!(q.take_dropped().is_none());
    q.enqueue(pkt_in(20, 1514, udp_flow(3, 3, 3)), 0);
    let d = q.take_dropped().expect("one overflow drop");
    assert_eq!((d.packet.id, d.reason), (0, DropReason::Overlimit));
    assert!(q.take_dropped().is_none());
    let s = cake_stats(&q);
    // tc column order for diffserv3: Bulk, Best Effort, Voice.
    assert_eq!(
        (s.tins[0].drops, s.tins[1].drops, s.tins[2].drops),
        (1, 0, 0)
    );
}

/// `tc qdisc change … cake bandwidth R`: a spec that differs only in its rate is taken in place,
/// the queued packets kept; any other difference is refused (the caller replaces the qdisc).
#[test]
fn a_new_rate_is_taken_in_place_and_nothing_else_is() {
    let mut q = cake("cake bandwidth 10Mbit besteffort");
    for i in 0..5 {
        let _ = q.enqueue(pkt_in(i, 1514, udp_flow(1, 2, 3)), 0);
    }
    let new: QdiscSpec = "cake bandwidth 20Mbit besteffort".parse().expect("valid");
    assert_eq!(q.change(&new), Some(1));
    assert_eq!(q.stats().qlen, 5, "the queue stays");
    assert!(
        q.stats().options.contains("bandwidth 20Mbit"),
        "{}",
        q.stats().options
    );
    let other: QdiscSpec = "cake bandwidth 20Mbit diffserv4".parse().expect("valid");
    assert_eq!(q.change(&other), None);
    let fq: QdiscSpec = "fq_codel".parse().expect("valid");
    assert_eq!(q.change(&fq), None);
    assert_eq!(q.stats().qlen, 5);
}
