//! CAKE's enqueue side (`cake_enqueue` and what it calls): the packet's tin and flow (with the
//! set-associative hash and host slots), its place in the flow, the ACK filter, the flow-list
//! state machine, and the overflow drop from the fattest flow across all tins.

use super::*;

impl<P: Packet> Cake<P> {
    /// `cake_classify` + `cake_hash`: the (tin, queue) for a packet. Washes DSCP if asked.
    #[inline(always)]
    pub(super) fn classify(&mut self, p: &mut P) -> (usize, usize) {
        let tin = self.select_tin(p);
        if self.spec.wash {
            p.wash();
        }
        let mode = self.mode;
        if mode == FlowMode::FLOWBLIND {
            return (tin, 0);
        }
        let m = p.meta();
        let hasher = self.hasher;
        let host_hashes = || {
            (
                hasher.hash(&m.flow, HashPart::SrcHost),
                hasher.hash(&m.flow, HashPart::DstHost),
            )
        };
        let idx = if mode.0 & FlowMode::FLOWS != 0 {
            // The host hashes only matter when a flow takes a new queue.
            let flow_hash = self.hasher.flow_hash(m);
            self.tins[tin]
                .q
                .table
                .lookup_with(flow_hash, mode, host_hashes)
        } else {
            let (src, dst) = host_hashes();
            let mut flow_hash = 0;
            if mode.0 & FlowMode::SRC_IP != 0 {
                flow_hash ^= src;
            }
            if mode.0 & FlowMode::DST_IP != 0 {
                flow_hash ^= dst;
            }
            self.tins[tin]
                .q
                .table
                .lookup_with(flow_hash, mode, || (src, dst))
        };
        (tin, idx)
    }

    #[inline(always)]
    pub(super) fn flow_quantum(&mut self, tin: usize, idx: usize) -> i32 {
        let t = &self.tins[tin];
        let tq = &*t.q;
        let load = tq.table.host_load(idx, self.mode) as usize;
        let div = u32::from(QUANTUM_DIV[load.min(QUEUES)]);
        ((u32::from(t.p.flow_quantum) * div + u32::from(self.rng.next_u16())) >> 16) as i32
    }

    /// Queue one packet (already classified) and account for it.
    #[inline(always)]
    pub(super) fn queue_one(&mut self, tin: usize, idx: usize, mut p: P, now: Nanos) {
        let m = p.meta_mut();
        m.enqueue_ns = now;
        let (len, truesize) = (m.len, m.truesize);
        let t = &mut self.tins[tin];
        let tq = &mut *t.q;
        self.pool.push_back(&mut tq.flows[idx].q, p);
        self.qlen += 1;
        self.buffer_used += u64::from(truesize);
        t.packets += 1;
        t.bytes += u64::from(len);
        tq.backlogs[idx] += len;
        t.tin_backlog += u64::from(len);
        self.backlog += u64::from(len);
    }

    /// Run the ACK filter on the flow whose tail just arrived.
    pub(super) fn ack_filter(&mut self, tin: usize, idx: usize, now: Nanos) {
        let t = &mut self.tins[tin];
        let tq = &mut *t.q;
        let Some(i) = ack_filter::find(&self.pool, &tq.flows[idx].q, self.spec.ack_filter) else {
            return;
        };
        let Some(ack) = self.pool.remove(&mut tq.flows[idx].q, i) else {
            return;
        };
        let (len, truesize) = (ack.meta().len, ack.meta().truesize);
        t.ack_drops += 1;
        tq.backlogs[idx] -= len;
        t.tin_backlog -= u64::from(len);
        // tc counts enqueued bytes per tin; the removed ACK's bytes stay counted, its packet
        // count is replaced by the trigger's (net: packets counts the trigger once).
        self.drops += 1;
        self.qlen -= 1;
        self.backlog -= u64::from(len);
        self.buffer_used -= u64::from(truesize);
        if self.spec.ingress {
            let adj =
                self.spec
                    .overhead
                    .calc(len, u32::from(ack.meta().network_offset), &mut self.sizes);
            self.advance_shaper(tin, adj, now, true);
        }
        self.dropped.push(ack, DropReason::AckFilter);
    }

    /// The flow state machine on enqueue (NONE/DECAYING → SPARSE, SPARSE_WAIT → BULK).
    #[inline(always)]
    pub(super) fn activate(&mut self, tin: usize, idx: usize) {
        let set = self.tins[tin].q.table.slots[idx].set;
        match set {
            FlowSet::None | FlowSet::Decaying => {
                let t = &mut self.tins[tin];
                let tq = &mut *t.q;
                if set == FlowSet::Decaying {
                    t.decaying_flow_count -= 1;
                }
                tq.lists.move_tail(idx as u32, NEW);
                tq.table.slots[idx].set = FlowSet::Sparse;
                t.sparse_flow_count += 1;
                let q = self.flow_quantum(tin, idx);
                self.tins[tin].q.flows[idx].deficit = q;
            }
            FlowSet::SparseWait => {
                let t = &mut self.tins[tin];
                let tq = &mut *t.q;
                tq.table.slots[idx].set = FlowSet::Bulk;
                t.sparse_flow_count -= 1;
                t.bulk_flow_count += 1;
                tq.table.inc_bulk(idx, self.mode);
            }
            FlowSet::Sparse | FlowSet::Bulk => {}
        }
    }

    /// `cake_drop`: head-drop one packet from the fattest flow across all tins.
    pub(super) fn drop_fattest(&mut self, now: Nanos) -> Option<(usize, usize)> {
        let mut best: Option<(usize, usize, u32)> = None;
        for (ti, t) in self.tins.iter().enumerate() {
            if t.tin_backlog == 0 {
                continue;
            }
            for (fi, &b) in t.q.backlogs.iter().enumerate() {
                if b > best.map_or(0, |x| x.2) {
                    best = Some((ti, fi, b));
                }
            }
        }
        let (tin, idx, _) = best?;
        let t = &mut self.tins[tin];
        let tq = &mut *t.q;
        let p = self.pool.pop_front(&mut tq.flows[idx].q)?;
        if self
            .cobalt
            .queue_full(&mut tq.flows[idx].cvars, &t.p.cparams, now)
        {
            t.unresponsive_flow_count += 1;
        }
        let (len, truesize) = (p.meta().len, p.meta().truesize);
        self.buffer_used -= u64::from(truesize);
        tq.backlogs[idx] -= len;
        t.tin_backlog -= u64::from(len);
        self.backlog -= u64::from(len);
        tq.flows[idx].dropped += 1;
        t.tin_dropped += 1;
        self.drops += 1;
        self.qlen -= 1;
        if self.spec.ingress {
            let adj =
                self.spec
                    .overhead
                    .calc(len, u32::from(p.meta().network_offset), &mut self.sizes);
            self.advance_shaper(tin, adj, now, true);
        }
        self.dropped.push(p, DropReason::Overlimit);
        Some((tin, idx))
    }
}
