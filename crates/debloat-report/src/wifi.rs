//! Wi-Fi runs: the per-station table a debloat simulation stores in its flent file's metadata
//! (`DEBLOAT_WIFI`: PHY rate, goodput, airtime share, ping median, AQL backlog per station, and
//! Jain's index over airtime), read back and drawn as an HTML table with airtime bars.
//!
//! flent keeps metadata keys it does not know, so the file stays a valid flent file; a file
//! without the key (flent's own, or a wired run) simply has no station table. These types are
//! the key's one schema: the simulator writes its table through them and the report reads it
//! back through them.

use crate::html::escape;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt::Write;

/// The metadata key.
pub const KEY: &str = "DEBLOAT_WIFI";

/// One station's row.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Station {
    /// Station index.
    #[serde(default)]
    pub station: usize,
    /// Its address.
    pub host: String,
    /// PHY rate as configured (e.g. "mcs7").
    #[serde(default)]
    pub rate: String,
    /// PHY rate, Mbit/s.
    pub phy_mbps: f64,
    /// Goodput of its flows, Mbit/s.
    pub throughput_mbps: f64,
    /// Ping RTT percentiles under load, ms.
    #[serde(default)]
    pub latency_ms: Option<Percentiles>,
    /// Share of the airtime the stations used (0–1).
    pub airtime_share: f64,
    /// Airtime AP → station, ms.
    #[serde(default)]
    pub tx_airtime_ms: f64,
    /// Airtime station → AP, ms.
    #[serde(default)]
    pub rx_airtime_ms: f64,
    /// Largest estimated airtime queued in the AP's hardware for it, ms.
    #[serde(default)]
    pub max_aql_pending_ms: f64,
    /// MPDUs given up after the retry limit.
    #[serde(default)]
    pub failed_frames: u64,
}

/// p50/p90/p99, ms.
#[derive(Clone, Copy, Debug, Deserialize, Serialize)]
pub struct Percentiles {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
}

/// A Wi-Fi run's per-station results.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct WifiInfo {
    /// The network in words.
    #[serde(default)]
    pub setup: String,
    /// Per station.
    pub stations: Vec<Station>,
    /// Jain's index over the stations' airtime.
    #[serde(default)]
    pub airtime_jain: Option<f64>,
    /// Fraction of the run the channel was busy.
    #[serde(default)]
    pub channel_busy: f64,
    /// Collisions.
    #[serde(default)]
    pub collisions: u64,
}

impl WifiInfo {
    /// The table from a flent file's metadata, if it has one; a malformed one is `Err` with
    /// what is wrong (the caller reports it and goes on without the table).
    pub fn from_metadata(
        meta: &serde_json::Map<String, Value>,
    ) -> Option<Result<WifiInfo, String>> {
        crate::flent::metadata_entry(meta, KEY)
    }
}

/// The HTML section for one run's stations: a table and, per station, a bar of its airtime
/// share (the bars of an airtime-fair run are equal whatever the rates).
pub fn html(label: &str, w: &WifiInfo) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<h3>{}</h3>\n<p class=\"meta\">{}</p>\n<div class=\"scroll\"><table class=\"stations\"><thead><tr>\
         <th>station</th><th>PHY<br><small>Mbit/s</small></th><th>goodput<br><small>Mbit/s</small></th>\
         <th>goodput / PHY</th><th>airtime<br><small>share</small></th><th></th>\
         <th>ping p50<br><small>ms</small></th><th>ping p90<br><small>ms</small></th>\
         <th>AQL max<br><small>ms</small></th><th>failed<br><small>MPDUs</small></th></tr></thead><tbody>\n",
        escape(label),
        escape(&w.setup)
    );
    for s in &w.stations {
        let pct = (s.airtime_share * 100.0).clamp(0.0, 100.0);
        let (p50, p90) = s.latency_ms.map_or(("-".into(), "-".into()), |l| {
            (format!("{:.1}", l.p50), format!("{:.1}", l.p90))
        });
        let eff = if s.phy_mbps > 0.0 {
            format!("{:.2}", s.throughput_mbps / s.phy_mbps)
        } else {
            "-".into()
        };
        let _ = writeln!(
            h,
            "<tr><td>{host}</td><td>{phy:.1}</td><td>{gp:.2}</td><td>{eff}</td><td>{pct:.1} %</td>\
             <td><svg width=\"160\" height=\"12\" role=\"img\" aria-label=\"airtime {pct:.1} %\">\
             <rect width=\"160\" height=\"12\" fill=\"#eee\"/><rect width=\"{bar:.1}\" height=\"12\" fill=\"#3b7dd8\"/></svg></td>\
             <td>{p50}</td><td>{p90}</td><td>{aql:.1}</td><td>{failed}</td></tr>",
            host = escape(&s.host),
            phy = s.phy_mbps,
            gp = s.throughput_mbps,
            bar = pct * 1.6,
            aql = s.max_aql_pending_ms,
            failed = s.failed_frames,
        );
    }
    let jain = w.airtime_jain.map_or("-".into(), |j| format!("{j:.3}"));
    let _ = writeln!(
        h,
        "</tbody></table></div>\n<p class=\"meta\">Jain's fairness index over airtime {jain}; channel \
         busy {:.1} %; {} collisions. Airtime share: each station's part of the airtime the \
         stations used (AP → station and station → AP).</p>",
        w.channel_busy * 100.0,
        w.collisions
    );
    h
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn meta(v: Value) -> serde_json::Map<String, Value> {
        crate::flent::metadata_with(KEY, v)
    }

    #[test]
    fn reads_and_draws_the_station_table() {
        let m = meta(serde_json::json!({
            "setup": "Wi-Fi AP airtime + AQL",
            "stations": [
                {"host": "198.18.2.11", "rate": "mcs7", "phy_mbps": 65.0, "throughput_mbps": 24.5,
                 "latency_ms": {"p50": 38.9, "p90": 51.0, "p99": 60.0}, "airtime_share": 0.5,
                 "max_aql_pending_ms": 12.1, "failed_frames": 0},
                {"host": "198.18.2.12", "phy_mbps": 6.5, "throughput_mbps": 2.4,
                 "latency_ms": null, "airtime_share": 0.5}
            ],
            "airtime_jain": 1.0, "channel_busy": 0.67, "collisions": 12
        }));
        let w = WifiInfo::from_metadata(&m).unwrap().unwrap();
        assert_eq!(w.stations.len(), 2);
        let h = html("run <1>", &w);
        assert!(h.contains("run &lt;1&gt;"));
        assert!(h.contains(
            "<td>198.18.2.11</td><td>65.0</td><td>24.50</td><td>0.38</td><td>50.0 %</td>"
        ));
        assert!(
            h.contains("<rect width=\"80.0\""),
            "half the airtime is half the bar"
        );
        assert!(h.contains("<td>38.9</td><td>51.0</td>"));
        assert!(h.contains("index over airtime 1.000"));
        assert!(h.contains("busy 67.0 %; 12 collisions"));
    }

    #[test]
    fn a_malformed_table_is_an_error_naming_the_key_and_no_table_is_none() {
        let bad = meta(serde_json::json!({"stations": [{"host": 3}]}));
        let e = WifiInfo::from_metadata(&bad).unwrap().unwrap_err();
        assert!(e.contains(KEY), "{e}");
        assert!(WifiInfo::from_metadata(&serde_json::Map::new()).is_none());
    }
}
