//! Congestion control: a small interface fed only with `now`, counts and RTTs (the shape
//! quinn-proto and neqo use), with NewReno and CUBIC behind it. Windows are in segments.
//!
//! CUBIC follows RFC 8312 with Linux's constants (β = 0.7, C = 0.4, fast convergence on, the
//! TCP-friendly region on), computed in floating point rather than Linux's fixed-point cube root.
//! CUBIC includes HyStart's delay-increase detection (Linux `bictcp_hystart`, on by default):
//! slow start ends when a round's minimum RTT (over its first 8 samples) exceeds the flow's
//! minimum RTT by clamp(min/8, 4 ms, 16 ms), once cwnd is at least 16. Its ACK-train detection is
//! not modelled. BBR lives in [`super::bbr`].

use debloat_core::packet::Nanos;

/// Which algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Algorithm {
    /// NewReno (RFC 5681/6582): AIMD, halve on loss.
    Reno,
    /// CUBIC (RFC 8312), Linux's default.
    Cubic,
    /// BBR v1 (see [`super::bbr`]); paced.
    Bbr,
    /// TCP Westwood+ (Linux tcp_westwood.c): Reno growth; on loss, ssthresh from the estimated
    /// bandwidth × minimum RTT instead of halving.
    Westwood,
    /// TCP Prague (see [`super::prague`]): L4S, ECT(1), DCTCP-like response to Accurate ECN.
    Prague,
}

impl Algorithm {
    /// Linux's name (`net.ipv4.tcp_congestion_control`).
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Reno => "reno",
            Algorithm::Cubic => "cubic",
            Algorithm::Bbr => "bbr",
            Algorithm::Westwood => "westwood",
            Algorithm::Prague => "prague",
        }
    }
}

/// A congestion control the simulator does not have.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown congestion control `{0}`: expected cubic, reno, bbr, westwood or prague")]
pub struct UnknownCc(pub String);

impl std::str::FromStr for Algorithm {
    type Err = UnknownCc;
    fn from_str(s: &str) -> Result<Self, UnknownCc> {
        match s.to_ascii_lowercase().as_str() {
            "reno" | "newreno" => Ok(Algorithm::Reno),
            "cubic" => Ok(Algorithm::Cubic),
            "bbr" => Ok(Algorithm::Bbr),
            "westwood" => Ok(Algorithm::Westwood),
            "prague" => Ok(Algorithm::Prague),
            other => Err(UnknownCc(other.to_string())),
        }
    }
}

const BETA: f64 = 0.7;
const C: f64 = 0.4;

/// Congestion-control state of one connection.
#[derive(Clone, Debug)]
pub struct Cc {
    alg: Algorithm,
    /// Congestion window, segments.
    pub cwnd: f64,
    /// Slow-start threshold, segments.
    pub ssthresh: f64,
    w_max: f64,
    w_last_max: f64,
    epoch_start: Option<Nanos>,
    k: f64,
    w_est: f64,
    hystart: Hystart,
    ww: Westwood,
}

/// Westwood+'s bandwidth estimate: segments acknowledged per RTT window (at least 50 ms), through
/// two 7/8 low-pass filters.
#[derive(Clone, Debug, Default)]
struct Westwood {
    bk: f64,
    win_start: Nanos,
    bw_ns_est: f64,
    bw_est: f64,
    first: bool,
    rtt_min: Nanos,
}

/// HyStart's delay-increase state.
#[derive(Clone, Debug)]
struct Hystart {
    round_end: u64,
    curr_rtt: Nanos,
    samples: u32,
    delay_min: Nanos,
    found: bool,
}

impl Default for Hystart {
    fn default() -> Self {
        Hystart {
            round_end: 0,
            curr_rtt: Nanos::MAX,
            samples: 0,
            delay_min: Nanos::MAX,
            found: false,
        }
    }
}

const HYSTART_MIN_SAMPLES: u32 = 8;
const HYSTART_LOW_WINDOW: f64 = 16.0;

impl Cc {
    /// A fresh connection with the initial window `iw` (Linux IW10).
    pub fn new(alg: Algorithm, iw: f64) -> Cc {
        Cc {
            alg,
            cwnd: iw,
            ssthresh: f64::INFINITY,
            w_max: 0.0,
            w_last_max: 0.0,
            epoch_start: None,
            k: 0.0,
            w_est: 0.0,
            hystart: Hystart::default(),
            ww: Westwood {
                first: true,
                rtt_min: Nanos::MAX,
                ..Westwood::default()
            },
        }
    }

    /// Westwood+'s per-ACK bookkeeping: `acked` segments delivered, an RTT sample if any.
    pub fn westwood_ack(&mut self, acked: f64, now: Nanos, rtt: Option<Nanos>, srtt: Nanos) {
        if self.alg != Algorithm::Westwood {
            return;
        }
        let w = &mut self.ww;
        if let Some(r) = rtt {
            w.rtt_min = w.rtt_min.min(r);
        }
        w.bk += acked;
        let delta = now.saturating_sub(w.win_start);
        if w.win_start == 0 {
            w.win_start = now;
        } else if delta > srtt.max(50_000_000) {
            let sample = w.bk / (delta as f64 / 1e9);
            if w.first {
                w.bw_ns_est = sample;
                w.bw_est = sample;
                w.first = false;
            } else {
                w.bw_ns_est = (7.0 * w.bw_ns_est + sample) / 8.0;
                w.bw_est = (7.0 * w.bw_est + w.bw_ns_est) / 8.0;
            }
            w.bk = 0.0;
            w.win_start = now;
        }
    }

    /// Westwood+'s ssthresh: estimated bandwidth × minimum RTT, in segments.
    fn westwood_bw_rtt_min(&self) -> Option<f64> {
        (self.ww.bw_est > 0.0 && self.ww.rtt_min != Nanos::MAX)
            .then(|| self.ww.bw_est * self.ww.rtt_min as f64 / 1e9)
    }

    /// An RTT sample at an ACK that moved `snd_una`; `snd_nxt` marks the end of the next round.
    /// Runs HyStart while CUBIC is in slow start.
    pub fn on_rtt(&mut self, rtt: Nanos, snd_una: u64, snd_nxt: u64) {
        if self.alg != Algorithm::Cubic || self.cwnd >= self.ssthresh || self.hystart.found {
            return;
        }
        let h = &mut self.hystart;
        if snd_una > h.round_end {
            h.round_end = snd_nxt;
            h.curr_rtt = Nanos::MAX;
            h.samples = 0;
        }
        h.delay_min = h.delay_min.min(rtt);
        if h.samples < HYSTART_MIN_SAMPLES {
            h.curr_rtt = h.curr_rtt.min(rtt);
            h.samples += 1;
        }
        if h.samples >= HYSTART_MIN_SAMPLES && self.cwnd >= HYSTART_LOW_WINDOW {
            let thresh = (h.delay_min / 8).clamp(4_000_000, 16_000_000);
            if h.curr_rtt > h.delay_min.saturating_add(thresh) {
                h.found = true;
                self.ssthresh = self.cwnd;
            }
        }
    }

    /// The algorithm.
    pub fn algorithm(&self) -> Algorithm {
        self.alg
    }

    /// `acked` segments were newly acknowledged at `now` with smoothed RTT `srtt`.
    pub fn on_ack(&mut self, acked: f64, now: Nanos, srtt: Nanos) {
        let mut acked = acked;
        if self.cwnd < self.ssthresh {
            let room = (self.ssthresh - self.cwnd).max(0.0);
            let ss = acked.min(room.max(0.0));
            self.cwnd += ss;
            acked -= ss;
            if acked <= 0.0 {
                return;
            }
        }
        match self.alg {
            Algorithm::Reno | Algorithm::Bbr | Algorithm::Westwood | Algorithm::Prague => {
                self.cwnd += acked / self.cwnd
            }
            Algorithm::Cubic => self.cubic_ack(acked, now, srtt),
        }
    }

    fn cubic_ack(&mut self, acked: f64, now: Nanos, srtt: Nanos) {
        let start = *self.epoch_start.get_or_insert_with(|| {
            if self.cwnd < self.w_max {
                self.k = ((self.w_max - self.cwnd) / C).cbrt();
            } else {
                self.k = 0.0;
                self.w_max = self.cwnd;
            }
            self.w_est = self.cwnd;
            now
        });
        let rtt = srtt.max(1) as f64 / 1e9;
        let t = now.saturating_sub(start) as f64 / 1e9 + rtt;
        let target = C * (t - self.k).powi(3) + self.w_max;
        // TCP-friendly region: what Reno would have by now.
        self.w_est += 3.0 * (1.0 - BETA) / (1.0 + BETA) * acked / self.cwnd;
        let target = target.max(self.w_est);
        if target > self.cwnd {
            self.cwnd += (target - self.cwnd) / self.cwnd * acked;
        } else {
            self.cwnd += 0.01 * acked / self.cwnd;
        }
    }

    /// A loss or ECN congestion signal (once per window): multiplicative decrease.
    pub fn on_congestion(&mut self) {
        match self.alg {
            Algorithm::Reno | Algorithm::Bbr | Algorithm::Prague => {
                self.ssthresh = (self.cwnd / 2.0).max(2.0);
            }
            Algorithm::Westwood => {
                self.ssthresh = self
                    .westwood_bw_rtt_min()
                    .unwrap_or(self.cwnd / 2.0)
                    .max(2.0);
            }
            Algorithm::Cubic => {
                self.epoch_start = None;
                self.w_max = if self.cwnd < self.w_last_max {
                    self.cwnd * (1.0 + BETA) / 2.0
                } else {
                    self.cwnd
                };
                self.w_last_max = self.cwnd;
                self.ssthresh = (self.cwnd * BETA).max(2.0);
            }
        }
        self.cwnd = self.ssthresh;
    }

    /// Retransmission timeout: back to one segment.
    pub fn on_rto(&mut self, flight: f64) {
        self.on_congestion();
        self.hystart = Hystart {
            delay_min: self.hystart.delay_min,
            ..Hystart::default()
        };
        self.ssthresh = (flight / 2.0).max(2.0).min(self.ssthresh.max(2.0));
        self.cwnd = 1.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_start_doubles_per_round_then_reno_adds_one() {
        let mut c = Cc::new(Algorithm::Reno, 10.0);
        c.on_ack(10.0, 0, 1);
        assert_eq!(c.cwnd, 20.0);
        c.on_congestion();
        assert_eq!((c.cwnd, c.ssthresh), (10.0, 10.0));
        c.on_ack(10.0, 0, 1);
        assert!((c.cwnd - 11.0).abs() < 0.05, "{}", c.cwnd);
    }

    #[test]
    fn cubic_backs_off_to_0_7_and_regrows_to_w_max_at_k() {
        let mut c = Cc::new(Algorithm::Cubic, 100.0);
        c.ssthresh = 50.0;
        c.on_congestion();
        assert!((c.cwnd - 70.0).abs() < 1e-9);
        // K = cbrt(100 * 0.3 / 0.4) ≈ 4.22 s: grow with 100 ms RTT, one window of ACKs per RTT.
        let mut now = 0;
        while now < 4_300_000_000 {
            let w = c.cwnd;
            c.on_ack(w, now, 100_000_000);
            now += 100_000_000;
        }
        assert!((c.cwnd - 100.0).abs() < 5.0, "cwnd at K: {}", c.cwnd);
    }
}
