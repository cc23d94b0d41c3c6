//! `debloat demo`, the main job: flent's rrul over a cable-like link (20 Mbit/s down, 2 Mbit/s
//! up, 20 ms base RTT) with the Linux default (pfifo, 1000 packets), fq_codel and cake in front
//! of the bottleneck in both directions, same seed; a table side by side and a report
//! (`index.html` with SVG plots, PNG copies, and the flent data files) in `./debloat-report/`.
//!
//! The qdisc sits on the bottleneck device itself, so it sees the real link rate; cake's shaper
//! is set to that rate (on a real router you would set ~95 % of the modem's rate so the queue
//! forms in cake rather than in the modem: see `debloat reproduce CAKE-HOSTS`).

use crate::summary::progress_line;
use anyhow::{Context, Result};
use debloat_core::QdiscSpec;
use debloat_report::{Dataset, RunSummary};
use debloat_sim::scenario::{Config, Test};
use debloat_sim::tcp::cc::Algorithm;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Instant;

/// Arguments of `debloat demo`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  debloat demo\n  debloat demo --length 30 --output /tmp/demo")]
pub struct Args {
    /// Load duration, s (flent's -l; the run adds 5 s idle before and after).
    #[arg(long, default_value_t = 60.0)]
    length: f64,
    /// Seed (same seed, same output).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Directory for the report.
    #[arg(long, default_value = "debloat-report")]
    output: PathBuf,
}

const DOWN_BPS: u64 = 20_000_000;
const UP_BPS: u64 = 2_000_000;
const RTT_NS: u64 = 20_000_000;

/// The three configurations: label, qdisc up, qdisc down.
const CONFIGS: [(&str, &str, &str); 3] = [
    ("pfifo 1000", "pfifo limit 1000", "pfifo limit 1000"),
    ("fq_codel", "fq_codel", "fq_codel"),
    ("cake", "cake bandwidth 2Mbit", "cake bandwidth 20Mbit"),
];

fn config(up: &str, down: &str, length: f64, seed: u64) -> Result<Config> {
    let spec = |s: &str| {
        s.parse::<QdiscSpec>()
            .with_context(|| format!("spec `{s}`"))
    };
    Ok(Config {
        test: Test::Rrul,
        down_bps: DOWN_BPS,
        up_bps: UP_BPS,
        rtt_ns: RTT_NS,
        qdisc_up: spec(up)?,
        qdisc_down: spec(down)?,
        length_s: length,
        delay_s: 5.0,
        step_s: 0.2,
        streams: 4,
        cc: Algorithm::Cubic,
        cc_turns: Vec::new(),
        ecn: false,
        host_qdisc: None,
        seed,
        device: Default::default(),
        wire: Default::default(),
        wire_down: None,
        tcp_window: None,
        bbr_ack_aggregation: true,
        host_rtts_ns: Vec::new(),
        adaptive: Default::default(),
        classify: None,
        wifi: None,
    })
}

/// Run the demo.
pub fn run(a: &Args) -> Result<()> {
    if !(a.length.is_finite() && a.length >= 1.0) {
        anyhow::bail!("--length must be at least 1 second (got {})", a.length);
    }
    let started = Instant::now();
    println!(
        "debloat demo: flent's rrul (4 TCP up + 4 down, marked BE/BK/CS5/EF, with ICMP and UDP pings)\n\
         over a cable-like link, 20 Mbit/s down / 2 Mbit/s up, base RTT 20 ms, {} s of load, seed {}\n",
        a.length, a.seed
    );
    std::fs::create_dir_all(&a.output)
        .with_context(|| format!("creating {}", a.output.display()))?;
    let tty = std::io::stderr().is_terminal();
    let mut runs = Vec::new();
    let mut drops = Vec::new();
    for (label, up, down) in CONFIGS {
        let cfg = config(up, down, a.length, a.seed)?;
        let run = debloat_sim::simulate(&cfg, |f| {
            if tty {
                progress_line(&format!("{label}: simulating"), f);
            }
        });
        if tty {
            eprint!("\r\x1b[2K");
        }
        let epoch = debloat_sim::flent::DEFAULT_EPOCH;
        let title = format!("{label} 20-2Mbit 20ms");
        let data = debloat_sim::flent::data_file(&run.world, &cfg, epoch, &title);
        let name = debloat_sim::flent::file_name(cfg.test, epoch, &title);
        let path = a.output.join(name);
        std::fs::write(&path, debloat_sim::flent::gzip(&data)?)
            .with_context(|| format!("writing {}", path.display()))?;
        let mut d = Dataset::from_json(&data, label).map_err(anyhow::Error::msg)?;
        d.label = label.to_string();
        runs.push(d);
        drops.push((
            label,
            run.summary
                .queues
                .iter()
                .map(|q| q.dropped)
                .collect::<Vec<_>>(),
        ));
    }
    let sums: Vec<RunSummary> = runs.iter().map(RunSummary::of).collect();
    print!("{}", debloat_report::table::text(&sums));
    println!();
    for (label, d) in &drops {
        println!(
            "{label:<12} dropped at the bottleneck: {} packets up, {} down",
            d.first().copied().unwrap_or(0),
            d.get(1).copied().unwrap_or(0)
        );
    }
    let index = debloat_report::write(&runs, &a.output, "debloat demo: rrul on 20/2 Mbit/s, 20 ms")
        .with_context(|| format!("writing the report to {}", a.output.display()))?;
    println!(
        "\nUnder load the 1000-packet FIFO adds seconds to every ping: the 2 Mbit/s upstream holds\n\
         {:.1} s of packets, and the downloads' ACKs wait behind them too. fq_codel and cake serve\n\
         sparse flows (pings, ACKs) first and keep each queue near 5 ms, so latency stays close\n\
         to the 20 ms base at full throughput. cake's diffserv3 puts the BK-marked (CS1) probe\n\
         in its Bulk tin, which gets 1/16 of the link when the others want it: that probe waits\n\
         longer by design, and it is cake's p90/p99 above.\n",
        1000.0 * 1514.0 * 8.0 / UP_BPS as f64
    );
    println!(
        "report: {} (plots as SVG and PNG, and the flent data files: `flent -i FILE -p all_scaled`)",
        index.display()
    );
    println!("done in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}
