//! Per-flow state for qosify's detection and for the reply direction: a fixed table of flows,
//! direct-mapped by the keyed flow hash of the flow's egress-oriented key, allocated once. A
//! flow that lands on a slot held by another replaces it (counted as an eviction), as qosify's
//! LRU map forgets flows when full. A slot holds the flow's 64-bit keyed fingerprint (the
//! symmetric SipHash before it is folded to the 32-bit flow hash) rather than the key: 32-byte
//! slots, half the cache lines; two flows are taken for one only if their 64-bit fingerprints
//! collide in the same slot.
//!
//! Time as qosify's eBPF keeps it: nanoseconds shifted right by 24 (units of ≈16.8 ms), a check
//! interval of one second and a 30-second idle timeout in those units.

use crate::flow::{fold, reciprocal_scale, FlowHasher, FlowKey};
use crate::packet::Nanos;

/// One second in qosify's time units.
pub const CHECK_INTERVAL: u32 = (1_000_000_000u64 >> 24) as u32;
/// Thirty seconds.
pub const IDLE_TIMEOUT: u32 = (30_000_000_000u64 >> 24) as u32;
/// Fixed-point shift of the packet-length average.
const EWMA_SHIFT: u32 = 12;

/// qosify's clock: `now >> 24`, never 0 (0 means "never updated").
pub fn ticks(now: Nanos) -> u32 {
    ((now >> 24) as u32).max(1)
}

/// One flow's state.
#[derive(Clone, Copy, Debug, Default)]
pub struct Flow {
    /// The flow's fingerprint (0: the slot is empty).
    fp: u64,
    /// The class the egress direction resolved to (for the replies).
    pub class: Option<u16>,
    last_update: u32,
    pkt_count: u32,
    /// Seconds left as bulk (0: not bulk).
    pub bulk_timeout: u32,
    pkt_len_avg: u32,
}

impl Flow {
    /// qosify's bulk detection: count this packet (`segs` segments) and say whether the flow is
    /// bulk. `pps` 0 turns it off (and leaves the flow's clock alone).
    pub fn bulk(&mut self, now: Nanos, segs: u32, pps: u32, timeout_s: u32) -> bool {
        if pps == 0 {
            return false;
        }
        let time = ticks(now);
        let delta = time.wrapping_sub(self.last_update);
        if self.last_update == 0 || delta > IDLE_TIMEOUT {
            self.pkt_len_avg = 0;
            self.clear(time);
            return self.bulk_timeout > 0;
        }
        self.pkt_count += segs.max(1);
        let trigger = self.pkt_count > pps;
        if trigger {
            self.bulk_timeout = timeout_s + 1;
        }
        if delta >= CHECK_INTERVAL {
            if self.bulk_timeout > 0 && !trigger {
                self.bulk_timeout -= 1;
            }
            self.clear(time);
        }
        self.bulk_timeout > 0
    }

    fn clear(&mut self, time: u32) {
        self.pkt_count = 1;
        self.last_update = time;
    }

    /// qosify's priority detection: fold this packet's length (per segment) into the average
    /// and say whether it is at or under `max_len`. Not for bulk flows; `max_len` 0 turns it off.
    pub fn prio(&mut self, len: u32, segs: u32, max_len: u32) -> bool {
        if self.bulk_timeout > 0 || max_len == 0 {
            return false;
        }
        let len = if segs > 1 { len / segs } else { len };
        self.pkt_len_avg = if self.pkt_len_avg == 0 {
            len << EWMA_SHIFT
        } else {
            (self.pkt_len_avg / 4) * 3 + (len << EWMA_SHIFT) / 4
        };
        self.pkt_len_avg >> EWMA_SHIFT <= max_len
    }
}

/// The table.
#[derive(Debug)]
pub struct Flows {
    slots: Vec<Flow>,
    hasher: FlowHasher,
    /// Flows that replaced another in its slot.
    pub evictions: u64,
    /// Slots in use.
    pub in_use: u64,
}

impl Flows {
    /// A table of `n` slots (at least 1).
    pub fn new(n: usize, hasher: FlowHasher) -> Flows {
        Flows {
            slots: vec![Flow::default(); n.clamp(1, u32::MAX as usize)],
            hasher,
            evictions: 0,
            in_use: 0,
        }
    }

    /// The flow of this egress-oriented key, created (or taking over its slot) if absent.
    pub fn entry(&mut self, key: &FlowKey) -> &mut Flow {
        let fp = self.fingerprint(key);
        self.entry_fp(fp)
    }

    /// The key's fingerprint (direction-symmetric, never 0); its fold is the flow hash.
    #[inline]
    pub fn fingerprint(&self, key: &FlowKey) -> u64 {
        self.hasher.flow_hash64(key).max(1)
    }

    /// [`Flows::entry`] by fingerprint.
    #[inline]
    pub fn entry_fp(&mut self, fp: u64) -> &mut Flow {
        let i = self.slot(fp);
        let s = &mut self.slots[i];
        if s.fp != fp {
            if s.fp == 0 {
                self.in_use += 1;
            } else {
                self.evictions += 1;
            }
            *s = Flow {
                fp,
                ..Flow::default()
            };
        }
        s
    }

    /// The flow of this key, if the table holds it.
    pub fn get(&mut self, key: &FlowKey) -> Option<&mut Flow> {
        let fp = self.fingerprint(key);
        self.get_fp(fp)
    }

    /// [`Flows::get`] by fingerprint.
    #[inline]
    pub fn get_fp(&mut self, fp: u64) -> Option<&mut Flow> {
        let i = self.slot(fp);
        let s = &mut self.slots[i];
        (s.fp == fp).then_some(s)
    }

    /// The slot of a fingerprint: its fold (the flow hash), scaled by a multiply and a shift
    /// (the kernel's `reciprocal_scale`), not a division.
    #[inline]
    fn slot(&self, fp: u64) -> usize {
        reciprocal_scale(fold(fp), self.slots.len() as u32) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;

    #[test]
    fn a_flow_above_the_trigger_is_bulk_until_it_has_been_under_it_for_the_timeout() {
        let mut f = Flow::default();
        let mut now = SEC;
        // 200 packets a second against a trigger of 100.
        let mut bulk_at = None;
        for i in 0..400u64 {
            now = SEC + i * SEC / 200;
            if f.bulk(now, 1, 100, 5) && bulk_at.is_none() {
                bulk_at = Some(i);
            }
        }
        assert_eq!(bulk_at, Some(100), "bulk on the 101st packet of its second");
        // Then 10 a second: bulk for the timeout's seconds, then not.
        let mut last_bulk = now;
        for i in 1..100u64 {
            let t = now + i * SEC / 10;
            if f.bulk(t, 1, 100, 5) {
                last_bulk = t;
            }
        }
        let secs = (last_bulk - now) as f64 / 1e9;
        assert!(
            (4.5..=6.5).contains(&secs),
            "bulk {secs} s after the rate fell"
        );
    }

    #[test]
    fn small_packets_make_a_priority_flow_and_big_ones_end_it() {
        let mut f = Flow::default();
        assert!(f.prio(100, 1, 500));
        assert!((0..3).all(|_| f.prio(120, 1, 500)));
        let mut n = 0;
        while f.prio(1500, 1, 500) {
            n += 1;
        }
        assert!(n <= 2, "the average crossed 500 B after {n} full packets");
        // A 64 KB super-packet of 44 segments counts as 44 packets of its average.
        let mut g = Flow::default();
        assert!(g.prio(44 * 100, 44, 500));
    }

    #[test]
    fn the_table_is_bounded_and_counts_what_it_forgets() {
        let key = |p: u16| {
            FlowKey::ip(
                "198.18.1.2".parse().unwrap_or([0u8; 4].into()),
                "198.18.2.2".parse().unwrap_or([0u8; 4].into()),
                p,
                80,
                6,
            )
        };
        let mut t = Flows::new(8, FlowHasher::new([1, 2]));
        for p in 1..=100 {
            t.entry(&key(p)).class = Some(p);
        }
        assert!(t.in_use <= 8);
        assert_eq!(t.in_use + t.evictions, 100);
        assert_eq!(t.get(&key(100)).and_then(|f| f.class), Some(100));
    }
}
