//! An oracle, for experiments only: it sets the shaper to a share of what the link *will*
//! carry over the next 50 ms — read from the capacity trace the simulator or the gateway's
//! emulated link is playing, which no real controller can know. It bounds what any controller
//! could reach on a trace: where even the oracle misses a delay goal at a goodput goal, the two
//! goals conflict on that trace, whatever the controller.
//!
//! Share: 95 % of the capacity by default (`oracle`), so the shaper's own accounting (cake's
//! overhead against the trace's 1504-byte opportunities) does not let a queue build in the
//! modem; `oracle:0.7` gives up more of the link for less delay. Bounded by `min ≤ rate ≤ max`
//! like every controller.

use super::{Bounds, Controller, Reason, Tick};
use crate::link::Trace;
use crate::packet::Nanos;
use std::sync::Arc;

/// What the link will carry.
#[derive(Clone, Debug)]
pub enum Capacity {
    /// A capacity trace (its clock is the driver's: 0 when the link started).
    Trace(Arc<Trace>),
    /// A fixed rate, bit/s.
    Fixed(u64),
}

/// How far ahead it looks: one decision tick.
pub const LOOKAHEAD_NS: Nanos = 50_000_000;
/// The share of the capacity it shapes to by default, thousandths.
pub const SHARE_PERMILLE: u64 = 950;

/// The oracle controller.
pub struct Oracle {
    capacity: Option<Capacity>,
    share_permille: u64,
    bounds: Bounds,
    rate: u64,
    reason: Reason,
}

impl Oracle {
    /// An oracle of `capacity` (None: nothing to know; it holds `base`) shaping to
    /// `share_permille` thousandths of it.
    pub fn new(bounds: Bounds, capacity: Option<Capacity>, share_permille: u16) -> Oracle {
        Oracle {
            capacity,
            share_permille: u64::from(share_permille),
            bounds,
            rate: bounds.base_bps,
            reason: Reason::Start,
        }
    }

    /// The capacity over the next [`LOOKAHEAD_NS`] from `now`, bit/s.
    fn ahead(&self, now: Nanos) -> Option<u64> {
        match self.capacity.as_ref()? {
            Capacity::Fixed(r) => Some(*r),
            Capacity::Trace(t) => {
                let bits = u128::from(t.bits_in(now, now + LOOKAHEAD_NS));
                Some((bits * 1_000_000_000 / u128::from(LOOKAHEAD_NS)) as u64)
            }
        }
    }
}

impl Controller for Oracle {
    fn on_tick(&mut self, now: Nanos, _tick: &Tick) {
        match self.ahead(now) {
            Some(bps) => {
                self.rate = self.bounds.clamp(bps / 1000 * self.share_permille);
                self.reason = Reason::Oracle;
            }
            None => self.reason = Reason::Hold,
        }
    }
    fn rate_bps(&self) -> u64 {
        self.rate
    }
    fn reason(&self) -> Reason {
        self.reason
    }
    fn name(&self) -> &'static str {
        "oracle"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;

    #[test]
    fn it_shapes_to_what_the_trace_carries_next() {
        let t = Trace::parse("0,10mbit\n1,2mbit\n3,0\n3.5,8mbit\n").expect("trace");
        let b = Bounds::parse("min=500kbit,base=5mbit,max=20mbit").expect("bounds");
        let mut o = Oracle::new(b, Some(Capacity::Trace(Arc::new(t))), 950);
        assert_eq!(o.rate_bps(), 5_000_000);
        let tick = Tick::default();
        for (at, want) in [
            (0, 9_500_000),
            (975 * MS, 5_700_000), // half the window at 10, half at 2 → 6 Mbit/s × 0.95
            (2000 * MS, 1_900_000),
            (3100 * MS, 500_000), // nothing: the floor
            (4000 * MS, 7_600_000),
        ] {
            o.on_tick(at, &tick);
            assert_eq!(o.rate_bps(), want, "at {at} ns");
            assert_eq!(o.reason(), Reason::Oracle);
        }
        let mut f = Oracle::new(b, Some(Capacity::Fixed(30_000_000)), 950);
        f.on_tick(0, &tick);
        assert_eq!(f.rate_bps(), 20_000_000, "clamped to max");
        let mut n = Oracle::new(b, None, 950);
        let mut h = Oracle::new(b, Some(Capacity::Fixed(10_000_000)), 600);
        h.on_tick(0, &tick);
        assert_eq!(h.rate_bps(), 6_000_000);
        n.on_tick(0, &tick);
        assert_eq!((n.rate_bps(), n.reason()), (5_000_000, Reason::Hold));
    }
}
