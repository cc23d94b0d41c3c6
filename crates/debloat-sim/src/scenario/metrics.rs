//! A run's summary as a flat list of named numbers, so repeated runs (`debloat sim --seeds`)
//! can be folded metric by metric and two configurations compared (`debloat compare`).

use super::summary::{Latency, Summary};
use debloat_report::repeats::Metric;

impl Summary {
    /// Every number of the summary that a comparison would ask about, with its unit: each
    /// flow's goodput and the total, each ping's percentiles under load and its loss, each
    /// queue's drops, marks and sojourn, the fairness index, and per Wi-Fi station goodput,
    /// latency and airtime share.
    pub fn metrics(&self) -> Vec<Metric> {
        let mut m = Vec::new();
        for f in &self.flows {
            m.push(Metric::new(
                format!("{}: goodput", f.name),
                "Mbit/s",
                f.throughput_mbps,
            ));
        }
        let total: f64 = self.flows.iter().map(|f| f.throughput_mbps).sum();
        m.push(Metric::new("total goodput", "Mbit/s", total));
        for p in &self.pings {
            if let Some(l) = &p.latency_ms {
                percentiles(&mut m, &p.name, l);
            }
            m.push(Metric::new(format!("{}: loss", p.name), "%", p.loss_pct));
        }
        for q in &self.queues {
            let offered = (q.sent_pkts + q.dropped) as f64;
            let pct = |n: u64| {
                if offered > 0.0 {
                    n as f64 * 100.0 / offered
                } else {
                    0.0
                }
            };
            m.push(Metric::new(
                format!("{}: dropped", q.r#where),
                "%",
                pct(q.dropped),
            ));
            m.push(Metric::new(
                format!("{}: CE-marked", q.r#where),
                "%",
                pct(q.marked),
            ));
            percentiles(&mut m, &format!("{}: sojourn", q.r#where), &q.sojourn_ms);
        }
        if let Some(j) = self.jain_fairness {
            m.push(Metric::new("Jain's fairness index", "", j));
        }
        if let Some(w) = &self.wifi {
            for s in &w.stations {
                let name = format!("station {} ({})", s.station, s.rate);
                m.push(Metric::new(
                    format!("{name}: goodput"),
                    "Mbit/s",
                    s.throughput_mbps,
                ));
                if let Some(l) = &s.latency_ms {
                    m.push(Metric::new(format!("{name}: latency p50"), "ms", l.p50));
                }
                m.push(Metric::new(
                    format!("{name}: airtime share"),
                    "%",
                    s.airtime_share * 100.0,
                ));
            }
        }
        m
    }
}

fn percentiles(m: &mut Vec<Metric>, name: &str, l: &Latency) {
    for (p, v) in [("p50", l.p50), ("p90", l.p90), ("p99", l.p99)] {
        m.push(Metric::new(format!("{name} {p}"), "ms", v));
    }
}
