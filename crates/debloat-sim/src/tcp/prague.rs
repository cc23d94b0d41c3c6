//! TCP Prague, the L4S congestion control (the L4S team's `tcp_prague.c`, v0.6, as RFC 9331's
//! Prague requirements ask): DCTCP's response to ECN, paced, RTT-independent.
//!
//! * Its segments carry ECT(1) and it reads Accurate ECN: the ACKs count the CE-marked segments
//!   delivered (`AckInfo::ce`, AccECN's counters), so the sender knows the fraction marked, not
//!   just that some were.
//! * α, the fraction of CE-marked segments, is an EWMA with gain 1/16 updated once per round
//!   trip (per 25 ms for flows below that RTT once RTT-independent), starting at 1, and only
//!   once a CE mark has shown there is an AQM.
//! * On the first marks of a round trip it enters CWR and takes α/2 of cwnd away, one segment
//!   per ACK; cwnd keeps growing on every ACK meanwhile (by the unmarked segments only, so the
//!   increase per round trip is ∝ (1 − p)/p: "unsaturated"). Slow start as Reno's.
//! * Additive increase is 1 segment per round trip, scaled by (RTT / 25 ms)² for flows below
//!   25 ms once 500 round trips past slow start: such a flow grows its *rate* as one at 25 ms
//!   would (`RTT_CONTROL_RATE`, the default).
//! * A loss halves cwnd as Reno; recovery stops growth.
//! * Paced at 100 % of cwnd × MTU / SRTT (200 % in slow start): by its own timer, or through
//!   the host's fq when it has one.
//!
//! Not modelled: the classic-ECN fallback (off by default), TSO burst sizing (segments are sent
//! one at a time), the gradual loss reduction (cwnd drops to half at once, as the other
//! algorithms here).

use super::Sender;
use crate::packet::DATA_FRAME;
use debloat_core::packet::Nanos;

/// The RTT Prague aims to behave as if it had (`prague_rtt_target`).
pub const RTT_TARGET: Nanos = 25_000_000;
/// Round trips after slow start before RTT independence (`prague_rtt_transition`).
const RTT_TRANSITION: u32 = 500;
/// RTTs above this are never scaled (`MAX_SCALED_RTT`).
const MAX_SCALED_RTT: Nanos = 100_000_000;

/// Prague's state beside the window.
#[derive(Clone, Debug)]
pub struct Prague {
    /// α, the marked fraction's EWMA (0–1).
    pub alpha: f64,
    saw_ce: bool,
    /// Window changes owed, segments (`cwnd_cnt`): −1 takes one off, +1 adds one.
    cnt: f64,
    /// Additive increase per round trip, segments.
    ai: f64,
    round_end: u64,
    round: u32,
    delivered_at_round: u64,
    ce_at_round: u64,
    alpha_stamp: Nanos,
    cwr_stamp: Option<Nanos>,
    /// CE-marked segments delivered (AccECN's count, as the last ACK said).
    pub ce: u64,
}

impl Default for Prague {
    fn default() -> Self {
        Prague {
            alpha: 1.0,
            saw_ce: false,
            cnt: 0.0,
            ai: 1.0,
            round_end: 0,
            round: 0,
            delivered_at_round: 0,
            ce_at_round: 0,
            alpha_stamp: 0,
            cwr_stamp: None,
            ce: 0,
        }
    }
}

impl Prague {
    fn rtt_indep(&self, in_slow_start: bool) -> bool {
        !in_slow_start && self.round >= RTT_TRANSITION
    }
}

impl Sender {
    /// Prague's state, when this sender runs Prague.
    pub fn prague(&self) -> Option<&Prague> {
        self.prague.as_ref()
    }

    /// Prague's pacing rate, bytes/s: MTU × max(cwnd, in flight) / SRTT, doubled in slow
    /// start (`prague_update_pacing_rate`); None before an RTT sample.
    pub(super) fn prague_pacing_rate(&self) -> Option<f64> {
        self.window_rate(DATA_FRAME, (2.0, 1.0), self.pipe())
    }

    /// An ACK for a Prague sender: `newly` segments delivered, the receiver's CE count `ce`,
    /// a new loss or not.
    pub(super) fn prague_ack(&mut self, ce: u64, newly: u64, new_loss: bool, now: Nanos) {
        let Some(mut p) = self.prague.take() else {
            return;
        };
        let marked = ce.saturating_sub(p.ce);
        p.ce = p.ce.max(ce);
        let in_ss = self.cc.cwnd < self.cc.ssthresh;
        if marked > 0 {
            p.saw_ce = true;
        }
        if new_loss && self.recovery_point.is_none() {
            self.enter_recovery();
            p.cnt = 0.0;
        } else if marked > 0 && self.recovery_point.is_none() && self.snd_una >= self.cwr_point {
            // Enter CWR: once per round trip (per 25 ms once RTT-independent).
            let recent = p
                .cwr_stamp
                .is_some_and(|t| now.saturating_sub(t) < RTT_TARGET);
            if !(p.rtt_indep(in_ss) && recent) {
                p.cwr_stamp = Some(now);
                p.cnt -= p.alpha * self.cc.cwnd / 2.0;
                self.ecn_events += 1;
                self.cwr_point = self.snd_nxt;
            }
        }
        let unmarked = newly.saturating_sub(marked) as f64;
        if self.recovery_point.is_none() && unmarked > 0.0 && self.is_cwnd_limited() {
            let mut acked = unmarked;
            if self.cc.cwnd < self.cc.ssthresh {
                let room = (self.cc.ssthresh - self.cc.cwnd).max(0.0);
                let ss = acked.min(room);
                self.cc.cwnd += ss;
                acked -= ss;
            }
            if acked > 0.0 {
                p.cnt += acked * p.ai / self.cc.cwnd.max(1.0);
            }
        }
        if p.cnt <= -1.0 {
            p.cnt += 1.0;
            self.cc.cwnd = (self.cc.cwnd - 1.0).max(2.0);
            if self.cc.cwnd <= 2.0 {
                p.cnt = 0.0;
            }
            self.cc.ssthresh = self.cc.cwnd;
        } else if p.cnt >= 1.0 {
            p.cnt -= 1.0;
            self.cc.cwnd += 1.0;
        }
        self.prague_round(&mut p, in_ss, now);
        self.prague = Some(p);
    }

    /// The end of a round trip: α's update and the RTT scaling (`prague_update_alpha`,
    /// `prague_new_round`, `prague_ai_ack_increase`).
    fn prague_round(&mut self, p: &mut Prague, in_ss: bool, now: Nanos) {
        if self.snd_una < p.round_end {
            return;
        }
        let indep = p.rtt_indep(in_ss);
        if indep && now.saturating_sub(p.alpha_stamp) < RTT_TARGET {
            return;
        }
        if p.saw_ce {
            let acked = self.delivered.saturating_sub(p.delivered_at_round).max(1) as f64;
            let f = (p.ce - p.ce_at_round) as f64 / acked;
            p.alpha = (p.alpha * 15.0 / 16.0 + f / 16.0).min(1.0);
            p.alpha_stamp = now;
        }
        p.round_end = self.snd_nxt;
        p.delivered_at_round = self.delivered;
        p.ce_at_round = p.ce;
        if !in_ss {
            p.round = p.round.saturating_add(1);
        }
        let rtt = self.srtt.unwrap_or(0);
        p.ai = if p.round >= RTT_TRANSITION && rtt > 0 && rtt < RTT_TARGET && rtt <= MAX_SCALED_RTT
        {
            let r = rtt as f64 / RTT_TARGET as f64;
            r * r
        } else {
            1.0
        };
    }
}
