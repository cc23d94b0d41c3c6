//! The circuits' families: `debloat_circuit_bytes`, `_packets` and `_drops` by circuit and
//! direction, for the circuits the snapshot lists (the busiest `--circuit-metrics`: how many
//! series there are is the operator's choice).

use super::{counter, Collect, Labels};
use prometheus_client::encoding::DescriptorEncoder;

impl Collect {
    pub(super) fn encode_circuits(
        &self,
        enc: &mut DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        let rows = &self.0.circuit_traffic;
        if rows.is_empty() {
            return Ok(());
        }
        let series =
            |f: &dyn Fn(&crate::snapshot::CircuitTraffic) -> (u64, u64)| -> Vec<(Labels, u64)> {
                rows.iter()
                    .flat_map(|r| {
                        let (up, down) = f(r);
                        [("egress", up), ("ingress", down)].map(|(dir, v)| {
                            (
                                vec![
                                    ("circuit", r.circuit.clone()),
                                    ("direction", dir.to_string()),
                                ],
                                v,
                            )
                        })
                    })
                    .collect()
            };
        counter(enc, "debloat_circuit_bytes", "Bytes each circuit's class sent, by direction (the busiest circuits, --circuit-metrics).", &series(&|r| (r.up_bytes, r.down_bytes)))?;
        counter(
            enc,
            "debloat_circuit_packets",
            "Packets each circuit's class sent, by direction.",
            &series(&|r| (r.up_packets, r.down_packets)),
        )?;
        counter(
            enc,
            "debloat_circuit_drops",
            "Arrivals each circuit's leaf refused, by direction.",
            &series(&|r| (r.up_drops, r.down_drops)),
        )
    }
}

#[cfg(test)]
mod tests {
    use crate::snapshot::CircuitTraffic;

    /// A series per listed circuit and direction; none without circuits.
    #[test]
    fn each_listed_circuit_has_its_series() {
        let mut snap = super::super::tests::snapshot("fq_codel");
        assert!(!super::super::render(snap.clone()).contains("debloat_circuit"));
        snap.circuit_traffic = vec![CircuitTraffic {
            circuit: "2794".into(),
            up_bytes: 1500,
            up_packets: 1,
            down_bytes: 9000,
            down_packets: 6,
            down_drops: 2,
            ..CircuitTraffic::default()
        }];
        let page = super::super::render(snap);
        for want in [
            r#"debloat_circuit_bytes_total{circuit="2794",direction="egress"} 1500"#,
            r#"debloat_circuit_bytes_total{circuit="2794",direction="ingress"} 9000"#,
            r#"debloat_circuit_packets_total{circuit="2794",direction="ingress"} 6"#,
            r#"debloat_circuit_drops_total{circuit="2794",direction="ingress"} 2"#,
        ] {
            assert!(page.contains(want), "missing {want}:\n{page}");
        }
    }
}
