//! CAKE's dequeue side (`cake_dequeue` and what it calls): which tin (shaped: the highest one its
//! schedule allows; unshaped: weighted DRR), which flow (decaying, new, old), COBALT on the head
//! packet, retiring empty flows, and the per-tin delay statistics of what is delivered.

use super::*;

impl<P: Packet> Cake<P> {
    /// Tin choice for dequeue; `None` when nothing is eligible.
    #[inline(always)]
    pub(super) fn choose_tin(&mut self, now: Nanos) -> Option<usize> {
        if self.shaper.rate_ns == 0 {
            let n = self.tins.len();
            let (mut wrapped, mut empty) = (false, true);
            loop {
                let t = &mut self.tins[self.cur_tin];
                if t.tin_deficit >= 0 && t.active() {
                    return Some(self.cur_tin);
                }
                if t.tin_deficit <= 0 {
                    t.tin_deficit += i32::from(t.tin_quantum);
                }
                if t.active() {
                    empty = false;
                }
                self.cur_tin += 1;
                if self.cur_tin >= n {
                    self.cur_tin = 0;
                    if wrapped {
                        if empty {
                            return None;
                        }
                    } else {
                        wrapped = true;
                    }
                }
            }
        }
        let mut best: Option<(usize, i64)> = None;
        for (i, t) in self.tins.iter().enumerate() {
            if !t.active() {
                continue;
            }
            let to_pkt = t.time_next_packet.wrapping_sub(now) as i64;
            if to_pkt <= 0 || best.is_none_or(|b| to_pkt <= b.1) {
                best = Some((i, to_pkt));
            }
        }
        let (tin, _) = best?;
        self.cur_tin = tin;
        Some(tin)
    }

    /// The flow DRR++ picks next in a tin, moving flows with no deficit to the old list.
    #[inline(always)]
    pub(super) fn choose_flow(&mut self, tin: usize, first: &mut bool) -> Option<usize> {
        loop {
            let t = &self.tins[tin];
            let tq = &*t.q;
            let list = if *first && !tq.lists.is_empty(DECAYING) {
                DECAYING
            } else if !tq.lists.is_empty(NEW) {
                NEW
            } else if !tq.lists.is_empty(OLD) {
                OLD
            } else if !tq.lists.is_empty(DECAYING) {
                DECAYING
            } else {
                return None;
            };
            let idx = tq.lists.front(list)? as usize;
            *first = false;
            if tq.flows[idx].deficit > 0 {
                return Some(idx);
            }
            let has_packets = !tq.flows[idx].q.is_empty();
            let t = &mut self.tins[tin];
            let tq = &mut *t.q;
            if tq.table.slots[idx].set == FlowSet::Sparse {
                if has_packets {
                    t.sparse_flow_count -= 1;
                    t.bulk_flow_count += 1;
                    tq.table.inc_bulk(idx, self.mode);
                    tq.table.slots[idx].set = FlowSet::Bulk;
                } else {
                    tq.table.slots[idx].set = FlowSet::SparseWait;
                }
            }
            let q = self.flow_quantum(tin, idx);
            let t = &mut self.tins[tin];
            let tq = &mut *t.q;
            tq.flows[idx].deficit += q;
            tq.lists.rotate_front(list, OLD);
        }
    }

    /// The chosen flow was empty: park it on the decaying list or release it.
    pub(super) fn retire_flow(&mut self, tin: usize, idx: usize, now: Nanos) {
        let t = &mut self.tins[tin];
        let tq = &mut *t.q;
        let f = &mut tq.flows[idx];
        if self.cobalt.queue_empty(&mut f.cvars, &t.p.cparams, now) {
            t.unresponsive_flow_count = t.unresponsive_flow_count.saturating_sub(1);
        }
        let keep = f.cvars.p_drop != 0 || f.cvars.count != 0 || now < f.cvars.drop_next;
        let set = tq.table.slots[idx].set;
        match set {
            FlowSet::Bulk => {
                t.bulk_flow_count -= 1;
                tq.table.dec_bulk(idx, self.mode);
            }
            FlowSet::Sparse | FlowSet::SparseWait => t.sparse_flow_count -= 1,
            FlowSet::Decaying if !keep => t.decaying_flow_count -= 1,
            FlowSet::Decaying | FlowSet::None => {}
        }
        // The flow is the head of the list `choose_flow` took it from.
        let list = tq.lists.list_of(idx as u32);
        debug_assert!(list.and_then(|l| tq.lists.front(l)) == Some(idx as u32));
        if keep {
            if set != FlowSet::Decaying {
                t.decaying_flow_count += 1;
            }
            match list {
                Some(l) => {
                    tq.lists.rotate_front(l, DECAYING);
                }
                None => tq.lists.push_back(DECAYING, idx as u32),
            }
            tq.table.slots[idx].set = FlowSet::Decaying;
        } else {
            tq.lists.remove(idx as u32);
            tq.table.slots[idx].set = FlowSet::None;
        }
    }

    /// Pop the head of a flow, updating every backlog counter (`cake_dequeue_one`).
    #[inline(always)]
    pub(super) fn pop(&mut self, tin: usize, idx: usize) -> Option<P> {
        let t = &mut self.tins[tin];
        let tq = &mut *t.q;
        let p = self.pool.pop_front(&mut tq.flows[idx].q)?;
        let (len, truesize) = (p.meta().len, p.meta().truesize);
        tq.backlogs[idx] -= len;
        t.tin_backlog -= u64::from(len);
        self.backlog -= u64::from(len);
        self.buffer_used -= u64::from(truesize);
        self.qlen -= 1;
        Some(p)
    }

    /// Run COBALT over the chosen flow until it lets a packet through. `Ok` means the packet now
    /// at the head of the flow is the one to send (the caller pops it, so it is moved once);
    /// `Err(true)` asks the caller to choose a flow again (an ingress drop), `Err(false)` means
    /// the flow was found empty and retired.
    ///
    /// Linux's `cake_dequeue_one` unlinks the head before `cobalt_should_drop` sees it; COBALT
    /// reads no backlog, and "the flow is now empty" is "the head is its only packet" here.
    #[inline(always)]
    pub(super) fn aqm_dequeue(&mut self, tin: usize, idx: usize, now: Nanos) -> Result<(), bool> {
        loop {
            let bulk = if self.spec.ingress {
                self.tins[tin].bulk_flow_count
            } else {
                0
            };
            let t = &mut self.tins[tin];
            let tq = &mut *t.q;
            let flow = &mut tq.flows[idx];
            let Some(head) = self.pool.front_mut(&flow.q) else {
                self.retire_flow(tin, idx, now);
                return Err(false);
            };
            let rng = &mut self.rng;
            let verdict =
                self.cobalt
                    .should_drop(&mut flow.cvars, &t.p.cparams, now, head, bulk, || {
                        rng.next_u32()
                    });
            if verdict == cobalt::Verdict::Pass || flow.q.len() == 1 {
                return Ok(());
            }
            let Some(p) = self.pop(tin, idx) else {
                return Err(false);
            };
            let t = &mut self.tins[tin];
            let tq = &mut *t.q;
            tq.flows[idx].dropped += 1;
            t.tin_dropped += 1;
            self.drops += 1;
            let reason = if verdict == cobalt::Verdict::Blue {
                DropReason::Blue
            } else {
                DropReason::Aqm
            };
            if self.spec.ingress {
                let adj = self.spec.overhead.adjusted_len(p.meta(), &mut self.sizes);
                self.advance_shaper(tin, adj, now, true);
                let t = &mut self.tins[tin];
                let tq = &mut *t.q;
                tq.flows[idx].deficit -= adj as i32;
                t.tin_deficit -= adj as i32;
                self.dropped.push(p, reason);
                return Err(true);
            }
            self.dropped.push(p, reason);
        }
    }

    /// Whether `dequeue` may skip `begin:` after an empty flow (always, outside tests).
    #[cfg(not(test))]
    #[inline(always)]
    pub(super) fn shortcut(&mut self) -> bool {
        true
    }

    #[cfg(test)]
    pub(super) fn shortcut(&mut self) -> bool {
        self.shortcut_open += 1;
        !self.always_begin
    }

    /// Account for a delivered packet: delay EWMAs, shaper, deficits.
    #[inline(always)]
    pub(super) fn deliver(&mut self, tin: usize, idx: usize, p: &P, now: Nanos) {
        let adj = self.spec.overhead.adjusted_len(p.meta(), &mut self.sizes);
        let t = &mut self.tins[tin];
        let tq = &mut *t.q;
        t.tin_ecn_mark += u32::from(tq.flows[idx].cvars.ecn_marked);
        let delay = now.saturating_sub(p.meta().enqueue_ns);
        t.avge_delay = ewma(t.avge_delay, delay, 8);
        t.peak_delay = ewma(
            t.peak_delay,
            delay,
            if delay > t.peak_delay { 2 } else { 8 },
        );
        t.base_delay = ewma(
            t.base_delay,
            delay,
            if delay < t.base_delay { 2 } else { 8 },
        );
        self.advance_shaper(tin, adj, now, false);
        let t = &mut self.tins[tin];
        let tq = &mut *t.q;
        tq.flows[idx].deficit -= adj as i32;
        t.tin_deficit -= adj as i32;
        self.sent_bytes += u64::from(p.meta().len);
        self.sent_pkts += 1;
    }
}
