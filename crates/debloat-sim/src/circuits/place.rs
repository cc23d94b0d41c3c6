//! The load profile's groups as subscriber hosts, flows and pings in the world.

use super::{bad, cc, members, pick, Placed, Profile, ProfileError};
use crate::world::{Dir, World};
use debloat_core::classify::circuits::Plan;

/// Ping interval of each active circuit's probe.
const PING_NS: u64 = 200_000_000;

/// Give every group's active circuits their flows and pings; what each circuit got.
pub(super) fn place(
    w: &mut World,
    plan: &Plan,
    p: &Profile,
    seed: u64,
    end: u64,
) -> Result<Vec<Placed>, ProfileError> {
    if p.groups.is_empty() {
        return Err(bad(
            "group",
            "no [[group]]: name some circuits and their traffic",
        ));
    }
    let mut placed = vec![Placed::default(); plan.circuits.len()];
    for (k, g) in p.groups.iter().enumerate() {
        let what = |key: &str| format!("group {}: {key}", k + 1);
        let from = members(plan, g, k)?;
        let frac = g.active.unwrap_or(1.0);
        if !(0.0..=1.0).contains(&frac) {
            return Err(bad(what("active"), "a fraction from 0 to 1, e.g. 0.6"));
        }
        let start = (g.start.unwrap_or(0.0) * 1e9) as u64;
        let stop = g.stop.map_or(end, |s| ((s * 1e9) as u64).min(end));
        if start >= stop {
            return Err(bad(what("start"), "before stop and the run's length"));
        }
        let algo = cc(g, k)?;
        let n = (frac * from.len() as f64).round() as usize;
        for c in pick(&from, n, seed ^ k as u64) {
            let Some(ip) = super::address(plan, c) else {
                return Err(bad(
                    format!("circuit \"{}\"", plan.circuits[c].id),
                    "has no IPv4 or IPv6 address in ShapedDevices.csv, so no host can be placed on it",
                ));
            };
            let id = &plan.circuits[c].id;
            for (dir, count, word) in [
                (Dir::Down, g.download.unwrap_or(1), "download"),
                (Dir::Up, g.upload.unwrap_or(0), "upload"),
            ] {
                for j in 0..count {
                    let name = format!("{id} {word} {}", j + 1);
                    let f = w.add_flow(&name, dir, algo, 0, false, start, stop);
                    w.set_flow_client_addr(f, ip);
                    placed[c].flows.push((f, dir));
                }
            }
            if g.ping.unwrap_or(true) && placed[c].probe.is_none() {
                let k = w.add_probe(&format!("{id} ping"), false, 0, start, PING_NS);
                w.set_probe_client_addr(k, ip);
                w.set_probe_stop(k, stop);
                placed[c].probe = Some(k);
            }
        }
    }
    Ok(placed)
}
