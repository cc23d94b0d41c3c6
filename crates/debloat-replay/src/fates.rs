//! The fates file: what happened to every input packet, one row each, in input order.

use crate::error::{Context, Result};
use debloat_core::path::{Event, PathDrop};
use debloat_core::Record;
use std::path::Path;

/// A packet's fate while the replay runs.
pub struct Fate {
    t_enq: u64,
    outcome: Option<Outcome>,
    /// When it reached the far end of the link (the first copy, if the wire duplicated it).
    arrived: Option<u64>,
    malformed: bool,
}

enum Outcome {
    Sent {
        start: u64,
        ecn_out: u8,
        dscp_out: u8,
        len: u32,
    },
    Dropped {
        at: u64,
        reason: &'static str,
    },
    /// Lost by the emulated link's loss model as it entered the link (no time on it).
    Lost {
        at: u64,
        ecn_out: u8,
        dscp_out: u8,
        len: u32,
    },
}

impl Fate {
    /// Handed to the discipline at `t`.
    pub fn queued(t: u64) -> Fate {
        Fate {
            t_enq: t,
            outcome: None,
            arrived: None,
            malformed: false,
        }
    }
    /// A capture packet that did not parse.
    pub fn malformed() -> Fate {
        Fate {
            t_enq: 0,
            outcome: None,
            arrived: None,
            malformed: true,
        }
    }
}

/// One row of the fates CSV.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Row {
    /// Input position.
    pub id: u64,
    /// When it reached the discipline.
    pub t_enq_ns: u64,
    /// `sent`, `dropped` (by the discipline, or malformed) or `lost` (let go by the
    /// discipline, lost after it: the emulated link's loss model as it entered the link —
    /// `t_deq_ns` is then that moment — or the modem's full FIFO, the wire's `limit`).
    pub fate: &'static str,
    /// Why it was dropped or lost (empty when sent).
    pub reason: String,
    /// Start of transmission (empty when dropped).
    pub t_deq_ns: Option<u64>,
    /// Time in the queue: to the start of transmission, or to the drop.
    pub sojourn_ns: Option<u64>,
    /// ECN codepoint it left with (3 = CE; empty when dropped).
    pub ecn_out: Option<u8>,
    /// When it reached the far end of the link: after its transmission, the modem's queue and
    /// the link's delay (empty when dropped or lost).
    pub t_arrive_ns: Option<u64>,
    /// DSCP it left with (written only when the marking stage ran; empty when dropped).
    #[serde(skip)]
    pub dscp_out: Option<u8>,
    /// Frame length (not written).
    #[serde(skip)]
    pub len: u32,
}

/// Record a bottleneck event against its packet. Sent packets are also kept for the pcap.
pub fn record(
    e: Event<'_, Record>,
    fates: &mut [Option<Fate>],
    delivered: &mut Vec<(u64, Record)>,
) {
    let (id, outcome) = match e {
        Event::Sent { packet, start, .. } => {
            delivered.push((start, *packet));
            (
                packet.id,
                Outcome::Sent {
                    start,
                    ecn_out: packet.meta.ecn.bits(),
                    dscp_out: packet.meta.dscp,
                    len: packet.meta.len,
                },
            )
        }
        Event::Dropped { packet, reason, at } => (
            packet.id,
            match reason {
                PathDrop::Qdisc(r) => Outcome::Dropped {
                    at,
                    reason: r.as_str(),
                },
                PathDrop::Buffer => Outcome::Dropped {
                    at,
                    reason: "buffer",
                },
                PathDrop::Classify => Outcome::Dropped {
                    at,
                    reason: "classify",
                },
                PathDrop::Lost => Outcome::Lost {
                    at,
                    ecn_out: packet.meta.ecn.bits(),
                    dscp_out: packet.meta.dscp,
                    len: packet.meta.len,
                },
            },
        ),
        Event::Delivered { packet, at } => {
            if let Some(Some(f)) = fates.get_mut(packet.id as usize) {
                f.arrived.get_or_insert(at);
            }
            return;
        }
        // Its fate is what the link then does with it.
        Event::Dequeued { .. } => return,
    };
    if let Some(Some(f)) = fates.get_mut(id as usize) {
        f.outcome = Some(outcome);
    }
}

/// Turn fates into rows, once the link is empty; a packet sent that never arrived is `lost`
/// for `lost_reason`. `None` if any packet has no outcome (an accounting bug).
pub fn finish(fates: Vec<Option<Fate>>, lost_reason: &str) -> Option<Vec<Row>> {
    fates
        .into_iter()
        .enumerate()
        .map(|(i, f)| {
            let f = f?;
            let id = i as u64;
            let row = |fate, reason: &str, t_deq, sojourn, ecn_out, dscp_out, len| Row {
                id,
                t_enq_ns: f.t_enq,
                fate,
                reason: reason.to_string(),
                t_deq_ns: t_deq,
                sojourn_ns: sojourn,
                ecn_out,
                t_arrive_ns: f.arrived,
                dscp_out,
                len,
            };
            if f.malformed {
                return Some(row("dropped", "malformed", None, None, None, None, 0));
            }
            Some(match f.outcome? {
                Outcome::Sent {
                    start,
                    ecn_out,
                    dscp_out,
                    len,
                } => row(
                    if f.arrived.is_some() { "sent" } else { "lost" },
                    if f.arrived.is_some() { "" } else { lost_reason },
                    Some(start),
                    Some(start.saturating_sub(f.t_enq)),
                    Some(ecn_out),
                    Some(dscp_out),
                    len,
                ),
                Outcome::Lost {
                    at,
                    ecn_out,
                    dscp_out,
                    len,
                } => row(
                    "lost",
                    "wire",
                    Some(at),
                    Some(at.saturating_sub(f.t_enq)),
                    Some(ecn_out),
                    Some(dscp_out),
                    len,
                ),
                Outcome::Dropped { at, reason } => row(
                    "dropped",
                    reason,
                    None,
                    Some(at.saturating_sub(f.t_enq)),
                    None,
                    None,
                    0,
                ),
            })
        })
        .collect()
}

/// Write the rows as CSV with header
/// `id,t_enq_ns,fate,reason,t_deq_ns,sojourn_ns,ecn_out,t_arrive_ns`, and a last column
/// `dscp_out` when `with_dscp` (the marking stage ran).
pub fn write_csv(path: &Path, rows: &[Row], with_dscp: bool) -> Result<()> {
    let mut w =
        csv::Writer::from_path(path).with_context(|| format!("creating {}", path.display()))?;
    if !with_dscp {
        for r in rows {
            w.serialize(r)?;
        }
    } else {
        w.write_record([
            "id",
            "t_enq_ns",
            "fate",
            "reason",
            "t_deq_ns",
            "sojourn_ns",
            "ecn_out",
            "t_arrive_ns",
            "dscp_out",
        ])?;
        let opt = |v: Option<u64>| v.map_or(String::new(), |v| v.to_string());
        for r in rows {
            w.write_record([
                r.id.to_string(),
                r.t_enq_ns.to_string(),
                r.fate.to_string(),
                r.reason.clone(),
                opt(r.t_deq_ns),
                opt(r.sojourn_ns),
                opt(r.ecn_out.map(u64::from)),
                opt(r.t_arrive_ns),
                opt(r.dscp_out.map(u64::from)),
            ])?;
        }
    }
    w.flush()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
