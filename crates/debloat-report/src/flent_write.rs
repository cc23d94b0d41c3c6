//! Writing flent data files (docs/measurement.md §3): the pieces every producer of results shares —
//! the simulator (virtual time) and the probe (real sockets) build their series and metadata,
//! and this module turns them into the file flent opens: ISO times, the aligned step grid with
//! flent's interpolation rule, the gzip container and flent's file name.
//!
//! A raw sample is `(t, value, seq)`: `t` in seconds since the run's start, `seq` present for
//! latency probes (flent's ping records) and absent for throughput samples (which carry `dur`).

use flate2::write::GzEncoder;
use flate2::Compression;
use serde_json::{json, Map, Value};
use std::io::Write;

/// One raw sample: (seconds since the run's start, value, sequence number for probes).
pub type RawSample = (f64, f64, Option<u64>);

/// A measured series ready to be written: flent's name, its unit, raw samples in time order and
/// the `SERIES_META` entry (`UNITS` is filled in from `units`).
#[derive(Debug, Clone, PartialEq)]
pub struct OutSeries {
    /// flent's series name, e.g. `TCP upload BE` or `Ping (ms) ICMP`.
    pub name: String,
    /// `Mbits/s` or `ms`.
    pub units: &'static str,
    /// Raw samples in time order.
    pub raw: Vec<RawSample>,
    /// Extra `SERIES_META` keys (`RUNNER`, `CONG_CONTROL`, `MEAN_VALUE` …).
    pub meta: Map<String, Value>,
}

/// `unix` seconds as flent writes times: `2026-01-01T00:00:00.000000Z`.
pub fn iso(unix: f64) -> String {
    let secs = unix.floor() as i64;
    let mut micros = ((unix - unix.floor()) * 1e6).round() as i64;
    let secs = if micros >= 1_000_000 {
        micros -= 1_000_000;
        secs + 1
    } else {
        secs
    };
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

/// The grid `0, step, 2·step …` covering `total` seconds (inclusive), rounded to µs.
pub fn x_values(total: f64, step: f64) -> Vec<f64> {
    let n = (total / step).round() as usize + 1;
    (0..n)
        .map(|k| (k as f64 * step * 1e6).round() / 1e6)
        .collect()
}

/// Linear interpolation on the grid; null farther than 5 steps from a sample or before the first
/// by more than half a step (flent's alignment rule, docs/measurement.md §2.8).
pub fn grid(raw: &[RawSample], xs: &[f64], step: f64) -> Vec<Value> {
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

/// `results`, `raw_values` and `SERIES_META` for these series on grid `xs`; raw times are
/// written as Unix seconds (`t0` + offset), as flent's runners do.
pub fn tables(series: &[OutSeries], xs: &[f64], step: f64, t0: f64) -> Tables {
    let mut results = Map::new();
    let mut raw_values = Map::new();
    let mut series_meta = Map::new();
    for s in series {
        results.insert(s.name.clone(), Value::Array(grid(&s.raw, xs, step)));
        let raws: Vec<Value> = s
            .raw
            .iter()
            .map(|&(t, v, seq)| match seq {
                Some(q) => json!({"t": t0 + t, "val": v, "seq": q}),
                None => json!({"t": t0 + t, "val": v, "dur": step}),
            })
            .collect();
        raw_values.insert(s.name.clone(), Value::Array(raws));
        let mut m = s.meta.clone();
        m.insert("UNITS".into(), json!(s.units));
        series_meta.insert(s.name.clone(), Value::Object(m));
    }
    (results, raw_values, series_meta)
}

/// `results`, `raw_values` and `SERIES_META`, each keyed by series name.
pub type Tables = (Map<String, Value>, Map<String, Value>, Map<String, Value>);

/// flent's file name for a run: `<NAME>-<TIME without ':'>[.<title>].flent.gz`.
pub fn file_name(test_name: &str, t0: f64, title: &str) -> String {
    let t = iso(t0.floor())
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
        format!("{test_name}-{t}.flent.gz")
    } else {
        format!("{test_name}-{t}.{clean}.flent.gz")
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
        assert_eq!(iso(1_767_225_600.0), "2026-01-01T00:00:00.000000Z");
        assert_eq!(iso(1_767_268_800.25), "2026-01-01T12:00:00.250000Z");
        // Rounding up to a whole second carries into the seconds field.
        assert_eq!(iso(1_767_225_600.999_999_9), "2026-01-01T00:00:01.000000Z");
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

    #[test]
    fn file_names_follow_flent() {
        assert_eq!(
            file_name("rrul", 1_767_225_600.4, "a b"),
            "rrul-2026-01-01T000000.000000.a_b.flent.gz"
        );
        assert_eq!(x_values(1.0, 0.2), vec![0.0, 0.2, 0.4, 0.6, 0.8, 1.0]);
    }
}
