//! flent's data file (docs/measurement.md §3): version 4, gzip-compressed JSON with the metadata flent
//! needs (`NAME`, `TITLE`, `HOST`, `LENGTH`, `STEP_SIZE`, `LOCAL_HOST`, `T0`, `TIME`,
//! `TOTAL_LENGTH` …), the aligned grid (`x_values`, `results`) and the raw samples (`raw_values`).
//!
//! Virtual time has no wall clock, so `T0` is a fixed instant (2026-01-01T00:00:00Z, or the
//! caller's choice): the same run writes the same bytes.

use crate::scenario::{Config, Test};
use crate::world::World;
use debloat_report::flent_write::{grid, iso, tables, x_values, OutSeries, RawSample};
use serde_json::{json, Map, Value};

/// Unix time of the default T0, 2026-01-01T00:00:00Z.
pub const DEFAULT_EPOCH: u64 = 1_767_225_600;

fn collect(w: &World, cfg: &Config) -> Vec<OutSeries> {
    let mut out = Vec::new();
    let step = cfg.step_s;
    for f in &w.flows {
        let mut raw = Vec::new();
        for (k, pair) in f.delivered_series.windows(2).enumerate() {
            let t = w.sample_times[k + 1] as f64 / 1e9;
            if t <= f.start as f64 / 1e9 || t > f.stop as f64 / 1e9 + 1e-9 {
                continue;
            }
            let mbps =
                (pair[1] - pair[0]) as f64 * f64::from(crate::packet::MSS) * 8.0 / step / 1e6;
            raw.push((t, mbps, None));
        }
        let mut meta = Map::new();
        meta.insert("UNITS".into(), json!("Mbits/s"));
        meta.insert("RUNNER".into(), json!("debloat-sim-tcp"));
        meta.insert(
            "CONG_CONTROL".into(),
            json!(format!("{:?}", f.cc).to_lowercase()),
        );
        meta.insert("DATA_TOS".into(), json!(u32::from(f.dscp) << 2));
        meta.insert("TCP_MSS".into(), json!(crate::packet::MSS));
        meta.insert("TCP_RETRANSMIT".into(), json!(f.sender.retransmits));
        out.push(OutSeries {
            name: f.name.clone(),
            units: "Mbits/s",
            raw,
            meta,
        });
    }
    for p in w.probes.iter().filter(|p| cfg.test.has_probes() && !p.voip) {
        let raw: Vec<RawSample> = p
            .samples
            .iter()
            .enumerate()
            .map(|(i, &(sent, rtt))| (sent as f64 / 1e9, rtt as f64 / 1e6, Some(i as u64)))
            .collect();
        let mut meta = Map::new();
        meta.insert("UNITS".into(), json!("ms"));
        meta.insert(
            "RUNNER".into(),
            json!(if p.udp {
                "debloat-sim-udp"
            } else {
                "debloat-sim-icmp"
            }),
        );
        if p.udp {
            meta.insert("PACKETS_SENT".into(), json!(p.sent));
            meta.insert("PACKETS_RECEIVED".into(), json!(p.samples.len()));
        }
        out.push(OutSeries {
            name: p.name.clone(),
            units: "ms",
            raw,
            meta,
        });
    }
    out.extend(link_series(w, cfg));
    out
}

/// A trace-driven link's capacity per step, and a controlled shaper's rate (the report draws
/// them with the throughput): `Capacity down`, `Shaper rate down` (and `up`), Mbit/s.
fn link_series(w: &World, cfg: &Config) -> Vec<OutSeries> {
    use crate::world::Dir;
    let step_ns = (cfg.step_s * 1e9) as u64;
    let mut out = Vec::new();
    let series = |name: String, raw: Vec<RawSample>| {
        let mut meta = Map::new();
        meta.insert("UNITS".into(), json!("Mbits/s"));
        meta.insert("RUNNER".into(), json!("debloat-sim-link"));
        OutSeries {
            name,
            units: "Mbits/s",
            raw,
            meta,
        }
    };
    for (d, dir) in [(Dir::Down, "down"), (Dir::Up, "up")] {
        let times = w.sample_times.iter().copied().filter(|&t| t >= step_ns);
        if let Some(m) = w.modem(d) {
            let raw = times
                .clone()
                .map(|t| {
                    let mbps = m.trace().bits_in(t - step_ns, t) as f64 / cfg.step_s / 1e6;
                    (t as f64 / 1e9, mbps, None)
                })
                .collect();
            out.push(series(format!("Capacity {dir}"), raw));
        }
        if let Some(points) = w.autorate_series(d) {
            let raw = times
                .map(|t| {
                    let k = points.partition_point(|p| p.t <= t).saturating_sub(1);
                    let rate = points.get(k).map_or(0, |p| p.rate_bps);
                    (t as f64 / 1e9, rate as f64 / 1e6, None)
                })
                .collect();
            out.push(series(format!("Shaper rate {dir}"), raw));
        }
    }
    out
}

/// (grid series by name, raw records, series metadata).
type VoipSeries = (Vec<(String, Vec<Value>)>, Vec<Value>, Value);

/// flent's VoIP series from an irtt-like probe: per-packet rtt, one-way delay up, |IPDV| up; loss
/// per step. Returns (grid series, raw records, series metadata).
fn voip(p: &crate::world::Probe, xs: &[f64], step: f64, epoch: u64) -> VoipSeries {
    let n = p.samples.len();
    let t = |i: usize| p.samples[i].0 as f64 / 1e9;
    let ms = |ns: u64| ns as f64 / 1e6;
    let rtt: Vec<RawSample> = (0..n).map(|i| (t(i), ms(p.samples[i].1), None)).collect();
    let delay: Vec<RawSample> = (0..n).map(|i| (t(i), ms(p.owd_up[i]), None)).collect();
    let jitter: Vec<RawSample> = (1..n)
        .map(|i| (t(i), (ms(p.owd_up[i]) - ms(p.owd_up[i - 1])).abs(), None))
        .collect();
    // Loss per step: requests sent in (x - step, x] that were never answered.
    let interval = 0.02;
    let received: std::collections::BTreeSet<u32> = p.seqs.iter().copied().collect();
    let loss: Vec<Value> = xs
        .iter()
        .map(|&x| {
            let first = ((x - step) / interval).ceil().max(0.0) as u32 + 1;
            let last = ((x / interval).floor() as u32 + 1).min(p.sent as u32);
            if x == 0.0 || last < first {
                return Value::Null;
            }
            json!((first..=last).filter(|s| !received.contains(s)).count())
        })
        .collect();
    let mut raw: Vec<Value> = (0..n)
        .map(|i| {
            let mut r = json!({"t": epoch as f64 + t(i), "val": ms(p.samples[i].1), "seq": p.seqs[i], "owd_up": ms(p.owd_up[i]), "owd_down": ms(p.samples[i].1.saturating_sub(p.owd_up[i]))});
            if i > 0 {
                r["ipdv_up"] = json!(ms(p.owd_up[i]) - ms(p.owd_up[i - 1]));
            }
            r
        })
        .collect();
    for s in 1..=p.sent as u32 {
        if !received.contains(&s) {
            raw.push(json!({"t": epoch as f64 + (s - 1) as f64 * interval, "seq": s, "lost": true, "lost_dir": Value::Null}));
        }
    }
    let mean = |v: &[RawSample]| {
        if v.is_empty() {
            0.0
        } else {
            v.iter().map(|x| x.1).sum::<f64>() / v.len() as f64
        }
    };
    let meta = json!({
        "UNITS": "ms", "RUNNER": "debloat-sim-voip", "RTT_MEAN": mean(&rtt), "OWD_UP_MEAN": mean(&delay), "IPDV_UP_MEAN": mean(&jitter),
        "PACKETS_SENT": p.sent, "PACKETS_RECEIVED": n, "PACKET_LOSS_RATE": if p.sent == 0 { 0.0 } else { 1.0 - n as f64 / p.sent as f64 },
    });
    let series = vec![
        ("VoIP::rtt".to_string(), grid(&rtt, xs, step)),
        ("VoIP::delay".to_string(), grid(&delay, xs, step)),
        ("VoIP::jitter".to_string(), grid(&jitter, xs, step)),
        ("VoIP::loss".to_string(), loss),
    ];
    (series, raw, meta)
}

/// The whole data file as JSON.
pub fn data_file(w: &World, cfg: &Config, epoch: u64, title: &str) -> Value {
    let step = cfg.step_s;
    let delay_s = if cfg.test == Test::Ping {
        0.0
    } else {
        cfg.delay_s
    };
    let total = cfg.length_s + 2.0 * delay_s;
    let xs = x_values(total, step);
    let series = collect(w, cfg);
    let (mut results, mut raw_values, mut series_meta) = tables(&series, &xs, step, epoch as f64);
    for p in w.probes.iter().filter(|p| p.voip) {
        let (series, raw, meta) = voip(p, &xs, step, epoch);
        for (name, values) in series {
            results.insert(name, Value::Array(values));
        }
        raw_values.insert("VoIP".into(), Value::Array(raw));
        series_meta.insert("VoIP".into(), meta);
    }
    let mut params = Map::new();
    match cfg.test {
        Test::TcpNUp => {
            params.insert("upload_streams".into(), json!(cfg.streams.to_string()));
        }
        Test::TcpNDown => {
            params.insert("download_streams".into(), json!(cfg.streams.to_string()));
        }
        _ => {}
    }
    let hosts: Vec<String> = (0..cfg.hosts().len()).map(Config::host_name).collect();
    let host_q = cfg
        .host_qdisc
        .as_ref()
        .map(|q| format!(", host qdisc `{q}`"))
        .unwrap_or_default();
    let note = match &cfg.wifi {
        Some(wc) => format!(
            "debloat sim: {}, wired host {} ms RTT from the AP, cc {}, ecn {}, seed {}, delay {} s{host_q}",
            wc.describe(), cfg.rtt_ns as f64 / 1e6, cfg.cc_words(), cfg.ecn, cfg.seed, delay_s
        ),
        None => format!(
        "debloat sim: {}/{} bit/s down/up, base RTT {} ms, qdisc up `{}`, down `{}`, cc {}, ecn {}, seed {}, delay {} s{host_q}",
        cfg.down_bps, cfg.up_bps, cfg.rtt_ns as f64 / 1e6, cfg.qdisc_up, cfg.qdisc_down, cfg.cc_words(), cfg.ecn, cfg.seed, delay_s
    ),
    };
    let mut file = json!({
        "version": 4,
        "metadata": {
            "NAME": cfg.test.name(),
            "TITLE": title,
            "NOTE": note,
            "TIME": iso(epoch as f64),
            "T0": iso(epoch as f64),
            "HOST": hosts.first().cloned().unwrap_or_else(|| "198.18.2.2".into()),
            "HOSTS": if hosts.is_empty() { vec!["198.18.2.2".to_string()] } else { hosts },
            "LOCAL_HOST": "debloat-sim",
            "LENGTH": cfg.length_s.round() as u64,
            "TOTAL_LENGTH": total,
            "STEP_SIZE": step,
            "IP_VERSION": 4,
            "TEST_PARAMETERS": params,
            "FLENT_VERSION": concat!("debloat ", env!("CARGO_PKG_VERSION")),
            "SERIES_META": series_meta,
        },
        "x_values": xs,
        "results": results,
        "raw_values": raw_values,
    });
    // Wi-Fi runs carry their per-station table (flent keeps metadata it does not know).
    if w.wifi().is_some() {
        let s = |x: f64| (x * 1e9) as u64;
        let sum = crate::scenario::summarise(cfg, w, s(delay_s), s(cfg.length_s));
        if let (Some(wifi), Some(meta)) = (sum.wifi, file.get_mut("metadata")) {
            let info = wifi.to_metadata();
            meta[debloat_report::wifi::KEY] = serde_json::to_value(info).unwrap_or(Value::Null);
        }
    }
    file
}

/// flent's file name for a run: `<NAME>-<TIME without ':'>[.<title>].flent.gz`.
pub fn file_name(test: Test, epoch: u64, title: &str) -> String {
    debloat_report::flent_write::file_name(test.name(), epoch as f64, title)
}

pub use debloat_report::flent_write::gzip;
