//! Reading flent data files (versions 1–4; docs/measurement.md §3) into a [`Dataset`]: the test's
//! name and title, the step grid, and every measured series with its kind and unit.
//!
//! flent picks the decompressor by file name; this reader looks at the bytes instead (gzip's
//! magic number), so a renamed file still opens. Computed series (`… sum`, `… avg`,
//! `TCP totals`, `… fairness`) are dropped: the report computes its own from the flows, the same
//! way for debloat's files (which may omit them) and flent's (which carry them).

use serde_json::Value;
use std::io::Read;
use std::path::Path;

/// Errors reading a data file.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// Not JSON (or not gzip-compressed JSON).
    #[error("{path}: not a flent data file (JSON, optionally gzip-compressed): {why}")]
    Format {
        /// The file.
        path: String,
        /// What the parser said.
        why: String,
    },
    /// JSON, but missing what a flent file must have.
    #[error("{path}: {why}")]
    Content {
        /// The file.
        path: String,
        /// What is missing or wrong.
        why: String,
    },
}

/// What a series measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Throughput of a TCP flow (Mbit/s), with its direction when the name says it (not in
    /// e.g. "TCP cubic 2").
    Throughput(Option<Direction>),
    /// A round-trip latency probe (ms): ping, UDP RTT, VoIP's RTT.
    Latency,
    /// A one-way delay (ms): VoIP's `delay`. Plotted beside the round trips, never pooled with
    /// them into one percentile (a one-way figure is about half a round trip).
    OneWayLatency,
    /// What a link could carry (Mbit/s), from a capacity trace: `Capacity down`/`up`.
    Capacity,
    /// The rate a controller set on the shaper (Mbit/s): `Shaper rate down`/`up`.
    ShaperRate,
    /// Anything else (kept, not plotted).
    Other,
}

/// Direction of a throughput series: the core's one direction.
pub use debloat_core::Direction;

/// One measured series on the step grid.
#[derive(Clone, Debug)]
pub struct Series {
    /// flent's series name, e.g. "TCP download BE" or "Ping (ms) ICMP".
    pub name: String,
    /// What it measures.
    pub kind: Kind,
    /// Value at each grid point (`None` where flent has null).
    pub values: Vec<Option<f64>>,
    /// Raw samples (`val` of raw_values), when the file has them; else empty.
    pub raw: Vec<f64>,
}

/// A flent data file's content.
#[derive(Clone, Debug)]
pub struct Dataset {
    /// A short label for legends: the title, else the file name.
    pub label: String,
    /// flent's test name (`NAME`).
    pub test: String,
    /// `TITLE`.
    pub title: String,
    /// The file's format version.
    pub version: u64,
    /// Grid step, s.
    pub step: f64,
    /// Grid points, s since T0.
    pub x: Vec<f64>,
    /// Load length (`LENGTH`), s.
    pub length: f64,
    /// Whole run (`TOTAL_LENGTH`, else the last grid point), s.
    pub total_length: f64,
    /// Idle time before and after the load (`DELAY` where the file records it, as debloat's
    /// probe does; flent's default of 5 s otherwise).
    pub delay: f64,
    /// Measured series, in the file's order.
    pub series: Vec<Series>,
    /// Per-station results of a Wi-Fi simulation (debloat's `DEBLOAT_WIFI` metadata).
    pub wifi: Option<crate::wifi::WifiInfo>,
    /// Grade and RPM of a probe run (debloat's `DEBLOAT_VERDICT` metadata).
    pub verdict: Option<crate::verdict::Verdict>,
}

/// A debloat entry in a flent file's metadata (flent keeps keys it does not know): `None`
/// without the key, `Err` saying what is wrong with a malformed one (the caller reports it and goes
/// on without that section).
pub fn metadata_entry<T: serde::de::DeserializeOwned>(
    meta: &serde_json::Map<String, serde_json::Value>,
    key: &str,
) -> Option<Result<T, String>> {
    let v = meta.get(key)?;
    Some(T::deserialize(v).map_err(|e| format!("metadata {key}: {e}")))
}

/// Metadata holding one entry, for tests of the readers above.
#[cfg(test)]
pub(crate) fn metadata_with(
    key: &str,
    v: serde_json::Value,
) -> serde_json::Map<String, serde_json::Value> {
    let mut m = serde_json::Map::new();
    m.insert(key.into(), v);
    m
}

/// flent's default DELAY: the idle time before and after the load.
pub const DELAY_S: f64 = 5.0;

impl Dataset {
    /// Read a file (gzip or plain JSON).
    pub fn read(path: &Path) -> Result<Dataset, ReadError> {
        let p = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|source| ReadError::Io {
            path: p.clone(),
            source,
        })?;
        let label = path
            .file_name()
            .map(|f| f.to_string_lossy().trim_end_matches(".gz").to_string())
            .unwrap_or_default();
        Dataset::from_bytes(&bytes, &label).map_err(|e| match e {
            ReadError::Format { why, .. } => ReadError::Format { path: p, why },
            ReadError::Content { why, .. } => ReadError::Content { path: p, why },
            other => other,
        })
    }

    /// Parse bytes (gzip or plain JSON); `fallback_label` is used when the file has no title.
    pub fn from_bytes(bytes: &[u8], fallback_label: &str) -> Result<Dataset, ReadError> {
        let format = |why: String| ReadError::Format {
            path: fallback_label.into(),
            why,
        };
        let v: Value = if bytes.starts_with(&[0x1f, 0x8b]) {
            let mut s = String::new();
            flate2::read::GzDecoder::new(bytes)
                .read_to_string(&mut s)
                .map_err(|e| format(format!("gzip: {e}")))?;
            serde_json::from_str(&s).map_err(|e| format(e.to_string()))?
        } else {
            serde_json::from_slice(bytes).map_err(|e| format(e.to_string()))?
        };
        Dataset::from_json(&v, fallback_label).map_err(|why| ReadError::Content {
            path: fallback_label.into(),
            why,
        })
    }

    /// Interpret a parsed flent document.
    pub fn from_json(v: &Value, fallback_label: &str) -> Result<Dataset, String> {
        let meta = v
            .get("metadata")
            .and_then(Value::as_object)
            .ok_or("no `metadata` object: not a flent data file")?;
        let version = v.get("version").and_then(Value::as_u64).unwrap_or(1);
        if version > 4 {
            return Err(format!(
                "version {version} is newer than this reader knows (1–4)"
            ));
        }
        let x: Vec<f64> = v
            .get("x_values")
            .and_then(Value::as_array)
            .ok_or("no `x_values` array")?
            .iter()
            .map(|x| x.as_f64().unwrap_or(f64::NAN))
            .collect();
        let results = v
            .get("results")
            .and_then(Value::as_object)
            .ok_or("no `results` object")?;
        let raw = v.get("raw_values").and_then(Value::as_object);
        let text = |k: &str| {
            meta.get(k)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let num = |k: &str| meta.get(k).and_then(Value::as_f64);
        let units = |name: &str| {
            meta.get("SERIES_META")
                .and_then(|m| m.get(name))
                .and_then(|m| m.get("UNITS"))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let mut series = Vec::new();
        for (name, vals) in results {
            if is_computed(name) {
                continue;
            }
            let values: Vec<Option<f64>> = vals
                .as_array()
                .ok_or_else(|| format!("results[\"{name}\"] is not an array"))?
                .iter()
                .map(Value::as_f64)
                .collect();
            if values.len() != x.len() {
                return Err(format!(
                    "results[\"{name}\"] has {} points for {} x values",
                    values.len(),
                    x.len()
                ));
            }
            let raw_vals = raw
                .and_then(|r| r.get(name))
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|r| r.get("val").and_then(Value::as_f64))
                        .collect()
                })
                .unwrap_or_default();
            series.push(Series {
                kind: classify(name, units(name).as_deref()),
                name: name.clone(),
                values,
                raw: raw_vals,
            });
        }
        let wifi = crate::wifi::WifiInfo::from_metadata(meta).transpose()?;
        let verdict = crate::verdict::Verdict::from_metadata(meta).transpose()?;
        let title = text("TITLE");
        let step = num("STEP_SIZE").unwrap_or_else(|| if x.len() > 1 { x[1] - x[0] } else { 0.2 });
        let last = x.last().copied().unwrap_or(0.0);
        Ok(Dataset {
            label: if title.is_empty() {
                fallback_label.to_string()
            } else {
                title.clone()
            },
            test: text("NAME"),
            title,
            version,
            step,
            length: num("LENGTH").unwrap_or(last),
            total_length: num("TOTAL_LENGTH").unwrap_or(last),
            delay: num("DELAY").unwrap_or(DELAY_S),
            x,
            series,
            wifi,
            verdict,
        })
    }

    /// Series of one kind.
    pub fn of_kind(&self, pred: impl Fn(Kind) -> bool) -> impl Iterator<Item = &Series> {
        self.series.iter().filter(move |s| pred(s.kind))
    }

    /// Whether the sample at `x` s was taken under load: inside a graded phase when the run
    /// loaded the directions in turn (`bufferbloat`: the idle gap between its phases is not
    /// load, and pooling it would give a third "increase" beside the grade's and the phases'),
    /// else inside [`Dataset::load_window`].
    pub fn loaded_at(&self, x: f64) -> bool {
        let phases: Vec<(f64, f64)> = self
            .verdict
            .iter()
            .flat_map(|v| v.grade.iter())
            .flat_map(|g| g.phases.iter())
            .filter_map(|p| p.window_s)
            .collect();
        if phases.is_empty() {
            let (a, b) = self.load_window();
            return x >= a && x <= b;
        }
        phases.iter().any(|&(a, b)| x >= a && x <= b)
    }

    /// The load window flent's plots cut to: [DELAY, total − DELAY] when the run is long
    /// enough, else everything.
    pub fn load_window(&self) -> (f64, f64) {
        if self.delay > 0.0 && self.total_length > 2.0 * self.delay + self.step {
            (self.delay, self.total_length - self.delay)
        } else {
            (
                0.0,
                self.total_length.max(self.x.last().copied().unwrap_or(0.0)),
            )
        }
    }
}

/// Computed series that flent derives from the others.
fn is_computed(name: &str) -> bool {
    name.ends_with(" sum")
        || name.ends_with(" avg")
        || name == "TCP totals"
        || name.contains("fairness")
        || name.ends_with("::induced_delay")
}

/// A series' kind from its unit (SERIES_META) or, failing that, flent's naming.
fn classify(name: &str, units: Option<&str>) -> Kind {
    let throughput = || {
        let n = name.to_ascii_lowercase();
        Kind::Throughput(if n.contains("upload") {
            Some(Direction::Up)
        } else if n.contains("download") {
            Some(Direction::Down)
        } else {
            None
        })
    };
    if name.starts_with("Capacity ") {
        return Kind::Capacity;
    }
    if name.starts_with("Shaper rate ") {
        return Kind::ShaperRate;
    }
    if name == "VoIP::delay" {
        return Kind::OneWayLatency;
    }
    match units {
        Some(u) if u.to_ascii_lowercase().contains("bits/s") => throughput(),
        Some("ms") => Kind::Latency,
        _ if name.starts_with("TCP ") => throughput(),
        _ if name.starts_with("Ping") || name == "VoIP::rtt" => Kind::Latency,
        _ => Kind::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minimal() -> Value {
        serde_json::json!({
            "version": 4,
            "metadata": {"NAME": "tcp_1up", "TITLE": "example", "LENGTH": 1, "TOTAL_LENGTH": 1,
                         "STEP_SIZE": 0.2,
                         "SERIES_META": {"TCP upload": {"UNITS": "Mbits/s"}, "Ping (ms) ICMP": {"UNITS": "ms"}}},
            "x_values": [0.0, 0.2, 0.4],
            "results": {"TCP upload": [null, 9.1, 9.4], "Ping (ms) ICMP": [20.1, 35.2, 60.4],
                        "TCP upload sum": [null, 9.1, 9.4]},
            "raw_values": {"Ping (ms) ICMP": [{"t": 1.0, "val": 20.1}, {"t": 1.2, "val": 35.2}]}
        })
    }

    #[test]
    fn reads_series_kinds_and_drops_computed_ones() {
        let d = Dataset::from_json(&minimal(), "f").expect("valid");
        assert_eq!(d.test, "tcp_1up");
        assert_eq!(d.label, "example");
        let names: Vec<&str> = d.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["Ping (ms) ICMP", "TCP upload"]);
        assert_eq!(d.series[0].kind, Kind::Latency);
        assert_eq!(d.series[0].raw, [20.1, 35.2]);
        assert_eq!(d.series[1].kind, Kind::Throughput(Some(Direction::Up)));
        assert_eq!(d.series[1].values[0], None);
    }

    #[test]
    fn a_short_series_is_an_error_naming_it() {
        let mut v = minimal();
        v["results"]["TCP upload"] = serde_json::json!([1.0]);
        let e = Dataset::from_json(&v, "f").expect_err("length mismatch");
        assert!(e.contains("TCP upload") && e.contains("1 points"), "{e}");
    }

    #[test]
    fn versions_above_4_and_non_flent_json_are_refused() {
        let mut v = minimal();
        v["version"] = 5.into();
        assert!(Dataset::from_json(&v, "f").is_err());
        let e = Dataset::from_bytes(b"[1,2]", "x.json").expect_err("not flent");
        assert!(e.to_string().contains("metadata"), "{e}");
        let e = Dataset::from_bytes(b"\x1f\x8bnope", "x.gz").expect_err("bad gzip");
        assert!(e.to_string().contains("gzip"), "{e}");
    }

    #[test]
    fn a_file_without_version_is_version_1_and_names_classify_without_units() {
        let mut v = minimal();
        v.as_object_mut().map(|o| o.remove("version"));
        v["metadata"]
            .as_object_mut()
            .map(|o| o.remove("SERIES_META"));
        let d = Dataset::from_json(&v, "f").expect("valid");
        assert_eq!(d.version, 1);
        assert_eq!(d.series[1].kind, Kind::Throughput(Some(Direction::Up)));
        assert_eq!(classify("TCP cubic 2", None), Kind::Throughput(None));
        assert_eq!(classify("VoIP::delay", None), Kind::OneWayLatency);
        assert_eq!(classify("VoIP::delay", Some("ms")), Kind::OneWayLatency);
        assert_eq!(classify("VoIP::rtt", Some("ms")), Kind::Latency);
        assert_eq!(classify("Capacity down", Some("Mbits/s")), Kind::Capacity);
        assert_eq!(
            classify("Shaper rate up", Some("Mbits/s")),
            Kind::ShaperRate
        );
    }
}
