//! debloat's reports: flent data files in (debloat's own or flent's, versions 1–4), a summary
//! table, SVG and PNG plots, and one self-contained HTML page out.
//!
//! ```text
//! .flent.gz ──► flent::Dataset ──► summary::RunSummary ──► table (text) / html
//!                     ├──────────► plot (SVG + PNG: timeseries, latency CDF, totals; spread of seeds)
//!                     ├──────────► stats, repeats (seeds: intervals, Welch comparisons)
//!                     ├──────────► wifi (Wi-Fi runs: per-station table, airtime bars)
//!                     └──────────► verdict (probe runs: bufferbloat grade and RPM)
//! ```
//!
//! The page embeds its SVGs and styles and loads nothing from the network, so it opens from a
//! file on a machine without one.

pub mod flent;
pub mod flent_write;
pub mod html;
pub mod percentile;
pub mod plot;
pub mod repeats;
pub mod stats;
pub mod summary;
pub mod table;
pub mod verdict;
pub mod wifi;

pub use flent::{Dataset, ReadError};
pub use summary::RunSummary;

use std::path::{Path, PathBuf};

/// Errors writing a report.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// Nothing to report on.
    #[error("no runs to report on: give at least one flent data file")]
    Empty,
    /// The output directory could not be written.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A plot could not be drawn.
    #[error("{0}")]
    Plot(String),
}

/// Write `index.html`, the SVGs and PNGs for these runs into `dir` (created if missing);
/// returns the path of `index.html`.
pub fn write(runs: &[Dataset], dir: &Path, title: &str) -> Result<PathBuf, ReportError> {
    page_with(runs, dir, title, |dir| plot::render_all(runs, dir))
}

/// Create `dir`, draw the plots into it and write `index.html` with the runs' summary table.
fn page_with(
    runs: &[Dataset],
    dir: &Path,
    title: &str,
    plots: impl FnOnce(&Path) -> Result<Vec<plot::Plot>, String>,
) -> Result<PathBuf, ReportError> {
    if runs.is_empty() {
        return Err(ReportError::Empty);
    }
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| ReportError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let plots = plots(dir).map_err(ReportError::Plot)?;
    let summaries: Vec<RunSummary> = runs.iter().map(RunSummary::of).collect();
    let page = html::page(title, runs, &summaries, &plots);
    let index = dir.join("index.html");
    std::fs::write(&index, page).map_err(io(&index))?;
    Ok(index)
}

/// Write the report of repeated runs (`debloat sim --seeds`): the spread chart (each group's
/// mean over its seeds with a min–max band) and the summary table of every run, to
/// `dir/index.html`. Returns the page's path.
pub fn write_repeats(
    groups: &[plot::Group],
    dir: &Path,
    title: &str,
) -> Result<PathBuf, ReportError> {
    let runs: Vec<Dataset> = groups.iter().flat_map(|g| g.runs.iter().cloned()).collect();
    page_with(&runs, dir, title, |dir| {
        plot::render_spread(groups, dir).map(|p| vec![p])
    })
}
