//! An emulated link in userspace: what Linux's netem does to packets, decided per frame, sans-IO.
//!
//! [`Emulation`] is the configuration (netem's words, [`spec`]); [`Netem`] holds the running
//! state and makes netem's decisions in netem's order (`netem_enqueue` in sch_netem.c):
//! 1. duplicate? (one more copy), 2. lost? (the loss model; with `ecn`, an ECN-capable frame is
//!    marked CE instead), 3. corrupt? (one random bit of one random byte flipped),
//! 4. `limit` reached? (dropped), 5. reorder? (sent at once, ahead of delayed frames) or else
//!    delayed by a draw from the delay distribution.
//!
//! With `slot`, a delayed frame that is due leaves only while a slot is open, as in
//! `netem_dequeue`: a slot opens at `slot_next` and stays open for `packets`/`bytes`; when
//! those run out the next opening is drawn (from now). And when the slot opened before the
//! head frame was due, the next opening is redrawn from now, so a frame reaching an idle link
//! waits one slot gap. Reordered frames skip slots, as netem's requeued frames do.
//!
//! The duplicate goes through steps 2–5 itself and is never duplicated again (netem re-enqueues
//! it at the root with duplication off).
//!
//! Where the decisions are made ([`crate::link::Link`]): the loss model (step 2) when a frame
//! *enters the link* — at the entry of the link's `buffer` when it has one (netem's own queue:
//! the draw comes before the buffer's tail drop, as netem's comes before its `limit`), else when
//! the link takes the frame from the discipline, before serialising it; a lost frame costs the
//! link no time, as a packet netem loses at enqueue never meets its rate. Steps 1 and 3–5 as the
//! link finishes serialising the frame ([`crate::path::DataPath`] applies them on the wire).
//!
//! Where debloat differs from netem, on purpose:
//! - **Order of rate and delay.** The rate is the link behind the discipline (frames leave the
//!   discipline as fast as the link serialises them, `rate` counting the framing overhead);
//!   duplication, corruption, reordering and delay happen on the wire after it. netem
//!   applies its impairments at enqueue, then delays and rate-limits its own queue; with a
//!   constant delay both give the same departure times.
//! - **Duplication is drawn after loss**, on the wire: a frame the loss model chose has no copy
//!   (netem draws the copy first, so a lost packet's copy may survive), and the copy takes no
//!   time of the link's.
//! - **Jitter never reorders**: a delayed frame leaves no earlier than the delayed frame before
//!   it (netem does this only when `rate` is set). Use `reorder` to reorder.
//! - **A reordered frame skips the delay, not the rate** (it has already been serialised).
//! - **`limit` has no default** (see [`spec`]).
//! - **The delay line is not in a limit.** netem's `limit` counts the packets waiting out their
//!   delay too; here the link's `buffer` (or the discipline in front) holds only those waiting
//!   for the rate, so with a full queue a frame waits the delay on top of it
//!   (docs/kernel-lab.md measures this).
//! - The random generator differs (see [`random`]); the distributions do not.

mod display;
pub mod dist;
pub mod loss;
pub mod random;
pub mod spec;

pub use dist::Distribution;
pub use loss::Loss;
pub use random::Prob;
pub use spec::{EmulateError, Emulation, Slot, SlotGap};

use crate::rng::SplitMix64;
use loss::LossState;
use random::Correlated;

/// When a frame leaves the wire (step 5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Reordered: at once, ahead of delayed frames.
    Now,
    /// After this delay, ns (may be negative when jitter exceeds the delay: at once, in order).
    After(i64),
}

/// The running emulation.
pub struct Netem {
    emu: Emulation,
    rng: SplitMix64,
    loss: LossState,
    delay: Correlated,
    duplicate: Correlated,
    corrupt: Correlated,
    reorder: Correlated,
    table: Option<&'static [i16]>,
    /// Frames delayed since the last reordered one (netem's `counter`, for `gap`).
    counter: u32,
    /// The slot state (with `slot`).
    slot: Option<SlotState>,
}

/// netem's `q->slot`.
#[derive(Clone, Copy, Debug)]
struct SlotState {
    /// When the current (or next) slot opens, ns.
    next: u64,
    /// What the open slot may still carry.
    packets_left: i64,
    bytes_left: i64,
}

impl Netem {
    /// Start an emulation; `seed` is used unless the spec names its own.
    pub fn new(emu: Emulation, seed: u64) -> Netem {
        let mut rng = SplitMix64::new(emu.seed.unwrap_or(seed));
        Netem {
            loss: LossState::new(emu.loss, &mut rng),
            delay: Correlated::new(emu.delay_corr, &mut rng),
            duplicate: Correlated::new(emu.duplicate_corr, &mut rng),
            corrupt: Correlated::new(emu.corrupt_corr, &mut rng),
            reorder: Correlated::new(emu.reorder_corr, &mut rng),
            table: emu.distribution.table(),
            counter: 0,
            // netem starts the first slot when configured; the first frame then redraws it.
            slot: emu.slot.map(|s| SlotState {
                next: 0,
                packets_left: slot_packets(&s),
                bytes_left: slot_bytes(&s),
            }),
            emu,
            rng,
        }
    }

    /// `netem_dequeue`'s slot rule for the wire's head frame, due at `due`, looked at `now`:
    /// when it may leave. Without `slot`, `due`.
    pub fn slot_gate(&mut self, due: u64, now: u64) -> u64 {
        let Some(st) = self.slot else { return due };
        let next = if st.next < due {
            self.next_slot(now)
        } else {
            st.next
        };
        due.max(next)
    }

    /// When the wire's head frame, due at `due`, may leave as things stand (for timers).
    pub fn slot_wait(&self, due: u64) -> u64 {
        self.slot.map_or(due, |st| due.max(st.next))
    }

    /// A frame of `len` bytes left in the open slot at `now`: spend the slot's budget, and
    /// draw the next opening once it is used up.
    pub fn slot_sent(&mut self, len: usize, now: u64) {
        let Some(st) = self.slot.as_mut() else { return };
        st.packets_left -= 1;
        st.bytes_left -= len as i64;
        if st.packets_left <= 0 || st.bytes_left <= 0 {
            self.next_slot(now);
        }
    }

    /// `get_slot_next`: the next slot opens a draw after `now`, with a fresh budget.
    fn next_slot(&mut self, now: u64) -> u64 {
        let Some(slot) = self.emu.slot else {
            return now;
        };
        let gap = match slot.gap {
            // min + (max − min) · u32 / 2³², in 128 bits, as Linux's 2026 fix does (6.18's
            // 64-bit product overflows for ranges above about 2.1 s).
            SlotGap::Uniform { min_ns, max_ns } => {
                let r = u128::from(self.rng.next_u32());
                min_ns
                    .saturating_add(((u128::from(max_ns.saturating_sub(min_ns)) * r) >> 32) as u64)
            }
            SlotGap::Distribution {
                dist,
                delay_ns,
                jitter_ns,
            } => {
                let mu = delay_ns.min(i64::MAX as u64) as i64;
                // netem caps the slot jitter at INT_MAX ns.
                let sigma = jitter_ns.min(i32::MAX as u64) as i64;
                let rnd = self.rng.next_u32();
                dist::tabledist(mu, sigma, rnd, dist.table()).max(0) as u64
            }
        };
        let next = now.saturating_add(gap);
        self.slot = Some(SlotState {
            next,
            packets_left: slot_packets(&slot),
            bytes_left: slot_bytes(&slot),
        });
        next
    }

    /// The configuration.
    pub fn emulation(&self) -> &Emulation {
        &self.emu
    }

    /// Step 1 for one frame (never asked for a frame that is itself a copy): one more copy?
    pub fn duplicate(&mut self) -> bool {
        self.emu.duplicate.is_set() && self.duplicate.happens(self.emu.duplicate, &mut self.rng)
    }

    /// Step 2 for one frame: does the loss model choose it (to lose, or with `ecn` to mark)?
    pub fn lose(&mut self) -> bool {
        self.loss.lose(&mut self.rng)
    }

    /// Step 3: maybe flip one bit of one byte of `data`; true if it did.
    pub fn corrupt(&mut self, data: &mut [u8]) -> bool {
        if data.is_empty()
            || !self.emu.corrupt.is_set()
            || !self.corrupt.happens(self.emu.corrupt, &mut self.rng)
        {
            return false;
        }
        let byte = (self.rng.next_u64() % data.len() as u64) as usize;
        let bit = self.rng.next_u32() % 8;
        data[byte] ^= 1 << bit;
        true
    }

    /// Step 5: reorder this frame, or delay it by how much.
    pub fn place(&mut self) -> Placement {
        let gap = self.emu.gap;
        let delayed = gap == 0
            || self.counter < gap - 1
            || self.emu.reorder < Prob(self.reorder.next(&mut self.rng));
        if !delayed {
            self.counter = 0;
            return Placement::Now;
        }
        self.counter = self.counter.saturating_add(1);
        // netem's jitter is an s32 of nanoseconds (about 2.1 s at most).
        let sigma = self.emu.jitter_ns.min(i32::MAX as u64) as i64;
        let mu = self.emu.delay_ns.min(i64::MAX as u64) as i64;
        let rnd = if sigma > 0 {
            self.delay.next(&mut self.rng)
        } else {
            0
        };
        Placement::After(dist::tabledist(mu, sigma, rnd, self.table))
    }
}

/// A slot's frame budget (netem: 0 means INT_MAX).
fn slot_packets(s: &Slot) -> i64 {
    s.packets.map_or(i64::from(i32::MAX), i64::from)
}

/// A slot's byte budget (netem: 0 means INT_MAX).
fn slot_bytes(s: &Slot) -> i64 {
    s.bytes.map_or(i64::from(i32::MAX), i64::from)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn netem(s: &str) -> Netem {
        Netem::new(s.parse().unwrap(), 1)
    }

    /// `reorder 25% gap 5`: frames 1–4 delayed, then each later frame sent at once with
    /// probability 25% until one is, and the count starts again (tc-netem(8)'s example).
    #[test]
    fn reorder_with_gap_reorders_at_most_one_frame_in_gap() {
        let mut n = netem("delay 10ms reorder 25% gap 5");
        let placed: Vec<Placement> = (0..100_000).map(|_| n.place()).collect();
        let now: Vec<usize> = placed
            .iter()
            .enumerate()
            .filter(|(_, p)| **p == Placement::Now)
            .map(|(i, _)| i)
            .collect();
        assert!(now[0] >= 4, "the first 4 frames are delayed: {}", now[0]);
        assert!(
            now.windows(2).all(|w| w[1] - w[0] >= 5),
            "at least gap frames between reorders"
        );
        // Each cycle: 4 delayed, then geometric(0.25) trials: mean 4 + 4 = 8 frames a cycle.
        let share = now.len() as f64 / placed.len() as f64;
        assert!((share - 1.0 / 8.0).abs() < 0.005, "{share}");
        assert!(placed
            .iter()
            .all(|p| matches!(p, Placement::Now | Placement::After(10_000_000))));
    }

    /// `reorder 25%` (gap 1): a quarter of the frames skip the delay.
    #[test]
    fn reorder_alone_sends_that_share_at_once() {
        let mut n = netem("delay 10ms reorder 25%");
        let now = (0..100_000).filter(|_| n.place() == Placement::Now).count();
        assert!((now as f64 / 1e5 - 0.25).abs() < 0.005, "{now}");
    }

    #[test]
    fn corruption_flips_exactly_one_bit() {
        let mut n = netem("corrupt 100%");
        for _ in 0..1000 {
            let mut d = vec![0u8; 64];
            assert!(n.corrupt(&mut d));
            assert_eq!(d.iter().map(|b| b.count_ones()).sum::<u32>(), 1);
        }
        let mut n = netem("corrupt 10%");
        let hits = (0..100_000).filter(|_| n.corrupt(&mut [0u8; 64])).count();
        assert!((hits as f64 / 1e5 - 0.1).abs() < 0.005, "{hits}");
    }

    #[test]
    fn duplicate_and_lose_draw_at_their_rates() {
        let mut n = netem("duplicate 100% loss 100%");
        assert!(n.duplicate() && n.lose());
        let mut n = netem("duplicate 20% loss 5%");
        let (d, l) = (0..100_000).fold((0, 0), |(d, l), _| {
            (d + usize::from(n.duplicate()), l + usize::from(n.lose()))
        });
        assert!((d as f64 / 1e5 - 0.20).abs() < 0.006, "{d}");
        assert!((l as f64 / 1e5 - 0.05).abs() < 0.003, "{l}");
    }

    /// The seed fixes every decision: same seed, same sequence; the spec's `seed` wins.
    #[test]
    fn the_seed_fixes_the_decisions() {
        let run = |s: &str, seed| {
            let mut n = Netem::new(s.parse().unwrap(), seed);
            (0..1000)
                .map(|_| (n.duplicate(), n.lose(), n.place()))
                .collect::<Vec<_>>()
        };
        let s = "delay 10ms 5ms loss 10% duplicate 5% reorder 10%";
        assert_eq!(run(s, 1), run(s, 1));
        assert_ne!(run(s, 1), run(s, 2));
        let s = "delay 10ms 5ms loss 10% seed 42";
        assert_eq!(run(s, 1), run(s, 2));
    }
}
