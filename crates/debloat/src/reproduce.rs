//! `debloat reproduce`: run the published experiments (docs/experiments.md Part A, wired and Wi-Fi rows) and
//! show each measured value beside the published one and its band; exit 2 when any value is
//! outside its band. With `--seeds N` every check is judged on its 95 % confidence interval over
//! seeds 1…N; an interval that straddles a band's edge is `uncertain` (exit 3).

use anyhow::{bail, Result};
use debloat_sim::reproduce::{self, Experiment, Outcome, Seeded, Verdict};
use std::io::IsTerminal;
use std::time::Instant;

/// Arguments of `debloat reproduce`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  debloat reproduce --list\n  debloat reproduce PI-55\n  debloat reproduce --all\n  debloat reproduce --all --seeds 10\n  debloat reproduce HASH BQL --json\n  debloat reproduce PI-55 FIFO-DEPTH --kernel\n\nExit status: 0 every check inside its band, 2 a check outside (or an error), 3 no check\noutside but some `uncertain` (with --seeds: the 95 % interval straddles the band's edge)."
)]
pub struct Args {
    /// Experiment ids (PI-55, FIFO-DEPTH, SQW-20M, CAKE-HOSTS, RRUL-110-10, ACK-FILTER, BQL, HASH,
    /// ATH10K-6M, NETDEV-PING, ATF-ATH9K, MCS-FLAT, AQL, DUALQ-L4S; `--list` shows them all).
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
    /// Also run the rows on the real kernel's qdiscs with real TCP (the kernel lab, Linux 7.2
    /// under User-Mode Linux), beside the simulator and debloat's gateway in the same guest:
    /// PI-55 and FIFO-DEPTH (about a minute per configuration).
    #[arg(long, conflicts_with = "seeds")]
    kernel: bool,
    /// Run every experiment with seeds 1…N and judge each check on its mean's 95 % confidence
    /// interval (Student's t) instead of one run.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1000))]
    seeds: u64,
}

/// No check missed its band, but some interval straddles an edge (`--seeds`): its own exit
/// status, distinct from a miss.
#[derive(Debug)]
pub struct Uncertain(pub String);

impl std::fmt::Display for Uncertain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl std::error::Error for Uncertain {}

/// Run the command; fails when any check is outside its band.
pub fn run(a: &Args) -> Result<()> {
    if a.list {
        for e in reproduce::all() {
            println!("{:<12} {}", e.id, e.scenario);
        }
        return Ok(());
    }
    let chosen = choose(a)?;
    if a.kernel {
        // --all --kernel: every experiment that has kernel runs.
        let chosen: Vec<_> = chosen
            .into_iter()
            .filter(|e| !a.all || debloat_lab::rows::runs(e.id).is_some())
            .collect();
        return crate::reproduce_kernel::run(&chosen, a.json);
    }
    if a.seeds > 1 {
        return run_seeded(a, &chosen);
    }
    let progress = std::io::stderr().is_terminal() && !a.json;
    let mut outcomes = Vec::new();
    for e in chosen {
        if progress {
            eprint!("running {} ({}) …\r", e.id, e.scenario);
        }
        let t = Instant::now();
        let o = (e.run)(1);
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

/// The chosen experiments' outcomes as the command's `--json` prints them, nothing printed: one
/// seed's outcomes, or with `--seeds N` the intervals. `--kernel` and `--list` are the
/// command's alone.
pub(crate) fn outcomes_json(a: &Args) -> Result<String> {
    if a.kernel || a.list {
        bail!("--kernel and --list are the command's: run `debloat reproduce` for them");
    }
    let chosen = choose(a)?;
    if a.seeds > 1 {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let all: Vec<Seeded> = chosen
            .iter()
            .map(|e| reproduce::repeat(e, a.seeds, threads))
            .collect();
        return Ok(serde_json::to_string(&all)?);
    }
    // One seed: each check gains the verdict the seeded form carries (`ok` or `miss`).
    let mut out = Vec::new();
    for e in chosen {
        let o: Outcome = (e.run)(1);
        let mut v = serde_json::to_value(&o)?;
        if let Some(checks) = v["checks"].as_array_mut() {
            for (j, c) in checks.iter_mut().zip(&o.checks) {
                j["verdict"] = (if c.pass() { "ok" } else { "miss" }).into();
            }
        }
        out.push(v);
    }
    Ok(serde_json::to_string(&out)?)
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

/// `--seeds N` with N > 1: every experiment over seeds 1…N, judged on the intervals.
fn run_seeded(a: &Args, chosen: &[&'static Experiment]) -> Result<()> {
    let progress = std::io::stderr().is_terminal() && !a.json;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut all = Vec::new();
    for e in chosen {
        if progress {
            eprint!(
                "running {} ({} seeds, {threads} threads) …\r",
                e.id, a.seeds
            );
        }
        let t = Instant::now();
        let s = reproduce::repeat(e, a.seeds, threads);
        if progress {
            eprint!("\x1b[2K");
        }
        if !a.json {
            print_seeded(e, &s, t.elapsed().as_secs_f64());
        }
        all.push(s);
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&all)?);
    }
    let with = |v: Verdict| -> Vec<&str> {
        all.iter()
            .filter(|s| s.verdict() == v)
            .map(|s| s.id)
            .collect()
    };
    let (missed, uncertain) = (with(Verdict::Miss), with(Verdict::Uncertain));
    if !a.json {
        println!(
            "{} of {} experiments inside every band over {} seeds (95 % confidence intervals)",
            all.len() - missed.len() - uncertain.len(),
            all.len(),
            a.seeds
        );
    }
    if !missed.is_empty() {
        bail!("outside the published band: {}", missed.join(", "));
    }
    if !uncertain.is_empty() {
        return Err(Uncertain(format!(
            "uncertain (the interval straddles the band's edge; try more seeds): {}",
            uncertain.join(", ")
        ))
        .into());
    }
    Ok(())
}

fn print_seeded(e: &Experiment, s: &Seeded, secs: f64) {
    println!(
        "{} — {} ({secs:.1} s, seeds 1–{})",
        e.id,
        e.scenario,
        s.seeds.len()
    );
    println!(
        "  {:<58} {:>22} {:>19} {:>22} {:>14}  result",
        "check", "mean ± 95 % CI", "min–max", "published", "band"
    );
    for c in &s.checks {
        let (mean, range) = match &c.spread {
            Some(p) => (
                format!("{:.2} ± {:.2} {}", p.mean, p.half_width, c.unit),
                format!("{:.2}–{:.2}", p.min, p.max),
            ),
            None => ("—".to_string(), "—".to_string()),
        };
        let verdict = match (c.verdict, &c.spread) {
            (Verdict::Ok, _) => "ok".to_string(),
            (Verdict::Uncertain, Some(p)) => format!(
                "uncertain: interval {:.2}–{:.2} straddles the band",
                p.lo(),
                p.hi()
            ),
            _ => "MISS".to_string(),
        };
        println!(
            "  {:<58} {:>22} {:>19} {:>22} {:>14}  {verdict}",
            c.what,
            mean,
            range,
            c.published,
            format!("{} {}", c.band, c.unit),
        );
    }
    for n in &s.notes {
        println!("  note (seed 1): {n}");
    }
    println!();
}
