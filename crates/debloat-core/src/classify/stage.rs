//! The classify stage: what runs on a packet as it enters a path, before the discipline
//! (classify → discipline → device → link). qosify's marking ([`super::qosify::Classifier`])
//! is one; a circuit classifier or a test's own stage are others. The simulator, replay and
//! the gateway all hand their stage to [`crate::path::DataPath::arrive_classified`], so a stage
//! is written once and every driver runs it the same way, in the same place.

use super::LinkType;
use crate::packet::{Nanos, PacketMeta};
use crate::Direction;
use core::any::Any;

/// What the stage decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum Admit {
    /// On to the discipline (with the metadata as the stage left it).
    Pass,
    /// Dropped here: counted as the path's ([`crate::path::PathDrop::Classify`]).
    Drop,
}

/// A stage in front of the discipline. Linux's equivalents: a tc filter or an eBPF classifier
/// on the qdisc (qosify's is one), an `iptables -j DSCP` rule.
pub trait Classify: Send + Any {
    /// The packet's bytes, when the driver has them (the gateway's frames, a pcap being
    /// replayed): a stage that learns from traffic (qosify's DNS snooping) reads them here.
    /// Called before [`Classify::classify`]; the default ignores them.
    fn snoop(&mut self, frame: &[u8], link: LinkType, meta: &PacketMeta, now: Nanos) {
        let _ = (frame, link, meta, now);
    }

    /// Look at (and perhaps rewrite: DSCP, which selects a tin) the packet entering the path
    /// going `dir` at `now`.
    fn classify(&mut self, meta: &mut PacketMeta, dir: Direction, now: Nanos) -> Admit;

    /// The stage as `Any`, so a driver can show its own kind's statistics.
    fn as_any(&self) -> &dyn Any;
}

impl Classify for super::qosify::Classifier {
    fn snoop(&mut self, frame: &[u8], link: LinkType, meta: &PacketMeta, now: Nanos) {
        super::qosify::Classifier::snoop(self, frame, link, &meta.flow, now);
    }

    fn classify(&mut self, meta: &mut PacketMeta, dir: Direction, now: Nanos) -> Admit {
        self.mark(meta, dir, now);
        Admit::Pass
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
