//! What a shaper-rate controller needs of a TCP frame: its connection (one key both ways), its
//! timestamps and ACK number, and when the path saw it. [`crate::path::Path`] logs these as
//! frames enter and leave the discipline; [`crate::autorate`] turns them into round trips.

use debloat_core::flow::FlowKey;
use debloat_core::packet::{Nanos, Packet};
use std::hash::{Hash, Hasher};

/// What a TCP frame told the controller (its connection, TSval, TSecr, ACK number, when).
#[derive(Clone, Copy, Debug)]
pub struct TcpSeen {
    pub(crate) key: u64,
    pub(crate) tsval: u32,
    pub(crate) tsecr: u32,
    pub(crate) ack: u32,
    pub(crate) at: Nanos,
}

/// A connection's key, the same both ways.
fn connection(flow: &FlowKey) -> u64 {
    let h = |k: &FlowKey| {
        // SipHash with fixed keys: the same key on every run, no seeding.
        #[allow(deprecated)]
        let mut s = std::hash::SipHasher::new();
        k.hash(&mut s);
        s.finish()
    };
    let (a, b) = (h(flow), h(&flow.reversed()));
    a.min(b) ^ a.max(b).rotate_left(32)
}

/// A TCP frame with timestamps: what the controller needs of it (None for anything else).
pub fn seen(packet: &impl Packet, at: Nanos) -> Option<(TcpSeen, bool)> {
    let tcp = packet.tcp()?;
    let (tsval, tsecr) = tcp.timestamp?;
    let s = TcpSeen {
        key: connection(&packet.meta().flow),
        tsval,
        tsecr,
        ack: tcp.ack_seq,
        at,
    };
    Some((s, tcp.payload_len > 0))
}
