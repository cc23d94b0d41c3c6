//! Linux-like TCP, sans-IO: the [`Sender`] takes ACKs and timeouts and hands out segments to
//! send; the [`Receiver`] takes segments and hands out ACKs. Sequence numbers count whole MSS
//! segments (bulk transfers only send full segments).
//!
//! Modelled: IW10; slow start and congestion avoidance ([`cc`]); SACK with an RFC 6675-style
//! scoreboard (a hole is lost once three segments above it are SACKed) and fast recovery that
//! retransmits holes first; RTO per RFC 6298 with Linux's 200 ms minimum, exponential backoff;
//! RTT from timestamp echoes; delayed ACKs (every second segment, 40 ms timer, immediate on
//! out-of-order data); ECN per RFC 3168 (ECE until CWR, one window reduction per RTT).
//! Lost retransmissions are detected as Linux's `tcp_mark_lost_retrans` does: once data sent
//! after a retransmission is SACKed while the retransmission is not, it is marked lost again.
//! An optional window limit ([`Sender::set_window`]) stands for the receiver's advertised window
//! (or the send buffer, whichever is smaller): new data stops at `snd_una + window`, and as in
//! Linux (`tcp_is_cwnd_limited`, `tcp_cwnd_validate`) the congestion window grows only while it is
//! what limits the sender. Without one, a bulk sender is always cwnd-limited.
//! Not modelled (yet): PRR (the window drops to ssthresh at once), RACK/TLP, receive-window
//! autotuning (the window is fixed at its limit from the start), TSO/GSO and TSQ.

pub mod bbr;
pub mod cc;
mod loss;
mod pacing;
pub mod prague;
mod receiver;

pub use receiver::Receiver;

use cc::{Algorithm, Cc};
use debloat_core::packet::Nanos;
use std::collections::{BTreeSet, VecDeque};

/// Linux's minimum RTO.
pub const RTO_MIN: Nanos = 200_000_000;
const RTO_MAX: Nanos = 120_000_000_000;
const RTO_INIT: Nanos = 1_000_000_000;
/// Linux's delayed-ACK timer (TCP_DELACK_MIN).
pub const DELACK: Nanos = 40_000_000;
const DUPTHRESH: u32 = 3;

#[derive(Clone, Copy, Debug, Default)]
struct Seg {
    sacked: bool,
    lost: bool,
    retransmitted: bool,
    /// `snd_nxt` when this segment was last retransmitted: once anything sent after that is
    /// SACKed while this is not, the retransmission was lost (Linux `tcp_mark_lost_retrans`).
    retrans_bound: u64,
    /// Delivery-rate sampling state at the (last) transmission.
    sent_time: Nanos,
    delivered: u64,
    delivered_time: Nanos,
    first_sent_time: Nanos,
}

impl Seg {
    /// Counted in `lost_pending`: lost, not SACKed, not yet retransmitted.
    fn pending(&self) -> bool {
        self.lost && !self.retransmitted && !self.sacked
    }
}

/// A segment the sender wants on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Segment number.
    pub seq: u64,
    /// A retransmission.
    pub retransmit: bool,
    /// Carries CWR.
    pub cwr: bool,
}

/// An acknowledgement as the sender reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckInfo {
    /// Next segment the receiver expects.
    pub ack: u64,
    /// SACK blocks [start, end).
    pub sack: [(u64, u64); 3],
    /// Valid blocks.
    pub sack_len: u8,
    /// ECN-Echo.
    pub ece: bool,
    /// Echoed send time of the segment that triggered the ACK.
    pub echo: Nanos,
    /// CE-marked segments the receiver has had (Accurate ECN's counter; Prague reads it).
    pub ce: u64,
}

/// The sending side of a bulk connection.
#[derive(Debug)]
pub struct Sender {
    cc: Cc,
    snd_una: u64,
    snd_nxt: u64,
    board: VecDeque<Seg>,
    sacked: u64,
    lost_pending: u64,
    retrans_hint: u64,
    recovery_point: Option<u64>,
    cwr_point: u64,
    send_cwr: bool,
    fast_rexmit: bool,
    srtt: Option<Nanos>,
    rttvar: Nanos,
    rto: Nanos,
    backoff: u32,
    rto_deadline: Option<Nanos>,
    /// Segments retransmitted.
    pub retransmits: u64,
    /// Window reductions for loss.
    pub loss_events: u64,
    /// Window reductions for ECN.
    pub ecn_events: u64,
    /// RTO expiries.
    pub timeouts: u64,
    bbr: Option<bbr::Bbr>,
    highest_sacked: u64,
    retrans_q: VecDeque<(u64, u64)>,
    delivered: u64,
    delivered_time: Nanos,
    first_sent_time: Nanos,
    min_rtt: Nanos,
    next_send_time: Nanos,
    /// Most segments new data may run ahead of `snd_una` (None: unlimited).
    window: Option<u64>,
    /// Linux's `tp->is_cwnd_limited`: cwnd stopped the sender in the current window.
    cwnd_limited: bool,
    /// Linux's `tp->max_packets_out`: most segments out in the current window.
    max_out: u64,
    /// Linux's `tp->cwnd_usage_seq`: where the current window for the two above ends.
    cwnd_usage_seq: u64,
    /// Pacing left to the host's `fq` through departure times (`pacing.rs`).
    edt: pacing::Edt,
    /// TCP Prague's state (`prague.rs`), when this sender runs it.
    prague: Option<prague::Prague>,
}

/// The most recently sent of the segments an ACK delivered: the basis of a rate sample.
#[derive(Clone, Copy, Default)]
struct Basis {
    sent_time: Nanos,
    delivered: u64,
    delivered_time: Nanos,
    first_sent_time: Nanos,
}

impl Sender {
    /// BBR's ACK-aggregation head-room on or off (Linux since 5.1: on; the 2016 BBR: off). No
    /// effect on the other algorithms.
    pub fn set_bbr_ack_aggregation(&mut self, on: bool) {
        if let Some(b) = &mut self.bbr {
            b.ack_aggregation = on;
        }
    }

    /// A sender with algorithm `alg` and Linux's IW10.
    pub fn new(alg: Algorithm) -> Sender {
        Sender {
            cc: Cc::new(alg, 10.0),
            snd_una: 0,
            snd_nxt: 0,
            board: VecDeque::new(),
            sacked: 0,
            lost_pending: 0,
            retrans_hint: 0,
            recovery_point: None,
            cwr_point: 0,
            send_cwr: false,
            fast_rexmit: false,
            srtt: None,
            rttvar: 0,
            rto: RTO_INIT,
            backoff: 0,
            rto_deadline: None,
            retransmits: 0,
            loss_events: 0,
            ecn_events: 0,
            timeouts: 0,
            bbr: (alg == Algorithm::Bbr).then(bbr::Bbr::default),
            highest_sacked: 0,
            retrans_q: VecDeque::new(),
            delivered: 0,
            delivered_time: 0,
            first_sent_time: 0,
            min_rtt: Nanos::MAX,
            next_send_time: 0,
            window: None,
            cwnd_limited: false,
            max_out: 0,
            cwnd_usage_seq: 0,
            edt: pacing::Edt::default(),
            prague: (alg == Algorithm::Prague).then(prague::Prague::default),
        }
    }

    /// Limit new data to `segments` beyond the oldest unacknowledged one (the peer's receive
    /// window, or the send buffer); None removes the limit.
    pub fn set_window(&mut self, segments: Option<u64>) {
        self.window = segments.map(|w| w.max(1));
    }

    /// Linux's `tcp_cwnd_validate`: remember, per window of data, whether cwnd was what stopped
    /// the sender, else the most segments it had out.
    fn validate_cwnd(&mut self, cwnd_limited: bool) {
        let out = self.outstanding();
        if self.snd_una >= self.cwnd_usage_seq
            || cwnd_limited
            || (!self.cwnd_limited && out > self.max_out)
        {
            self.cwnd_limited = cwnd_limited;
            self.max_out = out;
            self.cwnd_usage_seq = self.snd_nxt;
        }
    }

    /// Linux's `tcp_is_cwnd_limited`: whether growing cwnd would let more data out. In slow
    /// start, cwnd may grow to twice the most that was out.
    fn is_cwnd_limited(&self) -> bool {
        self.cwnd_limited
            || (self.cc.cwnd < self.cc.ssthresh && self.cc.cwnd < 2.0 * self.max_out as f64)
    }

    /// BBR's state, when this sender runs BBR.
    pub fn bbr(&self) -> Option<&bbr::Bbr> {
        self.bbr.as_ref()
    }

    fn deliver(&mut self, s: &Seg, now: Nanos, basis: &mut Option<Basis>) {
        self.delivered += 1;
        self.delivered_time = now;
        if basis.is_none_or(|b| s.sent_time >= b.sent_time) {
            *basis = Some(Basis {
                sent_time: s.sent_time,
                delivered: s.delivered,
                delivered_time: s.delivered_time,
                first_sent_time: s.first_sent_time,
            });
        }
    }

    /// The delivery rate (segments/s) from the basis packet, if the sample is valid.
    fn rate_sample(&mut self, b: &Basis) -> Option<f64> {
        self.first_sent_time = b.sent_time;
        let send_elapsed = b.sent_time.saturating_sub(b.first_sent_time);
        let ack_elapsed = self.delivered_time.saturating_sub(b.delivered_time);
        let interval = send_elapsed.max(ack_elapsed);
        if interval == 0 || interval < self.min_rtt {
            return None;
        }
        Some((self.delivered - b.delivered) as f64 / (interval as f64 / 1e9))
    }

    /// Congestion window, segments.
    pub fn cwnd(&self) -> f64 {
        self.bbr.as_ref().map_or(self.cc.cwnd, |b| b.cwnd)
    }

    /// When pacing next allows a segment, if pacing is what holds the sender back at `now`.
    pub fn poll_pacing(&self, now: Nanos) -> Option<Nanos> {
        (self.internal_pacing()
            && self.next_send_time > now
            && (self.pipe() as f64) < self.cwnd().floor().max(1.0))
        .then_some(self.next_send_time)
    }

    /// Smoothed RTT, if measured.
    pub fn srtt(&self) -> Option<Nanos> {
        self.srtt
    }

    /// Segments sent and not yet cumulatively acknowledged.
    pub fn outstanding(&self) -> u64 {
        self.snd_nxt - self.snd_una
    }

    /// Segments believed in the network (RFC 6675 `pipe`).
    pub fn pipe(&self) -> u64 {
        self.outstanding() - self.sacked - self.lost_pending
    }

    /// When the retransmission timer fires, if armed.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        self.rto_deadline
    }

    fn seg(&mut self, seq: u64) -> Option<&mut Seg> {
        let i = seq.checked_sub(self.snd_una)? as usize;
        self.board.get_mut(i)
    }

    fn arm_rto(&mut self, now: Nanos) {
        self.rto_deadline = if self.outstanding() > 0 {
            Some(now + (self.rto << self.backoff).min(RTO_MAX))
        } else {
            None
        };
    }

    fn rtt_sample(&mut self, r: Nanos) {
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2;
            }
            Some(s) => {
                let err = s.abs_diff(r);
                self.rttvar = (3 * self.rttvar + err) / 4;
                self.srtt = Some((7 * s + r) / 8);
            }
        }
        let s = self.srtt.unwrap_or(r);
        self.rto = (s + (4 * self.rttvar).max(RTO_MIN)).min(RTO_MAX);
    }

    /// Process an ACK at `now`.
    pub fn on_ack(&mut self, a: &AckInfo, now: Nanos) {
        let rtt = (a.echo > 0 && a.echo <= now).then(|| now - a.echo);
        if let Some(r) = rtt {
            self.rtt_sample(r);
            self.min_rtt = self.min_rtt.min(r);
        }
        let mut basis: Option<Basis> = None;
        let advanced = a.ack > self.snd_una && a.ack <= self.snd_nxt;
        let mut newly = 0u64;
        if advanced {
            newly += self.cumulative_ack(a.ack, rtt, now, &mut basis);
        }
        newly += self.sack_blocks(a, now, &mut basis);
        if self.recovery_point.is_some_and(|r| self.snd_una >= r) {
            self.recovery_point = None;
        }
        let new_loss = self.mark_lost();
        let srtt = self.srtt.unwrap_or(RTO_INIT);
        self.cc.westwood_ack(newly as f64, now, rtt, srtt);
        if self.bbr.is_some() {
            self.bbr_ack(new_loss, newly, rtt, basis, now);
        } else if self.prague.is_some() {
            self.prague_ack(a.ce, newly, new_loss, now);
        } else {
            self.react(a, new_loss, newly, now, srtt);
        }
        // RFC 6298 5.3: restart the timer only when new data is acknowledged.
        if advanced || self.rto_deadline.is_none() {
            self.arm_rto(now);
        }
    }

    /// The cumulative ACK moved `snd_una` to `ack`: free the board, deliver what was not
    /// SACKed already; returns how many segments were newly delivered.
    fn cumulative_ack(
        &mut self,
        ack: u64,
        rtt: Option<Nanos>,
        now: Nanos,
        basis: &mut Option<Basis>,
    ) -> u64 {
        let mut newly = 0;
        for _ in self.snd_una..ack {
            if let Some(s) = self.board.pop_front() {
                if s.pending() {
                    self.lost_pending -= 1;
                }
                if s.sacked {
                    self.sacked -= 1;
                } else {
                    newly += 1;
                    self.deliver(&s, now, basis);
                }
            }
        }
        self.snd_una = ack;
        self.retrans_hint = self.retrans_hint.max(self.snd_una);
        self.backoff = 0;
        if let Some(r) = rtt {
            self.cc.on_rtt(r, self.snd_una, self.snd_nxt);
        }
        newly
    }

    /// The ACK's SACK blocks: mark and deliver what they newly cover; returns how many.
    fn sack_blocks(&mut self, a: &AckInfo, now: Nanos, basis: &mut Option<Basis>) -> u64 {
        let mut newly = 0;
        for &(start, end) in &a.sack[..usize::from(a.sack_len.min(3))] {
            self.highest_sacked = self.highest_sacked.max(end.min(self.snd_nxt));
            for q in start.max(self.snd_una)..end.min(self.snd_nxt) {
                if let Some(s) = self.seg(q) {
                    if !s.sacked {
                        let was_pending = s.pending();
                        s.sacked = true;
                        let seg = *s;
                        self.sacked += 1;
                        newly += 1;
                        self.deliver(&seg, now, basis);
                        if was_pending {
                            self.lost_pending -= 1;
                        }
                    }
                }
            }
        }
        newly
    }

    /// BBR's turn: it sees every ACK as a rate sample; a new loss starts recovery.
    fn bbr_ack(
        &mut self,
        new_loss: bool,
        newly: u64,
        rtt: Option<Nanos>,
        basis: Option<Basis>,
        now: Nanos,
    ) {
        if new_loss && self.recovery_point.is_none() {
            self.loss_events += 1;
            self.recovery_point = Some(self.snd_nxt);
            self.fast_rexmit = true;
        }
        let rate = basis.and_then(|b| self.rate_sample(&b));
        let rs = bbr::RateSample {
            rate,
            rtt,
            acked: newly,
            prior_delivered: basis.map_or(0, |b| b.delivered),
            delivered: self.delivered,
            inflight: self.pipe(),
            in_recovery: self.recovery_point.is_some(),
        };
        if let Some(b) = self.bbr.as_mut() {
            b.on_ack(&rs, now);
        }
    }

    /// A new loss: reduce once, retransmit the first hole at once, recover until `snd_nxt`.
    fn enter_recovery(&mut self) {
        self.cc.on_congestion();
        self.loss_events += 1;
        self.recovery_point = Some(self.snd_nxt);
        self.cwr_point = self.snd_nxt;
        self.fast_rexmit = true;
    }

    /// A loss-based controller's turn: reduce on a new loss (recovery) or an ECN echo (CWR),
    /// else grow when cwnd is what limits the sender.
    fn react(&mut self, a: &AckInfo, new_loss: bool, newly: u64, now: Nanos, srtt: Nanos) {
        if new_loss && self.recovery_point.is_none() {
            self.enter_recovery();
        } else if a.ece && self.recovery_point.is_none() && self.snd_una >= self.cwr_point {
            self.cc.on_congestion();
            self.ecn_events += 1;
            self.cwr_point = self.snd_nxt;
            self.send_cwr = true;
        } else if self.recovery_point.is_none()
            && self.snd_una >= self.cwr_point
            && newly > 0
            && self.is_cwnd_limited()
        {
            // No growth while a reduction is in progress (Linux's Recovery and CWR states), nor
            // while something other than cwnd holds the sender back.
            self.cc.on_ack(newly as f64, now, srtt);
        }
    }

    /// The retransmission timer fired at `now`.
    pub fn on_timeout(&mut self, now: Nanos) {
        if self.rto_deadline.is_none_or(|d| d > now) {
            return;
        }
        self.timeouts += 1;
        self.cc.on_rto(self.pipe() as f64);
        if let Some(b) = self.bbr.as_mut() {
            b.on_rto();
        }
        self.recovery_point = None;
        self.lost_pending = 0;
        for s in self.board.iter_mut() {
            if !s.sacked {
                s.lost = true;
                s.retransmitted = false;
                self.lost_pending += 1;
            }
        }
        self.retrans_hint = self.snd_una;
        self.cwr_point = self.snd_nxt;
        self.backoff = (self.backoff + 1).min(10);
        self.rto_deadline = Some(now + (self.rto << self.backoff).min(RTO_MAX));
    }

    /// The next segment to send at `now`, if the window allows one; with `fq` pacing on
    /// ([`Sender::set_fq_pacing`]), [`Sender::departure`] is then its departure time.
    pub fn poll_transmit(&mut self, now: Nanos) -> Option<Segment> {
        let seg = self.next_segment(now)?;
        self.stamp(now);
        Some(seg)
    }

    fn next_segment(&mut self, now: Nanos) -> Option<Segment> {
        // RFC 6675 (C): the first lost segment goes out on entering recovery, whatever pipe says.
        if self.internal_pacing() && now < self.next_send_time {
            return None;
        }
        let fast = std::mem::take(&mut self.fast_rexmit) && self.lost_pending > 0;
        if !fast && (self.pipe() as f64) >= self.cwnd().floor().max(1.0) {
            self.validate_cwnd(true);
            return None;
        }
        // Retransmissions lie inside the window; new data must not pass its right edge.
        if self.lost_pending == 0 && self.window.is_some_and(|w| self.outstanding() >= w) {
            self.validate_cwnd(false);
            return None;
        }
        if self.pipe() == 0 {
            self.first_sent_time = now;
            self.delivered_time = now;
        }
        if let (Some(b), true) = (&self.bbr, self.internal_pacing()) {
            let gap = (1e9 / b.pacing_rate.max(1.0)) as Nanos;
            self.next_send_time = self.next_send_time.max(now) + gap;
        } else if let (Some(r), true) = (self.prague_pacing_rate(), self.internal_pacing()) {
            let gap = (f64::from(crate::packet::MSS) * 1e9 / r.max(1.0)) as Nanos;
            self.next_send_time = self.next_send_time.max(now) + gap;
        }
        let stamp = (
            now,
            self.delivered,
            self.delivered_time,
            self.first_sent_time,
        );
        if self.lost_pending > 0 {
            if let Some(seg) = self.retransmit_next(now, stamp) {
                return Some(seg);
            }
        }
        if self.window.is_some_and(|w| self.outstanding() >= w) {
            return None;
        }
        let seq = self.snd_nxt;
        self.snd_nxt += 1;
        let (sent_time, delivered, delivered_time, first_sent_time) = stamp;
        self.board.push_back(Seg {
            sent_time,
            delivered,
            delivered_time,
            first_sent_time,
            ..Seg::default()
        });
        if self.rto_deadline.is_none() {
            self.arm_rto(now);
        }
        let cwr = std::mem::take(&mut self.send_cwr);
        Some(Segment {
            seq,
            retransmit: false,
            cwr,
        })
    }
}

#[cfg(test)]
mod tests;
