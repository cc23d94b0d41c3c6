//! Shapers on a link whose capacity moves: one capacity trace as the bottleneck behind the
//! down discipline (a modem FIFO of 200 packets), 4 CUBIC downloads and a VoIP stream, and the
//! shaper done six ways — none, cake fixed at the trace's 10th percentile and at its median,
//! cake's `autorate-ingress`, cake-autorate's controller, debloat's passive controller — and
//! an oracle that reads the trace (what no controller can know: the bound on all of them) — each
//! measured as goodput against what the trace could carry and the VoIP stream's one-way delay
//! down. `debloat autorate compare` prints the table; `tests/adaptive.rs` holds the goal.

use crate::scenario::{build_world, Adaptive, Config, Test};
use crate::tcp::cc::Algorithm;
use crate::world::{AutorateConfig, Dir, RatePoint, World};
use debloat_core::autorate::{Bounds, Mode};
use debloat_core::link::{ModemSpec, Trace};
use debloat_core::packet::Nanos;
use debloat_core::qdisc::fifo::Limit;
use debloat_report::percentile::percentile;
use serde::Serialize;
use std::sync::Arc;

const SEC: Nanos = 1_000_000_000;
/// The modem's FIFO.
pub const MODEM_PACKETS: u32 = 200;
/// Base RTT of the path (20 ms each way).
pub const BASE_RTT_NS: Nanos = 40_000_000;
/// The interface in front of the modem.
const INTERFACE_BPS: u64 = 1_000_000_000;
/// The up direction (ACKs and VoIP up): fixed, not the subject.
const UP_BPS: u64 = 10_000_000;

/// A trace's per-second capacity in numbers.
#[derive(Clone, Debug, Serialize)]
pub struct TraceStats {
    /// Mean, bit/s.
    pub mean_bps: u64,
    /// 10th percentile of the seconds, bit/s.
    pub p10_bps: u64,
    /// Median second, bit/s.
    pub median_bps: u64,
    /// 90th percentile, bit/s.
    pub p90_bps: u64,
    /// Best second, bit/s.
    pub max_bps: u64,
    /// Seconds whose capacity is under 10 % of the median: no shaper holds the delay there.
    pub starved_seconds: Vec<u64>,
}

/// The numbers of a trace's first `secs` seconds.
pub fn trace_stats(trace: &Trace, secs: u64) -> TraceStats {
    let per = trace.per_second_bps(secs);
    let mut sorted = per.clone();
    sorted.sort_unstable();
    let pct = |p: f64| percentile(&sorted, p).unwrap_or(0);
    let median = pct(50.0);
    TraceStats {
        mean_bps: per.iter().sum::<u64>() / secs.max(1),
        p10_bps: pct(10.0),
        median_bps: median,
        p90_bps: pct(90.0),
        max_bps: sorted.last().copied().unwrap_or(0),
        starved_seconds: (0..secs)
            .filter(|&s| per[s as usize] < median / 10)
            .collect(),
    }
}

/// How the down direction is shaped.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub enum Shaper {
    /// The VoIP stream alone, no downloads, no shaper: the delay the trace itself imposes
    /// (its gaps), the floor every shaper stands on.
    Alone,
    /// A 1000-packet FIFO in front of the modem: the queue forms in the modem.
    None,
    /// cake at a fixed rate, bit/s.
    Fixed(u64),
    /// cake `autorate-ingress`, starting at this rate.
    AutorateIngress(u64),
    /// cake driven by a controller.
    Controller(Mode),
}

/// The rows for a trace, named as the table names them: the floor, the six shapers, the oracle.
pub fn rows(s: &TraceStats) -> Vec<(&'static str, Shaper)> {
    vec![
        ("VoIP alone (the floor)", Shaper::Alone),
        ("no shaper", Shaper::None),
        ("cake fixed at p10", Shaper::Fixed(s.p10_bps)),
        ("cake fixed at median", Shaper::Fixed(s.median_bps)),
        (
            "cake autorate-ingress",
            Shaper::AutorateIngress(s.median_bps),
        ),
        ("cake-autorate", Shaper::Controller(Mode::CakeAutorate)),
        ("debloat passive", Shaper::Controller(Mode::Passive)),
        (
            "oracle (reads the trace)",
            Shaper::Controller(Mode::Oracle(950)),
        ),
    ]
}

/// The controllers' rate range for a trace: from a twentieth of the median (at least
/// 300 kbit/s) through the median to the best second.
pub fn bounds(s: &TraceStats) -> Bounds {
    let min = (s.median_bps / 20).max(300_000);
    Bounds {
        min_bps: min,
        base_bps: s.median_bps.max(min),
        max_bps: s.max_bps.max(s.median_bps).max(min),
    }
}

/// One run's outcome.
#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    /// Downloads' goodput, Mbit/s.
    pub goodput_mbps: f64,
    /// What the trace could carry over the run, Mbit/s.
    pub capacity_mbps: f64,
    /// VoIP one-way delay down: p50, p95, p99, ms.
    pub voip_ms: [f64; 3],
    /// VoIP packets lost, %.
    pub voip_loss_pct: f64,
    /// Packets the modem's full FIFO dropped.
    pub modem_dropped: u64,
    /// The controller's decisions (controller rows).
    #[serde(skip)]
    pub rates: Vec<RatePoint>,
    /// Per-second download goodput, Mbit/s.
    pub goodput_per_s: Vec<f64>,
}

impl Outcome {
    /// Goodput as a share of the trace's capacity.
    pub fn share(&self) -> f64 {
        self.goodput_mbps / self.capacity_mbps.max(1e-9)
    }
}

fn config(trace: &Arc<Trace>, shaper: Shaper, stats: &TraceStats, seed: u64, secs: u64) -> Config {
    let spec = match shaper {
        Shaper::None | Shaper::Alone => "pfifo limit 1000".to_string(),
        Shaper::Fixed(r) => format!("cake bandwidth {r}bit"),
        Shaper::AutorateIngress(r) => format!("cake bandwidth {r}bit autorate-ingress"),
        Shaper::Controller(_) => format!("cake bandwidth {}bit", stats.median_bps),
    };
    let autorate_down = match shaper {
        Shaper::Controller(m) => Some(AutorateConfig::new(m, bounds(stats))),
        _ => None,
    };
    let specs = (
        "fq_codel".parse().expect("a built-in spec"),
        spec.parse().expect("a built-in spec"),
    );
    Config {
        length_s: secs as f64,
        delay_s: 0.0,
        step_s: 1.0,
        adaptive: Adaptive {
            modem_down: Some(ModemSpec {
                trace: trace.clone(),
                limit: Limit::Packets(MODEM_PACKETS),
            }),
            autorate_down,
            ..Adaptive::default()
        },
        ..Config::wired(
            Test::Custom,
            (INTERFACE_BPS, UP_BPS),
            BASE_RTT_NS,
            specs,
            seed,
        )
    }
}

/// Run one row for `secs` seconds.
pub fn run(trace: &Arc<Trace>, shaper: Shaper, seed: u64, secs: u64) -> Outcome {
    let stats = trace_stats(trace, secs);
    let cfg = config(trace, shaper, &stats, seed, secs);
    let end = secs * SEC;
    let mut w = build_world(&cfg, end, BASE_RTT_NS, None);
    let downloads = if shaper == Shaper::Alone { 0 } else { 4 };
    for i in 0..downloads {
        w.add_flow(
            &format!("TCP download::{}", i + 1),
            Dir::Down,
            Algorithm::Cubic,
            0,
            false,
            0,
            end,
        );
    }
    let voip = w.add_probe("VoIP", true, 0, 0, 20_000_000);
    w.set_probe_voip(voip);
    w.run(|_| {});
    outcome(&w, trace, secs)
}

fn outcome(w: &World, trace: &Trace, secs: u64) -> Outcome {
    let end = secs * SEC;
    let bytes: u64 = w
        .flows
        .iter()
        .map(|f| f.receiver.delivered * u64::from(crate::packet::MSS))
        .sum();
    // The controller's reflectors leave the probe list at the end: find the stream by kind.
    let Some(p) = w.probes.iter().find(|p| p.voip) else {
        unreachable!("the VoIP stream was added")
    };
    let mut owd: Vec<f64> = p
        .samples
        .iter()
        .zip(&p.owd_up)
        .map(|(&(_, rtt), &up)| rtt.saturating_sub(up) as f64 / 1e6)
        .collect();
    owd.sort_by(f64::total_cmp);
    let pct = |q: f64| percentile(&owd, q).unwrap_or(f64::NAN);
    let mut per_s = Vec::new();
    for s in 0..secs {
        let at = |t: u64| -> u64 {
            w.flows
                .iter()
                .map(|f| w.sampled_at(&f.delivered_series, t, f.receiver.delivered))
                .sum()
        };
        let segs = at((s + 1) * SEC).saturating_sub(at(s * SEC));
        per_s.push((segs * u64::from(crate::packet::MSS)) as f64 * 8.0 / 1e6);
    }
    Outcome {
        goodput_mbps: bytes as f64 * 8.0 / secs as f64 / 1e6,
        capacity_mbps: trace.bits_in(0, end) as f64 / secs as f64 / 1e6,
        voip_ms: [pct(50.0), pct(95.0), pct(99.0)],
        voip_loss_pct: if p.sent == 0 {
            0.0
        } else {
            100.0 * (1.0 - p.samples.len() as f64 / p.sent as f64)
        },
        modem_dropped: w.modem(Dir::Down).map_or(0, |m| m.counters().dropped),
        rates: w
            .autorate_series(Dir::Down)
            .map(<[RatePoint]>::to_vec)
            .unwrap_or_default(),
        goodput_per_s: per_s,
    }
}
