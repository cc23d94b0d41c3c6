//! The gateway's shaper-rate controller (`--autorate-egress/-ingress min=…,base=…,max=…`): the
//! core's passive controller ([`debloat_core::autorate::passive`]) fed by the core's sampler
//! ([`debloat_core::autorate::sampler`]) from the frames the gateway forwards — a TCP data
//! frame's timestamp as the discipline releases it, the ACK echoing it as it arrives from the
//! other side — and a decision every 50 ms, applied to the discipline as `tc qdisc change …
//! cake bandwidth` would.
//!
//! cake-autorate's mode (`--autorate-mode cake-autorate`) is the core's
//! [`debloat_core::autorate::cake_autorate`] fed by reflector pings ([`crate::pinger`]): each
//! reply is acted on when the loop next turns, as the script acts on each line fping prints;
//! its achieved rate comes from the same 50 ms ticks.

use crate::frame::Frame;
use crate::path::Path;
pub use crate::tcp_seen::{seen, TcpSeen};
use debloat_core::autorate::driver::Driver;
use debloat_core::autorate::sampler::unwrap32;
use debloat_core::autorate::{Bounds, Mode, Reason};
use debloat_core::packet::Nanos;
use debloat_core::Qdisc;
use serde::Serialize;
use std::collections::HashMap;

/// A direction's controller as configured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AutorateConfig {
    /// Which controller (the gateway runs [`Mode::Passive`]).
    pub mode: Mode,
    /// Its range.
    pub bounds: Bounds,
}

/// Decisions per second: one every 50 ms.
pub const TICK_NS: Nanos = 50_000_000;

/// What `gateway stats` shows of a controller.
#[derive(Clone, Debug, Serialize)]
pub struct Status {
    /// The controller.
    pub mode: &'static str,
    /// The rate it set, bit/s.
    pub rate_bps: u64,
    /// Why (the last decision).
    pub reason: Reason,
    /// Decisions taken.
    pub decisions: u64,
    /// Round-trip samples taken: TCP's (passive mode) or reflector replies (cake-autorate).
    pub samples: u64,
    /// Connections followed.
    pub flows: usize,
    /// Reflector pings sent (cake-autorate's mode; 0 otherwise): `samples` of them answered.
    pub pings_sent: u64,
}

/// Where a controller's rate goes: the discipline itself, or (with several workers) the total
/// the workers split, with the load read from all of them.
#[derive(Clone, Debug)]
pub struct Sharded {
    /// What the workers share.
    pub shards: std::sync::Arc<crate::shards::Shards>,
    /// The direction: 0 egress, 1 ingress.
    pub dir: usize,
}

/// A direction's controller at work: the core's driver (the simulator's too), fed from frames
/// and ticked by the loop.
pub struct Control {
    rate: Driver,
    reflectors: bool,
    sharded: Option<Sharded>,
    /// Per connection: the highest data timestamp and ACK number seen, unwrapped to 64 bits.
    unwrap: HashMap<u64, (u64, Option<u64>)>,
    next_tick: Nanos,
}

impl Control {
    /// A controller on `path`'s discipline, starting at its base rate (applied now); with
    /// `sharded`, on the total several workers split.
    pub fn new(
        cfg: AutorateConfig,
        path: &mut crate::path::Path,
        now: Nanos,
        sharded: Option<Sharded>,
    ) -> Control {
        let ctl = cfg.mode.build(cfg.bounds, path.capacity());
        let qdisc = path.qdisc_mut();
        let bytes = match &sharded {
            Some(s) => {
                s.shards.set_total(s.dir, ctl.rate_bps());
                s.shards.counts(s.dir).0
            }
            None => {
                qdisc.set_bandwidth(Some(ctl.rate_bps()));
                qdisc.stats().bytes
            }
        };
        Control {
            rate: Driver::new(ctl, bytes),
            reflectors: cfg.mode.needs_reflectors(),
            sharded,
            unwrap: HashMap::new(),
            next_tick: now + TICK_NS,
        }
    }

    /// A data frame of this direction left the discipline.
    pub fn on_sent(&mut self, s: &TcpSeen) {
        let e = self
            .unwrap
            .entry(s.key)
            .or_insert((u64::from(s.tsval), None));
        let ts = unwrap32(e.0, s.tsval);
        e.0 = e.0.max(ts);
        self.rate.on_data(s.key, ts, s.at);
    }

    /// A frame arrived from the far side of this direction (it may ACK this direction's data).
    pub fn on_ack(&mut self, s: &TcpSeen) {
        // Only connections whose data this direction carries: the echo is in the data sender's
        // clock, the ACK number in its sequence space.
        let Some(e) = self.unwrap.get_mut(&s.key) else {
            return;
        };

        let echo = unwrap32(e.0, s.tsecr);
        let ack = e.1.map_or(u64::from(s.ack), |a| unwrap32(a, s.ack));
        e.1 = Some(e.1.map_or(ack, |a| a.max(ack)));
        self.rate.on_ack(s.key, echo, ack, s.at);
    }

    /// A reflector's round trip (cake-autorate's mode acts on each at once), applied to `qdisc`.
    pub fn on_reflector(&mut self, now: Nanos, rtt_ns: Nanos, qdisc: &mut dyn Qdisc<Frame>) {
        if !self.reflectors {
            return;
        }
        if let Some(r) = self.rate.on_reflector(now, rtt_ns) {
            self.set(r, qdisc);
        }
    }

    /// Apply a decided rate: to the discipline, or as the workers' total.
    fn set(&self, bps: u64, qdisc: &mut dyn Qdisc<Frame>) {
        match &self.sharded {
            Some(s) => s.shards.set_total(s.dir, bps),
            None => {
                qdisc.set_bandwidth(Some(bps));
            }
        }
    }

    /// When the next decision is due.
    pub fn due(&self) -> Nanos {
        self.next_tick
    }

    /// Decide if due, and apply the rate to `qdisc`.
    pub fn tick(&mut self, now: Nanos, qdisc: &mut dyn Qdisc<Frame>) {
        if now < self.next_tick {
            return;
        }
        let (bytes, backlog) = match &self.sharded {
            Some(s) => s.shards.counts(s.dir),
            None => {
                let st = qdisc.stats();
                (st.bytes, st.backlog)
            }
        };
        let interval = TICK_NS + (now - self.next_tick);
        if let Some(r) = self.rate.tick(now, interval, bytes, backlog) {
            self.set(r, qdisc);
        }
        self.next_tick = now + TICK_NS;
        if self.unwrap.len() > self.rate.flows() * 2 + 1024 {
            self.unwrap.clear();
        }
    }

    /// What it is doing, with the pinger's count of echoes sent.
    pub fn status_with(&self, pinger: Option<&crate::pinger::Pinger>) -> Status {
        let mut s = self.status();
        if self.reflectors {
            s.pings_sent = pinger.map_or(0, |p| p.counts().0);
        }
        s
    }

    /// What it is doing.
    pub fn status(&self) -> Status {
        Status {
            mode: self.rate.name(),
            rate_bps: self.rate.rate_bps(),
            reason: self.rate.reason(),
            decisions: self.rate.decisions(),
            samples: if self.reflectors {
                self.rate.reflector_samples()
            } else {
                self.rate.tcp_samples()
            },
            flows: self.rate.flows(),
            pings_sent: 0,
        }
    }
}

/// `gateway stats`' line for a controller.
pub fn status_line(a: &Status) -> String {
    let pings = if a.pings_sent > 0 {
        format!(" (of {} pings)", a.pings_sent)
    } else {
        String::new()
    };
    format!(
        " autorate: {} rate {} ({}) decisions {} samples {}{pings} flows {}\n",
        a.mode,
        debloat_core::units::fmt_rate(a.rate_bps),
        a.reason,
        a.decisions,
        a.samples,
        a.flows
    )
}

/// The pinger a configuration needs: one when a direction runs cake-autorate's mode (which
/// then must have reflectors), none otherwise.
pub(crate) fn pinger_for(cfg: &crate::Config) -> std::io::Result<Option<crate::pinger::Pinger>> {
    let needs = [cfg.autorate_egress, cfg.autorate_ingress]
        .iter()
        .flatten()
        .any(|a| a.mode.needs_reflectors());
    match (&cfg.reflectors, needs) {
        (_, false) => Ok(None),
        (None, true) => Err(std::io::Error::other(
            "cake-autorate's mode pings reflectors: give --reflectors IP[,IP…]",
        )),
        (Some(r), true) => crate::pinger::Pinger::spawn(r.clone()).map(Some),
    }
}

/// Each direction's rate controller, if configured (on a worker: driving the workers' total).
pub(crate) fn controllers(
    [egress, ingress]: [&mut crate::forward::Side; 2],
    cfg: &crate::Config,
    shard: Option<&crate::worker::ShardRole>,
) -> std::io::Result<()> {
    for (dir, (s, a, name)) in [
        (egress, cfg.autorate_egress, "egress"),
        (ingress, cfg.autorate_ingress, "ingress"),
    ]
    .into_iter()
    .enumerate()
    {
        if let Some(a) = a {
            if !matches!(s.spec, debloat_core::QdiscSpec::Cake(_)) {
                return Err(std::io::Error::other(format!(
                    "--autorate-{name} sets a shaper's rate: give --{name} \"cake …\""
                )));
            }
            if matches!(a.mode, debloat_core::autorate::Mode::Oracle(_))
                && s.path.capacity().is_none()
            {
                return Err(std::io::Error::other(format!("--autorate-mode oracle reads the emulated link's capacity: give --emulate-{name} \"rate … | rate trace FILE\"")));
            }
            let sharded = shard.map(|r| crate::autorate::Sharded {
                shards: std::sync::Arc::clone(&r.shards),
                dir,
            });
            s.autorate = Some(crate::autorate::Control::new(a, &mut s.path, 0, sharded));
        }
    }
    Ok(())
}

/// Hand the controllers what the paths saw and the pinger heard, and let them decide when due.
/// A frame released in one direction is that direction's data; a frame arriving in it may ACK
/// the other's; a reflector's round trip goes to both directions (a round trip stands for
/// either one-way delay, as with cake-autorate's fping).
pub(crate) fn feed(
    egress: (&mut Path, &mut Option<Control>),
    ingress: (&mut Path, &mut Option<Control>),
    pinger: Option<&crate::pinger::Pinger>,
    now: Nanos,
) {
    let ((ep, ec), (ip, ic)) = (egress, ingress);
    if ec.is_none() && ic.is_none() {
        return;
    }
    for (s, sent) in ep.take_tcp_log() {
        match (sent, ec.as_mut(), ic.as_mut()) {
            (true, Some(c), _) => c.on_sent(&s),
            (false, _, Some(c)) => c.on_ack(&s),
            _ => {}
        }
    }
    for (s, sent) in ip.take_tcp_log() {
        match (sent, ic.as_mut(), ec.as_mut()) {
            (true, Some(c), _) => c.on_sent(&s),
            (false, _, Some(c)) => c.on_ack(&s),
            _ => {}
        }
    }
    let samples = pinger.map(crate::pinger::Pinger::drain).unwrap_or_default();
    for (path, ctl) in [(ep, ec), (ip, ic)] {
        if let Some(c) = ctl.as_mut() {
            for s in &samples {
                c.on_reflector(now, s.rtt_ns, path.qdisc_mut().as_mut());
            }
            c.tick(now, path.qdisc_mut().as_mut());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use debloat_core::autorate::Bounds;
    use debloat_core::{FlowHasher, QdiscSpec};
    use etherparse::{PacketBuilder, TcpOptionElement};

    const MS: Nanos = 1_000_000;

    /// A TCP frame: client → server data (`payload` bytes) or server → client ACK.
    fn tcp(to_server: bool, payload: usize, ts: (u32, u32), ack: u32) -> Vec<u8> {
        let (src, dst, sp, dp) = if to_server {
            ([198, 18, 1, 2], [198, 18, 2, 2], 40000, 5201)
        } else {
            ([198, 18, 2, 2], [198, 18, 1, 2], 5201, 40000)
        };
        let b = PacketBuilder::ethernet2([1; 6], [2; 6])
            .ipv4(src, dst, 64)
            .tcp(sp, dp, 1, 65535)
            .ack(ack)
            .options(&[TcpOptionElement::Timestamp(ts.0, ts.1)])
            .expect("options");
        let mut buf = Vec::new();
        b.write(&mut buf, &vec![0u8; payload]).expect("write");
        buf
    }

    /// With several workers the controller sets the total the workers split, not its own
    /// discipline's rate, and judges the load from every worker's published counts.
    #[test]
    fn a_sharded_controller_sets_the_workers_total() {
        let spec: QdiscSpec = "cake bandwidth 10mbit".parse().expect("spec");
        let mut p = Path::new(&spec, Default::default(), FlowHasher::new([1, 2]), 1);
        let shards = std::sync::Arc::new(crate::shards::Shards::new(2));
        shards.publish_counts(0, 0, 1000, 0);
        shards.publish_counts(1, 0, 5000, 3000);
        assert_eq!(shards.counts(0), (6000, 3000));
        let cfg = AutorateConfig {
            mode: Mode::Passive,
            bounds: Bounds::parse("min=1mbit,base=7mbit,max=20mbit").expect("bounds"),
        };
        let sharded = Sharded {
            shards: std::sync::Arc::clone(&shards),
            dir: 0,
        };
        let mut c = Control::new(cfg, &mut p, 0, Some(sharded));
        assert_eq!(shards.total(0), Some(7_000_000));
        assert_eq!(shards.total(1), None);
        // The discipline keeps its own rate: the split sets each worker's share.
        let own = p.qdisc().stats().options;
        assert!(own.contains("bandwidth 10Mbit"), "{own}");
        for k in 1..=40 {
            c.tick(k * TICK_NS, p.qdisc_mut().as_mut());
        }
        assert_eq!(c.status().rate_bps, shards.total(0).unwrap_or(0));
    }

    #[test]
    fn data_one_way_and_acks_the_other_make_round_trip_samples() {
        let spec: QdiscSpec = "cake bandwidth 10mbit".parse().expect("spec");
        let fq: QdiscSpec = "fq_codel".parse().expect("spec");
        let h = FlowHasher::new([1, 2]);
        let mut egress = Path::new(&spec, Default::default(), h, 1);
        let mut ingress = Path::new(&fq, Default::default(), h, 2);
        egress.log_tcp();
        ingress.log_tcp();
        let cfg = AutorateConfig {
            mode: Mode::Passive,
            bounds: Bounds::parse("min=1mbit,base=10mbit,max=20mbit").expect("bounds"),
        };
        let mut c = Control::new(cfg, &mut egress, 0, None);
        let mut sink = |_: crate::io::buf::Buf| {};
        // Two data segments 1 ms apart (a pair), stamped 100 and 101; the ACK echoing 101
        // comes back 30 ms after the second left.
        egress.on_frame(tcp(true, 1000, (100, 7), 1), 0);
        egress.on_frame(tcp(true, 1000, (101, 7), 1), MS);
        egress.poll(2 * MS, &mut sink);
        for (s, sent) in egress.take_tcp_log() {
            assert!(sent || s.tsval >= 100);
            if sent {
                c.on_sent(&s);
            }
        }
        ingress.on_frame(tcp(false, 0, (7, 101), 2001), 31 * MS);
        ingress.on_frame(tcp(false, 0, (7, 101), 4001), 32 * MS);
        for (s, sent) in ingress.take_tcp_log() {
            if !sent {
                c.on_ack(&s);
            }
        }
        let st = c.status();
        assert_eq!((st.samples, st.flows), (1, 1));
        let (rtt, acked) = c.rate.sampler_mut().take(40 * MS);
        // Timed from the second segment's departure (1 ms + its 0.8 ms at 10 Mbit/s).
        assert!(
            rtt.is_some_and(|r| (29 * MS..=31 * MS).contains(&r)),
            "{rtt:?}"
        );
        assert_eq!(acked, 2000);
    }

    /// cake-autorate's mode in the gateway: replies 20 ms, then 100 ms (3 of 6 delayed): the
    /// rate steps down and the discipline's bandwidth follows; the passive mode ignores them.
    #[test]
    fn reflector_delay_steps_cake_autorate_down_and_the_discipline_follows() {
        let spec: QdiscSpec = "cake bandwidth 10mbit besteffort".parse().expect("spec");
        let mut p = Path::new(&spec, Default::default(), FlowHasher::new([1, 2]), 1);
        let bounds = Bounds::parse("min=1mbit,base=10mbit,max=20mbit").expect("bounds");
        let mode = Mode::CakeAutorate;
        let mut c = Control::new(AutorateConfig { mode, bounds }, &mut p, 0, None);
        for k in 0..40 {
            c.on_reflector(k * 50 * MS, 20 * MS, p.qdisc_mut().as_mut());
        }
        assert_eq!(c.status().rate_bps, 10_000_000, "no delay, no change");
        for k in 40..60 {
            c.on_reflector(k * 50 * MS, 100 * MS, p.qdisc_mut().as_mut());
        }
        let st = c.status();
        assert!(st.rate_bps < 8_000_000, "{st:?}");
        assert_eq!(st.samples, 60);
        let bw = format!("bandwidth {}", debloat_core::units::fmt_rate(st.rate_bps));
        let opts = p.qdisc_mut().stats().options;
        assert!(opts.contains(&bw), "{opts} lacks {bw}");

        let mode = Mode::Passive;
        let mut c = Control::new(AutorateConfig { mode, bounds }, &mut p, 0, None);
        for k in 0..60 {
            c.on_reflector(k * 50 * MS, 500 * MS, p.qdisc_mut().as_mut());
        }
        assert_eq!((c.status().rate_bps, c.status().samples), (10_000_000, 0));
    }
}
