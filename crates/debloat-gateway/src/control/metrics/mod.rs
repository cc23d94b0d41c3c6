//! The gateway's numbers for Prometheus: `GET /metrics` on a small HTTP listener (127.0.0.1
//! unless told otherwise), in the OpenMetrics text format written by `prometheus-client`.
//!
//! The forwarding loop never waits for a scraper: it hands a fresh [`Snapshot`] to the
//! [`Exporter`] about once a second, and the exporter's own thread answers requests from the
//! latest one. Metrics (labels `direction` = egress | ingress, and `qdisc` = the discipline's kind):
//! - `debloat_gateway_uptime_seconds`, `debloat_gateway_info{…, from, to, qdisc, link} 1`;
//! - `debloat_gateway_io_info{direction, interface, io, xdp_mode, zero_copy, rx_queues,
//!   multi_buffer, shared_umem} 1` (the back end frames of the direction arrive on;
//!   `multi_buffer` says whether an AF_XDP socket takes frames over several UMEM frames,
//!   `shared_umem` whether both interfaces share one UMEM, so that frames are forwarded without
//!   a copy) and `debloat_gateway_workers`;
//! - `debloat_gateway_frames_total{direction, fate}` — fate is received, malformed, oversized,
//!   qdisc_dropped, lost, ecn_marked, duplicated, corrupted, reordered, overlimit,
//!   buffer_dropped, sent, tx_error;
//! - `debloat_gateway_umem_frames_total{direction, how}` — AF_XDP frames held in the UMEM they
//!   arrived in until sent (`held`) or copied into the heap (`copied`);
//! - `debloat_gateway_on_wire_frames`, `debloat_gateway_in_buffer_frames` — frames on the
//!   emulated wire and in the link's own buffer now;
//! - `debloat_qdisc_{bytes,packets,drops,overlimits,ecn_marks}_total` and
//!   `debloat_qdisc_{backlog_bytes,qlen_packets}` — as `tc -s qdisc show` reports them;
//! - for cake, per tin (`tin` label as tc's column heading):
//!   `debloat_cake_tin_{peak,avg,base}_delay_seconds`, `debloat_cake_tin_backlog_bytes`,
//!   `debloat_cake_tin_{packets,bytes,drops,ecn_marks,ack_drops}_total`.

use crate::snapshot::{DirectionStats, Snapshot};
use debloat_core::qdisc::stats::Xstats;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

mod circuits;
mod http;
mod io;
pub mod live;
mod tins;
pub use http::Exporter;

/// A snapshot as a Prometheus collector.
#[derive(Debug)]
struct Collect(Snapshot);

type Labels = Vec<(&'static str, String)>;

fn counter(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: &[(Labels, u64)],
) -> Result<(), std::fmt::Error> {
    let mut m = enc.encode_descriptor(name, help, None, ConstCounter::new(0u64).metric_type())?;
    for (labels, v) in rows {
        ConstCounter::new(*v).encode(m.encode_family(labels)?)?;
    }
    Ok(())
}

fn gauge(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: &[(Labels, f64)],
) -> Result<(), std::fmt::Error> {
    let mut m = enc.encode_descriptor(name, help, None, ConstGauge::new(0f64).metric_type())?;
    if let [(labels, v)] = rows {
        if labels.is_empty() {
            return ConstGauge::new(*v).encode(m);
        }
    }
    for (labels, v) in rows {
        ConstGauge::new(*v).encode(m.encode_family(labels)?)?;
    }
    Ok(())
}

fn dirs(s: &Snapshot) -> [(&'static str, &DirectionStats); 2] {
    [("egress", &s.egress), ("ingress", &s.ingress)]
}

fn qlabels(dir: &'static str, d: &DirectionStats) -> Labels {
    vec![
        ("direction", dir.to_string()),
        ("qdisc", d.stats.kind.clone()),
    ]
}

pub(super) fn ecn_marks(x: &Xstats) -> u64 {
    match x {
        Xstats::Codel { ecn_mark, .. } | Xstats::FqCodel { ecn_mark, .. } => u64::from(*ecn_mark),
        Xstats::Deadline { ecn_mark, .. }
        | Xstats::Pie { ecn_mark, .. }
        | Xstats::FqPie { ecn_mark, .. } => u64::from(*ecn_mark),
        Xstats::Cake(c) => c.tins.iter().map(|t| u64::from(t.ecn_mark)).sum(),
        Xstats::Fq(f) => f.ce_mark,
        Xstats::DualPi2(d) => u64::from(d.ecn_mark),
        Xstats::None => 0,
    }
}

impl Collector for Collect {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = &self.0;
        gauge(
            &mut enc,
            "debloat_gateway_uptime_seconds",
            "Seconds since the gateway started.",
            &[(vec![], s.uptime_s)],
        )?;
        let info: Vec<(Labels, f64)> = dirs(s)
            .into_iter()
            .map(|(dir, d)| {
                let (from, to) = d.path.split_once(" → ").unwrap_or((&d.path, ""));
                let l = vec![
                    ("direction", dir.to_string()),
                    ("from", from.to_string()),
                    ("to", to.to_string()),
                    ("qdisc", d.qdisc.clone()),
                    ("link", d.link.clone()),
                ];
                (l, 1.0)
            })
            .collect();
        gauge(
            &mut enc,
            "debloat_gateway_info",
            "The interfaces, discipline and emulated link of each direction.",
            &info,
        )?;
        self.encode_io(&mut enc)?;
        self.encode_frames(&mut enc)?;
        self.encode_classify(&mut enc)?;
        self.encode_circuits(&mut enc)?;
        self.encode_autorate(&mut enc)?;
        self.encode_queues(&mut enc)?;
        self.encode_tins(&mut enc)
    }
}

impl Collect {
    /// Frames by fate and direction.
    fn encode_frames(&self, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = &self.0;
        let mut frames = Vec::new();
        for (dir, d) in dirs(s) {
            let f = d.frames;
            for (fate, v) in [
                ("received", f.received),
                ("malformed", f.malformed),
                ("oversized", d.intake.oversized),
                ("qdisc_dropped", f.qdisc_dropped),
                ("lost", f.lost),
                ("ecn_marked", f.ecn_marked),
                ("duplicated", f.duplicated),
                ("corrupted", f.corrupted),
                ("reordered", f.reordered),
                ("overlimit", f.overlimit),
                ("buffer_dropped", f.buffer_dropped),
                ("sent", f.sent),
                ("tx_error", d.tx_errors),
            ] {
                frames.push((
                    vec![("direction", dir.to_string()), ("fate", fate.into())],
                    v,
                ));
            }
        }
        counter(
            enc,
            "debloat_gateway_frames",
            "Frames by what happened to them.",
            &frames,
        )?;
        let mut csum = Vec::new();
        for (dir, d) in dirs(s) {
            for (what, v) in [
                ("completed", d.intake.csum_completed),
                ("unfinished", d.intake.csum_unfinished),
            ] {
                csum.push((
                    vec![("direction", dir.to_string()), ("checksum", what.into())],
                    v,
                ));
            }
        }
        counter(
            enc,
            "debloat_gateway_partial_checksum_frames",
            "Frames whose TCP/UDP checksum the sender left for a NIC to finish (checksum offload), completed by the gateway or left as they came.",
            &csum,
        )?;
        let mut umem = Vec::new();
        for (dir, d) in dirs(s) {
            for (how, v) in [
                ("held", d.intake.umem_held),
                ("copied", d.intake.umem_copied),
            ] {
                umem.push((vec![("direction", dir.to_string()), ("how", how.into())], v));
            }
        }
        counter(
            enc,
            "debloat_gateway_umem_frames",
            "AF_XDP frames kept in the UMEM they were received into until sent (held), or copied into the heap because the UMEM had no frame to spare (copied).",
            &umem,
        )?;
        let wait: Vec<(Labels, f64)> = dirs(s)
            .into_iter()
            .map(|(dir, d)| {
                let w = d.intake.ring_wait.total_us as f64 / 1e6;
                (vec![("direction", dir.to_string())], w)
            })
            .collect();
        gauge(
            enc,
            "debloat_gateway_receive_ring_wait_seconds_sum",
            "Total time received frames waited in the kernel's receive ring before the gateway took them (over debloat_gateway_frames{fate=\"received\"}: the mean; a queue the discipline does not see).",
            &wait,
        )?;
        Ok(())
    }

    /// The marking stage: packets per class and direction, per rule, and its other counters.
    /// The shaper-rate controllers: the rate set and the last decision's reason, decisions
    /// and round-trip samples.
    fn encode_autorate(&self, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let (mut rate, mut decisions, mut samples) = (Vec::new(), Vec::new(), Vec::new());
        for (dir, d) in dirs(&self.0) {
            let Some(a) = &d.autorate else { continue };
            let reason = serde_json::to_value(a.reason)
                .ok()
                .and_then(|v| v.get("reason").and_then(|r| r.as_str().map(str::to_string)))
                .unwrap_or_default();
            let l = vec![("direction", dir.to_string()), ("mode", a.mode.to_string())];
            let mut with_reason = l.clone();
            with_reason.push(("reason", reason));
            rate.push((with_reason, a.rate_bps as f64));
            decisions.push((l.clone(), a.decisions));
            samples.push((l, a.samples));
        }
        if rate.is_empty() {
            return Ok(());
        }
        gauge(
            enc,
            "debloat_autorate_rate_bits_per_second",
            "The rate the controller set on the discipline, with the last decision's reason.",
            &rate,
        )?;
        counter(
            enc,
            "debloat_autorate_decisions",
            "Decisions taken.",
            &decisions,
        )?;
        counter(
            enc,
            "debloat_autorate_rtt_samples",
            "Round trips beyond the shaper measured from TCP timestamps.",
            &samples,
        )
    }

    fn encode_classify(&self, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(c) = &self.0.classify else {
            return Ok(());
        };
        let mut classes = Vec::new();
        for (name, e, i) in &c.classes {
            for (dir, v) in [("egress", *e), ("ingress", *i)] {
                classes.push((
                    vec![("class", name.clone()), ("direction", dir.to_string())],
                    v,
                ));
            }
        }
        counter(
            enc,
            "debloat_classify_class_packets",
            "Packets the marking stage gave each class, by direction.",
            &classes,
        )?;
        let rules: Vec<(Labels, u64)> = c
            .rules
            .iter()
            .map(|(r, n)| (vec![("rule", r.clone())], *n))
            .collect();
        counter(
            enc,
            "debloat_classify_rule_packets",
            "Packets each rule of the map files decided.",
            &rules,
        )?;
        let n = &c.counters;
        let events: Vec<(Labels, u64)> = [
            ("remarked", n.remarked),
            ("default", n.defaults),
            ("reply", n.replies),
            ("bulk_flow", n.bulk_flows),
            ("bulk_packet", n.bulk_packets),
            ("prio_packet", n.prio_packets),
            ("flow_eviction", n.flow_evictions),
        ]
        .into_iter()
        .map(|(k, v)| (vec![("event", k.to_string())], v))
        .collect();
        counter(
            enc,
            "debloat_classify_events",
            "The marking stage's other counts: packets re-marked, decided by a default, marked as a reply, bulk flows and their packets, priority packets, flows evicted from the table.",
            &events,
        )?;
        let d = &n.dns;
        let dns: Vec<(Labels, u64)> = [
            ("answer", d.answers),
            ("skipped", d.skipped),
            ("malformed", d.malformed),
            ("address_learnt", d.addresses),
            ("cname", d.cnames),
            ("expired", d.expired),
            ("kept_active", d.kept_active),
            ("eviction", d.evictions),
        ]
        .into_iter()
        .map(|(k, v)| (vec![("event", k.to_string())], v))
        .collect();
        counter(
            enc,
            "debloat_classify_dns_events",
            "DNS snooping for name rules: responses read, messages skipped (queries, errors) or malformed, addresses learnt, CNAME targets remembered, addresses expired or kept because in use, entries evicted from a full table.",
            &dns,
        )?;
        gauge(
            enc,
            "debloat_classify_dns_addresses",
            "Addresses learnt from DNS answers held now.",
            &[(Vec::new(), d.held as f64)],
        )
    }

    /// The wire, the buffer and each discipline's counters and queue.
    fn encode_queues(&self, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = &self.0;
        let rows = |g: &dyn Fn(&DirectionStats) -> f64| -> Vec<(Labels, f64)> {
            dirs(s)
                .into_iter()
                .map(|(dir, d)| (qlabels(dir, d), g(d)))
                .collect()
        };
        let crows = |g: &dyn Fn(&DirectionStats) -> u64| -> Vec<(Labels, u64)> {
            dirs(s)
                .into_iter()
                .map(|(dir, d)| (qlabels(dir, d), g(d)))
                .collect()
        };
        gauge(
            enc,
            "debloat_gateway_on_wire_frames",
            "Frames on the emulated wire now.",
            &rows(&|d| d.on_wire as f64),
        )?;
        gauge(
            enc,
            "debloat_gateway_in_buffer_frames",
            "Frames in the emulated link's own buffer (`buffer N`) now.",
            &rows(&|d| d.in_buffer as f64),
        )?;
        for (name, help, f) in [
            (
                "debloat_qdisc_bytes",
                "Bytes the discipline sent.",
                (|d: &DirectionStats| d.stats.bytes) as fn(&DirectionStats) -> u64,
            ),
            (
                "debloat_qdisc_packets",
                "Packets the discipline sent.",
                |d| d.stats.packets,
            ),
            (
                "debloat_qdisc_drops",
                "Packets the discipline dropped.",
                |d| d.stats.drops,
            ),
            (
                "debloat_qdisc_overlimits",
                "Times the shaper held packets back.",
                |d| d.stats.overlimits,
            ),
            (
                "debloat_qdisc_ecn_marks",
                "Packets the discipline marked CE.",
                |d| ecn_marks(&d.stats.xstats),
            ),
        ] {
            counter(enc, name, help, &crows(&f))?;
        }
        gauge(
            enc,
            "debloat_qdisc_backlog_bytes",
            "Bytes queued in the discipline.",
            &rows(&|d| d.stats.backlog as f64),
        )?;
        gauge(
            enc,
            "debloat_qdisc_qlen_packets",
            "Packets queued in the discipline.",
            &rows(&|d| d.stats.qlen as f64),
        )?;
        let shaped: Vec<(Labels, f64)> = dirs(s)
            .into_iter()
            .filter_map(|(dir, d)| Some((qlabels(dir, d), live::shaper_bps(d)?)))
            .collect();
        gauge(
            enc,
            "debloat_qdisc_shaper_rate_bits_per_second",
            "The shaper's rate now (cake's bandwidth, or the rate controller's); absent when unshaped.",
            &shaped,
        )?;
        Ok(())
    }
}

/// The metrics page for a snapshot.
pub fn render(snap: Snapshot) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Collect(snap)));
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod tests {
    use super::*;
    use crate::path::Counters;
    use debloat_core::{FlowHasher, Qdisc, QdiscSpec};

    pub(crate) fn snapshot(spec: &str) -> Snapshot {
        let q: QdiscSpec = spec.parse().unwrap();
        let stats = q
            .build::<crate::frame::Frame>(FlowHasher::new([1, 2]), 1)
            .stats();
        let d = |path: &str| DirectionStats {
            path: path.into(),
            qdisc: spec.into(),
            link: "rate 10Mbit delay 10ms".into(),
            io: crate::port::Backend {
                io: "af_xdp",
                xdp: Some(crate::io::xdp::XdpInfo {
                    mode: crate::io::xdp::XdpMode::Native,
                    zero_copy: false,
                    busy_poll: false,
                    queues: 2,
                    multi_buffer: true,
                    shared_umem: true,
                }),
                fallback: None,
            },
            stats: stats.clone(),
            frames: Counters {
                received: 10,
                lost: 2,
                sent: 8,
                ..Counters::default()
            },
            intake: crate::intake::Intake {
                oversized: 1,
                csum_completed: 3,
                umem_held: 7,
                umem_copied: 2,
                ..Default::default()
            },
            tx_errors: 0,
            on_wire: 0,
            in_buffer: 0,
            autorate: None,
        };
        Snapshot {
            uptime_s: 3.5,
            egress: d("lan0 → wan0"),
            ingress: d("wan0 → lan0"),
            classify: None,
            circuits: None,
            circuit_traffic: Vec::new(),
            workers: 1,
            shards: Vec::new(),
        }
    }

    #[test]
    fn the_page_has_every_family_with_labels() {
        let page = render(snapshot("cake bandwidth 10Mbit diffserv4"));
        for want in [
            "debloat_gateway_uptime_seconds 3.5",
            r#"debloat_gateway_io_info{direction="egress",interface="lan0",io="af_xdp",xdp_mode="native",zero_copy="false",rx_queues="2",multi_buffer="true",shared_umem="true"} 1"#,
            "debloat_gateway_workers 1",
            r#"debloat_gateway_umem_frames_total{direction="egress",how="held"} 7"#,
            r#"debloat_gateway_umem_frames_total{direction="ingress",how="copied"} 2"#,
            r#"debloat_gateway_frames_total{direction="egress",fate="received"} 10"#,
            r#"debloat_gateway_frames_total{direction="ingress",fate="lost"} 2"#,
            r#"debloat_gateway_frames_total{direction="egress",fate="oversized"} 1"#,
            r#"debloat_gateway_info{direction="egress",from="lan0",to="wan0",qdisc="cake bandwidth 10Mbit diffserv4",link="rate 10Mbit delay 10ms"} 1"#,
            r#"debloat_qdisc_drops_total{direction="egress",qdisc="cake"} 0"#,
            r#"debloat_cake_tin_peak_delay_seconds{direction="ingress",tin="Voice"} 0"#,
            "# TYPE debloat_qdisc_backlog_bytes gauge",
            "# EOF",
        ] {
            assert!(page.contains(want), "missing {want}:\n{page}");
        }
        let fifo = render(snapshot("pfifo"));
        assert!(!fifo.contains("debloat_cake_tin"), "no tins without cake");
        assert!(
            !fifo.contains("debloat_classify"),
            "no marking stage, no family"
        );
    }

    #[test]
    fn the_marking_stage_counts_per_class_rule_and_event() {
        use debloat_core::classify::qosify::{self, Classifier, Direction};
        use debloat_core::flow::FlowKey;
        let mut cfg = qosify::parse_uci("q", crate::qosify_files::SHIPPED).unwrap();
        cfg.add_map("m", "udp:53 voice\n").unwrap();
        let mut c = Classifier::new(cfg, 16, FlowHasher::new([1, 2]));
        for i in 0..3 {
            let k = FlowKey::ip(
                "198.18.1.2".parse().unwrap(),
                "198.18.2.2".parse().unwrap(),
                4000,
                53,
                17,
            );
            let mut m = debloat_core::PacketMeta::new(90, k);
            c.mark(&mut m, Direction::Up, i);
        }
        let mut snap = snapshot("cake bandwidth 10Mbit diffserv4");
        snap.classify = Some(crate::snapshot::ClassifyStats::of(&c));
        let page = render(snap);
        for want in [
            r#"debloat_classify_class_packets_total{class="voice",direction="egress"} 3"#,
            r#"debloat_classify_rule_packets_total{rule="udp:53 voice"} 3"#,
            r#"debloat_classify_events_total{event="remarked"} 3"#,
        ] {
            assert!(page.contains(want), "missing {want}:\n{page}");
        }
    }
}
