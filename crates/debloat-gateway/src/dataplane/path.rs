//! One direction through the gateway, sans-IO: frames in at `now`, parsed and handed to the
//! core's data path (discipline, the link's optional buffer, the emulated link: rate, then
//! netem's impairments on the wire), frames out when due.
//!
//! ```text
//! on_frame(bytes, now) ─► Frame::parse ─► DataPath: qdisc ─► [buffer] ─► link at `rate` ─► wire ─► poll(now)
//!                            │ malformed            │ drops      │ drops                   │ lost, over limit
//!                            ▼                      ▼            ▼                         ▼
//!                         counted                counted      counted                   counted
//! ```
//!
//! The path after parsing is [`debloat_core::path::DataPath`], the same one `debloat replay`
//! drives and whose link the simulator drives: see there for the buffer and the order of
//! things. This module adds what is particular to frames: parsing (a malformed frame is
//! counted and dropped), and the counters the gateway reports.
//!
//! Every frame handed in is exactly one of: malformed, dropped by the discipline, dropped by
//! the buffer, lost on the wire, dropped over the wire's `limit`, queued (discipline, buffer or
//! wire), or sent; a duplicate counts as one more frame handed in ([`Path::accounted`] checks
//! this). Time never goes backwards; [`Path::next_wakeup`] says when to call [`Path::poll`]
//! again.

use crate::control::ChangeError;
use crate::frame::Frame;
use crate::io::buf::Buf;
use crate::tcp_seen::TcpSeen;
use debloat_core::classify::Classify;
use debloat_core::link::{Emulation, LinkLayer};
use debloat_core::path::{DataPath, Event};
use debloat_core::Direction;
use debloat_core::{FlowHasher, Qdisc, QdiscSpec};
use serde::Serialize;

/// What happened to the frames of one direction.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Counters {
    /// Frames handed in.
    pub received: u64,
    /// Frames that did not parse (counted and dropped).
    pub malformed: u64,
    /// Frames the discipline dropped.
    pub qdisc_dropped: u64,
    /// Frames lost on the emulated wire (the loss model).
    pub lost: u64,
    /// Frames marked CE by the loss model instead of lost (`ecn`).
    pub ecn_marked: u64,
    /// Frames with one bit flipped (`corrupt`).
    pub corrupted: u64,
    /// Frames sent ahead of delayed ones (`reorder`).
    pub reordered: u64,
    /// Frames dropped because the wire held `limit` frames.
    pub overlimit: u64,
    /// Frames dropped because the link's `buffer` was full.
    pub buffer_dropped: u64,
    /// Extra copies made by `duplicate`.
    pub duplicated: u64,
    /// Frames handed out to be sent.
    pub sent: u64,
}

/// One direction.
pub struct Path {
    path: DataPath<Frame, Box<dyn Qdisc<Frame>>>,
    seed: u64,
    /// The discipline's flow hasher and seed, for a replacement (`reload`).
    hasher: FlowHasher,
    qdisc_seed: u64,
    received: u64,
    malformed: u64,
    /// TCP frames for a shaper-rate controller: (what, released by the discipline) — else
    /// arrived. Off (None) unless a controller asks.
    tcp_log: Option<Vec<(TcpSeen, bool)>>,
}

/// Note a TCP data frame the discipline released.
fn log_sent(log: &mut Option<Vec<(TcpSeen, bool)>>, e: &Event<'_, Frame>) {
    if let (Some(log), Event::Sent { packet, start, .. }) = (log.as_mut(), e) {
        if let Some((s, true)) = crate::tcp_seen::seen(*packet, *start) {
            log.push((s, true));
        }
    }
}

impl Path {
    /// A direction with this discipline in front of this emulated link.
    pub fn new(spec: &QdiscSpec, emu: Emulation, hasher: FlowHasher, seed: u64) -> Path {
        let qdisc = spec.build(hasher, seed);
        let qdisc_seed = seed;
        let seed = seed ^ 0x5eed;
        Path {
            path: DataPath::new(qdisc, emu, 0, seed),
            seed,
            hasher,
            qdisc_seed,
            received: 0,
            malformed: 0,
            tcp_log: None,
        }
    }

    /// Put a capacity trace's modem behind the emulated link's transmitter (its FIFO is then
    /// the link's `buffer`: its drops count as `buffer_dropped`).
    pub fn with_modem(mut self, modem: &Option<debloat_core::link::ModemSpec>) -> Path {
        self.path
            .link_mut()
            .set_modem(modem.as_ref().map(|m| m.build()));
        self
    }

    /// What the emulated link will carry, for the oracle controller (experiments): its
    /// capacity trace, or its fixed rate (None: a real link, unknown).
    pub fn capacity(&self) -> Option<debloat_core::autorate::oracle::Capacity> {
        use debloat_core::autorate::oracle::Capacity;
        match self.path.link().modem() {
            Some(m) => Some(Capacity::Trace(m.trace().clone())),
            None => self.emulation().rate_bps.map(Capacity::Fixed),
        }
    }

    /// Keep a log of TCP frames for a shaper-rate controller ([`Path::take_tcp_log`]).
    pub fn log_tcp(&mut self) {
        self.tcp_log.get_or_insert_with(Vec::new);
    }

    /// The TCP frames since the last call: (what, released by the discipline) — else arrived.
    pub fn take_tcp_log(&mut self) -> Vec<(TcpSeen, bool)> {
        self.tcp_log
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// What happened to the frames so far.
    pub fn counters(&self) -> Counters {
        let (p, w) = (self.path.counters(), self.path.wire_counters());
        Counters {
            received: self.received,
            malformed: self.malformed,
            qdisc_dropped: p.qdisc_dropped,
            lost: w.lost,
            ecn_marked: w.ecn_marked,
            corrupted: w.corrupted,
            reordered: w.reordered,
            overlimit: w.overlimit,
            buffer_dropped: p.buffer_dropped + self.path.link().modem_dropped(),
            duplicated: w.duplicated,
            sent: w.delivered,
        }
    }

    /// The discipline (for statistics).
    pub fn qdisc(&self) -> &dyn Qdisc<Frame> {
        self.path.qdisc().as_ref()
    }

    /// The discipline, to change at run time.
    pub fn qdisc_mut(&mut self) -> &mut Box<dyn Qdisc<Frame>> {
        self.path.qdisc_mut()
    }

    /// The emulated link.
    pub fn emulation(&self) -> Emulation {
        *self.path.link().wire().emulation()
    }

    /// The discipline's flow hasher.
    pub fn hasher(&self) -> FlowHasher {
        self.hasher
    }

    /// Replace the discipline at `now` with a new one built from `spec`, moving every queued
    /// frame into it (each flow's in order). Returns (frames moved, frames the new discipline
    /// refused at once — its drops, counted as such).
    pub fn replace_qdisc(&mut self, spec: &QdiscSpec, now: u64) -> (u64, u64) {
        let new = spec.build(self.hasher, self.qdisc_seed);
        let log = &mut self.tcp_log;
        let (_old, moved, refused) = self
            .path
            .replace_qdisc(new, now, &mut |e| log_sent(log, &e));
        (moved, refused)
    }

    /// Take `spec`, an htb of another shape, in place at `now`: every queued frame kept (see
    /// `debloat_core::qdisc::htb::Reshaped`); None when the running discipline cannot.
    pub fn reshape_qdisc(
        &mut self,
        spec: &QdiscSpec,
        now: u64,
    ) -> Option<debloat_core::qdisc::htb::Reshaped> {
        let log = &mut self.tcp_log;
        self.path
            .reshape_qdisc(spec, now, &mut |e| log_sent(log, &e))
    }

    /// Take `spec` in place when the running discipline can (an htb whose rates changed):
    /// how many things changed, or None (then it must be replaced).
    pub fn change_in_place(&mut self, spec: &QdiscSpec) -> Option<usize> {
        self.path.qdisc_mut().change(spec)
    }

    /// Change the discipline at run time, keeping every queued frame: only a shaper's rate can
    /// change yet (`bandwidth R` or `unlimited`, as `tc qdisc change … cake bandwidth R`).
    pub fn change_qdisc(&mut self, words: &str) -> Result<(), ChangeError> {
        let rate = match words.split_whitespace().collect::<Vec<_>>().as_slice() {
            ["bandwidth", r] => {
                Some(
                    debloat_core::units::parse_rate(r).map_err(|e| ChangeError::Words {
                        what: format!("bandwidth {r}"),
                        why: e.to_string(),
                    })?,
                )
                .filter(|&b| b > 0)
            }
            ["unlimited"] => None,
            _ => {
                return Err(ChangeError::Words {
                    what: format!("`{words}`"),
                    why: "only `bandwidth RATE` or `unlimited` can change at run time yet".into(),
                })
            }
        };
        if self.path.qdisc_mut().set_bandwidth(rate) {
            Ok(())
        } else {
            Err(ChangeError::NoShaper)
        }
    }

    /// Change the emulated link at run time (netem's words); queued frames are kept, and a
    /// frame already on the wire keeps its timing. The impairments start afresh (a loss
    /// model's state, correlations), as `tc qdisc change … netem` does. A `buffer` cannot be
    /// added, removed or resized at run time.
    pub fn change_emulation(&mut self, emu: Emulation) -> Result<(), ChangeError> {
        if emu.buffer != self.emulation().buffer {
            return Err(ChangeError::restart("`buffer`"));
        }
        let link = self.path.link_mut();
        link.set_rate(emu.rate_bps);
        link.set_layer(LinkLayer::Netem(emu.framing));
        self.seed = self.seed.wrapping_add(1);
        link.wire_mut().set_emulation(emu, self.seed);
        Ok(())
    }

    /// Frames in the link's `buffer`.
    pub fn in_buffer(&self) -> usize {
        let modem = self.path.link().modem();
        self.path.in_buffer() + modem.map_or(0, |m| m.occupancy(self.path.now()).0)
    }

    /// Frames waiting on the emulated wire.
    pub fn on_wire(&self) -> usize {
        self.path.link().wire().len()
    }

    /// A frame arrived at `now`.
    pub fn on_frame(&mut self, data: impl Into<Buf>, now: u64) {
        self.on_frame_marked(data, now, None);
    }

    /// [`Path::on_frame`] with a classify stage first (qosify's rules set the frame's DSCP,
    /// written into its header when it leaves) before the discipline sees it: the core's
    /// [`DataPath::arrive_classified`], as the simulator and replay run it.
    pub fn on_frame_marked(
        &mut self,
        data: impl Into<Buf>,
        now: u64,
        marker: Option<(&mut dyn Classify, Direction)>,
    ) {
        self.received += 1;
        let Ok(f) = Frame::parse(data) else {
            self.malformed += 1;
            return;
        };
        let log = &mut self.tcp_log;
        // The TCP details are read from the bytes, so only when a controller asks for them.
        if let Some(l) = log.as_mut() {
            if let Some((seen, _)) = crate::tcp_seen::seen(&f, now) {
                l.push((seen, false));
            }
        }
        let mut out = |e: Event<'_, Frame>| log_sent(log, &e);
        match marker {
            Some((stage, dir)) => self.path.arrive_classified(f, now, stage, dir, &mut out),
            None => self.path.arrive(f, now, &mut out),
        }
    }

    /// Hand out every frame due by `now`.
    pub fn poll(&mut self, now: u64, out: &mut impl FnMut(Buf)) {
        let log = &mut self.tcp_log;
        self.path.poll(now, &mut |e| {
            log_sent(log, &e);
            if let Event::Delivered { packet, .. } = e {
                out(packet.data)
            }
        });
    }

    /// When to poll next (None: nothing pending).
    pub fn next_wakeup(&self) -> Option<u64> {
        self.path.next_wakeup()
    }

    /// Frames received + duplicates = malformed + dropped (discipline, buffer) + lost + over
    /// limit + queued (discipline, buffer, wire) + sent.
    pub fn accounted(&self) -> bool {
        self.received == self.malformed + self.path.counters().arrived && self.path.accounted()
    }
}

#[cfg(test)]
mod tests;
