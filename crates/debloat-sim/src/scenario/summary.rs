//! What a run measured, summarised: per flow (goodput, loss, retransmissions, CE marks), per
//! latency probe (percentiles under load and idle), per queue (drops, marks, backlog, sojourn),
//! per Wi-Fi station, and Jain's fairness — the numbers the table, `summary.json` and the
//! reproduction suite read.

use super::*;
use crate::world::World;

/// Per-flow results.
#[derive(Debug, Clone, Serialize)]
pub struct FlowSummary {
    /// Name.
    pub name: String,
    /// "tcp".
    pub kind: &'static str,
    /// "up" or "down".
    pub direction: Dir,
    /// Congestion control (none for UDP).
    pub cc: Option<Algorithm>,
    /// DSCP.
    pub dscp: u8,
    /// Goodput over the load period, Mbit/s.
    pub throughput_mbps: f64,
    /// Packets dropped by the disciplines, as a percentage of data packets sent.
    pub loss_pct: f64,
    /// Retransmissions, timeouts, and window reductions for loss and ECN.
    pub retransmits: u64,
    /// RTO expiries.
    pub timeouts: u64,
    /// Data segments that arrived CE-marked.
    pub ce_marked: u64,
}

/// Latency percentiles, ms.
#[derive(Debug, Clone, Serialize)]
pub struct Latency {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
}

/// The ping's results.
#[derive(Debug, Clone, Serialize)]
pub struct PingSummary {
    /// Name.
    pub name: String,
    /// RTT over the load period.
    pub latency_ms: Option<Latency>,
    /// RTT before the load.
    pub idle_latency_ms: Option<Latency>,
    /// Unanswered requests, %.
    pub loss_pct: f64,
    /// Unanswered requests (the request or its reply lost).
    pub lost: u64,
}

/// Per-queue results.
#[derive(Debug, Clone, Serialize)]
pub struct QueueSummary {
    /// "bottleneck up" or "bottleneck down" (or "hosts up"/"hosts down": `--host-qdisc`).
    pub r#where: String,
    /// The spec.
    pub qdisc: String,
    /// Packets sent.
    pub sent_pkts: u64,
    /// Bytes sent.
    pub sent_bytes: u64,
    /// Packets dropped.
    pub dropped: u64,
    /// Packets lost on the wire after the discipline sent them.
    pub lost_on_wire: u64,
    /// Packets CE-marked.
    pub marked: u64,
    /// Largest backlog, packets.
    pub max_backlog_pkts: u64,
    /// Sojourn percentiles, ms.
    pub sojourn_ms: Latency,
    /// The trace-driven modem behind the transmitter, if the link has one.
    pub modem: Option<ModemSummary>,
}

/// A trace-driven link's modem (its FIFO drained by the capacity trace).
#[derive(Debug, Clone, Serialize)]
pub struct ModemSummary {
    /// The FIFO's limit, e.g. "200p" or "150000b".
    pub limit: String,
    /// Packets that entered the FIFO.
    pub admitted: u64,
    /// Packets the full FIFO dropped (they never entered: offered = admitted + dropped).
    pub dropped: u64,
    /// Packets that left it by the end of the run (admitted = departed + queued).
    pub departed: u64,
    /// Packets still inside at the end of the run.
    pub queued: u64,
    /// Most packets it held at once.
    pub max_packets: u64,
    /// What the trace could carry over the run, Mbit/s on average.
    pub capacity_mbps: f64,
    /// What it could carry in each whole second of the run, Mbit/s.
    pub capacity_per_second_mbps: Vec<f64>,
}

/// One Wi-Fi station's results.
#[derive(Debug, Clone, Serialize)]
pub struct StationSummary {
    /// Station index.
    pub station: usize,
    /// Its address, 198.18.2.(11 + index).
    pub host: String,
    /// Its PHY rate.
    pub rate: String,
    /// PHY rate, Mbit/s.
    pub phy_mbps: f64,
    /// Goodput of its flows (both directions) over their run, Mbit/s.
    pub throughput_mbps: f64,
    /// RTT of pings to it under load, ms.
    pub latency_ms: Option<Latency>,
    /// Its share of the airtime the stations used (AP → station and station → AP).
    pub airtime_share: f64,
    /// Airtime AP → station, ms.
    pub tx_airtime_ms: f64,
    /// Airtime station → AP, ms.
    pub rx_airtime_ms: f64,
    /// Largest estimated airtime queued in the AP's hardware for it, ms (airtime + AQL).
    pub max_aql_pending_ms: f64,
    /// MPDUs given up after the retry limit.
    pub failed_frames: u64,
}

/// A Wi-Fi run's per-station results.
#[derive(Debug, Clone, Serialize)]
pub struct WifiSummary {
    /// The network, in words.
    pub setup: String,
    /// Per station.
    pub stations: Vec<StationSummary>,
    /// Jain's fairness index over the stations' airtime.
    pub airtime_jain: Option<f64>,
    /// Fraction of the load window the channel was busy (contention, PPDUs and ACKs).
    pub channel_busy: f64,
    /// Collisions.
    pub collisions: u64,
}

impl WifiSummary {
    /// The table as the flent file's `DEBLOAT_WIFI` metadata carries it (the report's schema,
    /// `debloat_report::wifi`).
    pub fn to_metadata(&self) -> debloat_report::wifi::WifiInfo {
        use debloat_report::wifi::{Percentiles, Station, WifiInfo};
        WifiInfo {
            setup: self.setup.clone(),
            stations: self
                .stations
                .iter()
                .map(|s| Station {
                    station: s.station,
                    host: s.host.clone(),
                    rate: s.rate.clone(),
                    phy_mbps: s.phy_mbps,
                    throughput_mbps: s.throughput_mbps,
                    latency_ms: s.latency_ms.as_ref().map(|l| Percentiles {
                        p50: l.p50,
                        p90: l.p90,
                        p99: l.p99,
                    }),
                    airtime_share: s.airtime_share,
                    tx_airtime_ms: s.tx_airtime_ms,
                    rx_airtime_ms: s.rx_airtime_ms,
                    max_aql_pending_ms: s.max_aql_pending_ms,
                    failed_frames: s.failed_frames,
                })
                .collect(),
            airtime_jain: self.airtime_jain,
            channel_busy: self.channel_busy,
            collisions: self.collisions,
        }
    }
}

/// A whole run.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// flent's test name.
    pub test: &'static str,
    /// Flows.
    pub flows: Vec<FlowSummary>,
    /// Ping.
    pub pings: Vec<PingSummary>,
    /// Queues.
    pub queues: Vec<QueueSummary>,
    /// Jain's fairness index over the flows' throughputs.
    pub jain_fairness: Option<f64>,
    /// Per-station results of a Wi-Fi run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wifi: Option<WifiSummary>,
    /// Throughput of every flow per step, Mbit/s (series for plots).
    #[serde(skip)]
    pub series: Vec<Vec<f64>>,
}

/// The p-th percentile of sorted nanoseconds, in ms (0 for none).
pub(super) fn pct(sorted: &[u64], p: f64) -> f64 {
    debloat_report::percentile::percentile(sorted, p).map_or(0.0, |v| v as f64 / 1e6)
}

pub(super) fn latency(mut v: Vec<u64>) -> Option<Latency> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    Some(Latency {
        p50: pct(&v, 50.0),
        p90: pct(&v, 90.0),
        p99: pct(&v, 99.0),
    })
}

pub(super) fn hist_latency(h: &hdrhistogram::Histogram<u64>) -> Latency {
    if h.is_empty() {
        return Latency {
            p50: 0.0,
            p90: 0.0,
            p99: 0.0,
        };
    }
    let q = |p: f64| h.value_at_quantile(p) as f64 / 1e6;
    Latency {
        p50: q(0.5),
        p90: q(0.9),
        p99: q(0.99),
    }
}

pub(super) fn wifi_summary(
    w: &World,
    flows: &[FlowSummary],
    load: &dyn Fn(u64) -> bool,
) -> Option<WifiSummary> {
    let wifi = w.wifi()?;
    let n = wifi.stations.len();
    let total: u64 = wifi
        .stations
        .iter()
        .map(|s| s.tx_airtime_us + s.rx_airtime_us)
        .sum();
    let stations = (0..n)
        .map(|i| {
            let st = &wifi.stations[i];
            let rate = wifi.config().stations[i].rate;
            let of = |host: u8| crate::world::station_of_host(host, n) == i;
            let throughput_mbps = w
                .flows
                .iter()
                .zip(flows)
                .filter(|(f, _)| of(f.server))
                .map(|(_, s)| s.throughput_mbps)
                .fold(0.0, |a, b| a + b);
            let rtts: Vec<u64> = w
                .probes
                .iter()
                .filter(|p| of(p.host) && p.flood_len.is_none())
                .flat_map(|p| p.samples.iter().filter(|s| load(s.0)).map(|s| s.1))
                .collect();
            StationSummary {
                station: i,
                host: Config::host_name(i),
                rate: rate.to_string(),
                phy_mbps: rate.bps() as f64 / 1e6,
                throughput_mbps,
                latency_ms: latency(rtts),
                airtime_share: if total == 0 {
                    0.0
                } else {
                    (st.tx_airtime_us + st.rx_airtime_us) as f64 / total as f64
                },
                tx_airtime_ms: st.tx_airtime_us as f64 / 1e3,
                rx_airtime_ms: st.rx_airtime_us as f64 / 1e3,
                max_aql_pending_ms: f64::from(st.max_aql_pending_us) / 1e3,
                failed_frames: st.failed,
            }
        })
        .collect();
    Some(WifiSummary {
        setup: wifi.config().describe(),
        stations,
        airtime_jain: wifi.airtime_jain(),
        channel_busy: busy_under_load(w, load),
        collisions: wifi.collisions,
    })
}

/// The fraction of the load window the Wi-Fi channel was busy, from the per-sample busy times
/// (the idle seconds before and after the load do not dilute it).
pub(super) fn busy_under_load(w: &World, load: &dyn Fn(u64) -> bool) -> f64 {
    let t = &w.sample_times;
    let (Some(a), Some(b)) = (
        t.iter().position(|&x| load(x)),
        t.iter().rposition(|&x| load(x)),
    ) else {
        return 0.0;
    };
    let busy = |k: usize| w.air_busy_series.get(k).copied().unwrap_or(0);
    if b <= a {
        return 0.0;
    }
    (busy(b).saturating_sub(busy(a)) as f64 / (t[b] - t[a]) as f64).min(1.0)
}

/// Goodput of flow `i` between `t0` and `t1` (ns), Mbit/s, from the per-step samples.
pub fn throughput_between(w: &World, i: usize, t0: u64, t1: u64) -> f64 {
    let f = &w.flows[i];
    let at = |t: u64| w.sampled_at(&f.delivered_series, t, f.receiver.delivered);
    let secs = t1.saturating_sub(t0) as f64 / 1e9;
    if secs == 0.0 {
        return 0.0;
    }
    at(t1).saturating_sub(at(t0)) as f64 * f64::from(crate::packet::MSS) * 8.0 / secs / 1e6
}

pub(crate) fn summarise(cfg: &Config, w: &World, delay: u64, length: u64) -> Summary {
    // "Under load": while any flow runs (for the probe-only test, the whole run).
    let load = |t: u64| {
        if w.flows.is_empty() {
            t >= delay && t < delay + length
        } else {
            w.flows.iter().any(|f| t >= f.start && t < f.stop)
        }
    };
    let flows: Vec<FlowSummary> = w.flows.iter().map(|f| flow_summary(w, f)).collect();
    let series = w
        .flows
        .iter()
        .map(|f| {
            f.delivered_series
                .windows(2)
                .map(|x| {
                    (x[1] - x[0]) as f64 * f64::from(crate::packet::MSS) * 8.0 / cfg.step_s / 1e6
                })
                .collect()
        })
        .collect();
    let pings = w
        .probes
        .iter()
        .filter(|p| p.flood_len.is_none())
        .map(|p| ping_summary(p, &load, delay))
        .collect();
    let mut queues: Vec<QueueSummary> = [Dir::Up, Dir::Down]
        .iter()
        .map(|&d| queue_summary(cfg, w, d))
        .collect();
    queues.extend(host_queues(cfg, w));
    let tp: Vec<f64> = flows.iter().map(|f| f.throughput_mbps).collect();
    let jain_fairness = (!tp.is_empty()).then(|| {
        let s: f64 = tp.iter().sum();
        let sq: f64 = tp.iter().map(|x| x * x).sum();
        if sq == 0.0 {
            1.0
        } else {
            s * s / (tp.len() as f64 * sq)
        }
    });
    let wifi = wifi_summary(w, &flows, &load);
    Summary {
        test: cfg.test.name(),
        flows,
        pings,
        queues,
        jain_fairness,
        wifi,
        series,
    }
}

/// A TCP flow's goodput over its own run, loss, retransmissions and marks.
fn flow_summary(w: &World, f: &crate::world::Flow) -> FlowSummary {
    let at = |t: u64| w.sampled_at(&f.delivered_series, t, f.receiver.delivered);
    let segs = at(f.stop).saturating_sub(at(f.start));
    let secs = f.stop.saturating_sub(f.start).max(1) as f64 / 1e9;
    let sent = f.sender.outstanding() + f.receiver.delivered;
    FlowSummary {
        name: f.name.clone(),
        kind: "tcp",
        direction: f.dir,
        cc: Some(f.cc),
        dscp: f.dscp,
        throughput_mbps: segs as f64 * f64::from(crate::packet::MSS) * 8.0 / secs / 1e6,
        loss_pct: if sent == 0 {
            0.0
        } else {
            f.drops as f64 * 100.0 / (sent + f.sender.retransmits) as f64
        },
        retransmits: f.sender.retransmits,
        timeouts: f.sender.timeouts,
        ce_marked: f.receiver.ce_marked,
    }
}

/// A latency probe's RTTs under load and idle (before DELAY), and its loss.
fn ping_summary(p: &crate::world::Probe, load: &dyn Fn(u64) -> bool, delay: u64) -> PingSummary {
    let rtts = |f: &dyn Fn(u64) -> bool| {
        p.samples
            .iter()
            .filter(|s| f(s.0))
            .map(|s| s.1)
            .collect::<Vec<_>>()
    };
    let answered = p.samples.len() as f64;
    PingSummary {
        name: p.name.clone(),
        latency_ms: latency(rtts(load)),
        idle_latency_ms: latency(rtts(&|t| t < delay)),
        loss_pct: if p.sent == 0 {
            0.0
        } else {
            (1.0 - answered / p.sent as f64).max(0.0) * 100.0
        },
        lost: p.sent.saturating_sub(p.samples.len() as u64),
    }
}

/// One direction's queue: where it is, its discipline, what it sent, dropped and held.
fn queue_summary(cfg: &Config, w: &World, d: Dir) -> QueueSummary {
    let (r#where, qdisc) = match (&cfg.wifi, d) {
        (None, Dir::Up) => ("bottleneck up".to_string(), cfg.qdisc_up.to_string()),
        (None, Dir::Down) => ("bottleneck down".into(), cfg.qdisc_down.to_string()),
        (Some(wc), Dir::Up) => (
            "AP → stations".into(),
            match wc.queueing {
                crate::wifi::ApQueueing::Airtime => "mac80211 fq_codel TXQs".into(),
                _ => wc.ap_qdisc_spec().to_string(),
            },
        ),
        (Some(wc), Dir::Down) => ("stations → AP".into(), wc.sta_qdisc.to_string()),
    };
    let st = w.link_stats(d);
    QueueSummary {
        r#where,
        qdisc,
        sent_pkts: st.sent_pkts,
        sent_bytes: st.sent_bytes,
        dropped: st.dropped,
        lost_on_wire: st.lost_on_wire,
        marked: st.marked,
        max_backlog_pkts: st.max_backlog_pkts,
        sojourn_ms: hist_latency(&st.sojourns),
        modem: w.modem(d).map(|m| modem_summary(m, w.now())),
    }
}

/// The hosts' own qdisc (`--host-qdisc`), a row per side that sends: "hosts up" are the
/// clients', "hosts down" the servers'.
fn host_queues(cfg: &Config, w: &World) -> Vec<QueueSummary> {
    let Some(spec) = &cfg.host_qdisc else {
        return Vec::new();
    };
    [(Dir::Up, "hosts up"), (Dir::Down, "hosts down")]
        .into_iter()
        .filter_map(|(d, name)| {
            let st = w.host_stats(d)?;
            Some(QueueSummary {
                r#where: name.into(),
                qdisc: spec.to_string(),
                sent_pkts: st.sent_pkts,
                sent_bytes: st.sent_bytes,
                dropped: st.dropped,
                lost_on_wire: 0,
                marked: st.marked,
                max_backlog_pkts: st.max_backlog_pkts,
                sojourn_ms: hist_latency(&st.sojourns),
                modem: None,
            })
        })
        .collect()
}

fn modem_summary(m: &debloat_core::link::Modem, end: u64) -> ModemSummary {
    use debloat_core::qdisc::fifo::Limit;
    let c = m.counters();
    ModemSummary {
        limit: match m.limit() {
            Limit::Packets(n) => format!("{n}p"),
            Limit::Bytes(b) => format!("{b}b"),
        },
        admitted: c.admitted,
        dropped: c.dropped,
        departed: m.departed(end),
        queued: m.occupancy(end).0 as u64,
        max_packets: c.max_packets,
        capacity_mbps: m.trace().bits_in(0, end) as f64 / (end.max(1) as f64 / 1e9) / 1e6,
        capacity_per_second_mbps: m
            .trace()
            .per_second_bps(end / 1_000_000_000)
            .into_iter()
            .map(|b| b as f64 / 1e6)
            .collect(),
    }
}
