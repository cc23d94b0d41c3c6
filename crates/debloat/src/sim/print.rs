//! What `debloat sim` prints: the headline, the flows, the pings, the stations and the queues.

use debloat_core::units::fmt_rate;
use debloat_sim::scenario::{Config, Summary, Test};

pub(crate) fn print_table(cfg: &Config, s: &Summary) {
    println!("{}", headline(cfg));
    print_body(s);
}

/// The run's first line: test, link, qdiscs.
pub(crate) fn headline(cfg: &Config) -> String {
    let cc = if cfg.test == Test::Custom {
        String::new()
    } else {
        format!(", cc {}", cfg.cc_words())
    };
    let over = match &cfg.wifi {
        Some(w) => w.describe(),
        None => {
            let side = |bps: u64, m: &Option<debloat_core::link::ModemSpec>| match m {
                Some(_) => "trace".to_string(),
                None => fmt_rate(bps),
            };
            format!(
                "{}/{} (down/up)",
                side(cfg.down_bps, &cfg.adaptive.modem_down),
                side(cfg.up_bps, &cfg.adaptive.modem_up)
            )
        }
    };
    let hosts = cfg
        .host_qdisc
        .as_ref()
        .map(|q| format!(", hosts' qdisc {}", q.kind()))
        .unwrap_or_default();
    format!(
        "{} over {over}, base RTT {} ms, {} s{cc}{}{hosts}",
        cfg.test.name(),
        cfg.rtt_ns as f64 / 1e6,
        cfg.length_s,
        if cfg.ecn { ", ECN" } else { "" }
    )
}

fn print_body(s: &Summary) {
    print_flows(s);
    for p in &s.pings {
        let f = |l: &Option<debloat_sim::scenario::Latency>| match l {
            Some(l) => format!("p50 {:.1} / p90 {:.1} / p99 {:.1} ms", l.p50, l.p90, l.p99),
            None => "-".into(),
        };
        println!(
            "\n  {}: under load {}; idle {}; loss {:.1} %",
            p.name,
            f(&p.latency_ms),
            f(&p.idle_latency_ms),
            p.loss_pct
        );
    }
    if let Some(w) = &s.wifi {
        print_stations(w);
    }
    print_queues(s);
}

fn print_flows(s: &Summary) {
    if !s.flows.is_empty() {
        println!(
            "\n  {:<20} {:>12} {:>9} {:>8} {:>8} {:>9}",
            "flow", "goodput", "loss", "retrans", "RTOs", "CE recv"
        );
        println!(
            "  {:<20} {:>12} {:>9} {:>8} {:>8} {:>9}",
            "", "Mbit/s", "%", "pkts", "", "pkts"
        );
        for f in &s.flows {
            println!(
                "  {:<20} {:>12.2} {:>9.2} {:>8} {:>8} {:>9}",
                f.name, f.throughput_mbps, f.loss_pct, f.retransmits, f.timeouts, f.ce_marked
            );
        }
        let total: f64 = s.flows.iter().map(|f| f.throughput_mbps).sum();
        println!("  {:<20} {:>12.2}", "total", total);
        if let Some(j) = s.jain_fairness {
            println!("  Jain's fairness index {j:.3}");
        }
    }
}

fn print_stations(w: &debloat_sim::scenario::WifiSummary) {
    println!(
        "\n  {:<12} {:>10} {:>10} {:>9} {:>9} {:>10} {:>9}",
        "station", "PHY", "goodput", "airtime", "ping p50", "AQL max", "failed"
    );
    println!(
        "  {:<12} {:>10} {:>10} {:>9} {:>9} {:>10} {:>9}",
        "", "Mbit/s", "Mbit/s", "share", "ms", "ms", "MPDUs"
    );
    for st in &w.stations {
        println!(
            "  {:<12} {:>10.1} {:>10.2} {:>8.1}% {:>9} {:>10.1} {:>9}",
            st.host,
            st.phy_mbps,
            st.throughput_mbps,
            st.airtime_share * 100.0,
            st.latency_ms
                .as_ref()
                .map_or("-".into(), |l| format!("{:.1}", l.p50)),
            st.max_aql_pending_ms,
            st.failed_frames
        );
    }
    println!(
        "  Jain's index over airtime {}; channel busy {:.1} %; {} collisions",
        w.airtime_jain.map_or("-".into(), |j| format!("{j:.3}")),
        w.channel_busy * 100.0,
        w.collisions
    );
}

fn print_queues(s: &Summary) {
    println!(
        "\n  {:<16} {:<36} {:>9} {:>8} {:>8} {:>8} {:>16}",
        "queue", "qdisc", "sent", "dropped", "marked", "max q", "sojourn p50/p99"
    );
    for q in &s.queues {
        let mut name = q.qdisc.clone();
        if name.len() > 36 {
            name.truncate(33);
            name.push_str("...");
        }
        println!(
            "  {:<16} {:<36} {:>9} {:>8} {:>8} {:>8} {:>7.1}/{:<6.1}ms",
            q.r#where,
            name,
            q.sent_pkts,
            q.dropped,
            q.marked,
            q.max_backlog_pkts,
            q.sojourn_ms.p50,
            q.sojourn_ms.p99
        );
        if let Some(m) = &q.modem {
            let name = format!("FIFO {}, trace {:.2} Mbit/s mean", m.limit, m.capacity_mbps);
            let place = q.r#where.replace("bottleneck", "modem");
            println!(
                "  {:<16} {:<36} {:>9} {:>8} {:>8} {:>8}",
                place, name, m.departed, m.dropped, 0, m.max_packets
            );
        }
    }
}
