//! The numbers a report shows for each run: mean throughput per flow and per direction over the
//! load window, latency percentiles under load, idle latency and the delay the load induced.
//!
//! Everything is computed from the step grid, as flent's plots are (its `-f summary` uses raw
//! samples where present; on a regular 0.2 s grid the two agree closely).

use crate::flent::{Dataset, Direction, Kind};
use crate::percentile::percentile;

/// Latency percentiles, ms.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Percentiles {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
}

/// What one run amounted to.
#[derive(Clone, Debug)]
pub struct RunSummary {
    /// The run's label.
    pub label: String,
    /// Mean throughput of each TCP flow over the load window, Mbit/s, in file order.
    pub flows: Vec<(String, f64)>,
    /// Sum of the download flows' means, Mbit/s (None without download flows).
    pub download_mbps: Option<f64>,
    /// Sum of the upload flows' means (and flows of unknown direction), Mbit/s.
    pub upload_mbps: Option<f64>,
    /// Latency under load over every latency series, ms.
    pub latency: Option<Percentiles>,
    /// Median latency before the load starts, ms.
    pub idle_ms: Option<f64>,
}

impl RunSummary {
    /// Summarise a dataset.
    pub fn of(d: &Dataset) -> RunSummary {
        let (a, b) = d.load_window();
        let in_window = |i: usize| d.x.get(i).is_some_and(|&x| x >= a && x <= b);
        let mean = |vals: &[Option<f64>]| {
            let v: Vec<f64> = vals
                .iter()
                .enumerate()
                .filter(|(i, _)| in_window(*i))
                .filter_map(|(_, v)| *v)
                .collect();
            if v.is_empty() {
                0.0
            } else {
                v.iter().sum::<f64>() / v.len() as f64
            }
        };
        let mut flows = Vec::new();
        for s in d.of_kind(|k| matches!(k, Kind::Throughput(_))) {
            flows.push((s.name.clone(), mean(&s.values)));
        }
        // A direction's throughput is the mean over time of its flows' sum, taken where at
        // least one of them has a sample: flows that start or stop at different times (a load
        // ramp, a staircase, phases) are then not summed as if they had run side by side.
        let total = |dir: Direction| -> Option<f64> {
            let series: Vec<_> = d
                .of_kind(|k| k == Kind::Throughput(Some(dir)))
                .map(|s| &s.values)
                .collect();
            if series.is_empty() {
                return None;
            }
            let sums: Vec<f64> = (0..d.x.len())
                .filter(|&i| in_window(i))
                .filter_map(|i| {
                    let v: Vec<f64> = series
                        .iter()
                        .filter_map(|s| s.get(i).copied().flatten())
                        .collect();
                    (!v.is_empty()).then(|| v.iter().sum())
                })
                .collect();
            Some(if sums.is_empty() {
                0.0
            } else {
                sums.iter().sum::<f64>() / sums.len() as f64
            })
        };
        let (down, up) = (total(Direction::Down), total(Direction::Up));
        let mut load = Vec::new();
        let mut idle = Vec::new();
        for s in d.of_kind(|k| k == Kind::Latency) {
            for (i, v) in s.values.iter().enumerate() {
                let Some(v) = *v else { continue };
                if d.x.get(i).is_some_and(|&x| d.loaded_at(x)) {
                    load.push(v);
                } else if d.x[i] < a {
                    idle.push(v);
                }
            }
        }
        RunSummary {
            label: d.label.clone(),
            flows,
            download_mbps: down,
            upload_mbps: up,
            latency: percentiles(&mut load),
            idle_ms: percentiles(&mut idle).map(|p| p.p50),
        }
    }

    /// Median latency under load minus idle median, ms.
    pub fn induced_ms(&self) -> Option<f64> {
        Some(self.latency?.p50 - self.idle_ms?)
    }
}

/// Nearest-rank percentiles ([`percentile`]); None for no samples.
pub fn percentiles(v: &mut [f64]) -> Option<Percentiles> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(Percentiles {
        p50: percentile(v, 50.0)?,
        p90: percentile(v, 90.0)?,
        p99: percentile(v, 99.0)?,
    })
}

/// Latency samples under load of a dataset, sorted (for CDFs).
pub fn load_latencies(d: &Dataset) -> Vec<f64> {
    let mut v: Vec<f64> = d
        .of_kind(|k| k == Kind::Latency)
        .flat_map(|s| {
            s.values
                .iter()
                .zip(&d.x)
                .filter(|(_, &x)| d.loaded_at(x))
                .filter_map(|(v, _)| *v)
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dataset() -> Dataset {
        let v = serde_json::json!({
            "version": 4,
            "metadata": {"NAME": "tcp_bidirectional", "TITLE": "t", "LENGTH": 2, "TOTAL_LENGTH": 12,
                         "STEP_SIZE": 1.0},
            "x_values": [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0],
            "results": {
                "TCP download": [null, null, null, null, null, 8.0, 10.0, 12.0, 10.0, null, null, null, null],
                "TCP upload":   [null, null, null, null, null, 1.0, 1.0, 1.0, 1.0, null, null, null, null],
                "Ping (ms) ICMP": [20.0, 20.0, 20.0, 20.0, 20.0, 100.0, 200.0, 300.0, 400.0, 20.0, 20.0, 20.0, 20.0]
            },
            "raw_values": {}
        });
        Dataset::from_json(&v, "t").expect("valid")
    }

    #[test]
    fn throughput_is_the_mean_over_the_load_window_per_direction() {
        let s = RunSummary::of(&dataset());
        assert_eq!(s.download_mbps, Some(10.0));
        assert_eq!(s.upload_mbps, Some(1.0));
        assert_eq!(s.flows.len(), 2);
    }

    /// A flow that joins halfway (a load ramp) shares the link: the direction's throughput is
    /// the link's 10 Mbit/s, not the 7.5 + 5 its two flows' own means would add up to.
    #[test]
    fn flows_that_start_apart_are_summed_over_time_not_by_their_means() {
        let v = serde_json::json!({
            "version": 4,
            "metadata": {"NAME": "rrul_be_nflows", "TITLE": "t", "LENGTH": 4, "TOTAL_LENGTH": 6,
                         "STEP_SIZE": 1.0, "DELAY": 1},
            "x_values": [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            "results": {
                "TCP download BE::1": [null, 10.0, 10.0, 5.0, 5.0, null, null],
                "TCP download BE::2": [null, null, null, 5.0, 5.0, null, null],
                "Ping (ms) ICMP": [20.0, 20.0, 20.0, 20.0, 20.0, 20.0, 20.0]
            },
            "raw_values": {}
        });
        let s = RunSummary::of(&Dataset::from_json(&v, "t").expect("valid"));
        assert_eq!(s.download_mbps, Some(10.0));
        assert_eq!(s.upload_mbps, None);
        let means: Vec<f64> = s.flows.iter().map(|f| f.1).collect();
        assert_eq!(means, [7.5, 5.0]);
    }

    /// `bufferbloat` loads one direction, idles, loads the other: latency "under load" is
    /// taken in its graded phases only, not in the idle gap between them (issue 46).
    #[test]
    fn bufferbloats_idle_gap_is_not_under_load() {
        let grade = serde_json::json!({"letter": "C", "stat": "Mean", "idle_ms": 20.0,
        "loaded_ms": 110.0, "increase_ms": 90.0,
        "phases": [
            {"direction": "download", "window_s": [1.0, 2.0], "loaded_ms": 200.0, "increase_ms": 180.0, "letter": "C"},
            {"direction": "upload", "window_s": [4.0, 5.0], "loaded_ms": 20.0, "increase_ms": 0.0, "letter": "A+"}
        ]});
        let v = serde_json::json!({
            "version": 4,
            "metadata": {"NAME": "bufferbloat", "TITLE": "t", "LENGTH": 4, "TOTAL_LENGTH": 6,
                         "STEP_SIZE": 1.0, "DELAY": 1,
                         "DEBLOAT_VERDICT": {"grade": grade, "rpm": null}},
            "x_values": [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            "results": {"Ping (ms) ICMP": [20.0, 200.0, 200.0, 21.0, 20.0, 20.0, 20.0]},
            "raw_values": {}
        });
        let d = Dataset::from_json(&v, "t").expect("valid");
        assert!(d.loaded_at(1.5) && !d.loaded_at(3.0) && d.loaded_at(4.0));
        assert_eq!(
            load_latencies(&d),
            [20.0, 20.0, 200.0, 200.0],
            "the gap's 21 ms is out"
        );
    }

    /// flent's voip test has VoIP's round trip and its one-way delay: the summary's latency is
    /// the round trip alone, not a percentile of both pooled (issue 46).
    #[test]
    fn voip_one_way_delay_is_not_pooled_with_round_trips() {
        let v = serde_json::json!({
            "version": 4,
            "metadata": {"NAME": "voip", "TITLE": "t", "LENGTH": 4, "TOTAL_LENGTH": 4,
                         "STEP_SIZE": 1.0, "DELAY": 0,
                         "SERIES_META": {"VoIP::rtt": {"UNITS": "ms"}, "VoIP::delay": {"UNITS": "ms"}}},
            "x_values": [0.0, 1.0, 2.0, 3.0, 4.0],
            "results": {
                "VoIP::rtt": [40.0, 40.0, 40.0, 40.0, 40.0],
                "VoIP::delay": [20.0, 20.0, 20.0, 20.0, 20.0]
            },
            "raw_values": {}
        });
        let d = Dataset::from_json(&v, "t").expect("valid");
        let s = RunSummary::of(&d);
        let p = s.latency.expect("latency");
        assert_eq!((p.p50, p.p90, p.p99), (40.0, 40.0, 40.0));
        assert!(load_latencies(&d).iter().all(|&x| x == 40.0));
    }

    #[test]
    fn latency_under_load_and_idle_are_separated() {
        let s = RunSummary::of(&dataset());
        // Window [5, 7]: 100, 200, 300 ms under load; idle (x < 5) is 20 ms.
        let l = s.latency.expect("samples");
        assert_eq!((l.p50, l.p99), (200.0, 300.0));
        assert_eq!(s.idle_ms, Some(20.0));
        assert_eq!(s.induced_ms(), Some(180.0));
        assert_eq!(load_latencies(&dataset()), [100.0, 200.0, 300.0]);
    }
}
