//! HTB's scheduler state without the packets (sch_htb.c's `htb_sched` minus the queues): the
//! classes, each level's rows and event queue, and the moves between them — a class's mode
//! changing as its tokens run out or refill (`htb_change_class_mode`), a leaf joining and
//! leaving the rows and its ancestors' feeds (`htb_activate_prios`/`htb_deactivate_prios`),
//! charging a sent packet up the tree (`htb_charge_class`), the due mode changes
//! (`htb_do_events`) and the deficit round robin's walk from a row down to a leaf
//! (`htb_lookup_leaf`). Each follows the kernel's function step for step; where it differs is
//! said at the place.

use super::class::{Class, Mode, MAXDEPTH, NUMPRIO};
use super::rr::RrSet;
use super::wait::WaitQueue;
use crate::packet::Nanos;

/// Which round-robin set: a level's row for a priority, or an inner class's feed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Set {
    Row(usize, usize),
    Feed(u32, usize),
}

#[derive(Debug, Default)]
pub(crate) struct Tree {
    pub(crate) classes: Vec<Class>,
    /// Per level, the classes of that level by classid (a row's rank → class).
    level_members: [Vec<u32>; MAXDEPTH],
    /// Per level and priority, the classes that can send (`hlevel[l].hprio[p].row`).
    rows: [[RrSet; NUMPRIO]; MAXDEPTH],
    /// Per level, a bit per priority whose row is not empty.
    pub(crate) row_mask: [u8; MAXDEPTH],
    wait: [WaitQueue; MAXDEPTH],
    /// Per level, the earliest event time (`near_ev_cache`).
    near_ev: [Nanos; MAXDEPTH],
    /// The time of the dequeue being served (`q->now`).
    pub(crate) now: Nanos,
    /// Changes into `CantSend`, all classes.
    pub(crate) overlimits: u64,
}

impl Tree {
    /// The tree over `classes`, whose levels, parents and ranks are set.
    pub(crate) fn new(classes: Vec<Class>) -> Tree {
        let mut t = Tree {
            classes,
            ..Tree::default()
        };
        for (i, c) in t.classes.iter().enumerate() {
            t.level_members[c.level as usize].push(i as u32);
        }
        for l in 0..MAXDEPTH {
            let ids: Vec<u32> = t.level_members[l].clone();
            let mut by_id = ids;
            by_id.sort_by_key(|&i| t.classes[i as usize].id);
            for (rank, &i) in by_id.iter().enumerate() {
                t.classes[i as usize].row_rank = rank as u32;
            }
            let n = by_id.len();
            t.level_members[l] = by_id;
            t.rows[l] = std::array::from_fn(|_| RrSet::new(n));
            t.wait[l] = WaitQueue::new(n);
        }
        t
    }

    fn set(&mut self, s: Set) -> &mut RrSet {
        match s {
            Set::Row(l, p) => &mut self.rows[l][p],
            Set::Feed(c, p) => match &mut self.classes[c as usize].inner {
                Some(inner) => &mut inner.feed[p],
                None => &mut self.rows[0][p], // unreachable: feeds belong to inner classes
            },
        }
    }

    fn member(&self, s: Set, rank: u32) -> u32 {
        match s {
            Set::Row(l, _) => self.level_members[l][rank as usize],
            Set::Feed(c, _) => match &self.classes[c as usize].inner {
                Some(inner) => inner.children[rank as usize],
                None => u32::MAX,
            },
        }
    }

    /// `htb_activate`: a leaf that has packets joins its priority.
    pub(crate) fn activate(&mut self, c: u32) {
        let cl = &mut self.classes[c as usize];
        if cl.prio_activity == 0 {
            cl.prio_activity = 1 << cl.prio;
            self.activate_prios(c);
        }
    }

    /// `htb_deactivate`: a leaf with no packets leaves.
    pub(crate) fn deactivate(&mut self, c: u32) {
        self.deactivate_prios(c);
        self.classes[c as usize].prio_activity = 0;
    }

    /// `htb_activate_prios`: into the parents' feeds while borrowing, into its row if it can
    /// send.
    fn activate_prios(&mut self, c: u32) {
        let mut cl = c;
        let mut mask = self.classes[c as usize].prio_activity;
        while let (Mode::MayBorrow, Some(p), true) = (
            self.classes[cl as usize].mode,
            self.classes[cl as usize].parent,
            mask != 0,
        ) {
            let rank = self.classes[cl as usize].sib_rank;
            let mut m = mask;
            while m != 0 {
                let prio = m.trailing_zeros() as usize;
                m &= !(1 << prio);
                let feed = self.set(Set::Feed(p, prio));
                if !feed.is_empty() {
                    mask &= !(1 << prio); // the parent is already active there
                }
                feed.insert(rank);
            }
            self.classes[p as usize].prio_activity |= mask;
            cl = p;
        }
        if self.classes[cl as usize].mode == Mode::CanSend && mask != 0 {
            let (level, rank) = (
                self.classes[cl as usize].level as usize,
                self.classes[cl as usize].row_rank,
            );
            self.row_mask[level] |= mask;
            let mut m = mask;
            while m != 0 {
                let prio = m.trailing_zeros() as usize;
                m &= !(1 << prio);
                self.rows[level][prio].insert(rank);
            }
        }
    }

    /// `htb_deactivate_prios`: out of the feeds and the row; a feed that empties takes its
    /// parent out in turn. A feed whose turn was the leaving class remembers its rank.
    fn deactivate_prios(&mut self, c: u32) {
        let mut cl = c;
        let mut mask = self.classes[c as usize].prio_activity;
        while let (Mode::MayBorrow, Some(p), true) = (
            self.classes[cl as usize].mode,
            self.classes[cl as usize].parent,
            mask != 0,
        ) {
            let rank = self.classes[cl as usize].sib_rank;
            let mut m = mask;
            mask = 0;
            while m != 0 {
                let prio = m.trailing_zeros() as usize;
                m &= !(1 << prio);
                let feed = self.set(Set::Feed(p, prio));
                if feed.ptr == Some(rank) {
                    feed.last = Some(rank);
                    feed.ptr = None;
                }
                feed.remove(rank);
                if feed.is_empty() {
                    mask |= 1 << prio;
                }
            }
            self.classes[p as usize].prio_activity &= !mask;
            cl = p;
        }
        if self.classes[cl as usize].mode == Mode::CanSend && mask != 0 {
            self.remove_from_row(cl, mask);
        }
    }

    /// `htb_remove_class_from_row`: a row whose turn was this class passes it on.
    fn remove_from_row(&mut self, c: u32, mut mask: u8) {
        let (level, rank) = (
            self.classes[c as usize].level as usize,
            self.classes[c as usize].row_rank,
        );
        let mut emptied = 0u8;
        while mask != 0 {
            let prio = mask.trailing_zeros() as usize;
            mask &= !(1 << prio);
            let row = &mut self.rows[level][prio];
            if row.ptr == Some(rank) {
                row.ptr = row.after(rank);
            }
            row.remove(rank);
            if row.is_empty() {
                emptied |= 1 << prio;
            }
        }
        self.row_mask[level] &= !emptied;
    }

    /// `htb_change_class_mode`.
    fn change_mode(&mut self, c: u32, diff: &mut i64) {
        let cl = &mut self.classes[c as usize];
        let new = cl.mode_after(diff);
        if new == cl.mode {
            return;
        }
        if new == Mode::CantSend {
            cl.counters.overlimits += 1;
            self.overlimits += 1;
        }
        if cl.prio_activity != 0 {
            if cl.mode != Mode::CantSend {
                self.deactivate_prios(c);
            }
            self.classes[c as usize].mode = new;
            if new != Mode::CantSend {
                self.activate_prios(c);
            }
        } else {
            cl.mode = new;
        }
    }

    /// A class given carried-over buckets (a reshaped tree): its mode at `now` from them, and
    /// into the wait queue when that is not `CanSend`. Called before any class is active.
    pub(crate) fn restore_mode(&mut self, c: u32) {
        let cl = &mut self.classes[c as usize];
        let mut diff = cl.since_charge(self.now);
        cl.mode = cl.mode_after(&mut diff);
        if cl.mode != Mode::CanSend {
            self.add_to_wait(c, diff);
        }
    }

    /// A class whose buckets changed in place (run at other rates): its mode at `now` from
    /// them, and its event moved to when that mode next changes (`htb_charge_class`'s steps,
    /// with nothing charged).
    pub(crate) fn remode(&mut self, c: u32) {
        let old = self.classes[c as usize].mode;
        let mut diff = self.classes[c as usize].since_charge(self.now);
        self.change_mode(c, &mut diff);
        let cl = &self.classes[c as usize];
        if old != Mode::CanSend {
            self.wait[cl.level as usize].remove(cl.row_rank);
        }
        if cl.mode != Mode::CanSend {
            self.add_to_wait(c, diff);
        }
    }

    /// `htb_add_to_wait_tree`: the class changes mode in `delay` ns.
    fn add_to_wait(&mut self, c: u32, delay: i64) {
        let cl = &self.classes[c as usize];
        let level = cl.level as usize;
        let mut key = self.now.saturating_add(delay.max(0) as u64);
        if key == self.now {
            key += 1;
        }
        self.near_ev[level] = self.near_ev[level].min(key);
        self.wait[level].push(cl.row_rank, key);
    }

    /// `htb_charge_class`: a packet of `bytes` left `c`, served from a row of `level`: the
    /// classes below that level borrowed it, the one at it lent it.
    pub(crate) fn charge(&mut self, c: u32, level: u8, bytes: u32) {
        let mut at = Some(c);
        while let Some(i) = at {
            let now = self.now;
            let cl = &mut self.classes[i as usize];
            let diff = cl.since_charge(now);
            if cl.level >= level {
                if cl.level == level {
                    cl.counters.lends += 1;
                }
                cl.charge_rate(bytes, diff);
            } else {
                cl.counters.borrows += 1;
                cl.tokens += diff; // t_c moves on: keep the rate tokens' refill
            }
            cl.charge_ceil(bytes, diff);
            cl.t_c = now;
            let old = cl.mode;
            let mut d = 0;
            self.change_mode(i, &mut d);
            let cl = &self.classes[i as usize];
            if old != cl.mode {
                if old != Mode::CanSend {
                    self.wait[cl.level as usize].remove(cl.row_rank);
                }
                if cl.mode != Mode::CanSend {
                    self.add_to_wait(i, d);
                }
            }
            let cl = &mut self.classes[i as usize];
            if cl.level > 0 {
                cl.counters.bytes += u64::from(bytes);
                cl.counters.packets += 1;
            }
            at = cl.parent;
        }
    }

    /// `htb_do_events`: the mode changes due at a level; the next one's time, 0 for none.
    /// Linux stops after two jiffies of work and warns; here every due change is made.
    fn do_events(&mut self, level: usize) -> Nanos {
        loop {
            let Some((key, rank)) = self.wait[level].peek() else {
                return 0;
            };
            if key > self.now {
                return key;
            }
            self.wait[level].remove(rank);
            let c = self.level_members[level][rank as usize];
            let mut diff = self.classes[c as usize].since_charge(self.now);
            self.change_mode(c, &mut diff);
            if self.classes[c as usize].mode != Mode::CanSend {
                self.add_to_wait(c, diff);
            }
        }
    }

    /// The events of `level` due by now made; the time of its next one (`htb_dequeue`'s
    /// use of `near_ev_cache`: one second on when none is waiting).
    pub(crate) fn events(&mut self, level: usize) -> Nanos {
        if self.now >= self.near_ev[level] {
            let mut event = self.do_events(level);
            if event == 0 {
                event = self.now + 1_000_000_000;
            }
            self.near_ev[level] = event;
        }
        self.near_ev[level]
    }

    /// `htb_lookup_leaf`: from the row's turn down the feeds' turns to a leaf. A feed at its
    /// end rewinds and moves its parent's turn on.
    pub(crate) fn lookup_leaf(&mut self, prio: usize, level: usize) -> Option<u32> {
        let mut stack = [Set::Row(level, prio); MAXDEPTH];
        let mut sp = 0usize;
        for _ in 0..65535 {
            let s = self.set(stack[sp]);
            if s.ptr.is_none() {
                if let Some(last) = s.last {
                    s.ptr = s.at_or_after(last);
                }
            }
            s.last = None;
            match s.ptr {
                None => {
                    s.ptr = Some(s.first()?);
                    if sp > 0 {
                        sp -= 1;
                        let up = self.set(stack[sp]);
                        let here = up.ptr?;
                        up.ptr = up.after(here);
                    }
                }
                Some(rank) => {
                    let c = self.member(stack[sp], rank);
                    let cl = self.classes.get(c as usize)?;
                    if cl.level == 0 {
                        return Some(c);
                    }
                    sp = (sp + 1).min(MAXDEPTH - 1);
                    stack[sp] = Set::Feed(c, prio);
                }
            }
        }
        None
    }

    /// `htb_next_rb_node` on the set a leaf served from `level` was found in: its turn ends.
    pub(crate) fn next_turn(&mut self, c: u32, level: usize, prio: usize) {
        let set = match (level, self.classes[c as usize].parent) {
            (0, _) | (_, None) => Set::Row(0, prio),
            (_, Some(p)) => Set::Feed(p, prio),
        };
        let s = self.set(set);
        if let Some(r) = s.ptr {
            s.ptr = s.after(r);
        }
    }
}
