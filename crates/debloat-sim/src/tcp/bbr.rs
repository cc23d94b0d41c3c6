//! BBR v1 (Cardwell et al. 2016; Linux net/ipv4/tcp_bbr.c): a model of the path — the bottleneck
//! bandwidth (windowed max of delivery-rate samples over 10 round trips) and the round-trip
//! propagation time (min RTT over 10 s) — paced at a gain times that bandwidth, with a window of
//! twice the bandwidth-delay product.
//!
//! Modes and gains as Linux: STARTUP (pacing and cwnd gain 2/ln 2 ≈ 2.885) until the bandwidth
//! stops growing by 25 % for 3 rounds; DRAIN (pacing gain 1/2.885) until inflight ≤ BDP; PROBE_BW
//! cycling pacing gains 1.25, 0.75, 1 ×6, one min-RTT each, cwnd gain 2; PROBE_RTT (cwnd 4
//! packets for at least 200 ms and a round) when the min RTT is 10 s old. Pacing runs at 99 % of
//! the computed rate (Linux's pacing margin). Loss: packet conservation for the first round of
//! recovery, then the window grows back, and it is restored on leaving recovery. CE marks are
//! ignored (BBR v1). Since Linux 5.1 the window also carries the recent ACK aggregation
//! (`bbr_update_ack_aggregation`): data ACKed beyond what the estimated bandwidth explains over an
//! epoch, its max over two windows of 5 rounds, capped at the window and at 100 ms of bandwidth,
//! added to the target once the pipe is full — so bursty delivery (a late shaper, Wi-Fi
//! aggregates, stretch ACKs) lets BBR keep more in flight; the 2016 BBR had none of it.
//! Deviations: the PROBE_BW cycle starts at phase 2 (Linux draws it at random), the quantization
//! budget is 3 × max(2, packets per ms at the pacing rate), and no long-term-bandwidth (policer)
//! detection.

use debloat_core::packet::Nanos;
use std::collections::VecDeque;

const HIGH_GAIN: f64 = 2.885;
const DRAIN_GAIN: f64 = 1.0 / 2.885;
const CWND_GAIN: f64 = 2.0;
const CYCLE: [f64; 8] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
const BW_ROUNDS: u64 = 10;
const MIN_RTT_WIN: Nanos = 10_000_000_000;
const PROBE_RTT_TIME: Nanos = 200_000_000;
const CWND_MIN: f64 = 4.0;
const FULL_BW_THRESH: f64 = 1.25;
const FULL_BW_CNT: u32 = 3;
const PACING_MARGIN: f64 = 0.99;
/// Rounds per half of the ACK-aggregation max filter (`bbr_extra_acked_win_rtts`).
const EXTRA_ACKED_WIN_RTTS: u32 = 5;
/// The aggregation head-room is at most this much time at the estimated bandwidth.
const EXTRA_ACKED_MAX: Nanos = 100_000_000;
/// An epoch that has counted this many segments starts over (`bbr_ack_epoch_acked_reset_thresh`).
const ACK_EPOCH_RESET: f64 = (1u64 << 20) as f64;

/// BBR's state machine mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Exponential search for the bottleneck bandwidth.
    Startup,
    /// Drain the queue STARTUP built.
    Drain,
    /// Steady state, probing for more bandwidth in a gain cycle.
    ProbeBw,
    /// Shrink the window to refresh the min RTT.
    ProbeRtt,
}

/// A delivery-rate sample from one ACK.
#[derive(Clone, Copy, Debug)]
pub struct RateSample {
    /// Segments delivered per second, if the sample is valid.
    pub rate: Option<f64>,
    /// RTT of this ACK.
    pub rtt: Option<Nanos>,
    /// Segments newly delivered (cumulatively or by SACK).
    pub acked: u64,
    /// `delivered` of the connection when the sampled packet was sent (round detection).
    pub prior_delivered: u64,
    /// Total delivered now.
    pub delivered: u64,
    /// Segments in flight after this ACK.
    pub inflight: u64,
    /// The connection is in loss recovery.
    pub in_recovery: bool,
}

/// BBR state of one connection.
#[derive(Clone, Debug)]
pub struct Bbr {
    mode: Mode,
    bw: VecDeque<(u64, f64)>,
    min_rtt: Nanos,
    min_rtt_stamp: Nanos,
    round: u64,
    next_round_delivered: u64,
    round_start: bool,
    full_bw: f64,
    full_bw_cnt: u32,
    full_bw_reached: bool,
    cycle_idx: usize,
    cycle_stamp: Nanos,
    probe_rtt_done: Option<Nanos>,
    probe_rtt_round_done: bool,
    prior_cwnd: f64,
    was_in_recovery: bool,
    conservation_until: u64,
    has_seen_rtt: bool,
    /// ACK aggregation: when the current epoch began, what it has ACKed, the two halves of the
    /// max filter of the excess, and which half is current.
    ack_epoch_stamp: Nanos,
    ack_epoch_acked: f64,
    extra_acked: [f64; 2],
    extra_acked_win_rtts: u32,
    extra_acked_win_idx: usize,
    /// Whether the window carries the ACK-aggregation head-room (Linux since 5.1; the BBR of
    /// 2016, which the published 2016 runs used, had none).
    pub ack_aggregation: bool,
    /// Window, segments.
    pub cwnd: f64,
    /// Pacing rate, segments per second.
    pub pacing_rate: f64,
}

impl Default for Bbr {
    fn default() -> Self {
        Bbr {
            mode: Mode::Startup,
            bw: VecDeque::new(),
            min_rtt: Nanos::MAX,
            min_rtt_stamp: 0,
            round: 0,
            next_round_delivered: 0,
            round_start: false,
            full_bw: 0.0,
            full_bw_cnt: 0,
            full_bw_reached: false,
            cycle_idx: 2,
            cycle_stamp: 0,
            probe_rtt_done: None,
            probe_rtt_round_done: false,
            prior_cwnd: 0.0,
            was_in_recovery: false,
            conservation_until: 0,
            has_seen_rtt: false,
            ack_epoch_stamp: 0,
            ack_epoch_acked: 0.0,
            extra_acked: [0.0; 2],
            extra_acked_win_rtts: 0,
            extra_acked_win_idx: 0,
            ack_aggregation: true,
            cwnd: 10.0,
            // Before any RTT sample: IW10 over a nominal 1 ms, times the high gain (as Linux).
            pacing_rate: HIGH_GAIN * 10.0 / 1e-3,
        }
    }
}

impl Bbr {
    /// The current mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The bottleneck-bandwidth estimate, segments/s.
    pub fn btl_bw(&self) -> f64 {
        self.bw.front().map_or(0.0, |x| x.1)
    }

    fn bdp(&self, gain: f64) -> f64 {
        if self.min_rtt == Nanos::MAX || self.btl_bw() == 0.0 {
            return 10.0 * gain;
        }
        gain * self.btl_bw() * self.min_rtt as f64 / 1e9
    }

    fn pacing_gain(&self) -> f64 {
        match self.mode {
            Mode::Startup => HIGH_GAIN,
            Mode::Drain => DRAIN_GAIN,
            Mode::ProbeBw => CYCLE[self.cycle_idx],
            Mode::ProbeRtt => 1.0,
        }
    }

    fn cwnd_gain(&self) -> f64 {
        match self.mode {
            Mode::Startup | Mode::Drain => HIGH_GAIN,
            Mode::ProbeBw => CWND_GAIN,
            Mode::ProbeRtt => 1.0,
        }
    }

    /// A retransmission timeout: remember the window, restart from one segment (the TCP core
    /// does this on RTO; BBR restores the window when recovery ends).
    pub fn on_rto(&mut self) {
        self.prior_cwnd = self.prior_cwnd.max(self.cwnd);
        self.cwnd = 1.0;
        self.was_in_recovery = true;
    }

    /// Feed one ACK's sample at `now`.
    pub fn on_ack(&mut self, rs: &RateSample, now: Nanos) {
        // Rounds: a new one starts when a packet sent after the last round began is delivered.
        self.round_start = false;
        if rs.acked > 0 && rs.prior_delivered >= self.next_round_delivered {
            self.next_round_delivered = rs.delivered;
            self.round += 1;
            self.round_start = true;
            self.probe_rtt_round_done |= self.probe_rtt_done.is_some();
        }
        if let Some(r) = rs.rate {
            while self
                .bw
                .front()
                .is_some_and(|x| x.0 + BW_ROUNDS <= self.round)
            {
                self.bw.pop_front();
            }
            while self.bw.back().is_some_and(|x| x.1 <= r) {
                self.bw.pop_back();
            }
            self.bw.push_back((self.round, r));
            while self
                .bw
                .front()
                .is_some_and(|x| x.0 + BW_ROUNDS <= self.round)
            {
                self.bw.pop_front();
            }
        }
        let expired = now > self.min_rtt_stamp.saturating_add(MIN_RTT_WIN);
        if let Some(rtt) = rs.rtt {
            if rtt < self.min_rtt || expired {
                self.min_rtt = rtt;
                self.min_rtt_stamp = now;
            }
        }
        self.update_ack_aggregation(rs, now);
        self.check_full_bw();
        self.update_mode(rs, now, expired);
        self.set_pacing(rs.rtt);
        self.set_cwnd(rs);
    }

    /// Linux's `bbr_update_ack_aggregation`: how much more this epoch's ACKs delivered than the
    /// bandwidth estimate accounts for.
    fn update_ack_aggregation(&mut self, rs: &RateSample, now: Nanos) {
        if rs.acked == 0 || rs.rate.is_none() {
            return;
        }
        if self.round_start {
            self.extra_acked_win_rtts = (self.extra_acked_win_rtts + 1).min(0x1F);
            if self.extra_acked_win_rtts >= EXTRA_ACKED_WIN_RTTS {
                self.extra_acked_win_rtts = 0;
                self.extra_acked_win_idx ^= 1;
                self.extra_acked[self.extra_acked_win_idx] = 0.0;
            }
        }
        let epoch_s = now.saturating_sub(self.ack_epoch_stamp) as f64 / 1e9;
        let mut expected = self.btl_bw() * epoch_s;
        let acked = rs.acked as f64;
        // A new epoch when ACKs came no faster than expected, or after very many.
        if self.ack_epoch_acked <= expected || self.ack_epoch_acked + acked >= ACK_EPOCH_RESET {
            self.ack_epoch_acked = 0.0;
            self.ack_epoch_stamp = now;
            expected = 0.0;
        }
        self.ack_epoch_acked = (self.ack_epoch_acked + acked).min(f64::from(0xF_FFFFu32));
        let extra = (self.ack_epoch_acked - expected).min(self.cwnd);
        let slot = &mut self.extra_acked[self.extra_acked_win_idx];
        *slot = slot.max(extra);
    }

    /// Linux's `bbr_ack_aggregation_cwnd`: the head-room for aggregation, once the pipe is full.
    fn ack_aggregation_cwnd(&self) -> f64 {
        if !self.full_bw_reached || !self.ack_aggregation {
            return 0.0;
        }
        let cap = self.btl_bw() * EXTRA_ACKED_MAX as f64 / 1e9;
        self.extra_acked[0].max(self.extra_acked[1]).min(cap)
    }

    fn check_full_bw(&mut self) {
        if self.full_bw_reached || !self.round_start {
            return;
        }
        let bw = self.btl_bw();
        if bw >= self.full_bw * FULL_BW_THRESH {
            self.full_bw = bw;
            self.full_bw_cnt = 0;
            return;
        }
        self.full_bw_cnt += 1;
        self.full_bw_reached = self.full_bw_cnt >= FULL_BW_CNT;
    }

    fn update_mode(&mut self, rs: &RateSample, now: Nanos, min_rtt_expired: bool) {
        if self.mode == Mode::Startup && self.full_bw_reached {
            self.mode = Mode::Drain;
        }
        if self.mode == Mode::Drain && (rs.inflight as f64) <= self.bdp(1.0) {
            self.mode = Mode::ProbeBw;
            self.cycle_stamp = now;
        }
        if self.mode == Mode::ProbeBw {
            self.advance_cycle(rs, now);
        }
        if min_rtt_expired && self.mode != Mode::ProbeRtt {
            self.mode = Mode::ProbeRtt;
            self.prior_cwnd = self.prior_cwnd.max(self.cwnd);
            self.probe_rtt_done = None;
        }
        if self.mode == Mode::ProbeRtt {
            if self.probe_rtt_done.is_none() && (rs.inflight as f64) <= CWND_MIN {
                self.probe_rtt_done = Some(now + PROBE_RTT_TIME);
                self.probe_rtt_round_done = false;
                self.next_round_delivered = rs.delivered;
            } else if let Some(done) = self.probe_rtt_done {
                if self.probe_rtt_round_done && now >= done {
                    self.min_rtt_stamp = now;
                    self.cwnd = self.cwnd.max(self.prior_cwnd);
                    self.probe_rtt_done = None;
                    self.mode = if self.full_bw_reached {
                        Mode::ProbeBw
                    } else {
                        Mode::Startup
                    };
                    self.cycle_stamp = now;
                }
            }
        }
    }

    fn advance_cycle(&mut self, rs: &RateSample, now: Nanos) {
        let gain = CYCLE[self.cycle_idx];
        let full_length = now.saturating_sub(self.cycle_stamp) > self.min_rtt;
        let inflight = rs.inflight as f64;
        let next = if gain == 1.0 {
            full_length
        } else if gain > 1.0 {
            full_length && (rs.in_recovery || inflight >= self.bdp(gain))
        } else {
            full_length || inflight <= self.bdp(1.0)
        };
        if next {
            self.cycle_idx = (self.cycle_idx + 1) % CYCLE.len();
            self.cycle_stamp = now;
        }
    }

    fn set_pacing(&mut self, rtt: Option<Nanos>) {
        // The first RTT sample re-initialises the rate from the window (`bbr_init_pacing_rate_from_rtt`).
        if !self.has_seen_rtt {
            if let Some(r) = rtt {
                self.has_seen_rtt = true;
                self.pacing_rate = HIGH_GAIN * self.cwnd / (r.max(1) as f64 / 1e9);
            }
        }
        let bw = self.btl_bw();
        if bw > 0.0 {
            let rate = self.pacing_gain() * bw * PACING_MARGIN;
            // Until the pipe is full the rate only grows (`bbr_set_pacing_rate`).
            if self.full_bw_reached || rate > self.pacing_rate {
                self.pacing_rate = rate;
            }
        }
    }

    fn set_cwnd(&mut self, rs: &RateSample) {
        let quanta = 3.0 * (self.pacing_rate / 1000.0).max(2.0);
        let mut target = self.bdp(self.cwnd_gain()) + self.ack_aggregation_cwnd() + quanta;
        if self.mode == Mode::ProbeBw && self.cycle_idx == 0 {
            target += 2.0;
        }
        let acked = rs.acked as f64;
        // Packet conservation during the first round of recovery; restore on leaving it.
        if rs.in_recovery && !self.was_in_recovery {
            self.prior_cwnd = self.cwnd;
            self.conservation_until = rs.delivered + rs.inflight;
            self.cwnd = (rs.inflight as f64 + acked).max(CWND_MIN);
        } else if !rs.in_recovery && self.was_in_recovery {
            self.cwnd = self.cwnd.max(self.prior_cwnd);
        }
        self.was_in_recovery = rs.in_recovery;
        if rs.in_recovery && rs.delivered < self.conservation_until {
            self.cwnd = self.cwnd.max(rs.inflight as f64 + acked);
        } else if self.full_bw_reached {
            self.cwnd = (self.cwnd + acked).min(target);
        } else if self.cwnd < target {
            self.cwnd += acked;
        }
        self.cwnd = self.cwnd.max(CWND_MIN);
        if self.mode == Mode::ProbeRtt {
            self.cwnd = self.cwnd.min(CWND_MIN);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(rate: f64, delivered: u64, prior: u64, inflight: u64) -> RateSample {
        RateSample {
            rate: Some(rate),
            rtt: Some(50_000_000),
            acked: 1,
            prior_delivered: prior,
            delivered,
            inflight,
            in_recovery: false,
        }
    }

    #[test]
    fn startup_exits_after_three_rounds_without_25_percent_growth_then_drains() {
        let mut b = Bbr::default();
        let mut delivered = 0;
        let mut t = 0;
        // Bandwidth grows for a few rounds, then stays at 1000 segments/s.
        for round in 0..12u64 {
            let rate = (100.0 * 2f64.powi(round as i32)).min(1000.0);
            delivered += 10;
            t += 50_000_000;
            b.on_ack(&sample(rate, delivered, delivered - 10, 200), t);
        }
        assert_ne!(b.mode(), Mode::Startup);
        assert!((b.btl_bw() - 1000.0).abs() < 1e-9);
        // Draining ends once inflight is at most one BDP (1000/s × 50 ms = 50 segments).
        delivered += 10;
        b.on_ack(
            &sample(1000.0, delivered, delivered - 10, 40),
            t + 50_000_000,
        );
        assert_eq!(b.mode(), Mode::ProbeBw);
        assert!(
            b.cwnd <= 2.0 * 50.0 + 3.0 * 2.0 + 2.0 + 1e-9,
            "cwnd {}",
            b.cwnd
        );
    }

    /// BBR through STARTUP and DRAIN into PROBE_BW at 1000 segments/s and 50 ms, then 20 more
    /// rounds of 50 ACKs, each ACK for `per_ack` segments every `per_ack` ms: smooth delivery
    /// with 1, aggregated with more. Returns the window.
    fn window_after(per_ack: u64) -> f64 {
        run_windows(per_ack, true)
    }

    fn window_after_2016(per_ack: u64) -> f64 {
        run_windows(per_ack, false)
    }

    fn run_windows(per_ack: u64, ack_aggregation: bool) -> f64 {
        let mut b = Bbr {
            ack_aggregation,
            ..Bbr::default()
        };
        let (mut delivered, mut t) = (0u64, 0);
        for round in 0..12u64 {
            let rate = (100.0 * 2f64.powi(round as i32)).min(1000.0);
            delivered += 10;
            t += 50_000_000;
            b.on_ack(&sample(rate, delivered, delivered - 10, 40), t);
        }
        assert_eq!(b.mode(), Mode::ProbeBw);
        for _ in 0..20 {
            let round_began = delivered;
            for _ in 0..50 / per_ack {
                delivered += per_ack;
                t += per_ack * 1_000_000;
                let mut rs = sample(1000.0, delivered, round_began, 100);
                rs.acked = per_ack;
                b.on_ack(&rs, t);
            }
        }
        b.cwnd
    }

    #[test]
    fn aggregated_acks_buy_head_room_in_the_window() {
        // 2 × BDP (100) + quanta (6), plus 2 in the 1.25 phase: no aggregation, no extra.
        let smooth = window_after(1);
        assert!(smooth <= 108.0 + 1e-9, "smooth {smooth}");
        // One ACK per 10 segments every 10 ms: each is 10 segments the bandwidth (1/ms) does
        // not explain until the epoch's time catches up — about 10 segments of head-room.
        let bursty = window_after(10);
        assert!(
            bursty >= smooth + 9.0 && bursty <= smooth + 11.0,
            "bursty {bursty}, smooth {smooth}"
        );
        // Never more than 100 ms at the estimated bandwidth (100 segments here).
        let huge = window_after(50);
        assert!(huge <= smooth + 100.0 + 1e-9, "huge {huge}");
        // The BBR of 2016 had no such head-room.
        assert!(window_after_2016(10) <= 108.0 + 1e-9);
    }

    #[test]
    fn bandwidth_filter_forgets_after_ten_rounds() {
        let mut b = Bbr::default();
        b.on_ack(&sample(5000.0, 10, 0, 10), 1);
        for r in 1..=11u64 {
            b.on_ack(&sample(1000.0, 10 + r * 10, r * 10, 10), 1 + r);
        }
        assert!((b.btl_bw() - 1000.0).abs() < 1e-9, "{}", b.btl_bw());
    }
}
