//! CAKE's 8-way set-associative flow table and per-host bulk-flow counts (`cake_hash`).
//!
//! A flow hash picks a set of 8 queues; the flow takes the queue tagged with its hash, or else
//! an unused one, or else collides into the queue its hash points at. Collisions are rare with
//! 1024 queues and 8 ways; `way_inds`, `way_miss` and `way_cols` count what happened.
//!
//! Host isolation: in the dual and triple modes every flow also points at a source-host and/or
//! destination-host slot found the same way. A host's `bulk_flow_count` counts its flows in the
//! bulk rotation, and each such flow's DRR quantum is divided by that count, so hosts share
//! byte-fairly whatever their flow counts (§3.4).
//!
//! Faithful to Linux, not ns-3: probing starts at the hashed way (`inner`), not the set's first
//! way, and a collision falls back to the hashed way.

/// Queues per tin.
pub const QUEUES: usize = 1024;
/// Ways per set.
pub const WAYS: usize = 8;

/// One value per flow queue of a tin (or per host slot), indexed by queue number. The length is
/// fixed at [`QUEUES`], a power of two, so an index taken modulo `QUEUES` needs no bounds check
/// on the per-packet path. Every index the table hands out is already below `QUEUES`.
#[derive(Clone, Debug)]
pub struct PerQueue<T>([T; QUEUES]);

impl<T: Clone> PerQueue<T> {
    /// `QUEUES` copies of `v`.
    pub fn new(v: T) -> Self {
        PerQueue(std::array::from_fn(|_| v.clone()))
    }
}

impl<T> PerQueue<T> {
    /// The values in queue order.
    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.0.iter()
    }
}

impl<T> std::ops::Index<usize> for PerQueue<T> {
    type Output = T;
    #[inline(always)]
    fn index(&self, i: usize) -> &T {
        debug_assert!(i < QUEUES, "queue index {i} out of range");
        &self.0[i % QUEUES]
    }
}

impl<T> std::ops::IndexMut<usize> for PerQueue<T> {
    #[inline(always)]
    fn index_mut(&mut self, i: usize) -> &mut T {
        debug_assert!(i < QUEUES, "queue index {i} out of range");
        &mut self.0[i % QUEUES]
    }
}

/// Isolation mode bits: flows are hashed by source host, destination host, and/or 5-tuple.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowMode(pub u8);

impl FlowMode {
    /// Source-host bit.
    pub const SRC_IP: u8 = 1;
    /// Destination-host bit.
    pub const DST_IP: u8 = 2;
    /// Per-flow bit.
    pub const FLOWS: u8 = 4;
    /// All in one queue.
    pub const FLOWBLIND: FlowMode = FlowMode(0);
    /// One queue per source host.
    pub const SRCHOST: FlowMode = FlowMode(1);
    /// One queue per destination host.
    pub const DSTHOST: FlowMode = FlowMode(2);
    /// One queue per host pair.
    pub const HOSTS: FlowMode = FlowMode(3);
    /// One queue per flow, no host fairness.
    pub const FLOWS_ONLY: FlowMode = FlowMode(4);
    /// Per-flow queues, fair between source hosts.
    pub const DUAL_SRCHOST: FlowMode = FlowMode(5);
    /// Per-flow queues, fair between destination hosts.
    pub const DUAL_DSTHOST: FlowMode = FlowMode(6);
    /// Per-flow queues, fair between source hosts and between destination hosts (default).
    pub const TRIPLE_ISOLATE: FlowMode = FlowMode(7);

    /// The tc keyword.
    pub fn keyword(self) -> &'static str {
        match self.0 {
            0 => "flowblind",
            1 => "srchost",
            2 => "dsthost",
            3 => "hosts",
            4 => "flows",
            5 => "dual-srchost",
            6 => "dual-dsthost",
            _ => "triple-isolate",
        }
    }

    /// `cake_dsrc`: source-host fairness applies.
    #[inline]
    pub fn dual_src(self) -> bool {
        self.0 & 5 == 5
    }

    /// `cake_ddst`: destination-host fairness applies.
    #[inline]
    pub fn dual_dst(self) -> bool {
        self.0 & 6 == 6
    }
}

/// Where a flow queue stands in the DRR rotation (`CAKE_SET_*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FlowSet {
    /// Unused.
    #[default]
    None,
    /// On `new_flows`, counted sparse.
    Sparse,
    /// Counted sparse but sitting in the bulk rotation.
    SparseWait,
    /// In the bulk rotation.
    Bulk,
    /// Empty, waiting for its COBALT state to decay.
    Decaying,
}

/// A flow slot's membership data.
#[derive(Clone, Copy, Debug, Default)]
pub struct Slot {
    /// Rotation state.
    pub set: FlowSet,
    /// Source-host slot index.
    pub srchost: u16,
    /// Destination-host slot index.
    pub dsthost: u16,
}

/// Host slots: tags and bulk-flow counts, source and destination kept apart. The counts are
/// read for every DRR quantum (`host_load`), so they sit in dense arrays of their own (2 KiB
/// each) rather than beside the tags, which only the slot search reads.
#[derive(Clone, Debug)]
struct Hosts {
    tag: PerQueue<u32>,
    bulk_flow_count: PerQueue<u16>,
}

impl Default for Hosts {
    fn default() -> Self {
        Hosts {
            tag: PerQueue::new(0),
            bulk_flow_count: PerQueue::new(0),
        }
    }
}

/// The per-tin flow table.
#[derive(Clone, Debug)]
pub struct Table {
    tags: PerQueue<u32>,
    src: Hosts,
    dst: Hosts,
    /// Membership data per flow queue.
    pub slots: PerQueue<Slot>,
    /// Direct hits.
    pub way_directs: u32,
    /// Hits on another way of the set.
    pub way_hits: u32,
    /// Flows given an unused way.
    pub way_misses: u32,
    /// Flows that had to share a queue.
    pub way_collisions: u32,
}

impl Default for Table {
    fn default() -> Self {
        Table {
            tags: PerQueue::new(0),
            src: Hosts::default(),
            dst: Hosts::default(),
            slots: PerQueue::new(Slot::default()),
            way_directs: 0,
            way_hits: 0,
            way_misses: 0,
            way_collisions: 0,
        }
    }
}

impl Hosts {
    /// The host slot for `hash` (`cake_hash`'s host search): the way tagged with it, or else
    /// the first way with no bulk flows, or else the hashed way (shared). Tags the slot.
    fn find(&mut self, hash: u32) -> usize {
        let idx = hash as usize % QUEUES;
        let inner = idx % WAYS;
        let outer = idx - inner;
        for i in 0..WAYS {
            let k = outer + (inner + i) % WAYS;
            if self.tag[k] == hash {
                return k;
            }
        }
        let mut k = outer + inner;
        for i in 0..WAYS {
            let c = outer + (inner + i) % WAYS;
            if self.bulk_flow_count[c] == 0 {
                k = c;
                break;
            }
        }
        self.tag[k] = hash;
        k
    }
}

impl Table {
    /// Find (or assign) the queue for a flow hash; allocate host slots in dual/triple modes.
    pub fn lookup(
        &mut self,
        flow_hash: u32,
        srchost_hash: u32,
        dsthost_hash: u32,
        mode: FlowMode,
    ) -> usize {
        self.lookup_with(flow_hash, mode, || (srchost_hash, dsthost_hash))
    }

    /// [`Table::lookup`] with the (source, destination) host hashes computed only if host slots
    /// must be allocated. Linux computes them for every packet; the queue chosen and the host
    /// slots are the same either way, only the hashing cost differs.
    #[inline]
    pub fn lookup_with(
        &mut self,
        flow_hash: u32,
        mode: FlowMode,
        host_hashes: impl FnOnce() -> (u32, u32),
    ) -> usize {
        let reduced = flow_hash as usize % QUEUES;
        if self.tags[reduced] == flow_hash && self.slots[reduced].set != FlowSet::None {
            self.way_directs += 1;
            return reduced;
        }
        let inner = reduced % WAYS;
        let outer = reduced - inner;
        let (found, allocate) = self.probe(flow_hash, outer, inner, mode);
        self.tags[found] = flow_hash;
        if !(allocate && (mode.dual_src() || mode.dual_dst())) {
            return found;
        }
        let (srchost_hash, dsthost_hash) = host_hashes();
        if mode.dual_src() {
            let h = self.src.find(srchost_hash);
            if self.slots[found].set == FlowSet::Bulk {
                let c = &mut self.src.bulk_flow_count[h];
                *c = c.saturating_add(1);
            }
            self.slots[found].srchost = h as u16;
        }
        if mode.dual_dst() {
            let h = self.dst.find(dsthost_hash);
            if self.slots[found].set == FlowSet::Bulk {
                let c = &mut self.dst.bulk_flow_count[h];
                *c = c.saturating_add(1);
            }
            self.slots[found].dsthost = h as u16;
        }
        found
    }

    /// The way search; returns the queue and whether its host slots must be (re)allocated.
    #[inline]
    fn probe(
        &mut self,
        flow_hash: u32,
        outer: usize,
        inner: usize,
        mode: FlowMode,
    ) -> (usize, bool) {
        for i in 0..WAYS {
            let k = outer + (inner + i) % WAYS;
            if self.tags[k] == flow_hash {
                if i > 0 {
                    self.way_hits += 1;
                }
                return (k, self.slots[k].set == FlowSet::None);
            }
        }
        for i in 0..WAYS {
            let k = outer + (inner + i) % WAYS;
            if self.slots[k].set == FlowSet::None {
                self.way_misses += 1;
                return (k, true);
            }
        }
        self.way_collisions += 1;
        let k = outer + inner;
        if self.slots[k].set == FlowSet::Bulk {
            self.dec_bulk(k, mode);
        }
        (k, true)
    }

    /// A flow joined the bulk rotation: count it against its hosts.
    pub fn inc_bulk(&mut self, flow: usize, mode: FlowMode) {
        let s = self.slots[flow];
        if mode.dual_src() {
            let c = &mut self.src.bulk_flow_count[s.srchost as usize];
            if (*c as usize) < QUEUES {
                *c += 1;
            }
        }
        if mode.dual_dst() {
            let c = &mut self.dst.bulk_flow_count[s.dsthost as usize];
            if (*c as usize) < QUEUES {
                *c += 1;
            }
        }
    }

    /// A flow left the bulk rotation.
    pub fn dec_bulk(&mut self, flow: usize, mode: FlowMode) {
        let s = self.slots[flow];
        if mode.dual_src() {
            let c = &mut self.src.bulk_flow_count[s.srchost as usize];
            *c = c.saturating_sub(1);
        }
        if mode.dual_dst() {
            let c = &mut self.dst.bulk_flow_count[s.dsthost as usize];
            *c = c.saturating_sub(1);
        }
    }

    /// `host_load`: the larger bulk count of the flow's hosts, at least 1.
    #[inline(always)]
    pub fn host_load(&self, flow: usize, mode: FlowMode) -> u32 {
        let s = self.slots[flow];
        let mut load = 1u16;
        if mode.dual_src() {
            load = load.max(self.src.bulk_flow_count[s.srchost as usize]);
        }
        if mode.dual_dst() {
            load = load.max(self.dst.bulk_flow_count[s.dsthost as usize]);
        }
        u32::from(load)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_hash_hits_directly_once_in_use() {
        let mut t = Table::default();
        let q = t.lookup(5000, 0, 0, FlowMode::FLOWS_ONLY);
        assert_eq!(q, 5000 % QUEUES);
        t.slots[q].set = FlowSet::Sparse;
        assert_eq!(t.lookup(5000, 0, 0, FlowMode::FLOWS_ONLY), q);
        assert_eq!(t.way_directs, 1);
    }

    #[test]
    fn colliding_hashes_take_the_next_free_way_then_collide() {
        let mut t = Table::default();
        // Nine hashes that all reduce to queue 3 (set 0..8, inner way 3).
        let hashes: Vec<u32> = (0..9).map(|i| 3 + (i * QUEUES as u32)).collect();
        let mut got = vec![];
        for &h in &hashes[..8] {
            let q = t.lookup(h, 0, 0, FlowMode::FLOWS_ONLY);
            t.slots[q].set = FlowSet::Bulk;
            got.push(q);
        }
        assert_eq!(
            got,
            vec![3, 4, 5, 6, 7, 0, 1, 2],
            "probing starts at the hashed way"
        );
        assert_eq!(t.way_misses, 8);
        let q = t.lookup(hashes[8], 0, 0, FlowMode::FLOWS_ONLY);
        assert_eq!(
            (q, t.way_collisions),
            (3, 1),
            "collision falls back to the hashed way"
        );
    }
}
