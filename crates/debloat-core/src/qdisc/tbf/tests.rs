//! The token bucket as Linux runs it: burst, rate, peak rate, the size limit, tc's text.

use super::*;
use crate::packet::Record;
use crate::qdisc::spec::QdiscSpec;
use crate::testutil::pkt;

const MS: u64 = 1_000_000;

fn tbf(words: &str) -> Box<dyn Qdisc<Record>> {
    let s: QdiscSpec = words.parse().expect("valid");
    s.build::<Record>(FlowHasher::new([1, 2]), 1)
}

/// psched_ratecfg's multiply and shift give the byte time to within a nanosecond: 1500 bytes at
/// 10 Mbit/s are 1.2 ms, at 1 Gbit/s 12 µs.
#[test]
fn byte_times_are_the_kernels() {
    assert_eq!(RateCfg::new(1_250_000, 0, 0).l2t_ns(1500), 1_200_000);
    assert_eq!(RateCfg::new(125_000_000, 0, 0).l2t_ns(1500), 12_000);
    let r = RateCfg::new(1_250_000, 24, 100);
    assert_eq!(r.l2t_ns(1500), (1524 * 800) as u64);
    assert_eq!(r.l2t_ns(40), 100 * 800, "mpu");
}

/// A full bucket lets `burst` bytes go at once; after that packets leave at the rate, and a
/// waiting head says when it may go.
#[test]
fn a_burst_then_the_rate() {
    let mut q = tbf("tbf rate 10Mbit burst 15000 limit 100000");
    for i in 0..40 {
        assert_eq!(q.enqueue(pkt(i, 1500), 0), Verdict::Queued);
    }
    // Time 1 s: the bucket is full (15000 bytes = 10 packets).
    let t0 = 1_000 * MS;
    let mut now_sent = 0;
    while let Dequeue::Packet(_) = q.dequeue(t0) {
        now_sent += 1;
    }
    assert_eq!(now_sent, 10);
    let Dequeue::NotBefore(at) = q.dequeue(t0) else {
        panic!("the head waits");
    };
    assert_eq!(at, t0 + 1_200_000, "one packet's time at 10 Mbit/s");
    // Then one packet each 1.2 ms: 20 more in 24 ms.
    let mut t = at;
    let mut later = 0;
    while t <= t0 + 24 * MS {
        match q.dequeue(t) {
            Dequeue::Packet(_) => later += 1,
            Dequeue::NotBefore(n) => t = n,
            Dequeue::Empty => break,
        }
    }
    assert_eq!(later, 20);
    assert!(q.stats().overlimits >= 1);
}

/// With a peak rate, the burst itself is spaced at the peak rate.
#[test]
fn the_peak_bucket_spaces_the_burst() {
    let mut q = tbf("tbf rate 10Mbit burst 15000 limit 100000 peakrate 100Mbit mtu 1500");
    for i in 0..5 {
        q.enqueue(pkt(i, 1500), 0);
    }
    let t0 = 1_000 * MS;
    assert!(matches!(q.dequeue(t0), Dequeue::Packet(_)));
    let Dequeue::NotBefore(at) = q.dequeue(t0) else {
        panic!("spaced by the peak bucket");
    };
    assert_eq!(at, t0 + 120_000, "1500 bytes at 100 Mbit/s");
}

/// A packet longer than the bucket can never leave: dropped on arrival. The default child is a
/// bfifo of `limit` bytes; every packet is sent, dropped or queued.
#[test]
fn oversize_and_limit_drops() {
    let mut q = tbf("tbf rate 1Mbit burst 2000 limit 4500");
    assert_eq!(q.enqueue(pkt(0, 3000), 0), Verdict::Dropped);
    assert_eq!(q.enqueue(pkt(1, 1500), 0), Verdict::Queued);
    assert_eq!(q.enqueue(pkt(2, 1500), 0), Verdict::Queued);
    assert_eq!(q.enqueue(pkt(3, 1500), 0), Verdict::Queued);
    assert_eq!(
        q.enqueue(pkt(4, 1500), 0),
        Verdict::Dropped,
        "bfifo limit 4500"
    );
    let mut dropped = 0;
    while q.take_dropped().is_some() {
        dropped += 1;
    }
    assert_eq!((dropped, q.qlen(), q.backlog()), (2, 3, 4500));
    assert_eq!(q.stats().drops, 2);
}

/// A child discipline after `child`: fq_codel under the bucket.
#[test]
fn a_child_discipline_runs_under_the_bucket() {
    let s: QdiscSpec = "tbf rate 10Mbit burst 10kb latency 50ms child fq_codel target 2ms"
        .parse()
        .expect("valid");
    let QdiscSpec::Tbf(t) = &s else {
        panic!("{s:?}")
    };
    assert_eq!(t.child().kind(), "fq_codel");
    assert_eq!(s.to_string().parse::<QdiscSpec>().ok(), Some(s.clone()));
    let mut q = s.build::<Record>(FlowHasher::new([1, 2]), 1);
    q.enqueue(pkt(0, 1500), 0);
    assert!(matches!(q.dequeue(1_000 * MS), Dequeue::Packet(_)));
}

/// tc's words and text: latency makes the limit (bytes/s × s + burst), the burst prints as the
/// kernel keeps it, the latency as tc derives it back.
#[test]
fn words_and_tc_text() {
    let s: QdiscSpec = "tbf rate 10Mbit burst 10kb latency 50ms"
        .parse()
        .expect("valid");
    let QdiscSpec::Tbf(t) = &s else {
        panic!("{s:?}")
    };
    assert_eq!(t.limit, 1_250_000 / 20 + 10_240);
    assert_eq!(t.tc_options(), "rate 10Mbit burst 10Kb lat 50ms");
    for bad in [
        "tbf burst 10kb latency 50ms",
        "tbf rate 10Mbit latency 50ms",
        "tbf rate 10Mbit burst 10kb",
        "tbf rate 10Mbit burst 10kb limit 1mb peakrate 20Mbit",
        "tbf rate 10Mbit burst 10kb limit 1mb peakrate 5Mbit mtu 1514",
        "tbf rate 10Mbit burst 10kb limit 1mb flows 3",
    ] {
        assert!(bad.parse::<QdiscSpec>().is_err(), "{bad}");
    }
}
