//! `debloat gateway --workers N` / `--cores LIST`: how many forwarding workers, and what is
//! said about them (docs/gateway-workers.md). Every shaper they run is split between them:
//! cake's `bandwidth`, tbf's `rate`, an htb tree class by class, LibreQoS's circuits too.

use crate::gateway::RunArgs;
use anyhow::{bail, Result};
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
