//! What goes on the air: frames as the driver holds them (with their airtime estimate, tries
//! and block-ack sequence number), aggregates (A-MPDUs of one TID), the receiver's block-ack
//! reorder buffer, and the sizes and times of MPDUs, A-MPDUs and (block) ACKs.

use super::*;
pub(super) struct HwFrame {
    pub(super) pkt: SimPacket,
    pub(super) est: u32,
    pub(super) tries: u8,
    /// Sequence number per station and direction (the block-ack session's).
    pub(super) seq: u64,
}

/// The receiver's block-ack reorder buffer: frames go up in sequence order; a frame the sender
/// gave up on leaves a hole that is skipped.
#[derive(Default)]
pub(super) struct Reorder {
    pub(super) next: u64,
    pub(super) held: std::collections::BTreeMap<u64, Option<SimPacket>>,
}

impl Reorder {
    pub(super) fn receive(&mut self, seq: u64, p: Option<SimPacket>, out: &mut Vec<SimPacket>) {
        if seq != self.next {
            self.held.insert(seq, p);
            return;
        }
        out.extend(p);
        self.next += 1;
        while let Some(p) = self.held.remove(&self.next) {
            out.extend(p);
            self.next += 1;
        }
    }
}

/// A built transmission (an A-MPDU, or single MPDUs) waiting for (or in) its TXOP.
pub(super) struct Aggregate {
    pub(super) sta: usize,
    pub(super) ac: Ac,
    /// Every frame of an A-MPDU belongs to one TID (its block-ack session).
    pub(super) tid: u8,
    pub(super) frames: Vec<HwFrame>,
}

pub(super) fn mpdu_len(frame: u32) -> u32 {
    frame.saturating_sub(14) + 38
}

pub(super) fn ampdu_sub_len(frame: u32) -> u32 {
    (mpdu_len(frame) + 4).div_ceil(4) * 4
}

/// The ACK or block-ACK rate for data at `rate`: the highest basic rate not above it.
pub(super) fn ack_ns(rate: PhyRate, block: bool) -> u64 {
    let basic = match rate {
        PhyRate::Legacy { bitrate } if bitrate < 60 => bitrate,
        PhyRate::Legacy { bitrate } if bitrate < 120 => 60,
        PhyRate::Legacy { bitrate } if bitrate < 240 => 120,
        PhyRate::Legacy { .. } => 240,
        PhyRate::Mcs { .. } => 240,
    };
    PhyRate::Legacy { bitrate: basic }.ppdu_ns(if block { 32 } else { 14 })
}

/// Does this category aggregate at this rate? (Not at legacy rates; not voice.)
pub(super) fn aggregates(rate: PhyRate, ac: Ac) -> bool {
    !rate.is_legacy() && ac != Ac::Vo
}

/// Air time of a transmission of these frames (Ethernet lengths): one A-MPDU + SIFS + block
/// ACK, or single MPDUs each + SIFS + ACK, SIFS-separated.
pub(super) fn txop_ns(rate: PhyRate, ac: Ac, lens: impl Iterator<Item = u32>) -> u64 {
    if aggregates(rate, ac) {
        let bytes: u32 = lens.map(ampdu_sub_len).sum();
        rate.ppdu_ns(bytes) + SIFS_NS + ack_ns(rate, true)
    } else {
        let mut t = 0;
        for (i, l) in lens.enumerate() {
            if i > 0 {
                t += SIFS_NS;
            }
            t += rate.ppdu_ns(mpdu_len(l)) + SIFS_NS + ack_ns(rate, false);
        }
        t
    }
}

pub(super) fn idx(sta: usize, ac: Ac) -> usize {
    sta * N_AC + ac.idx()
}

pub(super) fn tidx(sta: usize, tid: u8) -> usize {
    sta * N_TID + usize::from(tid & 7)
}

/// A category's two TIDs (mac80211's `ieee802_1d_to_ac` backwards).
pub(super) fn tids(ac: Ac) -> [u8; 2] {
    match ac {
        Ac::Bk => [1, 2],
        Ac::Be => [0, 3],
        Ac::Vi => [4, 5],
        Ac::Vo => [6, 7],
    }
}

/// Of a category's two TIDs, the first in turn (from `rr`) for which `has` holds; advances
/// `rr` past it. None if neither.
pub(super) fn next_tid(rr: &mut u8, ac: Ac, has: impl Fn(u8) -> bool) -> Option<u8> {
    let t = tids(ac);
    for k in 0..2 {
        let i = (usize::from(*rr) + k) % 2;
        if has(t[i]) {
            *rr = ((i + 1) % 2) as u8;
            return Some(t[i]);
        }
    }
    None
}

impl WifiConfig {
    /// The TID (802.1D user priority) a packet goes to: cfg80211's DSCP mapping, or 0
    /// without WMM.
    pub(super) fn tid_of(&self, p: &SimPacket) -> u8 {
        if self.wmm {
            debloat_core::airtime::ac::user_priority(p.meta.dscp)
        } else {
            0
        }
    }

    /// The access category a packet goes to.
    pub(super) fn ac_of(&self, p: &SimPacket) -> Ac {
        Ac::of_priority(self.tid_of(p))
    }
}
