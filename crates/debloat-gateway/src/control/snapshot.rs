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
    /// Forwarding threads (one today: both directions on one core).
    pub workers: usize,
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
        }
        if let Some(c) = &self.classify {
            s.push_str(&c.to_text());
        }
        s
    }
}
