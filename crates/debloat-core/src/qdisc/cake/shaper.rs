//! CAKE's deficit-mode shaper (`cake_advance_shaper`): no token bucket, just "the next packet
//! may leave at `time_next_packet`". Each packet sent pushes that time on by its adjusted length
//! at the rate; a failsafe clock runs at 1.5× the cost so a wedged shaper always recovers.
//! Burst capacity is only how far `time_next_packet` lags `now`, and it resets whenever the
//! qdisc goes idle.

use crate::packet::Nanos;

/// Transmission time of `len` bytes at a fixed-point time-per-byte.
#[inline]
pub fn duration(len: u32, rate_ns: u64, rate_shft: u8) -> u64 {
    (u64::from(len) * rate_ns) >> rate_shft
}

/// The global (whole-qdisc) shaper clocks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Global {
    /// Nanoseconds per byte, fixed point (0 = unlimited).
    pub rate_ns: u64,
    /// Fractional bits of `rate_ns`.
    pub rate_shft: u8,
    /// Earliest time the next packet may leave.
    pub time_next_packet: Nanos,
    /// Failsafe release time.
    pub failsafe_next_packet: Nanos,
}

impl Global {
    /// When both clocks are in the future, the time to try again.
    #[inline]
    pub fn gate(&self, now: Nanos) -> Option<Nanos> {
        (self.time_next_packet > now && self.failsafe_next_packet > now)
            .then(|| self.time_next_packet.min(self.failsafe_next_packet))
    }

    /// Charge `len` adjusted bytes; a dropped packet (ingress) does not move the failsafe.
    #[inline]
    pub fn advance(&mut self, len: u32, drop: bool) {
        if self.rate_ns == 0 {
            return;
        }
        let d = duration(len, self.rate_ns, self.rate_shft);
        self.time_next_packet += d;
        if !drop {
            self.failsafe_next_packet += d + (d >> 1);
        }
    }
}

/// Advance a tin's clock: from its old value if it is behind `now`, else to at least `now + d`.
#[inline]
pub fn advance_tin(time_next: &mut Nanos, len: u32, rate_ns: u64, rate_shft: u8, now: Nanos) {
    if rate_ns == 0 {
        return;
    }
    let d = duration(len, rate_ns, rate_shft);
    if *time_next < now {
        *time_next += d;
    } else if *time_next < now + d {
        *time_next = now + d;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn back_to_back_spacing_at_10_mbit() {
        // 10 Mbit/s = 1,250,000 B/s: a 1514 B packet costs 1.2112 ms, 64 B cost 51.2 µs.
        let t = super::super::tins::set_rate(1_250_000, 1514, 5_000_000, 100_000_000);
        let d = duration(1514, t.rate_ns, t.rate_shft);
        assert!((d as i64 - 1_211_200).abs() <= 1, "{d}");
        assert!((duration(64, t.rate_ns, t.rate_shft) as i64 - 51_200).abs() <= 1);
    }
}
