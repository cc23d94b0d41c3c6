//! The gateway's side of LibreQoS's circuits: which classify stage a direction runs, one
//! circuit's numbers for `gateway stats --circuit ID`, and the busiest circuits' counters for the
//! statistics and Prometheus (docs/circuits.md).

use super::circuit_asks::{Circuit, ClassPair};
use super::forward::Gateway;
use crate::snapshot::CircuitTraffic;
use debloat_core::classify::circuits::Circuits;
use debloat_core::classify::qosify::{Classifier, Direction};
use debloat_core::classify::Classify;
use debloat_core::qdisc::class_stats::ClassStats;
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

/// `gateway stats --circuit ID`'s answer: the circuit's class in both trees as tc's text (class
/// and leaf) or JSON, every worker's copy summed; under several workers, each one's part too.
/// `parts` are the copies answered (worker, class pair), the first worker's first.
pub(crate) fn render(c: &Circuit, parts: &[(usize, ClassPair)], workers: usize) -> String {
    let mut sum: ClassPair = [None, None];
    for (_, pair) in parts {
        for (total, one) in sum.iter_mut().zip(pair) {
            match (total.as_mut(), one) {
                (Some(t), Some(o)) => t.add_counts(o),
                (None, Some(o)) => *total = Some(o.clone()),
                _ => {}
            }
        }
    }
    let missing: Vec<usize> = (0..workers)
        .filter(|w| !parts.iter().any(|p| p.0 == *w))
        .collect();
    let [up, down] = sum;
    if c.json {
        let mut v = serde_json::json!({
            "circuit": c.id, "name": c.name, "class": format!("1:{:x}", c.minor),
            "upload": up, "download": down,
        });
        if workers > 1 {
            v["workers"] = workers.into();
            v["workers_not_answering"] = serde_json::json!(missing);
            v["per_worker"] = parts
                .iter()
                .map(|(w, [u, d])| serde_json::json!({"worker": w, "upload": u, "download": d}))
                .collect();
        }
        return serde_json::to_string_pretty(&v).unwrap_or_default() + "\n";
    }
    let mut t = format!("circuit {} ({}), class 1:{:x}\n", c.id, c.name, c.minor);
    if workers > 1 {
        t.push_str(&format!(
            "summed over {} of {workers} workers (tokens and the leaf's own statistics: the first worker's){}\n",
            parts.len(),
            if missing.is_empty() { String::new() } else { format!("; no answer within 1 s from worker {}", missing.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")) }
        ));
    }
    for (dir, c) in [("upload", &up), ("download", &down)] {
        let Some(c) = c else { continue };
        t.push_str(&format!("{dir}:\n{}", c.to_tc_string()));
        match (&c.leaf_qdisc, &c.leaf) {
            (Some(q), Some(h)) => {
                t.push_str(&q.to_tc_string_at(&format!("{h} parent {}", c.classid)))
            }
            _ => t.push_str(" (its queues are released while idle)\n"),
        }
    }
    if workers > 1 {
        for (w, pair) in parts {
            let part = |c: &Option<ClassStats>| {
                c.as_ref().map_or("-".to_string(), |c| {
                    format!(
                        "{} bytes {} pkt (dropped {}, backlog {}b {}p)",
                        c.bytes, c.packets, c.drops, c.backlog, c.qlen
                    )
                })
            };
            t.push_str(&format!(
                "worker {w}: upload {}; download {}\n",
                part(&pair[0]),
                part(&pair[1])
            ));
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::render;
    use crate::circuit_asks::Circuit;
    use debloat_core::qdisc::class_stats::ClassStats;

    fn class(bytes: u64) -> ClassStats {
        ClassStats {
            kind: "htb".into(),
            id: 0x1_0011,
            classid: "1:11".into(),
            parent: Some("1:1".into()),
            leaf: None,
            options: "rate 12Mbit ceil 12Mbit".into(),
            bytes,
            packets: bytes / 1000,
            drops: 0,
            overlimits: 0,
            backlog: 0,
            qlen: 0,
            lended: 0,
            borrowed: 0,
            giants: 0,
            tokens: 0,
            ctokens: 0,
            leaf_qdisc: None,
        }
    }

    /// Under three workers, two answering: the reply sums their copies, lists each one's part
    /// and names the worker that did not answer; under one, no worker is mentioned.
    #[test]
    fn a_circuits_answer_sums_the_workers_that_answered_and_names_the_others() {
        let c = Circuit {
            id: "7".into(),
            name: "seven".into(),
            minor: 0x11,
            json: true,
        };
        let parts = [
            (0, [Some(class(5_000)), Some(class(1_000))]),
            (2, [Some(class(3_000)), None]),
        ];
        let v: serde_json::Value = serde_json::from_str(&render(&c, &parts, 3)).expect("JSON");
        assert_eq!(v["upload"]["bytes"], 8_000);
        assert_eq!(v["download"]["bytes"], 1_000);
        assert_eq!(v["workers_not_answering"], serde_json::json!([1]));
        assert_eq!(v["per_worker"][1]["worker"], 2);
        assert_eq!(v["per_worker"][1]["upload"]["bytes"], 3_000);
        let text = render(&Circuit { json: false, ..c }, &parts, 3);
        assert!(text.contains("summed over 2 of 3 workers"), "{text}");
        assert!(
            text.contains("no answer within 1 s from worker 1\n"),
            "{text}"
        );
        assert!(text.contains("worker 2: upload 3000 bytes 3 pkt"), "{text}");
        let c1 = Circuit {
            id: "7".into(),
            name: "seven".into(),
            minor: 0x11,
            json: false,
        };
        let one = render(&c1, &parts[..1], 1);
        assert!(
            one.contains("Sent 5000 bytes") && !one.contains("worker"),
            "{one}"
        );
    }
}
