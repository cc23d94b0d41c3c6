//! N workers, each owning a shard of the hosts (`--workers N`): what they share, and how a
//! shaper's rate is split between them.
//!
//! Each worker runs both directions of its hosts through disciplines of its own, with no lock
//! on the packet path (the kernel's fanout hands it its hosts' frames, `crate::sys::fanout`).
//! What crosses workers goes through [`Shards`]: every half millisecond each worker publishes,
//! per direction, how fast frames arrive at its discipline and whether it is busy (a queue
//! stood there or its shaper held frames back in a quarter of the last 20 ms, or did so less
//! than 40 ms ago), and sets its shaper to its share of the configured rate, computed by [`split`] from
//! everyone's figures. The share follows demand: a light shard gets twice what arrives (at
//! most an equal share), and the busy shards split the rest equally. Linux 7.0's `cake_mq` instead gives every active instance rate / active-count
//! every 200 µs, so a nearly idle queue keeps half the rate of a two-queue link that the busy
//! one cannot use. Equal among the busy shards is per-host fairness when each busy shard holds
//! one busy host (the sharding is by host); with several busy hosts on one shard and one on
//! another, the hosts on the crowded shard get less than one worker's CAKE would give them.
//! A worker also publishes its numbers for `gateway stats`, and takes `gateway set` commands
//! passed on by the first worker, which serves the control socket.

use crate::snapshot::Snapshot;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// How often a worker re-splits the rate, ns.
pub const SPLIT_EVERY_NS: u64 = 500_000;
/// The margin a light shard gets over what arrives: twice its arrivals, so that its frames
/// wait on its shaper at most half the time (what tells it from a busy one) and a burst
/// passes quickly; never more than an equal share.
const MARGIN: f64 = 1.0;
/// No shard's share falls below this fraction of an equal one (so a new host's first packets
/// are not held behind a near-zero rate until the next split).
const FLOOR: f64 = 0.05;
/// A standing queue: at least this many bytes (two full frames) at the split.
pub const STANDING_BYTES: u64 = 3028;

/// What one worker says of one direction.
#[derive(Debug, Default)]
struct Slot {
    arrival_bps: AtomicU64,
    busy: AtomicBool,
    /// Its discipline's bytes sent and backlog at its last split (a rate controller's view).
    sent_bytes: AtomicU64,
    backlog: AtomicU64,
}

/// What the workers share.
#[derive(Debug)]
pub struct Shards {
    /// Per worker: egress and ingress.
    slots: Vec<[Slot; 2]>,
    /// Per worker: its latest numbers (the first worker merges them for `gateway stats`).
    pub snapshots: Vec<Mutex<Option<Snapshot>>>,
    /// Per worker: `gateway set` commands the first worker passed on.
    pub commands: Vec<Mutex<Vec<String>>>,
    /// Per worker: a configuration the first worker reloaded and passed on, to apply at once.
    pub reloads: Vec<Mutex<Option<crate::forward::Config>>>,
    /// Per worker: a reload is waiting in `reloads` (read at every split without a lock).
    pub reload_waiting: Vec<AtomicBool>,
    /// Per direction: the shaper's total as a rate controller set it, bit/s (0: none has; the
    /// discipline's configured rate is the total).
    totals: [AtomicU64; 2],
    /// Per worker, per direction: the demand on each leaf of an htb tree, in the tree's leaf
    /// order ([`crate::htb_split`]); written and read at the splits, never on the packet path.
    leaves: Vec<[Mutex<Vec<Demand>>; 2]>,
    /// `gateway stats --circuit ID`: the first worker's asks for a class, the others' answers.
    pub class_asks: crate::circuit_asks::ClassAsks,
}

/// One shard's demand in one direction, as [`split`] takes it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Demand {
    /// Bits per second arriving at the shard's discipline (smoothed).
    pub arrival_bps: f64,
    /// It would send more than its share lets it (see the module's notes).
    pub busy: bool,
}

impl Shards {
    /// Room for `n` workers.
    pub fn new(n: usize) -> Shards {
        Shards {
            slots: (0..n).map(|_| Default::default()).collect(),
            snapshots: (0..n).map(|_| Mutex::new(None)).collect(),
            commands: (0..n).map(|_| Mutex::new(Vec::new())).collect(),
            reloads: (0..n).map(|_| Mutex::new(None)).collect(),
            reload_waiting: (0..n).map(|_| AtomicBool::new(false)).collect(),
            leaves: (0..n).map(|_| Default::default()).collect(),
            class_asks: crate::circuit_asks::ClassAsks::new(n),
            totals: Default::default(),
        }
    }

    /// How many workers.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Never: a sharded gateway has at least one worker.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Worker `w` says what arrives in direction `dir` (0 egress, 1 ingress).
    pub fn publish(&self, w: usize, dir: usize, d: Demand) {
        let s = &self.slots[w][dir];
        s.arrival_bps.store(d.arrival_bps as u64, Ordering::Relaxed);
        s.busy.store(d.busy, Ordering::Relaxed);
    }

    /// Worker `w`'s discipline in direction `dir` has sent `bytes` and holds `backlog`.
    pub fn publish_counts(&self, w: usize, dir: usize, bytes: u64, backlog: u64) {
        let s = &self.slots[w][dir];
        s.sent_bytes.store(bytes, Ordering::Relaxed);
        s.backlog.store(backlog, Ordering::Relaxed);
    }

    /// Every worker's bytes sent and backlog in direction `dir`, summed (each as of its last
    /// split: at most half a millisecond old).
    pub fn counts(&self, dir: usize) -> (u64, u64) {
        self.slots.iter().fold((0, 0), |(b, q), s| {
            (
                b + s[dir].sent_bytes.load(Ordering::Relaxed),
                q + s[dir].backlog.load(Ordering::Relaxed),
            )
        })
    }

    /// A rate controller sets the shaper's total in direction `dir`, bit/s.
    pub fn set_total(&self, dir: usize, bps: u64) {
        self.totals[dir].store(bps, Ordering::Relaxed);
    }

    /// The total a controller set in direction `dir`, if one has.
    pub fn total(&self, dir: usize) -> Option<u64> {
        Some(self.totals[dir].load(Ordering::Relaxed)).filter(|&b| b > 0)
    }

    /// Worker `w` says what each leaf of its htb tree in direction `dir` is asked for.
    pub fn publish_leaves(&self, w: usize, dir: usize, d: &[Demand]) {
        let mut v = self.leaves[w][dir]
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        v.clear();
        v.extend_from_slice(d);
    }

    /// Every worker's demand on each htb leaf in direction `dir` (as of its last split).
    pub fn leaf_demands(&self, dir: usize, out: &mut Vec<Vec<Demand>>) {
        out.resize_with(self.leaves.len(), Vec::new);
        for (o, l) in out.iter_mut().zip(&self.leaves) {
            let v = l[dir].lock().unwrap_or_else(|e| e.into_inner());
            o.clear();
            o.extend_from_slice(&v);
        }
    }

    /// Everyone's demand in direction `dir`.
    pub fn demands(&self, dir: usize) -> Vec<Demand> {
        self.slots
            .iter()
            .map(|s| Demand {
                arrival_bps: s[dir].arrival_bps.load(Ordering::Relaxed) as f64,
                busy: s[dir].busy.load(Ordering::Relaxed),
            })
            .collect()
    }

    /// Pass a reloaded configuration to every worker but the first.
    pub fn broadcast_reload(&self, cfg: &crate::forward::Config) {
        for (q, flag) in self.reloads.iter().zip(&self.reload_waiting).skip(1) {
            *q.lock().unwrap_or_else(|e| e.into_inner()) = Some(cfg.clone());
            flag.store(true, Ordering::Release);
        }
    }

    /// The reloaded configuration waiting for worker `w`, if one is.
    pub fn take_reload(&self, w: usize) -> Option<crate::forward::Config> {
        if !self.reload_waiting[w].swap(false, Ordering::Acquire) {
            return None;
        }
        self.reloads[w]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    /// Pass a command to every worker but the first.
    pub fn broadcast(&self, cmd: &str) {
        for q in self.commands.iter().skip(1) {
            q.lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(cmd.to_string());
        }
    }
}

/// Each shard's share of `total` bits per second: light shards get what arrives plus
/// [`MARGIN`] (at most an equal share); busy ones split the rest equally; none gets less than
/// [`FLOOR`] of an equal share; the shares add up to `total` (to the bit).
pub fn split(total: u64, d: &[Demand]) -> Vec<u64> {
    let n = d.len().max(1);
    let t = total as f64;
    let floor = t / n as f64 * FLOOR;
    let equal = t / n as f64;
    let light: Vec<f64> = d
        .iter()
        .map(|x| (x.arrival_bps * (1.0 + MARGIN)).clamp(floor, equal))
        .collect();
    let busy = d.iter().filter(|x| x.busy).count();
    let light_sum: f64 = d
        .iter()
        .zip(&light)
        .filter(|(x, _)| !x.busy)
        .map(|(_, l)| l)
        .sum();
    let mut shares: Vec<f64> = if busy > 0 {
        // The light shards' reservations, cut back if they would leave a busy one below the floor.
        let room = (t - floor * busy as f64).max(0.0);
        let scale = if light_sum > room {
            room / light_sum
        } else {
            1.0
        };
        let rest = (t - light_sum * scale) / busy as f64;
        d.iter()
            .zip(&light)
            .map(|(x, l)| if x.busy { rest } else { l * scale })
            .collect()
    } else if light_sum >= t {
        light.iter().map(|l| l * t / light_sum).collect()
    } else {
        // No queue anywhere: the slack spread evenly, so any shard can grow into it.
        let slack = (t - light_sum) / n as f64;
        light.iter().map(|l| l + slack).collect()
    };
    shares.resize(d.len(), 0.0);
    let mut out: Vec<u64> = shares.iter().map(|s| s.max(0.0) as u64).collect();
    let given: u64 = out.iter().sum();
    if let Some(first) = out.first_mut() {
        *first += total.saturating_sub(given);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn busy(bps: f64) -> Demand {
        Demand {
            arrival_bps: bps,
            busy: true,
        }
    }
    fn light(bps: f64) -> Demand {
        Demand {
            arrival_bps: bps,
            busy: false,
        }
    }

    #[test]
    fn shares_always_add_up_to_the_rate() {
        for d in [
            vec![busy(30e6), busy(1e6)],
            vec![busy(30e6), light(4e6)],
            vec![light(1e6), light(2e6), light(0.0)],
            vec![light(50e6), light(50e6)],
            vec![busy(0.0); 4],
        ] {
            assert_eq!(
                split(20_000_000, &d).iter().sum::<u64>(),
                20_000_000,
                "{d:?}"
            );
        }
    }

    /// Two busy shards (one host each, whatever their flow counts) split evenly.
    #[test]
    fn busy_shards_split_evenly() {
        assert_eq!(
            split(20_000_000, &[busy(60e6), busy(11e6)]),
            vec![10_000_000, 10_000_000]
        );
    }

    /// A busy shard beside a nearly idle one gets what the idle one leaves — not half, as
    /// cake_mq's equal split gives it.
    #[test]
    fn a_busy_shard_gets_what_a_light_one_leaves() {
        let s = split(20_000_000, &[busy(30e6), light(4e6)]);
        assert_eq!(s[1], 8_000_000);
        assert_eq!(s[0], 12_000_000);
        // A light shard never takes more than an equal share.
        assert_eq!(
            split(20_000_000, &[busy(30e6), light(7e6)]),
            vec![10_000_000; 2]
        );
    }

    /// With no queue anywhere the slack goes to everyone, and an idle shard keeps its floor.
    #[test]
    fn without_a_queue_the_slack_is_shared_and_no_one_drops_below_the_floor() {
        let s = split(20_000_000, &[light(0.0), light(4e6)]);
        assert!(s[0] >= 500_000, "{s:?}");
        assert!(s[1] > 8_000_000, "{s:?}");
        let crowded = split(20_000_000, &[busy(1e9), light(30e6)]);
        assert!(crowded[0] >= 500_000, "{crowded:?}");
    }
}
