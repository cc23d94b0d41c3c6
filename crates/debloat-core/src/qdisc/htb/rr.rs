//! The round-robin sets HTB keeps its active classes in: a level's *row* (classes that can send
//! at their own rate) and an inner class's *feed* (children that may borrow from it), one per
//! priority. Linux keeps each as a red-black tree ordered by classid with a pointer to the
//! class whose turn it is, and, when that class leaves, the classid it had, so that the turn
//! resumes at the next classid up (`htb_id_find_next_upper`).
//!
//! Here members are ranks — a class's place by classid among the classes that can share the set
//! — in a two-level bitset: insert and remove are O(1), the next member up is a word scan of
//! the summary, and nothing allocates after construction.

/// A set of ranks `0..n` with the turn pointer and the remembered rank.
#[derive(Clone, Debug, Default)]
pub(crate) struct RrSet {
    words: Vec<u64>,
    summary: Vec<u64>,
    len: u32,
    /// Whose turn it is (`ptr`), a member or none.
    pub(crate) ptr: Option<u32>,
    /// The member that had the turn when it left (`last_ptr_id`).
    pub(crate) last: Option<u32>,
}

impl RrSet {
    /// An empty set for ranks `0..n`.
    pub(crate) fn new(n: usize) -> RrSet {
        let words = n.div_ceil(64);
        RrSet {
            words: vec![0; words],
            summary: vec![0; words.div_ceil(64)],
            len: 0,
            ptr: None,
            last: None,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[cfg(test)]
    pub(crate) fn contains(&self, r: u32) -> bool {
        let (w, b) = (r as usize / 64, r % 64);
        self.words.get(w).is_some_and(|x| x & (1 << b) != 0)
    }

    pub(crate) fn insert(&mut self, r: u32) {
        let (w, b) = (r as usize / 64, r % 64);
        if let Some(x) = self.words.get_mut(w) {
            if *x & (1 << b) == 0 {
                *x |= 1 << b;
                self.len += 1;
                self.summary[w / 64] |= 1 << (w % 64);
            }
        }
    }

    pub(crate) fn remove(&mut self, r: u32) {
        let (w, b) = (r as usize / 64, r % 64);
        if let Some(x) = self.words.get_mut(w) {
            if *x & (1 << b) != 0 {
                *x &= !(1 << b);
                self.len -= 1;
                if *x == 0 {
                    self.summary[w / 64] &= !(1 << (w % 64));
                }
            }
        }
    }

    /// The smallest member ≥ `r`.
    pub(crate) fn at_or_after(&self, r: u32) -> Option<u32> {
        let w = r as usize / 64;
        let here = *self.words.get(w)? & (!0u64 << (r % 64));
        if here != 0 {
            return Some((w * 64) as u32 + here.trailing_zeros());
        }
        let next = w + 1;
        let mut s = next / 64;
        let mut mask = self.summary.get(s)? & (!0u64).checked_shl((next % 64) as u32).unwrap_or(0);
        loop {
            if mask != 0 {
                let w = s * 64 + mask.trailing_zeros() as usize;
                return Some((w * 64) as u32 + self.words[w].trailing_zeros());
            }
            s += 1;
            mask = *self.summary.get(s)?;
        }
    }

    /// The smallest member > `r` (`rb_next`).
    pub(crate) fn after(&self, r: u32) -> Option<u32> {
        self.at_or_after(r.checked_add(1)?)
    }

    /// The smallest member.
    pub(crate) fn first(&self) -> Option<u32> {
        self.at_or_after(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    proptest! {
        /// The bitset answers as an ordered set does, across word and summary boundaries.
        #[test]
        fn behaves_as_an_ordered_set(ops in proptest::collection::vec((0u32..5000, any::<bool>()), 1..400),
                                     probes in proptest::collection::vec(0u32..5100, 1..50)) {
            let mut s = RrSet::new(5000);
            let mut b = BTreeSet::new();
            for (r, add) in ops {
                if add { s.insert(r); b.insert(r); } else { s.remove(r); b.remove(&r); }
            }
            prop_assert_eq!(s.is_empty(), b.is_empty());
            prop_assert_eq!(s.first(), b.iter().next().copied());
            for p in probes {
                prop_assert_eq!(s.at_or_after(p), b.range(p..).next().copied());
                prop_assert_eq!(s.after(p), b.range(p + 1..).next().copied());
                prop_assert_eq!(s.contains(p), b.contains(&p));
            }
        }
    }
}
