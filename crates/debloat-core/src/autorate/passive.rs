//! debloat's controller: no reflectors, only what a gateway sees of the traffic it forwards.
//!
//! Signals, once a tick (the driver's, 50 ms by default), from [`super::sampler`]:
//! * the round trip *beyond the shaper* — from a segment leaving the shaper to the ACK that
//!   echoes its timestamp coming back — its lowest sample over the last 4 ticks; the path's
//!   base is the lowest over the last 10 s, so `queue = recent lowest − base` is the queue that
//!   formed past the shaper (in a modem the AQM cannot reach). The lowest is used because a link
//!   that delivers in bursts (LTE's scheduling) or a receiver that holds an ACK raises some
//!   samples, while a standing queue raises them all;
//! * the delivery rate: bytes acknowledged over the last 4 ticks, what the link past the shaper
//!   actually carried (BBR's estimate, from the same ACKs);
//! * the load: bytes the shaper sent against its rate, and whether it holds a queue.
//!
//! Decisions:
//! * **bufferbloat** (queue above 12 ms): the link carries less than the shaper sends; the rate
//!   becomes the delivery rate, less what drains the queue in 150 ms (`delivered · (1 − queue /
//!   150 ms)`, at least half of it), never above the current rate — a capacity estimate, not a
//!   fixed step. It never cuts more than 30 % in one tick (a delivery rate measured over 200 ms
//!   of bursty ACKs can be low by that much), and waits for a second of samples before
//!   trusting the base;
//! * **high load** (queue under 8 ms, or no sample at all; the shaper sent ≥ 80 % of its rate
//!   or holds a queue; and ACKs came back in the tick — a stalled link returns none): up 5 % a
//!   tick (×2.7 a second at 50 ms ticks): a link that grew is found within a second or two;
//! * otherwise hold: between the thresholds, or when the traffic does not fill the shaper.
//!
//! Compared with cake-autorate: no probes on the network, a decision every tick instead of one
//! per 300 ms refractory period, and down-steps sized by the measured delivery rate instead of
//! a factor of the current rate. The constants were chosen on the simulator's LTE traces
//! (`debloat autorate compare`, docs/autorate.md) and checked on the testbed with real TCP.

use super::{Bounds, Controller, Reason, Tick};
use crate::packet::Nanos;
use std::collections::VecDeque;

const MS: Nanos = 1_000_000;
/// A queue past the shaper above this is bufferbloat.
pub const HIGH_NS: Nanos = 12 * MS;
/// Below this the rate may rise.
pub const LOW_NS: Nanos = 8 * MS;
/// The queue is drained within this.
const DRAIN_NS: Nanos = 150 * MS;
/// The base RTT is the lowest over this long.
const BASE_WINDOW_NS: Nanos = 10_000 * MS;
/// Up-step per tick, thousandths.
const UP_MILLI: u64 = 1050;
/// High load: the shaper sent at least this share of its rate, thousandths.
const HIGH_LOAD_MILLI: u64 = 800;
const DELIVERY_TICKS: usize = 4;
/// The queue is the lowest sample of this many ticks.
const RECENT_TICKS: usize = 4;
/// Samples must have come for this long before a queue is believed.
const BASE_SETTLE_NS: Nanos = 1_000 * MS;

/// The passive controller.
pub struct Passive {
    bounds: Bounds,
    rate_bps: u64,
    /// (time, lowest RTT) per tick with a sample, over the base window.
    rtts: VecDeque<(Nanos, Nanos)>,
    /// (interval, acked bytes) of the last ticks.
    acked: VecDeque<(Nanos, u64)>,
    /// The lowest sample of each of the last ticks (None: no sample).
    recent: VecDeque<Option<Nanos>>,
    reason: Reason,
    queue_ns: Option<Nanos>,
    first_sample: Option<Nanos>,
}

impl Passive {
    /// A controller starting at the base rate.
    pub fn new(bounds: Bounds) -> Passive {
        Passive {
            bounds,
            rate_bps: bounds.base_bps,
            rtts: VecDeque::new(),
            acked: VecDeque::with_capacity(DELIVERY_TICKS + 1),
            recent: VecDeque::with_capacity(RECENT_TICKS + 1),
            reason: Reason::Start,
            queue_ns: None,
            first_sample: None,
        }
    }

    /// The queue past the shaper at the last tick, ns (None before any sample).
    pub fn queue_ns(&self) -> Option<Nanos> {
        self.queue_ns
    }

    fn base_rtt(&self) -> Option<Nanos> {
        self.rtts.iter().map(|x| x.1).min()
    }

    fn delivery_bps(&self) -> u64 {
        let (ns, bytes) = self
            .acked
            .iter()
            .fold((0, 0), |(n, b), x| (n + x.0, b + x.1));
        if ns == 0 {
            0
        } else {
            (u128::from(bytes) * 8 * 1_000_000_000 / u128::from(ns)) as u64
        }
    }
}

impl Controller for Passive {
    fn on_tick(&mut self, now: Nanos, tick: &Tick) {
        self.acked.push_back((tick.interval_ns, tick.acked_bytes));
        if self.acked.len() > DELIVERY_TICKS {
            self.acked.pop_front();
        }
        if let Some(r) = tick.min_rtt_ns {
            self.first_sample.get_or_insert(now);
            // Keep the window's running minimum: later samples at or below a sample make it
            // useless.
            while self.rtts.back().is_some_and(|x| x.1 >= r) {
                self.rtts.pop_back();
            }
            self.rtts.push_back((now, r));
        }
        while self
            .rtts
            .front()
            .is_some_and(|x| x.0 + BASE_WINDOW_NS < now)
        {
            self.rtts.pop_front();
        }
        self.recent.push_back(tick.min_rtt_ns);
        if self.recent.len() > RECENT_TICKS {
            self.recent.pop_front();
        }
        let lowest = self.recent.iter().flatten().min().copied();
        let queue = match (lowest, self.base_rtt()) {
            (Some(r), Some(b)) => Some(r - b),
            _ => None,
        };
        self.queue_ns = queue;
        let sent_bps = if tick.interval_ns == 0 {
            0
        } else {
            (u128::from(tick.sent_bytes) * 8 * 1_000_000_000 / u128::from(tick.interval_ns)) as u64
        };
        self.reason = Reason::Hold;
        let trusted = self.first_sample.is_some_and(|f| now >= f + BASE_SETTLE_NS);
        let loaded = sent_bps * 1000 >= self.rate_bps * HIGH_LOAD_MILLI || tick.backlog_bytes > 0;
        match queue {
            Some(q) if q > HIGH_NS && trusted => {
                let delivered = self.delivery_bps();
                let keep = DRAIN_NS.saturating_sub(q.min(DRAIN_NS / 2));
                let target =
                    (u128::from(delivered) * u128::from(keep) / u128::from(DRAIN_NS)) as u64;
                if delivered > 0 && target < self.rate_bps {
                    self.rate_bps = target.max(self.rate_bps * 7 / 10);
                }
                self.reason = Reason::Bufferbloat {
                    delay_ms: q as f64 / 1e6,
                };
            }
            Some(q) if q > LOW_NS => {}
            // Up only while the link is seen delivering: a stalled link returns no ACKs.
            _ if loaded && sent_bps > 0 && tick.acked_bytes > 0 => {
                self.rate_bps = self.rate_bps * UP_MILLI / 1000;
                self.reason = Reason::HighLoad;
            }
            _ => {}
        }
        self.rate_bps = self.bounds.clamp(self.rate_bps);
    }

    fn rate_bps(&self) -> u64 {
        self.rate_bps
    }

    fn reason(&self) -> Reason {
        self.reason
    }

    fn name(&self) -> &'static str {
        "passive"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctl() -> Passive {
        Passive::new(Bounds {
            min_bps: 1_000_000,
            base_bps: 10_000_000,
            max_bps: 50_000_000,
        })
    }

    fn tick(sent_bps: u64, acked_bps: u64, rtt_ms: u64) -> Tick {
        Tick {
            interval_ns: 50 * MS,
            sent_bytes: sent_bps / 8 / 20,
            acked_bytes: acked_bps / 8 / 20,
            min_rtt_ns: Some(rtt_ms * MS),
            backlog_bytes: 0,
        }
    }

    #[test]
    fn a_saturated_shaper_with_no_queue_behind_it_climbs_5_percent_a_tick() {
        let mut c = ctl();
        for k in 1..=10u64 {
            let r = c.rate_bps();
            c.on_tick(k * 50 * MS, &tick(r, r, 40));
        }
        let want = (0..10).fold(10_000_000u64, |r, _| r * UP_MILLI / 1000);
        assert_eq!(c.rate_bps(), want);
        assert_eq!(c.reason(), Reason::HighLoad);
    }

    #[test]
    fn a_queue_past_the_shaper_brings_the_rate_to_what_the_link_delivers() {
        let mut c = ctl();
        for k in 1..=20u64 {
            c.on_tick(k * 50 * MS, &tick(10_000_000, 10_000_000, 40));
        }
        // The link falls to 2 Mbit/s: ACKs report 2 Mbit/s and the RTT rises by 50 ms. The
        // queue is the lowest of 4 ticks: the 4th such tick sees it.
        for k in 21..=23u64 {
            c.on_tick(k * 50 * MS, &tick(10_000_000, 2_000_000, 90));
            assert_eq!(c.reason(), Reason::Hold);
        }
        let before = c.rate_bps();
        c.on_tick(24 * 50 * MS, &tick(10_000_000, 2_000_000, 90));
        // At most 30 % less per tick; then delivered 2 Mbit/s × (1 − 50/150) = 1.33 Mbit/s.
        assert_eq!(c.rate_bps(), before * 7 / 10);
        for k in 25..=40u64 {
            c.on_tick(k * 50 * MS, &tick(10_000_000, 2_000_000, 90));
        }
        assert_eq!(c.rate_bps(), 1_333_333);
        assert!(
            matches!(c.reason(), Reason::Bufferbloat { delay_ms } if (delay_ms - 50.0).abs() < 1e-9)
        );
        // It never goes up while the queue is there.
        c.on_tick(41 * 50 * MS, &tick(1_333_333, 1_600_000, 70));
        assert_eq!(c.rate_bps(), 1_333_333);
    }

    #[test]
    fn a_stalled_link_is_never_probed() {
        let mut c = ctl();
        // The shaper sends at its rate, nothing is acknowledged: no up-step.
        let mut t = tick(10_000_000, 0, 40);
        t.min_rtt_ns = None;
        c.on_tick(50 * MS, &t);
        assert_eq!((c.rate_bps(), c.reason()), (10_000_000, Reason::Hold));
    }

    #[test]
    fn without_load_or_samples_it_holds() {
        let mut c = ctl();
        c.on_tick(50 * MS, &tick(1_000_000, 1_000_000, 40));
        assert_eq!((c.rate_bps(), c.reason()), (10_000_000, Reason::Hold));
        c.on_tick(
            100 * MS,
            &Tick {
                interval_ns: 50 * MS,
                ..Tick::default()
            },
        );
        assert_eq!(c.rate_bps(), 10_000_000);
    }

    #[test]
    fn the_base_is_the_lowest_rtt_of_the_last_ten_seconds() {
        let mut c = ctl();
        c.on_tick(MS, &tick(0, 0, 30));
        for k in 1..=250u64 {
            c.on_tick(k * 50 * MS, &tick(0, 0, 60));
        }
        // The 30 ms sample aged out after 10 s: the base is now 60 ms, the queue 0.
        assert_eq!(c.base_rtt(), Some(60 * MS));
        assert_eq!(c.queue_ns(), Some(0));
    }
}
