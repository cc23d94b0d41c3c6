//! Unit tests of `wifi`.

#![allow(clippy::unwrap_used)]

use super::*;

#[test]
fn mpdu_and_ack_sizes() {
    assert_eq!(mpdu_len(1514), 1538);
    assert_eq!(ampdu_sub_len(1514), 1544);
    assert_eq!(ack_ns("6".parse().unwrap(), false), 20_000 + 6 * 4_000);
    assert_eq!(ack_ns(PhyRate::ht(7), true), 20_000 + 3 * 4_000);
}

#[test]
fn the_reorder_buffer_releases_in_sequence_and_skips_given_up_frames() {
    use crate::packet::Body;
    use debloat_core::flow::FlowKey;
    let p = |seq: u32| SimPacket {
        meta: debloat_core::PacketMeta::new(100, FlowKey::NonIp { ethertype: 0 }),
        body: Body::Ping {
            probe: 0,
            seq,
            sent_at: 0,
            reply: false,
            server_at: 0,
        },
    };
    let mut r = Reorder::default();
    let mut out = Vec::new();
    r.receive(1, Some(p(1)), &mut out);
    r.receive(3, Some(p(3)), &mut out);
    assert!(out.is_empty());
    r.receive(0, Some(p(0)), &mut out);
    assert_eq!(out.len(), 2);
    r.receive(2, None, &mut out);
    let seqs: Vec<u32> = out
        .iter()
        .map(|x| match x.body {
            Body::Ping { seq, .. } => seq,
            _ => 99,
        })
        .collect();
    assert_eq!(seqs, [0, 1, 3]);
    assert!(r.held.is_empty());
}

/// A packet from the wired host to station `sta` (198.18.2.(11 + sta)) on flow `port`.
fn to_station(sta: u8, port: u16, len: u32) -> SimPacket {
    use std::net::{IpAddr, Ipv4Addr};
    let mut p = marked(0, len);
    p.meta.flow = debloat_core::flow::FlowKey::ip(
        IpAddr::V4(Ipv4Addr::new(198, 18, 1, 3)),
        IpAddr::V4(Ipv4Addr::new(198, 18, 2, 11 + sta)),
        port,
        5001,
        6,
    );
    p
}

/// ath9k with a bulk backlog for station 1; a small frame for station 0 arrives while the
/// first aggregate is on the air. Returns the station of each of the first five aggregates.
fn aggregate_order(q: ApQueueing) -> Vec<usize> {
    let cfg = WifiConfig::new(&[PhyRate::ht(15), PhyRate::ht(12)], q).ath9k();
    let mut w = Wifi::new(cfg, debloat_core::FlowHasher::new([1, 2]), 1);
    for _ in 0..400 {
        w.ap_enqueue(1, to_station(1, 1000, 1514), 0);
    }
    let mut end = w.start(0).unwrap();
    if q != ApQueueing::Airtime {
        // ath9k's 123 pending frames count those in aggregates, on the air included.
        let held = w.driver_len[Ac::Be.idx()] + w.driver_in_hw(Ac::Be);
        assert_eq!(held, 123, "frames the driver holds");
    }
    w.ap_enqueue(0, to_station(0, 2000, 98), 1_000);
    let mut order = vec![w.current[0].1.sta];
    let mut out = Vec::new();
    w.complete(end, &mut out);
    for _ in 0..4 {
        let e = w.start(end).unwrap();
        order.push(w.current[0].1.sta);
        w.complete(e, &mut out);
        end = e;
    }
    order
}

#[test]
fn a_frame_held_in_the_qdisc_misses_the_aggregate_built_as_room_is_made() {
    // Under a qdisc the driver is full (123 frames of station 1): at the first completion
    // ath9k builds the next aggregate from what it holds, then the qdisc hands over the
    // small frame, which goes two aggregates later.
    assert_eq!(aggregate_order(ApQueueing::FqCodel), [1, 1, 1, 0, 1]);
    // With mac80211's queues the frame is in its TXQ at once and the scheduler takes it
    // into the aggregate built at that completion.
    assert_eq!(aggregate_order(ApQueueing::Airtime), [1, 1, 0, 1, 1]);
}

/// A shaping qdisc at the AP (cake at 1 Mbit/s) holds frames back: the driver is told when
/// to ask again and, asked then, takes each frame at the shaper's pace — none is stranded.
#[test]
fn a_shaping_ap_qdisc_wakes_the_driver_when_it_releases() {
    let mut cfg = WifiConfig::new(&[PhyRate::ht(7)], ApQueueing::Legacy);
    cfg.ap_qdisc = "cake bandwidth 1Mbit".parse().unwrap();
    let mut w = Wifi::new(cfg, debloat_core::FlowHasher::new([1, 2]), 1);
    for _ in 0..20 {
        w.ap_enqueue(0, marked(0, 1000), 0);
    }
    let be = Ac::Be.idx();
    let in_qdisc = |w: &Wifi| match &w.source {
        Source::Qdisc(qs) => qs[be].qlen(),
        Source::Mac { .. } => unreachable!("legacy queueing has a qdisc"),
    };
    assert!(in_qdisc(&w) > 10, "the shaper holds frames back");
    let mut wakes = Vec::new();
    while let Some(t) = w.take_wakeup() {
        wakes.push(t);
        w.wake(t);
    }
    assert_eq!(in_qdisc(&w), 0, "every frame reached the driver");
    // 1000-byte frames at 1 Mbit/s: one every 8 ms, the last about 19 × 8 ms in.
    let last = *wakes.last().unwrap();
    assert!((140_000_000..170_000_000).contains(&last), "{wakes:?}");
}

#[test]
fn a_collision_doubles_each_colliders_contention_window_once() {
    let ping = || marked(0, 100);
    let cfg = WifiConfig::new(&[PhyRate::ht(7), PhyRate::ht(7)], ApQueueing::Airtime);
    let mut w = Wifi::new(cfg, debloat_core::FlowHasher::new([1, 2]), 1);
    let be = |s| idx(s, Ac::Be);
    let cw_min = Edca::station(Ac::Be).cw_min;
    for s in 0..2 {
        w.sta_enqueue(s, ping(), 0);
        w.sta[be(s)].backoff = Some(3);
    }
    let end = w.start(0).unwrap();
    assert_eq!(w.collisions, 1);
    let mut out = Vec::new();
    w.complete(end, &mut out);
    assert!(out.is_empty(), "collided frames are not delivered");
    assert_eq!(w.sta[be(0)].cw, 2 * cw_min + 1);
    assert_eq!(w.sta[be(1)].cw, 2 * cw_min + 1);
    // The retry goes through and resets the window.
    w.sta[be(0)].backoff = Some(0);
    w.sta[be(1)].backoff = Some(5);
    let end = w.start(end).unwrap();
    w.complete(end, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(w.sta[be(0)].cw, cw_min);
    assert_eq!(w.sta[be(1)].cw, 2 * cw_min + 1);
}

fn marked(dscp: u8, len: u32) -> SimPacket {
    use crate::packet::Body;
    use debloat_core::flow::FlowKey;
    let mut meta = debloat_core::PacketMeta::new(len, FlowKey::NonIp { ethertype: 0 });
    meta.dscp = dscp;
    SimPacket {
        meta,
        body: Body::Ping {
            probe: 0,
            seq: 0,
            sent_at: 0,
            reply: true,
            server_at: 0,
        },
    }
}

/// Best effort from one sender in two TIDs at once (DSCP 0 → TID 0, AF21 → TID 3): every
/// aggregate holds one TID, each TID numbers its own frames 0, 1, 2, … (its block-ack
/// session) and is delivered in order. Each TID is kept 40 frames deep (more than a TXOP
/// carries, too few for CoDel to drop). Returns frames delivered per TID.
fn two_tids_of_one_category(cfg: WifiConfig, from_station: bool) -> [usize; 2] {
    let mut w = Wifi::new(cfg, debloat_core::FlowHasher::new([1, 2]), 3);
    let (mut now, mut out) = (0, Vec::new());
    let mut made = [0u32; 2];
    let mut aggs = [0u32; 2];
    let mut next_hw_seq = [0u64; 2];
    let mut delivered: [Vec<u32>; 2] = Default::default();
    for _ in 0..400 {
        for (k, dscp) in [(0usize, 0u8), (1, 18)] {
            while made[k] as usize - delivered[k].len() < 40 {
                let mut p = marked(dscp, 1514);
                if let crate::packet::Body::Ping { seq, .. } = &mut p.body {
                    *seq = made[k];
                }
                made[k] += 1;
                if from_station {
                    w.sta_enqueue(0, p, now);
                } else {
                    w.ap_enqueue(0, p, now);
                }
            }
        }
        let Some(end) = w.start(now) else {
            now += 10_000;
            continue;
        };
        for (_, agg) in &w.current {
            let k = usize::from(agg.tid == 3);
            assert!(agg.tid == 0 || agg.tid == 3, "tid {}", agg.tid);
            aggs[k] += 1;
            for f in &agg.frames {
                assert_eq!(w.cfg.tid_of(&f.pkt), agg.tid, "one TID per aggregate");
                assert_eq!(f.seq, next_hw_seq[k], "TID {}'s own numbering", agg.tid);
                next_hw_seq[k] += 1;
            }
        }
        w.complete(end, &mut out);
        for (_, p) in out.drain(..) {
            if let crate::packet::Body::Ping { seq, .. } = p.body {
                delivered[usize::from(p.meta.dscp == 18)].push(seq);
            }
        }
        now = end;
    }
    for (k, d) in delivered.iter().enumerate() {
        assert!(d.len() > 500, "TID {k}: {} delivered", d.len());
        assert!(
            d.iter().enumerate().all(|(i, &s)| s == i as u32),
            "TID {k} in order, nothing lost"
        );
    }
    assert!(aggs[0] > 0 && aggs[1] > 0);
    [delivered[0].len(), delivered[1].len()]
}

#[test]
fn each_tid_has_its_own_queue_aggregates_and_sequence_numbers() {
    let rates = [PhyRate::ht(7)];
    for (name, cfg, from_station) in [
        (
            "airtime, ath10k",
            WifiConfig::new(&rates, ApQueueing::Airtime),
            false,
        ),
        (
            "airtime, ath9k",
            WifiConfig::new(&rates, ApQueueing::Airtime).ath9k(),
            false,
        ),
        (
            "legacy, ath10k",
            WifiConfig::new(&rates, ApQueueing::Legacy),
            false,
        ),
        ("station", WifiConfig::new(&rates, ApQueueing::Legacy), true),
    ] {
        let [a, b] = two_tids_of_one_category(cfg, from_station);
        let share = a as f64 / (a + b) as f64;
        assert!(
            (0.45..=0.55).contains(&share),
            "{name}: TID 0 got {a} frames through, TID 3 {b}"
        );
    }
}

/// Two saturated stations, one sending voice (EF) and one best effort: TXOPs won by each.
fn voice_vs_best_effort(wmm: bool) -> [u32; 2] {
    let mut cfg = WifiConfig::new(&[PhyRate::ht(7), PhyRate::ht(7)], ApQueueing::Airtime);
    cfg.wmm = wmm;
    let mut w = Wifi::new(cfg, debloat_core::FlowHasher::new([1, 2]), 7);
    let mut won = [0u32; 2];
    let mut now = 0;
    let mut out = Vec::new();
    for _ in 0..4000 {
        for (s, dscp) in [(0, 46), (1, 0)] {
            while w
                .sta_q
                .iter()
                .skip(s * N_AC)
                .take(N_AC)
                .map(|q| q.qlen())
                .sum::<usize>()
                < 8
            {
                w.sta_enqueue(s, marked(dscp, 1514), now);
            }
        }
        let end = w.start(now).unwrap();
        if !w.collided {
            won[w.current[0].1.sta] += 1;
        }
        w.complete(end, &mut out);
        out.clear();
        now = end;
    }
    won
}

#[test]
fn voice_wins_the_channel_over_best_effort_and_equal_without_wmm() {
    let [vo, be] = voice_vs_best_effort(true);
    // VO waits 2 + [0, 3] slots, BE 3 + [0, 15] and its counter only runs in the slots
    // past its longer AIFS: voice takes nearly every TXOP (≈99 % here).
    let share = f64::from(vo) / f64::from(vo + be);
    assert!(share > 0.95, "voice {vo} TXOPs vs best effort {be}");
    assert!(be > 0, "best effort is slowed, not locked out");
    let [a, b] = voice_vs_best_effort(false);
    let share = f64::from(a) / f64::from(a + b);
    assert!((share - 0.5).abs() < 0.05, "without WMM: {a} vs {b}");
}

#[test]
fn minstrel_sizes_aggregates_at_the_one_stream_end_of_the_chain() {
    // Best effort to a station at HT MCS 12 (78 Mbit/s, 2 streams): with a fixed rate the
    // aggregate fills 4 ms at 78 Mbit/s; with minstrel_ht the chain ends at MCS 4
    // (39 Mbit/s), and ath9k sizes the aggregate to last 4 ms there — 2 ms at MCS 12.
    let r = PhyRate::ht(12);
    let frames = |cfg: WifiConfig| {
        let w = Wifi::new(cfg, debloat_core::FlowHasher::new([1, 2]), 1);
        let mut h = Vec::new();
        while w.fits(0, Ac::Be, &h, 1514) {
            h.push(1514);
        }
        h.len() as u32
    };
    let fixed = frames(WifiConfig::new(&[r], ApQueueing::Airtime));
    let auto = frames(WifiConfig::new(&[r], ApQueueing::Airtime).minstrel());
    let at = |rate: PhyRate, n: u32| rate.ppdu_ns(n * ampdu_sub_len(1514));
    assert!(
        at(r, fixed) <= 4_000_000 && at(r, fixed + 1) > 4_000_000,
        "{fixed}"
    );
    let slow = PhyRate::ht(4);
    assert!(
        at(slow, auto) <= 4_000_000 && at(slow, auto + 1) > 4_000_000,
        "{auto}"
    );
    assert_eq!((fixed, auto), (24, 12));
    assert!(at(r, auto) < 2_100_000);
    // A one-stream rate is its own most reliable rate: nothing changes.
    let one = PhyRate::ht(7);
    assert_eq!(
        frames(WifiConfig::new(&[one], ApQueueing::Airtime)),
        frames(WifiConfig::new(&[one], ApQueueing::Airtime).minstrel())
    );
}

#[test]
fn voice_is_not_aggregated_and_bursts_within_its_txop() {
    let r = PhyRate::ht(7);
    let one = r.ppdu_ns(mpdu_len(1514)) + SIFS_NS + ack_ns(r, false);
    // Three MPDUs: each with its ACK, SIFS-separated.
    assert_eq!(
        txop_ns(r, Ac::Vo, [1514u32; 3].into_iter()),
        3 * one + 2 * SIFS_NS
    );
    // Best effort sends them as one A-MPDU with a block ACK: much shorter.
    let agg = txop_ns(r, Ac::Be, [1514u32; 3].into_iter());
    assert_eq!(
        agg,
        r.ppdu_ns(3 * ampdu_sub_len(1514)) + SIFS_NS + ack_ns(r, true)
    );
    assert!(agg < 3 * one);
    let cfg = WifiConfig::new(&[r], ApQueueing::Airtime);
    let w = Wifi::new(cfg, debloat_core::FlowHasher::new([1, 2]), 1);
    // At 65 Mbit/s a full frame and its ACK take ≈0.25 ms: 1.504 ms of TXOP holds 5.
    let count = |ac| {
        let mut h = Vec::new();
        while w.fits(0, ac, &h, 1514) {
            h.push(1514);
        }
        h.len() as u32
    };
    let vo = count(Ac::Vo);
    assert_eq!(vo, 5);
    assert!(txop_ns(r, Ac::Vo, std::iter::repeat_n(1514, 5)) <= 1_504_000);
    // Video aggregates up to its 3 ms TXOP, best effort up to the driver's 4 ms.
    let (vi, be) = (count(Ac::Vi), count(Ac::Be));
    assert!(r.ppdu_ns(vi * ampdu_sub_len(1514)) <= 3_008_000);
    assert!(
        vi < be && be as usize <= MAX_AMPDU_FRAMES,
        "VI {vi}, BE {be}"
    );
}

#[test]
fn an_internal_collision_lets_the_higher_category_send() {
    let cfg = WifiConfig::new(&[PhyRate::ht(7)], ApQueueing::Airtime);
    let mut w = Wifi::new(cfg, debloat_core::FlowHasher::new([1, 2]), 1);
    w.sta_enqueue(0, marked(0, 1514), 0); // BE: AIFSN 3
    w.sta_enqueue(0, marked(40, 1514), 0); // VI: AIFSN 2
    w.sta[idx(0, Ac::Be)].backoff = Some(1);
    w.sta[idx(0, Ac::Vi)].backoff = Some(2);
    let end = w.start(0).unwrap();
    assert_eq!(w.collisions, 0, "one sender never collides with itself");
    assert_eq!(w.current.len(), 1);
    assert_eq!(w.current[0].1.ac, Ac::Vi);
    assert_eq!(
        w.sta[idx(0, Ac::Be)].cw,
        2 * Edca::station(Ac::Be).cw_min + 1
    );
    let mut out = Vec::new();
    w.complete(end, &mut out);
    assert_eq!(out.len(), 1);
}

#[test]
fn jain_index() {
    assert_eq!(jain(&[1.0, 1.0, 1.0]), Some(1.0));
    assert!((jain(&[1.0, 0.0]).unwrap() - 0.5).abs() < 1e-12);
    assert_eq!(jain(&[0.0]), None);
}
