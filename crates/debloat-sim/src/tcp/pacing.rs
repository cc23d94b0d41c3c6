//! Pacing by departure times, as a Linux sender does when its host's qdisc is `fq`
//! (`sk_pacing_status == SK_PACING_FQ`): TCP stops pacing itself and stamps each segment with
//! the earliest time it may leave (the EDT model, Linux ≥ 4.20, `tcp_update_skb_after_send`),
//! and fq holds it until then.
//!
//! The rate is `sk_pacing_rate`: BBR sets its own; for the other algorithms it is
//! `tcp_update_pacing_rate`'s — MSS × max(cwnd, packets out) / SRTT, times 200 % in slow start
//! (cwnd below half of ssthresh) and 120 % after (`tcp_pacing_ss_ratio`, `tcp_pacing_ca_ratio`),
//! unlimited until the first RTT sample. A segment's stamp is the socket's clock, moved up to
//! `now` when behind; the clock then advances by the segment's time at the pacing rate, less up
//! to half of it for time the clock lost while idle. The first 9 data segments go unpaced, as
//! Linux's. `limit` is TCP Small Queues' cap on the bytes a socket keeps in the host's qdisc
//! (`tcp_small_queue_check`): twice a packet's truesize, or 1 ms (rate ≫ 10) of the pacing
//! rate, whichever is more.

use super::Sender;
use crate::packet::MSS;
use debloat_core::packet::Nanos;

/// The socket's EDT clock.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Edt {
    /// On when the host's qdisc is fq.
    pub(super) on: bool,
    /// `tp->tcp_wstamp_ns`.
    wstamp: Nanos,
    /// `tp->data_segs_out`.
    segs_out: u64,
    /// The stamp of the last segment handed out.
    last: Nanos,
}

impl Sender {
    /// Pace through the host's `fq` (departure times) instead of the sender's own timer (BBR's
    /// internal pacing, what Linux does without fq).
    pub fn set_fq_pacing(&mut self, on: bool) {
        self.edt.on = on;
    }

    /// Whether BBR paces by its own timer (Linux's `tcp_needs_internal_pacing`: no fq below).
    pub(super) fn internal_pacing(&self) -> bool {
        (self.bbr.is_some() || self.prague.is_some()) && !self.edt.on
    }

    /// `sk_pacing_rate`, bytes/s; `None` when unlimited (no RTT sample yet).
    pub fn pacing_rate(&self) -> Option<f64> {
        if let Some(b) = &self.bbr {
            return Some(b.pacing_rate * f64::from(MSS));
        }
        if self.prague.is_some() {
            return self.prague_pacing_rate();
        }
        self.window_rate(MSS, (2.0, 1.2), self.outstanding())
    }

    /// A pacing rate from the window, bytes/s: `bytes` per segment × max(cwnd, `out`) / SRTT,
    /// times `ratios.0` in slow start (cwnd below half of ssthresh) or `ratios.1` after; None
    /// before an RTT sample.
    pub(super) fn window_rate(&self, bytes: u32, ratios: (f64, f64), out: u64) -> Option<f64> {
        let srtt = self.srtt? as f64 / 1e9;
        let ratio = if self.cc.cwnd < self.cc.ssthresh / 2.0 {
            ratios.0
        } else {
            ratios.1
        };
        let segs = self.cc.cwnd.max(out as f64);
        Some(f64::from(bytes) * ratio * segs / srtt.max(1e-9))
    }

    /// The departure time of the segment [`Sender::poll_transmit`] handed out last (0 without
    /// fq pacing).
    pub fn departure(&self) -> Nanos {
        self.edt.last
    }

    /// TCP Small Queues: the most bytes (truesize) the socket keeps in its host's qdisc before
    /// it waits for one to leave; `truesize` is one segment's.
    pub fn small_queue_limit(&self, truesize: u32) -> u64 {
        let by_rate = self.pacing_rate().map_or(u64::MAX, |r| (r / 1024.0) as u64);
        by_rate.max(2 * u64::from(truesize))
    }

    /// Stamp the segment just handed out and advance the clock (`__tcp_transmit_skb` and
    /// `tcp_update_skb_after_send`).
    pub(super) fn stamp(&mut self, now: Nanos) {
        if !self.edt.on {
            return;
        }
        let prior = self.edt.wstamp;
        self.edt.wstamp = self.edt.wstamp.max(now);
        self.edt.last = self.edt.wstamp;
        self.edt.segs_out += 1;
        let Some(rate) = self.pacing_rate().filter(|r| *r > 0.0) else {
            return;
        };
        if self.edt.segs_out >= 10 {
            let len = (f64::from(MSS) * 1e9 / rate) as Nanos;
            let credit = self.edt.wstamp - prior;
            self.edt.wstamp += len - (len / 2).min(credit);
        }
    }
}
