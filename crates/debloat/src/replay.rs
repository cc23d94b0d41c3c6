//! `debloat replay`: a trace through one discipline and one bottleneck link, offline.
//!
//! Inputs: a CSV trace (`t_ns,src,dst,sport,dport,proto,len,dscp,ecn`) or a pcap capture
//! (Ethernet or raw IP; its timestamps and headers). Outputs: a fates CSV with one row per input
//! packet in input order, optionally the delivered packets as a pcap (timestamped at the start
//! of transmission, ECN/DSCP as they left), and statistics as `tc -s qdisc show` prints them.
//! The link is a rate (`--rate`) or the gateway's emulation words (`--link`), a capacity trace
//! with its modem's FIFO among them.

use crate::summary::{mbps, ms};
use anyhow::{Context, Result};
use debloat_core::classify::qosify::{self, Classifier};
use debloat_core::units::{fmt_rate, parse_rate};
use debloat_core::QdiscSpec;
use debloat_replay::{capture, fates, LinkSpec, Summary};
use std::path::PathBuf;

/// Arguments of `debloat replay`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  debloat replay --qdisc \"cake bandwidth 20Mbit\" --input trace.csv --output fates.csv --stats\n  debloat replay --qdisc \"fq_codel\" --rate 10Mbit --input capture.pcap --output fates.csv --pcap-out sent.pcap\n  debloat replay --qdisc \"cake bandwidth 20Mbit diffserv4\" --classify /etc/config/qosify --input trace.csv --output fates.csv\n  debloat replay --qdisc \"cake bandwidth 4Mbit\" --link \"rate trace data/link-traces/Verizon-LTE-short.down.mahi buffer 200 delay 20ms\" --input capture.pcap --output fates.csv"
)]
pub struct Args {
    /// The discipline, as for `tc qdisc add … root <spec>`, e.g. "fq_codel target 3ms".
    #[arg(long)]
    qdisc: String,
    /// Link rate (e.g. 20Mbit). Omitted: the link sends as fast as the discipline releases.
    #[arg(long = "rate", value_name = "RATE", conflicts_with = "link")]
    rate_word: Option<String>,
    /// The link in netem's words, as the gateway's --emulate-egress takes them: "rate 20Mbit
    /// delay 10ms loss 1%", or a capacity trace with the modem's FIFO behind the discipline,
    /// "rate trace FILE buffer 200" (mahimahi's format or `seconds,rate` lines).
    #[arg(long, value_name = "WORDS")]
    link: Option<String>,
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
    /// Mark DSCP with qosify's rules before the discipline, as `gateway --classify` does
    /// (qosify's UCI file or one map file); the fates CSV then gains `dscp_out`.
    #[arg(long, value_name = "FILE")]
    classify: Option<PathBuf>,
}

fn parse_rate_arg(s: &str) -> Result<u64, String> {
    match parse_rate(s) {
        Ok(0) => Err("the rate must be above 0".into()),
        Ok(r) => Ok(r),
        Err(e) => Err(e.to_string()),
    }
}

/// Run the command.
pub fn run(a: &Args) -> Result<()> {
    print!("{}", execute(a)?);
    Ok(())
}

/// Run the command, writing its files; returns what it prints.
pub fn execute(a: &Args) -> Result<String> {
    let mut text = String::new();
    crate::rates::check_spec("--qdisc", &a.qdisc)?;
    if let Some(words) = &a.link {
        crate::rates::check_spec("--link", words)?;
    }
    if let Some(r) = &a.rate_word {
        crate::rates::check_rate("--rate", r)?;
    }
    let rate = a
        .rate_word
        .as_deref()
        .map(parse_rate_arg)
        .transpose()
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("--rate {}", a.rate_word.as_deref().unwrap_or_default()))?;
    let spec: QdiscSpec = a
        .qdisc
        .parse()
        .with_context(|| format!("--qdisc \"{}\"", a.qdisc))?;
    let bytes =
        std::fs::read(&a.input).with_context(|| format!("reading {}", a.input.display()))?;
    let trace = debloat_replay::load(&bytes).with_context(|| format!("{}", a.input.display()))?;
    let mut marker = crate::classify::load(a.classify.as_deref())?.map(|c| {
        let h = debloat_core::FlowHasher::new([a.seed, a.seed.rotate_left(7)]);
        Classifier::new(c, qosify::FLOW_SLOTS, h)
    });
    let link = match &a.link {
        None => LinkSpec::rate(rate),
        Some(words) => link_spec(words).with_context(|| format!("--link \"{words}\""))?,
    };
    let out = debloat_replay::replay_marked(
        &trace,
        &spec,
        &link,
        a.seed,
        marker
            .as_mut()
            .map(|m| m as &mut dyn debloat_core::classify::Classify),
    )?;
    fates::write_csv(&a.output, &out.rows, marker.is_some())?;
    if let Some(m) = &marker {
        text.push_str(&marked_text(m));
    }
    if let Some(path) = &a.pcap_out {
        capture::write_delivered(path, &trace, &out.delivered)?;
    }
    text.push_str(&summary_text(
        &spec,
        &link,
        &out.summary(&trace),
        out.reordered,
    ));
    if a.stats {
        text.push_str(&out.stats.to_tc_string());
    }
    if let Some(path) = &a.stats_json {
        std::fs::write(path, serde_json::to_string_pretty(&out.stats)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(text)
}

/// What the marking stage did, as the command prints it.
fn marked_text(m: &Classifier) -> String {
    use std::fmt::Write as _;
    let mut text = String::new();
    let c = m.counters();
    let classes: Vec<String> = m
        .config()
        .classes
        .iter()
        .zip(&c.classes)
        .map(|(k, n)| format!("{} {}", k.name, n[0]))
        .collect();
    let _ = writeln!(
        text,
        "marked: {} packets re-marked; by class: {}; bulk flows {}, priority packets {}",
        c.remarked,
        classes.join(", "),
        c.bulk_flows,
        c.prio_packets
    );
    if c.dns.answers + c.dns.skipped + c.dns.malformed > 0 {
        let _ = writeln!(
            text,
            "dns: {} answers read, {} addresses learnt, {} CNAME targets, {} malformed",
            c.dns.answers, c.dns.addresses, c.dns.cnames, c.dns.malformed
        );
    }
    text
}

/// `--link`'s words: the emulation, and the modem when they name a capacity trace.
fn link_spec(words: &str) -> Result<LinkSpec> {
    let (rest, modem) = crate::link_trace::emulation_words(words)?;
    Ok(LinkSpec {
        emulation: rest.parse()?,
        modem,
    })
}

/// How the summary names the link: a capacity trace by its mean over the replay's `span_ns`.
fn describe(link: &LinkSpec, span_ns: u64) -> String {
    let rate = link.emulation.rate_bps.map(fmt_rate);
    match (&link.modem, rate) {
        (Some(m), _) => format!(
            "capacity-trace link ({} on average over the replay, modem FIFO {})",
            fmt_rate(
                (u128::from(m.trace.bits_in(0, span_ns)) * 1_000_000_000
                    / u128::from(span_ns.max(1))) as u64
            ),
            match m.limit {
                debloat_core::qdisc::fifo::Limit::Packets(n) => format!("{n} packets"),
                debloat_core::qdisc::fifo::Limit::Bytes(b) => format!("{b} B"),
            }
        ),
        (None, Some(r)) => format!("{r} link"),
        (None, None) => "unlimited link".into(),
    }
}

fn summary_text(spec: &QdiscSpec, link: &LinkSpec, s: &Summary, reordered: usize) -> String {
    use std::fmt::Write as _;
    let mut t = String::new();
    let _ = writeln!(
        t,
        "replayed {} packets ({:.2} MB) through `{}` on a {}",
        s.packets,
        s.bytes as f64 / 1e6,
        spec,
        describe(link, s.span_ns)
    );
    let dropped: usize = s.drops.iter().map(|x| x.1).sum();
    let why = s
        .drops
        .iter()
        .map(|(r, n)| format!("{r} {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = writeln!(
        t,
        "  sent {}, dropped {dropped}{}, CE-marked {}",
        s.sent,
        if why.is_empty() {
            String::new()
        } else {
            format!(" ({why})")
        },
        s.marked
    );
    if let Some((p50, p99, max)) = s.sojourn_ns {
        let _ = writeln!(
            t,
            "  sojourn p50 {} ms, p99 {} ms, max {} ms; delivered {:.2} Mbit/s",
            ms(p50),
            ms(p99),
            ms(max),
            mbps(s.sent_bytes, s.span_ns)
        );
    }
    if link.beyond_rate() {
        let _ = writeln!(
            t,
            "  lost after the discipline (modem FIFO full or the wire's loss): {}",
            s.lost
        );
        if let Some((p50, p99, max)) = s.delay_ns {
            let _ = writeln!(
                t,
                "  one-way delay to the far end p50 {} ms, p99 {} ms, max {} ms",
                ms(p50),
                ms(p99),
                ms(max)
            );
        }
    }
    if reordered > 0 {
        let _ = writeln!(t, "  note: {reordered} packets had timestamps earlier than the packet before; they arrived at that packet's time");
    }
    t
}
