//! What the link serialises for a packet: its length plus link-layer framing.
//!
//! Two vocabularies describe the same thing, and both are kept because users know them:
//! netem's `rate RATE [PACKETOVERHEAD [CELLSIZE [CELLOVERHEAD]]]` ([`Framing`], the gateway's
//! and replay's `--emulate`/`--impair` words) and CAKE's overhead keywords (`atm`, `ptm`,
//! `docsis`, `pppoe-vcmux`…, [`Overhead`], the simulator's `--framing`). [`LinkLayer`] holds
//! either, and the link asks it for one number: the bytes on the wire.

use crate::link::overhead::{Overhead, SizeStats};
use crate::packet::PacketMeta;

/// What a link adds to each packet before serialising it, as netem's
/// `rate RATE [PACKETOVERHEAD [CELLSIZE [CELLOVERHEAD]]]` (`packet_time_ns` in sch_netem.c):
/// `overhead` bytes per packet (may be negative), then, with a cell size, the length rounded up
/// to whole cells of `cell_size + cell_overhead` bytes (ATM-like links).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Framing {
    /// Bytes added to (or, negative, taken from) every packet.
    pub overhead: i32,
    /// Cell size in bytes (0: no cells).
    pub cell_size: u32,
    /// Bytes added to every cell.
    pub cell_overhead: i32,
}

impl Framing {
    /// The bytes the link serialises for a packet of `len` bytes. Deviation: netem's unsigned
    /// arithmetic wraps when a negative overhead exceeds the packet; here it stops at zero.
    pub fn wire_len(&self, len: u32) -> u64 {
        let len = (i64::from(len) + i64::from(self.overhead)).max(0) as u64;
        if self.cell_size == 0 {
            return len;
        }
        let cells = len.div_ceil(u64::from(self.cell_size));
        let cell = (i64::from(self.cell_size) + i64::from(self.cell_overhead)).max(0) as u64;
        cells * cell
    }
}

/// The link layer below the IP packet, in either vocabulary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkLayer {
    /// netem's per-packet and per-cell overhead.
    Netem(Framing),
    /// CAKE's overhead model (strip the L2 header, add `overhead`, `mpu`, ATM or PTM cells),
    /// used here to describe the real link rather than to pace a shaper.
    Cake(Overhead),
}

impl Default for LinkLayer {
    fn default() -> Self {
        LinkLayer::Netem(Framing::default())
    }
}

impl LinkLayer {
    /// Bytes the link serialises for this packet.
    pub fn wire_len(&self, meta: &PacketMeta) -> u64 {
        match self {
            LinkLayer::Netem(f) => f.wire_len(meta.len),
            LinkLayer::Cake(o) if *o == Overhead::default() => u64::from(meta.len),
            LinkLayer::Cake(o) => u64::from(o.calc(
                meta.len,
                u32::from(meta.network_offset),
                &mut SizeStats::default(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::FlowKey;
    use crate::link::overhead::AtmMode;

    #[test]
    fn framing_adds_overhead_and_rounds_up_to_cells() {
        let none = Framing::default();
        assert_eq!(none.wire_len(1000), 1000);
        let eth = Framing {
            overhead: 24,
            ..Framing::default()
        };
        assert_eq!(eth.wire_len(1000), 1024);
        // ATM: 1000 + 10 = 1010 bytes take 22 cells of 48, each sent as 53 bytes.
        let atm = Framing {
            overhead: 10,
            cell_size: 48,
            cell_overhead: 5,
        };
        assert_eq!(atm.wire_len(1000), 22 * 53);
        assert_eq!(atm.wire_len(38), 53, "exactly one cell");
        assert_eq!(atm.wire_len(39), 2 * 53, "one byte over: a second cell");
        let shrink = Framing {
            overhead: -2000,
            ..Framing::default()
        };
        assert_eq!(shrink.wire_len(100), 0);
    }

    #[test]
    fn cakes_words_strip_the_mac_header_and_count_cells() {
        let flow = FlowKey::ip(
            "198.18.0.1".parse().expect("v4"),
            "198.18.1.1".parse().expect("v4"),
            1,
            2,
            6,
        );
        let mut meta = PacketMeta::new(1514, flow);
        meta.network_offset = 14;
        assert_eq!(LinkLayer::default().wire_len(&meta), 1514);
        let atm = Overhead {
            strip_l2: true,
            overhead: 10,
            mpu: 0,
            atm: AtmMode::Atm,
        };
        // 1500 + 10 = 1510 bytes: 32 cells of 53.
        assert_eq!(LinkLayer::Cake(atm).wire_len(&meta), 32 * 53);
    }
}
