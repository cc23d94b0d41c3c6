//! mac80211's airtime-fairness scheduler and Airtime Queue Limits, for one access category
//! (net/mac80211/tx.c and sta_info.c, Linux 6.0+; docs/algorithms.md §5.2–5.3).
//!
//! **Scheduler.** A deficit round robin over the stations that have queued frames, in µs of
//! airtime: each station's deficit starts at its weight (default 256); the driver reports the
//! airtime of every transmission and reception ([`Scheduler::register_airtime`]), which is taken
//! off the deficit of a station active within the last 100 ms. [`Scheduler::next_txq`] walks the
//! active list from the head: a station whose *effective* deficit (deficit minus its AQL pending
//! airtime) is negative gets its weight added and goes to the tail; so does one AQL holds back.
//! [`Scheduler::return_txq`] puts a station that still has frames back at the **head**, so it
//! keeps the medium until its deficit runs out. Backlogged stations end up with airtime in
//! proportion to their weights.
//!
//! **AQL.** Each frame handed to the hardware adds its estimated airtime
//! ([`super::rate::expected_tx_airtime_us`], quantized as mac80211 stores it) to the station's
//! pending total and the device's; its TX status subtracts the same value. A station may take
//! more frames while its pending airtime is below `limit_low` (5 ms), or below `limit_high`
//! (12 ms) while the whole device has less than `threshold` (24 ms) pending.
//!
//! Sans-IO: the caller passes `now` (ns) and owns the frames; stations are indices.
//! [`Scheduler`] is one access category's state (mac80211 keeps an active list, a round, and
//! per-station deficits and AQL pending per AC); [`Radio`] holds the four and keeps the
//! device-wide AQL total across them, which the threshold check uses.

use super::ac::Ac;
use crate::packet::Nanos;
use std::collections::VecDeque;

/// Default station weight (`IEEE80211_DEFAULT_AIRTIME_WEIGHT`), µs per round.
pub const DEFAULT_WEIGHT: u32 = 256;
/// Default AQL per-station low limit, µs (`IEEE80211_DEFAULT_AQL_TXQ_LIMIT_L`).
pub const AQL_LIMIT_LOW: u32 = 5_000;
/// Default AQL per-station high limit, µs (`IEEE80211_DEFAULT_AQL_TXQ_LIMIT_H`).
pub const AQL_LIMIT_HIGH: u32 = 12_000;
/// Default AQL device threshold, µs (`IEEE80211_AQL_THRESHOLD`).
pub const AQL_THRESHOLD: u32 = 24_000;
/// A station counts as active for this long after it was last scheduled (HZ/10).
pub const KEEP_ACTIVE_NS: Nanos = 100_000_000;

/// AQL's limits, µs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AqlConfig {
    /// AQL on (the driver advertises `NL80211_EXT_FEATURE_AQL` and debugfs `aql_enable` is 1).
    pub enabled: bool,
    /// Per-station limit that always allows more frames below it.
    pub limit_low: u32,
    /// Per-station limit while the device total is below `threshold`.
    pub limit_high: u32,
    /// Device-wide pending airtime above which every station is held to `limit_low`.
    pub threshold: u32,
}

impl Default for AqlConfig {
    fn default() -> Self {
        AqlConfig {
            enabled: true,
            limit_low: AQL_LIMIT_LOW,
            limit_high: AQL_LIMIT_HIGH,
            threshold: AQL_THRESHOLD,
        }
    }
}

/// One station's airtime state (`struct airtime_info` plus the TXQ's schedule state).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct StationAirtime {
    /// Weight, µs added per replenishment.
    pub weight: u32,
    /// DRR deficit, µs.
    pub deficit: i32,
    /// Estimated airtime handed to the hardware and not yet completed, µs.
    pub aql_pending: u32,
    /// Total airtime of transmissions to the station, µs.
    pub tx_airtime: u64,
    /// Total airtime of receptions from the station, µs.
    pub rx_airtime: u64,
    #[serde(skip)]
    last_active: Nanos,
    #[serde(skip)]
    on_list: bool,
    #[serde(skip)]
    round: u64,
}

/// The airtime scheduler with AQL for one access category.
#[derive(Debug, Clone)]
pub struct Scheduler {
    stations: Vec<StationAirtime>,
    active: VecDeque<usize>,
    round: u64,
    aql: AqlConfig,
    /// This category's pending airtime (the PHY-level check's `aql_ac_pending`).
    device_pending: u32,
    /// The other categories' pending airtime (with `device_pending`: the device total).
    others_pending: u32,
    fair: bool,
}

impl Scheduler {
    /// A scheduler for `n` stations of weight [`DEFAULT_WEIGHT`]. `fair` false gives plain
    /// round robin (no airtime deficits; AQL still applies when enabled).
    pub fn new(n: usize, aql: AqlConfig, fair: bool) -> Scheduler {
        Scheduler {
            stations: (0..n)
                .map(|_| StationAirtime {
                    weight: DEFAULT_WEIGHT,
                    deficit: DEFAULT_WEIGHT as i32,
                    ..Default::default()
                })
                .collect(),
            active: VecDeque::with_capacity(n),
            round: 0,
            aql,
            device_pending: 0,
            others_pending: 0,
            fair,
        }
    }

    /// Set a station's weight (nl80211 `NL80211_STA_INFO_AIRTIME_WEIGHT`), at least 1.
    pub fn set_weight(&mut self, sta: usize, weight: u32) {
        if let Some(s) = self.stations.get_mut(sta) {
            s.weight = weight.max(1);
        }
    }

    /// A station's state.
    pub fn station(&self, sta: usize) -> &StationAirtime {
        &self.stations[sta]
    }

    /// Airtime estimated in the hardware for this access category, µs.
    pub fn device_pending(&self) -> u32 {
        self.device_pending
    }

    /// Tell this category how much the device's other categories have pending, µs (kept by
    /// [`Radio`]; a lone `Scheduler` has none).
    pub fn set_others_pending(&mut self, us: u32) {
        self.others_pending = us;
    }

    /// The AQL configuration.
    pub fn aql(&self) -> AqlConfig {
        self.aql
    }

    fn effective_deficit(&self, sta: usize) -> i64 {
        let s = &self.stations[sta];
        i64::from(s.deficit) - i64::from(s.aql_pending)
    }

    /// `ieee80211_txq_airtime_check`: may this station's queue hand more frames to the hardware?
    pub fn aql_ok(&self, sta: usize) -> bool {
        if !self.aql.enabled {
            return true;
        }
        let p = self.stations[sta].aql_pending;
        p < self.aql.limit_low
            || (self.device_pending.saturating_add(self.others_pending) < self.aql.threshold
                && p < self.aql.limit_high)
    }

    /// A station's queue received frames (`ieee80211_schedule_txq`): put it on the active list
    /// (at the head under airtime fairness) if it is not there.
    pub fn wake(&mut self, sta: usize, now: Nanos) {
        self.schedule(sta, true, false, now);
    }

    fn schedule(&mut self, sta: usize, has_queue: bool, force: bool, now: Nanos) {
        if sta >= self.stations.len() {
            return;
        }
        let s = &mut self.stations[sta];
        s.last_active = now;
        if s.on_list || !(force || has_queue) {
            return;
        }
        s.on_list = true;
        if self.fair && has_queue {
            self.active.push_front(sta);
        } else {
            self.active.push_back(sta);
        }
    }

    /// `ieee80211_txq_schedule_start`: begin a scheduling round. AQL's PHY-level check blocks
    /// the round while the device holds `(active − 1)·low/2 + high` µs or more.
    pub fn schedule_start(&mut self) {
        let n = self.active.len() as u64;
        let cap = n.saturating_sub(1) * u64::from(self.aql.limit_low) / 2
            + u64::from(self.aql.limit_high);
        if !self.aql.enabled || u64::from(self.device_pending) < cap {
            self.round += 1;
        } else {
            self.round = 0;
        }
    }

    /// `ieee80211_next_txq`: the next station to serve in this round, unlinked from the active
    /// list, or `None` when no station is eligible (all held by AQL, or all served this round).
    pub fn next_txq(&mut self) -> Option<usize> {
        if self.round == 0 {
            return None;
        }
        let mut head: Option<usize> = None;
        let mut found_eligible = false;
        loop {
            let &sta = self.active.front()?;
            if head == Some(sta) {
                if !found_eligible {
                    return None;
                }
                found_eligible = false;
            }
            if head.is_none() {
                head = Some(sta);
            }
            let aql_ok = self.aql_ok(sta);
            if aql_ok {
                found_eligible = true;
            }
            let negative = self.fair && self.effective_deficit(sta) < 0;
            if negative {
                let w = self.stations[sta].weight as i32;
                let s = &mut self.stations[sta];
                s.deficit = s.deficit.saturating_add(w);
            }
            if negative || !aql_ok {
                self.active.rotate_left(1);
                continue;
            }
            if self.stations[sta].round == self.round {
                return None;
            }
            self.active.pop_front();
            let s = &mut self.stations[sta];
            s.on_list = false;
            s.round = self.round;
            return Some(sta);
        }
    }

    /// `ieee80211_return_txq`: the driver is done with the station for now. It goes back on
    /// the list if it still has frames, or (under airtime fairness) if its effective deficit is
    /// negative and it was active within 100 ms, so it keeps being charged.
    pub fn return_txq(&mut self, sta: usize, has_queue: bool, now: Nanos) {
        let keep = self.fair
            && self.effective_deficit(sta) < 0
            && now < self.stations[sta].last_active + KEEP_ACTIVE_NS;
        self.schedule(sta, has_queue, keep, now);
    }

    /// `ieee80211_sta_register_airtime`: the driver reports airtime spent sending to (`tx_us`)
    /// and receiving from (`rx_us`) a station. Totals always grow; the deficit is charged only
    /// if the station was active within the last 100 ms.
    pub fn register_airtime(&mut self, sta: usize, tx_us: u32, rx_us: u32, now: Nanos) {
        let Some(s) = self.stations.get_mut(sta) else {
            return;
        };
        s.tx_airtime += u64::from(tx_us);
        s.rx_airtime += u64::from(rx_us);
        if now < s.last_active + KEEP_ACTIVE_NS {
            let a = i32::try_from(tx_us + rx_us).unwrap_or(i32::MAX);
            s.deficit = s.deficit.saturating_sub(a);
        }
    }

    /// A frame of estimated airtime `est_us` (already quantized with
    /// [`super::rate::aql_quantize`]) goes to the hardware for `sta`.
    pub fn aql_dequeued(&mut self, sta: usize, est_us: u32) {
        if let Some(s) = self.stations.get_mut(sta) {
            s.aql_pending += est_us;
            self.device_pending += est_us;
        }
    }

    /// The hardware reported the frame done (sent or given up): subtract its estimate,
    /// clamping at zero as mac80211 does.
    pub fn aql_completed(&mut self, sta: usize, est_us: u32) {
        if let Some(s) = self.stations.get_mut(sta) {
            s.aql_pending = s.aql_pending.saturating_sub(est_us);
            self.device_pending = self.device_pending.saturating_sub(est_us);
        }
    }

    /// Stations on the active list, in order.
    pub fn active(&self) -> impl Iterator<Item = usize> + '_ {
        self.active.iter().copied()
    }
}

/// A radio's four access categories, each with its own [`Scheduler`], sharing AQL's device
/// total: a frame of any category counts against the 24 ms threshold of all of them.
#[derive(Debug, Clone)]
pub struct Radio {
    acs: [Scheduler; 4],
}

impl Radio {
    /// `n` stations in every category (see [`Scheduler::new`]).
    pub fn new(n: usize, aql: AqlConfig, fair: bool) -> Radio {
        let s = Scheduler::new(n, aql, fair);
        Radio {
            acs: [s.clone(), s.clone(), s.clone(), s],
        }
    }

    /// Set a station's weight in every category.
    pub fn set_weight(&mut self, sta: usize, weight: u32) {
        for a in &mut self.acs {
            a.set_weight(sta, weight);
        }
    }

    /// One category's scheduler, to read.
    pub fn ac(&self, ac: Ac) -> &Scheduler {
        &self.acs[ac.idx()]
    }

    /// One category's scheduler, for the calls that do not move AQL totals (`wake`,
    /// `schedule_start`, `next_txq`, `return_txq`, `register_airtime`).
    pub fn ac_mut(&mut self, ac: Ac) -> &mut Scheduler {
        &mut self.acs[ac.idx()]
    }

    /// Airtime estimated in the hardware over all categories, µs.
    pub fn device_pending(&self) -> u32 {
        self.acs.iter().map(Scheduler::device_pending).sum()
    }

    /// A frame of `est_us` for `sta` in `ac` went to the hardware.
    pub fn aql_dequeued(&mut self, sta: usize, ac: Ac, est_us: u32) {
        self.acs[ac.idx()].aql_dequeued(sta, est_us);
        self.share_totals();
    }

    /// Its TX status came back.
    pub fn aql_completed(&mut self, sta: usize, ac: Ac, est_us: u32) {
        self.acs[ac.idx()].aql_completed(sta, est_us);
        self.share_totals();
    }

    /// A station's pending airtime over all categories, µs.
    pub fn station_pending(&self, sta: usize) -> u32 {
        self.acs.iter().map(|a| a.station(sta).aql_pending).sum()
    }

    fn share_totals(&mut self) {
        let total = self.device_pending();
        for a in &mut self.acs {
            let own = a.device_pending();
            a.set_others_pending(total - own);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    /// Saturated stations with fixed airtime per transmission (`cost_us`): the driver serves
    /// `next_txq`, sends one aggregate, reports its airtime, returns the TXQ.
    fn saturated(weights: &[u32], cost_us: &[u32], secs: u64) -> Vec<u64> {
        let mut s = Scheduler::new(weights.len(), AqlConfig::default(), true);
        for (i, &w) in weights.iter().enumerate() {
            s.set_weight(i, w);
            s.wake(i, 0);
        }
        let mut now = 0;
        let mut rng = SplitMix64::new(7);
        while now < secs * 1_000_000_000 {
            s.schedule_start();
            let Some(sta) = s.next_txq() else {
                now += 1000;
                continue;
            };
            // Aggregates vary in size: ±50 % around the station's typical airtime.
            let c = cost_us[sta] / 2 + (rng.next_u64() % u64::from(cost_us[sta])) as u32;
            now += u64::from(c) * 1000;
            s.register_airtime(sta, c, 0, now);
            s.return_txq(sta, true, now);
        }
        (0..weights.len())
            .map(|i| s.station(i).tx_airtime)
            .collect()
    }

    #[test]
    fn equal_weights_give_equal_airtime_whatever_the_rate() {
        // A 6.5 Mbit/s station's aggregates take 4 ms; a 130 Mbit/s one's 300 µs.
        let a = saturated(&[256, 256, 256], &[4000, 300, 300], 10);
        let total: u64 = a.iter().sum();
        for (i, &x) in a.iter().enumerate() {
            let share = x as f64 / total as f64;
            assert!(
                (share - 1.0 / 3.0).abs() < 0.02 / 3.0,
                "station {i}: share {share:.4}"
            );
        }
    }

    #[test]
    fn weights_are_respected_within_two_percent_over_ten_seconds() {
        let w = [512, 256, 256, 128];
        let a = saturated(&w, &[1000, 3000, 200, 4000], 10);
        let total: u64 = a.iter().sum();
        let wsum: u32 = w.iter().sum();
        for i in 0..w.len() {
            let want = f64::from(w[i]) / f64::from(wsum);
            let got = a[i] as f64 / total as f64;
            assert!(
                ((got - want) / want).abs() < 0.02,
                "station {i}: airtime share {got:.4}, weight share {want:.4}"
            );
        }
    }

    #[test]
    fn without_fairness_turns_are_equal_not_airtime() {
        let mut s = Scheduler::new(2, AqlConfig::default(), false);
        s.wake(0, 0);
        s.wake(1, 0);
        let mut turns = [0u32; 2];
        for _ in 0..1000 {
            s.schedule_start();
            let sta = s.next_txq().unwrap();
            turns[sta] += 1;
            s.register_airtime(sta, [4000, 300][sta], 0, 0);
            s.return_txq(sta, true, 0);
        }
        assert_eq!(turns, [500, 500]);
    }

    #[test]
    fn aql_never_lets_a_station_exceed_its_limit() {
        // A driver that hands frames to the hardware while AQL allows, and completes them later
        // in random order and size: pending airtime never exceeds the limit plus one frame
        // (the check is made before each frame, as in mac80211).
        let mut s = Scheduler::new(3, AqlConfig::default(), true);
        let mut rng = SplitMix64::new(3);
        let mut hw: Vec<VecDeque<u32>> = vec![VecDeque::new(); 3];
        let max_frame = 4092;
        let mut worst = [0u32; 3];
        for step in 0..200_000u64 {
            let sta = (rng.next_u64() % 3) as usize;
            if rng.next_u64() % 2 == 0 {
                if s.aql_ok(sta) {
                    let est = crate::airtime::rate::aql_quantize((rng.next_u64() % 5000) as u32);
                    s.aql_dequeued(sta, est);
                    hw[sta].push_back(est);
                }
            } else if let Some(e) = hw[sta].pop_front() {
                s.aql_completed(sta, e);
            }
            let total: u32 = (0..3).map(|i| s.station(i).aql_pending).sum();
            assert_eq!(total, s.device_pending(), "step {step}");
            for (i, w) in worst.iter_mut().enumerate() {
                let p = s.station(i).aql_pending;
                *w = (*w).max(p);
                assert!(
                    p < AQL_LIMIT_HIGH + max_frame,
                    "station {i}: {p} µs pending"
                );
                if s.device_pending() >= AQL_THRESHOLD {
                    // Held to the low limit: no more frames while at or above it.
                    if p >= AQL_LIMIT_LOW {
                        assert!(!s.aql_ok(i));
                    }
                }
            }
        }
        assert!(worst.iter().all(|&w| w >= AQL_LIMIT_LOW), "{worst:?}");
    }

    #[test]
    fn the_phy_check_blocks_a_round_when_the_device_is_full() {
        let mut s = Scheduler::new(2, AqlConfig::default(), true);
        s.wake(0, 0);
        s.aql_dequeued(1, AQL_LIMIT_HIGH + AQL_LIMIT_LOW / 2);
        s.schedule_start();
        assert_eq!(s.next_txq(), None);
        s.aql_completed(1, 4000);
        s.schedule_start();
        assert_eq!(s.next_txq(), Some(0));
    }

    #[test]
    fn the_device_threshold_counts_every_access_category() {
        // Voice holds 20 ms in hardware; a best-effort station at 6 ms (above the low limit)
        // may still go on while the device total is below 24 ms, and is held once it is not.
        let mut r = Radio::new(2, AqlConfig::default(), true);
        r.aql_dequeued(0, Ac::Vo, 20_000);
        r.aql_dequeued(1, Ac::Be, 3_000);
        assert!(r.ac(Ac::Be).aql_ok(1));
        r.aql_dequeued(1, Ac::Be, 3_000);
        assert_eq!(r.device_pending(), 26_000);
        assert!(!r.ac(Ac::Be).aql_ok(1), "26 ms on the device: held to 5 ms");
        // Alone, best effort would have been allowed up to 12 ms.
        let mut alone = Scheduler::new(2, AqlConfig::default(), true);
        alone.aql_dequeued(1, 6_000);
        assert!(alone.aql_ok(1));
        r.aql_completed(0, Ac::Vo, 20_000);
        assert!(r.ac(Ac::Be).aql_ok(1));
        assert_eq!(r.station_pending(1), 6_000);
    }

    #[test]
    fn idle_stations_are_not_charged() {
        let mut s = Scheduler::new(1, AqlConfig::default(), true);
        s.wake(0, 0);
        s.register_airtime(0, 1000, 0, 50_000_000);
        assert_eq!(s.station(0).deficit, 256 - 1000);
        s.register_airtime(0, 1000, 0, 500_000_000);
        assert_eq!(s.station(0).deficit, 256 - 1000);
        assert_eq!(s.station(0).tx_airtime, 2000);
    }
}
