//! Intrusive doubly-linked lists of flow indices, the Rust shape of the kernel's
//! `list_head` flow chains (`new_flows`, `old_flows`, `decaying_flows`).
//!
//! A flow is on at most one list of a [`ListSet`]. Moving a flow between lists, removing it from
//! the middle and reading the head are O(1) with no allocation.

const NIL: u32 = u32::MAX;

/// One flow's links, kept together so a list operation touches one cache line per flow.
#[derive(Clone, Copy, Debug)]
struct Link {
    prev: u32,
    next: u32,
    on: u8,
}

/// `N` lists over `0..capacity` flow indices.
#[derive(Clone, Debug)]
pub struct ListSet<const N: usize> {
    links: Vec<Link>,
    head: [u32; N],
    tail: [u32; N],
    len: [u32; N],
}

impl<const N: usize> ListSet<N> {
    /// Empty lists for flows `0..capacity`.
    pub fn new(capacity: usize) -> Self {
        ListSet {
            links: vec![
                Link {
                    prev: NIL,
                    next: NIL,
                    on: u8::MAX
                };
                capacity
            ],
            head: [NIL; N],
            tail: [NIL; N],
            len: [0; N],
        }
    }

    /// The list flow `i` is on, if any.
    #[inline]
    pub fn list_of(&self, i: u32) -> Option<usize> {
        match self.links[i as usize].on {
            u8::MAX => None,
            l => Some(l as usize),
        }
    }

    /// The first flow of list `l`.
    #[inline]
    pub fn front(&self, l: usize) -> Option<u32> {
        match self.head[l] {
            NIL => None,
            h => Some(h),
        }
    }

    /// Number of flows on list `l`.
    #[inline]
    pub fn len(&self, l: usize) -> usize {
        self.len[l] as usize
    }

    /// True when list `l` is empty.
    #[inline]
    pub fn is_empty(&self, l: usize) -> bool {
        self.head[l] == NIL
    }

    /// Append flow `i` (on no list) to the tail of list `l`.
    #[inline(always)]
    pub fn push_back(&mut self, l: usize, i: u32) {
        debug_assert!(self.list_of(i).is_none(), "flow already listed");
        let t = self.tail[l];
        self.links[i as usize] = Link {
            prev: t,
            next: NIL,
            on: l as u8,
        };
        if t == NIL {
            self.head[l] = i;
        } else {
            self.links[t as usize].next = i;
        }
        self.tail[l] = i;
        self.len[l] += 1;
    }

    /// Remove flow `i` from whatever list it is on (no-op if none).
    #[inline(always)]
    pub fn remove(&mut self, i: u32) {
        let Some(l) = self.list_of(i) else { return };
        let Link {
            prev: p, next: n, ..
        } = self.links[i as usize];
        if p == NIL {
            self.head[l] = n;
        } else {
            self.links[p as usize].next = n;
        }
        if n == NIL {
            self.tail[l] = p;
        } else {
            self.links[n as usize].prev = p;
        }
        self.links[i as usize].on = u8::MAX;
        self.len[l] -= 1;
    }

    /// `list_move_tail` of the first flow of list `from` to list `to` (the DRR rotation), with
    /// the head's links known; returns the flow moved. Same result as [`ListSet::move_tail`].
    #[inline(always)]
    pub fn rotate_front(&mut self, from: usize, to: usize) -> Option<u32> {
        let i = self.head[from];
        if i == NIL {
            return None;
        }
        let n = self.links[i as usize].next;
        self.head[from] = n;
        if n == NIL {
            self.tail[from] = NIL;
        } else {
            self.links[n as usize].prev = NIL;
        }
        self.len[from] -= 1;
        // `push_back` by hand: the tail is re-read there, which costs 1 % of fq_codel's
        // per-packet instructions (scripts/instructions-per-packet.sh).
        let t = self.tail[to];
        self.links[i as usize] = Link {
            prev: t,
            next: NIL,
            on: to as u8,
        };
        if t == NIL {
            self.head[to] = i;
        } else {
            self.links[t as usize].next = i;
        }
        self.tail[to] = i;
        self.len[to] += 1;
        Some(i)
    }

    /// Kernel `list_move_tail`: take `i` off its list (if any) and append it to list `l`.
    #[inline]
    pub fn move_tail(&mut self, i: u32, l: usize) {
        self.remove(i);
        self.push_back(l, i);
    }

    /// Make room for flows `0..capacity` (a discipline whose flows come and go, as `fq`'s
    /// do); existing links are kept. Never shrinks.
    pub fn grow(&mut self, capacity: usize) {
        if capacity > self.links.len() {
            self.links.resize(
                capacity,
                Link {
                    prev: NIL,
                    next: NIL,
                    on: u8::MAX,
                },
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(s: &ListSet<2>, l: usize) -> Vec<u32> {
        let mut out = vec![];
        let mut c = s.head[l];
        while c != NIL {
            out.push(c);
            c = s.links[c as usize].next;
        }
        out
    }

    #[test]
    fn move_between_lists_keeps_order() {
        let mut s = ListSet::<2>::new(8);
        for i in [3, 1, 4] {
            s.push_back(0, i);
        }
        s.move_tail(1, 1);
        s.move_tail(3, 1);
        assert_eq!(collect(&s, 0), vec![4]);
        assert_eq!(collect(&s, 1), vec![1, 3]);
        assert_eq!((s.len(0), s.len(1)), (1, 2));
        s.remove(1);
        assert_eq!(collect(&s, 1), vec![3]);
        s.push_back(0, 5);
        assert_eq!(s.rotate_front(0, 1), Some(4));
        assert_eq!(s.rotate_front(1, 1), Some(3), "rotating within one list");
        assert_eq!((collect(&s, 0), collect(&s, 1)), (vec![5], vec![4, 3]));
        assert_eq!(s.rotate_front(0, 1), Some(5));
        assert_eq!(s.rotate_front(0, 1), None);
        assert_eq!((s.len(0), s.len(1), s.list_of(5)), (0, 3, Some(1)));
        assert_eq!(s.tail[1], 5);
        assert_eq!(s.links[5].prev, 3);
        assert_eq!(s.list_of(1), None);
        assert_eq!(s.front(1), Some(4));
    }
}
