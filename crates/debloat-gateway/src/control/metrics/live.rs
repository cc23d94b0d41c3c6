//! The live view's numbers: from each snapshot the gateway publishes (once a second) and the
//! one before it, a [`Point`] per direction — the rate the discipline sent against the shaper's
//! rate, and per tin the rate, average, peak and target delay — kept for the last
//! [`HISTORY`] points, so that a page opened now draws the last two minutes at once
//! (`GET /api/live`: the points and the latest snapshot). Computed here, not in the page, so
//! every viewer sees the same figures and a headless check needs one request.

use crate::snapshot::{DirectionStats, Snapshot};
use debloat_core::qdisc::stats::Xstats;
use serde::Serialize;
use std::collections::VecDeque;

/// Points kept: two minutes at one a second.
pub const HISTORY: usize = 120;

/// One direction over the last interval.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct DirPoint {
    /// What the discipline sent, bit/s.
    pub rate_bps: f64,
    /// The shaper's rate now (cake's, or the rate controller's), bit/s; None unshaped.
    pub shaper_bps: Option<f64>,
    /// Frames the discipline dropped and marked in the interval.
    pub drops: u64,
    /// ECN marks in the interval.
    pub marks: u64,
    /// Per tin (cake); one row named after the discipline otherwise.
    pub tins: Vec<TinPoint>,
}

/// One tin over the last interval.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct TinPoint {
    /// The tin's name (`Bulk`, `Best Effort` …).
    pub name: String,
    /// What it sent, bit/s.
    pub rate_bps: f64,
    /// Its average, peak and target delay now, µs (None: the discipline has no tins).
    pub avg_delay_us: Option<u64>,
    /// Peak delay, µs.
    pub peak_delay_us: Option<u64>,
    /// Target, µs.
    pub target_us: Option<u64>,
}

/// Both directions at one moment.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Point {
    /// Gateway uptime at the end of the interval, s.
    pub t: f64,
    /// LAN → WAN.
    pub egress: DirPoint,
    /// WAN → LAN.
    pub ingress: DirPoint,
}

/// The last points and the snapshot they end at.
#[derive(Default)]
pub struct History {
    points: VecDeque<Point>,
    last: Option<Snapshot>,
}

/// Per-tin (name, sent bytes, avg, peak, target, drops, marks) of a direction.
type Tin = (String, u64, Option<u64>, Option<u64>, Option<u64>, u64, u64);

fn tins(d: &DirectionStats) -> Vec<Tin> {
    match &d.stats.xstats {
        Xstats::Cake(c) if !c.tins.is_empty() => c
            .tins
            .iter()
            .map(|t| {
                (
                    t.name.clone(),
                    t.sent_bytes,
                    Some(t.avg_delay_us),
                    Some(t.peak_delay_us),
                    Some(t.target_us),
                    u64::from(t.drops),
                    u64::from(t.ecn_mark),
                )
            })
            .collect(),
        x => vec![(
            d.stats.kind.clone(),
            d.stats.bytes,
            None,
            None,
            None,
            d.stats.drops,
            super::ecn_marks(x),
        )],
    }
}

/// The shaper's rate now, bit/s: the rate controller's, else cake's; None unshaped.
pub(crate) fn shaper_bps(d: &DirectionStats) -> Option<f64> {
    if let Some(a) = &d.autorate {
        return Some(a.rate_bps as f64);
    }
    match &d.stats.xstats {
        Xstats::Cake(c) if c.capacity_estimate > 0 => Some(c.capacity_estimate as f64 * 8.0),
        _ => None,
    }
}

fn dir_point(prev: &DirectionStats, cur: &DirectionStats, dt: f64) -> DirPoint {
    let per_s = |now: u64, before: u64| now.saturating_sub(before) as f64 * 8.0 / dt;
    let (p, c) = (tins(prev), tins(cur));
    DirPoint {
        rate_bps: per_s(cur.stats.bytes, prev.stats.bytes),
        shaper_bps: shaper_bps(cur),
        drops: cur.stats.drops.saturating_sub(prev.stats.drops),
        marks: c
            .iter()
            .map(|t| t.6)
            .sum::<u64>()
            .saturating_sub(p.iter().map(|t| t.6).sum()),
        tins: c
            .iter()
            .map(|t| TinPoint {
                name: t.0.clone(),
                rate_bps: p
                    .iter()
                    .find(|q| q.0 == t.0)
                    .map_or(0.0, |q| per_s(t.1, q.1)),
                avg_delay_us: t.2,
                peak_delay_us: t.3,
                target_us: t.4,
            })
            .collect(),
    }
}

impl History {
    /// Take the newest snapshot: a point from it and the one before (none for the first, or
    /// after a restart of the uptime clock, or a discipline swapped by a reload).
    pub fn push(&mut self, snap: &Snapshot) {
        if let Some(prev) = &self.last {
            let dt = snap.uptime_s - prev.uptime_s;
            let same =
                prev.egress.qdisc == snap.egress.qdisc && prev.ingress.qdisc == snap.ingress.qdisc;
            if dt > 0.0 && same {
                self.points.push_back(Point {
                    t: snap.uptime_s,
                    egress: dir_point(&prev.egress, &snap.egress, dt),
                    ingress: dir_point(&prev.ingress, &snap.ingress, dt),
                });
                while self.points.len() > HISTORY {
                    self.points.pop_front();
                }
            }
        }
        self.last = Some(snap.clone());
    }

    /// `GET /api/live`: `{"points": […], "snapshot": {…}}`.
    pub fn to_json(&self) -> String {
        serde_json::json!({ "points": self.points, "snapshot": self.last }).to_string()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::metrics::tests::snapshot;

    /// Two snapshots a second apart, 125 000 bytes more sent: 1 Mbit/s, against cake's
    /// 10 Mbit/s; per tin the same; the first snapshot alone gives no point.
    #[test]
    fn a_point_is_the_rate_between_two_snapshots_against_the_shaper() {
        let mut h = History::default();
        let mut a = snapshot("cake bandwidth 10Mbit besteffort");
        a.uptime_s = 1.0;
        h.push(&a);
        assert!(h.points.is_empty());
        let mut b = a.clone();
        b.uptime_s = 2.0;
        b.egress.stats.bytes += 125_000;
        if let Xstats::Cake(c) = &mut b.egress.stats.xstats {
            c.tins[0].sent_bytes += 125_000;
            c.tins[0].avg_delay_us = 2500;
        }
        b.egress.stats.drops += 3;
        h.push(&b);
        let p = &h.points[0];
        assert_eq!(p.t, 2.0);
        assert_eq!(p.egress.rate_bps, 1e6);
        assert_eq!(p.egress.shaper_bps, Some(1e7));
        assert_eq!(p.egress.drops, 3);
        assert_eq!(p.egress.tins.len(), 1);
        assert_eq!(p.egress.tins[0].rate_bps, 1e6);
        assert_eq!(p.egress.tins[0].avg_delay_us, Some(2500));
        assert_eq!(p.ingress.rate_bps, 0.0);
        let v: serde_json::Value = serde_json::from_str(&h.to_json()).unwrap();
        assert_eq!(v["points"][0]["egress"]["shaper_bps"], 1e7);
        assert_eq!(v["snapshot"]["uptime_s"], 2.0);
        for i in 0..200 {
            let mut c = b.clone();
            c.uptime_s = 3.0 + f64::from(i);
            h.push(&c);
        }
        assert_eq!(h.points.len(), HISTORY);
    }

    /// contrib/grafana-debloat-gateway.json asks only for families the endpoint serves: every
    /// `debloat_…` name in its queries is on the page of a cake gateway (counters with their
    /// `_total`), or is the rate controller's, which is there when a controller runs.
    #[test]
    fn the_grafana_dashboard_asks_for_families_that_exist() {
        let json = include_str!("../../../../../contrib/grafana-debloat-gateway.json");
        let v: serde_json::Value = serde_json::from_str(json).unwrap();
        let mut page = super::super::render(snapshot("cake bandwidth 10Mbit diffserv4"));
        page.push_str("\n# TYPE debloat_autorate_rate_bits_per_second gauge\n");
        assert!(page.contains("debloat_qdisc_shaper_rate_bits_per_second{direction=\"egress\",qdisc=\"cake\"} 10000000"), "{page}");
        let mut asked = 0;
        for panel in v["panels"].as_array().unwrap() {
            for t in panel["targets"].as_array().unwrap() {
                let expr = t["expr"].as_str().unwrap();
                for name in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                    if name.starts_with("debloat_") {
                        asked += 1;
                        assert!(
                            page.contains(&format!("{name}{{"))
                                || page.contains(&format!("{name} ")),
                            "{name} is not served"
                        );
                    }
                }
            }
        }
        assert!(asked >= 9, "{asked}");
    }
}
