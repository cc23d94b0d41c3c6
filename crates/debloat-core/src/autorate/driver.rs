//! The shaper-rate driver: what runs a [`Controller`] on a direction, the same in the
//! simulator and the gateway. It feeds the core's [`Sampler`] the TCP data leaving the shaper
//! and the ACKs coming back (passive modes), hands a controller that uses them the reflectors'
//! round trips, and at each tick measures what the shaper sent and what is queued, asks the
//! controller, and says when the shaper's rate must change (the caller applies it, as
//! `tc qdisc change … cake bandwidth` would, and lets the path ask the discipline again).
//!
//! What the drivers keep of their own: when ticks fall (a simulator's events, the gateway's
//! loop), where samples come from (the simulator's packets carry their send times; the gateway
//! reads TCP timestamps from frames), and what they record or show.

use super::sampler::Sampler;
use super::{Controller, Reason, Tick};
use crate::packet::Nanos;

/// A controller at work on one direction's shaper.
pub struct Driver {
    ctl: Box<dyn Controller>,
    sampler: Sampler,
    /// Bytes the shaper had sent at the last tick.
    sent_at_tick: u64,
    /// The rate last handed to the shaper, bit/s.
    applied: u64,
    decisions: u64,
    reflector_samples: u64,
}

impl Driver {
    /// `ctl` on a shaper that has sent `sent_bytes` so far; the shaper starts at the
    /// controller's rate ([`Driver::rate_bps`], for the caller to apply).
    pub fn new(ctl: Box<dyn Controller>, sent_bytes: u64) -> Driver {
        let applied = ctl.rate_bps();
        Driver {
            ctl,
            sampler: Sampler::default(),
            sent_at_tick: sent_bytes,
            applied,
            decisions: 0,
            reflector_samples: 0,
        }
    }

    /// A data segment of connection `flow`, sent at `ts` (the sender's clock, unwrapped),
    /// left the shaper at `now`.
    pub fn on_data(&mut self, flow: u64, ts: u64, now: Nanos) {
        self.sampler.on_data(flow, ts, now);
    }

    /// An ACK of connection `flow` echoing `echo` and acknowledging `ack` bytes came back at
    /// `now`.
    pub fn on_ack(&mut self, flow: u64, echo: u64, ack: u64, now: Nanos) {
        self.sampler.on_ack(flow, echo, ack, now);
    }

    /// A reflector's round trip: the controller acts on it at once (cake-autorate's mode).
    /// Returns the shaper's new rate, if it changed.
    pub fn on_reflector(&mut self, now: Nanos, rtt_ns: Nanos) -> Option<u64> {
        self.reflector_samples += 1;
        self.ctl.on_reflector(now, rtt_ns);
        self.changed()
    }

    /// A tick ending at `now`, `interval_ns` after the last: the shaper has sent `sent_bytes`
    /// in all and holds `backlog_bytes`. Returns the shaper's new rate, if it changed.
    pub fn tick(
        &mut self,
        now: Nanos,
        interval_ns: Nanos,
        sent_bytes: u64,
        backlog_bytes: u64,
    ) -> Option<u64> {
        let (min_rtt_ns, acked_bytes) = self.sampler.take(now);
        let tick = Tick {
            interval_ns,
            sent_bytes: sent_bytes.saturating_sub(self.sent_at_tick),
            acked_bytes,
            min_rtt_ns,
            backlog_bytes,
        };
        self.sent_at_tick = sent_bytes;
        self.ctl.on_tick(now, &tick);
        self.decisions += 1;
        self.changed()
    }

    fn changed(&mut self) -> Option<u64> {
        let rate = self.ctl.rate_bps();
        (rate != self.applied).then(|| {
            self.applied = rate;
            rate
        })
    }

    /// The rate the controller wants, bit/s.
    pub fn rate_bps(&self) -> u64 {
        self.ctl.rate_bps()
    }

    /// Why (its last decision).
    pub fn reason(&self) -> Reason {
        self.ctl.reason()
    }

    /// The controller's name.
    pub fn name(&self) -> &'static str {
        self.ctl.name()
    }

    /// Ticks decided.
    pub fn decisions(&self) -> u64 {
        self.decisions
    }

    /// Round-trip samples the sampler took (passive modes).
    pub fn tcp_samples(&self) -> u64 {
        self.sampler.samples()
    }

    /// Reflector round trips handed in.
    pub fn reflector_samples(&self) -> u64 {
        self.reflector_samples
    }

    /// Connections the sampler follows.
    pub fn flows(&self) -> usize {
        self.sampler.flows()
    }

    /// The sampler (to read what it measured before a tick takes it).
    pub fn sampler_mut(&mut self) -> &mut Sampler {
        &mut self.sampler
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A controller that records its ticks and halves its rate on every third.
    struct Fake {
        rate: u64,
        seen: Arc<Mutex<Vec<Tick>>>,
    }

    impl Controller for Fake {
        fn on_reflector(&mut self, _: Nanos, rtt_ns: Nanos) {
            if rtt_ns > 100_000_000 {
                self.rate /= 2;
            }
        }
        fn on_tick(&mut self, _: Nanos, tick: &Tick) {
            let mut seen = self.seen.lock().expect("lock");
            seen.push(*tick);
            if seen.len() % 3 == 0 {
                self.rate /= 2;
            }
        }
        fn rate_bps(&self) -> u64 {
            self.rate
        }
        fn reason(&self) -> Reason {
            Reason::Hold
        }
        fn name(&self) -> &'static str {
            "fake"
        }
    }

    /// Each tick is handed what the shaper sent since the last one (not since the start), and
    /// a change of rate is reported once, at the call that made it.
    #[test]
    fn ticks_measure_the_interval_and_report_each_change_once() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let fake = Fake {
            rate: 64_000_000,
            seen: Arc::clone(&seen),
        };
        let mut d = Driver::new(Box::new(fake), 1_000);
        let mut got = Vec::new();
        for i in 1..=9u64 {
            got.push(d.tick(i * 50_000_000, 50_000_000, 1_000 + i * 62_500, 30_000));
        }
        let want: Vec<Option<u64>> = (1..=9u64)
            .map(|i| (i % 3 == 0).then(|| 64_000_000 >> (i / 3)))
            .collect();
        assert_eq!(got, want);
        let seen = seen.lock().expect("lock");
        assert!(seen
            .iter()
            .all(|t| t.sent_bytes == 62_500 && t.backlog_bytes == 30_000));
        assert_eq!(d.decisions(), 9);
        // A reflector's long round trip halves it at once; a short one changes nothing.
        assert_eq!(d.on_reflector(0, 200_000_000), Some(4_000_000));
        assert_eq!(d.on_reflector(0, 20_000_000), None);
        assert_eq!(d.reflector_samples(), 2);
    }
}
