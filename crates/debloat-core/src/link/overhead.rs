//! Link-layer overhead compensation (`cake_calc_overhead`, `cake_overhead`): what a packet costs
//! on the wire below the IP layer — framing bytes, a minimum packet unit, ATM cells or PTM's
//! 64b/65b coding — so the shaper paces the real bottleneck, not the Ethernet frame.

use serde::Serialize;

/// Cell framing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AtmMode {
    /// No cell framing.
    #[default]
    None,
    /// ATM: 48-byte payload per 53-byte cell.
    Atm,
    /// PTM (VDSL2): one byte per 64 or part thereof.
    Ptm,
}

/// The overhead model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Overhead {
    /// Strip the L2 header first (set by any overhead keyword; cleared by `raw`).
    pub strip_l2: bool,
    /// Bytes added per packet (may be negative).
    pub overhead: i32,
    /// Minimum packet unit after adding overhead.
    pub mpu: u32,
    /// Cell framing.
    pub atm: AtmMode,
}

/// Sizes seen, for `tc -s` (min/max network-layer and overhead-adjusted sizes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SizeStats {
    /// Smallest network-layer length.
    pub min_netlen: u32,
    /// Largest network-layer length.
    pub max_netlen: u32,
    /// Smallest adjusted length.
    pub min_adjlen: u32,
    /// Largest adjusted length.
    pub max_adjlen: u32,
    /// EWMA of the network offset, << 16.
    pub avg_netoff: u32,
}

impl Default for SizeStats {
    fn default() -> Self {
        SizeStats {
            min_netlen: u32::from(u16::MAX),
            max_netlen: 0,
            min_adjlen: u32::from(u16::MAX),
            max_adjlen: 0,
            avg_netoff: 0,
        }
    }
}

impl Overhead {
    /// Adjusted length of one packet of `len` bytes with L2 header `off`.
    #[inline(always)]
    pub fn calc(&self, len: u32, off: u32, s: &mut SizeStats) -> u32 {
        let mut len = len;
        if self.strip_l2 {
            len = len.saturating_sub(off);
        }
        s.max_netlen = s.max_netlen.max(len);
        s.min_netlen = s.min_netlen.min(len);
        let mut len = (i64::from(len) + i64::from(self.overhead)).max(0) as u32;
        len = len.max(self.mpu);
        match self.atm {
            AtmMode::Atm => len = len.div_ceil(48) * 53,
            AtmMode::Ptm => len += len.div_ceil(64),
            AtmMode::None => {}
        }
        s.max_adjlen = s.max_adjlen.max(len);
        s.min_adjlen = s.min_adjlen.min(len);
        len
    }

    /// Adjusted length of a packet, GSO super-packets charged per segment.
    #[inline(always)]
    pub fn adjusted_len(&self, m: &crate::packet::PacketMeta, s: &mut SizeStats) -> u32 {
        let off = u32::from(m.network_offset);
        s.avg_netoff = ewma(s.avg_netoff, off << 16, 8);
        if m.gso_segs <= 1 || m.gso_size == 0 {
            return self.calc(m.len, off, s);
        }
        let segs = u32::from(m.gso_segs);
        let seg_len = u32::from(m.gso_size) + u32::from(m.hdr_len);
        let last_len = m.len.saturating_sub(u32::from(m.gso_size) * (segs - 1));
        self.calc(seg_len, off, s) * (segs - 1) + self.calc(last_len, off, s)
    }
}

/// CAKE's EWMA: `avg -= avg >> shift; avg += sample >> shift`.
pub fn ewma(avg: u32, sample: u32, shift: u32) -> u32 {
    avg - (avg >> shift) + (sample >> shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adj(o: Overhead, ip_len: u32) -> u32 {
        o.calc(ip_len + 14, 14, &mut SizeStats::default())
    }

    #[test]
    fn worked_examples_from_the_kernel() {
        let atm = Overhead {
            strip_l2: true,
            overhead: 32,
            mpu: 0,
            atm: AtmMode::Atm,
        };
        assert_eq!(adj(atm, 1500), 1696, "pppoe-vcmux");
        let ptm = Overhead {
            strip_l2: true,
            overhead: 30,
            mpu: 0,
            atm: AtmMode::Ptm,
        };
        assert_eq!(adj(ptm, 1500), 1554, "pppoe-ptm");
        let eth = Overhead {
            strip_l2: true,
            overhead: 38,
            mpu: 84,
            atm: AtmMode::None,
        };
        assert_eq!(adj(eth, 1500), 1538, "ethernet");
        assert_eq!(adj(eth, 40), 84, "ethernet mpu on a bare ACK");
        let docsis = Overhead {
            strip_l2: true,
            overhead: 18,
            mpu: 64,
            atm: AtmMode::None,
        };
        assert_eq!(adj(docsis, 1500), 1518, "docsis");
        assert_eq!(
            adj(Overhead::default(), 1500),
            1514,
            "raw charges the frame"
        );
    }
}
