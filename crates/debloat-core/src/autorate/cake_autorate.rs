//! cake-autorate's controller (lynxthecat/cake-autorate, version 3), as its main loop runs it,
//! for one direction, fed by reflector round trips (its default `fping` pinger: a round trip
//! stands for the one-way delay of both directions) and the shaper's achieved rate.
//!
//! * Every reflector response: the baseline follows the sample (EWMA, α 0.001 upward, 0.9
//!   downward; it starts at 100 ms); the sample's delta over the baseline goes into a window of
//!   the last 6; a sample is *delayed* above 30 ms; **bufferbloat** is 3 delayed of 6. Then:
//!   - bufferbloat, and 300 ms since the last bufferbloat step: the rate × a factor from 0.99
//!     (window's mean delta at 30 ms) to 0.75 (at 60 ms or more);
//!   - else high load (achieved > 75 % of the rate), a new achieved-rate reading since the last
//!     up-step, and 300 ms since the last bufferbloat step: × 1.04 (mean delta ≤ 10 ms) down to
//!     × 1.0 (mean delta 30 ms);
//!   - else, once a second: × 0.99 (above base) or × 1.01 (below), not past base.
//! * Every threshold is raised by one full-size packet's serialisation at the current rate
//!   (its "compensation", noticeable below about 12 Mbit/s).
//! * The achieved rate is read every 200 ms (at least 10 packet round trips at the rate).
//! * Idle (achieved below 2 Mbit/s) for 60 s in a row: it sleeps — stops reacting — until load
//!   returns.
//!
//! Rates are whole kbit/s and factors thousandths, as the script's integer arithmetic has them.
//! Not modelled: reflector health checks and rotation (one simulated path has no bad
//! reflectors), Starlink satellite-switch compensation, the global ping timeout.

use super::{Bounds, Controller, Reason, Tick};
use crate::packet::Nanos;

const US: Nanos = 1_000;
const WINDOW: usize = 6;
const DETECTION_THR: u32 = 3;
const DELAY_THR_US: i64 = 30_000;
const MAX_ADJUST_UP_THR_US: i64 = 10_000;
const MAX_ADJUST_DOWN_THR_US: i64 = 60_000;
/// Thousandths.
const MIN_DOWN: i64 = 990;
const MAX_DOWN: i64 = 750;
const MIN_UP: i64 = 1000;
const MAX_UP: i64 = 1040;
const DECAY_DOWN: u64 = 990;
const DECAY_UP: u64 = 1010;
const HIGH_LOAD_PERCENT: u64 = 75;
const ACTIVE_THR_KBPS: u64 = 2000;
const BUFFERBLOAT_REFRACTORY_US: u64 = 300_000;
const DECAY_REFRACTORY_US: u64 = 1_000_000;
const ACHIEVED_INTERVAL_US: u64 = 200_000;
const SLEEP_AFTER_US: u64 = 60_000_000;
/// A full-size packet on the wire, bits (MTU 1500, no overhead).
const MAX_WIRE_PACKET_BITS: u64 = 12_000;

/// cake-autorate for one direction.
pub struct CakeAutorate {
    bounds: Bounds,
    rate_kbps: u64,
    baseline_us: i64,
    delays: [bool; WINDOW],
    deltas: [i64; WINDOW],
    idx: usize,
    sum_delays: u32,
    sum_deltas: i64,
    t_last_bufferbloat_us: u64,
    t_last_decay_us: u64,
    // The achieved rate's monitor.
    sent_since: u64,
    since_us: u64,
    achieved_kbps: u64,
    achieved_updated: bool,
    idle_since_us: Option<u64>,
    sleeping: bool,
    reason: Reason,
}

fn ewma_us(sample: i64, alpha_milli: i64, avg: i64) -> i64 {
    (alpha_milli * sample + (1000 - alpha_milli) * avg) / 1000
}

impl CakeAutorate {
    /// A controller starting at the base rate.
    pub fn new(bounds: Bounds) -> CakeAutorate {
        CakeAutorate {
            bounds,
            rate_kbps: bounds.base_bps / 1000,
            baseline_us: 100_000,
            delays: [false; WINDOW],
            deltas: [0; WINDOW],
            idx: 0,
            sum_delays: 0,
            sum_deltas: 0,
            t_last_bufferbloat_us: 0,
            t_last_decay_us: 0,
            sent_since: 0,
            since_us: 0,
            achieved_kbps: 0,
            achieved_updated: false,
            idle_since_us: None,
            sleeping: false,
            reason: Reason::Start,
        }
    }

    /// One full-size packet's serialisation at the current rate, µs.
    fn compensation_us(&self) -> i64 {
        (1000 * MAX_WIRE_PACKET_BITS / self.rate_kbps.max(1)) as i64
    }

    fn load_percent(&self) -> u64 {
        100 * self.achieved_kbps / self.rate_kbps.max(1)
    }

    /// The window's mean delta, µs.
    pub fn avg_delta_us(&self) -> i64 {
        self.sum_deltas / WINDOW as i64
    }

    /// Bufferbloat detected (3 of the last 6 samples delayed).
    pub fn bufferbloat(&self) -> bool {
        self.sum_delays >= DETECTION_THR
    }

    fn detect(&mut self, rtt_us: i64) {
        // The baseline follows the sample slowly upward, quickly downward (1000ths: 0.001, 0.9).
        let alpha = if rtt_us >= self.baseline_us { 1 } else { 900 };
        self.baseline_us = ewma_us(rtt_us, alpha, self.baseline_us);
        let delta = rtt_us - self.baseline_us;
        let delayed = delta > DELAY_THR_US + self.compensation_us();
        let i = self.idx;
        self.sum_delays = self.sum_delays - u32::from(self.delays[i]) + u32::from(delayed);
        self.delays[i] = delayed;
        self.sum_deltas += delta - self.deltas[i];
        self.deltas[i] = delta;
        self.idx = (i + 1) % WINDOW;
    }

    fn step_down(&mut self, t_us: u64) {
        let comp = self.compensation_us();
        let (thr, max_down) = (DELAY_THR_US + comp, MAX_ADJUST_DOWN_THR_US + comp);
        let avg = self.avg_delta_us();
        let factor = if max_down <= thr {
            1000
        } else if avg > thr {
            (1000 * (avg - thr) / (max_down - thr)).min(1000)
        } else {
            0
        };
        let adjust = (1000 * MIN_DOWN - factor * (MIN_DOWN - MAX_DOWN)) as u64;
        self.rate_kbps = self.rate_kbps * adjust / 1_000_000;
        self.t_last_bufferbloat_us = t_us;
        self.t_last_decay_us = t_us;
        self.reason = Reason::Bufferbloat {
            delay_ms: avg as f64 / 1000.0,
        };
    }

    fn step_up(&mut self, t_us: u64) {
        let comp = self.compensation_us();
        let (thr, max_up) = (DELAY_THR_US + comp, MAX_ADJUST_UP_THR_US + comp);
        let avg = self.avg_delta_us();
        let factor = if thr <= max_up {
            1000
        } else if thr - avg > 0 {
            (1000 * (thr - avg) / (thr - max_up)).min(1000)
        } else {
            0
        };
        let adjust = (1000 * MIN_UP - factor * (MIN_UP - MAX_UP)) as u64;
        self.rate_kbps = self.rate_kbps * adjust / 1_000_000;
        self.achieved_updated = false;
        self.t_last_decay_us = t_us;
        self.reason = Reason::HighLoad;
    }

    fn decay(&mut self, t_us: u64) {
        let base = self.bounds.base_bps / 1000;
        if self.rate_kbps > base {
            self.rate_kbps = (self.rate_kbps * DECAY_DOWN / 1000).max(base);
        } else if self.rate_kbps < base {
            self.rate_kbps = (self.rate_kbps * DECAY_UP / 1000).min(base);
        }
        self.t_last_decay_us = t_us;
        self.reason = Reason::Decay;
    }
}

impl Controller for CakeAutorate {
    fn on_reflector(&mut self, now: Nanos, rtt_ns: Nanos) {
        if self.sleeping {
            return;
        }
        let t_us = now / US;
        self.detect((rtt_ns / US) as i64);
        self.reason = Reason::Hold;
        if self.bufferbloat() {
            if t_us > self.t_last_bufferbloat_us + BUFFERBLOAT_REFRACTORY_US {
                self.step_down(t_us);
            }
        } else if self.load_percent() > HIGH_LOAD_PERCENT {
            if self.achieved_updated
                && t_us > self.t_last_bufferbloat_us + BUFFERBLOAT_REFRACTORY_US
            {
                self.step_up(t_us);
            }
        } else if t_us > self.t_last_decay_us + DECAY_REFRACTORY_US {
            self.decay(t_us);
        }
        let b = self.bounds;
        self.rate_kbps = self.rate_kbps.clamp(b.min_bps / 1000, b.max_bps / 1000);
    }

    fn on_tick(&mut self, now: Nanos, tick: &Tick) {
        let t_us = now / US;
        self.sent_since += tick.sent_bytes;
        // At least 10 full-size packet round trips at the rate, as the script compensates.
        let interval = ACHIEVED_INTERVAL_US.max(10 * 2 * self.compensation_us() as u64);
        let elapsed = t_us.saturating_sub(self.since_us);
        if elapsed < interval {
            return;
        }
        self.achieved_kbps = 8000 * self.sent_since / elapsed.max(1);
        self.achieved_updated = true;
        self.sent_since = 0;
        self.since_us = t_us;
        if self.achieved_kbps > ACTIVE_THR_KBPS {
            self.idle_since_us = None;
            self.sleeping = false;
        } else {
            let since = *self.idle_since_us.get_or_insert(t_us);
            if t_us - since > SLEEP_AFTER_US && !self.sleeping {
                self.sleeping = true;
                self.reason = Reason::Sleep;
            }
        }
    }

    fn rate_bps(&self) -> u64 {
        self.rate_kbps * 1000
    }

    fn reason(&self) -> Reason {
        self.reason
    }

    fn name(&self) -> &'static str {
        "cake-autorate"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;

    fn ctl() -> CakeAutorate {
        CakeAutorate::new(Bounds {
            min_bps: 1_000_000,
            base_bps: 10_000_000,
            max_bps: 50_000_000,
        })
    }

    /// Feed `load` (fraction of the current rate) and a reflector RTT every 50 ms for `secs`.
    fn drive(
        c: &mut CakeAutorate,
        t0: Nanos,
        secs: u64,
        load: f64,
        rtt: impl Fn(Nanos) -> Nanos,
    ) -> Nanos {
        let mut t = t0;
        while t < t0 + secs * 1000 * MS {
            t += 50 * MS;
            let sent = (c.rate_bps() as f64 * load / 8.0 * 0.05) as u64;
            c.on_tick(
                t,
                &Tick {
                    interval_ns: 50 * MS,
                    sent_bytes: sent,
                    ..Tick::default()
                },
            );
            c.on_reflector(t, rtt(t));
        }
        t
    }

    #[test]
    fn the_baseline_falls_fast_and_rises_slowly() {
        let mut c = ctl();
        c.on_reflector(MS, 20 * MS);
        // 100 ms → 0.9·20 + 0.1·100 = 28 ms.
        assert_eq!(c.baseline_us, 28_000);
        c.on_reflector(2 * MS, 40 * MS);
        assert_eq!(c.baseline_us, (40_000 + 999 * 28_000) / 1000);
    }

    #[test]
    fn high_load_without_delay_climbs_4_percent_per_reading() {
        let mut c = ctl();
        let t = drive(&mut c, 0, 2, 1.0, |_| 20 * MS);
        // A new achieved reading every 200 ms allows one up-step: 10 in 2 s (the first reading
        // comes at 200 ms), each ×1.04 with the mean delta under 10 ms.
        let want = (0..10).fold(10_000u64, |r, _| r * 1_040_000 / 1_000_000);
        assert_eq!(c.rate_bps(), want * 1000, "at {t}");
        // The last sample came with a new reading: a step.
        assert_eq!(c.reason(), Reason::HighLoad);
    }

    #[test]
    fn three_delayed_of_six_step_down_once_per_refractory_period() {
        let mut c = ctl();
        let t = drive(&mut c, 0, 3, 0.5, |_| 20 * MS);
        let before = c.rate_bps();
        // 80 ms over a 20 ms baseline: mean delta reaches past 60 ms → ×0.75 each 300 ms.
        let mut steps = 0;
        let mut last = before;
        let mut tt = t;
        for _ in 0..20 {
            tt += 50 * MS;
            c.on_reflector(tt, 100 * MS);
            if c.rate_bps() < last {
                steps += 1;
                last = c.rate_bps();
            }
        }
        // 1 s of samples: the 3rd sample detects, then one step per > 300 ms: 3 steps.
        assert_eq!(steps, 3, "{before} → {last}");
        assert!(matches!(
            c.reason(),
            Reason::Bufferbloat { .. } | Reason::Hold
        ));
        assert!(last >= c.bounds.min_bps);
    }

    #[test]
    fn low_load_decays_towards_base_once_a_second() {
        let mut c = ctl();
        c.rate_kbps = 20_000;
        drive(&mut c, 0, 5, 0.1, |_| 20 * MS);
        // ×0.99 per second for ~5 decays (first after 1 s).
        assert!(
            c.rate_kbps < 20_000 && c.rate_kbps > 18_900,
            "{}",
            c.rate_kbps
        );
    }

    #[test]
    fn sixty_idle_seconds_put_it_to_sleep() {
        let mut c = ctl();
        drive(&mut c, 0, 61, 0.0, |_| 20 * MS);
        assert_eq!(c.reason(), Reason::Sleep);
        let r = c.rate_bps();
        c.on_reflector(62_000 * MS, 500 * MS);
        assert_eq!(c.rate_bps(), r);
    }
}
