//! Round trips *beyond the shaper*, measured passively from TCP timestamps, as LibreQoS measures
//! RTT (and BBR the delivery rate) from the traffic itself: a data segment's timestamp (TSval)
//! is noted when the segment leaves the shaper; the ACK coming back the other way that echoes it
//! (TSecr) closes the sample. The shaper's own queue is not in it, what lies past it is: the
//! link, a modem's queue, the far host. The ACK's cumulative acknowledgement number, as it moves,
//! counts the bytes the far end received.
//!
//! Rules that keep samples honest:
//! * a sender stamps a burst of segments with one timestamp: only a timestamp's first segment is
//!   noted and only the first ACK echoing it is a sample (later ones would time a later segment
//!   from the first's departure);
//! * a receiver ACKs every second segment at once but holds a lone one up to its delayed-ACK
//!   timer (40 ms): a timestamp whose first segment left more than [`PAIR_NS`] after its flow's
//!   previous segment gives no sample.
//!
//! Flows are the caller's keys (one key for both directions of a connection); timestamps and
//! acknowledgement numbers are the caller's, unwrapped to 64 bits. Memory is bounded: at most
//! [`MAX_FLOWS`] flows, [`MAX_STAMPS`] pending timestamps each; a flow idle for [`IDLE_NS`] is
//! forgotten.

use crate::packet::Nanos;
use std::collections::{BTreeMap, VecDeque};

/// Segments of a flow closer than this come as a pair the receiver ACKs at once.
pub const PAIR_NS: Nanos = 40_000_000;
/// Flows tracked at most.
pub const MAX_FLOWS: usize = 16_384;
/// Pending timestamps per flow at most.
pub const MAX_STAMPS: usize = 512;
/// A flow not seen for this long is forgotten.
pub const IDLE_NS: Nanos = 30_000_000_000;

#[derive(Default)]
struct Flow {
    /// (timestamp, when its first segment left the shaper, may it give a sample).
    stamps: VecDeque<(u64, Nanos, bool)>,
    last_stamp: Option<u64>,
    last_left: Option<Nanos>,
    acked: Option<u64>,
    seen: Nanos,
}

/// The sampler for one shaped direction.
#[derive(Default)]
pub struct Sampler {
    flows: BTreeMap<u64, Flow>,
    min_rtt: Option<Nanos>,
    acked_bytes: u64,
    samples: u64,
}

impl Sampler {
    /// A data segment of `flow` with timestamp `ts` left the shaper at `now`.
    pub fn on_data(&mut self, flow: u64, ts: u64, now: Nanos) {
        if self.flows.len() >= MAX_FLOWS && !self.flows.contains_key(&flow) {
            return;
        }
        let f = self.flows.entry(flow).or_default();
        f.seen = now;
        let paired = f
            .last_left
            .is_some_and(|l| now.saturating_sub(l) <= PAIR_NS);
        f.last_left = Some(now);
        if f.last_stamp.is_none_or(|l| ts > l) {
            if f.stamps.len() >= MAX_STAMPS {
                f.stamps.pop_front();
            }
            f.stamps.push_back((ts, now, paired));
            f.last_stamp = Some(ts);
        }
    }

    /// An ACK of `flow` echoing `echo`, acknowledging up to `ack` (bytes), seen at `now`.
    pub fn on_ack(&mut self, flow: u64, echo: u64, ack: u64, now: Nanos) {
        let Some(f) = self.flows.get_mut(&flow) else {
            return;
        };
        f.seen = now;
        match f.acked {
            Some(a) if ack > a => {
                self.acked_bytes += ack - a;
                f.acked = Some(ack);
            }
            None => f.acked = Some(ack),
            _ => {}
        }
        while let Some(&(ts, left, usable)) = f.stamps.front() {
            if ts > echo {
                break;
            }
            f.stamps.pop_front();
            if ts == echo && usable {
                let rtt = now.saturating_sub(left);
                self.min_rtt = Some(self.min_rtt.map_or(rtt, |m| m.min(rtt)));
                self.samples += 1;
            }
        }
    }

    /// The lowest sample and the bytes acknowledged since the last call; forgets idle flows.
    pub fn take(&mut self, now: Nanos) -> (Option<Nanos>, u64) {
        self.flows
            .retain(|_, f| now.saturating_sub(f.seen) < IDLE_NS);
        (self.min_rtt.take(), std::mem::take(&mut self.acked_bytes))
    }

    /// Flows tracked.
    pub fn flows(&self) -> usize {
        self.flows.len()
    }

    /// Samples taken in all.
    pub fn samples(&self) -> u64 {
        self.samples
    }
}

/// A 32-bit serial number (TCP's timestamps and sequence numbers) unwrapped against the last
/// 64-bit value: the nearest 64-bit number with those low 32 bits.
pub fn unwrap32(last: u64, v: u32) -> u64 {
    let base = last & !0xFFFF_FFFF;
    let cand = base | u64::from(v);
    let diff = v.wrapping_sub(last as u32) as i32;
    if diff >= 0 && cand < last {
        cand + (1 << 32)
    } else if diff < 0 && cand > last {
        cand.saturating_sub(1 << 32)
    } else {
        cand
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;

    #[test]
    fn a_pair_gives_a_sample_timed_from_its_first_departure() {
        let mut s = Sampler::default();
        s.on_data(1, 100, 0);
        s.on_data(1, 101, 5 * MS);
        s.on_ack(1, 101, 2 * 1448, 45 * MS);
        assert_eq!(s.take(45 * MS), (Some(40 * MS), 0));
        // The first ACK only sets where the count starts; the next one counts.
        s.on_ack(1, 101, 4 * 1448, 50 * MS);
        assert_eq!(s.take(50 * MS).1, 2 * 1448);
    }

    #[test]
    fn a_burst_sharing_a_stamp_is_timed_once_from_its_first_segment() {
        let mut s = Sampler::default();
        s.on_data(1, 7, 0);
        s.on_data(1, 8, MS);
        s.on_data(1, 8, 30 * MS); // same stamp, left later: not noted
        s.on_ack(1, 8, 0, 41 * MS);
        s.on_ack(1, 8, 0, 60 * MS); // a second ACK echoing 8: no sample
        assert_eq!(s.take(60 * MS).0, Some(40 * MS));
        assert_eq!(s.samples(), 1);
    }

    #[test]
    fn a_lone_segment_may_wait_for_a_delayed_ack_and_gives_no_sample() {
        let mut s = Sampler::default();
        s.on_data(1, 1, 0);
        s.on_data(1, 2, 100 * MS);
        s.on_ack(1, 2, 0, 180 * MS);
        assert_eq!(s.take(180 * MS).0, None);
    }

    #[test]
    fn idle_flows_are_forgotten_and_unknown_acks_ignored() {
        let mut s = Sampler::default();
        s.on_ack(9, 1, 1, 0);
        s.on_data(1, 1, 0);
        assert_eq!(s.flows(), 1);
        s.take(IDLE_NS + 1);
        assert_eq!(s.flows(), 0);
    }

    #[test]
    fn serial_numbers_unwrap_across_the_32_bit_edge() {
        assert_eq!(unwrap32(0xFFFF_FFF0, 0x10), 0x1_0000_0010);
        assert_eq!(unwrap32(0x1_0000_0010, 0xFFFF_FFF0), 0xFFFF_FFF0);
        assert_eq!(unwrap32(5, 7), 7);
        assert_eq!(unwrap32(7, 5), 5);
    }
}
