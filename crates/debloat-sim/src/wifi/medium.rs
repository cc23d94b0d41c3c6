//! The medium: EDCA contention between the AP's and the stations' access categories (backoff,
//! contention windows, internal and external collisions), TXOPs, and what a completed
//! transmission does — block acks, retries, airtime charged back to the scheduler and AQL.

use super::*;

/// Who is transmitting: the AP (`None`) or a station.
pub(super) type Sender = Option<usize>;

/// One EDCA function: a category's backoff state at the AP or a station.
pub(super) struct Contender {
    pub(super) edca: Edca,
    pub(super) backoff: Option<u32>,
    pub(super) cw: u32,
}

impl Contender {
    pub(super) fn new(edca: Edca) -> Contender {
        Contender {
            edca,
            backoff: None,
            cw: edca.cw_min,
        }
    }

    pub(super) fn double_cw(&mut self) {
        self.cw = (self.cw * 2 + 1).min(self.edca.cw_max);
    }
}

impl Wifi {
    pub(super) fn sta_backlogged(&self, i: usize) -> bool {
        !self.sta_retry[i].is_empty() || self.sta_q[i].qlen() > 0
    }

    pub(super) fn contender(&mut self, c: (Sender, Ac)) -> &mut Contender {
        match c {
            (None, ac) => &mut self.ap[ac.idx()],
            (Some(s), ac) => &mut self.sta[idx(s, ac)],
        }
    }

    /// If the channel is idle and someone has frames: resolve the contention and start the
    /// TXOP. Returns when it ends (call [`Wifi::complete`] then).
    pub fn start(&mut self, now: Nanos) -> Option<Nanos> {
        if self.busy {
            return None;
        }
        self.fill(now);
        let contenders = self.contenders();
        if contenders.is_empty() {
            return None;
        }
        let (min, senders) = self.contend(&contenders);
        let access = SIFS_NS + u64::from(min) * SLOT_NS;
        let collided = senders.len() > 1;
        if collided {
            self.collisions += 1;
        }
        let mut longest = 0;
        for (c, ac) in senders {
            let agg = match c {
                None => match self.hw[ac.idx()].pop_front() {
                    Some(a) => a,
                    None => continue,
                },
                Some(s) => self.sta_aggregate(s, ac, now),
            };
            let rate = self.rate(agg.sta);
            let dur = txop_ns(rate, ac, agg.frames.iter().map(|f| f.pkt.meta.len));
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

    /// Every EDCA function with something to send: the AP's categories with built
    /// aggregates, then each station's backlogged categories.
    pub(super) fn contenders(&self) -> Vec<(Sender, Ac)> {
        let mut contenders: Vec<(Sender, Ac)> = Vec::new();
        for ac in ALL_AC {
            if !self.hw[ac.idx()].is_empty() {
                contenders.push((None, ac));
            }
        }
        for s in 0..self.n() {
            for ac in ALL_AC {
                if self.sta_backlogged(idx(s, ac)) {
                    contenders.push((Some(s), ac));
                }
            }
        }
        contenders
    }

    /// One round of contention: each function waits AIFSN slots, then counts its backoff
    /// down, and the smallest sum wins. Returns that many slots and who sends — one function
    /// per sender (an internal collision lets the highest category send and backs the others
    /// off as if they had collided); more than one sender is an external collision.
    pub(super) fn contend(&mut self, contenders: &[(Sender, Ac)]) -> (u32, Vec<(Sender, Ac)>) {
        let mut wait = Vec::with_capacity(contenders.len());
        for &c in contenders {
            let draw = self.rng.next_u64();
            let k = self.contender(c);
            let b = *k
                .backoff
                .get_or_insert_with(|| (draw % (u64::from(k.cw) + 1)) as u32);
            wait.push(k.edca.aifsn + b);
        }
        let min = wait.iter().copied().min().unwrap_or(0);
        let mut winners: Vec<(Sender, Ac)> = Vec::new();
        for (&c, &w) in contenders.iter().zip(&wait) {
            let k = self.contender(c);
            let counted = min.saturating_sub(k.edca.aifsn);
            if let Some(b) = k.backoff.as_mut() {
                *b = b.saturating_sub(counted);
            }
            if w == min {
                k.backoff = None;
                winners.push(c);
            }
        }
        winners.sort_by_key(|&(s, ac)| (s, std::cmp::Reverse(ac)));
        let mut senders: Vec<(Sender, Ac)> = Vec::new();
        for c in winners {
            if senders.last().is_some_and(|l| l.0 == c.0) {
                self.contender(c).double_cw();
            } else {
                senders.push(c);
            }
        }
        (min, senders)
    }

    /// The TXOP that [`Wifi::start`] began has ended at `now`: frames that got through go into
    /// `out` with their direction (true = AP → station), the rest wait for a retry or are given
    /// up; airtime is charged.
    pub fn complete(&mut self, now: Nanos, out: &mut Vec<(bool, SimPacket)>) {
        self.busy = false;
        let current = std::mem::take(&mut self.current);
        for (sender, agg) in current {
            let (sta, ac) = (agg.sta, agg.ac);
            let i = idx(sta, ac);
            let ti = tidx(sta, agg.tid);
            let rate = self.rate(sta);
            let fer = self.cfg.stations.get(sta).map_or(0.0, |s| s.fer);
            let airtime_us =
                (txop_ns(rate, ac, agg.frames.iter().map(|f| f.pkt.meta.len)) / 1000) as u32;
            let mut retry: Vec<HwFrame> = Vec::new();
            let mut any_ok = false;
            let mut gave_up = false;
            let dir = usize::from(sender.is_some());
            for mut f in agg.frames {
                f.tries += 1;
                let lost = self.collided
                    || (fer > 0.0
                        && ((self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < fer);
                if !lost {
                    any_ok = true;
                    if sender.is_none() {
                        self.aql_done(sta, ac, f.est);
                        self.stations[sta].tx_frames += 1;
                    } else {
                        self.stations[sta].rx_frames += 1;
                    }
                    self.reorder[ti][dir].receive(f.seq, Some(f.pkt), &mut self.released);
                } else if f.tries >= RETRY_LIMIT {
                    if sender.is_none() {
                        self.aql_done(sta, ac, f.est);
                    }
                    self.stations[sta].failed += 1;
                    gave_up = true;
                    self.links[dir].lost_on_wire += 1;
                    self.reorder[ti][dir].receive(f.seq, None, &mut self.released);
                } else {
                    retry.push(f);
                }
            }
            out.extend(self.released.drain(..).map(|p| (sender.is_none(), p)));
            let k = self.contender((sender, ac));
            if any_ok || gave_up {
                // Success, or the retry limit reached: the next frame starts afresh.
                k.cw = k.edca.cw_min;
            } else if !retry.is_empty() {
                k.double_cw();
            }
            match sender {
                None => {
                    self.stations[sta].tx_airtime_us += u64::from(airtime_us);
                    self.stations[sta].tx_txops += 1;
                    if let Source::Mac { sched, .. } = &mut self.source {
                        sched.ac_mut(ac).register_airtime(sta, airtime_us, 0, now);
                    }
                    // Retries go back to the head of the station's driver FIFO.
                    for f in retry.into_iter().rev() {
                        self.driver[ti].push_front(f);
                        self.driver_len[ac.idx()] += 1;
                    }
                }
                Some(s) => {
                    self.stations[s].rx_airtime_us += u64::from(airtime_us);
                    if let Source::Mac { sched, .. } = &mut self.source {
                        sched.ac_mut(ac).register_airtime(s, 0, airtime_us, now);
                    }
                    for f in retry.into_iter().rev() {
                        self.sta_retry[i].push_front(f);
                    }
                }
            }
        }
    }

    pub(super) fn aql_done(&mut self, sta: usize, ac: Ac, est: u32) {
        if let Source::Mac { sched, .. } = &mut self.source {
            sched.aql_completed(sta, ac, est);
        }
    }
}
