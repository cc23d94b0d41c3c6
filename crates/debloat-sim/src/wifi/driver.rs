//! The AP's queueing and drivers: how frames get from the qdisc (or from mac80211's TXQs
//! through the airtime scheduler and AQL) into the driver's FIFOs and the hardware's
//! aggregates (ath10k's firmware queue, ath9k's two aggregates per hardware queue), and how a
//! station's stock client builds its aggregates from its own qdisc.

use super::*;

impl Wifi {
    /// Move frames from the qdiscs or the TXQs into the driver FIFOs, and build aggregates for
    /// the hardware while it has room, in every category.
    pub(super) fn fill(&mut self, now: Nanos) {
        for ac in ALL_AC {
            self.fill_ac(ac, now);
        }
    }

    pub(super) fn fill_ac(&mut self, ac: Ac, now: Nanos) {
        let limit = self.cfg.driver_frames;
        if limit > 0 {
            // The driver first builds from the frames it already holds, and only then does the
            // stack refill it: ath9k's completion tasklet wakes the netdev queue and calls
            // `ath_txq_schedule` at once, while the qdisc is run later, from the NET_TX softirq
            // that the wake raised. So a frame waiting in the qdisc while the driver is full
            // misses the aggregate built at the completion that makes room for it.
            self.build_hw(ac, now);
            self.refill_driver(ac, now, limit);
        }
        self.build_hw(ac, now);
    }

    /// Frames of category `ac` the AP's driver holds beyond its FIFOs: built into aggregates,
    /// queued for the hardware or on the air. A driver counts a frame from the moment it takes
    /// it until its completion (ath9k's `pending_frames`, ath10k's firmware descriptors).
    pub(super) fn driver_in_hw(&self, ac: Ac) -> usize {
        let a = ac.idx();
        let queued: usize = self.hw[a].iter().map(|x| x.frames.len()).sum();
        let on_air: usize = self
            .current
            .iter()
            .filter(|(c, x)| c.is_none() && x.ac == ac)
            .map(|(_, x)| x.frames.len())
            .sum();
        queued + on_air
    }

    /// Move frames from the qdisc or the TXQs of category `ac` into the driver FIFOs while the
    /// driver holds fewer than `limit` frames of the category, its FIFOs and the hardware's
    /// aggregates together.
    pub(super) fn refill_driver(&mut self, ac: Ac, now: Nanos, limit: usize) {
        let a = ac.idx();
        let limit = limit.saturating_sub(self.driver_in_hw(ac));
        match &mut self.source {
            Source::Qdisc(_) => {
                while self.driver_len[a] < limit {
                    let Source::Qdisc(qs) = &mut self.source else {
                        break;
                    };
                    let p = match qs[a].dequeue(now) {
                        Dequeue::Packet(p) => p,
                        Dequeue::NotBefore(t) => {
                            self.wake_at = Some(self.wake_at.map_or(t, |w| w.min(t)));
                            break;
                        }
                        Dequeue::Empty => break,
                    };
                    self.drain_source_drops();
                    record_sent(&mut self.links[0], &p, now);
                    let sta = self.station_of(&p);
                    let tid = self.cfg.tid_of(&p);
                    let seq = self.next_seq(sta, tid, 0);
                    self.driver[tidx(sta, tid)].push_back(HwFrame {
                        pkt: p,
                        est: 0,
                        tries: 0,
                        seq,
                    });
                    self.driver_len[a] += 1;
                }
                self.drain_source_drops();
            }
            Source::Mac { .. } => self.pull_txqs(ac, now, limit),
        }
    }

    /// Build aggregates for the hardware queue of `ac` while it has room.
    pub(super) fn build_hw(&mut self, ac: Ac, now: Nanos) {
        let a = ac.idx();
        let limit = self.cfg.driver_frames;
        // The aggregate on the air counts towards the hardware's depth (ath9k keeps two
        // aggregates per hardware queue, the one being sent included).
        let in_air = usize::from(
            self.current
                .iter()
                .any(|(c, agg)| c.is_none() && agg.ac == ac),
        );
        while self.hw[a].len() + in_air < self.cfg.hw_aggregates.max(1) {
            let agg = if limit > 0 {
                self.build_from_driver(ac)
            } else {
                self.build_from_txq(ac, now)
            };
            match agg {
                Some(x) => self.hw[a].push_back(x),
                None => break,
            }
        }
    }

    /// ath10k-like push-pull with AQL: serve stations in scheduler order, each taking frames
    /// while AQL allows (and the firmware has room), at most one aggregate's worth per visit.
    pub(super) fn pull_txqs(&mut self, ac: Ac, now: Nanos, limit: usize) {
        let a = ac.idx();
        loop {
            if self.driver_len[a] >= limit {
                return;
            }
            let Source::Mac { fq, sched } = &mut self.source else {
                return;
            };
            sched.ac_mut(ac).schedule_start();
            let Some(sta) = sched.ac_mut(ac).next_txq() else {
                return;
            };
            let rate = self
                .cfg
                .stations
                .get(sta)
                .map_or(PhyRate::Legacy { bitrate: 60 }, |s| s.rate);
            // The station's turn goes to one of its TIDs in this category (mac80211 schedules
            // each TXQ; here the two of a station take turns within its turn).
            let rr = &mut self.tid_rr[idx(sta, ac)];
            let tid = next_tid(rr, ac, |t| fq.tin_len(tidx(sta, t)) > 0).unwrap_or(tids(ac)[0]);
            let tin = tidx(sta, tid);
            let mut taken = 0;
            while self.driver_len[a] < limit && taken < MAX_AMPDU_FRAMES && sched.ac(ac).aql_ok(sta)
            {
                let Some(p) = fq.dequeue(tin, now) else { break };
                let est = aql_quantize(expected_tx_airtime_us(rate, p.meta.len, ac != Ac::Vo));
                sched.aql_dequeued(sta, ac, est);
                record_sent(&mut self.links[0], &p, now);
                let seq = self.seqs[tin][0];
                self.seqs[tin][0] += 1;
                self.driver[tin].push_back(HwFrame {
                    pkt: p,
                    est,
                    tries: 0,
                    seq,
                });
                self.driver_len[a] += 1;
                taken += 1;
            }
            let pending = sched.station_pending(sta);
            let st = &mut self.stations[sta];
            st.max_aql_pending_us = st.max_aql_pending_us.max(pending);
            let has = tids(ac).iter().any(|&t| fq.tin_len(tidx(sta, t)) > 0);
            sched.ac_mut(ac).return_txq(sta, has, now);
            while let Some(d) = fq.take_dropped() {
                self.links[0].dropped += 1;
                self.dropped.push(d.packet);
            }
            if taken == 0 {
                return;
            }
        }
    }

    /// Can a frame of `len` join a transmission for station `sta` in `ac` that already holds
    /// these frames?
    pub(super) fn fits(&self, sta: usize, ac: Ac, held: &[u32], len: u32) -> bool {
        if held.is_empty() {
            return true;
        }
        let rate = self.rate(sta);
        let edca_txop = Edca::access_point(ac).txop_ns;
        if aggregates(rate, ac) {
            if held.len() >= MAX_AMPDU_FRAMES {
                return false;
            }
            let limit = if edca_txop > 0 {
                self.cfg.txop_ns.min(edca_txop)
            } else {
                self.cfg.txop_ns
            };
            let b: u32 = held.iter().map(|&l| ampdu_sub_len(l)).sum::<u32>() + ampdu_sub_len(len);
            // Sized at the slowest rate of the retry chain (ath9k's `ath_lookup_rate`).
            let sizing = self
                .cfg
                .stations
                .get(sta)
                .and_then(|s| s.slowest_retry)
                .unwrap_or(rate);
            b <= MAX_AMPDU_BYTES && sizing.ppdu_ns(b) <= limit
        } else {
            // Single MPDUs: as many as the TXOP limit holds (one when it is 0).
            edca_txop > 0
                && txop_ns(rate, ac, held.iter().copied().chain(std::iter::once(len))) <= edca_txop
        }
    }

    pub(super) fn build_from_driver(&mut self, ac: Ac) -> Option<Aggregate> {
        let n = self.n();
        let a = ac.idx();
        let driver = &self.driver;
        let sta = (0..n)
            .map(|k| (self.driver_rr[a] + k) % n)
            .find(|&s| tids(ac).iter().any(|&t| !driver[tidx(s, t)].is_empty()))?;
        self.driver_rr[a] = (sta + 1) % n;
        let tid = next_tid(&mut self.tid_rr[idx(sta, ac)], ac, |t| {
            !driver[tidx(sta, t)].is_empty()
        })?;
        let q = tidx(sta, tid);
        let mut frames: Vec<HwFrame> = Vec::new();
        let mut lens: Vec<u32> = Vec::new();
        while let Some(f) = self.driver[q].front() {
            let len = f.pkt.meta.len;
            if !self.fits(sta, ac, &lens, len) {
                break;
            }
            lens.push(len);
            if let Some(f) = self.driver[q].pop_front() {
                frames.push(f);
            }
            self.driver_len[a] -= 1;
        }
        Some(Aggregate {
            sta,
            ac,
            tid,
            frames,
        })
    }

    /// ath9k-like: the scheduler picks a station and the aggregate comes from its TXQ.
    pub(super) fn build_from_txq(&mut self, ac: Ac, now: Nanos) -> Option<Aggregate> {
        // Frames waiting for a retry go first.
        if self.driver_len[ac.idx()] > 0 {
            return self.build_from_driver(ac);
        }
        loop {
            let Source::Mac { sched, .. } = &mut self.source else {
                return None;
            };
            sched.ac_mut(ac).schedule_start();
            let sta = sched.ac_mut(ac).next_txq()?;
            let rate = self.rate(sta);
            let Source::Mac { fq, .. } = &self.source else {
                return None;
            };
            let rr = &mut self.tid_rr[idx(sta, ac)];
            let tid = next_tid(rr, ac, |t| fq.tin_len(tidx(sta, t)) > 0).unwrap_or(tids(ac)[0]);
            let tin = tidx(sta, tid);
            let mut frames: Vec<HwFrame> = Vec::new();
            let mut lens: Vec<u32> = Vec::new();
            loop {
                let Source::Mac { fq, sched } = &self.source else {
                    return None;
                };
                let Some(len) = fq.peek_len(tin) else { break };
                if !sched.ac(ac).aql_ok(sta) && !frames.is_empty() {
                    break;
                }
                if !self.fits(sta, ac, &lens, len) {
                    break;
                }
                let Source::Mac { fq, sched } = &mut self.source else {
                    return None;
                };
                let Some(p) = fq.dequeue(tin, now) else { break };
                let est = aql_quantize(expected_tx_airtime_us(rate, p.meta.len, ac != Ac::Vo));
                sched.aql_dequeued(sta, ac, est);
                lens.push(p.meta.len);
                record_sent(&mut self.links[0], &p, now);
                let seq = self.next_seq(sta, tid, 0);
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
            let has = tids(ac).iter().any(|&t| fq.tin_len(tidx(sta, t)) > 0);
            let pending = sched.station_pending(sta);
            sched.ac_mut(ac).return_txq(sta, has, now);
            let st = &mut self.stations[sta];
            st.max_aql_pending_us = st.max_aql_pending_us.max(pending);
            if !frames.is_empty() {
                return Some(Aggregate {
                    sta,
                    ac,
                    tid,
                    frames,
                });
            }
            // CoDel emptied the queue: try the next station.
        }
    }

    pub(super) fn sta_aggregate(&mut self, sta: usize, ac: Ac, now: Nanos) -> Aggregate {
        let i = idx(sta, ac);
        let mut frames: Vec<HwFrame> = Vec::new();
        let mut lens: Vec<u32> = Vec::new();
        // The first frame's TID is the aggregate's: frames of the category's other TID wait.
        let mut tid: Option<u8> = None;
        while let Some(f) = self.sta_retry[i].front() {
            let len = f.pkt.meta.len;
            let t = self.cfg.tid_of(&f.pkt);
            if tid.is_some_and(|x| x != t) || !self.fits(sta, ac, &lens, len) {
                return Aggregate {
                    sta,
                    ac,
                    tid: tid.unwrap_or(t),
                    frames,
                };
            }
            tid = Some(t);
            lens.push(len);
            if let Some(f) = self.sta_retry[i].pop_front() {
                frames.push(f);
            }
        }
        // The stock client pulls from its qdisc into the aggregate and keeps a frame that does
        // not fit, or belongs to the other TID, for the next TXOP (in its retry queue).
        while let Dequeue::Packet(p) = self.sta_q[i].dequeue(now) {
            record_sent(&mut self.links[1], &p, now);
            let len = p.meta.len;
            let t = self.cfg.tid_of(&p);
            let seq = self.next_seq(sta, t, 1);
            let f = HwFrame {
                pkt: p,
                est: 0,
                tries: 0,
                seq,
            };
            if tid.is_some_and(|x| x != t) || !self.fits(sta, ac, &lens, len) {
                self.sta_retry[i].push_back(f);
                break;
            }
            tid = Some(t);
            lens.push(len);
            frames.push(f);
        }
        while let Some(d) = self.sta_q[i].take_dropped() {
            self.links[1].dropped += 1;
            self.dropped.push(d.packet);
        }
        Aggregate {
            sta,
            ac,
            tid: tid.unwrap_or(tids(ac)[0]),
            frames,
        }
    }

    pub(super) fn next_seq(&mut self, sta: usize, tid: u8, dir: usize) -> u64 {
        let s = &mut self.seqs[tidx(sta, tid)][dir];
        *s += 1;
        *s - 1
    }
}
