//! CAKE's `autorate-ingress`: an estimate of the capacity of the link in front of the qdisc,
//! from the rate at which packets arrive (sch_cake.c, the end of `cake_enqueue`), and the
//! shaper set to 15/16 of it.
//!
//! Meant for cake on the far side of a bottleneck (a router's ingress behind a modem): there
//! the arrivals come at the bottleneck's pace in bursts, separated by gaps. Every enqueue
//! updates an average inter-arrival time (EWMA, shift 2 towards longer gaps, 8 towards
//! shorter ones; a gap counts at most 1 s). A gap longer than that average closes a window:
//! the window's bytes over its duration is a rate sample, folded into the peak estimate
//! (shift 2 upward, 8 downward), and the shaper becomes `15/16 · estimate`.
//!
//! As Linux does, to the letter:
//! * the bytes counted are the qdisc lengths queued by this enqueue (the segments of a split
//!   super-packet; the arriving packet less an ACK the filter dropped), in a 32-bit counter;
//! * the estimate starts at the configured `bandwidth` (0 when unlimited);
//! * the 250 ms hold-off between reconfigurations compares `now` with
//!   `last_reconfig_time`, which the kernel never assigns: it stays 0, so after the first
//!   250 ms of the clock every closed window reconfigures. The kernel's clock is uptime; ours
//!   starts where the driver's does, so the hold-off covers the first 250 ms of a run;
//! * with the flag off the kernel only zeroes the window and notes the arrival, which nothing
//!   reads while it stays off; cake calls the estimator only with the flag on (the flag is
//!   part of the spec, fixed for an instance's life here).

use crate::packet::Nanos;

const NSEC_PER_SEC: u64 = 1_000_000_000;
/// The kernel's hold-off, `ktime_add_ms(last_reconfig_time, 250)`.
const HOLD_OFF_NS: Nanos = 250_000_000;

fn ewma(avg: u64, sample: u64, shift: u32) -> u64 {
    avg - (avg >> shift) + (sample >> shift)
}

/// The capacity estimator's state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Estimator {
    last_packet_time: Nanos,
    avg_packet_interval: u64,
    avg_window_begin: Nanos,
    avg_window_bytes: u32,
    avg_peak_bandwidth: u64,
    last_reconfig_time: Nanos,
}

impl Estimator {
    /// An estimator whose estimate starts at `rate_bytes_per_s` (cake's configured rate).
    pub fn new(rate_bytes_per_s: u64) -> Estimator {
        Estimator {
            avg_peak_bandwidth: rate_bytes_per_s,
            ..Estimator::default()
        }
    }

    /// The current estimate, bytes/s (`tc -s` prints it as "capacity estimate").
    pub fn capacity_estimate(&self) -> u64 {
        self.avg_peak_bandwidth
    }

    /// The average inter-arrival time, ns.
    pub fn avg_packet_interval(&self) -> u64 {
        self.avg_packet_interval
    }

    /// One enqueue at `now` that queued `queued_bytes` (negative when the ACK filter dropped a
    /// longer packet than arrived). Returns the new shaper rate, bytes/s, when cake is to
    /// reconfigure.
    pub fn on_enqueue(&mut self, now: Nanos, queued_bytes: i64) -> Option<u64> {
        // A 32-bit counter, as the kernel keeps it: a negative amount subtracts modulo 2^32.
        self.avg_window_bytes = self.avg_window_bytes.wrapping_add(queued_bytes as u32);
        let interval = now.saturating_sub(self.last_packet_time).min(NSEC_PER_SEC);
        // Filter out short bursts (Wi-Fi aggregation, a modem's frames).
        let shift = if interval > self.avg_packet_interval {
            2
        } else {
            8
        };
        self.avg_packet_interval = ewma(self.avg_packet_interval, interval, shift);
        self.last_packet_time = now;
        if interval <= self.avg_packet_interval {
            return None;
        }
        let window = now.saturating_sub(self.avg_window_begin).max(1);
        let b = u64::from(self.avg_window_bytes) * NSEC_PER_SEC / window;
        let shift = if b > self.avg_peak_bandwidth { 2 } else { 8 };
        self.avg_peak_bandwidth = ewma(self.avg_peak_bandwidth, b, shift);
        self.avg_window_bytes = 0;
        self.avg_window_begin = now;
        (now > self.last_reconfig_time + HOLD_OFF_NS).then(|| (self.avg_peak_bandwidth * 15) >> 4)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packets of `len` bytes every `gap` ns in bursts of `burst`, bursts `period` ns apart.
    fn feed(e: &mut Estimator, from: Nanos, to: Nanos, len: i64, gap: Nanos) -> Option<u64> {
        let (mut t, mut last) = (from, None);
        while t < to {
            if let Some(r) = e.on_enqueue(t, len) {
                last = Some(r);
            }
            t += gap;
        }
        last
    }

    #[test]
    fn the_ewma_is_the_kernels() {
        assert_eq!(ewma(1000, 2000, 2), 1000 - 250 + 500);
        assert_eq!(ewma(1000, 0, 8), 1000 - 3);
    }

    #[test]
    fn first_packet_closes_a_window_but_the_hold_off_blocks_reconfiguring() {
        let mut e = Estimator::new(1_000_000);
        // First arrival at 10 ms: gap 10 ms > average 0 → average = 10ms/4, window closes with
        // the packet's own bytes over 10 ms.
        assert_eq!(e.on_enqueue(10_000_000, 1500), None);
        assert_eq!(e.avg_packet_interval(), 2_500_000);
        // b = 1500 B / 10 ms = 150 kB/s < 1 MB/s: shift 8.
        assert_eq!(e.capacity_estimate(), ewma(1_000_000, 150_000, 8));
    }

    #[test]
    fn bursts_at_a_bottlenecks_pace_converge_on_its_rate() {
        // A 10 Mbit/s bottleneck: 1250 B every 1 ms, no gaps → no window ever closes after the
        // average settles; so model the usual case: 8 packets back to back (1 µs apart) every
        // 8 ms = 12 kB per 8 ms = 1.5 MB/s (12 Mbit/s).
        let mut e = Estimator::new(0);
        let mut t = 300_000_000;
        let mut rate = None;
        for _ in 0..2000 {
            for k in 0..8 {
                if let Some(r) = e.on_enqueue(t + k * 1000, 1500) {
                    rate = Some(r);
                }
            }
            t += 8_000_000;
        }
        // Each window holds the 8 packets that arrived since the previous gap: 12 000 B over
        // 8 ms = 1.5 MB/s; the shaper is 15/16 of the estimate.
        let est = e.capacity_estimate();
        assert!((1_400_000..=1_500_000).contains(&est), "{est}");
        assert_eq!(rate, Some((est * 15) >> 4));
    }

    #[test]
    fn a_steady_stream_without_gaps_keeps_the_estimate() {
        let mut e = Estimator::new(1_000_000);
        // Perfectly even arrivals: the average converges on the gap and no sample exceeds it.
        feed(&mut e, 400_000_000, 402_000_000, 1500, 1_000);
        let before = e.capacity_estimate();
        assert_eq!(feed(&mut e, 402_000_000, 403_000_000, 1500, 1_000), None);
        assert_eq!(e.capacity_estimate(), before);
    }

    #[test]
    fn a_negative_amount_wraps_as_the_kernels_u32_does() {
        let mut e = Estimator::new(0);
        e.on_enqueue(1_000_000_000, 0);
        e.on_enqueue(1_000_000_100, -60);
        assert_eq!(e.avg_window_bytes, u32::MAX - 59);
    }
}
