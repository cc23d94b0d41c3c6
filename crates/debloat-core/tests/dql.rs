//! DQL (docs/algorithms.md §4): on a device that completes in batches every T at line rate C, the
//! limit converges to about the bytes completed per interval (C·T): enough that the device never
//! starves, not much more.

use debloat_core::device::dql::{Config, Dql};

/// Run a device of `rate_bps` with completion interrupts every `irq_ns` for `secs`; returns
/// (final limit, fraction of the last second the device sat idle, bytes per interval).
fn device(rate_bps: u64, irq_ns: u64, secs: u64) -> (u32, f64, f64) {
    let mut dql = Dql::new(Config::default(), 0);
    let per_interval = rate_bps as f64 / 8.0 * irq_ns as f64 / 1e9;
    let mut pending = 0f64; // bytes handed to the device, not yet on the wire
    let mut done = 0f64; // on the wire since the last interrupt
    let (mut idle_ns, mut t) = (0u64, 0u64);
    let end = secs * 1_000_000_000;
    while t < end {
        // The driver fills the ring while the queue is not stopped.
        while !dql.stopped() {
            dql.sent(1514).expect("valid size");
            pending += 1514.0;
        }
        let sendable = pending.min(per_interval);
        if t >= end - 1_000_000_000 && sendable < per_interval {
            idle_ns += ((per_interval - sendable) / per_interval * irq_ns as f64) as u64;
        }
        pending -= sendable;
        done += sendable;
        t += irq_ns;
        let whole = done.floor();
        dql.completed(whole as u32, t).expect("within inflight");
        done -= whole;
    }
    (dql.limit(), idle_ns as f64 / 1e9, per_interval)
}

#[test]
fn limit_converges_to_the_bytes_completed_per_interval() {
    for (rate, irq) in [
        (1_000_000_000u64, 100_000u64),
        (100_000_000, 1_000_000),
        (10_000_000_000, 50_000),
    ] {
        let (limit, idle, per) = device(rate, irq, 5);
        let ratio = f64::from(limit) / per;
        assert!(
            idle < 0.01,
            "{rate} bit/s: device idle {:.2}% of the last second",
            idle * 100.0
        );
        assert!(
            (1.0..=2.0).contains(&ratio),
            "{rate} bit/s every {irq} ns: limit {limit} = {ratio:.2} × {per}"
        );
    }
}

#[test]
fn limit_shrinks_at_most_once_per_hold_time() {
    // Grow the limit on a fast device, then slow completions: the limit may only fall once per
    // hold_time (1 s) while the queue stays busy.
    let mut dql = Dql::new(Config::default(), 0);
    let mut t = 0;
    for _ in 0..2000 {
        while !dql.stopped() {
            dql.sent(1514).expect("size");
        }
        t += 100_000;
        let f = dql.inflight();
        dql.completed(f, t).expect("ok");
    }
    let grown = dql.limit();
    let mut changes = vec![];
    let mut last = grown;
    for _ in 0..30_000 {
        while !dql.stopped() {
            dql.sent(1514).expect("size");
        }
        t += 100_000;
        dql.completed(1514, t).expect("ok");
        if dql.limit() != last {
            changes.push(t);
            last = dql.limit();
        }
    }
    assert!(last < grown, "limit shrank from {grown} to {last}");
    for w in changes.windows(2) {
        assert!(
            w[1] - w[0] > 1_000_000_000,
            "two decreases {} ms apart",
            (w[1] - w[0]) / 1_000_000
        );
    }
}
