//! `gateway --network network.json --devices ShapedDevices.csv`: LibreQoS's two files, linted,
//! as the two directions' HTB trees and the circuit stage (docs/circuits.md). `--check` prints
//! what the lint found and what the trees cost, and exits.

use anyhow::{bail, Context, Result};
use debloat_core::classify::circuits::{self, CircuitTree, Circuits, Plan, TreeOptions};
use std::path::PathBuf;
use std::time::Instant;

/// LibreQoS's inputs.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct CircuitArgs {
    /// LibreQoS's network.json: sites, access points … with their rates (Mbit/s); `{}` for a
    /// flat network. With --devices, the two directions become HTB trees of circuits.
    #[arg(long, value_name = "FILE", requires = "devices")]
    pub network: Option<PathBuf>,
    /// LibreQoS's ShapedDevices.csv: one device per row, circuits by Circuit ID, their
    /// addresses, MACs, parent nodes and min/max rates (Mbit/s), an optional `sqm` column.
    #[arg(long, value_name = "FILE", requires = "network")]
    pub devices: Option<PathBuf>,
    /// The link's rates for the trees' root, DOWN/UP (LibreQoS's downlink and uplink), e.g.
    /// 1Gbit/500Mbit; default: the fastest top-level node's, each way.
    #[arg(long, value_name = "DOWN/UP", requires = "network")]
    pub network_rate: Option<String>,
    /// Release an idle circuit's queues after this long (its class and counters stay).
    #[arg(long, value_name = "TIME", default_value = "10s", requires = "network")]
    pub release_idle: String,
    /// How many circuits `gateway stats --json` and Prometheus list, the busiest (bytes both
    /// ways) first; 0 for all (a series each: cardinality is your choice).
    #[arg(long, value_name = "N", default_value_t = 20, requires = "network")]
    pub circuit_metrics: usize,
    /// Only lint the two files (and build the trees): print every error and warning with
    /// its file and line, what was built and its memory, and exit (1 when refused).
    #[arg(long, requires = "network")]
    pub check: bool,
}

/// The files read, linted and built.
pub struct Loaded {
    /// Every finding (warnings only, when loaded).
    pub plan: Plan,
    /// The two trees.
    pub tree: CircuitTree,
    /// The classify stage.
    pub stage: Circuits,
}

fn rates(a: &CircuitArgs, plan_text: &str) -> Result<(u64, u64)> {
    if let Some(r) = &a.network_rate {
        let (d, u) = r
            .split_once('/')
            .with_context(|| format!("--network-rate {r}: give DOWN/UP, e.g. 1Gbit/500Mbit"))?;
        crate::rates::check_rate("--network-rate", d)?;
        crate::rates::check_rate("--network-rate", u)?;
        let p = |x: &str| debloat_core::units::parse_rate(x).map_err(anyhow::Error::msg);
        return Ok((p(d)?, p(u)?));
    }
    let v: serde_json::Value = serde_json::from_str(plan_text).unwrap_or_default();
    let top = |k: &str| {
        v.as_object()
            .into_iter()
            .flat_map(|o| o.values())
            .filter_map(|n| n.get(k).and_then(serde_json::Value::as_f64))
            .fold(0.0f64, f64::max)
    };
    let (d, u) = (top("downloadBandwidthMbps"), top("uploadBandwidthMbps"));
    if d <= 0.0 || u <= 0.0 {
        bail!("a flat network.json has no rate for the link: give --network-rate DOWN/UP");
    }
    Ok(((d * 1e6) as u64, (u * 1e6) as u64))
}

/// Read both files; every finding is printed; an error refuses them (`Err`).
pub fn load(a: &CircuitArgs) -> Result<Option<Loaded>> {
    load_keeping(a, None)
}

/// [`load`] again for a reload: circuits and nodes still in the files keep the minors `keep`
/// gave them, so the running trees take the new ones in place.
pub fn load_keeping(a: &CircuitArgs, keep: Option<&circuits::Minors>) -> Result<Option<Loaded>> {
    let (Some(n), Some(d)) = (&a.network, &a.devices) else {
        return Ok(None);
    };
    let read = |p: &PathBuf, what: &str| {
        std::fs::read_to_string(p).with_context(|| format!("{what} {}", p.display()))
    };
    let (nt, dt) = (read(n, "--network")?, read(d, "--devices")?);
    let (down_bps, up_bps) = rates(a, &nt)?;
    let idle = debloat_core::units::parse_time(&a.release_idle)
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("--release-idle {}", a.release_idle))?;
    let o = TreeOptions {
        down_bps,
        up_bps,
        release_idle: (idle > 0).then_some(idle),
    };
    let (nn, dn) = (n.display().to_string(), d.display().to_string());
    let (plan, built) = circuits::load_keeping((&nn, &nt), (&dn, &dt), &o, keep);
    for f in &plan.findings {
        eprintln!("{f}");
    }
    let errors = plan.findings.iter().filter(|f| f.error).count();
    let Some((tree, stage)) = built else {
        bail!("{nn} and {dn} refused: {errors} errors (nothing was changed; fix them and run again, or try --check)");
    };
    for w in &tree.warnings {
        eprintln!("warning: {w}");
    }
    Ok(Some(Loaded { plan, tree, stage }))
}

/// Resident memory, bytes (Linux's /proc/self/statm).
fn rss() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|x| x.parse::<u64>().ok())
        })
        .map_or(0, |pages| pages * 4096)
}

/// `--check`: lint, build both trees as the gateway would, say what they cost.
pub fn check(a: &CircuitArgs) -> Result<()> {
    let before = rss();
    let t0 = Instant::now();
    let Some(l) = load(a)? else {
        bail!("--check needs --network FILE and --devices FILE");
    };
    let up = debloat_core::QdiscSpec::Htb(l.tree.up.clone())
        .build::<debloat_core::Record>(Default::default(), 1);
    let down = debloat_core::QdiscSpec::Htb(l.tree.down.clone())
        .build::<debloat_core::Record>(Default::default(), 2);
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    let grew = rss().saturating_sub(before);
    let devices: usize = l.plan.circuits.iter().map(|c| c.devices.len()).sum();
    let warnings = l.plan.findings.len();
    println!(
        "{} nodes, {} circuits, {devices} devices: {} classes each way; {warnings} warnings, no errors",
        l.plan.nodes.len(),
        l.plan.circuits.len(),
        l.tree.down.classes.len()
    );
    println!(
        "built in {ms:.0} ms; resident memory grew {:.1} MiB, {:.0} bytes per circuit with every queue idle (LibreQoS plans 512 KiB per CAKE leaf)",
        grew as f64 / 1048576.0,
        grew as f64 / l.plan.circuits.len().max(1) as f64
    );
    let n = 2000.min(l.plan.circuits.len());
    let active = activate(&l, down, n, debloat_core::Direction::Down);
    let with = rss().saturating_sub(before);
    println!(
        "with {active} circuits active down (a packet queued in each): {:.1} MiB more, {:.0} bytes per active circuit",
        with.saturating_sub(grew) as f64 / 1048576.0,
        with.saturating_sub(grew) as f64 / active.max(1) as f64
    );
    let both = activate(&l, up, n, debloat_core::Direction::Up);
    let total = rss().saturating_sub(before);
    println!(
        "and up too (a packet from each): {:.1} MiB more; {:.1} MiB in all with {both} circuits active both ways, {:.0} bytes per active CAKE (one tin each holds packets; each further tin in use adds about 95 KB)",
        total.saturating_sub(with) as f64 / 1048576.0,
        total as f64 / 1048576.0,
        total.saturating_sub(grew) as f64 / (active + both).max(1) as f64
    );
    Ok(())
}

/// Queue one packet for each of the first `n` circuits (to its first address going down, from
/// it going up) in that direction's tree: their leaves are built, as traffic would build them.
/// How many were reached.
fn activate(
    l: &Loaded,
    mut tree: Box<dyn debloat_core::Qdisc<debloat_core::Record>>,
    n: usize,
    dir: debloat_core::Direction,
) -> usize {
    use debloat_core::classify::Classify;
    let mut stage = l.stage.clone();
    let mut reached = 0;
    for (i, c) in l.plan.circuits.iter().take(n).enumerate() {
        let Some(net) = c.devices.iter().flat_map(|d| d.nets.first()).next() else {
            continue;
        };
        let far: std::net::IpAddr = "198.18.0.1"
            .parse()
            .unwrap_or(std::net::IpAddr::from([0u8; 4]));
        let key = match dir {
            debloat_core::Direction::Down => {
                debloat_core::flow::FlowKey::ip(far, net.addr(), 443, 1000, 6)
            }
            debloat_core::Direction::Up => {
                debloat_core::flow::FlowKey::ip(net.addr(), far, 1000, 443, 6)
            }
        };
        let mut m = debloat_core::PacketMeta::new(1514, key);
        let _ = stage.classify(&mut m, dir, 0);
        if tree.enqueue(debloat_core::Record::new(i as u64, m), 0) != debloat_core::Verdict::Dropped
        {
            reached += 1;
        }
    }
    std::mem::forget(tree); // measured while held; the process exits next
    reached
}
