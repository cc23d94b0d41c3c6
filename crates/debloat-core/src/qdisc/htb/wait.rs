//! A level's event queue (`wait_pq`): the classes that cannot send at their own rate, each
//! keyed by when its tokens will let it change mode. Linux keeps a red-black tree by time in
//! which equal times queue behind one another; here an indexed binary heap ordered by (time,
//! arrival), so equal times leave in the same order, any member can be taken out (a class that
//! recovers while charged), and nothing allocates after construction.

use crate::packet::Nanos;

const NONE: u32 = u32::MAX;

/// Members are ranks `0..n`.
#[derive(Clone, Debug, Default)]
pub(crate) struct WaitQueue {
    /// (time, arrival, rank), a min-heap.
    heap: Vec<(Nanos, u64, u32)>,
    /// Where each rank sits in `heap`, or NONE.
    pos: Vec<u32>,
    seq: u64,
}

impl WaitQueue {
    pub(crate) fn new(n: usize) -> WaitQueue {
        WaitQueue {
            heap: Vec::with_capacity(n),
            pos: vec![NONE; n],
            seq: 0,
        }
    }

    /// The earliest (time, rank).
    pub(crate) fn peek(&self) -> Option<(Nanos, u32)> {
        self.heap.first().map(|&(t, _, r)| (t, r))
    }

    /// Queue `rank` at `at`, or move it there (behind any entry already at `at`).
    pub(crate) fn push(&mut self, rank: u32, at: Nanos) {
        self.seq += 1;
        match self.pos.get(rank as usize).copied() {
            Some(i) if i != NONE => {
                let i = i as usize;
                self.heap[i].0 = at;
                self.heap[i].1 = self.seq;
                self.down(i);
                self.up(i);
            }
            _ => {
                let i = self.heap.len();
                self.heap.push((at, self.seq, rank));
                self.pos[rank as usize] = i as u32;
                self.up(i);
            }
        }
    }

    /// Take `rank` out if it is queued.
    pub(crate) fn remove(&mut self, rank: u32) {
        let Some(&i) = self.pos.get(rank as usize) else {
            return;
        };
        if i == NONE {
            return;
        }
        let i = i as usize;
        let last = self.heap.len() - 1;
        self.swap(i, last);
        self.heap.pop();
        self.pos[rank as usize] = NONE;
        if i < self.heap.len() {
            self.down(i);
            self.up(i);
        }
    }

    fn key(&self, i: usize) -> (Nanos, u64) {
        (self.heap[i].0, self.heap[i].1)
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        self.pos[self.heap[a].2 as usize] = a as u32;
        self.pos[self.heap[b].2 as usize] = b as u32;
    }

    fn up(&mut self, mut i: usize) {
        while i > 0 {
            let p = (i - 1) / 2;
            if self.key(i) >= self.key(p) {
                break;
            }
            self.swap(i, p);
            i = p;
        }
    }

    fn down(&mut self, mut i: usize) {
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut m = i;
            if l < self.heap.len() && self.key(l) < self.key(m) {
                m = l;
            }
            if r < self.heap.len() && self.key(r) < self.key(m) {
                m = r;
            }
            if m == i {
                return;
            }
            self.swap(i, m);
            i = m;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        /// Pushes, removals and pops give what a map ordered by (time, arrival) gives.
        #[test]
        fn pops_in_time_then_arrival_order(ops in proptest::collection::vec((0u32..40, 0u64..20, 0u8..3), 1..300)) {
            let mut q = WaitQueue::new(40);
            let mut m: BTreeMap<(u64, u64), u32> = BTreeMap::new();
            let mut at: Vec<Option<(u64, u64)>> = vec![None; 40];
            let mut seq = 0;
            for (r, t, op) in ops {
                match op {
                    0 => {
                        if let Some(k) = at[r as usize].take() { m.remove(&k); }
                        seq += 1;
                        m.insert((t, seq), r);
                        at[r as usize] = Some((t, seq));
                        q.push(r, t);
                    }
                    1 => {
                        if let Some(k) = at[r as usize].take() { m.remove(&k); }
                        q.remove(r);
                    }
                    _ => {
                        let want = m.iter().next().map(|(&(t, _), &r)| (t, r));
                        prop_assert_eq!(q.peek(), want);
                        if let Some((_, r)) = want {
                            q.remove(r);
                            if let Some(k) = at[r as usize].take() { m.remove(&k); }
                        }
                    }
                }
            }
        }
    }
}
