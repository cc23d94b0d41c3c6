//! What `debloat soak` samples and how it judges a run: the gateway's resident memory after
//! the run has settled (a sixth of it: 10 minutes of 60) must not grow by more than the limit —
//! neither from the first sample to the last nor along the least-squares line through all of
//! them — no ping may take a second or more and every interval must have an answer, every
//! frame must be accounted for in both directions, and open files and threads must be where
//! they were when the run settled.

use serde::Serialize;
use std::path::Path;

/// One sample of the gateway.
#[derive(Clone, Debug, Serialize)]
pub struct Sample {
    /// Seconds since the load started.
    pub t_s: f64,
    /// Resident memory (VmRSS), bytes.
    pub rss_bytes: u64,
    /// Open file descriptors.
    pub fds: u64,
    /// Threads.
    pub threads: u64,
    /// Client → server rate the discipline sent since the last sample, Mbit/s.
    pub egress_mbps: f64,
    /// Server → client, Mbit/s.
    pub ingress_mbps: f64,
    /// Ping replies since the last sample.
    pub ping_replies: usize,
    /// Their median round trip, ms (NaN for none).
    pub ping_p50_ms: f64,
    /// Their longest, ms (NaN for none).
    pub ping_max_ms: f64,
}

fn proc_status(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

impl Sample {
    /// Read the gateway process `pid` now.
    pub fn read(pid: u32, t_s: f64, pings: &[f64], mbps: [f64; 2]) -> Sample {
        let mut sorted = pings.to_vec();
        sorted.sort_by(f64::total_cmp);
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count() as u64);
        Sample {
            t_s,
            rss_bytes: proc_status(pid, "VmRSS:") * 1024,
            fds,
            threads: proc_status(pid, "Threads:"),
            egress_mbps: mbps[0],
            ingress_mbps: mbps[1],
            ping_replies: sorted.len(),
            ping_p50_ms: pct(&sorted, 50.0),
            ping_max_ms: sorted.last().copied().unwrap_or(f64::NAN),
        }
    }

    /// One progress line.
    pub fn progress(&self, total_s: f64) -> String {
        format!(
            "soak {:5.1}/{:.1} min: RSS {:.2} MiB, {} fds, {} threads; forwarding {:.1} / {:.1} Mbit/s; ping p50 {:.1} ms, max {:.1} ms ({} replies)",
            self.t_s / 60.0,
            total_s / 60.0,
            self.rss_bytes as f64 / MIB,
            self.fds,
            self.threads,
            self.egress_mbps,
            self.ingress_mbps,
            self.ping_p50_ms,
            self.ping_max_ms,
            self.ping_replies
        )
    }
}

const MIB: f64 = 1048576.0;

fn pct(sorted: &[f64], p: f64) -> f64 {
    debloat_report::percentile::percentile(sorted, p).unwrap_or(f64::NAN)
}

/// The checks' thresholds.
pub struct Limits {
    /// Samples before this are the warm-up: memory, files and threads are judged after it.
    pub settle_s: f64,
    /// Bytes the memory may grow after settling.
    pub max_rss_growth: u64,
    /// No ping may take this long.
    pub max_ping_ms: f64,
}

/// What the run ended with: the gateway's final `stats --json` and each tool's report.
pub struct Ends {
    /// The gateway's statistics after the load ended and the queues drained.
    pub stats: serde_json::Value,
    /// Each traffic tool's report (JSON where it printed JSON).
    pub tools: serde_json::Value,
}

/// One check.
#[derive(Debug, Serialize)]
pub struct Check {
    /// What was checked.
    pub name: &'static str,
    /// Whether it held.
    pub ok: bool,
    /// The numbers.
    pub detail: String,
}

/// The run's figures and checks (`soak.json`).
#[derive(Debug, Serialize)]
pub struct Verdict {
    /// Every check held.
    pub pass: bool,
    /// The checks.
    pub checks: Vec<Check>,
    /// Minutes sampled.
    pub minutes: f64,
    /// Memory after settling, at the last sample, and the highest, bytes.
    pub rss_settled_bytes: u64,
    /// At the last sample.
    pub rss_end_bytes: u64,
    /// The highest sample after settling.
    pub rss_peak_bytes: u64,
    /// Least-squares slope of memory after settling, bytes per hour.
    pub rss_slope_bytes_per_hour: f64,
    /// Ping replies, and the longest, median and 99th percentile of all, ms.
    pub ping_replies: usize,
    /// Longest.
    pub ping_max_ms: f64,
    /// Median.
    pub ping_p50_ms: f64,
    /// 99th percentile.
    pub ping_p99_ms: f64,
    /// The gateway's final statistics.
    pub gateway: serde_json::Value,
    /// The traffic tools' reports.
    pub tools: serde_json::Value,
}

/// Least-squares slope of y over x.
pub fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    if points.len() < 2 {
        return 0.0;
    }
    let (mx, my) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x / n, b + y / n));
    let (sxy, sxx) = points.iter().fold((0.0, 0.0), |(a, b), (x, y)| {
        (a + (x - mx) * (y - my), b + (x - mx) * (x - mx))
    });
    if sxx == 0.0 {
        0.0
    } else {
        sxy / sxx
    }
}

/// One direction's frames all accounted for: received + duplicated = malformed + dropped +
/// lost + over limit + buffer-dropped + queued (discipline, wire, buffer) + sent.
pub fn accounted(d: &serde_json::Value) -> Result<(), String> {
    let n = |v: &serde_json::Value| v.as_u64().ok_or_else(|| format!("no {v} in {d}"));
    let f = &d["frames"];
    let arrived = n(&f["received"])? + n(&f["duplicated"])?;
    let mut fates = 0;
    for v in [
        &f["malformed"],
        &f["qdisc_dropped"],
        &f["lost"],
        &f["overlimit"],
        &f["buffer_dropped"],
        &d["stats"]["qlen"],
        &d["on_wire"],
        &d["in_buffer"],
        &f["sent"],
    ] {
        fates += n(v)?;
    }
    if arrived == fates {
        Ok(())
    } else {
        Err(format!("{arrived} frames arrived, {fates} accounted for"))
    }
}

/// Judge a run.
pub fn judge(samples: &[Sample], pings: &[f64], ends: &Ends, l: &Limits) -> Verdict {
    let settled: Vec<&Sample> = samples.iter().filter(|s| s.t_s >= l.settle_s).collect();
    let first = settled.first().copied();
    let last = settled.last().copied();
    let rss = |s: Option<&Sample>| s.map_or(0, |s| s.rss_bytes);
    let pts: Vec<(f64, f64)> = settled
        .iter()
        .map(|s| (s.t_s, s.rss_bytes as f64))
        .collect();
    let per_s = slope(&pts);
    let span = last.zip(first).map_or(0.0, |(b, a)| b.t_s - a.t_s);
    let mut sorted = pings.to_vec();
    sorted.sort_by(f64::total_cmp);
    let max_ping = sorted.last().copied().unwrap_or(f64::NAN);
    let mut checks = vec![memory_check(first, last, per_s * span, l)];
    let silent = samples.iter().filter(|s| s.ping_replies == 0).count();
    checks.push(Check {
        name: "ping",
        ok: max_ping < l.max_ping_ms && silent == 0 && !samples.is_empty(),
        detail: format!(
            "{} replies, longest {max_ping:.1} ms (limit {:.0} ms), {silent} intervals without a reply",
            sorted.len(),
            l.max_ping_ms
        ),
    });
    for dir in ["egress", "ingress"] {
        let r = accounted(&ends.stats[dir]);
        checks.push(Check {
            name: if dir == "egress" {
                "accounting egress"
            } else {
                "accounting ingress"
            },
            ok: r.is_ok(),
            detail: r.map_or_else(|e| e, |()| "every frame accounted for".into()),
        });
    }
    checks.push(leak_check(first, last));
    Verdict {
        pass: checks.iter().all(|c| c.ok),
        checks,
        minutes: samples.last().map_or(0.0, |s| s.t_s / 60.0),
        rss_settled_bytes: rss(first),
        rss_end_bytes: rss(last),
        rss_peak_bytes: settled.iter().map(|s| s.rss_bytes).max().unwrap_or(0),
        rss_slope_bytes_per_hour: per_s * 3600.0,
        ping_replies: sorted.len(),
        ping_max_ms: max_ping,
        ping_p50_ms: pct(&sorted, 50.0),
        ping_p99_ms: pct(&sorted, 99.0),
        gateway: ends.stats.clone(),
        tools: ends.tools.clone(),
    }
}

fn memory_check(first: Option<&Sample>, last: Option<&Sample>, fitted: f64, l: &Limits) -> Check {
    let (Some(a), Some(b)) = (first, last) else {
        return Check {
            name: "memory",
            ok: false,
            detail: "no samples after settling: run longer".into(),
        };
    };
    let grew = b.rss_bytes as f64 - a.rss_bytes as f64;
    Check {
        name: "memory",
        ok: grew <= l.max_rss_growth as f64 && fitted <= l.max_rss_growth as f64,
        detail: format!(
            "RSS {:.2} MiB at {:.1} min, {:.2} MiB at {:.1} min: {:+.3} MiB, {:+.3} MiB along the fitted line (limit {:.2} MiB)",
            a.rss_bytes as f64 / MIB,
            a.t_s / 60.0,
            b.rss_bytes as f64 / MIB,
            b.t_s / 60.0,
            grew / MIB,
            fitted / MIB,
            l.max_rss_growth as f64 / MIB
        ),
    }
}

fn leak_check(first: Option<&Sample>, last: Option<&Sample>) -> Check {
    let (Some(a), Some(b)) = (first, last) else {
        return Check {
            name: "files and threads",
            ok: false,
            detail: "no samples after settling".into(),
        };
    };
    Check {
        name: "files and threads",
        ok: b.fds <= a.fds && b.threads <= a.threads,
        detail: format!(
            "{} → {} open files, {} → {} threads",
            a.fds, b.fds, a.threads, b.threads
        ),
    }
}

impl Verdict {
    /// The checks and the headline figures, for the terminal.
    pub fn text(&self) -> String {
        let mut s = format!(
            "soak {:.1} min: memory slope {:+.0} bytes/hour, peak {:.2} MiB; ping p50 {:.1} ms, p99 {:.1} ms, longest {:.1} ms\n",
            self.minutes,
            self.rss_slope_bytes_per_hour,
            self.rss_peak_bytes as f64 / MIB,
            self.ping_p50_ms,
            self.ping_p99_ms,
            self.ping_max_ms
        );
        for c in &self.checks {
            let mark = if c.ok { "ok  " } else { "FAIL" };
            s += &format!("  {mark} {}: {}\n", c.name, c.detail);
        }
        s
    }
}

/// soak.png and soak.svg: memory, files and threads, forwarding and ping over the run.
pub fn plot(samples: &[Sample], dir: &Path) -> Result<(), String> {
    use debloat_report::plot::{render_panels, Panel};
    let t: Vec<f64> = samples.iter().map(|s| s.t_s / 60.0).collect();
    let col = |f: fn(&Sample) -> f64| samples.iter().map(f).collect::<Vec<f64>>();
    let panels = [
        Panel::new(
            "resident memory",
            "MiB",
            vec![("RSS", col(|s| s.rss_bytes as f64 / MIB))],
        ),
        Panel::new(
            "forwarded",
            "Mbit/s",
            vec![
                ("client → server", col(|s| s.egress_mbps)),
                ("server → client", col(|s| s.ingress_mbps)),
            ],
        ),
        Panel::new(
            "ping round trip",
            "ms",
            vec![
                ("median", col(|s| s.ping_p50_ms)),
                ("longest", col(|s| s.ping_max_ms)),
            ],
        ),
        Panel::new(
            "open",
            "count",
            vec![
                ("files", col(|s| s.fds as f64)),
                ("threads", col(|s| s.threads as f64)),
            ],
        ),
    ];
    render_panels(
        dir,
        "soak",
        "The gateway over the soak, sampled every interval (minutes)",
        &t,
        &panels,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t_s: f64, rss_mib: f64) -> Sample {
        Sample {
            t_s,
            rss_bytes: (rss_mib * MIB) as u64,
            fds: 9,
            threads: 4,
            egress_mbps: 18.0,
            ingress_mbps: 18.0,
            ping_replies: 50,
            ping_p50_ms: 22.0,
            ping_max_ms: 40.0,
        }
    }

    fn stats(sent: u64) -> serde_json::Value {
        let d = serde_json::json!({
            "frames": {"received": 100, "duplicated": 0, "malformed": 1, "qdisc_dropped": 2,
                       "lost": 0, "overlimit": 0, "buffer_dropped": 0, "sent": sent},
            "stats": {"qlen": 0}, "on_wire": 0, "in_buffer": 0});
        serde_json::json!({"egress": d, "ingress": d})
    }

    fn ends(sent: u64) -> Ends {
        Ends {
            stats: stats(sent),
            tools: serde_json::Value::Null,
        }
    }

    const LIMITS: Limits = Limits {
        settle_s: 60.0,
        max_rss_growth: 1 << 20,
        max_ping_ms: 1000.0,
    };

    #[test]
    fn slope_of_a_line_is_its_gradient() {
        let pts: Vec<(f64, f64)> = (0..10).map(|i| (i as f64, 3.0 * i as f64 + 7.0)).collect();
        assert!((slope(&pts) - 3.0).abs() < 1e-9);
        assert_eq!(slope(&[(1.0, 5.0)]), 0.0);
    }

    #[test]
    fn memory_that_grows_after_settling_fails_and_warm_up_growth_does_not() {
        // 10 MiB of warm-up growth, then flat: passes.
        let flat: Vec<Sample> = (0..36)
            .map(|i| sample(i as f64 * 10.0, if i < 6 { i as f64 * 2.0 } else { 12.0 }))
            .collect();
        let pings = vec![22.0; 100];
        let v = judge(&flat, &pings, &ends(97), &LIMITS);
        assert!(v.pass, "{}", v.text());
        // 2 MiB over the settled part: fails, and says by how much.
        let growing: Vec<Sample> = (0..36)
            .map(|i| sample(i as f64 * 10.0, 12.0 + i as f64 * 2.0 / 35.0))
            .collect();
        let v = judge(&growing, &pings, &ends(97), &LIMITS);
        assert!(!v.pass);
        assert!(v.checks[0].detail.contains("+1.6"), "{}", v.text());
    }

    #[test]
    fn a_slow_ping_an_unanswered_interval_and_a_lost_frame_each_fail() {
        let ok: Vec<Sample> = (0..12).map(|i| sample(i as f64 * 10.0, 12.0)).collect();
        let v = judge(&ok, &[22.0, 1000.0], &ends(97), &LIMITS);
        assert!(!v.checks[1].ok, "{}", v.text());
        let mut silent = ok.clone();
        silent[7].ping_replies = 0;
        assert!(!judge(&silent, &[22.0], &ends(97), &LIMITS).checks[1].ok);
        let v = judge(&ok, &[22.0], &ends(96), &LIMITS);
        assert!(
            !v.checks[2].ok && v.checks[2].detail.contains("100 frames arrived, 99"),
            "{}",
            v.text()
        );
        assert!(judge(&ok, &[22.0], &ends(97), &LIMITS).pass);
    }

    #[test]
    fn a_thread_or_file_left_open_fails() {
        let mut s: Vec<Sample> = (0..12).map(|i| sample(i as f64 * 10.0, 12.0)).collect();
        s[11].fds = 10;
        let v = judge(&s, &[22.0], &ends(97), &LIMITS);
        assert!(
            !v.pass && v.checks[4].detail.contains("9 → 10 open files"),
            "{}",
            v.text()
        );
    }
}
