//! Unit tests of `tcp`.

use super::*;

fn ack_of(r: &mut Receiver, seq: u64, now: Nanos) -> Option<AckInfo> {
    r.on_data(seq, false, false, now, now)
}

#[test]
fn receiver_acks_every_second_segment_and_at_once_on_a_hole() {
    let mut r = Receiver::new();
    assert!(ack_of(&mut r, 0, 0).is_none());
    assert_eq!(ack_of(&mut r, 1, 0).map(|a| a.ack), Some(2));
    let a = ack_of(&mut r, 3, 0).expect("out of order: immediate");
    assert_eq!((a.ack, a.sack_len, a.sack[0]), (2, 1, (3, 4)));
    let a = ack_of(&mut r, 2, 0).expect("hole filled: immediate");
    assert_eq!((a.ack, a.sack_len), (4, 0));
    assert_eq!(r.delivered, 4);
}

#[test]
fn delayed_ack_fires_after_40_ms() {
    let mut r = Receiver::new();
    assert!(ack_of(&mut r, 0, 1000).is_none());
    assert_eq!(r.poll_timeout(), Some(1000 + DELACK));
    assert!(r.on_timeout(1000 + DELACK - 1).is_none());
    assert_eq!(r.on_timeout(1000 + DELACK).map(|a| a.ack), Some(1));
}

#[test]
fn three_sacks_above_a_hole_trigger_one_retransmission_and_one_reduction() {
    let mut s = Sender::new(Algorithm::Reno);
    let sent: Vec<u64> = std::iter::from_fn(|| s.poll_transmit(0))
        .map(|x| x.seq)
        .collect();
    assert_eq!(sent.len(), 10, "IW10");
    // Segment 0 lost; 1, 2, 3 SACKed.
    for end in 2..=4 {
        s.on_ack(
            &AckInfo {
                ack: 0,
                sack: [(1, end), (0, 0), (0, 0)],
                sack_len: 1,
                ece: false,
                echo: 0,
                ce: 0,
            },
            1_000_000,
        );
    }
    assert_eq!(s.loss_events, 1);
    // The first two SACKs are forward progress and grow the slow-start window to 12; the
    // third reveals the loss and halves it.
    assert_eq!(s.cwnd(), 6.0);
    let r = s.poll_transmit(1_000_000).expect("retransmission");
    assert_eq!((r.seq, r.retransmit), (0, true));
}

#[test]
fn a_lost_retransmission_is_detected_from_later_sacks_without_rto() {
    let mut s = Sender::new(Algorithm::Reno);
    while s.poll_transmit(0).is_some() {}
    let sack = |blocks: &[(u64, u64)]| {
        let mut a = AckInfo {
            ack: 0,
            sack: [(0, 0); 3],
            sack_len: blocks.len() as u8,
            ece: false,
            echo: 0,
            ce: 0,
        };
        a.sack[..blocks.len()].copy_from_slice(blocks);
        a
    };
    for end in 2..=4 {
        s.on_ack(&sack(&[(1, end)]), 1_000_000);
    }
    let r = s.poll_transmit(1_000_000).expect("fast retransmit");
    assert_eq!((r.seq, r.retransmit), (0, true));
    // Everything else arrives, and so does new data sent after the retransmission — but not
    // the retransmission itself: it was lost too.
    s.on_ack(&sack(&[(1, 10)]), 2_000_000);
    let mut sent_after = vec![];
    while let Some(seg) = s.poll_transmit(2_000_000) {
        sent_after.push(seg);
    }
    assert!(
        sent_after.iter().all(|x| !x.retransmit),
        "nothing more to repair yet"
    );
    let new = sent_after.first().map(|x| x.seq).expect("new data");
    s.on_ack(&sack(&[(1, new + 1)]), 3_000_000);
    let again = s
        .poll_transmit(3_000_000)
        .expect("the lost retransmission goes again");
    assert_eq!((again.seq, again.retransmit), (0, true));
    assert_eq!(s.timeouts, 0);
}

#[test]
fn ece_halves_once_per_window_and_sets_cwr() {
    let mut s = Sender::new(Algorithm::Reno);
    while s.poll_transmit(0).is_some() {}
    let ack = |n| AckInfo {
        ack: n,
        sack: [(0, 0); 3],
        sack_len: 0,
        ece: true,
        echo: 0,
        ce: 0,
    };
    s.on_ack(&ack(2), 1);
    s.on_ack(&ack(4), 2);
    s.on_ack(&ack(8), 3);
    assert_eq!(s.ecn_events, 1, "once per window");
    assert_eq!(s.cwnd(), 5.0, "no growth in CWR");
    let seg = s
        .poll_transmit(4)
        .expect("room after the window shrank to 5 with 2 outstanding");
    assert!(seg.cwr);
}

/// Everything the sender will send at `now`, by segment number.
fn burst(s: &mut Sender, now: Nanos) -> Vec<u64> {
    std::iter::from_fn(|| s.poll_transmit(now))
        .map(|x| x.seq)
        .collect()
}

/// One round trip of 1 ms: `sent` is ACKed, one ACK per two segments (RTT sample 1 ms),
/// and what the sender then sends replaces it.
fn round(s: &mut Sender, sent: &mut Vec<u64>, now: &mut Nanos) {
    *now += 1_000_000;
    for pair in sent.chunks(2) {
        let last = pair[pair.len() - 1];
        s.on_ack(
            &AckInfo {
                ack: last + 1,
                sack: [(0, 0); 3],
                sack_len: 0,
                ece: false,
                echo: *now - 1_000_000,
                ce: 0,
            },
            *now,
        );
    }
    *sent = burst(s, *now);
}

#[test]
fn a_window_stops_new_data_and_cwnd_growth_but_not_retransmissions() {
    let mut s = Sender::new(Algorithm::Cubic);
    s.set_window(Some(16));
    let mut now = 1_000_000;
    let mut sent = burst(&mut s, now);
    assert_eq!(sent.len(), 10, "IW10 is below the window");
    // Slow start: cwnd doubles per round until the window, not cwnd, stops the sender;
    // then (Linux's tcp_is_cwnd_limited) cwnd may reach twice the most that was out, and
    // no more.
    for _ in 0..20 {
        round(&mut s, &mut sent, &mut now);
        assert!(s.outstanding() <= 16, "{} out", s.outstanding());
    }
    assert_eq!(s.outstanding(), 16);
    assert!(s.cwnd() <= 32.0, "cwnd {} grew past 2 × window", s.cwnd());
    assert!(s.cwnd() >= 16.0);
    // In congestion avoidance a window-limited sender does not grow at all.
    s.cc.ssthresh = s.cc.cwnd;
    let before = s.cwnd();
    for _ in 0..50 {
        round(&mut s, &mut sent, &mut now);
    }
    assert_eq!(s.cwnd(), before, "no growth while the window limits");
    // A loss: the hole is retransmitted even though the window is full.
    let una = s.snd_una;
    for end in una + 2..=una + 4 {
        s.on_ack(
            &AckInfo {
                ack: una,
                sack: [(una + 1, end), (0, 0), (0, 0)],
                sack_len: 1,
                ece: false,
                echo: 0,
                ce: 0,
            },
            now,
        );
    }
    let r = s
        .poll_transmit(now)
        .expect("retransmission inside the window");
    assert_eq!((r.seq, r.retransmit), (una, true));
    assert!(
        s.poll_transmit(now).is_none(),
        "no new data past the window"
    );
}

#[test]
fn without_a_window_a_bulk_sender_is_always_cwnd_limited() {
    let mut s = Sender::new(Algorithm::Reno);
    let mut now = 0;
    let mut sent = burst(&mut s, now);
    for _ in 0..5 {
        round(&mut s, &mut sent, &mut now);
    }
    // Slow start from IW10 doubles every round: 10, 20, 40, 80, 160, 320.
    assert_eq!(s.cwnd(), 320.0);
    assert_eq!(s.outstanding(), 320);
}

#[test]
fn rto_resends_from_the_first_unacked_segment() {
    let mut s = Sender::new(Algorithm::Cubic);
    while s.poll_transmit(0).is_some() {}
    let d = s.poll_timeout().expect("armed");
    assert_eq!(d, RTO_INIT);
    s.on_timeout(d);
    assert_eq!(s.cwnd(), 1.0);
    let r = s.poll_transmit(d).expect("retransmit");
    assert_eq!((r.seq, r.retransmit), (0, true));
    assert!(s.poll_transmit(d).is_none(), "cwnd 1");
    assert_eq!(s.poll_timeout(), Some(d + 2 * RTO_INIT), "backed off");
}

#[test]
fn with_fq_pacing_segments_carry_departure_times_at_the_pacing_rate() {
    const MS: Nanos = 1_000_000;
    let mut s = Sender::new(Algorithm::Cubic);
    s.set_fq_pacing(true);
    // No RTT yet: unlimited, every stamp is `now`.
    let iw: Vec<Nanos> =
        std::iter::from_fn(|| s.poll_transmit(MS).map(|_| s.departure())).collect();
    assert_eq!(iw, vec![MS; 10]);
    assert!(s.pacing_rate().is_none());
    s.on_ack(
        &AckInfo {
            ack: 10,
            sack: [(0, 0); 3],
            sack_len: 0,
            ece: false,
            echo: MS,
            ce: 0,
        },
        41 * MS,
    );
    // Slow start (cwnd 20 < ssthresh / 2): 200 % of cwnd × MSS / SRTT = 2 × 20 segments per
    // 40 ms, so 1 ms per segment. The first paced segment has half its time forgiven (the
    // clock jumped from 1 ms to 41 ms while idle).
    let rate = s.pacing_rate().expect("an RTT sample");
    assert!(
        (rate - 2.0 * 20.0 * f64::from(crate::packet::MSS) / 0.040).abs() < 1.0,
        "{rate}"
    );
    let stamps: Vec<Nanos> =
        std::iter::from_fn(|| s.poll_transmit(41 * MS).map(|_| s.departure())).collect();
    assert_eq!(stamps.len(), 20);
    assert_eq!(
        &stamps[..3],
        &[41 * MS, 41 * MS + MS / 2, 41 * MS + 3 * MS / 2]
    );
    // TSQ: 1 ms of the pacing rate (1414 B here), or two segments' truesize if more.
    assert_eq!(s.small_queue_limit(2176), 4352);
    assert_eq!(s.small_queue_limit(100), (rate / 1024.0) as u64);
    // Without fq the sender stamps nothing.
    let mut plain = Sender::new(Algorithm::Cubic);
    plain.poll_transmit(0);
    assert_eq!(plain.departure(), 0);
}

/// Prague: α follows the fraction of CE-marked segments (EWMA, gain 1/16, once per round
/// trip), each round with marks takes α/2 of cwnd away, and cwnd grows only by unmarked ACKs.
#[test]
fn prague_alpha_tracks_the_marked_fraction() {
    const MS: Nanos = 1_000_000;
    let mut s = Sender::new(Algorithm::Prague);
    let (mut now, mut ce, mut acked) = (MS, 0u64, 0u64);
    for round in 0..80 {
        let sent: Vec<u64> = std::iter::from_fn(|| s.poll_transmit(now).map(|x| x.seq)).collect();
        let at = now;
        now += 20 * MS;
        for seq in sent {
            acked += 1;
            // From round 3 on, one segment in four arrives CE-marked.
            if round >= 3 && acked % 4 == 0 {
                ce += 1;
            }
            let a = AckInfo {
                ack: seq + 1,
                sack: [(0, 0); 3],
                sack_len: 0,
                ece: false,
                echo: at,
                ce,
            };
            s.on_ack(&a, now);
        }
        if round == 2 {
            let p = s.prague().expect("prague");
            assert_eq!(p.alpha, 1.0, "no update before the first mark");
        }
    }
    let p = s.prague().expect("prague");
    // 0.25 + 0.75 × (15/16)^~76 ≈ 0.26.
    assert!((p.alpha - 0.25).abs() < 0.03, "alpha {}", p.alpha);
    assert!(s.ecn_events > 10, "reductions {}", s.ecn_events);
    assert_eq!(s.loss_events, 0);
    // Each round trip takes α·W/2 off and adds back the unmarked 3/4 of a segment: W settles
    // near 1.5 / α ≈ 5.8 (whole segments, one taken per ACK).
    let w = 1.5 / p.alpha;
    assert!(
        (s.cwnd() - w).abs() <= 1.5,
        "cwnd {} against {w:.1}",
        s.cwnd()
    );
}
