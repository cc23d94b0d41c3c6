//! Responsiveness under working conditions, RPM, as draft-ietf-ippm-responsiveness-09 defines
//! it (docs/measurement.md §6), TCP-only variant:
//!
//! - **foreign probes**: a fresh TCP connection to the server, 10 a second during the load:
//!   `tcp_f` = connect time, `http_f` = one request/response on it (a 1-byte request answered
//!   by one line; debloat's stand-in for the GET of a 1-byte object);
//! - **loaded probes** `http_l`: the kernel's smoothed RTT of the load connections at their
//!   sender (TCP_INFO: the client's for uploads, the server's for downloads, returned in the
//!   probe's answer). The draft allows the TCP stack's estimate where a request cannot be
//!   multiplexed onto a load connection; debloat's flows are raw TCP, so it takes that option.
//! - TM(x) = mean of the lowest 95 % of x; over the last MAD = 4 intervals of ID = 5 s:
//!   Foreign = 60000 / ((TM(tcp_f) + TM(http_f)) / 2), Loaded = 60000 / TM(http_l),
//!   **RPM = (Foreign + Loaded) / 2** — the mean of two RPMs, not of two RTTs.
//! - Confidence: Low when fewer than MAD intervals ran, High when both the goodput and the
//!   responsiveness moving averages were stable (standard deviation of the last MAD moving
//!   averages < 5 % of the current one), Medium otherwise.
//!
//! The draft ramps up load connections until goodput saturates: debloat's `responsiveness`
//! test does (see [`Ramp`]); flent's tests fix their flows, so for them the intervals are those
//! of the test's load window (for `bufferbloat`, whose directions load the link in turn, its
//! download phase) — a stated deviation.
//! The P90 figure goresponsiveness prints (60000 / mean of the P90 RTTs) is given beside it,
//! labelled as that.

use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Interval duration ID, s (draft-09).
pub const ID_S: f64 = 5.0;
/// Moving-average distance MAD, intervals.
pub const MAD: usize = 4;
/// Trimmed-mean percentage kept, TMP.
pub const TMP: f64 = 0.95;
/// Stability threshold SDT.
pub const SDT: f64 = 0.05;

/// One foreign probe and the loaded RTTs the server reported with it.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct ForeignSample {
    /// Time, s since the test's start.
    pub t: f64,
    /// TCP handshake, ms.
    pub tcp_ms: f64,
    /// Request/response on the fresh connection, ms.
    pub req_ms: f64,
    /// Smoothed RTTs of the server's downloads to this client, ms.
    pub loaded_ms: Vec<f64>,
}

/// One foreign probe now.
fn probe_once(server: SocketAddr, key: Option<&[u8]>, t0: Instant) -> Option<ForeignSample> {
    let t = t0.elapsed().as_secs_f64();
    // A fresh connection: its handshake is tcp_f; after the control exchange (greeting,
    // request, OK) one timed byte → line is http_f.
    let (stream, mut reader, handshake) =
        crate::flow::request_timed(server, &crate::control::Request::Probe, key, |_| Ok(()))
            .ok()?;
    let tcp_ms = handshake.as_secs_f64() * 1e3;
    let _ = stream.set_nodelay(true);
    let mut w = &stream;
    let b = Instant::now();
    w.write_all(b"p").ok()?;
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let req_ms = b.elapsed().as_secs_f64() * 1e3;
    let loaded_ms = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse::<f64>().ok())
        .map(|us| us / 1e3)
        .collect();
    Some(ForeignSample {
        t,
        tcp_ms,
        req_ms,
        loaded_ms,
    })
}

/// Foreign probes every 100 ms (10 a second, under the draft's MPS of 100) in the load window
/// [a, b] s, until the window ends, `stop` or `done`; each sample is added to `out` as it
/// comes (the runner reads them during the test to see whether responsiveness is stable).
#[allow(clippy::too_many_arguments)]
pub fn foreign_probes(
    server: SocketAddr,
    key: Option<&[u8]>,
    t0: Instant,
    a: f64,
    b: f64,
    stop: &AtomicBool,
    done: &AtomicBool,
    out: &std::sync::Mutex<Vec<ForeignSample>>,
) {
    let mut k = 0u32;
    loop {
        let at = t0 + Duration::from_secs_f64(a) + Duration::from_millis(100) * k;
        k += 1;
        if at > t0 + Duration::from_secs_f64(b) {
            break;
        }
        while Instant::now() < at {
            if stop.load(Ordering::Relaxed) || done.load(Ordering::Relaxed) {
                return;
            }
            std::thread::sleep((at - Instant::now()).min(Duration::from_millis(20)));
        }
        // Behind schedule the wait above is skipped: look at the flags before every probe.
        if stop.load(Ordering::Relaxed) || done.load(Ordering::Relaxed) {
            return;
        }
        if let Some(s) = probe_once(server, key, t0) {
            match out.lock() {
                Ok(mut v) => v.push(s),
                Err(p) => p.into_inner().push(s),
            }
        }
    }
}

/// Single-sided trimmed mean: the mean of the lowest 95 %.
pub fn trimmed_mean(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let keep = ((s.len() as f64 * TMP).ceil() as usize).clamp(1, s.len());
    Some(s[..keep].iter().sum::<f64>() / keep as f64)
}

fn p90(v: &[f64]) -> Option<f64> {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    debloat_report::percentile::percentile(&s, 90.0)
}

/// The draft's confidence in the result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Confidence {
    /// Fewer than MAD intervals ran.
    Low,
    /// MAD intervals ran but goodput or responsiveness never settled.
    Medium,
    /// Both were stable.
    High,
}

/// RPM and its parts.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Rpm {
    /// The draft's RPM: (Foreign + Loaded) / 2.
    pub rpm: f64,
    /// 60000 / mean of TM(tcp_f) and TM(http_f) (and TM(tls_f) with TLS).
    pub foreign_rpm: f64,
    /// 60000 / TM(http_l).
    pub loaded_rpm: f64,
    /// The goresponsiveness-style P90 figure: 60000 / ((P90 foreign + P90 loaded) / 2).
    pub p90_rpm: f64,
    /// Intervals of ID seconds completed in the load window.
    pub intervals: usize,
    /// Confidence.
    pub confidence: Confidence,
    /// Draft class: Poor (< 300), Fair (< 1000), Good (< 6000), Excellent.
    pub class: &'static str,
    /// The definition, for the report.
    pub definition: &'static str,
}

/// The draft's class of an RPM.
pub fn class(rpm: f64) -> &'static str {
    match rpm {
        r if r < 300.0 => "Poor",
        r if r < 1000.0 => "Fair",
        r if r < 6000.0 => "Good",
        _ => "Excellent",
    }
}

/// The draft's stability test over one value per interval (None where an interval had no
/// sample): the moving average over MAD intervals at each interval from MAD−1 on; stable when
/// the standard deviation of the last MAD moving averages is below SDT of the newest.
pub fn stable(per_interval: &[Option<f64>]) -> bool {
    let ma: Vec<f64> = (MAD.saturating_sub(1)..per_interval.len())
        .filter_map(|i| {
            let v: Vec<f64> = per_interval[i + 1 - MAD..=i]
                .iter()
                .flatten()
                .copied()
                .collect();
            (v.len() == MAD).then(|| v.iter().sum::<f64>() / MAD as f64)
        })
        .collect();
    if ma.len() < MAD {
        return false;
    }
    let last = &ma[ma.len() - MAD..];
    let mean = last.iter().sum::<f64>() / MAD as f64;
    let sd = (last.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / MAD as f64).sqrt();
    mean > 0.0 && sd < SDT * last[MAD - 1]
}

/// Inputs per sample: time (s) and value (ms).
pub type Timed = (f64, f64);

/// RPM over the load window [a, b]: foreign (tcp_f, http_f), loaded (http_l) samples, and the
/// goodput samples (time, Mbit/s of all flows) for the stability check.
pub fn compute(
    a: f64,
    b: f64,
    tcp_f: &[Timed],
    http_f: &[Timed],
    http_l: &[Timed],
    goodput: &[Timed],
) -> Option<Rpm> {
    compute_with(a, b, &[tcp_f, http_f], http_l, goodput, TCP_ONLY)
}

const TCP_ONLY: &str = "draft-ietf-ippm-responsiveness-09, TCP-only: RPM = (60000/mean(TM(tcp_f),TM(http_f)) + 60000/TM(http_l)) / 2, TM = mean of the lowest 95 %, over the last 4 intervals of 5 s; http_l = the load connections' TCP_INFO smoothed RTT";

/// RPM over [a, b] from any number of foreign series (the draft's TCP-only form has two,
/// tcp_f and http_f; with TLS three, tcp_f, tls_f and http_f): Foreign = 60000 / the mean of
/// their trimmed means. The series are sample-aligned (one entry per probe in each).
pub fn compute_with(
    a: f64,
    b: f64,
    series: &[&[Timed]],
    http_l: &[Timed],
    goodput: &[Timed],
    definition: &'static str,
) -> Option<Rpm> {
    if series.is_empty() {
        return None;
    }
    // Whole intervals of ID seconds in the window; a window shorter than one is one interval.
    let n = ((b - a) / ID_S + 1e-9).floor() as usize;
    let windows: Vec<(f64, f64)> = if n == 0 {
        vec![(a, b)]
    } else {
        (0..n)
            .map(|i| (a + i as f64 * ID_S, a + (i + 1) as f64 * ID_S))
            .collect()
    };
    let within = |v: &[Timed], lo: usize, hi: usize| -> Vec<f64> {
        let (from, to) = (windows[lo].0, windows[hi - 1].1);
        v.iter()
            .filter(|x| x.0 >= from && x.0 < to)
            .map(|x| x.1)
            .collect()
    };
    // (Foreign, Loaded, RPM) from the samples of intervals lo..hi.
    let parts = |lo: usize, hi: usize| -> Option<(f64, f64, f64)> {
        let mut sum = 0.0;
        for f in series {
            sum += trimmed_mean(&within(f, lo, hi))?;
        }
        let hl = trimmed_mean(&within(http_l, lo, hi))?;
        let foreign = 60_000.0 / (sum / series.len() as f64);
        let loaded = 60_000.0 / hl;
        Some((foreign, loaded, (foreign + loaded) / 2.0))
    };
    let hi = windows.len();
    let lo = hi.saturating_sub(MAD);
    let (foreign, loaded, rpm) = parts(lo, hi)?;
    let gp = |i: usize| -> Option<f64> {
        let v = within(goodput, i, i + 1);
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    let resp = |i: usize| -> Option<f64> { parts(i, i + 1).map(|p| p.2) };
    let confidence = if n < MAD {
        Confidence::Low
    } else if stable(&(0..n).map(gp).collect::<Vec<_>>())
        && stable(&(0..n).map(resp).collect::<Vec<_>>())
    {
        Confidence::High
    } else {
        Confidence::Medium
    };
    let (from, to) = (windows[lo].0, windows[hi - 1].1);
    let foreign_rtts: Vec<f64> = (0..series.iter().map(|f| f.len()).min().unwrap_or(0))
        .filter(|&i| series[0][i].0 >= from && series[0][i].0 < to)
        .map(|i| series.iter().map(|f| f[i].1).sum::<f64>() / series.len() as f64)
        .collect();
    let p90_rpm = match (p90(&foreign_rtts), p90(&within(http_l, lo, hi))) {
        (Some(f), Some(l)) => 60_000.0 / ((f + l) / 2.0),
        _ => 0.0,
    };
    Some(Rpm {
        rpm,
        foreign_rpm: foreign,
        loaded_rpm: loaded,
        p90_rpm,
        intervals: n,
        confidence,
        class: class(rpm),
        definition,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn averages_rpms_not_rtts() {
        // The draft's worked contrast (docs/measurement.md §6.3): loaded 50 ms, foreign 10 ms gives
        // (6000 + 1200) / 2 = 3600 RPM, where averaging RTTs would give 2000.
        let ts: Vec<Timed> = (0..200).map(|i| (i as f64 * 0.1, 10.0)).collect();
        let hl: Vec<Timed> = (0..200).map(|i| (i as f64 * 0.1, 50.0)).collect();
        let gp: Vec<Timed> = (0..200).map(|i| (i as f64 * 0.1, 100.0)).collect();
        let r = compute(0.0, 20.0, &ts, &ts, &hl, &gp).expect("rpm");
        assert!((r.rpm - 3600.0).abs() < 1e-6, "{r:?}");
        assert_eq!(r.class, "Good");
        assert_eq!(r.intervals, 4);
        // Four intervals ran but there are not four moving averages yet: Medium, not High.
        assert_eq!(r.confidence, Confidence::Medium);
    }

    #[test]
    fn trimmed_mean_drops_the_top_five_percent() {
        let mut v: Vec<f64> = vec![10.0; 95];
        v.extend([1000.0; 5]);
        assert_eq!(trimmed_mean(&v), Some(10.0));
    }

    #[test]
    fn short_runs_are_low_confidence_and_steady_long_runs_high() {
        let f = |n: usize, v: f64| -> Vec<Timed> { (0..n).map(|i| (i as f64 * 0.1, v)).collect() };
        let r = compute(
            0.0,
            3.0,
            &f(30, 5.0),
            &f(30, 5.0),
            &f(30, 20.0),
            &f(30, 9.0),
        )
        .expect("rpm");
        assert_eq!(r.confidence, Confidence::Low);
        let r = compute(
            0.0,
            60.0,
            &f(600, 5.0),
            &f(600, 5.0),
            &f(600, 20.0),
            &f(600, 9.0),
        )
        .expect("rpm");
        assert_eq!(r.confidence, Confidence::High);
        assert_eq!(r.intervals, 12);
    }
}

/// Initial load connections per direction, INP.
pub const INP: usize = 1;
/// Connections added per direction each interval while goodput is not saturated, INC.
pub const INC: usize = 1;
/// Most load connections per direction, MNP.
pub const MNP: usize = 16;

/// The draft's load ramp: INP connections per direction at the start, INC more at the end of
/// every interval of ID seconds until the aggregate goodput is stable (the same stability test
/// as above) or MNP are running; after saturation no more are added. Sans-IO: the runner feeds
/// it each interval's goodput and starts as many connections as it answers.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Ramp {
    /// Interval, s (ID).
    pub interval_s: f64,
    /// Most connections per direction (MNP).
    pub max_flows: usize,
    /// Connections per direction now.
    pub flows: usize,
    /// Aggregate goodput of each completed interval, Mbit/s.
    pub goodput_mbps: Vec<f64>,
    /// When the goodput was found saturated, s since the test's start.
    pub saturated_at_s: Option<f64>,
    /// (time s, connections per direction from then on), one entry per change.
    pub steps: Vec<(f64, usize)>,
    /// When responsiveness was found stable too and the test ended, s.
    pub ended_at_s: Option<f64>,
}

impl Ramp {
    /// A ramp starting at `t` s with INP connections per direction.
    pub fn new(t: f64, interval_s: f64, max_flows: usize) -> Ramp {
        let flows = INP.min(max_flows);
        Ramp {
            interval_s,
            max_flows,
            flows,
            goodput_mbps: Vec::new(),
            saturated_at_s: None,
            steps: vec![(t, flows)],
            ended_at_s: None,
        }
    }

    /// An interval ended at `t` with this aggregate goodput: returns the connections per
    /// direction that should run from now on.
    pub fn interval_done(&mut self, t: f64, goodput_mbps: f64) -> usize {
        self.goodput_mbps.push(goodput_mbps);
        if self.saturated_at_s.is_some() {
            return self.flows;
        }
        let v: Vec<Option<f64>> = self.goodput_mbps.iter().copied().map(Some).collect();
        if stable(&v) {
            self.saturated_at_s = Some(t);
        } else if self.flows < self.max_flows {
            self.flows = (self.flows + INC).min(self.max_flows);
            self.steps.push((t, self.flows));
        }
        self.flows
    }
}

#[cfg(test)]
mod ramp_tests {
    use super::*;

    /// One more connection each interval while goodput still moves; none once it is stable
    /// (here: growing 20 Mbit/s per connection up to a 100 Mbit/s link, then flat).
    #[test]
    fn adds_a_connection_per_interval_until_goodput_is_stable() {
        let mut r = Ramp::new(5.0, ID_S, MNP);
        assert_eq!(r.flows, 1);
        let mut t = 5.0;
        let mut history = Vec::new();
        for _ in 0..20 {
            t += ID_S;
            let gp = (20.0 * r.flows as f64).min(100.0);
            history.push(r.interval_done(t, gp));
        }
        // 1 → 5 connections reach the link's 100 Mbit/s; the ramp keeps adding while the
        // moving averages still climb, then stops at saturation and holds.
        let sat = r.saturated_at_s.expect("saturates");
        let n = r.flows;
        assert!((5..MNP).contains(&n), "{n} connections: {history:?}");
        let at = history.iter().position(|&f| f == n).expect("reached");
        assert!(history[at..].iter().all(|&f| f == n), "{history:?}");
        assert!(sat > 5.0 + ID_S * at as f64, "saturated at {sat}");
        assert_eq!(r.steps.first(), Some(&(5.0, 1)));
        assert_eq!(
            r.steps.len(),
            n,
            "one step per added connection: {:?}",
            r.steps
        );
    }

    /// Goodput that never settles (growing 20 % an interval) keeps adding up to MNP and no
    /// further.
    #[test]
    fn never_more_than_mnp() {
        let mut r = Ramp::new(0.0, ID_S, MNP);
        for i in 0..40 {
            r.interval_done(f64::from(i) * ID_S, 10.0 * 1.2f64.powi(i));
        }
        assert_eq!((r.flows, r.saturated_at_s), (MNP, None));
    }
}
