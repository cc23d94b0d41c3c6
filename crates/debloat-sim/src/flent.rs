//! flent's data file (measurement.md §3): version 4, gzip-compressed JSON with the metadata flent
//! needs (`NAME`, `TITLE`, `HOST`, `LENGTH`, `STEP_SIZE`, `LOCAL_HOST`, `T0`, `TIME`,
//! `TOTAL_LENGTH` …), the aligned grid (`x_values`, `results`) and the raw samples (`raw_values`).
//!
//! Virtual time has no wall clock, so `T0` is a fixed instant (2026-01-01T00:00:00Z, or the
//! caller's choice): the same run writes the same bytes.

use crate::scenario::{Config, Test};
use crate::world::World;
use flate2::write::GzEncoder;
use flate2::Compression;
use serde_json::{json, Map, Value};
use std::io::Write;

/// Unix time of the default T0, 2026-01-01T00:00:00Z.
pub const DEFAULT_EPOCH: u64 = 1_767_225_600;

/// The series a run produced: (name, unit, raw samples as (t since start s, value), meta).
struct Series {
    name: String,
    units: &'static str,
    raw: Vec<(f64, f64, Option<u64>)>,
    meta: Map<String, Value>,
}

fn iso(unix: f64) -> String {
    let secs = unix.floor() as i64;
    let micros = ((unix - unix.floor()) * 1e6).round() as i64;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{micros:06}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Howard Hinnant's days-to-civil algorithm.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn collect(w: &World, cfg: &Config) -> Vec<Series> {
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
        out.push(Series {
            name: f.name.clone(),
            units: "Mbits/s",
            raw,
            meta,
        });
    }
    for p in w.probes.iter().filter(|p| cfg.test.has_probes() && !p.voip) {
        let raw: Vec<(f64, f64, Option<u64>)> = p
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
        out.push(Series {
            name: p.name.clone(),
            units: "ms",
            raw,
            meta,
        });
    }
    out
}

/// Linear interpolation on the grid; null farther than 5 steps from a sample or before the first
/// by more than half a step (flent's alignment rule).
fn grid(raw: &[(f64, f64, Option<u64>)], xs: &[f64], step: f64) -> Vec<Value> {
    xs.iter()
        .map(|&x| {
            let i = raw.partition_point(|r| r.0 < x);
            let prev = i.checked_sub(1).map(|j| raw[j]);
            let next = raw.get(i).copied();
            match (prev, next) {
                (_, Some(n)) if (n.0 - x).abs() < 1e-9 => json!(n.1),
                (Some(p), Some(n)) if x - p.0 <= 5.0 * step && n.0 - x <= 5.0 * step => {
                    json!(p.1 + (n.1 - p.1) * (x - p.0) / (n.0 - p.0))
                }
                (Some(p), None) if x - p.0 <= 0.5 * step => json!(p.1),
                (None, Some(n)) if n.0 - x <= 0.5 * step => json!(n.1),
                _ => Value::Null,
            }
        })
        .collect()
}

/// (grid series by name, raw records, series metadata).
type VoipSeries = (Vec<(String, Vec<Value>)>, Vec<Value>, Value);

/// flent's VoIP series from an irtt-like probe: per-packet rtt, one-way delay up, |IPDV| up; loss
/// per step. Returns (grid series, raw records, series metadata).
fn voip(p: &crate::world::Probe, xs: &[f64], step: f64, epoch: u64) -> VoipSeries {
    let n = p.samples.len();
    let t = |i: usize| p.samples[i].0 as f64 / 1e9;
    let ms = |ns: u64| ns as f64 / 1e6;
    let rtt: Vec<(f64, f64, Option<u64>)> =
        (0..n).map(|i| (t(i), ms(p.samples[i].1), None)).collect();
    let delay: Vec<(f64, f64, Option<u64>)> =
        (0..n).map(|i| (t(i), ms(p.owd_up[i]), None)).collect();
    let jitter: Vec<(f64, f64, Option<u64>)> = (1..n)
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
    let mean = |v: &[(f64, f64, Option<u64>)]| {
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
    let n = (total / step).round() as usize + 1;
    let xs: Vec<f64> = (0..n)
        .map(|k| (k as f64 * step * 1e6).round() / 1e6)
        .collect();
    let series = collect(w, cfg);
    let mut results = Map::new();
    let mut raw_values = Map::new();
    let mut series_meta = Map::new();
    for s in &series {
        results.insert(s.name.clone(), Value::Array(grid(&s.raw, &xs, step)));
        let raws: Vec<Value> = s
            .raw
            .iter()
            .map(|&(t, v, seq)| match seq {
                Some(q) => json!({"t": epoch as f64 + t, "val": v, "seq": q}),
                None => json!({"t": epoch as f64 + t, "val": v, "dur": step}),
            })
            .collect();
        raw_values.insert(s.name.clone(), Value::Array(raws));
        let mut m = s.meta.clone();
        m.insert("UNITS".into(), json!(s.units));
        series_meta.insert(s.name.clone(), Value::Object(m));
    }
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
    let note = format!(
        "debloat sim: {}/{} bit/s down/up, base RTT {} ms, qdisc up `{}`, down `{}`, cc {:?}, ecn {}, seed {}, delay {} s",
        cfg.down_bps, cfg.up_bps, cfg.rtt_ns as f64 / 1e6, cfg.qdisc_up, cfg.qdisc_down, cfg.cc, cfg.ecn, cfg.seed, delay_s
    );
    json!({
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
    })
}

/// flent's file name for a run: `<NAME>-<TIME without ':'>[.<title>].flent.gz`.
pub fn file_name(test: Test, epoch: u64, title: &str) -> String {
    let t = iso(epoch as f64)
        .replace(':', "")
        .trim_end_matches('Z')
        .to_string();
    let clean: String = title
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.is_empty() {
        format!("{}-{t}.flent.gz", test.name())
    } else {
        format!("{}-{t}.{clean}.flent.gz", test.name())
    }
}

/// Gzip-compress the JSON, deterministically (no name or time in the gzip header).
pub fn gzip(v: &Value) -> std::io::Result<Vec<u8>> {
    let mut e = GzEncoder::new(Vec::new(), Compression::default());
    e.write_all(serde_json::to_string_pretty(v)?.as_bytes())?;
    e.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_times() {
        assert_eq!(iso(DEFAULT_EPOCH as f64), "2026-01-01T00:00:00.000000Z");
        assert_eq!(iso(1_767_268_800.25), "2026-01-01T12:00:00.250000Z");
    }

    #[test]
    fn grid_interpolates_and_leaves_gaps() {
        let raw = vec![(1.0, 10.0, None), (1.4, 20.0, None)];
        let xs = [0.0, 1.0, 1.2, 1.4, 1.6, 3.0];
        let g = grid(&raw, &xs, 0.2);
        assert_eq!(
            g,
            vec![
                Value::Null,
                json!(10.0),
                json!(15.0),
                json!(20.0),
                Value::Null,
                Value::Null
            ]
        );
    }
}
