//! Scenarios from TOML: a topology (rates, RTT, disciplines, device and wire per direction) and
//! any mix of flows — TCP transfers (cubic, reno, bbr, prague), ICMP or UDP pings (`l4s = true`:
//! marked ECT(1)), VoIP-like streams and
//! constant-rate UDP floods — with their own start and stop times, DSCP, ECN and host RTT.
//!
//! A TCP flow may cap its window (`window = "3mb"`: the receive window or send buffer a real
//! socket would have); by default only cwnd limits it.
//!
//! A TCP flow may name its `client` host: flows with the same name share one client address
//! (198.18.1.100 and up), so host isolation (cake's `dual-srchost`) can tell hosts apart.
//!
//! ```toml
//! name = "cable upload, voice and a flood"
//! length = 30            # seconds simulated
//! seed = 1
//!
//! [link]
//! down = "20Mbit"
//! up = "2Mbit"
//! rtt = "20ms"
//! qdisc_up = "cake bandwidth 1900kbit diffserv3"
//! qdisc_down = "fq_codel"
//! host_qdisc = "fq"           # optional: the hosts' own qdisc (TCP paces through fq)
//!
//! [[flow]]
//! name = "backup"
//! kind = "tcp"           # tcp | ping | udp-ping | voip | udp-flood
//! direction = "up"
//! cc = "cubic"
//! start = 2
//! stop = 28
//!
//! [[flow]]
//! name = "call"
//! kind = "voip"
//! dscp = 46
//! ```
//!
//! A link direction may follow a capacity trace: `down = "trace:data/link-traces/….mahi"`, with
//! `trace_buffer` (the modem's FIFO, default 1000 packets) and a controller on its cake:
//! `autorate_down = "min=1mbit,base=5mbit,max=30mbit"`, `autorate_mode = "passive"` (or
//! `"cake-autorate"`). The caller reads the trace file ([`run_with`]).
//!
//! `classify = "rules.conf"` (top level) marks DSCP by qosify's files before the bottleneck, both
//! directions, as `gateway --classify` does; the caller reads the files ([`Files`]).
//!
//! Unknown keys are errors (a typo should not silently do nothing).

use crate::packet::MSS;
use crate::scenario::Adaptive;
use crate::scenario::{summarise, Config, FlowSummary, Run, Test};
use crate::tcp::cc::Algorithm;
use crate::world::AutorateConfig;
use crate::world::{DeviceConfig, Dir, World};
use debloat_core::autorate::{Bounds, Mode};
use debloat_core::link::{ModemSpec, Trace};
use debloat_core::units::{parse_rate, parse_size, parse_time};
use debloat_core::QdiscSpec;
use serde::Deserialize;
use std::sync::Arc;

/// What is wrong with a scenario file: which key, and why.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// Not TOML, or a key the file format does not have (toml's message names the line).
    #[error("scenario file: {0}")]
    Toml(#[from] toml::de::Error),
    /// A key's value that does not parse, or is out of range.
    #[error("{key}: {why}")]
    Value {
        /// The key (`link.rtt`, `interval` …).
        key: String,
        /// What is wrong and what would do.
        why: String,
    },
    /// A discipline's words that do not parse.
    #[error("{key} \"{words}\": {source}")]
    Spec {
        /// `link.qdisc_up` or `link.qdisc_down`.
        key: String,
        /// The words.
        words: String,
        /// What the spec parser said.
        #[source]
        source: Box<debloat_core::SpecError>,
    },
    /// A file the scenario names that the caller could not read (its loader's message).
    #[error("{key}: {why}")]
    File {
        /// `link.down`, `classify` …
        key: String,
        /// The loader's message.
        why: String,
    },
    /// Something wrong in one flow's section.
    #[error("flow {index} (\"{name}\"): {source}")]
    Flow {
        /// 1-based, in the file's order.
        index: usize,
        /// The flow's name.
        name: String,
        /// What is wrong with it.
        #[source]
        source: Box<ScenarioError>,
    },
}

impl ScenarioError {
    fn value(key: &str, why: impl std::fmt::Display) -> ScenarioError {
        ScenarioError::Value {
            key: key.to_string(),
            why: why.to_string(),
        }
    }
}

type Result<T, E = ScenarioError> = std::result::Result<T, E>;

/// A scenario file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    /// Title.
    #[serde(default)]
    pub name: String,
    /// Simulated seconds.
    pub length: f64,
    /// Sampling step, s (default 0.2).
    pub step: Option<f64>,
    /// Seed (default 1).
    pub seed: Option<u64>,
    /// qosify's files marking DSCP before the bottleneck (`--classify` of the gateway).
    pub classify: Option<String>,
    /// The bottleneck.
    pub link: LinkSection,
    /// The flows.
    #[serde(default, rename = "flow")]
    pub flows: Vec<FlowSection>,
}

/// `[link]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSection {
    down: String,
    up: String,
    rtt: String,
    #[serde(default)]
    qdisc: Option<String>,
    qdisc_up: Option<String>,
    qdisc_down: Option<String>,
    /// The hosts' own qdisc (`--host-qdisc`), e.g. "fq".
    host_qdisc: Option<String>,
    framing: Option<String>,
    loss: Option<f64>,
    jitter: Option<String>,
    impair: Option<String>,
    #[serde(default)]
    ring: usize,
    #[serde(default)]
    bql: bool,
    irq_coalesce: Option<String>,
    /// A `trace:` side's modem FIFO: packets, or a size such as "150kb" (default 1000).
    trace_buffer: Option<String>,
    /// Control the down cake's rate: "min=…,base=…,max=…".
    autorate_down: Option<String>,
    /// Control the up cake's rate.
    autorate_up: Option<String>,
    /// "passive" (default) or "cake-autorate".
    autorate_mode: Option<String>,
}

/// `[[flow]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowSection {
    name: String,
    kind: String,
    direction: Option<String>,
    cc: Option<String>,
    #[serde(default)]
    dscp: u8,
    #[serde(default)]
    ecn: bool,
    /// A ping or udp-ping marked ECT(1): an L4S probe (as `l4s_mixed`'s UDP ping).
    #[serde(default)]
    l4s: bool,
    #[serde(default)]
    start: f64,
    stop: Option<f64>,
    rtt: Option<String>,
    rate: Option<String>,
    size: Option<u32>,
    interval: Option<String>,
    /// Client host (a name or number); flows with the same client share its address.
    client: Option<String>,
    /// TCP: the most payload in flight, as the receive window or send buffer would allow
    /// (tc size units, e.g. "3mb"); default: only cwnd limits.
    window: Option<String>,
}

fn ns(s: f64) -> u64 {
    (s * 1e9).round() as u64
}

fn time(v: &str, what: &str) -> Result<u64> {
    parse_time(v).map_err(|e| ScenarioError::value(what, e))
}

/// Reads a capacity trace a scenario names (`down = "trace:FILE"`): the caller's file access.
pub type TraceLoader<'a> = &'a dyn Fn(&str) -> Result<Arc<Trace>, String>;

/// Reads the qosify files a scenario names (`classify = "FILE"`).
pub type ClassifyLoader<'a> =
    &'a dyn Fn(&str) -> Result<debloat_core::classify::qosify::Config, String>;

/// The caller's file access for what a scenario names (the simulator opens no files).
pub struct Files<'a> {
    /// Capacity traces.
    pub trace: TraceLoader<'a>,
    /// qosify's files.
    pub classify: ClassifyLoader<'a>,
}

/// Parse and run a scenario; errors say which key is wrong and how. A scenario naming a trace
/// or qosify's files needs [`run_with`] and loaders.
pub fn run(text: &str, progress: impl FnMut(f64)) -> Result<(Config, Run)> {
    let none = |f: &str| -> Result<Arc<Trace>, String> {
        Err(format!("trace:{f}: this caller reads no trace files"))
    };
    let no_rules = |f: &str| -> Result<debloat_core::classify::qosify::Config, String> {
        Err(format!("classify = \"{f}\": this caller reads no files"))
    };
    let files = Files {
        trace: &none,
        classify: &no_rules,
    };
    run_with(text, &files, progress)
}

/// [`run`], with `files` reading the traces and qosify files the scenario names.
pub fn run_with(text: &str, files: &Files<'_>, progress: impl FnMut(f64)) -> Result<(Config, Run)> {
    let f: ScenarioFile = toml::from_str(text)?;
    let mut cfg = config(&f, files.trace)?;
    if let Some(c) = &f.classify {
        cfg.classify = Some((files.classify)(c).map_err(|why| ScenarioError::File {
            key: "classify".into(),
            why,
        })?);
    }
    let (rtt, step) = (cfg.rtt_ns, cfg.step_s);
    let end = ns(f.length);
    let mut w = crate::scenario::build_world(&cfg, end, rtt, None);
    let mut clients = Vec::new();
    for (i, fl) in f.flows.iter().enumerate() {
        add(&mut w, fl, i, rtt, end, &mut clients).map_err(|e| ScenarioError::Flow {
            index: i + 1,
            name: fl.name.clone(),
            source: Box::new(e),
        })?;
    }
    w.run(progress);
    let mut summary = summarise(&cfg, &w, 0, end);
    summary.flows.extend(flood_summaries(&w, end, step));
    Ok((cfg, Run { summary, world: w }))
}

/// The run's configuration from the file's top level and `[link]`.
fn config(f: &ScenarioFile, load: TraceLoader<'_>) -> Result<Config> {
    if f.length.is_nan() || f.length <= 0.0 {
        return Err(ScenarioError::value(
            "length",
            "must be a positive number of seconds",
        ));
    }
    let step = f.step.unwrap_or(0.2);
    let seed = f.seed.unwrap_or(1);
    let l = &f.link;
    let spec = |v: Option<&String>, what: &str| -> Result<QdiscSpec> {
        let v = v
            .or(l.qdisc.as_ref())
            .map(String::as_str)
            .unwrap_or("pfifo limit 1000");
        v.parse().map_err(|e| ScenarioError::Spec {
            key: format!("link.{what}"),
            words: v.to_string(),
            source: Box::new(e),
        })
    };
    let rtt = time(&l.rtt, "link.rtt")?;
    let (wire, device) = wire_and_device(l, seed)?;
    let (down_bps, modem_down) = side(l, &l.down, "down", load)?;
    let (up_bps, modem_up) = side(l, &l.up, "up", load)?;
    let autorate = |v: &Option<String>, what: &str| -> Result<_> {
        let Some(v) = v else { return Ok(None) };
        let b = Bounds::parse(v).map_err(|e| ScenarioError::value(&format!("link.{what}"), e))?;
        let mode: Mode = l
            .autorate_mode
            .as_deref()
            .unwrap_or("passive")
            .parse()
            .map_err(|e: String| ScenarioError::value("link.autorate_mode", e))?;
        Ok(Some(AutorateConfig::new(mode, b)))
    };
    let adaptive = Adaptive {
        modem_down,
        modem_up,
        autorate_down: autorate(&l.autorate_down, "autorate_down")?,
        autorate_up: autorate(&l.autorate_up, "autorate_up")?,
    };
    let cfg = Config {
        test: Test::Custom,
        down_bps,
        up_bps,
        rtt_ns: rtt,
        qdisc_up: spec(l.qdisc_up.as_ref(), "qdisc_up")?,
        qdisc_down: spec(l.qdisc_down.as_ref(), "qdisc_down")?,
        length_s: f.length,
        delay_s: 0.0,
        step_s: step,
        streams: 0,
        cc: Algorithm::Cubic,
        cc_turns: Vec::new(),
        ecn: false,
        host_qdisc: match &l.host_qdisc {
            None => None,
            Some(v) => Some(v.parse().map_err(|e| ScenarioError::Spec {
                key: "link.host_qdisc".into(),
                words: v.to_string(),
                source: Box::new(e),
            })?),
        },
        seed,
        device,
        wire,
        wire_down: None,
        tcp_window: None,
        bbr_ack_aggregation: true,
        host_rtts_ns: Vec::new(),
        adaptive,
        classify: None,
        wifi: None,
    };
    Ok(cfg)
}

/// `[link]`'s wire words (framing, loss, jitter, netem's) and its device (ring, BQL, IRQs).
fn wire_and_device(l: &LinkSection, seed: u64) -> Result<(crate::world::Wire, DeviceConfig)> {
    let wire = crate::wire::WireWords {
        framing: l.framing.as_deref(),
        loss_pct: l.loss,
        jitter: l.jitter.as_deref(),
        impair: l.impair.as_deref(),
    }
    .build(seed, |f| format!("link.{f}"))
    .map_err(|e| ScenarioError::Value {
        key: e.key,
        why: e.why,
    })?;
    let device = DeviceConfig {
        ring: l.ring,
        bql: l.bql.then(Default::default),
        coalesce_ns: match &l.irq_coalesce {
            Some(c) => time(c, "link.irq_coalesce")?,
            None => 0,
        },
    };
    Ok((wire, device))
}

/// `link.down`/`link.up`: a rate, or `trace:FILE` (the interface's 1 Gbit/s, then the modem).
fn side(
    l: &LinkSection,
    v: &str,
    what: &str,
    load: TraceLoader<'_>,
) -> Result<(u64, Option<ModemSpec>)> {
    let key = format!("link.{what}");
    let Some(file) = v.strip_prefix("trace:") else {
        return parse_rate(v)
            .map(|r| (r, None))
            .map_err(|e| ScenarioError::value(&key, e));
    };
    let trace = load(file).map_err(|why| ScenarioError::File { key, why })?;
    let buffer = l.trace_buffer.as_deref().unwrap_or("1000");
    let limit = debloat_core::link::parse_limit(buffer)
        .map_err(|e| ScenarioError::value(&format!("link.trace_buffer `{buffer}`"), e))?;
    Ok((1_000_000_000, Some(ModemSpec { trace, limit })))
}

/// Each UDP flood's goodput while it runs (from the per-step samples, as for TCP flows) and
/// its loss.
fn flood_summaries(w: &World, end: u64, step: f64) -> Vec<FlowSummary> {
    let mut out = Vec::new();
    for p in w.probes.iter().filter(|p| p.flood_len.is_some()) {
        // Goodput while the flood runs, from the per-step samples (as for TCP flows).
        let at = |t: u64| w.sampled_at(&p.delivered_series, t, p.delivered_bytes);
        let (t0, t1) = (p.start, p.stop.min(end));
        let secs = (t1.saturating_sub(t0) as f64 / 1e9).max(step);
        out.push(FlowSummary {
            name: p.name.clone(),
            kind: "udp",
            direction: p.flood_dir,
            cc: None,
            dscp: p.dscp,
            throughput_mbps: at(t1).saturating_sub(at(t0)) as f64 * 8.0 / secs / 1e6,
            loss_pct: if p.sent == 0 {
                0.0
            } else {
                (1.0 - p.samples.len() as f64 / p.sent as f64) * 100.0
            },
            retransmits: 0,
            timeouts: 0,
            ce_marked: 0,
        });
    }
    out
}

fn add(
    w: &mut World,
    fl: &FlowSection,
    i: usize,
    link_rtt: u64,
    end: u64,
    clients: &mut Vec<String>,
) -> Result<()> {
    let dir = match fl.direction.as_deref().unwrap_or("up") {
        "up" => Dir::Up,
        "down" => Dir::Down,
        other => {
            return Err(ScenarioError::value(
                &format!("direction `{other}`"),
                "expected up or down",
            ))
        }
    };
    let (start, stop) = (ns(fl.start), fl.stop.map_or(end, ns).min(end));
    if start >= stop {
        return Err(ScenarioError::value(
            &format!("start {} s", fl.start),
            format!("not before stop {} s", stop as f64 / 1e9),
        ));
    }
    let extra = host_extra(fl, link_rtt)?;
    let host = 20 + (i % 200) as u8;
    let at = (start, stop, host, extra);
    match fl.kind.as_str() {
        "tcp" | "udp-flood" if fl.l4s => {
            return Err(ScenarioError::value(
                &format!("l4s on the {} `{}`", fl.kind, fl.name),
                "l4s marks a ping, udp-ping or voip probe ECT(1); a TCP flow is L4S with cc = \"prague\"",
            ))
        }
        "tcp" => add_tcp(w, fl, dir, at, clients)?,
        "ping" | "udp-ping" | "voip" => add_probe(w, fl, at)?,
        "udp-flood" => {
            let Some(rate) = fl.rate.as_deref() else {
                return Err(ScenarioError::value(
                    "rate",
                    "a udp-flood needs one, e.g. \"5Mbit\"",
                ));
            };
            let rate = parse_rate(rate).map_err(|e| ScenarioError::value("rate", e))?;
            let size = fl.size.unwrap_or(1514).clamp(64, 9000);
            if rate == 0 {
                return Err(ScenarioError::value("rate", "must be above 0"));
            }
            let interval = (u64::from(size) * 8 * 1_000_000_000 / rate).max(1);
            let k = w.add_probe(&fl.name, true, fl.dscp, start, interval);
            w.set_probe_flood(k, size, dir, stop);
            w.set_probe_host(k, host, extra);
        }
        other => {
            return Err(ScenarioError::value(
                &format!("kind `{other}`"),
                "expected tcp, ping, udp-ping, voip or udp-flood",
            ))
        }
    }
    Ok(())
}

/// A ping, udp-ping or voip probe (`l4s = true`: marked ECT(1)).
fn add_probe(
    w: &mut World,
    fl: &FlowSection,
    (start, stop, host, extra): (u64, u64, u8, u64),
) -> Result<()> {
    if fl.ecn {
        return Err(ScenarioError::value(
            &format!("ecn on the {} `{}`", fl.kind, fl.name),
            "ecn is a TCP flow's; a probe marked ECT(1) says `l4s = true`",
        ));
    }
    let voip = fl.kind == "voip";
    let interval = match &fl.interval {
        Some(t) => time(t, "interval")?,
        None if voip => 20_000_000,
        None => 200_000_000,
    };
    let k = w.add_probe(&fl.name, fl.kind != "ping", fl.dscp, start, interval);
    if voip {
        w.set_probe_voip(k);
    }
    w.set_probe_host(k, host, extra);
    w.set_probe_stop(k, stop);
    if fl.l4s {
        w.set_probe_ecn(k, debloat_core::packet::Ecn::Ect1);
    }
    Ok(())
}

/// The extra one-way delay of a flow's host beyond the link's (its `rtt` minus the link's, halved).
fn host_extra(fl: &FlowSection, link_rtt: u64) -> Result<u64> {
    let Some(r) = &fl.rtt else { return Ok(0) };
    let r = time(r, "rtt")?;
    if r < link_rtt {
        return Err(ScenarioError::value(
            &format!("host rtt {} ms", r as f64 / 1e6),
            format!("below the link's {} ms", link_rtt as f64 / 1e6),
        ));
    }
    Ok((r - link_rtt) / 2)
}

/// A TCP flow: its congestion control, window and client host.
fn add_tcp(
    w: &mut World,
    fl: &FlowSection,
    dir: Dir,
    (start, stop, host, extra): (u64, u64, u8, u64),
    clients: &mut Vec<String>,
) -> Result<()> {
    let cc: Algorithm = fl
        .cc
        .as_deref()
        .unwrap_or("cubic")
        .parse()
        .map_err(|e: crate::tcp::cc::UnknownCc| ScenarioError::value("cc", e))?;
    let k = w.add_flow(&fl.name, dir, cc, fl.dscp, fl.ecn, start, stop);
    w.set_flow_host(k, host, extra);
    if let Some(v) = &fl.window {
        let b = parse_size(v).map_err(|e| ScenarioError::value("window", e))?;
        if b < u64::from(MSS) {
            return Err(ScenarioError::value(
                &format!("window {v}"),
                "at least one segment (1448 bytes)",
            ));
        }
        w.set_flow_window(k, Some(b));
    }
    if let Some(c) = &fl.client {
        let n = clients.iter().position(|x| x == c).unwrap_or_else(|| {
            clients.push(c.clone());
            clients.len() - 1
        });
        if n >= 200 {
            return Err(ScenarioError::value("client", "at most 200 distinct hosts"));
        }
        w.set_flow_client(k, 100 + n as u8);
    }
    Ok(())
}
