//! `debloat compare A B`: do two configurations differ? Each metric of two `sim --seeds` runs,
//! Welch's t-test on the per-seed values, with the difference's 95 % interval and p-value.

use anyhow::{anyhow, bail, Result};
use debloat_report::repeats::{compare, Comparison, Repeats};
use std::path::{Path, PathBuf};

/// Arguments of `debloat compare`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  debloat sim rrul --qdisc \"pfifo limit 1000\" --seeds 10 --output a\n  debloat sim rrul --qdisc cake --seeds 10 --output b\n  debloat compare a b\n  debloat compare a/summary.json b/summary.json --metric ping --json\n\nThe test is Welch's two-sample t-test (unequal variances, Welch–Satterthwaite degrees of\nfreedom); a metric differs when p < 0.05. Each side needs two or more seeds."
)]
pub struct Args {
    /// The baseline: a summary.json written by `debloat sim --seeds N`, or its directory.
    a: PathBuf,
    /// The configuration compared with it (same form).
    b: PathBuf,
    /// Only metrics whose name contains this text (repeatable), e.g. "ping", "p99".
    #[arg(long)]
    metric: Vec<String>,
    /// Print the comparisons as JSON.
    #[arg(long)]
    json: bool,
}

/// A side's name: its directory's name (or the file's, without a directory).
fn name(p: &Path) -> String {
    let dir = if p.is_dir() { Some(p) } else { p.parent() };
    dir.and_then(Path::file_name)
        .or_else(|| p.file_name())
        .map_or_else(
            || p.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
}

/// Run the command.
pub fn run(a: &Args) -> Result<()> {
    let ra = Repeats::read(&a.a).map_err(|e| anyhow!(e))?;
    let rb = Repeats::read(&a.b).map_err(|e| anyhow!(e))?;
    let wanted = |c: &Comparison| {
        a.metric.is_empty() || a.metric.iter().any(|m| c.name.contains(m.as_str()))
    };
    let cs: Vec<Comparison> = compare(&ra, &rb).into_iter().filter(wanted).collect();
    if cs.is_empty() {
        bail!(
            "no metric in common{}",
            if a.metric.is_empty() {
                String::new()
            } else {
                format!(" matching {:?}", a.metric)
            }
        );
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&cs)?);
        return Ok(());
    }
    let (na, nb) = (name(&a.a), name(&a.b));
    println!(
        "A = {na} ({} seeds), B = {nb} ({} seeds); Welch's t-test, 95 % intervals of B − A\n",
        ra.seeds.len(),
        rb.seeds.len()
    );
    let differ = cs
        .iter()
        .filter(|c| c.welch.as_ref().is_some_and(|w| w.differs()))
        .count();
    for c in &cs {
        println!("  {}", c.sentence(&na, &nb));
    }
    println!("\n{differ} of {} metrics differ at p < 0.05", cs.len());
    Ok(())
}
