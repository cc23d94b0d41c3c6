//! Unit tests of `path`.

use super::*;
use etherparse::PacketBuilder;

fn frame(port: u16, len: usize) -> Vec<u8> {
    let b = PacketBuilder::ethernet2([1; 6], [2; 6])
        .ipv4([198, 18, 1, 2], [198, 18, 2, 2], 64)
        .udp(port, 9);
    let mut buf = Vec::new();
    b.write(&mut buf, &vec![0u8; len - 42]).expect("write");
    buf
}

fn path(spec: &str, emu: &str) -> Path {
    Path::new(
        &spec.parse().expect("spec"),
        emu.parse().expect("emu"),
        FlowHasher::new([1, 2]),
        1,
    )
}

#[test]
fn frames_leave_after_serialisation_plus_delay() {
    // 1000 B at 8 Mbit/s = 1 ms, then 10 ms of delay.
    let mut p = path("pfifo", "rate 8Mbit delay 10ms");
    p.on_frame(frame(1, 1000), 0);
    p.on_frame(frame(1, 1000), 0);
    let mut times = Vec::new();
    while let Some(t) = p.next_wakeup() {
        p.poll(t, &mut |_| times.push(t));
    }
    assert_eq!(times, [11_000_000, 12_000_000]);
    assert!(p.accounted());
}

#[test]
fn a_full_fifo_drops_and_every_frame_is_accounted_for() {
    let mut p = path("pfifo limit 10", "rate 1Mbit loss 10%");
    for i in 0..100 {
        p.on_frame(frame(i, 1500), 0);
    }
    p.on_frame(vec![0xde, 0xad], 0);
    assert_eq!(p.counters().malformed, 1);
    assert!(p.counters().qdisc_dropped >= 89);
    assert!(p.accounted());
    let mut n = 0;
    while let Some(t) = p.next_wakeup() {
        p.poll(t, &mut |_| n += 1);
    }
    assert!(p.accounted());
    assert_eq!(n as u64, p.counters().sent);
    assert_eq!(p.counters().sent + p.counters().lost, 11);
}

#[test]
fn a_rate_change_keeps_every_queued_frame_and_takes_effect() {
    let mut p = path("cake bandwidth 8Mbit", "");
    for i in 0..100 {
        p.on_frame(frame(i, 1000), 0);
    }
    let queued = p.qdisc().qlen();
    assert!(queued >= 99, "{queued}");
    p.change_qdisc("bandwidth 80Mbit").expect("cake can");
    assert_eq!(p.qdisc().qlen(), queued, "nothing dropped by the change");
    // 100 frames of 1000 B at 80 Mbit/s: about 10 ms, not the 100 ms of 8 Mbit/s.
    let mut last = 0;
    while let Some(t) = p.next_wakeup() {
        p.poll(t, &mut |_| last = t);
    }
    assert_eq!(p.counters().sent, 100);
    assert!(last < 15_000_000, "last frame left at {last} ns");
    let e = path("fq_codel", "")
        .change_qdisc("bandwidth 1Mbit")
        .expect_err("no shaper");
    assert_eq!(e, crate::control::ChangeError::NoShaper);
    assert!(e.to_string().contains("no shaper"), "{e}");
    assert!(matches!(
        p.change_qdisc("target 3ms"),
        Err(crate::control::ChangeError::Words { .. })
    ));
}

/// A flood of 100,000 distinct flows: the discipline's memory limit bounds what the gateway
/// holds (frames the discipline drops are freed), and every frame is accounted for.
#[test]
fn a_flood_of_100k_flows_stays_under_the_memory_limit() {
    for spec in [
        "cake bandwidth 1Mbit memlimit 2Mb",
        "fq_codel memory_limit 2Mb limit 100000",
    ] {
        let mut p = path(spec, "rate 1Mbit");
        for i in 0..100_000u32 {
            let mut f = frame((i % 60_000) as u16, 1000);
            // Vary the source address too: 100k distinct 5-tuples.
            f[28] = (i >> 16) as u8;
            f[29] = (i >> 8) as u8;
            p.on_frame(f, u64::from(i) * 1000);
        }
        let st = p.qdisc().stats();
        let held: u64 = st.qlen * (1000 + std::mem::size_of::<Frame>() as u64);
        assert!(
            held <= 2 << 20,
            "{spec}: {} frames held, {held} bytes",
            st.qlen
        );
        if let debloat_core::qdisc::stats::Xstats::Cake(c) = &st.xstats {
            // tc's "memory used" is the peak (Linux buffer_max_used): the arriving frame
            // counts before the overflow drop, so it may pass the limit by one frame.
            let one = 1000 + std::mem::size_of::<Frame>() as u64;
            assert!(
                c.memory_used <= c.memory_limit + one,
                "{spec}: {}",
                c.memory_used
            );
        }
        assert!(
            p.counters().qdisc_dropped > 90_000,
            "{spec}: {:?}",
            p.counters()
        );
        assert!(p.accounted(), "{spec}");
    }
}

#[test]
fn jitter_never_reorders() {
    let mut p = path("pfifo", "rate 100Mbit delay 5ms 4ms");
    for i in 0..200u16 {
        let mut f = frame(7, 200);
        f[50] = (i & 0xff) as u8;
        f[51] = (i >> 8) as u8;
        p.on_frame(f, u64::from(i) * 10_000);
    }
    let mut seen = Vec::new();
    while let Some(t) = p.next_wakeup() {
        p.poll(t, &mut |d| {
            seen.push(u16::from(d[50]) | (u16::from(d[51]) << 8))
        });
    }
    assert_eq!(seen, (0..200).collect::<Vec<_>>());
}

fn numbered(i: u16) -> Vec<u8> {
    let mut f = frame(7, 200);
    f[50] = (i & 0xff) as u8;
    f[51] = (i >> 8) as u8;
    f
}

fn drain(p: &mut Path) -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    while let Some(t) = p.next_wakeup() {
        p.poll(t, &mut |d| out.push((t, d.to_vec())));
    }
    out
}

/// `loss 100% ecn`: an ECN-capable frame leaves marked CE (checksum fixed), a Not-ECT
/// frame is lost, as netem's `ecn` does.
#[test]
fn ecn_marks_capable_frames_instead_of_losing_them() {
    let mut p = path("pfifo", "loss 100% ecn");
    let mut ect = frame(1, 200);
    ect[15] |= 2; // ECT(0), with the header checksum made right again
    let mut h = etherparse::Ipv4Header::from_slice(&ect[14..])
        .expect("ipv4")
        .0;
    h.header_checksum = h.calc_header_checksum();
    ect[14..34].copy_from_slice(&h.to_bytes());
    p.on_frame(ect, 0);
    p.on_frame(frame(2, 200), 0);
    let out = drain(&mut p);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].1[15] & 3, 3, "CE");
    let h = etherparse::Ipv4Header::from_slice(&out[0].1[14..])
        .expect("ipv4")
        .0;
    assert_eq!(h.header_checksum, h.calc_header_checksum());
    assert_eq!((p.counters().ecn_marked, p.counters().lost), (1, 1));
    assert!(p.accounted());
}

/// `duplicate 100%`: every frame twice; the copy is not copied again.
#[test]
fn duplicate_sends_each_frame_twice_and_counts_it() {
    let mut p = path("pfifo", "rate 10Mbit delay 1ms duplicate 100%");
    for i in 0..50 {
        p.on_frame(numbered(i), u64::from(i) * 1_000_000);
    }
    let out = drain(&mut p);
    assert_eq!(out.len(), 100);
    assert_eq!(p.counters().duplicated, 50);
    assert!(p.accounted());
}

/// `limit 10` with a 100 ms delay line: the wire holds 10 frames, the rest are counted.
#[test]
fn a_limit_drops_what_the_wire_cannot_hold() {
    let mut p = path("pfifo limit 1000", "delay 100ms limit 10");
    for i in 0..50 {
        p.on_frame(numbered(i), 0);
    }
    p.poll(0, &mut |_| {});
    assert_eq!((p.on_wire(), p.counters().overlimit), (10, 40));
    assert!(p.accounted());
    assert_eq!(drain(&mut p).len(), 10);
    assert!(p.accounted());
}

/// `delay 10ms reorder 30%`: reordered frames leave when serialised, ahead of delayed ones;
/// delayed frames keep their order among themselves.
#[test]
fn reordered_frames_overtake_delayed_ones() {
    let mut p = path("pfifo", "rate 100Mbit delay 10ms reorder 30%");
    for i in 0..1000u16 {
        p.on_frame(numbered(i), u64::from(i) * 100_000);
    }
    let out = drain(&mut p);
    assert_eq!(out.len(), 1000);
    let seq = |d: &[u8]| u16::from(d[50]) | (u16::from(d[51]) << 8);
    let r = p.counters().reordered as f64 / 1000.0;
    assert!((0.25..0.35).contains(&r), "reordered share {r}");
    let late: Vec<u16> = out
        .iter()
        .filter(|(t, d)| *t >= u64::from(seq(d)) * 100_000 + 10_000_000)
        .map(|(_, d)| seq(d))
        .collect();
    assert_eq!(late.len() as u64, 1000 - p.counters().reordered);
    assert!(
        late.windows(2).all(|w| w[0] < w[1]),
        "delayed frames in order"
    );
    let inversions = out
        .windows(2)
        .filter(|w| seq(&w[0].1) > seq(&w[1].1))
        .count();
    assert!(inversions > 100, "{inversions}");
    assert!(p.accounted());
}

/// `loss gemodel 1% 10%` on the path: about p / (p + r) = 9% of frames lost, in bursts.
#[test]
fn gilbert_elliott_loss_on_the_wire() {
    let mut p = path("pfifo", "loss gemodel 1% 10%");
    for i in 0..20_000u32 {
        p.on_frame(numbered((i % 60_000) as u16), u64::from(i) * 10_000);
    }
    drain(&mut p);
    let rate = p.counters().lost as f64 / 20_000.0;
    assert!((rate - 0.0909).abs() < 0.02, "{rate}");
    assert!(p.accounted());
}

/// `buffer 10` behind an unshaped fq_codel: the queue forms in the buffer (drop-tail), not
/// in fq_codel, and the link drains it at its rate; with cake shaping below the link rate
/// the buffer stays empty.
#[test]
fn a_link_buffer_holds_the_queue_unless_the_discipline_shapes() {
    let mut p = path("fq_codel", "rate 8Mbit buffer 10");
    for i in 0..50 {
        p.on_frame(numbered(i), 0);
    }
    p.poll(0, &mut |_| {});
    assert_eq!(p.qdisc().qlen(), 0, "fq_codel hands frames on at once");
    // One frame on the link, ten waiting in the buffer, the rest dropped by it.
    assert_eq!(p.in_buffer(), 10);
    assert_eq!(p.counters().buffer_dropped, 39);
    assert!(p.accounted());
    let out = drain(&mut p);
    assert_eq!(out.len(), 11);
    // 200-byte frames at 8 Mbit/s: 200 µs each, back to back.
    assert_eq!(out[10].0, 11 * 200_000);
    assert!(p.accounted());

    let mut p = path("cake bandwidth 4Mbit", "rate 8Mbit buffer 10");
    for i in 0..50 {
        p.on_frame(numbered(i), 0);
        p.poll(0, &mut |_| {});
    }
    let mut most = 0;
    while let Some(t) = p.next_wakeup() {
        most = most.max(p.in_buffer());
        p.poll(t, &mut |_| {});
    }
    assert!(
        most <= 1,
        "cake below the link rate keeps the buffer empty: {most}"
    );
    assert_eq!(p.counters().buffer_dropped, 0);
    assert!(p.accounted());
    assert!(p
        .change_emulation("rate 8Mbit".parse().expect("valid"))
        .is_err());
}

/// Release times of `n` frames of `len` bytes that all arrive at 1 ms.
fn slot_releases(emu: &str, n: u16, len: usize) -> Vec<u64> {
    let mut p = path("pfifo limit 1000", emu);
    for i in 0..n {
        p.on_frame(frame(i, len), 1_000_000);
    }
    let out: Vec<u64> = drain(&mut p).into_iter().map(|(t, _)| t).collect();
    assert!(p.accounted());
    out
}

/// `slot 10ms packets 4`: the burst waits for a slot (one gap after the idle link saw it),
/// and each slot carries 4 frames, the next opening 10 ms after the last one closed.
#[test]
fn slots_carry_their_packet_budget_a_gap_apart() {
    let out = slot_releases("slot 10ms packets 4", 20, 1000);
    let ms: Vec<u64> = out.iter().map(|t| t / 1_000_000).collect();
    assert_eq!(
        ms,
        [11, 11, 11, 11, 21, 21, 21, 21, 31, 31, 31, 31, 41, 41, 41, 41, 51, 51, 51, 51]
    );
}

/// `bytes 2500` with 1000-byte frames: the third frame crosses the budget and still goes
/// (netem checks after sending), so three frames a slot.
#[test]
fn a_slots_byte_budget_lets_the_crossing_frame_go() {
    let out = slot_releases("slot 10ms bytes 2500", 9, 1000);
    let ms: Vec<u64> = out.iter().map(|t| t / 1_000_000).collect();
    assert_eq!(ms, [11, 11, 11, 21, 21, 21, 31, 31, 31]);
}

/// `slot 5ms 15ms packets 1`: gaps uniform in [5, 15) ms, mean 10 ms.
#[test]
fn uniform_slot_gaps_span_min_to_max() {
    let out = slot_releases("slot 5ms 15ms packets 1", 4000, 100);
    let gaps: Vec<f64> = out.windows(2).map(|w| (w[1] - w[0]) as f64 / 1e6).collect();
    assert!(
        gaps.iter().all(|g| (5.0..15.0).contains(g)),
        "a gap outside [5, 15) ms"
    );
    let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
    assert!((mean - 10.0).abs() < 0.2, "mean gap {mean:.2} ms");
}

/// `slot distribution normal 10ms 2ms packets 1`: gaps with mean 10 ms, sd 2 ms.
#[test]
fn slot_gaps_follow_a_named_distribution() {
    let out = slot_releases("slot distribution normal 10ms 2ms packets 1", 4000, 100);
    let gaps: Vec<f64> = out.windows(2).map(|w| (w[1] - w[0]) as f64 / 1e6).collect();
    let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
    let sd = (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64).sqrt();
    assert!((mean - 10.0).abs() < 0.15, "mean gap {mean:.2} ms");
    assert!((sd - 2.0).abs() < 0.15, "sd {sd:.2} ms");
}

/// Slots come after the delay: `delay 20ms slot 10ms`, one frame at 1 ms is due at 21 ms,
/// finds the slot opened long before, and waits one gap from then (netem's redraw).
#[test]
fn a_frame_due_after_the_slot_opened_waits_one_more_gap() {
    let out = slot_releases("delay 20ms slot 10ms", 1, 1000);
    // At 1 ms the slot is redrawn to 11 ms (< 21 ms due): redrawn again at 21 ms → 31 ms.
    assert_eq!(out, [31_000_000]);
}

/// Reordered frames skip slots, as netem's requeued frames skip its slot check.
#[test]
fn reordered_frames_skip_slots() {
    let out = slot_releases("delay 10ms reorder 100% slot 50ms", 5, 1000);
    assert_eq!(out, [1_000_000; 5]);
}

/// A pure TCP ACK of one connection, acknowledging `ack`.
fn tcp_ack(ack: u32) -> Vec<u8> {
    let b = PacketBuilder::ethernet2([1; 6], [2; 6])
        .ipv4([198, 18, 2, 2], [198, 18, 1, 2], 64)
        .tcp(5201, 40000, 1, 65535)
        .ack(ack);
    let mut buf = Vec::new();
    b.write(&mut buf, &[]).expect("write");
    buf
}

/// The ACK numbers of the frames that left, in order.
fn acks_sent(p: &mut Path) -> Vec<u32> {
    drain(p)
        .iter()
        .map(|(_, f)| u32::from_be_bytes([f[42], f[43], f[44], f[45]]))
        .collect()
}

#[test]
fn cakes_ack_filter_reads_the_tcp_header_of_each_queued_frame() {
    // The first ACK leaves at once; the shaper holds the rest. When the fourth arrives, two
    // queued ACKs are made redundant by it, and the filter drops the older (Linux's
    // `cake_ack_filter`, normal mode); without the filter all four leave.
    for (spec, want) in [
        ("cake bandwidth 1Mbit ack-filter", vec![1000, 3000, 4000]),
        ("cake bandwidth 1Mbit", vec![1000, 2000, 3000, 4000]),
    ] {
        let mut p = path(spec, "");
        for a in [1000, 2000, 3000, 4000] {
            p.on_frame(tcp_ack(a), 0);
        }
        assert!(p.accounted());
        assert_eq!(acks_sent(&mut p), want, "{spec}");
        assert_eq!(p.counters().qdisc_dropped, 4 - want.len() as u64, "{spec}");
        assert!(p.accounted());
    }
}
