//! A shaper-rate controller ([`debloat_core::autorate`]) on a link direction, fed what a gateway
//! at the bottleneck would see:
//! * every tick (50 ms): the bytes the discipline sent, and — for the passive mode — the round
//!   trips beyond the shaper from the core's [`Sampler`]: a data segment's TCP timestamp is
//!   noted as it leaves the discipline; the ACK echoing it, seen as the client sends it into the
//!   other direction's discipline, closes the sample; the bytes those ACKs cover are the
//!   delivery rate (the gateway feeds the same sampler from real frames);
//! * for cake-autorate's mode, reflector pings: 6 ICMP echo streams from the client side to
//!   the far host, one every 300 ms each, staggered (its defaults); each reply is a sample.
//!   They cross both disciplines as the router's own pings do; they are the controller's, so
//!   they are taken out of the run's probes when it ends.
//!
//! The rate is applied to the discipline at once (`tc qdisc change … cake bandwidth`). The
//! measuring and deciding is the core's [`debloat_core::autorate::driver::Driver`], as in the
//! gateway; what is the simulator's own is when ticks fall (events), where samples come from
//! (the packets' send times) and the series of decisions it records.

use super::*;
use debloat_core::autorate::driver::Driver as RateDriver;
use debloat_core::autorate::oracle::Capacity;
use debloat_core::autorate::{Bounds, Mode, Reason};
use std::ops::Range;

/// How a direction's shaper rate is controlled.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AutorateConfig {
    /// Which controller.
    pub mode: Mode,
    /// Its rate range.
    pub bounds: Bounds,
    /// Its tick, ns (20 decisions a second at 50 ms).
    pub tick_ns: Nanos,
}

impl AutorateConfig {
    /// `mode` within `bounds`, 50 ms ticks.
    pub fn new(mode: Mode, bounds: Bounds) -> AutorateConfig {
        AutorateConfig {
            mode,
            bounds,
            tick_ns: 50_000_000,
        }
    }
}

/// One decision: when, the rate set, and why.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct RatePoint {
    /// Time, ns.
    pub t: Nanos,
    /// The shaper's rate from then, bit/s.
    pub rate_bps: u64,
    /// The controller's reason.
    pub reason: Reason,
}

const REFLECTORS: usize = 6;
const REFLECTOR_INTERVAL: Nanos = 300_000_000;

pub(super) struct Driver {
    /// The controller, its sampler and its measurements (the core's driver).
    rate: RateDriver,
    tick_ns: Nanos,
    passive: bool,
    pub(super) reflectors: Range<usize>,
    pub(super) series: Vec<RatePoint>,
}

impl World {
    /// Control direction `d`'s shaper with `cfg` from `start` (its discipline must shape).
    pub fn set_autorate(&mut self, d: Dir, cfg: AutorateConfig, start: Nanos) {
        // What the oracle (experiments) knows: the direction's trace, or its fixed rate.
        let capacity = match self.modem(d) {
            Some(m) => Capacity::Trace(m.trace().clone()),
            None => Capacity::Fixed(self.links[d.idx()].rate_bps),
        };
        let ctl = cfg.mode.build(cfg.bounds, Some(capacity));
        let mut reflectors = 0..0;
        if cfg.mode.needs_reflectors() {
            let first = self.probes.len();
            for k in 0..REFLECTORS as u64 {
                let at = start + k * REFLECTOR_INTERVAL / REFLECTORS as u64;
                self.add_probe("autorate reflector", false, 0, at, REFLECTOR_INTERVAL);
            }
            reflectors = first..self.probes.len();
        }
        let rate = ctl.rate_bps();
        self.links[d.idx()]
            .path
            .qdisc_mut()
            .set_bandwidth(Some(rate));
        self.autorate[d.idx()] = Some(Box::new(Driver {
            rate: RateDriver::new(ctl, self.links[d.idx()].stats.sent_bytes),
            tick_ns: cfg.tick_ns.max(1_000_000),
            passive: !cfg.mode.needs_reflectors(),
            reflectors,
            series: vec![RatePoint {
                t: 0,
                rate_bps: rate,
                reason: Reason::Start,
            }],
        }));
        self.events.push(start + cfg.tick_ns, Event::Autorate(d));
    }

    /// The decisions of direction `d`'s controller, if it has one.
    pub fn autorate_series(&self, d: Dir) -> Option<&[RatePoint]> {
        self.autorate[d.idx()].as_ref().map(|a| a.series.as_slice())
    }

    /// A data segment left direction `d`'s discipline: note its timestamp.
    pub(super) fn autorate_sent(&mut self, d: Dir, p: &SimPacket) {
        let now = self.now;
        let Some(a) = self.autorate[d.idx()].as_mut().filter(|a| a.passive) else {
            return;
        };
        if let Body::Data { flow, sent_at, .. } = p.body {
            a.rate.on_data(u64::from(flow), sent_at, now);
        }
    }

    /// A packet enters direction `d`: an ACK closes samples of the other direction's
    /// controller.
    pub(super) fn autorate_seen(&mut self, d: Dir, p: &SimPacket) {
        let now = self.now;
        let Some(a) = self.autorate[d.reverse().idx()]
            .as_mut()
            .filter(|a| a.passive)
        else {
            return;
        };
        if let Body::Ack {
            flow, echo, ack, ..
        } = p.body
        {
            // The cumulative ACK counts segments of MSS bytes.
            a.rate
                .on_ack(u64::from(flow), echo, ack * u64::from(MSS), now);
        }
    }

    /// A probe's reply came back: a reflector sample for a controller that uses them.
    pub(super) fn autorate_reflector(&mut self, k: usize, rtt: Nanos) {
        let now = self.now;
        for d in [Dir::Up, Dir::Down] {
            if let Some(a) = self.autorate[d.idx()].as_mut() {
                if a.reflectors.contains(&k) {
                    let changed = a.rate.on_reflector(now, rtt);
                    self.autorate_apply(d, changed);
                }
            }
        }
    }

    pub(super) fn autorate_tick(&mut self, d: Dir) {
        let now = self.now;
        let sent = self.links[d.idx()].stats.sent_bytes;
        let backlog = self.links[d.idx()].path.qdisc().backlog();
        let Some(a) = self.autorate[d.idx()].as_mut() else {
            return;
        };
        let changed = a.rate.tick(now, a.tick_ns, sent, backlog);
        let next = now + a.tick_ns;
        self.autorate_apply(d, changed);
        if next <= self.end {
            self.events.push(next, Event::Autorate(d));
        }
    }

    /// Record the decision; apply a changed rate (`changed`: the driver's word).
    fn autorate_apply(&mut self, d: Dir, changed: Option<u64>) {
        let now = self.now;
        let Some(a) = self.autorate[d.idx()].as_mut() else {
            return;
        };
        let reason = a.rate.reason();
        if changed.is_some() || !matches!(reason, Reason::Hold) {
            a.series.push(RatePoint {
                t: now,
                rate_bps: a.rate.rate_bps(),
                reason,
            });
        }
        if let Some(rate) = changed {
            self.links[d.idx()]
                .path
                .qdisc_mut()
                .set_bandwidth(Some(rate));
            self.retry_path(d);
        }
    }

    /// The reflectors are the controller's: take them out of the run's probes.
    pub(super) fn autorate_forget_reflectors(&mut self) {
        let mut ranges: Vec<Range<usize>> = self
            .autorate
            .iter()
            .flatten()
            .map(|a| a.reflectors.clone())
            .filter(|r| !r.is_empty())
            .collect();
        // Later ranges first, so earlier indices stay valid.
        ranges.sort_by_key(|r| std::cmp::Reverse(r.start));
        for r in ranges {
            self.probes.drain(r);
        }
    }
}
