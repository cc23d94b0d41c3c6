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

impl std::str::FromStr for ApQueueing {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "legacy" => Ok(ApQueueing::Legacy),
            "fq_codel" => Ok(ApQueueing::FqCodel),
            "airtime" => Ok(ApQueueing::Airtime),
            _ => Err(format!(
                "unknown AP queueing `{s}`; choose legacy, fq_codel or airtime"
            )),
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
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn mpdu_and_ack_sizes() {
        assert_eq!(mpdu_len(1514), 1538);
        assert_eq!(ampdu_sub_len(1514), 1544);
        assert_eq!(ack_ns("6".parse().unwrap(), false), 20_000 + 6 * 4_000);
        assert_eq!(ack_ns(PhyRate::ht(7), true), 20_000 + 3 * 4_000);
    }

    #[test]
    fn the_reorder_buffer_releases_in_sequence_and_skips_given_up_frames() {
        use crate::packet::Body;
        use debloat_core::flow::FlowKey;
        let p = |seq: u32| SimPacket {
            meta: debloat_core::PacketMeta::new(100, FlowKey::NonIp { ethertype: 0 }),
            body: Body::Ping {
                probe: 0,
                seq,
                sent_at: 0,
                reply: false,
                server_at: 0,
            },
        };
        let mut r = Reorder::default();
        let mut out = Vec::new();
        r.receive(1, Some(p(1)), &mut out);
        r.receive(3, Some(p(3)), &mut out);
        assert!(out.is_empty());
        r.receive(0, Some(p(0)), &mut out);
        assert_eq!(out.len(), 2);
        r.receive(2, None, &mut out);
        let seqs: Vec<u32> = out
            .iter()
            .map(|x| match x.body {
                Body::Ping { seq, .. } => seq,
                _ => 99,
            })
            .collect();
        assert_eq!(seqs, [0, 1, 3]);
        assert!(r.held.is_empty());
    }

    /// A packet from the wired host to station `sta` (198.18.2.(11 + sta)) on flow `port`.
    fn to_station(sta: u8, port: u16, len: u32) -> SimPacket {
        use std::net::{IpAddr, Ipv4Addr};
        let mut p = marked(0, len);
        p.meta.flow = debloat_core::flow::FlowKey::ip(
            IpAddr::V4(Ipv4Addr::new(198, 18, 1, 3)),
            IpAddr::V4(Ipv4Addr::new(198, 18, 2, 11 + sta)),
            port,
            5001,
            6,
        );
        p
    }

    /// ath9k with a bulk backlog for station 1; a small frame for station 0 arrives while the
    /// first aggregate is on the air. Returns the station of each of the first five aggregates.
    fn aggregate_order(q: ApQueueing) -> Vec<usize> {
        let cfg = WifiConfig::new(&[PhyRate::ht(15), PhyRate::ht(12)], q).ath9k();
        let mut w = Wifi::new(cfg, debloat_core::FlowHasher::new([1, 2]), 1);
        for _ in 0..400 {
            w.ap_enqueue(1, to_station(1, 1000, 1514), 0);
        }
        let mut end = w.start(0).unwrap();
        if q != ApQueueing::Airtime {
            // ath9k's 123 pending frames count those in aggregates, on the air included.
            let held = w.driver_len[Ac::Be.idx()] + w.driver_in_hw(Ac::Be);
            assert_eq!(held, 123, "frames the driver holds");
        }
        w.ap_enqueue(0, to_station(0, 2000, 98), 1_000);
        let mut order = vec![w.current[0].1.sta];
        let mut out = Vec::new();
        w.complete(end, &mut out);
        for _ in 0..4 {
            let e = w.start(end).unwrap();
            order.push(w.current[0].1.sta);
            w.complete(e, &mut out);
            end = e;
        }
        order
    }

    #[test]
    fn a_frame_held_in_the_qdisc_misses_the_aggregate_built_as_room_is_made() {
        // Under a qdisc the driver is full (123 frames of station 1): at the first completion
        // ath9k builds the next aggregate from what it holds, then the qdisc hands over the
        // small frame, which goes two aggregates later.
        assert_eq!(aggregate_order(ApQueueing::FqCodel), [1, 1, 1, 0, 1]);
        // With mac80211's queues the frame is in its TXQ at once and the scheduler takes it
        // into the aggregate built at that completion.
        assert_eq!(aggregate_order(ApQueueing::Airtime), [1, 1, 0, 1, 1]);
    }

    /// A shaping qdisc at the AP (cake at 1 Mbit/s) holds frames back: the driver is told when
    /// to ask again and, asked then, takes each frame at the shaper's pace — none is stranded.
    #[test]
    fn a_shaping_ap_qdisc_wakes_the_driver_when_it_releases() {
        let mut cfg = WifiConfig::new(&[PhyRate::ht(7)], ApQueueing::Legacy);
        cfg.ap_qdisc = "cake bandwidth 1Mbit".parse().unwrap();
        let mut w = Wifi::new(cfg, debloat_core::FlowHasher::new([1, 2]), 1);
        for _ in 0..20 {
            w.ap_enqueue(0, marked(0, 1000), 0);
        }
        let be = Ac::Be.idx();
        let in_qdisc = |w: &Wifi| match &w.source {
            Source::Qdisc(qs) => qs[be].qlen(),
            Source::Mac { .. } => unreachable!("legacy queueing has a qdisc"),
        };
        assert!(in_qdisc(&w) > 10, "the shaper holds frames back");
        let mut wakes = Vec::new();
        while let Some(t) = w.take_wakeup() {
            wakes.push(t);
            w.wake(t);
        }
        assert_eq!(in_qdisc(&w), 0, "every frame reached the driver");
        // 1000-byte frames at 1 Mbit/s: one every 8 ms, the last about 19 × 8 ms in.
        let last = *wakes.last().unwrap();
        assert!((140_000_000..170_000_000).contains(&last), "{wakes:?}");
    }

    #[test]
    fn a_collision_doubles_each_colliders_contention_window_once() {
        let ping = || marked(0, 100);
        let cfg = WifiConfig::new(&[PhyRate::ht(7), PhyRate::ht(7)], ApQueueing::Airtime);
        let mut w = Wifi::new(cfg, debloat_core::FlowHasher::new([1, 2]), 1);
        let be = |s| idx(s, Ac::Be);
        let cw_min = Edca::station(Ac::Be).cw_min;
        for s in 0..2 {
            w.sta_enqueue(s, ping(), 0);
            w.sta[be(s)].backoff = Some(3);
        }
        let end = w.start(0).unwrap();
        assert_eq!(w.collisions, 1);
        let mut out = Vec::new();
        w.complete(end, &mut out);
        assert!(out.is_empty(), "collided frames are not delivered");
        assert_eq!(w.sta[be(0)].cw, 2 * cw_min + 1);
        assert_eq!(w.sta[be(1)].cw, 2 * cw_min + 1);
        // The retry goes through and resets the window.
        w.sta[be(0)].backoff = Some(0);
        w.sta[be(1)].backoff = Some(5);
        let end = w.start(end).unwrap();
        w.complete(end, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(w.sta[be(0)].cw, cw_min);
        assert_eq!(w.sta[be(1)].cw, 2 * cw_min + 1);
    }

    fn marked(dscp: u8, len: u32) -> SimPacket {
        use crate::packet::Body;
        use debloat_core::flow::FlowKey;
        let mut meta = debloat_core::PacketMeta::new(len, FlowKey::NonIp { ethertype: 0 });
        meta.dscp = dscp;
        SimPacket {
            meta,
            body: Body::Ping {
                probe: 0,
                seq: 0,
                sent_at: 0,
                reply: true,
                server_at: 0,
            },
        }
    }

    /// Best effort from one sender in two TIDs at once (DSCP 0 → TID 0, AF21 → TID 3): every
    /// aggregate holds one TID, each TID numbers its own frames 0, 1, 2, … (its block-ack
    /// session) and is delivered in order. Each TID is kept 40 frames deep (more than a TXOP
    /// carries, too few for CoDel to drop). Returns frames delivered per TID.
    fn two_tids_of_one_category(cfg: WifiConfig, from_station: bool) -> [usize; 2] {
        let mut w = Wifi::new(cfg, debloat_core::FlowHasher::new([1, 2]), 3);
        let (mut now, mut out) = (0, Vec::new());
        let mut made = [0u32; 2];
        let mut aggs = [0u32; 2];
        let mut next_hw_seq = [0u64; 2];
        let mut delivered: [Vec<u32>; 2] = Default::default();
        for _ in 0..400 {
            for (k, dscp) in [(0usize, 0u8), (1, 18)] {
                while made[k] as usize - delivered[k].len() < 40 {
                    let mut p = marked(dscp, 1514);
                    if let crate::packet::Body::Ping { seq, .. } = &mut p.body {
                        *seq = made[k];
                    }
                    made[k] += 1;
                    if from_station {
                        w.sta_enqueue(0, p, now);
                    } else {
                        w.ap_enqueue(0, p, now);
                    }
                }
            }
            let Some(end) = w.start(now) else {
                now += 10_000;
                continue;
            };
            for (_, agg) in &w.current {
                let k = usize::from(agg.tid == 3);
                assert!(agg.tid == 0 || agg.tid == 3, "tid {}", agg.tid);
                aggs[k] += 1;
                for f in &agg.frames {
                    assert_eq!(w.cfg.tid_of(&f.pkt), agg.tid, "one TID per aggregate");
                    assert_eq!(f.seq, next_hw_seq[k], "TID {}'s own numbering", agg.tid);
                    next_hw_seq[k] += 1;
                }
            }
            w.complete(end, &mut out);
            for (_, p) in out.drain(..) {
                if let crate::packet::Body::Ping { seq, .. } = p.body {
                    delivered[usize::from(p.meta.dscp == 18)].push(seq);
                }
            }
            now = end;
        }
        for (k, d) in delivered.iter().enumerate() {
            assert!(d.len() > 500, "TID {k}: {} delivered", d.len());
            assert!(
                d.iter().enumerate().all(|(i, &s)| s == i as u32),
                "TID {k} in order, nothing lost"
            );
        }
        assert!(aggs[0] > 0 && aggs[1] > 0);
        [delivered[0].len(), delivered[1].len()]
    }

    #[test]
    fn each_tid_has_its_own_queue_aggregates_and_sequence_numbers() {
        let rates = [PhyRate::ht(7)];
        for (name, cfg, from_station) in [
            (
                "airtime, ath10k",
                WifiConfig::new(&rates, ApQueueing::Airtime),
                false,
            ),
            (
                "airtime, ath9k",
                WifiConfig::new(&rates, ApQueueing::Airtime).ath9k(),
                false,
            ),
            (
                "legacy, ath10k",
                WifiConfig::new(&rates, ApQueueing::Legacy),
                false,
            ),
            ("station", WifiConfig::new(&rates, ApQueueing::Legacy), true),
        ] {
            let [a, b] = two_tids_of_one_category(cfg, from_station);
            let share = a as f64 / (a + b) as f64;
            assert!(
                (0.45..=0.55).contains(&share),
                "{name}: TID 0 got {a} frames through, TID 3 {b}"
            );
        }
    }

    /// Two saturated stations, one sending voice (EF) and one best effort: TXOPs won by each.
    fn voice_vs_best_effort(wmm: bool) -> [u32; 2] {
        let mut cfg = WifiConfig::new(&[PhyRate::ht(7), PhyRate::ht(7)], ApQueueing::Airtime);
        cfg.wmm = wmm;
        let mut w = Wifi::new(cfg, debloat_core::FlowHasher::new([1, 2]), 7);
        let mut won = [0u32; 2];
        let mut now = 0;
        let mut out = Vec::new();
        for _ in 0..4000 {
            for (s, dscp) in [(0, 46), (1, 0)] {
                while w
                    .sta_q
                    .iter()
                    .skip(s * N_AC)
                    .take(N_AC)
                    .map(|q| q.qlen())
                    .sum::<usize>()
                    < 8
                {
                    w.sta_enqueue(s, marked(dscp, 1514), now);
                }
            }
            let end = w.start(now).unwrap();
            if !w.collided {
                won[w.current[0].1.sta] += 1;
            }
            w.complete(end, &mut out);
            out.clear();
            now = end;
        }
        won
    }

    #[test]
    fn voice_wins_the_channel_over_best_effort_and_equal_without_wmm() {
        let [vo, be] = voice_vs_best_effort(true);
        // VO waits 2 + [0, 3] slots, BE 3 + [0, 15] and its counter only runs in the slots
        // past its longer AIFS: voice takes nearly every TXOP (≈99 % here).
        let share = f64::from(vo) / f64::from(vo + be);
        assert!(share > 0.95, "voice {vo} TXOPs vs best effort {be}");
        assert!(be > 0, "best effort is slowed, not locked out");
        let [a, b] = voice_vs_best_effort(false);
        let share = f64::from(a) / f64::from(a + b);
        assert!((share - 0.5).abs() < 0.05, "without WMM: {a} vs {b}");
    }

    #[test]
    fn minstrel_sizes_aggregates_at_the_one_stream_end_of_the_chain() {
        // Best effort to a station at HT MCS 12 (78 Mbit/s, 2 streams): with a fixed rate the
        // aggregate fills 4 ms at 78 Mbit/s; with minstrel_ht the chain ends at MCS 4
        // (39 Mbit/s), and ath9k sizes the aggregate to last 4 ms there — 2 ms at MCS 12.
        let r = PhyRate::ht(12);
        let frames = |cfg: WifiConfig| {
            let w = Wifi::new(cfg, debloat_core::FlowHasher::new([1, 2]), 1);
            let mut h = Vec::new();
            while w.fits(0, Ac::Be, &h, 1514) {
                h.push(1514);
            }
            h.len() as u32
        };
        let fixed = frames(WifiConfig::new(&[r], ApQueueing::Airtime));
        let auto = frames(WifiConfig::new(&[r], ApQueueing::Airtime).minstrel());
        let at = |rate: PhyRate, n: u32| rate.ppdu_ns(n * ampdu_sub_len(1514));
        assert!(
            at(r, fixed) <= 4_000_000 && at(r, fixed + 1) > 4_000_000,
            "{fixed}"
        );
        let slow = PhyRate::ht(4);
        assert!(
            at(slow, auto) <= 4_000_000 && at(slow, auto + 1) > 4_000_000,
            "{auto}"
        );
        assert_eq!((fixed, auto), (24, 12));
        assert!(at(r, auto) < 2_100_000);
        // A one-stream rate is its own most reliable rate: nothing changes.
        let one = PhyRate::ht(7);
        assert_eq!(
            frames(WifiConfig::new(&[one], ApQueueing::Airtime)),
            frames(WifiConfig::new(&[one], ApQueueing::Airtime).minstrel())
        );
    }

    #[test]
    fn voice_is_not_aggregated_and_bursts_within_its_txop() {
        let r = PhyRate::ht(7);
        let one = r.ppdu_ns(mpdu_len(1514)) + SIFS_NS + ack_ns(r, false);
        // Three MPDUs: each with its ACK, SIFS-separated.
        assert_eq!(
            txop_ns(r, Ac::Vo, [1514u32; 3].into_iter()),
            3 * one + 2 * SIFS_NS
        );
        // Best effort sends them as one A-MPDU with a block ACK: much shorter.
        let agg = txop_ns(r, Ac::Be, [1514u32; 3].into_iter());
        assert_eq!(
            agg,
            r.ppdu_ns(3 * ampdu_sub_len(1514)) + SIFS_NS + ack_ns(r, true)
        );
        assert!(agg < 3 * one);
        let cfg = WifiConfig::new(&[r], ApQueueing::Airtime);
        let w = Wifi::new(cfg, debloat_core::FlowHasher::new([1, 2]), 1);
        // At 65 Mbit/s a full frame and its ACK take ≈0.25 ms: 1.504 ms of TXOP holds 5.
        let count = |ac| {
            let mut h = Vec::new();
            while w.fits(0, ac, &h, 1514) {
                h.push(1514);
            }
            h.len() as u32
        };
        let vo = count(Ac::Vo);
        assert_eq!(vo, 5);
        assert!(txop_ns(r, Ac::Vo, std::iter::repeat_n(1514, 5)) <= 1_504_000);
        // Video aggregates up to its 3 ms TXOP, best effort up to the driver's 4 ms.
        let (vi, be) = (count(Ac::Vi), count(Ac::Be));
        assert!(r.ppdu_ns(vi * ampdu_sub_len(1514)) <= 3_008_000);
        assert!(
            vi < be && be as usize <= MAX_AMPDU_FRAMES,
            "VI {vi}, BE {be}"
        );
    }

    #[test]
    fn an_internal_collision_lets_the_higher_category_send() {
        let cfg = WifiConfig::new(&[PhyRate::ht(7)], ApQueueing::Airtime);
        let mut w = Wifi::new(cfg, debloat_core::FlowHasher::new([1, 2]), 1);
        w.sta_enqueue(0, marked(0, 1514), 0); // BE: AIFSN 3
        w.sta_enqueue(0, marked(40, 1514), 0); // VI: AIFSN 2
        w.sta[idx(0, Ac::Be)].backoff = Some(1);
        w.sta[idx(0, Ac::Vi)].backoff = Some(2);
        let end = w.start(0).unwrap();
        assert_eq!(w.collisions, 0, "one sender never collides with itself");
        assert_eq!(w.current.len(), 1);
        assert_eq!(w.current[0].1.ac, Ac::Vi);
        assert_eq!(
            w.sta[idx(0, Ac::Be)].cw,
            2 * Edca::station(Ac::Be).cw_min + 1
        );
        let mut out = Vec::new();
        w.complete(end, &mut out);
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn jain_index() {
        assert_eq!(jain(&[1.0, 1.0, 1.0]), Some(1.0));
        assert!((jain(&[1.0, 0.0]).unwrap() - 0.5).abs() < 1e-12);
        assert_eq!(jain(&[0.0]), None);
    }
}
