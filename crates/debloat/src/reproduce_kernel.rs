//! `debloat reproduce --kernel`: the wired rows that have kernel runs (`debloat_lab::rows`), in
//! three columns — the simulator, debloat's gateway and the real kernel's qdiscs, both with
//! real TCP in the kernel lab — each judged against the row's band.

use anyhow::{anyhow, bail, Context, Result};
use debloat_lab::{rows, side, Lab};
use debloat_sim::reproduce::{Check, Experiment};
use std::time::Instant;

/// One check in three columns.
#[derive(Debug, serde::Serialize)]
struct Row {
    experiment: &'static str,
    check: String,
    unit: &'static str,
    published: &'static str,
    band: String,
    simulator: f64,
    gateway: f64,
    kernel: f64,
    ok: [bool; 3],
    /// Whether the kernel's figure is judged: not when it is outside the band while the host
    /// stole 5 % of a CPU or more from the guest (`HostStalls::decides_timing`).
    kernel_judged: bool,
    /// What the host took away while the lab ran this check's run.
    host: Option<String>,
}

fn row(e: &Experiment, c: &Check, gateway: f64, kernel: f64) -> Row {
    Row {
        kernel_judged: true,
        host: None,
        experiment: e.id,
        check: c.what.clone(),
        unit: c.unit,
        published: c.published,
        band: format!("{} {}", c.band, c.unit),
        simulator: c.measured,
        gateway,
        kernel,
        ok: [c.measured, gateway, kernel].map(|v| c.band.contains(v)),
    }
}

/// Run the chosen experiments' kernel rows; fails when a kernel or simulator figure is outside
/// its band.
pub fn run(chosen: &[&'static Experiment], json: bool) -> Result<()> {
    let lab = Lab::find()?;
    let exe = std::env::current_exe().context("finding debloat's own path")?;
    for e in chosen {
        if rows::runs(e.id).is_none() {
            bail!(
                "{}: no kernel runs yet; --kernel covers {}",
                e.id,
                rows::IDS.join(", ")
            );
        }
    }
    let mut all = Vec::new();
    for e in chosen {
        let runs = rows::runs(e.id).unwrap_or_default();
        let t = Instant::now();
        eprintln!("{}: the simulator …", e.id);
        let sim = (e.run)(1);
        // Every check a kernel run answers must be one of the simulator's, before the lab runs.
        unanswerable(e.id, &runs, &sim.checks)?;
        let (mut gw_runs, mut k_runs) = (Vec::new(), Vec::new());
        for (i, r) in runs.iter().enumerate() {
            eprintln!(
                "{}: kernel and gateway {}/{} ({}, {} s each) …",
                e.id,
                i + 1,
                runs.len(),
                r.plan.up,
                r.plan.seconds
            );
            let (s, rows) = measured(&lab, &exe, e, r, &sim.checks, (&gw_runs, &k_runs))?;
            all.extend(rows);
            gw_runs.push(s.debloat);
            k_runs.push(s.kernel);
        }
        if !json {
            print_table(e, &all, &lab.describe(), t.elapsed().as_secs_f64());
        }
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&all)?);
    }
    let missed: Vec<String> = all
        .iter()
        .filter(|r| !r.ok[0] || (!r.ok[2] && r.kernel_judged))
        .map(|r| format!("{}: {}", r.experiment, r.check))
        .collect();
    if !missed.is_empty() {
        bail!(
            "the simulator or the kernel is outside the band: {}",
            missed.join("; ")
        );
    }
    Ok(())
}

/// One kernel run of row `e` in the lab and its checks' rows. When a kernel figure is outside
/// its band and the host stalled the guest enough to void the run (`HostStalls::voids`), the
/// run is made once more; a figure still outside while the host stole 5 % of a CPU or more is
/// shown but not judged (docs/kernel-lab.md, "the host stealing the CPU").
fn measured(
    lab: &Lab,
    exe: &std::path::Path,
    e: &Experiment,
    r: &rows::Run,
    sim: &[Check],
    (gw_runs, k_runs): (&[side::Measured], &[side::Measured]),
) -> Result<(side::SideBySide, Vec<Row>)> {
    let mut again = true;
    loop {
        let s = side::in_lab(lab, &r.plan, exe).map_err(|m| anyhow!("{}: {m}", e.id))?;
        let mut out = Vec::new();
        for (name, metric) in &r.checks {
            let c = sim
                .iter()
                .find(|c| &c.what == name)
                .ok_or_else(|| anyhow!("{}: the simulator has no check `{name}`", e.id))?;
            let gw = metric.of_after(&s.debloat, gw_runs);
            let mut x = row(e, c, gw, metric.of_after(&s.kernel, k_runs));
            x.host = s.host.as_ref().map(ToString::to_string);
            x.kernel_judged = x.ok[2] || !s.host.as_ref().is_some_and(|h| h.decides_timing());
            out.push(x);
        }
        if let Some(h) = &s.host {
            eprintln!("{}: meanwhile {h}", e.id);
        }
        let outside = out.iter().any(|x| !x.ok[2]);
        if outside && again && s.stalls().is_some_and(|h| h.voids()) {
            eprintln!("{}: a kernel figure is outside its band and the host stalled the guest: the run once more …", e.id);
            again = false;
            continue;
        }
        return Ok((s, out));
    }
}

/// An error naming the first kernel check that is not one of the simulator's.
fn unanswerable(id: &str, runs: &[rows::Run], sim: &[Check]) -> Result<()> {
    for (name, _) in runs.iter().flat_map(|r| r.checks.iter()) {
        if !sim.iter().any(|c| &c.what == name) {
            bail!("{id}: the simulator has no check `{name}`");
        }
    }
    Ok(())
}

fn print_table(e: &Experiment, rows: &[Row], kernel: &str, secs: f64) {
    println!(
        "{} — {} (kernel lab: {kernel}, real TCP; {secs:.0} s)",
        e.id, e.scenario
    );
    println!(
        "  {:<40} {:>12} {:>14} {:>12} {:>12} {:>12}",
        "check", "published", "band", "simulator", "gateway", "kernel"
    );
    let mark = |v: f64, ok: bool| format!("{v:.2}{}", if ok { "" } else { " ✗" });
    let kernel = |r: &Row| match (r.ok[2], r.kernel_judged) {
        (false, false) => format!("{:.2} ✗ (host)", r.kernel),
        _ => mark(r.kernel, r.ok[2]),
    };
    for r in rows.iter().filter(|r| r.experiment == e.id) {
        println!(
            "  {:<40} {:>12} {:>14} {:>12} {:>12} {:>12}",
            r.check,
            r.published,
            r.band,
            mark(r.simulator, r.ok[0]),
            mark(r.gateway, r.ok[1]),
            kernel(r),
        );
    }
    println!("  (✗: outside the band; ✗ (host): outside while the host stole 5 % of a CPU or more, not judged; units as the band's)\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel rows name the simulator's checks exactly (seed 1 of each experiment).
    #[test]
    fn every_kernel_check_is_one_of_the_simulators() {
        for id in rows::IDS {
            let e = debloat_sim::reproduce::find(id).unwrap_or_else(|| panic!("{id}"));
            let runs = rows::runs(id).unwrap_or_default();
            let sim = (e.run)(1);
            if let Err(err) = unanswerable(id, &runs, &sim.checks) {
                panic!("{err}");
            }
        }
        let fake = vec![rows::Run {
            plan: rows::runs("PI-55").unwrap_or_default()[0].plan.clone(),
            checks: vec![("no such check".into(), rows::Metric::PingP50)],
        }];
        let err = unanswerable("PI-55", &fake, &[]).map_err(|e| e.to_string());
        assert_eq!(
            err,
            Err("PI-55: the simulator has no check `no such check`".into())
        );
    }
}
