//! The discipline-specific lines of `tc -s qdisc show` (each kind's `print_xstats` in
//! iproute2), and C's `%g` that they print fractions with.

use super::*;

/// iproute2 6.1's `fq_print_xstats` (the lab's `tc`; 6.7 added the bands' counters).
pub(super) fn write_fq(s: &mut String, x: &FqXstats) {
    let _ = write!(
        s,
        "  flows {} (inactive {} throttled {})",
        x.flows, x.inactive_flows, x.throttled_flows
    );
    if x.next_packet_delay_ns > 0 {
        let _ = write!(
            s,
            " next_packet_delay {}",
            fmt_time(x.next_packet_delay_ns as u64)
        );
    }
    let _ = write!(
        s,
        "\n  gc {} highprio 0 throttled {}",
        x.gc_flows, x.throttled
    );
    if x.unthrottle_latency_ns > 0 {
        let _ = write!(s, " latency {}", fmt_time(x.unthrottle_latency_ns));
    }
    if x.ce_mark > 0 {
        let _ = write!(s, " ce_mark {}", x.ce_mark);
    }
    if x.flows_plimit > 0 {
        let _ = write!(s, " flows_plimit {}", x.flows_plimit);
    }
    if x.pkts_too_long > 0 || x.horizon_drops > 0 || x.horizon_caps > 0 {
        s.push('\n');
        if x.pkts_too_long > 0 {
            let _ = write!(s, " pkts_too_long {}", x.pkts_too_long);
        }
        if x.horizon_drops > 0 {
            let _ = write!(s, " horizon_drops {}", x.horizon_drops);
        }
        if x.horizon_caps > 0 {
            let _ = write!(s, "  horizon_caps {}", x.horizon_caps);
        }
    }
    s.push('\n');
}

/// iproute2 6.17's `dualpi2_print_xstats` (no lab kernel has sch_dualpi2 to check it against:
/// Debian's User-Mode Linux leaves it out). It ends with a line break of its own, after which
/// tc adds one more.
pub(super) fn write_dualpi2(s: &mut String, x: &DualPi2Xstats) {
    let prob = f64::from(x.prob) / f64::from(u32::MAX);
    let _ = writeln!(
        s,
        "prob {prob:.6} delay_c {}us delay_l {}us",
        x.delay_c_us, x.delay_l_us
    );
    let _ = writeln!(
        s,
        "pkts_in_c {} pkts_in_l {} maxq {}",
        x.packets_in_c, x.packets_in_l, x.maxq
    );
    let _ = writeln!(s, "ecn_mark {} step_mark {}", x.ecn_mark, x.step_marks);
    let queue = if x.credit > 0 { "C-queue" } else { "L-queue" };
    let _ = writeln!(s, "credit {} ({queue})", x.credit);
    let _ = writeln!(
        s,
        "memory_used {} (max {}) of memory limit {}\n",
        x.memory_used, x.max_memory_used, x.memory_limit
    );
}

/// PIE's statistics as iproute2 prints them (`prob` with C's `%lg`).
pub(super) fn write_pie(s: &mut String, x: &Xstats) {
    let Xstats::Pie {
        prob,
        delay_us,
        avg_dq_rate,
        packets_in,
        overlimit,
        dropped,
        maxq,
        ecn_mark,
    } = x
    else {
        return;
    };
    let p = *prob as f64 / u64::MAX as f64;
    let _ = write!(s, "  prob {} delay {}", fmt_g(p), fmt_usecs(*delay_us));
    if let Some(r) = avg_dq_rate {
        // Bytes/s as a number, as the lab's iproute2 (6.1) prints it; newer iproute2 prints a
        // rate (`tc_print_rate`).
        let _ = write!(s, " avg_dq_rate {r}");
    }
    s.push('\n');
    let _ = writeln!(
        s,
        "  pkts_in {packets_in} overlimit {overlimit} dropped {dropped} maxq {maxq} ecn_mark {ecn_mark}"
    );
}

/// C's `%g`: six significant digits, trailing zeros dropped, the exponent form below 1e-4
/// and from 1e6 on (0.0123 → "0.0123", 2.5e-05 → "2.5e-05", 0 → "0").
pub fn fmt_g(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return if x == 0.0 { "0".into() } else { x.to_string() };
    }
    let sci = format!("{x:.5e}");
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let trim = |m: &str| {
        if m.contains('.') {
            m.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            m.to_string()
        }
    };
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{}e{sign}{:02}", trim(mant), exp.abs());
    }
    trim(&format!("{x:.*}", (5 - exp) as usize))
}

/// CoDel's statistics as iproute2 prints them.
pub(super) fn write_codel(s: &mut String, x: &Xstats) {
    let Xstats::Codel {
        count,
        lastcount,
        ldelay_us,
        dropping,
        drop_next_us,
        maxpacket,
        ecn_mark,
        ce_mark,
        drop_overlimit,
    } = x
    else {
        return;
    };
    let _ = write!(
        s,
        "  count {count} lastcount {lastcount} ldelay {}",
        fmt_usecs(*ldelay_us)
    );
    if *dropping {
        let _ = write!(s, " dropping");
    }
    let _ = writeln!(s, " drop_next {}us", drop_next_us);
    let _ = write!(
        s,
        "  maxpacket {maxpacket} ecn_mark {ecn_mark} drop_overlimit {drop_overlimit}"
    );
    if *ce_mark > 0 {
        let _ = write!(s, " ce_mark {ce_mark}");
    }
    s.push('\n');
}

/// FQ-CoDel's statistics as iproute2 prints them (the counters that are 0 left out, as it does).
pub(super) fn write_fq_codel(s: &mut String, x: &Xstats) {
    let Xstats::FqCodel {
        maxpacket,
        drop_overlimit,
        new_flow_count,
        ecn_mark,
        ce_mark,
        memory_used,
        drop_overmemory,
        new_flows_len,
        old_flows_len,
    } = x
    else {
        return;
    };
    let _ = write!(s, "  maxpacket {maxpacket} drop_overlimit {drop_overlimit} new_flow_count {new_flow_count} ecn_mark {ecn_mark}");
    if *ce_mark > 0 {
        let _ = write!(s, " ce_mark {ce_mark}");
    }
    if *memory_used > 0 {
        let _ = write!(s, " memory_used {memory_used}");
    }
    if *drop_overmemory > 0 {
        let _ = write!(s, " drop_overmemory {drop_overmemory}");
    }
    s.push('\n');
    let _ = writeln!(
        s,
        "  new_flows_len {new_flows_len} old_flows_len {old_flows_len}"
    );
}

/// One row of the per-tin table: its tc name and how to print a tin's value.
type Row = (&'static str, fn(&TinStats) -> String);

pub(super) fn write_cake(s: &mut String, c: &CakeStats) {
    let _ = writeln!(
        s,
        " memory used: {} of {}",
        fmt_size(c.memory_used),
        fmt_size(c.memory_limit)
    );
    let _ = writeln!(
        s,
        " capacity estimate: {}",
        fmt_rate(c.capacity_estimate * 8)
    );
    let _ = writeln!(
        s,
        " min/max network layer size: {:>12} /{:>8}",
        c.min_network_size, c.max_network_size
    );
    let _ = writeln!(
        s,
        " min/max overhead-adjusted size: {:>8} /{:>8}",
        c.min_adj_size, c.max_adj_size
    );
    let _ = writeln!(s, " average network hdr offset: {:>12}\n", c.avg_hdr_offset);
    // iproute2's table: a 10-character label column, then 13 characters per tin.
    let _ = write!(s, "{:<10}", "");
    for t in &c.tins {
        let _ = write!(s, "{:>13}", t.name);
    }
    s.push('\n');
    let rows: [Row; 20] = [
        ("thresh", |t| fmt_rate(t.threshold_rate * 8)),
        ("target", |t| fmt_usecs(t.target_us)),
        ("interval", |t| fmt_usecs(t.interval_us)),
        ("pk_delay", |t| fmt_usecs(t.peak_delay_us)),
        ("av_delay", |t| fmt_usecs(t.avg_delay_us)),
        ("sp_delay", |t| fmt_usecs(t.base_delay_us)),
        ("backlog", |t| format!("{}b", t.backlog_bytes)),
        ("pkts", |t| t.sent_packets.to_string()),
        ("bytes", |t| t.sent_bytes.to_string()),
        ("way_inds", |t| t.way_indirect_hits.to_string()),
        ("way_miss", |t| t.way_misses.to_string()),
        ("way_cols", |t| t.way_collisions.to_string()),
        ("drops", |t| t.drops.to_string()),
        ("marks", |t| t.ecn_mark.to_string()),
        ("ack_drop", |t| t.ack_drops.to_string()),
        ("sp_flows", |t| t.sparse_flows.to_string()),
        ("bk_flows", |t| t.bulk_flows.to_string()),
        ("un_flows", |t| t.unresponsive_flows.to_string()),
        ("max_len", |t| t.max_pkt_len.to_string()),
        ("quantum", |t| t.flow_quantum.to_string()),
    ];
    for (name, f) in rows.iter() {
        let _ = write!(s, "  {name:<8}");
        for t in &c.tins {
            let _ = write!(s, "{:>13}", f(t));
        }
        s.push('\n');
    }
    s.push('\n');
}
