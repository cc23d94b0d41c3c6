//! `debloat sim --network network.json --devices ShapedDevices.csv --load profile.toml`:
//! LibreQoS's files in the simulator (`debloat_sim::circuits`), read and linted exactly as
//! `gateway --network … --devices …` reads them; per-node and per-circuit tables, and with
//! `--output` the same as CSV and JSON.

use anyhow::{Context, Result};
use debloat_sim::circuits::{CircuitResult, CircuitRun};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

/// The simulator's circuit words.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct CircuitSimArgs {
    /// LibreQoS's network.json: with --devices and --load, simulate its circuits (shaped by the
    /// HTB trees the gateway would build) under the load the profile describes (docs/circuits.md).
    #[arg(long, value_name = "FILE", requires_all = ["devices", "load"], conflicts_with_all = ["test", "scenario"])]
    pub network: Option<PathBuf>,
    /// LibreQoS's ShapedDevices.csv (with --network).
    #[arg(long, value_name = "FILE", requires = "network")]
    pub devices: Option<PathBuf>,
    /// The load profile (TOML): which circuits are active, their TCP transfers and pings.
    #[arg(long, value_name = "FILE", requires = "network")]
    pub load: Option<PathBuf>,
    /// The trees' root rates DOWN/UP (LibreQoS's downlink and uplink); default: the fastest
    /// top-level node's, each way.
    #[arg(long, value_name = "DOWN/UP", requires = "network")]
    pub network_rate: Option<String>,
}

/// Read the files and the profile, run, and return the run (nothing printed but the files'
/// findings, on stderr).
pub fn simulate(a: &CircuitSimArgs) -> Result<CircuitRun> {
    let args = crate::circuits::CircuitArgs {
        network: a.network.clone(),
        devices: a.devices.clone(),
        network_rate: a.network_rate.clone(),
        release_idle: "0s".into(),
        ..Default::default()
    };
    let Some(l) = crate::circuits::load(&args)? else {
        anyhow::bail!("--network needs --devices FILE and --load FILE");
    };
    let path = a.load.as_deref().unwrap_or(Path::new(""));
    let text =
        std::fs::read_to_string(path).with_context(|| format!("--load {}", path.display()))?;
    let rates = (
        l.tree.down.classes[0].rate_bps,
        l.tree.up.classes[0].rate_bps,
    );
    let tty = std::io::stderr().is_terminal();
    let started = std::time::Instant::now();
    let r = debloat_sim::circuits::run(&text, &l.plan, &l.tree, l.stage, rates, |f| {
        if tty && started.elapsed().as_secs_f64() > 1.0 {
            crate::summary::progress_line("simulating the circuits", f);
        }
    })
    .with_context(|| format!("--load {}", path.display()))?;
    if tty {
        eprint!("\r\x1b[2K");
    }
    Ok(r)
}

/// The command: run, print the tables, write the files.
pub fn run(a: &CircuitSimArgs, output: Option<&Path>) -> Result<()> {
    let r = simulate(a)?;
    print!("{}", tables(&r));
    if let Some(dir) = output {
        write(dir, &r)?;
        println!(
            "\nwrote circuits.csv, nodes.csv and summary.json in {}",
            dir.display()
        );
    }
    Ok(())
}

/// How many circuits the table lists (the worst latency first); the rest are in circuits.csv.
const SHOWN: usize = 20;

fn tables(r: &CircuitRun) -> String {
    use std::fmt::Write as _;
    let mut t = String::new();
    let active = r.circuits.iter().filter(|c| c.active).count();
    let _ = writeln!(
        t,
        "{} circuits, {active} active, {:.0} s simulated\n",
        r.circuits.len(),
        r.length_s
    );
    let _ = writeln!(
        t,
        "  {:<24} {:>7} {:>12} {:>12} {:>14}",
        "node", "active", "down Mbit/s", "up Mbit/s", "class / max"
    );
    for n in &r.nodes {
        let _ = writeln!(
            t,
            "  {:<24} {:>7} {:>12.2} {:>12.2} {:>7.1} / {:<5.0}",
            n.name, n.active, n.down_mbps, n.up_mbps, n.down_class_mbps, n.down_max_mbps
        );
    }
    let mut shown: Vec<&CircuitResult> = r.circuits.iter().filter(|c| c.active).collect();
    shown.sort_by(|a, b| {
        b.ping_p99_ms
            .unwrap_or(0.0)
            .total_cmp(&a.ping_p99_ms.unwrap_or(0.0))
    });
    let _ = writeln!(
        t,
        "\n  {:<16} {:<14} {:>11} {:>11} {:>12} {:>9} {:>9} {:>6}",
        "circuit",
        "parent",
        "down Mbit/s",
        "class Mbit/s",
        "min–max",
        "ping p50",
        "p99 ms",
        "drops"
    );
    let ms = |v: Option<f64>| v.map_or("—".to_string(), |x| format!("{x:.1}"));
    for c in shown.iter().take(SHOWN) {
        let _ = writeln!(
            t,
            "  {:<16} {:<14} {:>11.2} {:>11.2} {:>12} {:>9} {:>9} {:>6}",
            c.id,
            c.parent,
            c.down_mbps,
            c.down_class_mbps,
            format!("{:.0}–{:.0}", c.down_min_mbps, c.down_max_mbps),
            ms(c.ping_p50_ms),
            ms(c.ping_p99_ms),
            c.drops
        );
    }
    if shown.len() > SHOWN {
        let _ = writeln!(
            t,
            "  … {} more active circuits (the highest ping p99 first; all in circuits.csv with --output)",
            shown.len() - SHOWN
        );
    }
    t
}

/// `circuits.csv`, `nodes.csv` and `summary.json` (the flows and pings as `sim` writes them,
/// with the circuits and nodes).
fn write(dir: &Path, r: &CircuitRun) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let csv = |name: &str, rows: &mut dyn FnMut(&mut csv::Writer<std::fs::File>) -> Result<()>| {
        let path = dir.join(name);
        let mut w =
            csv::Writer::from_path(&path).with_context(|| format!("writing {}", path.display()))?;
        rows(&mut w)?;
        w.flush()?;
        Ok::<_, anyhow::Error>(())
    };
    csv("circuits.csv", &mut |w| {
        r.circuits.iter().try_for_each(|c| Ok(w.serialize(c)?))
    })?;
    csv("nodes.csv", &mut |w| {
        r.nodes.iter().try_for_each(|n| Ok(w.serialize(n)?))
    })?;
    let doc = serde_json::json!({
        "summary": r.summary,
        "circuits": r.circuits,
        "nodes": r.nodes,
    });
    std::fs::write(
        dir.join("summary.json"),
        serde_json::to_string_pretty(&doc)?,
    )?;
    Ok(())
}
