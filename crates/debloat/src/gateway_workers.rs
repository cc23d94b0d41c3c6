//! `debloat gateway --workers N` / `--cores LIST`: how many forwarding workers, what is said
//! about them, and which configurations they can run — every shaper's rate must be split
//! between them (docs/gateway-workers.md).

use crate::gateway::RunArgs;
use anyhow::{bail, Result};
use debloat_core::QdiscSpec;
use debloat_gateway::Config;

/// `--workers N` and `--cores LIST`: how many workers (LIST's length, if N is not given).
pub(crate) fn count(a: &RunArgs) -> Result<usize> {
    match (a.workers, &a.cores) {
        (Some(n), Some(c)) if usize::from(n) != c.len() => bail!(
            "--workers {n} with --cores naming {} CPUs: give one CPU per worker (or drop --workers)",
            c.len()
        ),
        (Some(n), _) => Ok(usize::from(n)),
        (None, Some(c)) if c.is_empty() => bail!("--cores needs at least one CPU"),
        (None, Some(c)) => Ok(c.len()),
        (None, None) => Ok(1),
    }
}

/// Say how many workers run, on which CPUs, and warn that an emulated link is each worker's.
pub(crate) fn say(cfg: &Config) {
    if cfg.workers > 1 {
        println!(
            "{} workers{}, each with a shard of the hosts (by the LAN host's address); a shaper's rate split between them by demand every 0.5 ms",
            cfg.workers,
            cfg.cores.as_ref().map_or(String::new(), |c| format!(" on CPUs {c:?}"))
        );
        let emulated = [&cfg.emulate_egress, &cfg.emulate_ingress]
            .iter()
            .any(|e| e.rate_bps.is_some());
        if emulated {
            eprintln!(
                "warning: with {} workers each emulates its own link: an --emulate-* rate is each worker's, {}× in all (put a bottleneck beyond the gateway, or use one worker, to emulate one link)",
                cfg.workers, cfg.workers
            );
        }
    }
}

/// With several workers every shaper's rate must be split between them (each worker runs its
/// own copy of the disciplines): cake's `bandwidth` and tbf's `rate` are; an htb tree is not, so
/// each worker would shape at the tree's full rates, N× the link's. Refused, with the reason.
pub(crate) fn split_between_workers(cfg: &Config) -> Result<()> {
    if cfg.workers < 2 {
        return Ok(());
    }
    for (flag, spec) in [("--egress", &cfg.egress), ("--ingress", &cfg.ingress)] {
        if matches!(spec, QdiscSpec::Htb(_)) {
            let what = if cfg.circuits.is_some() {
                "--network/--devices (LibreQoS's circuits are htb trees)".to_string()
            } else {
                format!("htb on {flag}")
            };
            bail!(
                "--workers {n} with {what}: each worker would shape at the tree's full rates, {n}× the link's in all; run one worker (splitting an htb tree between workers is not built yet), or shape with cake or tbf, whose rate the workers split",
                n = cfg.workers
            );
        }
    }
    Ok(())
}
