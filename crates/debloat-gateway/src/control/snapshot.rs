//! The running gateway's numbers: one [`Snapshot`] per request (`gateway stats`, the
//! Prometheus page), one [`DirectionStats`] per direction, [`ClassifyStats`] for the marking
//! stage; `to_text` prints them as `tc -s qdisc show` does, plus the gateway's own counters.

use crate::intake::Intake;
use crate::path::Counters;
use debloat_core::classify::qosify::{self, Classifier};
use serde::Serialize;

/// The running gateway's numbers.
#[derive(Clone, Debug, Serialize)]
pub struct Snapshot {
    /// Seconds since start.
    pub uptime_s: f64,
    /// LAN → WAN.
    pub egress: DirectionStats,
    /// WAN → LAN.
    pub ingress: DirectionStats,
    /// The marking stage's counters, when it runs.
    pub classify: Option<ClassifyStats>,
    /// The circuit stage's counters (packets by address, by MAC, unknown), when it runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub circuits: Option<debloat_core::classify::circuits::CircuitCounts>,
    /// The busiest circuits' counters (`--circuit-metrics`), when circuits are shaped.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub circuit_traffic: Vec<CircuitTraffic>,
    /// Forwarding threads, each with a shard of the hosts (`--workers`).
    pub workers: usize,
    /// Each worker's numbers, when there are several.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shards: Vec<ShardStats>,
}

/// One circuit's counters, both ways.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CircuitTraffic {
    /// Its Circuit ID.
    pub circuit: String,
    /// Bytes sent up (egress).
    pub up_bytes: u64,
    /// Packets sent up.
    pub up_packets: u64,
    /// Arrivals its upload leaf refused.
    pub up_drops: u64,
    /// Bytes sent down (ingress).
    pub down_bytes: u64,
    /// Packets sent down.
    pub down_packets: u64,
    /// Arrivals its download leaf refused.
    pub down_drops: u64,
}

/// What the marking stage counted, by name.
#[derive(Clone, Debug, Serialize)]
pub struct ClassifyStats {
    /// Each rule as written, and the packets it decided.
    pub rules: Vec<(String, u64)>,
    /// Each class, and the packets it marked egress and ingress.
    pub classes: Vec<(String, u64, u64)>,
    /// Everything else counted.
    pub counters: qosify::Counters,
}

impl ClassifyStats {
    /// The counters of `c`, named.
    pub fn of(c: &Classifier) -> ClassifyStats {
        let n = c.counters();
        let cfg = c.config();
        ClassifyStats {
            rules: cfg
                .rules
                .iter()
                .map(|r| r.text.clone())
                .zip(n.rules.iter().copied())
                .collect(),
            classes: cfg
                .classes
                .iter()
                .zip(&n.classes)
                .map(|(k, [e, i])| (k.name.clone(), *e, *i))
                .collect(),
            counters: qosify::Counters {
                rules: Vec::new(),
                classes: Vec::new(),
                ..n
            },
        }
    }

    fn to_text(&self) -> String {
        let c = &self.counters;
        let mut s = format!(
            "classify: remarked {} defaults {} replies {} bulk_flows {} bulk_packets {} prio_packets {} flow_evictions {}\n",
            c.remarked, c.defaults, c.replies, c.bulk_flows, c.bulk_packets, c.prio_packets, c.flow_evictions
        );
        let d = &c.dns;
        if d.answers + d.skipped + d.malformed > 0 {
            s.push_str(&format!(
                " dns: answers {} skipped {} malformed {} addresses learnt {} held {} cnames {} expired {} kept_active {} evictions {}\n",
                d.answers, d.skipped, d.malformed, d.addresses, d.held, d.cnames, d.expired, d.kept_active, d.evictions
            ));
        }
        for (name, e, i) in &self.classes {
            s.push_str(&format!(" class {name}: egress {e} ingress {i}\n"));
        }
        for (rule, n) in &self.rules {
            s.push_str(&format!(" rule {rule}: {n}\n"));
        }
        s
    }
}

/// One direction's numbers.
#[derive(Clone, Debug, Serialize)]
pub struct DirectionStats {
    /// "lan0 → wan0".
    pub path: String,
    /// The discipline's spec.
    pub qdisc: String,
    /// The emulated link.
    pub link: String,
    /// The packet I/O back end of the interface this direction's frames arrive on.
    pub io: crate::port::Backend,
    /// The discipline's statistics, as tc reports them.
    pub stats: debloat_core::QdiscStats,
    /// Frame counters.
    pub frames: Counters,
    /// What arrived: frames too big to forward, checksums completed, super-frames cut, time in
    /// the receive ring (flattened into this object in JSON).
    #[serde(flatten)]
    pub intake: Intake,
    /// Frames the kernel refused to send.
    pub tx_errors: u64,
    /// Frames on the emulated wire.
    pub on_wire: usize,
    /// Frames in the link's own buffer (`buffer N`).
    pub in_buffer: usize,
    /// The shaper-rate controller, if one runs.
    pub autorate: Option<crate::autorate::Status>,
}

impl Snapshot {
    /// As `tc -s qdisc show` prints it, one block per direction, plus the gateway's counters.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let lan = self.egress.path.split(" → ").next().unwrap_or("lan");
        let wan = self.ingress.path.split(" → ").next().unwrap_or("wan");
        s.push_str(&format!(
            "io: {lan} {}, {wan} {}; {} worker{}\n",
            self.egress.io,
            self.ingress.io,
            self.workers,
            if self.workers == 1 { "" } else { "s" }
        ));
        for (name, d) in [("egress", &self.egress), ("ingress", &self.ingress)] {
            s.push_str(&format!(
                "{name} {}: qdisc {}, link {}\n",
                d.path, d.qdisc, d.link
            ));
            s.push_str(&d.stats.to_tc_string());
            let f = d.frames;
            s.push_str(&format!(
                " frames: received {} malformed {} oversized {} dropped {} sent {} tx_errors {} on_wire {}\n",
                f.received, f.malformed, d.intake.oversized, f.qdisc_dropped, f.sent, d.tx_errors, d.on_wire
            ));
            s.push_str(&format!(
                " link: lost {} ecn_marked {} duplicated {} corrupted {} reordered {} overlimit {} buffer_dropped {} in_buffer {}\n",
                f.lost, f.ecn_marked, f.duplicated, f.corrupted, f.reordered, f.overlimit, f.buffer_dropped, d.in_buffer
            ));
            if let Some(a) = &d.autorate {
                s.push_str(&crate::autorate::status_line(a));
            }
            s.push_str(&format!(
                " receive ring: waited mean {:.0}us max {}us over {} frames; checksums completed {} unfinished {}; super-frames cut {} into {} segments\n\n",
                d.intake.ring_wait.mean_us(),
                d.intake.ring_wait.max_us,
                d.intake.ring_wait.frames,
                d.intake.csum_completed,
                d.intake.csum_unfinished,
                d.intake.super_frames,
                d.intake.super_segments
            ));
            if d.io.xdp.is_some() {
                s.push_str(&format!(
                    " UMEM: {} frames held where they were received, {} copied (no frame to spare, or over several)\n",
                    d.intake.umem_held, d.intake.umem_copied
                ));
            }
        }
        for w in &self.shards {
            let rate = |r: Option<u64>| {
                r.map_or("unshaped".to_string(), |b| {
                    format!("{:.2}Mbit", b as f64 / 1e6)
                })
            };
            s.push_str(&format!(
                "worker {}{}: egress received {} sent {} at {}, ingress received {} sent {} at {}\n",
                w.worker,
                w.cpu.map_or(String::new(), |c| format!(" (CPU {c})")),
                w.egress_received,
                w.egress_sent,
                rate(w.egress_rate_bps),
                w.ingress_received,
                w.ingress_sent,
                rate(w.ingress_rate_bps)
            ));
        }
        if let Some(c) = &self.classify {
            s.push_str(&c.to_text());
        }
        s
    }
}

impl Snapshot {
    /// Add another worker's numbers to these (`--workers N`): every counter, backlog and queue
    /// length summed, so that the accounting (in = dropped + queued + sent) holds for the
    /// whole gateway. The discipline's detailed statistics (`xstats`: cake's tins, fq_codel's
    /// flows) stay the first worker's; `gateway stats --json`'s `shards` has each worker's.
    pub fn merge(&mut self, other: &Snapshot) {
        self.egress.merge(&other.egress);
        self.ingress.merge(&other.ingress);
        if let (Some(a), Some(b)) = (self.circuits.as_mut(), other.circuits) {
            a.by_address += b.by_address;
            a.by_mac += b.by_mac;
            a.unknown += b.unknown;
        }
        merge_traffic(&mut self.circuit_traffic, &other.circuit_traffic);
    }
}

/// Two workers' busiest circuits as one list: a circuit in both is summed, the busiest (bytes
/// both ways) come first, and the list keeps the longer one's length (each is already cut to
/// `--circuit-metrics`). A circuit whose hosts are on several workers and that is outside one
/// worker's list is counted from the others only: with a cut list the merge is the busiest of
/// what each worker listed.
fn merge_traffic(a: &mut Vec<CircuitTraffic>, b: &[CircuitTraffic]) {
    if b.is_empty() {
        return;
    }
    let keep = a.len().max(b.len());
    let mut by: std::collections::BTreeMap<String, CircuitTraffic> = std::mem::take(a)
        .into_iter()
        .map(|t| (t.circuit.clone(), t))
        .collect();
    for t in b {
        let e = by
            .entry(t.circuit.clone())
            .or_insert_with(|| CircuitTraffic {
                circuit: t.circuit.clone(),
                ..Default::default()
            });
        e.up_bytes += t.up_bytes;
        e.up_packets += t.up_packets;
        e.up_drops += t.up_drops;
        e.down_bytes += t.down_bytes;
        e.down_packets += t.down_packets;
        e.down_drops += t.down_drops;
    }
    *a = by.into_values().collect();
    a.sort_by(|x, y| {
        (y.up_bytes + y.down_bytes)
            .cmp(&(x.up_bytes + x.down_bytes))
            .then(x.circuit.cmp(&y.circuit))
    });
    a.truncate(keep);
}

#[cfg(test)]
mod merge_tests {
    use super::*;

    fn t(c: &str, up: u64, down: u64) -> CircuitTraffic {
        CircuitTraffic {
            circuit: c.into(),
            up_bytes: up,
            up_packets: 1,
            down_bytes: down,
            down_packets: 2,
            ..Default::default()
        }
    }

    /// A circuit both workers list is summed; the busiest first; the longer list's length.
    #[test]
    fn workers_circuit_lists_merge_by_circuit() {
        let mut a = vec![t("c1", 100, 0), t("c2", 50, 0)];
        merge_traffic(&mut a, &[t("c2", 80, 0), t("c3", 60, 0)]);
        let ids: Vec<&str> = a.iter().map(|x| x.circuit.as_str()).collect();
        assert_eq!(ids, ["c2", "c1"]);
        assert_eq!(
            (a[0].up_bytes, a[0].up_packets, a[0].down_packets),
            (130, 2, 4)
        );
        let mut none = Vec::new();
        merge_traffic(&mut none, &[t("c9", 1, 1)]);
        assert_eq!(none.len(), 1);
    }
}

impl DirectionStats {
    fn merge(&mut self, o: &DirectionStats) {
        let (f, g) = (&mut self.frames, &o.frames);
        for (a, b) in [
            (&mut f.received, g.received),
            (&mut f.malformed, g.malformed),
            (&mut f.qdisc_dropped, g.qdisc_dropped),
            (&mut f.lost, g.lost),
            (&mut f.ecn_marked, g.ecn_marked),
            (&mut f.corrupted, g.corrupted),
            (&mut f.reordered, g.reordered),
            (&mut f.overlimit, g.overlimit),
            (&mut f.buffer_dropped, g.buffer_dropped),
            (&mut f.duplicated, g.duplicated),
            (&mut f.sent, g.sent),
        ] {
            *a += b;
        }
        self.stats.add_counts(&o.stats);
        let (i, j) = (&mut self.intake, &o.intake);
        for (a, b) in [
            (&mut i.oversized, j.oversized),
            (&mut i.csum_completed, j.csum_completed),
            (&mut i.csum_unfinished, j.csum_unfinished),
            (&mut i.super_frames, j.super_frames),
            (&mut i.super_segments, j.super_segments),
            (&mut i.link_errors, j.link_errors),
            (&mut i.passed, j.passed),
            (&mut i.umem_held, j.umem_held),
            (&mut i.umem_copied, j.umem_copied),
            (&mut i.reopened, j.reopened),
            (&mut i.ring_wait.frames, j.ring_wait.frames),
            (&mut i.ring_wait.total_us, j.ring_wait.total_us),
        ] {
            *a += b;
        }
        i.ring_wait.max_us = i.ring_wait.max_us.max(j.ring_wait.max_us);
        self.tx_errors += o.tx_errors;
        self.on_wire += o.on_wire;
        self.in_buffer += o.in_buffer;
    }
}

/// One worker's share of the gateway (`--workers N`).
#[derive(Clone, Debug, Serialize)]
pub struct ShardStats {
    /// The worker's index (frames of hosts the fanout hashes to it).
    pub worker: usize,
    /// The CPU it is pinned to, if any.
    pub cpu: Option<usize>,
    /// Frames its egress and ingress received and sent.
    pub egress_received: u64,
    /// Frames it sent LAN → WAN.
    pub egress_sent: u64,
    /// Frames its ingress received.
    pub ingress_received: u64,
    /// Frames it sent WAN → LAN.
    pub ingress_sent: u64,
    /// Its share of the egress and ingress shapers' rates now, bit/s (None: no shaper).
    pub egress_rate_bps: Option<u64>,
    /// The same for ingress.
    pub ingress_rate_bps: Option<u64>,
}
