//! `debloat report`: the runs in flent data files (debloat's or flent's own, versions 1–4)
//! side by side: a table, and a self-contained HTML page with SVG and PNG plots.

use anyhow::{Context, Result};
use debloat_report::{Dataset, RunSummary};
use std::path::PathBuf;

/// Arguments of `debloat report`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  debloat report results/rrul-*.flent.gz\n  debloat report a.flent.gz b.flent.gz --output cmp --title \"fq_codel vs cake\""
)]
pub struct Args {
    /// flent data files (.flent.gz or plain JSON).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Directory for index.html and the plots.
    #[arg(long, default_value = "debloat-report")]
    output: PathBuf,
    /// Page title.
    #[arg(long, default_value = "debloat report")]
    title: String,
}

/// Read the files, print the table, write the report.
pub fn run(a: &Args) -> Result<()> {
    let runs = a
        .files
        .iter()
        .map(|f| Dataset::read(f))
        .collect::<Result<Vec<_>, _>>()?;
    let sums: Vec<RunSummary> = runs.iter().map(RunSummary::of).collect();
    print!("{}", debloat_report::table::text(&sums));
    let index = debloat_report::write(&runs, &a.output, &a.title)
        .with_context(|| format!("writing the report to {}", a.output.display()))?;
    println!("\nreport: {}", index.display());
    Ok(())
}
