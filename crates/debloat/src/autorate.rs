//! `debloat autorate compare`: the six shapers on capacity traces (debloat_sim::adaptive).

use anyhow::{Context, Result};
use debloat_sim::adaptive::{self, Outcome, Shaper};
use std::path::PathBuf;

/// Arguments of `debloat autorate`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    sub: Sub,
}

#[derive(clap::Subcommand, Debug)]
enum Sub {
    /// On each capacity trace as the bottleneck behind the down shaper (a modem FIFO of 200
    /// packets), 4 CUBIC downloads and a VoIP stream: no shaper, cake fixed at the trace's
    /// 10th percentile and median, cake autorate-ingress, cake-autorate's controller and
    /// debloat's passive one; goodput against the trace's capacity and VoIP delay.
    #[command(
        after_help = "Example:\n  debloat autorate compare --trace data/link-traces/Verizon-LTE-short.down.mahi --length 120"
    )]
    Compare(CompareArgs),
}

#[derive(clap::Args, Debug)]
struct CompareArgs {
    /// Capacity traces (mahimahi's format or `seconds,rate` lines); default: the three LTE
    /// downlinks in data/link-traces.
    #[arg(long)]
    trace: Vec<PathBuf>,
    /// Seconds simulated per run.
    #[arg(long, default_value_t = 120)]
    length: u64,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write every run's numbers (and the controllers' decisions) as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

const DEFAULT_TRACES: [&str; 3] = [
    "data/link-traces/Verizon-LTE-short.down.mahi",
    "data/link-traces/TMobile-LTE-short.down.mahi",
    "data/link-traces/ATT-LTE-driving-2016.down.mahi",
];

/// Run the command.
pub fn run(a: &Args) -> Result<()> {
    match &a.sub {
        Sub::Compare(c) => compare(c),
    }
}

fn compare(a: &CompareArgs) -> Result<()> {
    let traces: Vec<PathBuf> = if a.trace.is_empty() {
        DEFAULT_TRACES.iter().map(PathBuf::from).collect()
    } else {
        a.trace.clone()
    };
    let mut all = Vec::new();
    for path in &traces {
        let trace = crate::link_trace::load(path)?;
        let stats = adaptive::trace_stats(&trace, a.length);
        let rows = adaptive::rows(&stats);
        eprintln!(
            "{}: {} runs of {} s …",
            path.display(),
            rows.len(),
            a.length
        );
        let outcomes: Vec<Outcome> = std::thread::scope(|s| {
            let handles: Vec<_> = rows
                .iter()
                .map(|&(_, shaper)| {
                    let t = &trace;
                    s.spawn(move || adaptive::run(t, shaper, a.seed, a.length))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a simulation thread"))
                .collect()
        });
        print_table(path, &stats, &rows, &outcomes);
        all.push(serde_json::json!({
            "trace": path.display().to_string(),
            "stats": stats,
            "rows": rows.iter().zip(&outcomes).map(|((name, shaper), o)| serde_json::json!({
                "name": name, "shaper": shaper, "outcome": o, "rates": o.rates,
            })).collect::<Vec<_>>(),
        }));
    }
    if let Some(p) = &a.json {
        std::fs::write(p, serde_json::to_string_pretty(&all)?)
            .with_context(|| format!("writing {}", p.display()))?;
        eprintln!("wrote {}", p.display());
    }
    Ok(())
}

fn print_table(
    path: &std::path::Path,
    s: &adaptive::TraceStats,
    rows: &[(&str, Shaper)],
    out: &[Outcome],
) {
    let m = |b: u64| b as f64 / 1e6;
    println!(
        "\n{} — per second p10 {:.2} / median {:.2} / max {:.2} Mbit/s; base one-way delay {} ms",
        path.display(),
        m(s.p10_bps),
        m(s.median_bps),
        m(s.max_bps),
        adaptive::BASE_RTT_NS / 2_000_000
    );
    println!(
        "  {:<24} {:>9} {:>9} {:>24} {:>8} {:>8}",
        "shaper", "goodput", "of cap.", "VoIP one-way p50/p95/p99", "VoIP", "modem"
    );
    println!(
        "  {:<24} {:>9} {:>9} {:>24} {:>8} {:>8}",
        "", "Mbit/s", "%", "ms", "loss %", "drops"
    );
    for ((name, _), o) in rows.iter().zip(out) {
        println!(
            "  {:<24} {:>9.2} {:>9.1} {:>10.1}/{:>6.1}/{:>6.1} {:>8.2} {:>8}",
            name,
            o.goodput_mbps,
            o.share() * 100.0,
            o.voip_ms[0],
            o.voip_ms[1],
            o.voip_ms[2],
            o.voip_loss_pct,
            o.modem_dropped
        );
    }
    if !s.starved_seconds.is_empty() {
        println!(
            "  seconds under a tenth of the median (no shaper holds the delay there): {:?}",
            s.starved_seconds
        );
    }
}
