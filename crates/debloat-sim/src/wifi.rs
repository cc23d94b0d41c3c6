//! Wi-Fi: one access point and N stations sharing one half-duplex channel.
//!
//! In the simulator's terms the wired host (flent's client) sits behind the AP and the stations
//! are the remote hosts 198.18.2.11, .12, …: `Dir::Up` is AP → station (what a Wi-Fi user calls
//! a download; flent's `rtt_fair_up` run on the AP host, as in the ath10k tests) and `Dir::Down`
//! is station → AP.
//!
//! ## The medium (a simple DCF/EDCA model)
//! Everything travels in the best-effort access category (AIFSN 3, CWmin 15, CWmax 1023, slot
//! 9 µs, SIFS 16 µs, TXOP limit 4 ms by default). When the channel falls idle, every contender
//! with frames holds a backoff counter drawn uniformly from [0, CW]; the smallest counter wins
//! after AIFS + counter × slot, and the others keep the remainder (frozen, as DCF does). Equal
//! smallest counters collide: every frame of every colliding transmission fails and those
//! contenders double their CW. Deviation: a contender that gets frames while a contention is
//! being resolved joins the next one (real DCF could let it in if its counter were smaller).
//!
//! A transmission opportunity carries one PPDU: a single MPDU at legacy rates, or an A-MPDU of
//! up to 64 MPDUs, 65 535 bytes and the TXOP limit at HT/VHT rates; then SIFS and an ACK (or
//! block ACK) at the basic rate. An MPDU is the Ethernet frame − 14 + 38 bytes (802.11 header,
//! LLC/SNAP, FCS); inside an A-MPDU each gets a 4-byte delimiter and pads to 4 bytes. Each MPDU
//! fails independently with the station's frame error rate and is retried in a later TXOP, up
//! to 10 attempts.
//!
//! ## The AP's queueing structures
//! * `legacy`: a qdisc (default pfifo 1000) over the driver's per-station FIFOs that hold at
//!   most `driver_frames` together (default 1024: ath10k firmware holds ≈1 000–1 400 MSDUs);
//!   the driver takes from the qdisc whenever it has room, and the firmware serves stations
//!   round robin, one TXOP each.
//! * `fq_codel`: the same with an fq_codel qdisc.
//! * `airtime`: mac80211's design — per-station TXQs in one shared fq with CoDel
//!   ([`debloat_core::airtime::MacFq`]), the DRR airtime scheduler with per-station weights
//!   and AQL ([`debloat_core::airtime::Scheduler`]). With a firmware queue (`driver_frames` >
//!   0, ath10k-like push-pull) the driver pulls frames station by station in scheduler order
//!   while AQL allows; without one (`driver_frames` 0, ath9k-like) the driver builds each
//!   aggregate straight from the TXQ the scheduler picks.
//!
//! The hardware keeps `hw_aggregates` built aggregates ready (ath9k: 2; ath10k: 1). Stations
//! run stock client queueing: a qdisc (default pfifo 1000) from which they aggregate directly.
//! Not modelled: power save, rate control (rates are fixed per station), RTS/CTS, multicast,
//! capture (the pcap tap sees wired runs only).

use crate::packet::SimPacket;
use crate::world::LinkStats;
use debloat_core::airtime::rate::{aql_quantize, expected_tx_airtime_us};
use debloat_core::airtime::scheduler::AqlConfig;
use debloat_core::airtime::txq::MacFqConfig;
use debloat_core::airtime::{MacFq, PhyRate, Scheduler};
use debloat_core::packet::Nanos;
use debloat_core::{Dequeue, FlowHasher, Qdisc, QdiscSpec};
use serde::Serialize;
use std::collections::VecDeque;

/// Slot time, ns.
pub const SLOT_NS: Nanos = 9_000;
/// SIFS, ns.
pub const SIFS_NS: Nanos = 16_000;
/// Best-effort AIFSN.
pub const AIFSN_BE: u64 = 3;
/// Best-effort CWmin.
pub const CW_MIN: u32 = 15;
/// Best-effort CWmax.
pub const CW_MAX: u32 = 1023;
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
    /// Frames the AP's driver/firmware FIFOs hold together; 0 = none (airtime only).
    pub driver_frames: usize,
    /// Aggregates the AP's hardware keeps built ahead.
    pub hw_aggregates: usize,
    /// AQL (airtime queueing).
    pub aql: AqlConfig,
    /// Airtime fairness in the scheduler (airtime queueing; off = plain round robin).
    pub fairness: bool,
    /// TXOP limit, ns.
    pub txop_ns: Nanos,
    /// Station of each flow, in the order the test adds them (default: round robin).
    pub flow_stations: Vec<usize>,
    /// Station the latency probes go to.
    pub ping_station: usize,
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
        format!(
            "Wi-Fi AP {q}, driver queue {} frames, stations {}",
            self.driver_frames,
            rates.join(",")
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

struct HwFrame {
    pkt: SimPacket,
    est: u32,
    tries: u8,
    /// Sequence number per station and direction (the block-ack session's).
    seq: u64,
}

/// The receiver's block-ack reorder buffer: frames go up in sequence order; a frame the sender
/// gave up on leaves a hole that is skipped.
#[derive(Default)]
struct Reorder {
    next: u64,
    held: std::collections::BTreeMap<u64, Option<SimPacket>>,
}

impl Reorder {
    fn receive(&mut self, seq: u64, p: Option<SimPacket>, out: &mut Vec<SimPacket>) {
        if seq != self.next {
            self.held.insert(seq, p);
            return;
        }
        out.extend(p);
        self.next += 1;
        while let Some(p) = self.held.remove(&self.next) {
            out.extend(p);
            self.next += 1;
        }
    }
}

/// A built PPDU waiting for (or in) its TXOP.
struct Aggregate {
    sta: usize,
    frames: Vec<HwFrame>,
}

/// Who is transmitting: the AP (`None`) or a station.
type Sender = Option<usize>;

struct Contender {
    backoff: Option<u32>,
    cw: u32,
}

impl Contender {
    fn new() -> Contender {
        Contender {
            backoff: None,
            cw: CW_MIN,
        }
    }
}

enum Source {
    Qdisc(Box<dyn Qdisc<SimPacket>>),
    Mac {
        fq: Box<MacFq<SimPacket>>,
        sched: Scheduler,
    },
}

/// The Wi-Fi network's state.
pub struct Wifi {
    cfg: WifiConfig,
    source: Source,
    driver: Vec<VecDeque<HwFrame>>,
    driver_len: usize,
    driver_rr: usize,
    hw: VecDeque<Aggregate>,
    sta_q: Vec<Box<dyn Qdisc<SimPacket>>>,
    sta_retry: Vec<VecDeque<HwFrame>>,
    ap: Contender,
    sta: Vec<Contender>,
    busy: bool,
    collided: bool,
    current: Vec<(Sender, Aggregate)>,
    rng: debloat_core::rng::SplitMix64,
    dropped: Vec<SimPacket>,
    /// Next sequence number per station: [AP → station, station → AP].
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

fn mpdu_len(frame: u32) -> u32 {
    frame.saturating_sub(14) + 38
}

fn ampdu_sub_len(frame: u32) -> u32 {
    (mpdu_len(frame) + 4).div_ceil(4) * 4
}

/// The ACK or block-ACK rate for data at `rate`: the highest basic rate not above it.
fn ack_ns(rate: PhyRate, block: bool) -> u64 {
    let basic = match rate {
        PhyRate::Legacy { bitrate } if bitrate < 60 => bitrate,
        PhyRate::Legacy { bitrate } if bitrate < 120 => 60,
        PhyRate::Legacy { bitrate } if bitrate < 240 => 120,
        PhyRate::Legacy { .. } => 240,
        PhyRate::Mcs { .. } => 240,
    };
    PhyRate::Legacy { bitrate: basic }.ppdu_ns(if block { 32 } else { 14 })
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
                let mut sched = Scheduler::new(n, cfg.aql, cfg.fairness);
                for (i, s) in cfg.stations.iter().enumerate() {
                    sched.set_weight(i, s.weight);
                }
                Source::Mac {
                    fq: Box::new(MacFq::new(n, MacFqConfig::default(), hasher)),
                    sched,
                }
            }
            _ => Source::Qdisc(cfg.ap_qdisc_spec().build(hasher, seed)),
        };
        Wifi {
            sta_q: (0..n)
                .map(|i| cfg.sta_qdisc.build(hasher, seed.wrapping_add(i as u64 + 1)))
                .collect(),
            sta_retry: (0..n).map(|_| VecDeque::new()).collect(),
            driver: (0..n).map(|_| VecDeque::new()).collect(),
            driver_len: 0,
            driver_rr: 0,
            hw: VecDeque::new(),
            ap: Contender::new(),
            sta: (0..n).map(|_| Contender::new()).collect(),
            busy: false,
            collided: false,
            current: Vec::new(),
            rng: debloat_core::rng::SplitMix64::new(seed ^ 0x0057_1F10),
            dropped: Vec::new(),
            seqs: vec![[0; 2]; n],
            reorder: (0..n).map(|_| Default::default()).collect(),
            released: Vec::new(),
            stations: vec![StationStats::default(); n],
            links: [LinkStats::default(), LinkStats::default()],
            busy_ns: 0,
            collisions: 0,
            source,
            cfg,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &WifiConfig {
        &self.cfg
    }

    /// Airtime estimated in the AP's hardware for a station, µs (airtime queueing).
    pub fn aql_pending(&self, sta: usize) -> u32 {
        match &self.source {
            Source::Mac { sched, .. } => sched.station(sta).aql_pending,
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
            Source::Qdisc(q) => {
                while let Some(d) = q.take_dropped() {
                    self.links[0].dropped += 1;
                    self.dropped.push(d.packet);
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
        let sta = sta.min(self.sta.len() - 1);
        match &mut self.source {
            Source::Qdisc(q) => {
                q.enqueue(p, now);
            }
            Source::Mac { fq, sched } => {
                fq.enqueue(sta, p, now);
                sched.wake(sta, now);
            }
        }
        self.drain_source_drops();
        let qlen = self.ap_backlog() as u64;
        self.links[0].max_backlog_pkts = self.links[0].max_backlog_pkts.max(qlen);
        self.fill(now);
    }

    /// Station `sta` sends a packet towards the AP at `now`.
    pub fn sta_enqueue(&mut self, sta: usize, p: SimPacket, now: Nanos) {
        let sta = sta.min(self.sta.len() - 1);
        let q = &mut self.sta_q[sta];
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
            Source::Qdisc(q) => q.qlen(),
            Source::Mac { fq, .. } => fq.qlen(),
        };
        src + self.driver_len + self.hw.iter().map(|a| a.frames.len()).sum::<usize>()
    }

    fn record_dequeue(&mut self, dir: usize, p: &SimPacket, now: Nanos) {
        record_sent(&mut self.links[dir], p, now);
    }

    fn station_of(&self, p: &SimPacket) -> usize {
        match p.meta.flow.dst() {
            Some(std::net::IpAddr::V4(a)) => {
                crate::world::station_of_host(a.octets()[3], self.sta.len())
            }
            _ => 0,
        }
    }

    /// Move frames from the qdisc or the TXQs into the driver FIFOs, and build aggregates for
    /// the hardware while it has room.
    fn fill(&mut self, now: Nanos) {
        let limit = self.cfg.driver_frames;
        if limit > 0 {
            match &mut self.source {
                Source::Qdisc(_) => {
                    while self.driver_len < limit {
                        let Source::Qdisc(q) = &mut self.source else {
                            break;
                        };
                        let Dequeue::Packet(p) = q.dequeue(now) else {
                            break;
                        };
                        self.drain_source_drops();
                        self.record_dequeue(0, &p, now);
                        let sta = self.station_of(&p);
                        let seq = self.next_seq(sta, 0);
                        self.driver[sta].push_back(HwFrame {
                            pkt: p,
                            est: 0,
                            tries: 0,
                            seq,
                        });
                        self.driver_len += 1;
                    }
                    self.drain_source_drops();
                }
                Source::Mac { .. } => self.pull_txqs(now, limit),
            }
        }
        // The aggregate on the air counts towards the hardware's depth (ath9k keeps two
        // aggregates in its hardware queue, the one being sent included).
        let in_air = usize::from(self.current.iter().any(|(c, _)| c.is_none()));
        while self.hw.len() + in_air < self.cfg.hw_aggregates.max(1) {
            let agg = if limit > 0 {
                self.build_from_driver()
            } else {
                self.build_from_txq(now)
            };
            match agg {
                Some(a) => self.hw.push_back(a),
                None => break,
            }
        }
    }

    /// ath10k-like push-pull with AQL: serve stations in scheduler order, each taking frames
    /// while AQL allows (and the firmware has room), at most one aggregate's worth per visit.
    fn pull_txqs(&mut self, now: Nanos, limit: usize) {
        loop {
            let Source::Mac { fq, sched } = &mut self.source else {
                return;
            };
            if self.driver_len >= limit {
                return;
            }
            sched.schedule_start();
            let Some(sta) = sched.next_txq() else { return };
            let rate = self
                .cfg
                .stations
                .get(sta)
                .map_or(PhyRate::Legacy { bitrate: 60 }, |s| s.rate);
            let mut taken = 0;
            while self.driver_len < limit && taken < MAX_AMPDU_FRAMES && sched.aql_ok(sta) {
                let Some(p) = fq.dequeue(sta, now) else { break };
                let est = aql_quantize(expected_tx_airtime_us(rate, p.meta.len, true));
                sched.aql_dequeued(sta, est);
                record_sent(&mut self.links[0], &p, now);
                let seq = self.seqs[sta][0];
                self.seqs[sta][0] += 1;
                self.driver[sta].push_back(HwFrame {
                    pkt: p,
                    est,
                    tries: 0,
                    seq,
                });
                self.driver_len += 1;
                taken += 1;
            }
            let pending = sched.station(sta).aql_pending;
            let st = &mut self.stations[sta];
            st.max_aql_pending_us = st.max_aql_pending_us.max(pending);
            let has = fq.tin_len(sta) > 0;
            sched.return_txq(sta, has, now);
            while let Some(d) = fq.take_dropped() {
                self.links[0].dropped += 1;
                self.dropped.push(d.packet);
            }
            if taken == 0 {
                return;
            }
        }
    }

    /// Room left in a PPDU for station `sta` holding `bytes` in `n` frames: can a frame of
    /// `len` join?
    fn fits(&self, sta: usize, n: usize, bytes: u32, len: u32) -> bool {
        let rate = self.rate(sta);
        if n == 0 {
            return true;
        }
        if rate.is_legacy() || n >= MAX_AMPDU_FRAMES {
            return false;
        }
        let b = bytes + ampdu_sub_len(len);
        b <= MAX_AMPDU_BYTES && rate.ppdu_ns(b) <= self.cfg.txop_ns
    }

    fn build_from_driver(&mut self) -> Option<Aggregate> {
        let n = self.driver.len();
        let sta = (0..n)
            .map(|k| (self.driver_rr + k) % n)
            .find(|&s| !self.driver[s].is_empty())?;
        self.driver_rr = (sta + 1) % n;
        let mut frames = Vec::new();
        let mut bytes = 0;
        while let Some(f) = self.driver[sta].front() {
            let len = f.pkt.meta.len;
            if !self.fits(sta, frames.len(), bytes, len) {
                break;
            }
            bytes += ampdu_sub_len(len);
            if let Some(f) = self.driver[sta].pop_front() {
                frames.push(f);
            }
            self.driver_len -= 1;
        }
        Some(Aggregate { sta, frames })
    }

    /// ath9k-like: the scheduler picks a station and the aggregate comes from its TXQ.
    fn build_from_txq(&mut self, now: Nanos) -> Option<Aggregate> {
        // Frames waiting for a retry go first.
        if self.driver_len > 0 {
            return self.build_from_driver();
        }
        loop {
            let Source::Mac { sched, .. } = &mut self.source else {
                return None;
            };
            sched.schedule_start();
            let sta = sched.next_txq()?;
            let rate = self.rate(sta);
            let mut frames: Vec<HwFrame> = Vec::new();
            let mut bytes = 0;
            loop {
                let Source::Mac { fq, sched } = &mut self.source else {
                    return None;
                };
                let Some(len) = fq.peek_len(sta) else { break };
                if !sched.aql_ok(sta) && !frames.is_empty() {
                    break;
                }
                if !self.fits(sta, frames.len(), bytes, len) {
                    break;
                }
                let Source::Mac { fq, sched } = &mut self.source else {
                    return None;
                };
                let Some(p) = fq.dequeue(sta, now) else { break };
                let est = aql_quantize(expected_tx_airtime_us(rate, p.meta.len, true));
                sched.aql_dequeued(sta, est);
                bytes += ampdu_sub_len(p.meta.len);
                self.record_dequeue(0, &p, now);
                let seq = self.next_seq(sta, 0);
                frames.push(HwFrame {
                    pkt: p,
                    est,
                    tries: 0,
                    seq,
                });
            }
            let Source::Mac { fq, sched } = &mut self.source else {
                return None;
            };
            while let Some(d) = fq.take_dropped() {
                self.links[0].dropped += 1;
                self.dropped.push(d.packet);
            }
            let has = fq.tin_len(sta) > 0;
            let pending = sched.station(sta).aql_pending;
            sched.return_txq(sta, has, now);
            let st = &mut self.stations[sta];
            st.max_aql_pending_us = st.max_aql_pending_us.max(pending);
            if !frames.is_empty() {
                return Some(Aggregate { sta, frames });
            }
            // CoDel emptied the queue: try the next station.
        }
    }

    fn sta_aggregate(&mut self, sta: usize, now: Nanos) -> Aggregate {
        let mut frames: Vec<HwFrame> = Vec::new();
        let mut bytes = 0;
        while let Some(f) = self.sta_retry[sta].front() {
            let len = f.pkt.meta.len;
            if !self.fits(sta, frames.len(), bytes, len) {
                return Aggregate { sta, frames };
            }
            bytes += ampdu_sub_len(len);
            if let Some(f) = self.sta_retry[sta].pop_front() {
                frames.push(f);
            }
        }
        // The stock client pulls from its qdisc into the aggregate and keeps a frame that does
        // not fit for the next TXOP (at the head of its retry queue).
        while let Dequeue::Packet(p) = self.sta_q[sta].dequeue(now) {
            self.record_dequeue(1, &p, now);
            let len = p.meta.len;
            let seq = self.next_seq(sta, 1);
            let f = HwFrame {
                pkt: p,
                est: 0,
                tries: 0,
                seq,
            };
            if !self.fits(sta, frames.len(), bytes, len) {
                self.sta_retry[sta].push_back(f);
                break;
            }
            bytes += ampdu_sub_len(len);
            frames.push(f);
        }
        while let Some(d) = self.sta_q[sta].take_dropped() {
            self.links[1].dropped += 1;
            self.dropped.push(d.packet);
        }
        Aggregate { sta, frames }
    }

    fn next_seq(&mut self, sta: usize, dir: usize) -> u64 {
        let s = self.seqs[sta][dir];
        self.seqs[sta][dir] += 1;
        s
    }

    fn sta_backlogged(&self, sta: usize) -> bool {
        !self.sta_retry[sta].is_empty() || self.sta_q[sta].qlen() > 0
    }

    /// If the channel is idle and someone has frames: resolve the contention and start the
    /// TXOP. Returns when it ends (call [`Wifi::complete`] then).
    pub fn start(&mut self, now: Nanos) -> Option<Nanos> {
        if self.busy {
            return None;
        }
        self.fill(now);
        let mut contenders: Vec<Sender> = Vec::new();
        if !self.hw.is_empty() {
            contenders.push(None);
        }
        for s in 0..self.sta.len() {
            if self.sta_backlogged(s) {
                contenders.push(Some(s));
            }
        }
        if contenders.is_empty() {
            return None;
        }
        let mut min = u32::MAX;
        for &c in &contenders {
            let rng = &mut self.rng;
            let k = match c {
                None => &mut self.ap,
                Some(s) => &mut self.sta[s],
            };
            let b = *k
                .backoff
                .get_or_insert_with(|| (rng.next_u64() % (u64::from(k.cw) + 1)) as u32);
            min = min.min(b);
        }
        let mut winners = Vec::new();
        for &c in &contenders {
            let k = match c {
                None => &mut self.ap,
                Some(s) => &mut self.sta[s],
            };
            if let Some(b) = k.backoff.as_mut() {
                *b -= min;
                if *b == 0 {
                    k.backoff = None;
                    winners.push(c);
                }
            }
        }
        let access = SIFS_NS + AIFSN_BE * SLOT_NS + u64::from(min) * SLOT_NS;
        let collided = winners.len() > 1;
        if collided {
            self.collisions += 1;
        }
        let mut longest = 0;
        for c in winners {
            let agg = match c {
                None => match self.hw.pop_front() {
                    Some(a) => a,
                    None => continue,
                },
                Some(s) => self.sta_aggregate(s, now),
            };
            let rate = self.rate(agg.sta);
            let bytes: u32 = if agg.frames.len() == 1 && rate.is_legacy() {
                mpdu_len(agg.frames[0].pkt.meta.len)
            } else {
                agg.frames
                    .iter()
                    .map(|f| ampdu_sub_len(f.pkt.meta.len))
                    .sum()
            };
            let aggregated = !rate.is_legacy();
            let dur = rate.ppdu_ns(bytes) + SIFS_NS + ack_ns(rate, aggregated);
            longest = longest.max(dur);
            self.current.push((c, agg));
        }
        if self.current.is_empty() {
            return None;
        }
        // The collided transmissions all fail; their owners double CW in `complete` (once).
        self.busy = true;
        let end = now + access + longest;
        self.busy_ns += access + longest;
        self.collided = collided;
        Some(end)
    }

    /// The TXOP that [`Wifi::start`] began has ended at `now`: frames that got through go into
    /// `out` with their direction (true = AP → station), the rest wait for a retry or are given
    /// up; airtime is charged.
    pub fn complete(&mut self, now: Nanos, out: &mut Vec<(bool, SimPacket)>) {
        self.busy = false;
        let current = std::mem::take(&mut self.current);
        let _ = now;
        for (sender, agg) in current {
            let sta = agg.sta;
            let rate = self.rate(sta);
            let fer = self.cfg.stations.get(sta).map_or(0.0, |s| s.fer);
            let bytes: u32 = agg
                .frames
                .iter()
                .map(|f| ampdu_sub_len(f.pkt.meta.len))
                .sum();
            let airtime_us =
                ((rate.ppdu_ns(bytes) + SIFS_NS + ack_ns(rate, !rate.is_legacy())) / 1000) as u32;
            let mut retry: Vec<HwFrame> = Vec::new();
            let mut any_ok = false;
            let mut gave_up = false;
            for mut f in agg.frames {
                f.tries += 1;
                let lost = self.collided
                    || (fer > 0.0
                        && ((self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < fer);
                let dir = usize::from(sender.is_some());
                if !lost {
                    any_ok = true;
                    if sender.is_none() {
                        self.aql_done(sta, f.est);
                        self.stations[sta].tx_frames += 1;
                    } else {
                        self.stations[sta].rx_frames += 1;
                    }
                    self.reorder[sta][dir].receive(f.seq, Some(f.pkt), &mut self.released);
                } else if f.tries >= RETRY_LIMIT {
                    if sender.is_none() {
                        self.aql_done(sta, f.est);
                    }
                    self.stations[sta].failed += 1;
                    gave_up = true;
                    self.links[dir].lost_on_wire += 1;
                    self.reorder[sta][dir].receive(f.seq, None, &mut self.released);
                } else {
                    retry.push(f);
                }
            }
            out.extend(self.released.drain(..).map(|p| (sender.is_none(), p)));
            let k = match sender {
                None => &mut self.ap,
                Some(s) => &mut self.sta[s],
            };
            if any_ok || gave_up {
                // Success, or the retry limit reached: the next frame starts afresh.
                k.cw = CW_MIN;
            } else if !retry.is_empty() {
                k.cw = (k.cw * 2 + 1).min(CW_MAX);
            }
            match sender {
                None => {
                    self.stations[sta].tx_airtime_us += u64::from(airtime_us);
                    self.stations[sta].tx_txops += 1;
                    if let Source::Mac { sched, .. } = &mut self.source {
                        sched.register_airtime(sta, airtime_us, 0, now);
                    }
                    // Retries go back to the head of the station's driver FIFO.
                    for f in retry.into_iter().rev() {
                        self.driver[sta].push_front(f);
                        self.driver_len += 1;
                    }
                }
                Some(s) => {
                    self.stations[s].rx_airtime_us += u64::from(airtime_us);
                    if let Source::Mac { sched, .. } = &mut self.source {
                        sched.register_airtime(s, 0, airtime_us, now);
                    }
                    for f in retry.into_iter().rev() {
                        self.sta_retry[s].push_front(f);
                    }
                }
            }
        }
    }

    fn aql_done(&mut self, sta: usize, est: u32) {
        if let Source::Mac { sched, .. } = &mut self.source {
            sched.aql_completed(sta, est);
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

    #[test]
    fn a_collision_doubles_each_colliders_contention_window_once() {
        use crate::packet::Body;
        use debloat_core::flow::FlowKey;
        let ping = || SimPacket {
            meta: debloat_core::PacketMeta::new(100, FlowKey::NonIp { ethertype: 0 }),
            body: Body::Ping {
                probe: 0,
                seq: 0,
                sent_at: 0,
                reply: true,
                server_at: 0,
            },
        };
        let cfg = WifiConfig::new(&[PhyRate::ht(7), PhyRate::ht(7)], ApQueueing::Airtime);
        let mut w = Wifi::new(cfg, debloat_core::FlowHasher::new([1, 2]), 1);
        for s in 0..2 {
            w.sta_enqueue(s, ping(), 0);
            w.sta[s].backoff = Some(3);
        }
        let end = w.start(0).unwrap();
        assert_eq!(w.collisions, 1);
        let mut out = Vec::new();
        w.complete(end, &mut out);
        assert!(out.is_empty(), "collided frames are not delivered");
        assert_eq!(w.sta[0].cw, 2 * CW_MIN + 1);
        assert_eq!(w.sta[1].cw, 2 * CW_MIN + 1);
        // The retry goes through and resets the window.
        w.sta[0].backoff = Some(0);
        w.sta[1].backoff = Some(5);
        let end = w.start(end).unwrap();
        w.complete(end, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(w.sta[0].cw, CW_MIN);
        assert_eq!(w.sta[1].cw, 2 * CW_MIN + 1);
    }

    #[test]
    fn jain_index() {
        assert_eq!(jain(&[1.0, 1.0, 1.0]), Some(1.0));
        assert!((jain(&[1.0, 0.0]).unwrap() - 0.5).abs() < 1e-12);
        assert_eq!(jain(&[0.0]), None);
    }
}
