//! `debloat reproduce`: run the published experiments (docs/experiments.md Part A, wired and Wi-Fi rows) and
//! show each measured value beside the published one and its band; exit non-zero when any value
//! is outside its band.

use anyhow::{bail, Result};
use debloat_sim::reproduce::{self, Experiment, Outcome};
use std::io::IsTerminal;
use std::time::Instant;

/// Arguments of `debloat reproduce`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  debloat reproduce --list\n  debloat reproduce PI-55\n  debloat reproduce --all\n  debloat reproduce HASH BQL --json"
)]
pub struct Args {
    /// Experiment ids (PI-55, FIFO-DEPTH, SQW-20M, CAKE-HOSTS, RRUL-110-10, ACK-FILTER, BQL, HASH,
    /// ATH10K-6M, NETDEV-PING, ATF-ATH9K, MCS-FLAT, AQL; `--list` shows them all).
    ids: Vec<String>,
    /// Run every experiment.
    #[arg(long, conflicts_with = "ids")]
    all: bool,
    /// List the experiments and their scenarios, run nothing.
    #[arg(long)]
    list: bool,
    /// Print the outcomes as JSON instead of tables.
    #[arg(long)]
    json: bool,
}

/// Run the command; fails when any check is outside its band.
pub fn run(a: &Args) -> Result<()> {
    if a.list {
        for e in reproduce::all() {
            println!("{:<12} {}", e.id, e.scenario);
        }
        return Ok(());
    }
    let chosen = choose(a)?;
    let progress = std::io::stderr().is_terminal() && !a.json;
    let mut outcomes = Vec::new();
    for e in chosen {
        if progress {
            eprint!("running {} ({}) …\r", e.id, e.scenario);
        }
        let t = Instant::now();
        let o = (e.run)();
        if progress {
            eprint!("\x1b[2K");
        }
        if !a.json {
            print_outcome(e, &o, t.elapsed().as_secs_f64());
        }
        outcomes.push(o);
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&outcomes)?);
    }
    let missed: Vec<&str> = outcomes
        .iter()
        .filter(|o| !o.pass())
        .map(|o| o.id)
        .collect();
    if !a.json {
        println!(
            "{} of {} experiments inside every band",
            outcomes.len() - missed.len(),
            outcomes.len()
        );
    }
    if !missed.is_empty() {
        bail!("outside the published band: {}", missed.join(", "));
    }
    Ok(())
}

fn choose(a: &Args) -> Result<Vec<&'static Experiment>> {
    if a.all {
        return Ok(reproduce::all().iter().collect());
    }
    if a.ids.is_empty() {
        bail!(
            "name an experiment or pass --all; experiments: {}",
            reproduce::ids().join(", ")
        );
    }
    a.ids
        .iter()
        .map(|id| {
            reproduce::find(id).ok_or_else(|| {
                anyhow::anyhow!(
                    "unknown experiment `{id}`: expected one of {}",
                    reproduce::ids().join(", ")
                )
            })
        })
        .collect()
}

fn print_outcome(e: &Experiment, o: &Outcome, secs: f64) {
    println!("{} — {} ({secs:.1} s)", e.id, e.scenario);
    println!(
        "  {:<58} {:>12} {:>22} {:>14}  result",
        "check", "measured", "published", "band"
    );
    for c in &o.checks {
        let verdict = match (c.pass(), c.known_gap) {
            (true, _) => "ok".to_string(),
            (false, Some(why)) => format!("MISS (known model gap: {why})"),
            (false, None) => "MISS".to_string(),
        };
        println!(
            "  {:<58} {:>12} {:>22} {:>14}  {verdict}",
            c.what,
            format!("{:.2} {}", c.measured, c.unit),
            c.published,
            format!("{} {}", c.band, c.unit),
        );
    }
    for n in &o.notes {
        println!("  note: {n}");
    }
    println!();
}
