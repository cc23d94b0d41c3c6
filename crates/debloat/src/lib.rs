//! `debloat`: the command line that ties the crates together, as a library so that the Python
//! package (`crates/debloat-py`) runs the very same words: `api` is its door.

pub mod api;
mod autorate;
mod bench;
mod circuits;
mod classify;
mod compare;
mod demo;
mod gateway;
mod gateway_ports;
mod gateway_setup;
mod gateway_workers;
mod lab;
mod link_trace;
mod manpages;
mod probe;
mod probe_ietf;
mod rates;
mod replay;
mod report;
mod reproduce;
mod reproduce_kernel;
mod seeds;
mod sigpipe;
mod sim;
mod soak;
mod soak_check;
mod summary;
mod sweep;
mod testbed;
mod testbed_churn;
mod testbed_dns;

use anyhow::Result;
use clap::{Parser, Subcommand};

/// debloat: smart queue management (fifo, CoDel, FQ-CoDel, CAKE) you can replay, simulate and
/// measure. Specs are written as for `tc qdisc add … root <spec>`.
#[derive(Parser, Debug)]
#[command(name = "debloat", version, about, long_about = None)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Accept shaper and link rates below 64 kbit/s (refused otherwise, as the likely slip of
    /// a bare number or a missing unit: `bandwidth 10` is 10 bit/s, as tc reads it).
    #[arg(long, global = true)]
    allow_slow_rate: bool,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Show what queue management does: flent's rrul over a simulated cable-like link (20/2
    /// Mbit/s, 20 ms) through pfifo, fq_codel and cake, side by side, with an HTML report.
    Demo(demo::Args),
    /// Run a packet trace (CSV or pcap) through one queue discipline and one bottleneck, and
    /// write what happened to every packet.
    Replay(replay::Args),
    /// Run one of flent's tests, or a TOML scenario, in the simulator (virtual time, Linux-like
    /// TCP).
    Sim(Box<sim::Args>),
    /// Compare runs from flent data files (debloat's or flent's): a table and an HTML report
    /// with plots.
    Report(report::Args),
    /// Do two configurations differ? Welch's t-test on every metric of two `sim --seeds N`
    /// runs, with the difference's 95 % interval and p-value.
    Compare(compare::Args),
    /// Rerun the published experiments (the wired rows PI-55 … HASH and the Wi-Fi rows
    /// ATH10K-6M … AQL) and compare with the published values and bands.
    Reproduce(reproduce::Args),
    /// The real Linux kernel's qdiscs, here, under User-Mode Linux: `lab spec` compares
    /// `tc -s qdisc show` with `debloat spec`; `lab run` runs a script in the kernel.
    Lab(lab::Args),
    /// Parse a qdisc spec and show it as tc would, with the parameters it derives.
    Spec(SpecArgs),
    /// Forward between two interfaces through queue disciplines, in userspace, with an
    /// optional emulated link (rate, delay, loss); `debloat gateway stats` reads a running one.
    Gateway(Box<gateway::Args>),
    /// Network namespaces (client, gateway, server) with the gateway between them.
    Testbed(testbed::Args),
    /// Serve `debloat test` (TCP flows, responsiveness probes) and irtt clients (UDP), on port
    /// 2112 by default.
    Server(probe::ServerArgs),
    /// Run one of flent's tests (rrul, tcp_nup, voip …) on a real network against a debloat
    /// server: flent data file, JSON, table, HTML report, bufferbloat grade and RPM.
    Test(Box<probe::TestArgs>),
    /// Speed measurements: the simulator's (`bench sim`) and the gateway's forwarding against
    /// the kernel's bridge (`bench gateway`, root).
    Bench(bench::Args),
    /// The testbed under churn for N minutes (root): long and short TCP flows, UDP from new
    /// ports, rate changes; the gateway's memory, files, forwarding and ping every 10 s, judged.
    Soak(soak::Args),
    /// Shaper-rate controllers on links whose capacity moves: compare them on capacity traces.
    Autorate(autorate::Args),
    /// Write man pages for debloat and every subcommand into a directory.
    Man(manpages::ManArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(manpages::CompletionArgs),
}

/// Arguments of `debloat spec`.
#[derive(clap::Args, Debug)]
struct SpecArgs {
    /// The spec, e.g. "cake bandwidth 20Mbit diffserv4".
    spec: String,
    /// Print JSON instead of tc's text.
    #[arg(long)]
    json: bool,
}

/// The `debloat` command: parse the process's arguments, run, exit with the command's status.
pub fn cli_main() {
    let cli = Cli::parse();
    rates::allow_slow(cli.allow_slow_rate);
    if only_prints(&cli.command) {
        sigpipe::quiet_on_closed_pipe();
    }
    let res: Result<()> = match cli.command {
        Command::Demo(a) => demo::run(&a),
        Command::Replay(a) => replay::run(&a),
        Command::Sim(a) => sim::run(&a),
        Command::Reproduce(a) => reproduce::run(&a),
        Command::Report(a) => report::run(&a),
        Command::Compare(a) => compare::run(&a),
        Command::Spec(a) => spec(&a),
        Command::Lab(a) => lab::run(&a),
        Command::Bench(a) => bench::run(&a),
        Command::Autorate(a) => autorate::run(&a),
        Command::Soak(a) => soak::run(&a),
        Command::Gateway(a) => gateway::run(&a),
        Command::Testbed(a) => testbed::run(&a),
        Command::Server(a) => probe::server(&a),
        Command::Test(a) => probe::test(&a),
        Command::Man(a) => manpages::man(&a),
        Command::Completions(a) => manpages::completions(&a),
    };
    if let Err(e) = res {
        eprintln!("error: {e:#}");
        // `reproduce --seeds`: nothing missed, but an interval straddles a band's edge.
        if e.downcast_ref::<reproduce::Uncertain>().is_some() {
            std::process::exit(3);
        }
        std::process::exit(2);
    }
}

/// The commands that compute, print and end (no sockets, no children to clean up after).
fn only_prints(c: &Command) -> bool {
    matches!(
        c,
        Command::Demo(_)
            | Command::Replay(_)
            | Command::Sim(_)
            | Command::Reproduce(_)
            | Command::Report(_)
            | Command::Compare(_)
            | Command::Spec(_)
            | Command::Autorate(_)
            | Command::Completions(_)
    )
}

fn spec(a: &SpecArgs) -> Result<()> {
    rates::check_spec("spec", &a.spec)?;
    let spec: debloat_core::QdiscSpec = a.spec.parse()?;
    let q = spec.build::<debloat_core::Record>(debloat_core::FlowHasher::default(), 0);
    let stats = q.stats();
    let classes = q.classes();
    if a.json && classes.is_empty() {
        println!("{}", serde_json::to_string_pretty(&stats)?);
    } else if a.json {
        let both = serde_json::json!({ "qdisc": stats, "classes": classes });
        println!("{}", serde_json::to_string_pretty(&both)?);
    } else {
        print!("{}", debloat_core::qdisc::stats::tc_show(q.as_ref()));
    }
    Ok(())
}
