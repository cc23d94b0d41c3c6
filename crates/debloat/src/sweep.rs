//! `debloat sim --sweep`: one flent test across lists of qdiscs, link rates, RTTs, congestion
//! controls… (every combination), one row each, and a report comparing them.

use crate::sim::{self, Args};
use crate::summary::progress_line;
use anyhow::{bail, Context, Result};
use debloat_report::{Dataset, RunSummary};
use std::io::IsTerminal;
use std::path::PathBuf;

const KEYS: &str = "qdisc, qdisc-up, qdisc-down, link, rtt, cc, streams, ecn, tcp-window";

/// One swept parameter and its values.
#[derive(Debug, PartialEq)]
struct Axis {
    key: String,
    values: Vec<String>,
}

/// Parse `KEY=V1;V2;…`.
fn axis(s: &str) -> Result<Axis> {
    let Some((key, vals)) = s.split_once('=') else {
        bail!("--sweep \"{s}\": expected KEY=V1;V2;… with KEY one of {KEYS}");
    };
    let key = key.trim().to_ascii_lowercase();
    if !KEYS.split(", ").any(|k| k == key) {
        bail!("--sweep: unknown key `{key}`; expected one of {KEYS}");
    }
    let values: Vec<String> = vals
        .split(';')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect();
    if values.is_empty() {
        bail!("--sweep {key}=…: no values (separate them with `;`)");
    }
    Ok(Axis { key, values })
}

/// Set one swept parameter on a copy of the arguments.
fn apply(a: &mut Args, key: &str, v: &str) -> Result<()> {
    match key {
        "qdisc" => {
            a.qdisc = v.into();
            a.qdisc_up = None;
            a.qdisc_down = None;
        }
        "qdisc-up" => a.qdisc_up = Some(v.into()),
        "qdisc-down" => a.qdisc_down = Some(v.into()),
        "link" => a.link = v.into(),
        "rtt" => a.rtt = v.into(),
        "cc" => a.cc = v.into(),
        "tcp-window" => {
            a.tcp_window = match v {
                "none" | "off" => None,
                _ => Some(v.into()),
            }
        }
        "streams" => {
            a.streams = v
                .parse()
                .with_context(|| format!("--sweep streams={v}: expected a number"))?
        }
        "ecn" => {
            a.ecn = match v {
                "on" | "true" | "yes" | "1" => true,
                "off" | "false" | "no" | "0" => false,
                _ => bail!("--sweep ecn={v}: expected on or off"),
            }
        }
        _ => bail!("--sweep: unknown key `{key}`; expected one of {KEYS}"),
    }
    Ok(())
}

/// Every combination of the axes' values, as (key, value) lists.
fn combinations(axes: &[Axis]) -> Vec<Vec<(String, String)>> {
    let mut out: Vec<Vec<(String, String)>> = vec![Vec::new()];
    for ax in axes {
        out = out
            .into_iter()
            .flat_map(|c| {
                ax.values.iter().map(move |v| {
                    let mut c = c.clone();
                    c.push((ax.key.clone(), v.clone()));
                    c
                })
            })
            .collect();
    }
    out
}

/// Run the sweep.
pub fn run(a: &Args) -> Result<()> {
    let axes = a
        .sweep
        .iter()
        .map(|s| axis(s))
        .collect::<Result<Vec<_>>>()?;
    let combos = combinations(&axes);
    if combos.len() > 1000 {
        bail!("--sweep: {} combinations; at most 1000", combos.len());
    }
    let dir = a
        .output
        .clone()
        .unwrap_or_else(|| PathBuf::from("debloat-sweep"));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    if a.seeds > 1 {
        return run_seeded(a, &combos, &dir);
    }
    let tty = std::io::stderr().is_terminal();
    let mut runs = Vec::new();
    for (i, combo) in combos.iter().enumerate() {
        let (args, label) = combo_args(a, combo)?;
        let cfg = sim::config(&args).with_context(|| format!("run {}: {label}", i + 1))?;
        let r = debloat_sim::simulate(&cfg, |f| {
            if tty {
                progress_line(&format!("run {}/{}: {label}", i + 1, combos.len()), f);
            }
        });
        let epoch = debloat_sim::flent::DEFAULT_EPOCH + i as u64;
        let data = debloat_sim::flent::data_file(&r.world, &cfg, epoch, &label);
        let name = debloat_sim::flent::file_name(cfg.test, epoch, &label);
        std::fs::write(dir.join(&name), debloat_sim::flent::gzip(&data)?)
            .with_context(|| format!("writing {}", dir.join(&name).display()))?;
        let mut d = Dataset::from_json(&data, &label).map_err(anyhow::Error::msg)?;
        d.label = label;
        runs.push(d);
    }
    if tty {
        eprint!("\r\x1b[2K");
    }
    let test = a.test.as_deref().unwrap_or_default();
    println!("{test}: {} runs, same seed ({})\n", runs.len(), a.seed);
    let sums: Vec<RunSummary> = runs.iter().map(RunSummary::of).collect();
    print!("{}", debloat_report::table::text(&sums));
    let index = debloat_report::write(&runs, &dir, &format!("debloat sweep: {test}"))?;
    println!(
        "\nreport: {} (and one flent data file per run)",
        index.display()
    );
    Ok(())
}

/// The arguments and label of one combination.
fn combo_args(a: &Args, combo: &[(String, String)]) -> Result<(Args, String)> {
    let mut args = a.clone();
    for (k, v) in combo {
        apply(&mut args, k, v)?;
    }
    let label = combo
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ");
    Ok((args, label))
}

/// `--sweep … --seeds N`: every combination over the seeds; one row each with the mean ± the
/// 95 % half-width of total goodput and the first latency probe's median and p99; each
/// combination's runs and `summary-K.json` in the directory; a report of the spreads.
fn run_seeded(a: &Args, combos: &[Vec<(String, String)>], dir: &std::path::Path) -> Result<()> {
    let mut groups = Vec::new();
    let mut rows = Vec::new();
    for (i, combo) in combos.iter().enumerate() {
        let (mut args, label) = combo_args(a, combo)?;
        args.title = label.clone();
        let cfg = sim::config(&args).with_context(|| format!("run {}: {label}", i + 1))?;
        let what = format!("run {}/{}: {label}", i + 1, combos.len());
        let epoch = debloat_sim::flent::DEFAULT_EPOCH + (i as u64) * a.seeds;
        let runs = crate::seeds::run_config(&cfg, &args, &what, epoch);
        let reps = debloat_sim::repeat::fold(&runs);
        let sub = dir.join(format!("run-{}", i + 1));
        let datasets = crate::seeds::write_runs(&sub, &cfg, &runs, &reps, epoch)?;
        rows.push((label.clone(), reps));
        groups.push((label, datasets));
    }
    let test = a.test.as_deref().unwrap_or_default();
    println!(
        "{test}: {} configurations × seeds {}–{}: mean ± 95 % confidence interval\n",
        combos.len(),
        a.seed,
        a.seed + a.seeds - 1
    );
    print!("{}", crate::seeds::sweep_table(&rows));
    let g: Vec<debloat_report::plot::Group> = groups
        .iter()
        .map(|(label, runs)| debloat_report::plot::Group {
            label: label.clone(),
            runs,
        })
        .collect();
    let index = debloat_report::write_repeats(&g, dir, &format!("debloat sweep: {test}"))?;
    println!(
        "\nreport: {} (each configuration's runs and summary.json in run-K/)",
        index.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_parse_and_bad_keys_name_the_choices() {
        let ax = axis("qdisc=pfifo limit 1000; fq_codel ;cake bandwidth 20Mbit").expect("valid");
        assert_eq!(
            ax.values,
            ["pfifo limit 1000", "fq_codel", "cake bandwidth 20Mbit"]
        );
        let e = axis("colour=red").expect_err("unknown key").to_string();
        assert!(e.contains("colour") && e.contains("qdisc"), "{e}");
        assert!(axis("rtt=").is_err());
        assert!(axis("rtt").is_err());
    }

    #[test]
    fn every_combination_runs_once() {
        let axes = [
            axis("qdisc=a;b;c").expect("valid"),
            axis("rtt=1ms;2ms").expect("valid"),
        ];
        let c = combinations(&axes);
        assert_eq!(c.len(), 6);
        assert_eq!(
            c[1],
            [("qdisc".into(), "a".into()), ("rtt".into(), "2ms".into())]
        );
    }
}
