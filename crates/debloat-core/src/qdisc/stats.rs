//! Statistics as `tc -s qdisc show` prints them, in text and (through serde) JSON.
//!
//! Counter meanings follow the kernel: `bytes`/`packets` are sent; `drops` counts every drop
//! (limit, AQM, ACK filter); CAKE's per-tin `pkts`/`bytes` count **enqueued** packets and its
//! `memory used` is the peak; `drops` per tin excludes ACK-filter drops.

use crate::units::{fmt_rate, fmt_size, fmt_time, fmt_usecs};
use serde::Serialize;

pub use crate::qdisc::class_stats::{tc_show, tree_tc_string, ClassCounters, ClassStats};
use std::fmt::Write;

/// One discipline's statistics.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct QdiscStats {
    /// Discipline name.
    pub kind: String,
    /// Its options as tc prints them.
    pub options: String,
    /// Bytes sent.
    pub bytes: u64,
    /// Packets sent.
    pub packets: u64,
    /// Packets dropped, all reasons.
    pub drops: u64,
    /// Times the shaper held packets back.
    pub overlimits: u64,
    /// Always 0 (no driver requeues here).
    pub requeues: u64,
    /// Bytes queued.
    pub backlog: u64,
    /// Packets queued.
    pub qlen: u64,
    /// Discipline-specific counters.
    pub xstats: Xstats,
}

/// Discipline-specific statistics (`TCA_STATS_APP`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Xstats {
    /// None (fifos).
    None,
    /// codel.
    Codel {
        /// Current count.
        count: u32,
        /// Count at last entry.
        lastcount: u32,
        /// Last sojourn, µs.
        ldelay_us: u64,
        /// In the dropping state.
        dropping: bool,
        /// Next drop relative to the last call, µs (negative: overdue).
        drop_next_us: i64,
        /// Largest packet.
        maxpacket: u32,
        /// Marks by the control law.
        ecn_mark: u32,
        /// Marks by ce_threshold.
        ce_mark: u32,
        /// Tail drops at limit.
        drop_overlimit: u32,
    },
    /// fq_codel.
    FqCodel {
        /// Largest packet.
        maxpacket: u32,
        /// Packets dropped by overflow.
        drop_overlimit: u32,
        /// Flows that became active.
        new_flow_count: u32,
        /// Marks by the control law.
        ecn_mark: u32,
        /// Marks by ce_threshold.
        ce_mark: u32,
        /// Truesize bytes in use.
        memory_used: u64,
        /// Overflow drops due to memory.
        drop_overmemory: u32,
        /// Flows on new_flows.
        new_flows_len: u32,
        /// Flows on old_flows.
        old_flows_len: u32,
    },
    /// cake.
    Cake(Box<CakeStats>),
    /// fq_pie (`struct tc_fq_pie_xstats`).
    FqPie {
        /// Packets queued.
        packets_in: u32,
        /// Packets dropped at the limit.
        overlimit: u32,
        /// Arrivals over the memory limit (counted only).
        overmemory: u32,
        /// Packets dropped, early or at the limit.
        dropped: u32,
        /// Packets CE-marked.
        ecn_mark: u32,
        /// Flows that became active.
        new_flow_count: u32,
        /// Flows on new_flows.
        new_flows_len: u32,
        /// Flows on old_flows.
        old_flows_len: u32,
        /// Truesize bytes queued.
        memory_used: u32,
    },
    /// fq (`struct tc_fq_qd_stats`).
    Fq(Box<FqXstats>),
    /// dualpi2 (`struct tc_dualpi2_xstats`).
    DualPi2(Box<DualPi2Xstats>),
    /// pie (`struct tc_pie_xstats`).
    Pie {
        /// Drop probability as the kernel reports it: a fraction of 2^64.
        prob: u64,
        /// Queue delay, µs.
        delay_us: u64,
        /// Drain rate, bytes/s (only with `dq_rate_estimator`).
        avg_dq_rate: Option<u32>,
        /// Packets queued.
        packets_in: u32,
        /// Packets dropped at the limit.
        overlimit: u32,
        /// Packets dropped, early or at the limit.
        dropped: u32,
        /// The longest queue an arriving packet found.
        maxq: u32,
        /// Packets CE-marked.
        ecn_mark: u32,
    },
    /// deadline.
    Deadline {
        /// Packets dropped for exceeding the deadline.
        deadline_drops: u32,
        /// Packets marked instead.
        ecn_mark: u32,
        /// Tail drops at limit.
        drop_overlimit: u32,
    },
}

/// CAKE's qdisc-level statistics.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CakeStats {
    /// Shaper rate, bytes/s (0 = unlimited).
    pub capacity_estimate: u64,
    /// buffer_limit, bytes.
    pub memory_limit: u64,
    /// Peak buffer use, bytes.
    pub memory_used: u64,
    /// Average L2 header size.
    pub avg_hdr_offset: u32,
    /// Smallest network-layer size seen.
    pub min_network_size: u32,
    /// Largest network-layer size seen.
    pub max_network_size: u32,
    /// Smallest overhead-adjusted size.
    pub min_adj_size: u32,
    /// Largest overhead-adjusted size.
    pub max_adj_size: u32,
    /// Per-tin statistics in tc's column order.
    pub tins: Vec<TinStats>,
}

/// `fq`'s statistics (`struct tc_fq_qd_stats`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FqXstats {
    /// Flows allocated.
    pub flows: u32,
    /// Flows with no packet.
    pub inactive_flows: u32,
    /// Flows waiting for their time.
    pub throttled_flows: u32,
    /// Until the next throttled flow's time plus the timer slack, ns (≤ 0: none).
    pub next_packet_delay_ns: i64,
    /// Flows collected.
    pub gc_flows: u64,
    /// Times a flow was throttled.
    pub throttled: u64,
    /// Average lateness of the wake-ups, ns (an EWMA of 1/8).
    pub unthrottle_latency_ns: u64,
    /// Packets CE-marked past `ce_threshold`.
    pub ce_mark: u64,
    /// Drops at `flow_limit`.
    pub flows_plimit: u64,
    /// Pacing delays clamped to 1 s.
    pub pkts_too_long: u64,
    /// Drops beyond the horizon.
    pub horizon_drops: u64,
    /// Timestamps capped at the horizon.
    pub horizon_caps: u64,
    /// Packets that took the fast path (not printed by iproute2 6.1).
    pub fastpath_packets: u64,
    /// Drops at `limit`, per band (not printed by iproute2 6.1).
    pub band_drops: [u64; 3],
    /// Packets queued, per band (not printed by iproute2 6.1).
    pub band_pkt_count: [u32; 3],
}

/// `dualpi2`'s statistics (`struct tc_dualpi2_xstats`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DualPi2Xstats {
    /// The base probability p, a fraction of 2³² − 1.
    pub prob: u32,
    /// The C queue's head sojourn, µs.
    pub delay_c_us: u32,
    /// The L queue's head sojourn, µs.
    pub delay_l_us: u32,
    /// Packets queued in C.
    pub packets_in_c: u32,
    /// Packets queued in L.
    pub packets_in_l: u32,
    /// Most packets held at an arrival.
    pub maxq: u32,
    /// CE marks (the step's included).
    pub ecn_mark: u32,
    /// CE marks by the L queue's step.
    pub step_marks: u32,
    /// The WRR credit: > 0 favours C next.
    pub credit: i32,
    /// Truesize bytes held.
    pub memory_used: u32,
    /// Their peak.
    pub max_memory_used: u32,
    /// The memory limit.
    pub memory_limit: u32,
}

/// One CAKE tin's statistics (tc column in the comment).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TinStats {
    /// Column heading.
    pub name: String,
    /// thresh: rate in bytes/s.
    pub threshold_rate: u64,
    /// target, µs.
    pub target_us: u64,
    /// interval, µs.
    pub interval_us: u64,
    /// pk_delay, µs.
    pub peak_delay_us: u64,
    /// av_delay, µs.
    pub avg_delay_us: u64,
    /// sp_delay, µs.
    pub base_delay_us: u64,
    /// backlog, bytes.
    pub backlog_bytes: u64,
    /// pkts (enqueued).
    pub sent_packets: u32,
    /// bytes (enqueued).
    pub sent_bytes: u64,
    /// way_inds.
    pub way_indirect_hits: u32,
    /// way_miss.
    pub way_misses: u32,
    /// way_cols.
    pub way_collisions: u32,
    /// drops.
    pub drops: u32,
    /// marks.
    pub ecn_mark: u32,
    /// ack_drop.
    pub ack_drops: u32,
    /// sp_flows.
    pub sparse_flows: u32,
    /// bk_flows.
    pub bulk_flows: u32,
    /// un_flows.
    pub unresponsive_flows: u32,
    /// max_len.
    pub max_pkt_len: u32,
    /// quantum.
    pub flow_quantum: u32,
}

impl QdiscStats {
    /// Add another copy's counters (another worker's): bytes, packets, drops, overlimits,
    /// requeues, backlog and qlen; the kind, options and `xstats` stay this copy's.
    pub fn add_counts(&mut self, o: &QdiscStats) {
        self.bytes += o.bytes;
        self.packets += o.packets;
        self.drops += o.drops;
        self.overlimits += o.overlimits;
        self.requeues += o.requeues;
        self.backlog += o.backlog;
        self.qlen += o.qlen;
    }

    /// The `tc -s qdisc show` rendering.
    pub fn to_tc_string(&self) -> String {
        self.to_tc_string_at("1: root refcnt 2")
    }

    /// The same, for a discipline at `place` (`10: parent 1:10` for an htb leaf).
    pub fn to_tc_string_at(&self, place: &str) -> String {
        let mut s = String::new();
        // iproute2 ends every option it prints with a space, except the fifos' `limit` and
        // pfifo_fast's priomap and htb's direct_qlen.
        let end = if self.kind.ends_with("fifo") || self.kind == "pfifo_fast" || self.kind == "htb"
        {
            ""
        } else {
            " "
        };
        let _ = writeln!(s, "qdisc {} {place} {}{end}", self.kind, self.options);
        let _ = writeln!(
            s,
            " Sent {} bytes {} pkt (dropped {}, overlimits {} requeues {}) ",
            self.bytes, self.packets, self.drops, self.overlimits, self.requeues
        );
        let _ = writeln!(
            s,
            " backlog {}b {}p requeues {}",
            self.backlog, self.qlen, self.requeues
        );
        match &self.xstats {
            Xstats::None => {}
            Xstats::Codel { .. } => write_codel(&mut s, &self.xstats),
            Xstats::FqCodel { .. } => write_fq_codel(&mut s, &self.xstats),
            Xstats::Deadline {
                deadline_drops,
                ecn_mark,
                drop_overlimit,
            } => {
                let _ = writeln!(s, "  deadline_drops {deadline_drops} ecn_mark {ecn_mark} drop_overlimit {drop_overlimit}");
            }
            Xstats::Cake(c) => write_cake(&mut s, c),
            Xstats::Pie { .. } => write_pie(&mut s, &self.xstats),
            Xstats::Fq(x) => write_fq(&mut s, x),
            Xstats::DualPi2(x) => write_dualpi2(&mut s, x),
            Xstats::FqPie {
                packets_in,
                overlimit,
                overmemory,
                dropped,
                ecn_mark,
                new_flow_count,
                new_flows_len,
                old_flows_len,
                memory_used,
            } => {
                let _ = writeln!(s, "  pkts_in {packets_in} overlimit {overlimit} overmemory {overmemory} dropped {dropped} ecn_mark {ecn_mark}");
                let _ = writeln!(s, "  new_flow_count {new_flow_count} new_flows_len {new_flows_len} old_flows_len {old_flows_len} memory_used {memory_used}");
            }
        }
        s
    }
}

/// PIE's statistics as iproute2 prints them (`prob` with C's `%lg`).
/// iproute2 6.1's `fq_print_xstats` (the lab's `tc`; 6.7 added the bands' counters).
fn write_fq(s: &mut String, x: &FqXstats) {
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
fn write_dualpi2(s: &mut String, x: &DualPi2Xstats) {
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

fn write_pie(s: &mut String, x: &Xstats) {
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
fn write_codel(s: &mut String, x: &Xstats) {
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
fn write_fq_codel(s: &mut String, x: &Xstats) {
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

fn write_cake(s: &mut String, c: &CakeStats) {
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
