//! Statistics as `tc -s qdisc show` prints them, in text and (through serde) JSON.
//!
//! Counter meanings follow the kernel: `bytes`/`packets` are sent; `drops` counts every drop
//! (limit, AQM, ACK filter); CAKE's per-tin `pkts`/`bytes` count **enqueued** packets and its
//! `memory used` is the peak; `drops` per tin excludes ACK-filter drops.

use crate::units::{fmt_rate, fmt_size, fmt_time, fmt_usecs};
use serde::Serialize;

pub use crate::qdisc::class_stats::{tc_show, tree_tc_string, ClassCounters, ClassStats};
use std::fmt::Write;

mod tc_text;
pub use tc_text::fmt_g;
use tc_text::{write_cake, write_codel, write_dualpi2, write_fq, write_fq_codel, write_pie};

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
