//! `sim --wifi`: the AP, its stations and their rates from the command line.

use super::*;

pub(super) fn wifi_config(a: &Args, kind: &str) -> Result<debloat_sim::wifi::WifiConfig> {
    use debloat_core::airtime::PhyRate;
    use debloat_sim::wifi::{ApQueueing, WifiConfig};
    let q: ApQueueing = kind
        .parse()
        .map_err(|e: debloat_sim::wifi::UnknownQueueing| anyhow::anyhow!("--wifi: {e}"))?;
    let rates = a
        .stations
        .iter()
        .map(|r| {
            r.parse::<PhyRate>()
                .map_err(|e| anyhow::anyhow!("--stations: {e}"))
        })
        .collect::<Result<Vec<_>>>()?;
    if rates.is_empty() || rates.len() > 200 {
        bail!("--stations: give 1 to 200 rates, e.g. 6.5,65");
    }
    let mut c = WifiConfig::new(&rates, q);
    c.ap_qdisc = spec(&a.qdisc, "--qdisc")?;
    match a.driver.as_str() {
        "ath10k" => {}
        "ath9k" => c = c.ath9k(),
        d => bail!("--driver {d}: choose ath10k or ath9k"),
    }
    match a.rate_control.as_str() {
        "fixed" => {}
        "minstrel" => c = c.minstrel(),
        r => bail!("--rate-control {r}: choose fixed or minstrel"),
    }
    c.aql.enabled = !a.no_aql;
    c.wmm = !a.no_wmm;
    let n = rates.len();
    for (i, f) in a.fer.iter().enumerate() {
        let v: f64 = f
            .trim_end_matches('%')
            .parse()
            .ok()
            .filter(|v: &f64| (0.0..100.0).contains(v))
            .ok_or_else(|| {
                anyhow::anyhow!("--fer {f}: expected a percentage below 100%, e.g. 10%")
            })?;
        let targets: Vec<usize> = if a.fer.len() == 1 {
            (0..n).collect()
        } else {
            vec![i]
        };
        for t in targets {
            if let Some(s) = c.stations.get_mut(t) {
                s.fer = v / 100.0;
            }
        }
    }
    for (i, &w) in a.weights.iter().enumerate() {
        if w == 0 {
            bail!("--weights: weights must be at least 1 (default 256)");
        }
        if let Some(s) = c.stations.get_mut(i) {
            s.weight = w;
        }
    }
    if let Some(&bad) = a.flow_stations.iter().find(|&&s| s >= n) {
        bail!(
            "--flow-stations {bad}: there are {n} stations (0 to {})",
            n - 1
        );
    }
    if a.ping_station >= n {
        bail!(
            "--ping-station {}: there are {n} stations (0 to {})",
            a.ping_station,
            n - 1
        );
    }
    c.flow_stations = a.flow_stations.clone();
    c.ping_station = a.ping_station;
    c.station_pings = a.station_pings;
    Ok(c)
}
