//! The gateway's side of LibreQoS's circuits: which classify stage a direction runs, the circuit
//! an ID names (`gateway stats --circuit ID`, answered in `circuit_asks`), and the busiest
//! circuits' counters for the statistics and Prometheus (docs/circuits.md).

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
    /// The circuit `id` names: its class's minor and its name, or the error line to answer.
    pub(crate) fn find_circuit(&self, id: &str) -> Result<(u16, String), String> {
        let Some(stage) = &self.circuits else {
            return Err(
                "error: this gateway shapes no circuits (start it with --network and --devices)\n"
                    .into(),
            );
        };
        match stage.circuit(id) {
            Some((minor, name)) => Ok((minor, name.to_string())),
            None => Err(format!("error: no circuit `{id}` in the files\n")),
        }
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
