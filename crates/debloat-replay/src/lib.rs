//! # debloat-replay
//!
//! A packet trace through one discipline and one link, offline: the core's data path
//! ([`debloat_core::path::DataPath`], the same one the gateway runs) driven by a trace's
//! timestamps instead of a clock. `debloat replay` is a thin command over this crate.
//!
//! The link ([`LinkSpec`]) is what the gateway's `--emulate-*` words describe: a rate, netem's
//! delay and loss, and a capacity trace with the modem's FIFO behind the discipline
//! (`rate trace FILE buffer N`, the same [`debloat_core::link::Modem`] the simulator and the
//! gateway use).
//!
//! Inputs: a CSV trace (`t_ns,src,dst,sport,dport,proto,len,dscp,ecn`, [`trace`]) or a pcap
//! capture (Ethernet or raw IP; its timestamps and headers, [`capture`]). Outputs: one
//! [`fates::Row`] per input packet in input order, the delivered packets (for a pcap written
//! with [`capture::write_delivered`]), the discipline's statistics as `tc -s qdisc show` prints
//! them, and a [`Summary`] of the numbers people ask first.
//!
//! Every input packet gets exactly one fate: sent (and when it arrived at the far end), dropped
//! by the discipline (with its reason), lost after it (the modem's full FIFO, or the wire's
//! emulated loss), or malformed (a capture packet that does not parse; counted, never a panic).

#![warn(missing_docs)]

pub mod capture;
pub mod error;
pub mod fates;
pub mod trace;

pub use error::{ReplayError, Result};

use debloat_core::classify::Classify;
use debloat_core::link::{Emulation, ModemSpec};
use debloat_core::path::{DataPath, Event};
use debloat_core::Direction;
use debloat_core::{FlowHasher, QdiscSpec, QdiscStats, Record};
use debloat_report::percentile::percentile;
use error::{bail, Context};
use fates::Fate;

/// One packet to replay.
pub struct Input {
    /// Arrival time, ns.
    pub t_ns: u64,
    /// The packet (id = its position in the input).
    pub record: Record,
    /// Its frame bytes, when the input had them (pcap).
    pub frame: Option<Vec<u8>>,
}

/// A loaded trace.
pub struct Trace {
    /// Packets in input order; `None` where a capture's packet was malformed.
    pub packets: Vec<Option<Input>>,
    /// Capture link type, for writing frames back.
    pub link: debloat_core::classify::LinkType,
    /// Absolute time of t=0 (pcap), ns since the Unix epoch.
    pub epoch_ns: u64,
}

/// Read a trace from its bytes: a pcap capture or a CSV trace, told apart by content.
pub fn load(bytes: &[u8]) -> Result<Trace> {
    if bytes.is_empty() {
        bail!(
            "the file is empty: expected a CSV trace with header `{}` or a pcap capture",
            trace::HEADER
        );
    }
    if capture::is_pcapng(bytes) {
        bail!("pcapng is not supported yet: convert it with `editcap -F pcap IN OUT` (from Wireshark) and replay the .pcap");
    }
    if capture::is_pcap(bytes) {
        return capture::read(bytes).context("reading pcap");
    }
    trace::read_csv(bytes).context("reading trace")
}

/// The link behind the discipline: netem's words and, for a capacity trace, the modem whose
/// FIFO sits between the discipline and the trace's delivery opportunities.
#[derive(Clone, Debug, Default)]
pub struct LinkSpec {
    /// Rate, delay, loss… (netem's words, as the gateway's `--emulate-*` take them).
    pub emulation: Emulation,
    /// A capacity trace and its FIFO (`rate trace FILE buffer N`).
    pub modem: Option<ModemSpec>,
}

impl LinkSpec {
    /// A plain link at `rate_bps` (None: as fast as the discipline releases).
    pub fn rate(rate_bps: Option<u64>) -> LinkSpec {
        LinkSpec {
            emulation: Emulation::rate(rate_bps),
            modem: None,
        }
    }

    /// Anything beyond a plain rate (then the far end's arrival differs from the start of
    /// sending, and is worth printing).
    pub fn beyond_rate(&self) -> bool {
        self.modem.is_some() || self.emulation != Emulation::rate(self.emulation.rate_bps)
    }
}

/// What a replay produced.
pub struct Outcome {
    /// One row per input packet, in input order.
    pub rows: Vec<fates::Row>,
    /// Packets sent, with the time each started to send, in sending order.
    pub delivered: Vec<(u64, Record)>,
    /// The discipline's statistics at the end.
    pub stats: QdiscStats,
    /// Packets whose timestamp was earlier than the packet before (taken at that packet's time).
    pub reordered: usize,
}

/// Run `trace` through `spec` in front of a link at `rate_bps` (None: as fast as the discipline
/// releases), keyed and seeded by `seed`.
pub fn replay(
    trace: &Trace,
    spec: &QdiscSpec,
    rate_bps: Option<u64>,
    seed: u64,
) -> Result<Outcome> {
    replay_marked(trace, spec, &LinkSpec::rate(rate_bps), seed, None)
}

/// [`replay`] with the marking stage first: every packet goes through qosify's rules (as
/// egress traffic, at its time) before the discipline, and the link `link` behind it.
pub fn replay_marked(
    trace: &Trace,
    spec: &QdiscSpec,
    link: &LinkSpec,
    seed: u64,
    mut marker: Option<&mut dyn Classify>,
) -> Result<Outcome> {
    let qdisc = spec.build::<Record>(FlowHasher::new([seed, seed.rotate_left(32) ^ 0x5eed]), seed);
    let mut path = DataPath::new(qdisc, link.emulation, 0, seed);
    path.link_mut()
        .set_modem(link.modem.as_ref().map(ModemSpec::build));
    // A packet arriving "before" the previous one (a reordered capture) arrives at its time.
    let mut reordered = 0usize;
    let mut last_t = 0;
    let mut fates: Vec<Option<Fate>> = Vec::with_capacity(trace.packets.len());
    for p in &trace.packets {
        fates.push(Some(match p {
            None => Fate::malformed(),
            Some(p) => {
                reordered += usize::from(p.t_ns < last_t);
                last_t = last_t.max(p.t_ns);
                Fate::queued(last_t)
            }
        }));
    }
    let mut delivered: Vec<(u64, Record)> = Vec::new();
    {
        let mut out = |e: Event<'_, Record>| fates::record(e, &mut fates, &mut delivered);
        for p in trace.packets.iter().flatten() {
            let r = p.record;
            match marker.as_deref_mut() {
                Some(m) => {
                    // The record carries no bytes: the capture's frame is shown to the stage
                    // here, then the path runs it.
                    if let Some(f) = &p.frame {
                        m.snoop(f, trace.link, &r.meta, p.t_ns);
                    }
                    path.arrive_classified(r, p.t_ns, m, Direction::Up, &mut out);
                }
                None => path.arrive(r, p.t_ns, &mut out),
            }
        }
        path.finish(&mut out);
    }
    let lost = lost_reason(path.link().modem_dropped(), path.wire_counters());
    let rows = fates::finish(fates, lost).context("internal: a packet has no fate")?;
    // The pcap holds what reached the far end.
    delivered.retain(|(_, r)| {
        rows.get(r.id as usize)
            .is_some_and(|row| row.fate == "sent")
    });
    Ok(Outcome {
        rows,
        delivered,
        stats: path.qdisc().stats(),
        reordered,
    })
}

/// Why a packet the discipline sent never arrived: the modem's full FIFO, the wire's emulated
/// loss (netem's `loss`, `corrupt`, `limit`), or either when both happened in the run.
fn lost_reason(modem_dropped: u64, w: debloat_core::link::WireCounters) -> &'static str {
    match (modem_dropped > 0, w.lost + w.overlimit > 0) {
        (true, false) => "modem",
        (false, _) => "wire",
        (true, true) => "modem or wire",
    }
}

/// The numbers `debloat replay` prints.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Input packets.
    pub packets: usize,
    /// Input bytes (frame lengths).
    pub bytes: u64,
    /// Packets sent.
    pub sent: usize,
    /// Drops per reason, in the order first seen.
    pub drops: Vec<(String, usize)>,
    /// Packets that left CE-marked and did not arrive so.
    pub marked: usize,
    /// Sojourn of sent packets: p50, p99, max, ns (None when nothing was sent).
    pub sojourn_ns: Option<(u64, u64, u64)>,
    /// Packets the discipline sent that the link lost (modem FIFO full, emulated loss).
    pub lost: usize,
    /// One-way delay of sent packets, from reaching the discipline to reaching the far end
    /// (discipline, transmission, modem, link delay): p50, p99, max, ns.
    pub delay_ns: Option<(u64, u64, u64)>,
    /// Bytes sent.
    pub sent_bytes: u64,
    /// From the first packet reaching the discipline to the last reaching the far end, ns.
    pub span_ns: u64,
}

impl Outcome {
    /// Summarise against the trace it came from.
    pub fn summary(&self, trace: &Trace) -> Summary {
        let sent: Vec<&fates::Row> = self.rows.iter().filter(|r| r.fate == "sent").collect();
        let mut soj: Vec<u64> = sent.iter().filter_map(|r| r.sojourn_ns).collect();
        soj.sort_unstable();
        let mut delay: Vec<u64> = sent
            .iter()
            .filter_map(|r| Some(r.t_arrive_ns?.saturating_sub(r.t_enq_ns)))
            .collect();
        delay.sort_unstable();
        let ecn_in = |id: u64| {
            trace.packets[id as usize]
                .as_ref()
                .map(|p| p.record.meta.ecn.bits())
        };
        let marked = sent
            .iter()
            .filter(|r| r.ecn_out == Some(3) && ecn_in(r.id) != Some(3))
            .count();
        let mut drops: Vec<(String, usize)> = Vec::new();
        for r in self.rows.iter().filter(|r| r.fate == "dropped") {
            match drops.iter_mut().find(|x| x.0 == r.reason) {
                Some(x) => x.1 += 1,
                None => drops.push((r.reason.clone(), 1)),
            }
        }
        let sent_bytes: u64 = sent.iter().map(|r| u64::from(r.len)).sum();
        let span = self
            .rows
            .iter()
            .filter_map(|r| r.t_arrive_ns.or(r.t_deq_ns))
            .max()
            .unwrap_or(0)
            .saturating_sub(self.rows.iter().map(|r| r.t_enq_ns).min().unwrap_or(0));
        Summary {
            packets: self.rows.len(),
            bytes: trace
                .packets
                .iter()
                .flatten()
                .map(|p| u64::from(p.record.meta.len))
                .sum(),
            sent: sent.len(),
            drops,
            marked,
            sojourn_ns: p50_p99_max(&soj),
            lost: self.rows.iter().filter(|r| r.fate == "lost").count(),
            delay_ns: p50_p99_max(&delay),
            sent_bytes,
            span_ns: span,
        }
    }
}

/// p50, p99 and max of sorted values (None when empty).
fn p50_p99_max(sorted: &[u64]) -> Option<(u64, u64, u64)> {
    match (
        percentile(sorted, 50.0),
        percentile(sorted, 99.0),
        sorted.last(),
    ) {
        (Some(a), Some(b), Some(&c)) => Some((a, b, c)),
        _ => None,
    }
}
