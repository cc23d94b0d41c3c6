//! flent's tests under flent's names and defaults (docs/measurement.md §2): the load runs for
//! `length` seconds after a `delay` of 5 s, the ping runs from the start to `length + 2·delay`,
//! and everything is sampled every `step` (0.2 s). Implemented: `ping`, `tcp_1up`, `tcp_nup`,
//! `tcp_ndown`, `tcp_bidirectional`. The others (rrul, rrul_be, tcp_2up_square,
//! tcp_4up_squarewave, voip, rtt_fair_*) are not yet.

use crate::tcp::cc::Algorithm;
use crate::world::{Dir, LinkConfig, World};
use debloat_core::{FlowHasher, QdiscSpec};
use serde::Serialize;

/// A flent test name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Test {
    /// ICMP ping alone.
    Ping,
    /// One TCP upload.
    Tcp1Up,
    /// N TCP uploads.
    TcpNUp,
    /// N TCP downloads.
    TcpNDown,
    /// One upload and one download.
    TcpBidirectional,
    /// Realtime Response Under Load: 4 uploads and 4 downloads marked BE, BK, CS5, EF, with UDP
    /// probes marked EF, BK, BE and an ICMP ping.
    Rrul,
    /// rrul with everything best effort.
    RrulBe,
    /// The CUBIC-vs-BBR staircase: BBR 1 at 0, CUBIC 2 at DELAY, BBR 4 at 3·DELAY, CUBIC 3 at
    /// 5·DELAY, each for LENGTH (flent's definition has no latency probe; debloat pings anyway
    /// for its own summary, and leaves the ping out of the flent file).
    Tcp4UpSquarewave,
    /// Four remote hosts, one upload and one ping each (labels BE1–BE4, ICMP1–ICMP4).
    RttFairUp,
    /// N remote hosts, each with its own base RTT: one upload and one ping each.
    RttFairVarUp,
    /// N remote hosts, each with its own base RTT: one download and one ping each.
    RttFairVarDown,
    /// An isochronous VoIP-like flow alone (irtt, 172 B every 20 ms) for LENGTH.
    Voip,
    /// The square wave: TCP cubic for LENGTH from 0, and a competitor on for DELAY, off for
    /// DELAY, three times: cubic at DELAY, reno at 3·DELAY, westwood at 5·DELAY (no latency
    /// probe in flent's definition; debloat pings for its own summary only).
    Tcp2UpSquare,
    /// A scenario from a TOML file (not one of flent's tests: no flent data file).
    Custom,
}

impl std::str::FromStr for Test {
    type Err = String;
    fn from_str(s: &str) -> Result<Test, String> {
        Ok(match s {
            "ping" => Test::Ping,
            "tcp_1up" => Test::Tcp1Up,
            "tcp_nup" => Test::TcpNUp,
            "tcp_ndown" => Test::TcpNDown,
            "tcp_bidirectional" => Test::TcpBidirectional,
            "rrul" => Test::Rrul,
            "rrul_be" => Test::RrulBe,
            "tcp_4up_squarewave" | "tcp_square_wave" => Test::Tcp4UpSquarewave,
            "rtt_fair_up" => Test::RttFairUp,
            "rtt_fair_var_up" => Test::RttFairVarUp,
            "rtt_fair_var_down" => Test::RttFairVarDown,
            "voip" => Test::Voip,
            "tcp_2up_square" => Test::Tcp2UpSquare,
            "tcp_1down" => {
                return Err(format!("`{s}` is not implemented in the simulator yet; available: ping, tcp_1up, tcp_nup, tcp_ndown, tcp_bidirectional, rrul, rrul_be, tcp_4up_squarewave, rtt_fair_up, rtt_fair_var_up, rtt_fair_var_down, voip, tcp_2up_square"))
            }
            other => return Err(format!("unknown test `{other}`; available: ping, tcp_1up, tcp_nup, tcp_ndown, tcp_bidirectional, rrul, rrul_be, tcp_4up_squarewave, rtt_fair_up, rtt_fair_var_up, rtt_fair_var_down, voip, tcp_2up_square")),
        })
    }
}

impl Test {
    /// flent's name.
    pub fn name(self) -> &'static str {
        match self {
            Test::Ping => "ping",
            Test::Tcp1Up => "tcp_1up",
            Test::TcpNUp => "tcp_nup",
            Test::TcpNDown => "tcp_ndown",
            Test::TcpBidirectional => "tcp_bidirectional",
            Test::Rrul => "rrul",
            Test::RrulBe => "rrul_be",
            Test::Tcp4UpSquarewave => "tcp_4up_squarewave",
            Test::RttFairUp => "rtt_fair_up",
            Test::RttFairVarUp => "rtt_fair_var_up",
            Test::RttFairVarDown => "rtt_fair_var_down",
            Test::Voip => "voip",
            Test::Custom => "custom",
            Test::Tcp2UpSquare => "tcp_2up_square",
        }
    }

    /// flent's TOTAL_LENGTH for this test, s.
    pub fn total_length(self, length: f64, delay: f64) -> f64 {
        match self {
            Test::Ping | Test::Voip | Test::Custom => length,
            Test::Tcp4UpSquarewave => length + 6.0 * delay,
            Test::Tcp2UpSquare => length.max(6.0 * delay),
            _ => length + 2.0 * delay,
        }
    }

    /// Whether flent's definition of this test has latency series.
    pub fn has_probes(self) -> bool {
        !matches!(self, Test::Tcp4UpSquarewave | Test::Tcp2UpSquare)
    }
}

/// Everything a run needs.
#[derive(Clone, Debug)]
pub struct Config {
    /// Which test.
    pub test: Test,
    /// Down and up rates, bit/s.
    pub down_bps: u64,
    /// See `down_bps`.
    pub up_bps: u64,
    /// Base round-trip time, ns (split evenly between directions).
    pub rtt_ns: u64,
    /// Discipline in front of the up link.
    pub qdisc_up: QdiscSpec,
    /// Discipline in front of the down link.
    pub qdisc_down: QdiscSpec,
    /// Load duration, s.
    pub length_s: f64,
    /// Idle time before and after the load, s (flent's default 5).
    pub delay_s: f64,
    /// Sampling step, s (flent's default 0.2).
    pub step_s: f64,
    /// Streams for tcp_nup / tcp_ndown (flent's default 4).
    pub streams: u32,
    /// Congestion control of every flow.
    pub cc: Algorithm,
    /// ECN on the flows.
    pub ecn: bool,
    /// Seed for flow-hash keys and discipline randomness.
    pub seed: u64,
    /// The device model on both bottleneck directions.
    pub device: crate::world::Device,
    /// Framing, loss and jitter of both bottleneck wires (the seed is set per direction).
    pub wire: crate::world::Wire,
    /// Every TCP flow's window limit, bytes of payload: the receive window the peer advertises
    /// or the send buffer, whichever is smaller (None: only cwnd limits). Linux 6.18's defaults
    /// (tcp_rmem max 32 MiB, tcp_wmem max 4 MiB) limit only long fat paths; Linux 4.x's
    /// receive side (tcp_rmem max 6 MiB, half of it advertised) capped a flow at 3 MiB.
    pub tcp_window: Option<u64>,
    /// Base RTT of each remote host for the rtt_fair tests, ns (empty: every host at `rtt_ns`;
    /// rtt_fair_up always has 4 hosts, the var tests one per entry, or when empty one host, or
    /// over Wi-Fi one per station).
    pub host_rtts_ns: Vec<u64>,
    /// A Wi-Fi AP and stations instead of the two wired links (the rates, qdiscs and device
    /// above are then unused; `rtt_ns` is the wired part between the AP and flent's host).
    pub wifi: Option<crate::wifi::WifiConfig>,
}

impl Config {
    /// The remote hosts' base RTTs for this test.
    pub fn hosts(&self) -> Vec<u64> {
        match self.test {
            Test::RttFairUp => (0..4)
                .map(|i| self.host_rtts_ns.get(i).copied().unwrap_or(self.rtt_ns))
                .collect(),
            Test::RttFairVarUp | Test::RttFairVarDown if self.host_rtts_ns.is_empty() => {
                let n = self.wifi.as_ref().map_or(1, |w| w.stations.len().max(1));
                vec![self.rtt_ns; n]
            }
            Test::RttFairVarUp | Test::RttFairVarDown => self.host_rtts_ns.clone(),
            _ => Vec::new(),
        }
    }

    /// The host string of remote host `i` (198.18.2.11, .12, …).
    pub fn host_name(i: usize) -> String {
        format!("198.18.2.{}", 11 + i)
    }
}

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
}

/// Per-queue results.
#[derive(Debug, Clone, Serialize)]
pub struct QueueSummary {
    /// "bottleneck up" or "bottleneck down".
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
fn pct(sorted: &[u64], p: f64) -> f64 {
    debloat_report::percentile::percentile(sorted, p).map_or(0.0, |v| v as f64 / 1e6)
}

fn latency(mut v: Vec<u64>) -> Option<Latency> {
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

/// A finished run: its summary and the world it ran in (for data files).
pub struct Run {
    /// The summary.
    pub summary: Summary,
    /// The simulated network at the end.
    pub world: World,
}

fn hist_latency(h: &hdrhistogram::Histogram<u64>) -> Latency {
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

/// Run a test; `progress` gets the fraction done now and then.
pub fn run(cfg: &Config, progress: impl FnMut(f64)) -> Summary {
    simulate(cfg, progress).summary
}

/// Run a test and keep the world.
pub fn simulate(cfg: &Config, progress: impl FnMut(f64)) -> Run {
    simulate_with_tap(cfg, None, progress)
}

/// Run a test, calling `tap` for every packet as a bottleneck starts to send it.
pub fn simulate_with_tap(
    cfg: &Config,
    tap: Option<crate::world::Tap>,
    progress: impl FnMut(f64),
) -> Run {
    let s = |x: f64| (x * 1e9) as u64;
    // flent's `ping` test has no load and no idle margins: it runs for LENGTH.
    let delay_s = if cfg.test == Test::Ping {
        0.0
    } else {
        cfg.delay_s
    };
    let (delay, length) = (s(delay_s), s(cfg.length_s));
    let end = s(cfg.test.total_length(cfg.length_s, delay_s));
    let hasher = FlowHasher::new([cfg.seed, cfg.seed ^ 0x9e37_79b9_7f4a_7c15]);
    // With several remote hosts the bottleneck carries the shortest RTT; the others add theirs.
    let hosts = cfg.hosts();
    let base_rtt = hosts.iter().copied().min().unwrap_or(cfg.rtt_ns);
    let link = |spec: &QdiscSpec, rate, salt: u64| LinkConfig {
        rate_bps: rate,
        delay_ns: base_rtt / 2,
        qdisc: spec.build(hasher, cfg.seed.wrapping_add(salt)),
        device: cfg.device,
        wire: crate::world::Wire {
            seed: cfg.seed.wrapping_mul(31).wrapping_add(salt),
            ..cfg.wire
        },
    };
    let mut w = World::new(
        link(&cfg.qdisc_up, cfg.up_bps, 1),
        link(&cfg.qdisc_down, cfg.down_bps, 2),
        end,
        s(cfg.step_s).max(1),
    );
    if let Some(t) = tap {
        w.set_tap(t);
    }
    w.set_tcp_window(cfg.tcp_window);
    if let Some(wc) = &cfg.wifi {
        w.set_wifi(
            crate::wifi::Wifi::new(wc.clone(), hasher, cfg.seed),
            base_rtt / 2,
        );
    }
    let probe_interval = 200_000_000;
    if cfg.test == Test::Voip {
        let k = w.add_probe("VoIP", true, 0, 0, 20_000_000);
        w.set_probe_voip(k);
    } else if hosts.is_empty() {
        w.add_probe("Ping (ms) ICMP", false, 0, 0, probe_interval);
    }
    let (start, stop) = (delay, delay + length);
    let mut add =
        |name: String, dir, dscp| w.add_flow(&name, dir, cfg.cc, dscp, cfg.ecn, start, stop);
    match cfg.test {
        Test::Ping => {}
        Test::Tcp1Up => {
            add("TCP upload".into(), Dir::Up, 0);
        }
        Test::TcpNUp => {
            for i in 1..=cfg.streams {
                add(format!("TCP upload::{i}"), Dir::Up, 0);
            }
        }
        Test::TcpNDown => {
            for i in 1..=cfg.streams {
                add(format!("TCP download::{i}"), Dir::Down, 0);
            }
        }
        Test::TcpBidirectional => {
            add("TCP download".into(), Dir::Down, 0);
            add("TCP upload".into(), Dir::Up, 0);
        }
        Test::Rrul => {
            // Markings CS0, CS1, CS5, EF (DSCP 0, 8, 40, 46) in both directions.
            for (label, dscp) in [("BE", 0), ("BK", 8), ("CS5", 40), ("EF", 46)] {
                add(format!("TCP upload {label}"), Dir::Up, dscp);
                add(format!("TCP download {label}"), Dir::Down, dscp);
            }
        }
        Test::RrulBe => {
            for label in ["BE", "BE2", "BE3", "BE4"] {
                add(format!("TCP upload {label}"), Dir::Up, 0);
                add(format!("TCP download {label}"), Dir::Down, 0);
            }
        }
        Test::Tcp4UpSquarewave
        | Test::RttFairUp
        | Test::RttFairVarUp
        | Test::RttFairVarDown
        | Test::Voip
        | Test::Tcp2UpSquare
        | Test::Custom => {}
    }
    for (h, &rtt) in hosts.iter().enumerate() {
        let name = Config::host_name(h);
        let extra = rtt.saturating_sub(base_rtt) / 2;
        let (dir, what) = if cfg.test == Test::RttFairVarDown {
            (Dir::Down, "download")
        } else {
            (Dir::Up, "upload")
        };
        let (flow_label, ping_label) = if cfg.test == Test::RttFairUp {
            (format!("BE{}", h + 1), format!("ICMP{}", h + 1))
        } else {
            ("BE".into(), "ICMP".into())
        };
        let i = w.add_flow(
            &format!("TCP {what} {flow_label} {name}"),
            dir,
            cfg.cc,
            0,
            cfg.ecn,
            start,
            stop,
        );
        w.set_flow_host(i, 11 + h as u8, extra);
        let k = w.add_probe(
            &format!("Ping (ms) {ping_label} {name}"),
            false,
            0,
            0,
            probe_interval,
        );
        w.set_probe_host(k, 11 + h as u8, extra);
    }
    if cfg.test == Test::Tcp2UpSquare {
        let d = delay;
        w.add_flow(
            "TCP cubic",
            Dir::Up,
            Algorithm::Cubic,
            0,
            cfg.ecn,
            0,
            length,
        );
        for (name, cc, at) in [
            ("TCP cubic 2", Algorithm::Cubic, d),
            ("TCP reno", Algorithm::Reno, 3 * d),
            ("TCP westwood", Algorithm::Westwood, 5 * d),
        ] {
            w.add_flow(name, Dir::Up, cc, 0, cfg.ecn, at, at + d);
        }
    }
    if cfg.test == Test::Tcp4UpSquarewave {
        let d = delay;
        for (name, cc, at) in [
            ("TCP bbr 1", Algorithm::Bbr, 0),
            ("TCP cubic 2", Algorithm::Cubic, d),
            ("TCP bbr 4", Algorithm::Bbr, 3 * d),
            ("TCP cubic 3", Algorithm::Cubic, 5 * d),
        ] {
            w.add_flow(name, Dir::Up, cc, 0, cfg.ecn, at, at + length);
        }
    }
    match cfg.test {
        Test::Rrul => {
            for (label, dscp) in [("EF", 46), ("BK", 8), ("BE", 0)] {
                w.add_probe(
                    &format!("Ping (ms) UDP {label}"),
                    true,
                    dscp,
                    0,
                    probe_interval,
                );
            }
        }
        Test::RrulBe => {
            for label in ["BE1", "BE2", "BE3"] {
                w.add_probe(
                    &format!("Ping (ms) UDP {label}"),
                    true,
                    0,
                    0,
                    probe_interval,
                );
            }
        }
        Test::Ping => {
            w.add_probe("Ping (ms) UDP", true, 0, 0, probe_interval);
        }
        _ => {}
    }
    if let Some(wc) = &cfg.wifi {
        place_on_stations(&mut w, wc, !hosts.is_empty());
    }
    w.run(progress);
    let summary = summarise(cfg, &w, delay, length);
    Run { summary, world: w }
}

/// Put flows and probes on Wi-Fi stations: flows by `flow_stations` (default round robin),
/// probes on `ping_station`, sending their requests from it with `station_pings`. The rtt_fair
/// tests keep their hosts (host `h` is station `h % n`).
fn place_on_stations(w: &mut World, wc: &crate::wifi::WifiConfig, has_hosts: bool) {
    for k in 0..w.probes.len() {
        w.set_probe_from_remote(k, wc.station_pings);
    }
    if has_hosts {
        return;
    }
    let n = wc.stations.len().max(1);
    for i in 0..w.flows.len() {
        let sta = wc.flow_stations.get(i).copied().unwrap_or(i % n) % n;
        w.set_flow_host(i, 11 + sta as u8, 0);
    }
    for k in 0..w.probes.len() {
        w.set_probe_host(k, 11 + (wc.ping_station % n) as u8, 0);
    }
}

fn wifi_summary(
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
fn busy_under_load(w: &World, load: &dyn Fn(u64) -> bool) -> f64 {
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
    let at = |t: u64| {
        w.sample_times
            .iter()
            .position(|&x| x >= t)
            .and_then(|k| f.delivered_series.get(k))
            .copied()
            .unwrap_or(f.receiver.delivered)
    };
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
    let times = &w.sample_times;
    let flows: Vec<FlowSummary> = w
        .flows
        .iter()
        .map(|f| {
            let at = |t: u64| {
                times
                    .iter()
                    .position(|&x| x >= t)
                    .and_then(|i| f.delivered_series.get(i))
                    .copied()
                    .unwrap_or(f.receiver.delivered)
            };
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
        })
        .collect();
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
        .map(|p| {
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
                latency_ms: latency(rtts(&|t| load(t))),
                idle_latency_ms: latency(rtts(&|t| t < delay)),
                loss_pct: if p.sent == 0 {
                    0.0
                } else {
                    (1.0 - answered / p.sent as f64).max(0.0) * 100.0
                },
            }
        })
        .collect();
    let names = |d: Dir| match (&cfg.wifi, d) {
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
    let queues = [Dir::Up, Dir::Down]
        .iter()
        .map(|&d| {
            let st = w.link_stats(d);
            let (r#where, qdisc) = names(d);
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
            }
        })
        .collect();
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
