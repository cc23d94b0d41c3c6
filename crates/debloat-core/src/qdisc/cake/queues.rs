//! A tin's flow queues, built on the tin's first packet: the 1024 flows with their COBALT
//! state, their backlogs, the set-associative table with its host slots, and the DRR lists —
//! about 95 KB a tin, in one allocation. Linux allocates them for all eight tins when the
//! qdisc is created; a `cake diffserv4` leaf whose subscriber sends only best-effort traffic
//! needs one tin's, and LibreQoS's trees hold thousands of such leaves (docs/circuits.md).
//! Until a tin is built, a read sees one shared set of empty queues, which is what the tin's
//! own would hold; the first write builds them. What is sent, dropped or marked is unchanged.

use super::cobalt;
use super::hash::{self, PerQueue, QUEUES};
use crate::qdisc::list::ListSet;
use crate::qdisc::pktq::Fifo;
use std::sync::OnceLock;

#[derive(Clone, Debug)]
pub(super) struct Flow {
    pub(super) q: Fifo,
    pub(super) deficit: i32,
    pub(super) dropped: u32,
    pub(super) cvars: cobalt::Vars,
}

/// The per-queue state of one tin.
#[derive(Clone, Debug)]
pub(super) struct Queues {
    pub(super) flows: PerQueue<Flow>,
    pub(super) backlogs: PerQueue<u32>,
    pub(super) table: hash::Table,
    pub(super) lists: ListSet<3>,
}

impl Queues {
    fn boxed() -> Box<Self> {
        Box::new(Queues {
            flows: PerQueue::new(Flow {
                q: Fifo::default(),
                deficit: 0,
                dropped: 0,
                cvars: cobalt::Vars::default(),
            }),
            backlogs: PerQueue::new(0),
            table: hash::Table::default(),
            lists: ListSet::new(QUEUES),
        })
    }
}

/// Empty queues, shared by every tin not built yet.
#[cold]
#[inline(never)]
fn empty() -> &'static Queues {
    static EMPTY: OnceLock<Box<Queues>> = OnceLock::new();
    EMPTY.get_or_init(Queues::boxed)
}

/// A tin's queues, built on first write.
#[derive(Clone, Debug, Default)]
pub(super) struct Lazy(Option<Box<Queues>>);

impl Lazy {
    /// Whether the tin's own queues exist.
    pub(super) fn built(&self) -> bool {
        self.0.is_some()
    }

    #[cold]
    #[inline(never)]
    fn build(&mut self) {
        self.0 = Some(Queues::boxed());
    }
}

impl std::ops::Deref for Lazy {
    type Target = Queues;
    #[inline(always)]
    fn deref(&self) -> &Queues {
        match &self.0 {
            Some(q) => q,
            None => empty(),
        }
    }
}

impl std::ops::DerefMut for Lazy {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut Queues {
        if self.0.is_none() {
            self.build();
        }
        match &mut self.0 {
            Some(q) => q,
            None => unreachable!("built above"),
        }
    }
}
