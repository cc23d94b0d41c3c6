//! Wi-Fi: one access point and N stations sharing one half-duplex channel.
//!
//! In the simulator's terms the wired host (flent's client) sits behind the AP and the stations
//! are the remote hosts 198.18.2.11, .12, …: `Dir::Up` is AP → station (what a Wi-Fi user calls
//! a download; flent's `rtt_fair_up` run on the AP host, as in the ath10k tests) and `Dir::Down`
//! is station → AP.
//!
//! ## The medium (a simple EDCA model)
//! Every packet goes to an access category by its DSCP, as cfg80211 classifies it
//! ([`debloat_core::airtime::Ac::of_dscp`]: CS1 → background, CS0 → best effort, CS5 → video,
//! EF → voice). The AP and every station run one EDCA function per category, each with its own
//! queue, backoff counter and contention window ([`debloat_core::airtime::Edca`]: the standard's
//! defaults for stations, hostapd's for the AP). When the channel falls idle, every function with
//! frames holds a counter drawn uniformly from [0, CW]; it waits AIFS (SIFS + AIFSN × 9 µs
//! slots) and then counts down, so the function with the smallest AIFSN + counter wins, and the
//! others keep what is left of their counters (frozen, as DCF does). Equal smallest values of
//! different senders collide: every frame of every colliding transmission fails and those
//! functions double their CW. Equal values within one sender are an internal collision: the
//! higher category sends and the lower one doubles its CW as if it had collided. Deviation: a
//! function that gets frames while a contention is being resolved joins the next one (real
//! EDCA could let it in if its counter were smaller).
//!
//! A transmission opportunity carries, for best effort, background and video at HT/VHT rates,
//! one A-MPDU of up to 64 MPDUs, 65 535 bytes and the driver's aggregate limit (4 ms, and
//! video's 3 ms TXOP, at the slowest rate of the retry chain); then SIFS and a block ACK at
//! the basic rate. Voice is not aggregated
//! (minstrel starts no block-ack session for it) and legacy rates cannot be: those send single
//! MPDUs, each followed by SIFS and an ACK, as many as fit in the category's TXOP limit (one
//! when it is 0). An MPDU is the Ethernet frame − 14 + 38 bytes (802.11 header, LLC/SNAP, FCS);
//! inside an A-MPDU each gets a 4-byte delimiter and pads to 4 bytes. Each MPDU fails
//! independently with the station's frame error rate and is retried in a later TXOP, up to 10
//! attempts.
//!
//! ## The AP's queueing structures
//! * `legacy`: a qdisc per access category (Linux's `mq` root over the radio's four queues;
//!   default pfifo 1000 each) over the driver's per-station, per-TID FIFOs, which hold at most
//!   `driver_frames` per category (default 1024: ath10k firmware holds ≈1 000–1 400 MSDUs;
//!   ath9k 123 per hardware queue), counted until each frame's completion (built aggregates and
//!   the one on the air included); the driver serves stations round robin, one TXOP each, and
//!   takes from the qdiscs whenever it has room — after a completion, only once it has built
//!   the next aggregate from what it already holds (the qdisc runs in the NET_TX softirq that
//!   the driver's wake raises, after ath9k's completion tasklet has scheduled).
//! * `fq_codel`: the same with an fq_codel qdisc per category.
//! * `airtime`: mac80211's design — per-station per-TID TXQs in one shared fq with CoDel
//!   ([`debloat_core::airtime::MacFq`]), the DRR airtime scheduler with per-station weights
//!   and AQL per category with the device-wide total shared
//!   ([`debloat_core::airtime::Radio`]). With a firmware queue (`driver_frames` > 0,
//!   ath10k-like push-pull) the driver pulls frames station by station in scheduler order while
//!   AQL allows; without one (`driver_frames` 0, ath9k-like) the driver builds each aggregate
//!   straight from the TXQ the scheduler picks. TXQs, driver FIFOs and block-ack sequence
//!   numbers are per station and TID (cfg80211 puts each DSCP in one TID, two TIDs per
//!   category), and an aggregate carries one TID. Deviation: the scheduler's unit is the
//!   station in a category (its airtime deficit, which mac80211 keeps per station and category
//!   too); when both of a station's TIDs in a category have frames they take turns within its
//!   turn, where mac80211 lists the two TXQs separately.
//!
//! The hardware keeps `hw_aggregates` built aggregates ready per category (ath9k: 2; ath10k:
//! 1). Stations run stock client queueing: a qdisc per category (default pfifo 1000) from which
//! they aggregate directly.
//! Rate control: rates are fixed per station (as `iw … set bitrates` fixes them), or, with
//! [`WifiConfig::minstrel`], each station's rate is taken as minstrel_ht's best and its retry
//! chain ends at minstrel's one-stream most reliable rate, which ath9k sizes aggregates by.
//! Latency probes go from the wired host to a station, or with
//! [`WifiConfig::station_pings`] from the station to the wired host (the reply then queues at
//! the AP).
//! Not modelled: rate errors and minstrel's sampling, power save, RTS/CTS, multicast, capture
//! (the pcap tap sees wired runs only).

use crate::packet::SimPacket;
use crate::world::LinkStats;
use debloat_core::airtime::ac::ALL as ALL_AC;
use debloat_core::airtime::rate::{aql_quantize, expected_tx_airtime_us};
use debloat_core::airtime::scheduler::AqlConfig;
use debloat_core::airtime::txq::MacFqConfig;
use debloat_core::airtime::{Ac, Edca, MacFq, PhyRate, Radio};
use debloat_core::packet::Nanos;
use debloat_core::{Dequeue, FlowHasher, Qdisc, QdiscSpec};
use serde::Serialize;
use std::collections::VecDeque;

mod driver;
mod frames;
mod medium;

use frames::*;
use medium::*;

/// Slot time, ns.
pub const SLOT_NS: Nanos = 9_000;
/// SIFS, ns.
pub const SIFS_NS: Nanos = 16_000;
/// Attempts per MPDU before it is given up.
pub const RETRY_LIMIT: u8 = 10;
/// MPDUs per A-MPDU.
pub const MAX_AMPDU_FRAMES: usize = 64;
/// Bytes per A-MPDU (HT).
pub const MAX_AMPDU_BYTES: u32 = 65_535;

/// The AP's queueing structure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ApQueueing {
    /// A qdisc over deep driver/firmware FIFOs.
    Legacy,
    /// fq_codel qdisc over the same FIFOs.
    FqCodel,
    /// mac80211 per-station FQ-CoDel TXQs, airtime DRR and AQL.
    Airtime,
}

/// An AP queueing the simulator does not have.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown AP queueing `{0}`; choose legacy, fq_codel or airtime")]
pub struct UnknownQueueing(pub String);

impl std::str::FromStr for ApQueueing {
    type Err = UnknownQueueing;
    fn from_str(s: &str) -> Result<Self, UnknownQueueing> {
        match s {
            "legacy" => Ok(ApQueueing::Legacy),
            "fq_codel" => Ok(ApQueueing::FqCodel),
            "airtime" => Ok(ApQueueing::Airtime),
            _ => Err(UnknownQueueing(s.to_string())),
        }
    }
}

impl ApQueueing {
    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            ApQueueing::Legacy => "legacy",
            ApQueueing::FqCodel => "fq_codel",
            ApQueueing::Airtime => "airtime",
        }
    }
}

/// One station.
#[derive(Clone, Debug)]
pub struct StationConfig {
    /// Its PHY rate (both directions).
    pub rate: PhyRate,
    /// Probability that an MPDU to or from it fails.
    pub fer: f64,
    /// Airtime weight (airtime queueing only; default 256).
    pub weight: u32,
    /// The slowest rate of the multi-rate retry chain frames to and from it carry; aggregates
    /// are sized to last the aggregate limit at this rate, as ath9k's `ath_lookup_rate` takes
    /// the smallest 4 ms frame length over the chain. `None`: a fixed rate (`iw … set
    /// bitrates`), the chain is the one rate. [`WifiConfig::minstrel`] sets it.
    pub slowest_retry: Option<PhyRate>,
}

/// The Wi-Fi network.
#[derive(Clone, Debug)]
pub struct WifiConfig {
    /// The stations.
    pub stations: Vec<StationConfig>,
    /// The AP's structure.
    pub queueing: ApQueueing,
    /// The AP's qdisc for `legacy` (default pfifo 1000; `fq_codel` uses fq_codel's defaults).
    pub ap_qdisc: QdiscSpec,
    /// The stations' qdisc (default pfifo 1000).
    pub sta_qdisc: QdiscSpec,
    /// Frames the AP's driver/firmware FIFOs hold together, per access category; 0 = none
    /// (airtime only).
    pub driver_frames: usize,
    /// Aggregates the AP's hardware keeps built ahead, per access category.
    pub hw_aggregates: usize,
    /// AQL (airtime queueing).
    pub aql: AqlConfig,
    /// Airtime fairness in the scheduler (airtime queueing; off = plain round robin).
    pub fairness: bool,
    /// Longest aggregate the driver builds, ns (ath9k: 4 ms); video's TXOP limit is shorter.
    pub txop_ns: Nanos,
    /// Station of each flow, in the order the test adds them (default: round robin).
    pub flow_stations: Vec<usize>,
    /// Station the latency probes go to.
    pub ping_station: usize,
    /// The ping station sends the echo requests and the wired host answers (`ping` run on
    /// the station, as in NETDEV-PING's demo), instead of the wired host pinging the station.
    pub station_pings: bool,
    /// WMM: DSCPs map to the four access categories (off: everything best effort, as with
    /// hostapd's `wmm_enabled=0`).
    pub wmm: bool,
}

impl WifiConfig {
    /// Stations at these rates, the given structure, ath10k-like driver defaults (a 1024-frame
    /// firmware queue, one aggregate ready, AQL on).
    pub fn new(rates: &[PhyRate], queueing: ApQueueing) -> WifiConfig {
        WifiConfig {
            stations: rates
                .iter()
                .map(|&rate| StationConfig {
                    rate,
                    fer: 0.0,
                    weight: debloat_core::airtime::scheduler::DEFAULT_WEIGHT,
                    slowest_retry: None,
                })
                .collect(),
            queueing,
            ap_qdisc: pfifo(),
            sta_qdisc: pfifo(),
            driver_frames: 1024,
            hw_aggregates: 1,
            aql: AqlConfig::default(),
            fairness: true,
            txop_ns: 4_000_000,
            flow_stations: Vec::new(),
            ping_station: 0,
            station_pings: false,
            wmm: true,
        }
    }

    /// ath9k-like driver: 123 frames in the driver for qdisc structures, none for airtime
    /// (aggregates are built from the TXQs), two aggregates ready in hardware.
    pub fn ath9k(mut self) -> WifiConfig {
        self.driver_frames = if self.queueing == ApQueueing::Airtime {
            0
        } else {
            123
        };
        self.hw_aggregates = 2;
        self
    }

    /// Rate control by minstrel_ht instead of fixed rates: each station's rate is the one
    /// minstrel settles on as best, and its retry chain ends at minstrel's most reliable rate
    /// ([`PhyRate::minstrel_prob_rate`]: one spatial stream), which sizes the aggregates.
    /// Frames and their retries are still sent at the station's rate (the chain's later rates
    /// are never tried) and minstrel's sampling frames are not modelled.
    pub fn minstrel(mut self) -> WifiConfig {
        for s in &mut self.stations {
            s.slowest_retry = Some(s.rate.minstrel_prob_rate());
        }
        self
    }

    /// The AP qdisc actually used.
    pub fn ap_qdisc_spec(&self) -> QdiscSpec {
        match self.queueing {
            ApQueueing::FqCodel => "fq_codel".parse().unwrap_or_else(|_| pfifo()),
            _ => self.ap_qdisc.clone(),
        }
    }

    /// A one-line description, e.g. "airtime AQL, stations 6.5,65 Mbit/s".
    pub fn describe(&self) -> String {
        let rates: Vec<String> = self.stations.iter().map(|s| s.rate.to_string()).collect();
        let q = match self.queueing {
            ApQueueing::Airtime => format!(
                "airtime{}{}",
                if self.aql.enabled { " + AQL" } else { "" },
                if self.fairness { "" } else { " (no fairness)" }
            ),
            _ => format!("{} qdisc", self.ap_qdisc_spec()),
        };
        let minstrel = self.stations.iter().any(|s| s.slowest_retry.is_some());
        format!(
            "Wi-Fi AP {q}, driver queue {} frames per AC, stations {}{}{}{}",
            self.driver_frames,
            rates.join(","),
            if minstrel {
                " (minstrel_ht retry chains)"
            } else {
                ""
            },
            if self.wmm { "" } else { ", WMM off" },
            if self.station_pings {
                ", the ping station sends the pings"
            } else {
                ""
            }
        )
    }
}

fn pfifo() -> QdiscSpec {
    QdiscSpec::Pfifo { limit: 1000 }
}

/// Per-station results.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StationStats {
    /// Airtime of transmissions AP → station, µs.
    pub tx_airtime_us: u64,
    /// Airtime of transmissions station → AP, µs.
    pub rx_airtime_us: u64,
    /// MPDUs delivered AP → station.
    pub tx_frames: u64,
    /// MPDUs delivered station → AP.
    pub rx_frames: u64,
    /// TXOPs AP → station.
    pub tx_txops: u64,
    /// MPDUs given up after the retry limit.
    pub failed: u64,
    /// Largest estimated airtime in the AP's hardware/firmware for this station, µs.
    pub max_aql_pending_us: u32,
}

enum Source {
    /// `mq`: one qdisc per access category.
    Qdisc(Vec<Box<dyn Qdisc<SimPacket>>>),
    Mac {
        fq: Box<MacFq<SimPacket>>,
        sched: Box<Radio>,
    },
}

const N_AC: usize = 4;
/// Traffic identifiers (802.1D user priorities) per station.
const N_TID: usize = 8;

/// The Wi-Fi network's state. Per-station-and-category vectors are indexed `sta * 4 + ac`
/// (`idx`), per-station-and-TID ones `sta * 8 + tid` (`tidx`).
pub struct Wifi {
    cfg: WifiConfig,
    source: Source,
    /// When the AP's qdisc (a shaper) next releases a frame: the driver asks again then
    /// ([`Wifi::take_wakeup`]); a shaper's "not before" is a wake-up, never a lost turn.
    wake_at: Option<Nanos>,
    /// The driver's FIFOs, per station and TID.
    driver: Vec<VecDeque<HwFrame>>,
    /// Per station and category: which of the category's two TIDs goes next.
    tid_rr: Vec<u8>,
    driver_len: [usize; N_AC],
    driver_rr: [usize; N_AC],
    /// Built aggregates per category.
    hw: [VecDeque<Aggregate>; N_AC],
    sta_q: Vec<Box<dyn Qdisc<SimPacket>>>,
    sta_retry: Vec<VecDeque<HwFrame>>,
    ap: [Contender; N_AC],
    sta: Vec<Contender>,
    busy: bool,
    collided: bool,
    current: Vec<(Sender, Aggregate)>,
    rng: debloat_core::rng::SplitMix64,
    dropped: Vec<SimPacket>,
    /// Next sequence number per station and TID: [AP → station, station → AP].
    seqs: Vec<[u64; 2]>,
    reorder: Vec<[Reorder; 2]>,
    released: Vec<SimPacket>,
    /// Per-station results.
    pub stations: Vec<StationStats>,
    /// AP → stations (index 0) and stations → AP (index 1) queue statistics.
    pub links: [LinkStats; 2],
    /// Time the channel spent in transmissions (including contention and ACKs), ns.
    pub busy_ns: u64,
    /// Collisions.
    pub collisions: u64,
}

impl Wifi {
    /// A network from its configuration; flow hashing and randomness from `hasher` and `seed`.
    pub fn new(mut cfg: WifiConfig, hasher: FlowHasher, seed: u64) -> Wifi {
        if cfg.queueing != ApQueueing::Airtime {
            // A qdisc needs a driver queue below it to hand frames to.
            cfg.driver_frames = cfg.driver_frames.max(1);
        }
        let n = cfg.stations.len().max(1);
        let source = match cfg.queueing {
            ApQueueing::Airtime => {
                let mut sched = Box::new(Radio::new(n, cfg.aql, cfg.fairness));
                for (i, s) in cfg.stations.iter().enumerate() {
                    sched.set_weight(i, s.weight);
                }
                Source::Mac {
                    fq: Box::new(MacFq::new(n * N_TID, MacFqConfig::default(), hasher)),
                    sched,
                }
            }
            _ => {
                let spec = cfg.ap_qdisc_spec();
                Source::Qdisc(
                    (0..N_AC as u64)
                        .map(|a| spec.build(hasher, seed.wrapping_add(1000 + a)))
                        .collect(),
                )
            }
        };
        let ap_edca = |ac| Contender::new(Edca::access_point(ac));
        Wifi {
            wake_at: None,
            sta_q: (0..n * N_AC)
                .map(|i| cfg.sta_qdisc.build(hasher, seed.wrapping_add(i as u64 + 1)))
                .collect(),
            sta_retry: (0..n * N_AC).map(|_| VecDeque::new()).collect(),
            driver: (0..n * N_TID).map(|_| VecDeque::new()).collect(),
            tid_rr: vec![0; n * N_AC],
            driver_len: [0; N_AC],
            driver_rr: [0; N_AC],
            hw: Default::default(),
            ap: ALL_AC.map(ap_edca),
            sta: (0..n * N_AC)
                .map(|i| Contender::new(Edca::station(ALL_AC[i % N_AC])))
                .collect(),
            busy: false,
            collided: false,
            current: Vec::new(),
            rng: debloat_core::rng::SplitMix64::new(seed ^ 0x0057_1F10),
            dropped: Vec::new(),
            seqs: vec![[0; 2]; n * N_TID],
            reorder: (0..n * N_TID).map(|_| Default::default()).collect(),
            released: Vec::new(),
            stations: vec![StationStats::default(); n],
            links: [LinkStats::default(), LinkStats::default()],
            busy_ns: 0,
            collisions: 0,
            source,
            cfg,
        }
    }

    fn n(&self) -> usize {
        self.stations.len()
    }

    /// The configuration.
    pub fn config(&self) -> &WifiConfig {
        &self.cfg
    }

    /// Airtime estimated in the AP's hardware for a station over all categories, µs (airtime
    /// queueing).
    pub fn aql_pending(&self, sta: usize) -> u32 {
        match &self.source {
            Source::Mac { sched, .. } => sched.station_pending(sta),
            Source::Qdisc(_) => 0,
        }
    }

    fn rate(&self, sta: usize) -> PhyRate {
        self.cfg
            .stations
            .get(sta)
            .map_or(PhyRate::Legacy { bitrate: 60 }, |s| s.rate)
    }

    /// A packet dropped by a queue since the last call.
    pub fn take_dropped(&mut self) -> Option<SimPacket> {
        self.dropped.pop()
    }

    fn drain_source_drops(&mut self) {
        match &mut self.source {
            Source::Qdisc(qs) => {
                for q in qs {
                    while let Some(d) = q.take_dropped() {
                        self.links[0].dropped += 1;
                        self.dropped.push(d.packet);
                    }
                }
            }
            Source::Mac { fq, .. } => {
                while let Some(d) = fq.take_dropped() {
                    self.links[0].dropped += 1;
                    self.dropped.push(d.packet);
                }
            }
        }
    }

    /// The AP gets a packet for station `sta` (from the wired side) at `now`.
    pub fn ap_enqueue(&mut self, sta: usize, p: SimPacket, now: Nanos) {
        let sta = sta.min(self.n() - 1);
        let tid = self.cfg.tid_of(&p);
        let ac = Ac::of_priority(tid);
        match &mut self.source {
            Source::Qdisc(qs) => {
                qs[ac.idx()].enqueue(p, now);
            }
            Source::Mac { fq, sched } => {
                fq.enqueue(tidx(sta, tid), p, now);
                sched.ac_mut(ac).wake(sta, now);
            }
        }
        self.drain_source_drops();
        let qlen = self.ap_backlog() as u64;
        self.links[0].max_backlog_pkts = self.links[0].max_backlog_pkts.max(qlen);
        self.fill(now);
    }

    /// When the AP's shaping qdisc wants the driver to ask again, if it said so since the last
    /// call: the driver then calls [`Wifi::wake`].
    pub fn take_wakeup(&mut self) -> Option<Nanos> {
        self.wake_at.take()
    }

    /// The driver asks its qdisc again (a shaper's wake-up).
    pub fn wake(&mut self, now: Nanos) {
        self.fill(now);
    }

    /// Station `sta` sends a packet towards the AP at `now`.
    pub fn sta_enqueue(&mut self, sta: usize, p: SimPacket, now: Nanos) {
        let sta = sta.min(self.n() - 1);
        let q = &mut self.sta_q[idx(sta, self.cfg.ac_of(&p))];
        q.enqueue(p, now);
        while let Some(d) = q.take_dropped() {
            self.links[1].dropped += 1;
            self.dropped.push(d.packet);
        }
        let qlen = q.qlen() as u64;
        self.links[1].max_backlog_pkts = self.links[1].max_backlog_pkts.max(qlen);
    }

    fn ap_backlog(&self) -> usize {
        let src = match &self.source {
            Source::Qdisc(qs) => qs.iter().map(|q| q.qlen()).sum(),
            Source::Mac { fq, .. } => fq.qlen(),
        };
        src + self.driver_len.iter().sum::<usize>()
            + self
                .hw
                .iter()
                .flatten()
                .map(|a| a.frames.len())
                .sum::<usize>()
    }

    fn station_of(&self, p: &SimPacket) -> usize {
        match p.meta.flow.dst() {
            Some(std::net::IpAddr::V4(a)) => crate::world::station_of_host(a.octets()[3], self.n()),
            _ => 0,
        }
    }

    /// Jain's fairness index over the total airtime (TX + RX) of the stations that used the
    /// channel (a station the test gave no traffic is not starved), if any did.
    pub fn airtime_jain(&self) -> Option<f64> {
        jain(
            &self
                .stations
                .iter()
                .map(|s| (s.tx_airtime_us + s.rx_airtime_us) as f64)
                .filter(|&a| a > 0.0)
                .collect::<Vec<_>>(),
        )
    }
}

/// Count a packet leaving a queue for the air in `l`: packets, bytes, sojourn, CE marks.
fn record_sent(l: &mut LinkStats, p: &SimPacket, now: Nanos) {
    l.sent_pkts += 1;
    l.sent_bytes += u64::from(p.meta.len);
    l.sojourns
        .saturating_record(now.saturating_sub(p.meta.enqueue_ns).max(1));
    if p.meta.ecn == debloat_core::packet::Ecn::Ce {
        l.marked += 1;
    }
}

/// Jain's fairness index: (Σx)² / (n·Σx²); `None` for no values or all zero.
pub fn jain(x: &[f64]) -> Option<f64> {
    let s: f64 = x.iter().sum();
    let sq: f64 = x.iter().map(|v| v * v).sum();
    (sq > 0.0).then(|| s * s / (x.len() as f64 * sq))
}

#[cfg(test)]
mod tests;
