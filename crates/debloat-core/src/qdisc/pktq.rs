//! Per-flow packet FIFOs that share one pool, the way the kernel chains `sk_buff`s through each
//! flow's `head`/`tail` instead of giving every flow its own growable buffer.
//!
//! Why: a discipline with thousands of flow queues would otherwise allocate whenever any one flow
//! reached a new peak depth. With one pool the only growth happens when the *whole* discipline
//! holds more packets than it ever has; in steady state enqueue and dequeue never allocate.
//! Singly linked, O(1) push/pop; removal from the middle (CAKE's ACK filter) walks the flow.

const NIL: u32 = u32::MAX;

#[derive(Debug)]
struct Node<P> {
    pkt: Option<P>,
    next: u32,
}

/// One flow's FIFO: indices into a [`Pool`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fifo {
    head: u32,
    tail: u32,
    len: u32,
}

impl Default for Fifo {
    fn default() -> Self {
        Fifo {
            head: NIL,
            tail: NIL,
            len: 0,
        }
    }
}

impl Fifo {
    /// Packets in this FIFO.
    #[inline]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// True when empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The storage every FIFO of one discipline draws from.
#[derive(Debug)]
pub struct Pool<P> {
    nodes: Vec<Node<P>>,
    free: u32,
}

impl<P> Pool<P> {
    /// A pool with room for `n` packets before it first grows.
    pub fn with_capacity(n: usize) -> Self {
        Pool {
            nodes: Vec::with_capacity(n),
            free: NIL,
        }
    }

    #[inline(always)]
    fn alloc(&mut self, p: P) -> u32 {
        if self.free != NIL {
            let i = self.free;
            let n = &mut self.nodes[i as usize];
            self.free = n.next;
            n.pkt = Some(p);
            n.next = NIL;
            i
        } else {
            self.nodes.push(Node {
                pkt: Some(p),
                next: NIL,
            });
            (self.nodes.len() - 1) as u32
        }
    }

    #[inline(always)]
    fn release(&mut self, i: u32) -> Option<P> {
        let n = &mut self.nodes[i as usize];
        let p = n.pkt.take();
        n.next = self.free;
        self.free = i;
        p
    }

    /// Append to the tail of `q`.
    #[inline]
    pub fn push_back(&mut self, q: &mut Fifo, p: P) {
        let i = self.alloc(p);
        if q.tail == NIL {
            q.head = i;
        } else {
            self.nodes[q.tail as usize].next = i;
        }
        q.tail = i;
        q.len += 1;
    }

    /// Remove the head of `q`.
    #[inline]
    pub fn pop_front(&mut self, q: &mut Fifo) -> Option<P> {
        if q.head == NIL {
            return None;
        }
        let i = q.head;
        q.head = self.nodes[i as usize].next;
        if q.head == NIL {
            q.tail = NIL;
        }
        q.len -= 1;
        self.release(i)
    }

    /// The oldest packet of a FIFO.
    pub fn front(&self, q: &Fifo) -> Option<&P> {
        if q.head == NIL {
            return None;
        }
        self.nodes[q.head as usize].pkt.as_ref()
    }

    /// The oldest packet of a FIFO, to read or mark in place.
    #[inline]
    pub fn front_mut(&mut self, q: &Fifo) -> Option<&mut P> {
        if q.head == NIL {
            return None;
        }
        self.nodes[q.head as usize].pkt.as_mut()
    }

    /// The last packet of `q`.
    pub fn back(&self, q: &Fifo) -> Option<&P> {
        if q.tail == NIL {
            None
        } else {
            self.nodes[q.tail as usize].pkt.as_ref()
        }
    }

    /// The packets of `q`, head first.
    pub fn iter<'a>(&'a self, q: &Fifo) -> impl Iterator<Item = &'a P> + 'a {
        let mut cur = q.head;
        std::iter::from_fn(move || {
            if cur == NIL {
                return None;
            }
            let n = &self.nodes[cur as usize];
            cur = n.next;
            n.pkt.as_ref()
        })
    }

    /// Remove the packet at position `index` of `q` (0 = head).
    pub fn remove(&mut self, q: &mut Fifo, index: usize) -> Option<P> {
        if index >= q.len() {
            return None;
        }
        if index == 0 {
            return self.pop_front(q);
        }
        let mut prev = q.head;
        for _ in 1..index {
            prev = self.nodes[prev as usize].next;
        }
        let i = self.nodes[prev as usize].next;
        self.nodes[prev as usize].next = self.nodes[i as usize].next;
        if q.tail == i {
            q.tail = prev;
        }
        q.len -= 1;
        self.release(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifos_share_a_pool_and_reuse_slots() {
        let mut pool = Pool::with_capacity(4);
        let (mut a, mut b) = (Fifo::default(), Fifo::default());
        for i in 0..3 {
            pool.push_back(&mut a, i);
            pool.push_back(&mut b, 10 + i);
        }
        assert_eq!(pool.iter(&a).copied().collect::<Vec<_>>(), vec![0, 1, 2]);
        assert_eq!(pool.remove(&mut a, 1), Some(1));
        assert_eq!(pool.remove(&mut a, 1), Some(2));
        assert_eq!(pool.back(&a), Some(&0));
        pool.push_back(&mut a, 3);
        assert_eq!(pool.iter(&a).copied().collect::<Vec<_>>(), vec![0, 3]);
        assert_eq!(pool.pop_front(&mut b), Some(10));
        assert_eq!((a.len(), b.len()), (2, 2));
        assert_eq!(pool.nodes.len(), 6, "freed slots are reused");
        while pool.pop_front(&mut a).is_some() {}
        assert!(a.is_empty() && pool.back(&a).is_none());
    }
}
