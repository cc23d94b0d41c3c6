//! COBALT: CoDel + BLUE, CAKE's per-flow AQM (sch_cake.c `cobalt_*`).
//!
//! Differences from CoDel, all Linux behaviour (docs/algorithms.md §3.5):
//! * no `first_above_time`: the first signal comes one interval after the sojourn goes over
//!   target, through `drop_next`, which doubles as an activity timeout;
//! * `count` decays by one per elapsed control-law step instead of jumping back to 1;
//! * 1/sqrt(count) comes from a cache for count < 16 (four Newton steps per entry, as the
//!   kernel builds it), one Newton step in Q0.32 above;
//! * the sojourn must also exceed 4 MTU times (and, on ingress, 2 MTU times per bulk flow);
//! * ECN is always attempted; BLUE raises `p_drop` by 1/256 on overflow and lowers it by 1/4096
//!   when the queue is found empty, each at most once per `target`, and never marks.
//!
//! State starts zeroed, including `rec_inv_sqrt = 0`, and is not re-initialised when a flow slot
//! is reused: a pristine slot signals its second over-target packet with no grace interval.

use crate::packet::{Nanos, Packet};

/// Per-tin COBALT parameters (nanoseconds).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Params {
    /// Target sojourn.
    pub target: u64,
    /// Control-law interval.
    pub interval: u64,
    /// Time to send one MTU at the tin's rate (0 when unlimited).
    pub mtu_time: u64,
    /// BLUE increment, Q0.32 (2^24 = 1/256).
    pub p_inc: u32,
    /// BLUE decrement, Q0.32 (2^20 = 1/4096).
    pub p_dec: u32,
}

/// Per-flow COBALT state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Vars {
    /// Signals since the episode began, decaying.
    pub count: u32,
    /// 1/sqrt(count) in Q0.32.
    pub rec_inv_sqrt: u32,
    /// Next signal time, or activity timeout.
    pub drop_next: Nanos,
    /// Last BLUE adjustment.
    pub blue_timer: Nanos,
    /// BLUE drop probability, Q0.32.
    pub p_drop: u32,
    /// In the dropping state.
    pub dropping: bool,
    /// The last packet returned was CE-marked.
    pub ecn_marked: bool,
}

/// What `should_drop` decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Deliver (possibly CE-marked: see [`Vars::ecn_marked`]).
    Pass,
    /// The CoDel part says drop (packet not ECN-capable).
    Drop,
    /// BLUE says drop.
    Blue,
}

const CACHE: usize = 16;

fn newton_step(count: u32, rec_inv_sqrt: u32) -> u32 {
    let invsqrt = u64::from(rec_inv_sqrt);
    let invsqrt2 = (invsqrt * invsqrt) >> 32;
    let mut val = (3u64 << 32).wrapping_sub(u64::from(count).wrapping_mul(invsqrt2));
    val >>= 2;
    val = val.wrapping_mul(invsqrt) >> (32 - 2 + 1);
    val as u32
}

/// The kernel's `inv_sqrt_cache` of 1/sqrt(count) in Q0.32 for count < 16, constant since
/// Linux 6.12 ("sch_cake: constify inverse square root cache"); the kernel derived it with eight
/// Newton steps per count (our `newton_cache` below agrees to one unit in the last place).
/// Older kernels built it at load time with four steps, which left count 2 at 0.7067.
pub const INV_SQRT_CACHE: [u32; CACHE] = [
    u32::MAX,
    u32::MAX,
    3037000500,
    2479700525,
    2147483647,
    1920767767,
    1753413056,
    1623345051,
    1518500250,
    1431655765,
    1358187914,
    1294981364,
    1239850263,
    1191209601,
    1147878294,
    1108955788,
];

/// The cache as returned to callers.
pub fn inv_sqrt_cache() -> [u32; CACHE] {
    INV_SQRT_CACHE
}

#[cfg(test)]
fn newton_cache(steps: usize) -> [u32; CACHE] {
    let mut cache = [0u32; CACHE];
    let mut rec = u32::MAX;
    cache[0] = rec;
    for (count, slot) in cache.iter_mut().enumerate().skip(1) {
        for _ in 0..steps {
            rec = newton_step(count as u32, rec);
        }
        *slot = rec;
    }
    cache
}

/// COBALT bound to its inverse-sqrt cache.
#[derive(Clone, Copy, Debug)]
pub struct Cobalt {
    cache: [u32; CACHE],
}

impl Default for Cobalt {
    fn default() -> Self {
        Cobalt {
            cache: inv_sqrt_cache(),
        }
    }
}

/// `cobalt_control`: `t + interval / sqrt(count)`, as the kernel computes it with
/// `reciprocal_scale(interval, rec_inv_sqrt)` — whose first argument is a u32, so an interval
/// above 4.29 s (a shaper under about 3 kbit/s) is truncated there too.
#[inline]
fn control(t: Nanos, interval: u64, rec_inv_sqrt: u32) -> Nanos {
    t.wrapping_add((u64::from(interval as u32) * u64::from(rec_inv_sqrt)) >> 32)
}

impl Cobalt {
    #[inline]
    fn invsqrt(&self, v: &mut Vars) {
        v.rec_inv_sqrt = if (v.count as usize) < CACHE {
            self.cache[v.count as usize]
        } else {
            newton_step(v.count, v.rec_inv_sqrt)
        };
    }

    /// `cobalt_queue_full`: the flow lost a packet to overflow. Returns true when BLUE just
    /// became active for it (p_drop went from 0 to non-zero).
    pub fn queue_full(&self, v: &mut Vars, p: &Params, now: Nanos) -> bool {
        let mut up = false;
        if now.wrapping_sub(v.blue_timer) as i64 > p.target as i64 {
            up = v.p_drop == 0;
            v.p_drop = v.p_drop.saturating_add(p.p_inc);
            v.blue_timer = now;
        }
        v.dropping = true;
        v.drop_next = now;
        if v.count == 0 {
            v.count = 1;
        }
        up
    }

    /// `cobalt_queue_empty`: the flow was found empty at dequeue. Returns true when BLUE just
    /// went inactive for it.
    #[inline]
    pub fn queue_empty(&self, v: &mut Vars, p: &Params, now: Nanos) -> bool {
        let mut down = false;
        if v.p_drop != 0 && now.wrapping_sub(v.blue_timer) as i64 > p.target as i64 {
            v.p_drop = v.p_drop.saturating_sub(p.p_dec);
            v.blue_timer = now;
            down = v.p_drop == 0;
        }
        v.dropping = false;
        if v.count != 0 && now.wrapping_sub(v.drop_next) as i64 >= 0 {
            v.count -= 1;
            self.invsqrt(v);
            v.drop_next = control(v.drop_next, p.interval, v.rec_inv_sqrt);
        }
        down
    }

    /// `cobalt_should_drop` for packet `skb` at `now`; `bulk_flows` is the tin's bulk count on
    /// ingress and 0 on egress. CE-marks `skb` when the verdict is a mark. `rand32` is drawn only
    /// when BLUE is active.
    #[inline]
    pub fn should_drop<P: Packet>(
        &self,
        v: &mut Vars,
        p: &Params,
        now: Nanos,
        skb: &mut P,
        bulk_flows: u32,
        rand32: impl FnOnce() -> u32,
    ) -> Verdict {
        let mut verdict = Verdict::Pass;
        let sojourn = now.wrapping_sub(skb.meta().enqueue_ns);
        let mut schedule = now.wrapping_sub(v.drop_next) as i64;
        let over_target = sojourn > p.target
            && sojourn > p.mtu_time * u64::from(bulk_flows) * 2
            && sojourn > p.mtu_time * 4;
        let mut next_due = v.count != 0 && schedule >= 0;
        v.ecn_marked = false;

        if over_target {
            if !v.dropping {
                v.dropping = true;
                v.drop_next = control(now, p.interval, v.rec_inv_sqrt);
            }
            if v.count == 0 {
                v.count = 1;
            }
        } else if v.dropping {
            v.dropping = false;
        }

        if next_due && v.dropping {
            v.ecn_marked = skb.set_ce();
            if !v.ecn_marked {
                verdict = Verdict::Drop;
            }
            v.count = v.count.saturating_add(1);
            self.invsqrt(v);
            v.drop_next = control(v.drop_next, p.interval, v.rec_inv_sqrt);
            schedule = now.wrapping_sub(v.drop_next) as i64;
        } else {
            while next_due {
                v.count -= 1;
                self.invsqrt(v);
                v.drop_next = control(v.drop_next, p.interval, v.rec_inv_sqrt);
                schedule = now.wrapping_sub(v.drop_next) as i64;
                next_due = v.count != 0 && schedule >= 0;
            }
        }

        if v.p_drop != 0 && verdict == Verdict::Pass && rand32() < v.p_drop {
            verdict = Verdict::Blue;
        }

        if v.count == 0 {
            v.drop_next = now.wrapping_add(p.interval);
        } else if schedule > 0 && verdict == Verdict::Pass {
            v.drop_next = now;
        }
        verdict
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eight_newton_steps_reproduce_the_kernel_table() {
        for (a, b) in newton_cache(8).iter().zip(INV_SQRT_CACHE) {
            assert!(a.abs_diff(b) <= 1, "{a} vs {b}");
        }
    }

    #[test]
    fn cache_is_close_to_exact_below_16() {
        let c = inv_sqrt_cache();
        assert_eq!(c[0], u32::MAX);
        assert!(c[1] >= u32::MAX - 2);
        for (n, &r) in c.iter().enumerate().skip(2) {
            let exact = 1.0 / (n as f64).sqrt();
            let got = f64::from(r) / 4294967296.0;
            assert!((got - exact).abs() < 1e-4, "count {n}: {got} vs {exact}");
        }
    }
}
