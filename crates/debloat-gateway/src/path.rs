//! One direction through the gateway, sans-IO: frames in at `now`, through the discipline and
//! the emulated link (rate, then delay, jitter, loss, duplication), frames out when due.
//!
//! ```text
//! on_frame(bytes, now) ─► classify ─► qdisc ─► link at `rate` ─► wire: loss, delay+jitter ─► poll(now)
//!                            │ malformed       │ drops                 │ lost
//!                            ▼                 ▼                       ▼
//!                         counted           counted                 counted
//! ```
//!
//! Every frame handed in is exactly one of: malformed, dropped by the discipline, lost on the
//! wire, queued (discipline or wire), or sent ([`Counters::accounted`] checks this). Time never
//! goes backwards; [`Path::next_wakeup`] says when to call [`Path::poll`] again.

use crate::emulate::Emulation;
use crate::frame::Frame;
use debloat_core::bottleneck::{Bottleneck, Event};
use debloat_core::rng::SplitMix64;
use debloat_core::{FlowHasher, Qdisc, QdiscSpec};
use serde::Serialize;
use std::collections::VecDeque;

/// What happened to the frames of one direction.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Counters {
    /// Frames handed in.
    pub received: u64,
    /// Frames that did not parse (counted and dropped).
    pub malformed: u64,
    /// Frames the discipline dropped.
    pub qdisc_dropped: u64,
    /// Frames lost on the emulated wire.
    pub lost: u64,
    /// Extra copies made by `duplicate`.
    pub duplicated: u64,
    /// Frames handed out to be sent.
    pub sent: u64,
}

/// One direction.
pub struct Path {
    link: Bottleneck<Box<dyn Qdisc<Frame>>>,
    emu: Emulation,
    wire: VecDeque<(u64, Frame)>,
    last_release: u64,
    rng: SplitMix64,
    /// Scratch space for the link's events, reused so a frame costs no extra allocation.
    events: Vec<Event<Frame>>,
    /// Counters.
    pub counters: Counters,
}

impl Path {
    /// A direction with this discipline in front of this emulated link.
    pub fn new(spec: &QdiscSpec, emu: Emulation, hasher: FlowHasher, seed: u64) -> Path {
        Path {
            link: Bottleneck::new(spec.build(hasher, seed), emu.rate_bps),
            emu,
            wire: VecDeque::new(),
            last_release: 0,
            rng: SplitMix64::new(seed ^ 0x5eed),
            events: Vec::new(),
            counters: Counters::default(),
        }
    }

    /// The discipline (for statistics).
    pub fn qdisc(&self) -> &dyn Qdisc<Frame> {
        self.link.qdisc().as_ref()
    }

    /// The discipline, to change at run time.
    pub fn qdisc_mut(&mut self) -> &mut Box<dyn Qdisc<Frame>> {
        self.link.qdisc_mut()
    }

    /// The emulated link.
    pub fn emulation(&self) -> Emulation {
        self.emu
    }

    /// Change the discipline at run time, keeping every queued frame: only a shaper's rate can
    /// change yet (`bandwidth R` or `unlimited`, as `tc qdisc change … cake bandwidth R`).
    pub fn change_qdisc(&mut self, words: &str) -> Result<(), String> {
        let rate = match words.split_whitespace().collect::<Vec<_>>().as_slice() {
            ["bandwidth", r] => Some(
                debloat_core::units::parse_rate(r).map_err(|e| format!("bandwidth {r}: {e}"))?,
            )
            .filter(|&b| b > 0),
            ["unlimited"] => None,
            _ => {
                return Err(format!(
                    "`{words}`: only `bandwidth RATE` or `unlimited` can change at run time yet"
                ))
            }
        };
        if self.link.qdisc_mut().set_bandwidth(rate) {
            Ok(())
        } else {
            Err("this discipline has no shaper (only cake's bandwidth can change)".into())
        }
    }

    /// Change the emulated link at run time (netem's words); queued frames are kept, and a
    /// frame already on the wire keeps its timing.
    pub fn change_emulation(&mut self, emu: Emulation) {
        self.link.set_rate(emu.rate_bps);
        self.emu = emu;
    }

    /// Frames waiting on the emulated wire.
    pub fn on_wire(&self) -> usize {
        self.wire.len()
    }

    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    /// A frame arrived at `now`.
    pub fn on_frame(&mut self, data: Vec<u8>, now: u64) {
        self.counters.received += 1;
        let frame = match Frame::parse(data) {
            Ok(f) => f,
            Err(_) => {
                self.counters.malformed += 1;
                return;
            }
        };
        let mut events = std::mem::take(&mut self.events);
        self.link.arrive(frame, now, &mut |e| events.push(e));
        self.handle(&mut events);
        self.events = events;
    }

    fn handle(&mut self, events: &mut Vec<Event<Frame>>) {
        for e in events.drain(..) {
            match e {
                Event::Sent { packet, end, .. } => self.onto_wire(packet, end),
                Event::Dropped { .. } => self.counters.qdisc_dropped += 1,
            }
        }
    }

    fn onto_wire(&mut self, mut f: Frame, end: u64) {
        if self.chance(self.emu.loss) {
            self.counters.lost += 1;
            return;
        }
        f.finish();
        let jitter = if self.emu.jitter_ns > 0 {
            self.rng.next_u64() % (self.emu.jitter_ns + 1)
        } else {
            0
        };
        // Never reorder: a frame leaves no earlier than the one before it.
        let release = (end + self.emu.delay_ns + jitter).max(self.last_release);
        self.last_release = release;
        if self.chance(self.emu.duplicate) {
            self.counters.duplicated += 1;
            self.wire.push_back((release, f.clone()));
        }
        self.wire.push_back((release, f));
    }

    /// Hand out every frame due by `now`.
    pub fn poll(&mut self, now: u64, out: &mut impl FnMut(&[u8])) {
        let mut events = std::mem::take(&mut self.events);
        self.link.advance_to(now, &mut |e| events.push(e));
        self.handle(&mut events);
        self.events = events;
        while self.wire.front().is_some_and(|(t, _)| *t <= now) {
            if let Some((_, f)) = self.wire.pop_front() {
                self.counters.sent += 1;
                out(&f.data);
            }
        }
    }

    /// When to poll next (None: nothing pending).
    pub fn next_wakeup(&self) -> Option<u64> {
        let wire = self.wire.front().map(|(t, _)| *t);
        match (self.link.next_wakeup(), wire) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Frames received = malformed + dropped + lost + queued + sent − duplicates.
    pub fn accounted(&self) -> bool {
        let c = self.counters;
        let queued = self.link.qdisc().qlen() as u64 + self.wire.len() as u64;
        c.received + c.duplicated == c.malformed + c.qdisc_dropped + c.lost + queued + c.sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;

    fn frame(port: u16, len: usize) -> Vec<u8> {
        let b = PacketBuilder::ethernet2([1; 6], [2; 6])
            .ipv4([198, 18, 1, 2], [198, 18, 2, 2], 64)
            .udp(port, 9);
        let mut buf = Vec::new();
        b.write(&mut buf, &vec![0u8; len - 42]).expect("write");
        buf
    }

    fn path(spec: &str, emu: &str) -> Path {
        Path::new(
            &spec.parse().expect("spec"),
            emu.parse().expect("emu"),
            FlowHasher::new([1, 2]),
            1,
        )
    }

    #[test]
    fn frames_leave_after_serialisation_plus_delay() {
        // 1000 B at 8 Mbit/s = 1 ms, then 10 ms of delay.
        let mut p = path("pfifo", "rate 8Mbit delay 10ms");
        p.on_frame(frame(1, 1000), 0);
        p.on_frame(frame(1, 1000), 0);
        let mut times = Vec::new();
        while let Some(t) = p.next_wakeup() {
            p.poll(t, &mut |_| times.push(t));
        }
        assert_eq!(times, [11_000_000, 12_000_000]);
        assert!(p.accounted());
    }

    #[test]
    fn a_full_fifo_drops_and_every_frame_is_accounted_for() {
        let mut p = path("pfifo limit 10", "rate 1Mbit loss 10%");
        for i in 0..100 {
            p.on_frame(frame(i, 1500), 0);
        }
        p.on_frame(vec![0xde, 0xad], 0);
        assert_eq!(p.counters.malformed, 1);
        assert!(p.counters.qdisc_dropped >= 89);
        assert!(p.accounted());
        let mut n = 0;
        while let Some(t) = p.next_wakeup() {
            p.poll(t, &mut |_| n += 1);
        }
        assert!(p.accounted());
        assert_eq!(n as u64, p.counters.sent);
        assert_eq!(p.counters.sent + p.counters.lost, 11);
    }

    #[test]
    fn a_rate_change_keeps_every_queued_frame_and_takes_effect() {
        let mut p = path("cake bandwidth 8Mbit", "");
        for i in 0..100 {
            p.on_frame(frame(i, 1000), 0);
        }
        let queued = p.qdisc().qlen();
        assert!(queued >= 99, "{queued}");
        p.change_qdisc("bandwidth 80Mbit").expect("cake can");
        assert_eq!(p.qdisc().qlen(), queued, "nothing dropped by the change");
        // 100 frames of 1000 B at 80 Mbit/s: about 10 ms, not the 100 ms of 8 Mbit/s.
        let mut last = 0;
        while let Some(t) = p.next_wakeup() {
            p.poll(t, &mut |_| last = t);
        }
        assert_eq!(p.counters.sent, 100);
        assert!(last < 15_000_000, "last frame left at {last} ns");
        let e = path("fq_codel", "")
            .change_qdisc("bandwidth 1Mbit")
            .expect_err("no shaper");
        assert!(e.contains("no shaper"), "{e}");
        assert!(p.change_qdisc("target 3ms").is_err());
    }

    /// A flood of 100,000 distinct flows: the discipline's memory limit bounds what the gateway
    /// holds (frames the discipline drops are freed), and every frame is accounted for.
    #[test]
    fn a_flood_of_100k_flows_stays_under_the_memory_limit() {
        for spec in [
            "cake bandwidth 1Mbit memlimit 2Mb",
            "fq_codel memory_limit 2Mb limit 100000",
        ] {
            let mut p = path(spec, "rate 1Mbit");
            for i in 0..100_000u32 {
                let mut f = frame((i % 60_000) as u16, 1000);
                // Vary the source address too: 100k distinct 5-tuples.
                f[28] = (i >> 16) as u8;
                f[29] = (i >> 8) as u8;
                p.on_frame(f, u64::from(i) * 1000);
            }
            let st = p.qdisc().stats();
            let held: u64 = st.qlen * (1000 + std::mem::size_of::<Frame>() as u64);
            assert!(
                held <= 2 << 20,
                "{spec}: {} frames held, {held} bytes",
                st.qlen
            );
            if let debloat_core::stats::Xstats::Cake(c) = &st.xstats {
                // tc's "memory used" is the peak (Linux buffer_max_used): the arriving frame
                // counts before the overflow drop, so it may pass the limit by one frame.
                let one = 1000 + std::mem::size_of::<Frame>() as u64;
                assert!(
                    c.memory_used <= c.memory_limit + one,
                    "{spec}: {}",
                    c.memory_used
                );
            }
            assert!(
                p.counters.qdisc_dropped > 90_000,
                "{spec}: {:?}",
                p.counters
            );
            assert!(p.accounted(), "{spec}");
        }
    }

    #[test]
    fn jitter_never_reorders() {
        let mut p = path("pfifo", "rate 100Mbit delay 5ms 4ms");
        for i in 0..200u16 {
            let mut f = frame(7, 200);
            f[50] = (i & 0xff) as u8;
            f[51] = (i >> 8) as u8;
            p.on_frame(f, u64::from(i) * 10_000);
        }
        let mut seen = Vec::new();
        while let Some(t) = p.next_wakeup() {
            p.poll(t, &mut |d| {
                seen.push(u16::from(d[50]) | (u16::from(d[51]) << 8))
            });
        }
        assert_eq!(seen, (0..200).collect::<Vec<_>>());
    }
}
