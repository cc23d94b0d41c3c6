//! `debloat sim --seeds N`: one configuration over N seeds; every number printed as the mean ±
//! the half-width of its 95 % confidence interval, `summary.json` with each seed's value, and a
//! report that draws the spread.

use crate::sim::{self, Args};
use crate::summary::progress_line;
use anyhow::{Context, Result};
use debloat_report::repeats::Repeats;
use debloat_report::Dataset;
use debloat_sim::repeat::{self, SeedRun};
use debloat_sim::scenario::Config;
use std::io::IsTerminal;
use std::path::Path;

/// The seeds `--seed S --seeds N` asks for: S … S + N − 1.
pub fn seeds(a: &Args) -> Vec<u64> {
    (0..a.seeds).map(|i| a.seed.wrapping_add(i)).collect()
}

/// Run `cfg` over the seeds with progress on a terminal, labelled `what`.
pub fn run_config(cfg: &Config, a: &Args, what: &str, epoch: u64) -> Vec<SeedRun> {
    let seeds = seeds(a);
    let tty = std::io::stderr().is_terminal();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let n = seeds.len();
    let done = move |k: usize| {
        if tty {
            progress_line(&format!("{what}: {k}/{n} seeds"), k as f64 / n as f64);
        }
    };
    let runs = repeat::run_seeds(cfg, &seeds, threads, epoch, &a.title, &done);
    if tty {
        eprint!("\r\x1b[2K");
    }
    runs
}

/// The command.
pub fn run(a: &Args) -> Result<()> {
    let cfg = sim::config(a)?;
    let runs = run_config(&cfg, a, cfg.test.name(), debloat_sim::flent::DEFAULT_EPOCH);
    let reps = repeat::fold(&runs);
    println!("{}", sim::headline(&cfg));
    println!(
        "seeds {}–{}: mean ± 95 % confidence interval (Student's t), min–max\n",
        a.seed,
        a.seed + a.seeds - 1
    );
    print!("{}", table(&reps));
    if let Some(dir) = &a.output {
        let datasets = write_runs(dir, &cfg, &runs, &reps, debloat_sim::flent::DEFAULT_EPOCH)?;
        let label = if a.title.is_empty() {
            cfg.test.name().to_string()
        } else {
            a.title.clone()
        };
        let group = debloat_report::plot::Group {
            label,
            runs: &datasets,
        };
        let index = debloat_report::write_repeats(
            &[group],
            dir,
            &format!("debloat sim: {}, {} seeds", cfg.test.name(), a.seeds),
        )?;
        println!(
            "\nwrote {} flent data files, summary.json (every seed's value and the interval) and {} in {}",
            runs.len(),
            index.file_name().map_or_else(String::new, |f| f.to_string_lossy().into_owned()),
            dir.display()
        );
    }
    Ok(())
}

/// The metrics table: name, mean ± half-width with unit, min–max.
pub fn table(r: &Repeats) -> String {
    let mut out = format!(
        "  {:<44} {:>26} {:>21}\n",
        "metric", "mean ± 95 % CI", "min–max"
    );
    for m in &r.metrics {
        let Some(s) = &m.spread else { continue };
        let unit = if m.unit.is_empty() {
            String::new()
        } else {
            format!(" {}", m.unit)
        };
        out.push_str(&format!(
            "  {:<44} {:>26} {:>21}\n",
            m.name,
            format!("{:.2} ± {:.2}{unit}", s.mean, s.half_width),
            format!("{:.2}–{:.2}", s.min, s.max)
        ));
    }
    out
}

/// Each seed's flent file and `summary.json` (`seeds`, `metrics` with values and intervals,
/// `runs` with each seed's full summary); returns the runs as datasets for the report.
pub fn write_runs(
    dir: &Path,
    cfg: &Config,
    runs: &[SeedRun],
    reps: &Repeats,
    epoch: u64,
) -> Result<Vec<Dataset>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut datasets = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let title = r.flent["metadata"]["TITLE"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let name = debloat_sim::flent::file_name(cfg.test, epoch + i as u64, &title);
        std::fs::write(dir.join(&name), debloat_sim::flent::gzip(&r.flent)?)
            .with_context(|| format!("writing {}", dir.join(&name).display()))?;
        datasets.push(Dataset::from_json(&r.flent, &title).map_err(anyhow::Error::msg)?);
    }
    let doc = serde_json::json!({
        "seeds": reps.seeds,
        "metrics": reps.metrics,
        "runs": runs.iter().map(|r| &r.summary).collect::<Vec<_>>(),
    });
    let path = dir.join("summary.json");
    std::fs::write(&path, serde_json::to_string_pretty(&doc)?)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(datasets)
}

/// The sweep's table over seeds: one row per configuration, total goodput and the first latency
/// probe's median and p99, each as mean ± half-width.
pub fn sweep_table(rows: &[(String, Repeats)]) -> String {
    let cell = |r: &Repeats, name: Option<String>| -> String {
        name.and_then(|n| r.get(&n).and_then(|m| m.spread.clone()))
            .map_or("—".into(), |s| {
                format!("{:.2} ± {:.2}", s.mean, s.half_width)
            })
    };
    let width = rows
        .iter()
        .map(|(l, _)| l.chars().count())
        .max()
        .unwrap_or(3)
        .max(3);
    let mut out = format!(
        "  {:<width$} {:>22} {:>22} {:>22}\n  {:<width$} {:>22} {:>22} {:>22}\n",
        "run", "total goodput", "latency p50", "latency p99", "", "Mbit/s", "ms", "ms"
    );
    for (label, r) in rows {
        // The first latency probe: the first metric named "… p50" that is not a queue's.
        let probe = r
            .metrics
            .iter()
            .find(|m| m.name.ends_with(" p50") && m.unit == "ms" && !m.name.contains("sojourn"))
            .map(|m| m.name.trim_end_matches(" p50").to_string());
        out.push_str(&format!(
            "  {label:<width$} {:>22} {:>22} {:>22}\n",
            cell(r, Some("total goodput".into())),
            cell(r, probe.as_ref().map(|p| format!("{p} p50"))),
            cell(r, probe.map(|p| format!("{p} p99"))),
        ));
    }
    out
}
