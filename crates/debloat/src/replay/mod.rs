//! `debloat replay`: a trace through one discipline and one bottleneck link, offline.
//!
//! Inputs: a CSV trace (`t_ns,src,dst,sport,dport,proto,len,dscp,ecn`) or a pcap capture
//! (Ethernet or raw IP; its timestamps and headers). Outputs: a fates CSV with one row per input
//! packet in input order, optionally the delivered packets as a pcap (timestamped at the start
//! of transmission, ECN/DSCP as they left), and statistics as `tc -s qdisc show` prints them.

mod capture;
mod fates;
mod trace;

use crate::summary::{mbps, ms, percentile};
use anyhow::{bail, Context, Result};
use debloat_core::link::Emulation;
use debloat_core::path::{DataPath, Event};
use debloat_core::units::{fmt_rate, parse_rate};
use debloat_core::{FlowHasher, QdiscSpec, Record};
use fates::Fate;
use std::path::PathBuf;

/// Arguments of `debloat replay`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  debloat replay --qdisc \"cake bandwidth 20Mbit\" --input trace.csv --output fates.csv --stats\n  debloat replay --qdisc \"fq_codel\" --rate 10Mbit --input capture.pcap --output fates.csv --pcap-out sent.pcap"
)]
pub struct Args {
    /// The discipline, as for `tc qdisc add … root <spec>`, e.g. "fq_codel target 3ms".
    #[arg(long)]
    qdisc: String,
    /// Link rate (e.g. 20Mbit). Omitted: the link sends as fast as the discipline releases.
    #[arg(long, value_parser = parse_rate_arg)]
    rate: Option<u64>,
    /// Trace to replay: a .csv trace or a .pcap capture (detected from the content).
    #[arg(long)]
    input: PathBuf,
    /// Where to write the fates CSV (one row per input packet).
    #[arg(long)]
    output: PathBuf,
    /// Also write the delivered packets to this pcap, timestamped when they started to send.
    #[arg(long)]
    pcap_out: Option<PathBuf>,
    /// Print the discipline's statistics as `tc -s qdisc show` does.
    #[arg(long)]
    stats: bool,
    /// Write the statistics as JSON to this file.
    #[arg(long)]
    stats_json: Option<PathBuf>,
    /// Seed for the discipline's flow-hash key and randomness (same seed, same result).
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn parse_rate_arg(s: &str) -> Result<u64, String> {
    match parse_rate(s) {
        Ok(0) => Err("the rate must be above 0".into()),
        Ok(r) => Ok(r),
        Err(e) => Err(e.to_string()),
    }
}

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

/// Run the command.
pub fn run(a: &Args) -> Result<()> {
    let spec: QdiscSpec = a
        .qdisc
        .parse()
        .with_context(|| format!("--qdisc \"{}\"", a.qdisc))?;
    let trace = load(&a.input)?;
    let n = trace.packets.len();
    let qdisc = spec.build::<Record>(
        FlowHasher::new([a.seed, a.seed.rotate_left(32) ^ 0x5eed]),
        a.seed,
    );
    let mut link = DataPath::new(qdisc, Emulation::rate(a.rate), 0, a.seed);
    // A packet arriving "before" the previous one (a reordered capture) arrives at its time.
    let mut reordered = 0usize;
    let mut last_t = 0;
    let mut fates: Vec<Option<Fate>> = Vec::with_capacity(n);
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
            link.arrive(p.record, p.t_ns, &mut out);
        }
        link.finish(&mut out);
    }
    let rows = fates::finish(fates).context("internal: a packet has no fate")?;
    fates::write_csv(&a.output, &rows)?;
    if let Some(path) = &a.pcap_out {
        capture::write_delivered(path, &trace, &delivered)?;
    }
    let stats = link.qdisc().stats();
    print_summary(&spec, a.rate, &rows, &trace, reordered);
    if a.stats {
        print!("{}", stats.to_tc_string());
    }
    if let Some(path) = &a.stats_json {
        std::fs::write(path, serde_json::to_string_pretty(&stats)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

fn load(path: &std::path::Path) -> Result<Trace> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    if bytes.is_empty() {
        bail!(
            "{} is empty: expected a CSV trace with header `{}` or a pcap capture",
            path.display(),
            trace::HEADER
        );
    }
    if capture::is_pcapng(&bytes) {
        bail!("{} is pcapng, which is not supported yet: convert it with `editcap -F pcap IN OUT` (from Wireshark) and replay the .pcap", path.display());
    }
    if capture::is_pcap(&bytes) {
        return capture::read(&bytes).with_context(|| format!("reading pcap {}", path.display()));
    }
    trace::read_csv(&bytes).with_context(|| format!("reading trace {}", path.display()))
}

fn print_summary(
    spec: &QdiscSpec,
    rate: Option<u64>,
    rows: &[fates::Row],
    trace: &Trace,
    reordered: usize,
) {
    let mut soj: Vec<u64> = rows
        .iter()
        .filter(|r| r.fate == "sent")
        .filter_map(|r| r.sojourn_ns)
        .collect();
    soj.sort_unstable();
    let sent = rows.iter().filter(|r| r.fate == "sent").count();
    let ecn_in = |id: u64| {
        trace.packets[id as usize]
            .as_ref()
            .map(|p| p.record.meta.ecn.bits())
    };
    let marked = rows
        .iter()
        .filter(|r| r.ecn_out == Some(3) && ecn_in(r.id) != Some(3))
        .count();
    let mut reasons: Vec<(String, usize)> = Vec::new();
    for r in rows.iter().filter(|r| r.fate == "dropped") {
        match reasons.iter_mut().find(|x| x.0 == r.reason) {
            Some(x) => x.1 += 1,
            None => reasons.push((r.reason.clone(), 1)),
        }
    }
    let dropped: usize = reasons.iter().map(|x| x.1).sum();
    let bytes: u64 = trace
        .packets
        .iter()
        .flatten()
        .map(|p| u64::from(p.record.meta.len))
        .sum();
    let sent_bytes: u64 = rows
        .iter()
        .filter(|r| r.fate == "sent")
        .map(|r| u64::from(r.len))
        .sum();
    let span = rows
        .iter()
        .filter_map(|r| r.t_deq_ns)
        .max()
        .unwrap_or(0)
        .saturating_sub(rows.iter().map(|r| r.t_enq_ns).min().unwrap_or(0));
    println!(
        "replayed {} packets ({:.2} MB) through `{}` on a {} link",
        rows.len(),
        bytes as f64 / 1e6,
        spec,
        rate.map(fmt_rate).unwrap_or_else(|| "unlimited".into())
    );
    let why = reasons
        .iter()
        .map(|(r, n)| format!("{r} {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    println!(
        "  sent {sent}, dropped {dropped}{}, CE-marked {marked}",
        if why.is_empty() {
            String::new()
        } else {
            format!(" ({why})")
        }
    );
    if let (Some(p50), Some(p99), Some(max)) =
        (percentile(&soj, 50.0), percentile(&soj, 99.0), soj.last())
    {
        println!(
            "  sojourn p50 {} ms, p99 {} ms, max {} ms; delivered {:.2} Mbit/s",
            ms(p50),
            ms(p99),
            ms(*max),
            mbps(sent_bytes, span)
        );
    }
    if reordered > 0 {
        println!("  note: {reordered} packets had timestamps earlier than the packet before; they arrived at that packet's time");
    }
}
