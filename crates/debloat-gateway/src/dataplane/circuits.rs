//! The gateway's side of LibreQoS's circuits: which classify stage a direction runs, one
//! circuit's numbers for `gateway stats --circuit ID`, and the busiest circuits' counters for the
//! statistics and Prometheus (docs/circuits.md).

use super::forward::Gateway;
use crate::snapshot::CircuitTraffic;
use debloat_core::classify::circuits::Circuits;
use debloat_core::classify::qosify::{Classifier, Direction};
use debloat_core::classify::Classify;
use debloat_core::qdisc::stats::ClassCounters;

/// The classify stage a direction runs: the circuits', else qosify's marking, else none.
pub(crate) fn stage<'a>(
    circuits: &'a mut Option<Circuits>,
    marker: &'a mut Option<Classifier>,
    dir: Direction,
) -> Option<(&'a mut dyn Classify, Direction)> {
    match (circuits, marker) {
        (Some(c), _) => Some((c as &mut dyn Classify, dir)),
        (None, Some(q)) => Some((q as &mut dyn Classify, dir)),
        (None, None) => None,
    }
}

impl Gateway {
    /// `gateway stats --circuit ID`: the circuit's class in both trees, as tc's text (class and
    /// leaf) or JSON.
    pub(crate) fn circuit_stats(&self, id: &str, json: bool) -> String {
        let Some(stage) = &self.circuits else {
            return "error: this gateway shapes no circuits (start it with --network and --devices)\n".into();
        };
        let Some((minor, name)) = stage.circuit(id) else {
            return format!("error: no circuit `{id}` in the files\n");
        };
        let (up, down) = (
            self.egress.path.qdisc().class(minor),
            self.ingress.path.qdisc().class(minor),
        );
        if json {
            let v = serde_json::json!({
                "circuit": id, "name": name, "class": format!("1:{minor:x}"),
                "upload": up, "download": down,
            });
            return serde_json::to_string_pretty(&v).unwrap_or_default() + "\n";
        }
        let mut t = format!("circuit {id} ({name}), class 1:{minor:x}\n");
        for (dir, c) in [("upload", up), ("download", down)] {
            let Some(c) = c else { continue };
            t.push_str(&format!("{dir}:\n{}", c.to_tc_string()));
            match (&c.leaf_qdisc, &c.leaf) {
                (Some(q), Some(h)) => {
                    t.push_str(&q.to_tc_string_at(&format!("{h} parent {}", c.classid)))
                }
                _ => t.push_str(" (its queues are released while idle)\n"),
            }
        }
        t
    }

    /// The circuits' counters, both ways, the busiest (bytes both ways) first, at most
    /// `circuit_metrics` of them (all for 0).
    pub(crate) fn circuit_traffic(&self) -> Vec<CircuitTraffic> {
        let Some(stage) = &self.circuits else {
            return Vec::new();
        };
        let (mut up, mut down) = (Vec::new(), Vec::new());
        self.egress.path.qdisc().leaf_counters(&mut up);
        self.ingress.path.qdisc().leaf_counters(&mut down);
        // Both trees list the same classes in the same order.
        let none = ClassCounters::default();
        let mut rows: Vec<CircuitTraffic> = up
            .iter()
            .zip(down.iter().chain(std::iter::repeat(&none)))
            .filter_map(|(u, d)| {
                let d = if d.minor == u.minor { *d } else { none };
                Some(CircuitTraffic {
                    circuit: stage.id_of(u.minor)?.to_string(),
                    up_bytes: u.bytes,
                    up_packets: u.packets,
                    up_drops: u.drops,
                    down_bytes: d.bytes,
                    down_packets: d.packets,
                    down_drops: d.drops,
                })
            })
            .collect();
        rows.sort_by(|a, b| {
            (b.up_bytes + b.down_bytes)
                .cmp(&(a.up_bytes + a.down_bytes))
                .then(a.circuit.cmp(&b.circuit))
        });
        if self.cfg.circuit_metrics > 0 {
            rows.truncate(self.cfg.circuit_metrics);
        }
        rows
    }
}
