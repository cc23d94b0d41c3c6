//! CAKE, "Common Applications Kept Enhanced" (net/sched/sch_cake.c; Høiland-Jørgensen, Täht,
//! Morton 2018), as Linux 6.18 runs it: a deficit-mode shaper with overhead compensation,
//! DiffServ tins with priority up to a threshold, 8-way set-associative flow queues with host
//! isolation, DRR++ with a decaying list, COBALT per flow, and an ACK filter.
//!
//! Submodules: [`tins`] (modes, DSCP maps, per-tin parameters), [`hash`] (flow table and host
//! counts), [`cobalt`] (the AQM), [`shaper`], [`overhead`], [`ack_filter`], [`config`] (tc spec).
//!
//! Deviations from Linux, all invisible in what is sent or dropped except on exact ties:
//! * overflow picks the fattest flow by a linear scan over the backlogged tins instead of the
//!   kernel's max-heap; the heap breaks ties between equally fat flows in heap order, we take the
//!   first by (tin, queue);
//! * `nat` is accepted and reported but has no effect: there is no conntrack to consult;
//! * `autorate-ingress` ([`autorate`]) as Linux has it, including its hold-off that never
//!   holds after the clock's first 250 ms.
//! * randomness (quantum dithering, BLUE) comes from a seeded generator, not `get_random_*`;
//! * a tin's flow queues are built on its first packet ([`queues`]), not all at creation.
//!
//! [`queues`]: self::queues

pub mod ack_filter;
pub mod autorate;
pub mod cobalt;
pub mod config;
mod dequeue;
mod enqueue;
pub mod hash;
/// Link-layer overhead compensation lives with the link (`link::overhead`); cake's words name it.
pub use crate::link::overhead;
mod queues;
pub mod shaper;
pub mod tins;

pub use config::CakeSpec;

use crate::flow::{FlowHasher, FlowKey, HashPart};
use crate::packet::{Nanos, Packet};
use crate::qdisc::pktq::Pool;
use crate::qdisc::stats::{CakeStats, QdiscStats, TinStats, Xstats};
use crate::qdisc::{Dequeue, DropBox, DropReason, Dropped, Qdisc, Verdict};
use crate::rng::SplitMix64;
use hash::{FlowMode, FlowSet, QUEUES};

const NEW: usize = 0;
const OLD: usize = 1;
const DECAYING: usize = 2;

#[derive(Debug)]
struct Tin {
    p: tins::TinParams,
    tin_quantum: u16,
    tin_deficit: i32,
    time_next_packet: Nanos,
    /// The flow queues, built on the tin's first packet (`queues.rs`).
    q: queues::Lazy,
    sparse_flow_count: u32,
    bulk_flow_count: u32,
    decaying_flow_count: u32,
    unresponsive_flow_count: u32,
    tin_backlog: u64,
    tin_dropped: u32,
    tin_ecn_mark: u32,
    packets: u32,
    bytes: u64,
    ack_drops: u32,
    drop_overlimit: u32,
    avge_delay: u64,
    peak_delay: u64,
    base_delay: u64,
    max_skblen: u32,
}

impl Tin {
    fn new(p: tins::TinParams, tin_quantum: u16) -> Self {
        Tin {
            p,
            tin_quantum,
            tin_deficit: 0,
            time_next_packet: 0,
            q: queues::Lazy::default(),
            sparse_flow_count: 0,
            bulk_flow_count: 0,
            decaying_flow_count: 0,
            unresponsive_flow_count: 0,
            tin_backlog: 0,
            tin_dropped: 0,
            tin_ecn_mark: 0,
            packets: 0,
            bytes: 0,
            ack_drops: 0,
            drop_overlimit: 0,
            avge_delay: 0,
            peak_delay: 0,
            base_delay: 0,
            max_skblen: 0,
        }
    }

    fn active(&self) -> bool {
        self.sparse_flow_count + self.bulk_flow_count > 0
    }
}

/// The `cake` qdisc.
#[derive(Debug)]
pub struct Cake<P> {
    spec: CakeSpec,
    mode: FlowMode,
    tins: Vec<Tin>,
    pool: Pool<P>,
    cobalt: cobalt::Cobalt,
    rng: SplitMix64,
    hasher: FlowHasher,
    shaper: shaper::Global,
    buffer_used: u64,
    buffer_max_used: u64,
    buffer_limit: u64,
    cur_tin: usize,
    qlen: usize,
    backlog: u64,
    sent_bytes: u64,
    sent_pkts: u64,
    drops: u64,
    overlimits: u64,
    sizes: overhead::SizeStats,
    autorate: autorate::Estimator,
    dropped: DropBox<P>,
    /// Tests only: always go back to `begin:` after an empty flow, as Linux does.
    #[cfg(test)]
    always_begin: bool,
    /// Tests only: how often the shortcut past `begin:` was open.
    #[cfg(test)]
    shortcut_open: u64,
}

/// `quantum_div[i] = 65535 / i` (and 65535 at 0), precomputed as the kernel does so the per-flow
/// quantum costs a multiply, not a division.
const QUANTUM_DIV: [u16; QUEUES + 1] = {
    let mut t = [0u16; QUEUES + 1];
    t[0] = 65535;
    let mut i = 1;
    while i <= QUEUES {
        t[i] = (65535 / i) as u16;
        i += 1;
    }
    t
};

fn ewma(avg: u64, sample: u64, shift: u32) -> u64 {
    avg - (avg >> shift) + (sample >> shift)
}

impl<P: Packet> Cake<P> {
    /// A cake qdisc from a parsed spec; `hasher` hashes flows and hosts, `seed` drives the
    /// quantum dithering and BLUE.
    pub fn new(spec: &CakeSpec, hasher: FlowHasher, seed: u64) -> Self {
        let mut c = Cake {
            spec: spec.clone(),
            mode: spec.flow_mode,
            tins: Vec::new(),
            pool: Pool::with_capacity(4096),
            cobalt: cobalt::Cobalt::default(),
            rng: SplitMix64::new(seed),
            hasher,
            shaper: shaper::Global::default(),
            buffer_used: 0,
            buffer_max_used: 0,
            buffer_limit: 0,
            cur_tin: 0,
            qlen: 0,
            backlog: 0,
            sent_bytes: 0,
            sent_pkts: 0,
            drops: 0,
            overlimits: 0,
            sizes: overhead::SizeStats::default(),
            autorate: autorate::Estimator::new(spec.bandwidth_bytes_per_s.unwrap_or(0)),
            dropped: DropBox::default(),
            #[cfg(test)]
            always_begin: false,
            #[cfg(test)]
            shortcut_open: 0,
        };
        c.reconfigure();
        c
    }

    /// Derive tins, shaper rate and buffer limit from the spec (`cake_reconfigure`).
    fn reconfigure(&mut self) {
        let s = &self.spec;
        let rate = s.bandwidth_bytes_per_s.unwrap_or(0);
        let (target, rtt) = (s.target_us * 1000, s.rtt_us * 1000);
        let rates = s.diffserv.tin_rates(rate);
        if self.tins.len() == rates.len() {
            for (t, (r, q)) in self.tins.iter_mut().zip(rates) {
                t.p = tins::set_rate(r, crate::PSCHED_MTU, target, rtt);
                t.tin_quantum = q;
            }
        } else {
            self.tins = rates
                .into_iter()
                .map(|(r, q)| Tin::new(tins::set_rate(r, crate::PSCHED_MTU, target, rtt), q))
                .collect();
        }
        self.shaper.rate_ns = self.tins[0].p.rate_ns;
        self.shaper.rate_shft = self.tins[0].p.rate_shft;
        let mut limit = match (s.memlimit, rate) {
            (Some(m), _) => u64::from(m),
            (None, 0) => u64::from(u32::MAX),
            // As the kernel: a u64 product that may wrap, then `max_t(u32, …)` (a truncation).
            (None, r) => u64::from(((r.wrapping_mul(s.rtt_us) / 250_000) as u32).max(4 << 20)),
        };
        let cap = (10240 * u64::from(crate::PSCHED_MTU)).max(u64::from(s.memlimit.unwrap_or(0)));
        limit = limit.min(cap);
        self.buffer_limit = limit;
    }

    /// Change the shaper rate at run time (bytes per second, as the spec and the kernel's
    /// TCA_CAKE_BASE_RATE64 keep it; `None` = unlimited) without touching the queued packets,
    /// like `tc qdisc change … cake bandwidth R`. The [`Qdisc::set_bandwidth`] method takes
    /// bit/s, as every rate on the command line is.
    pub fn set_bandwidth_bytes_per_s(&mut self, rate_bytes_per_s: Option<u64>) {
        self.spec.bandwidth_bytes_per_s = rate_bytes_per_s;
        self.reconfigure();
    }

    /// `autorate-ingress`: one enqueue's bytes into the estimator, and the shaper set to
    /// 15/16 of the estimate when a window closes.
    #[inline(never)]
    fn estimate_capacity(&mut self, now: Nanos, queued: i64) {
        if let Some(rate) = self.autorate.on_enqueue(now, queued) {
            self.spec.bandwidth_bytes_per_s = (rate > 0).then_some(rate);
            self.reconfigure();
        }
    }

    /// The spec this instance runs.
    pub fn spec(&self) -> &CakeSpec {
        &self.spec
    }

    /// Memory limit in bytes of truesize.
    pub fn buffer_limit(&self) -> u64 {
        self.buffer_limit
    }

    /// Per-tin derived parameters, in kernel tin order.
    pub fn tin_params(&self) -> Vec<tins::TinParams> {
        self.tins.iter().map(|t| t.p).collect()
    }

    /// A flow's COBALT state and queue length, by tin and queue index.
    pub fn flow_state(&self, tin: usize, idx: usize) -> (cobalt::Vars, usize) {
        let f = &self.tins[tin].q.flows[idx];
        (f.cvars, f.q.len())
    }

    fn select_tin(&self, p: &P) -> usize {
        let m = p.meta();
        let d = self.spec.diffserv;
        if d == tins::Diffserv::Besteffort {
            return 0;
        }
        let order = d.tin_order();
        if self.spec.fwmark != 0 {
            let mark = (m.mark & self.spec.fwmark) >> self.spec.fwmark.trailing_zeros();
            if mark != 0 && (mark as usize) <= order.len() {
                return order[mark as usize - 1];
            }
        }
        let dscp = match m.flow {
            FlowKey::Ip { .. } => m.dscp,
            FlowKey::NonIp { ethertype: 0x0806 } => 56,
            FlowKey::NonIp { .. } => 0,
        };
        let tin = d.tin_for_dscp(dscp);
        if tin >= self.tins.len() {
            0
        } else {
            tin
        }
    }

    #[inline(always)]
    fn advance_shaper(&mut self, tin: usize, len: u32, now: Nanos, drop: bool) {
        let t = &mut self.tins[tin];
        shaper::advance_tin(
            &mut t.time_next_packet,
            len,
            t.p.rate_ns,
            t.p.rate_shft,
            now,
        );
        self.shaper.advance(len, drop);
    }

    /// Reset stale shaper clocks when a tin or the whole qdisc was idle.
    #[inline(always)]
    fn freshen_shaper(&mut self, tin: usize, now: Nanos) {
        let t = &mut self.tins[tin];
        if t.tin_backlog != 0 {
            return;
        }
        if t.time_next_packet < now {
            t.time_next_packet = now;
        }
        if self.qlen == 0 {
            if self.shaper.time_next_packet < now {
                self.shaper.failsafe_next_packet = now;
                self.shaper.time_next_packet = now;
            } else if self.shaper.gate(now).is_some() {
                self.overlimits += 1;
            }
        }
    }
}

impl<P: Packet> Qdisc<P> for Cake<P> {
    fn drain(&mut self, out: &mut dyn FnMut(P)) {
        let active: Vec<usize> = (0..self.tins.len() * QUEUES)
            .filter(|&k| !self.tins[k / QUEUES].q.flows[k % QUEUES].q.is_empty())
            .collect();
        let (tins, pool) = (&mut self.tins, &mut self.pool);
        crate::qdisc::drain_in_turn(
            active,
            |k| pool.pop_front(&mut tins[k / QUEUES].q.flows[k % QUEUES].q),
            out,
        );
        for t in self.tins.iter_mut().filter(|t| t.q.built()) {
            (0..QUEUES).for_each(|i| t.q.backlogs[i] = 0);
            t.tin_backlog = 0;
        }
        (self.qlen, self.backlog, self.buffer_used) = (0, 0, 0);
    }
    /// `tc qdisc change … cake bandwidth R`: a spec that differs only in its rate is taken in
    /// place (the queues and their state kept), as the kernel's `cake_change` does.
    fn change(&mut self, new: &crate::qdisc::spec::QdiscSpec) -> Option<usize> {
        let crate::qdisc::spec::QdiscSpec::Cake(c) = new else {
            return None;
        };
        let mut same = self.spec.clone();
        same.bandwidth_bytes_per_s = c.bandwidth_bytes_per_s;
        if &same != c {
            return None;
        }
        self.set_bandwidth_bytes_per_s(c.bandwidth_bytes_per_s);
        Some(1)
    }

    fn set_bandwidth(&mut self, rate_bps: Option<u64>) -> bool {
        // The spec keeps bytes/s, as the kernel's TCA_CAKE_BASE_RATE64 does.
        self.set_bandwidth_bytes_per_s(rate_bps.map(|b| b / 8).filter(|&b| b > 0));
        true
    }

    fn enqueue(&mut self, mut packet: P, now: Nanos) -> Verdict {
        let (tin, idx) = self.classify(&mut packet);
        self.freshen_shaper(tin, now);
        let len = packet.meta().len;
        let t = &mut self.tins[tin];
        t.max_skblen = t.max_skblen.max(len);
        let backlog_before = self.backlog;
        if packet.meta().gso_segs > 1 && self.spec.split_gso {
            while let Some(seg) = packet.split_first_segment() {
                self.queue_one(tin, idx, seg, now);
            }
            self.queue_one(tin, idx, packet, now);
        } else {
            self.queue_one(tin, idx, packet, now);
            if self.spec.ack_filter != ack_filter::AckFilter::None {
                self.ack_filter(tin, idx, now);
            }
        }
        if self.spec.autorate_ingress {
            self.estimate_capacity(now, self.backlog as i64 - backlog_before as i64);
        }
        self.activate(tin, idx);
        self.buffer_max_used = self.buffer_max_used.max(self.buffer_used);
        if self.buffer_used <= self.buffer_limit {
            return Verdict::Queued;
        }
        let (mut same_flow, mut dropped) = (false, 0);
        while self.buffer_used > self.buffer_limit {
            match self.drop_fattest(now) {
                Some(hit) => {
                    dropped += 1;
                    same_flow |= hit == (tin, idx);
                }
                None => break,
            }
        }
        self.tins[tin].drop_overlimit += dropped;
        match (same_flow, self.tins[tin].q.flows[idx].q.is_empty()) {
            (true, true) => Verdict::Dropped,
            (true, false) => Verdict::Congested,
            _ => Verdict::Queued,
        }
    }

    fn dequeue(&mut self, now: Nanos) -> Dequeue<P> {
        let mut first = true;
        loop {
            if self.qlen == 0 {
                return Dequeue::Empty;
            }
            if let Some(at) = self.shaper.gate(now) {
                self.overlimits += 1;
                return Dequeue::NotBefore(at);
            }
            let Some(tin) = self.choose_tin(now) else {
                return Dequeue::Empty;
            };
            // Nothing `begin:` reads (packet count, shaper clocks, tin deficits) has changed
            // since it chose this tin, until an ingress drop charges the shaper.
            let mut unchanged = true;
            while let Some(idx) = self.choose_flow(tin, &mut first) {
                match self.aqm_dequeue(tin, idx, now) {
                    Ok(()) => {
                        if let Some(p) = self.pop(tin, idx) {
                            self.deliver(tin, idx, &p, now);
                            return Dequeue::Packet(p);
                        }
                        break;
                    }
                    Err(true) => unchanged = false,
                    // Linux goes back to `begin:` after an empty flow. Retiring it changes
                    // no packet count, shaper clock or tin deficit, so unless an ingress drop
                    // came first, `begin:` would pass the same checks and choose this tin again
                    // while it stays active: go straight to its next flow (same fates).
                    Err(false) if unchanged && self.tins[tin].active() && self.shortcut() => {}
                    Err(false) => break,
                }
            }
        }
    }

    fn take_dropped(&mut self) -> Option<Dropped<P>> {
        self.dropped.take()
    }

    fn qlen(&self) -> usize {
        self.qlen
    }

    fn backlog(&self) -> u64 {
        self.backlog
    }

    fn stats(&self) -> QdiscStats {
        let order = self.spec.diffserv.tin_order();
        let names = self.spec.diffserv.tin_names();
        let tins = order
            .iter()
            .zip(names)
            .map(|(&i, name)| {
                let t = &self.tins[i];
                TinStats {
                    name: (*name).to_string(),
                    threshold_rate: t.p.rate_bps,
                    target_us: t.p.cparams.target / 1000,
                    interval_us: t.p.cparams.interval / 1000,
                    peak_delay_us: t.peak_delay / 1000,
                    avg_delay_us: t.avge_delay / 1000,
                    base_delay_us: t.base_delay / 1000,
                    backlog_bytes: t.tin_backlog,
                    sent_packets: t.packets,
                    sent_bytes: t.bytes,
                    way_indirect_hits: t.q.table.way_hits,
                    way_misses: t.q.table.way_misses,
                    way_collisions: t.q.table.way_collisions,
                    drops: t.tin_dropped,
                    ecn_mark: t.tin_ecn_mark,
                    ack_drops: t.ack_drops,
                    sparse_flows: t.sparse_flow_count + t.decaying_flow_count,
                    bulk_flows: t.bulk_flow_count,
                    unresponsive_flows: t.unresponsive_flow_count,
                    max_pkt_len: t.max_skblen,
                    flow_quantum: u32::from(t.p.flow_quantum),
                }
            })
            .collect();
        QdiscStats {
            kind: "cake".into(),
            options: self.spec.tc_options(),
            bytes: self.sent_bytes,
            packets: self.sent_pkts,
            drops: self.drops,
            overlimits: self.overlimits,
            requeues: 0,
            backlog: self.backlog,
            qlen: self.qlen as u64,
            xstats: Xstats::Cake(Box::new(CakeStats {
                capacity_estimate: self.autorate.capacity_estimate(),
                memory_limit: self.buffer_limit,
                memory_used: self.buffer_max_used,
                avg_hdr_offset: (self.sizes.avg_netoff + 0x8000) >> 16,
                min_network_size: self.sizes.min_netlen,
                max_network_size: self.sizes.max_netlen,
                min_adj_size: self.sizes.min_adjlen,
                max_adj_size: self.sizes.max_adjlen,
                tins,
            })),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::flow::FlowKey;
    use crate::packet::{Ecn, PacketMeta, Record};
    use crate::testutil::addr;

    /// Random traffic through two identical cakes, one going back to `begin:` after every
    /// empty flow as Linux does: every dequeue, drop and statistic must be the same.
    #[test]
    fn skipping_begin_after_an_empty_flow_changes_no_fate() {
        let specs = [
            "bandwidth 1Mbit besteffort triple-isolate",
            "bandwidth 2Mbit diffserv4 flows ingress",
            "bandwidth 500kbit diffserv3 dual-dsthost ingress ack-filter",
            "unlimited diffserv4 triple-isolate",
            "unlimited diffserv8 flows ingress",
            "bandwidth 10Mbit precedence hosts ethernet",
        ];
        let mut shortcuts = 0;
        for (k, text) in specs.iter().enumerate() {
            let crate::qdisc::spec::QdiscSpec::Cake(spec) = format!("cake {text}").parse().unwrap()
            else {
                panic!("{text} is not a cake spec");
            };
            for seed in 0..40u64 {
                let hasher = FlowHasher::new([seed, 7]);
                let mut fast = Cake::<Record>::new(&spec, hasher, seed);
                let mut slow = Cake::<Record>::new(&spec, hasher, seed);
                slow.always_begin = true;
                let mut rng = SplitMix64::new(seed * 31 + k as u64);
                let (mut now, mut id) = (0u64, 0u64);
                for _ in 0..4000 {
                    let r = rng.next_u32();
                    match r % 10 {
                        0..=4 => {
                            let flow = (r >> 8) % 12;
                            let key = FlowKey::ip(
                                addr(0, (flow % 3) as u8),
                                addr(1, (flow % 5) as u8),
                                1000 + flow as u16,
                                80,
                                17,
                            );
                            let mut m = PacketMeta::new(64 + (r >> 16) % 1450, key);
                            m.dscp = [0, 8, 46, 34][((r >> 4) % 4) as usize];
                            m.ecn = if r & 1 == 0 { Ecn::Ect0 } else { Ecn::NotEct };
                            assert_eq!(
                                fast.enqueue(Record::new(id, m), now),
                                slow.enqueue(Record::new(id, m), now)
                            );
                            id += 1;
                        }
                        5..=7 => {
                            let (a, b) = (fast.dequeue(now), slow.dequeue(now));
                            let show = |d: &Dequeue<Record>| match d {
                                Dequeue::Packet(p) => format!("packet {}", p.id),
                                other => format!("{other:?}"),
                            };
                            assert_eq!(show(&a), show(&b), "{text}, seed {seed}, at {now}");
                        }
                        _ => now += u64::from((r >> 8) % 3_000_000),
                    }
                    loop {
                        let (a, b) = (fast.take_dropped(), slow.take_dropped());
                        assert_eq!(
                            a.as_ref().map(|d| (d.packet.id, d.reason)),
                            b.as_ref().map(|d| (d.packet.id, d.reason))
                        );
                        if a.is_none() {
                            break;
                        }
                    }
                }
                assert_eq!(format!("{:?}", fast.stats()), format!("{:?}", slow.stats()));
                shortcuts += slow.shortcut_open;
            }
        }
        // The case the shortcut is for must actually occur in this traffic.
        assert!(shortcuts > 1000, "only {shortcuts} empty flows met");
    }
}
