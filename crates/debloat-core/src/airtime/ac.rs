//! 802.11 access categories: which one a packet goes to (DSCP → user priority → AC, as
//! cfg80211 classifies frames) and the EDCA parameters each contends with.
//!
//! EDCA gives the four categories different odds on the shared channel: a shorter AIFS (the idle
//! wait before counting down), a smaller contention window and, for video and voice, a TXOP of
//! several frames. Voice and video therefore usually get the channel first; background waits
//! longest.

use crate::packet::Nanos;

/// An access category, lowest priority first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum Ac {
    /// Background (user priorities 1, 2).
    Bk = 0,
    /// Best effort (user priorities 0, 3).
    Be = 1,
    /// Video (user priorities 4, 5).
    Vi = 2,
    /// Voice (user priorities 6, 7).
    Vo = 3,
}

/// All four, lowest priority first.
pub const ALL: [Ac; 4] = [Ac::Bk, Ac::Be, Ac::Vi, Ac::Vo];

impl Ac {
    /// The category of an 802.1D user priority (TID 0–7): 1, 2 → BK; 0, 3 → BE; 4, 5 → VI;
    /// 6, 7 → VO (mac80211's `ieee802_1d_to_ac`).
    pub fn of_priority(up: u8) -> Ac {
        match up & 7 {
            1 | 2 => Ac::Bk,
            0 | 3 => Ac::Be,
            4 | 5 => Ac::Vi,
            _ => Ac::Vo,
        }
    }

    /// The category of a packet with this DSCP (the 6-bit code point, not the TOS byte).
    pub fn of_dscp(dscp: u8) -> Ac {
        Ac::of_priority(user_priority(dscp))
    }

    /// Index 0–3 (BK, BE, VI, VO).
    pub fn idx(self) -> usize {
        self as usize
    }

    /// Short name as iw and tc print it.
    pub fn name(self) -> &'static str {
        match self {
            Ac::Bk => "BK",
            Ac::Be => "BE",
            Ac::Vi => "VI",
            Ac::Vo => "VO",
        }
    }
}

/// The 802.1D user priority (TID) cfg80211 gives a DSCP: its class-selector bits (DSCP >> 3),
/// except where RFC 8325 §4.3 says otherwise — CS2 (network management), AF1x (high-throughput
/// data) → 0; AF2x (low-latency data) → 3; CS3 (broadcast video), AF3x (multimedia streaming)
/// → 4; voice-admit and EF → 6.
pub fn user_priority(dscp: u8) -> u8 {
    match dscp & 0x3f {
        16 | 10 | 12 | 14 => 0,
        18 | 20 | 22 => 3,
        24 | 26 | 28 | 30 => 4,
        44 | 46 => 6,
        d => d >> 3,
    }
}

/// One category's contention parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Edca {
    /// Slots after SIFS before the backoff counts down (AIFS = SIFS + AIFSN × slot).
    pub aifsn: u32,
    /// Contention window after a success.
    pub cw_min: u32,
    /// Largest contention window.
    pub cw_max: u32,
    /// TXOP limit, ns (0: one frame or aggregate per access).
    pub txop_ns: Nanos,
}

impl Edca {
    /// The default EDCA parameter set a non-AP station uses (IEEE 802.11-2016 Table 9-155 for
    /// OFDM/HT PHYs, aCWmin 15, aCWmax 1023): BK 7/15/1023, BE 3/15/1023, VI 2/7/15 with a
    /// 3.008 ms TXOP, VO 2/3/7 with 1.504 ms.
    pub fn station(ac: Ac) -> Edca {
        match ac {
            Ac::Bk => Edca::new(7, 15, 1023, 0),
            Ac::Be => Edca::new(3, 15, 1023, 0),
            Ac::Vi => Edca::new(2, 7, 15, 3_008_000),
            Ac::Vo => Edca::new(2, 3, 7, 1_504_000),
        }
    }

    /// The access point's own queues as hostapd sets them by default (`tx_queue_data0..3`):
    /// VO 1/3/7 with 1.5 ms, VI 1/7/15 with 3.0 ms, BE 3/15/63, BK 7/15/1023.
    pub fn access_point(ac: Ac) -> Edca {
        match ac {
            Ac::Bk => Edca::new(7, 15, 1023, 0),
            Ac::Be => Edca::new(3, 15, 63, 0),
            Ac::Vi => Edca::new(1, 7, 15, 3_008_000),
            Ac::Vo => Edca::new(1, 3, 7, 1_504_000),
        }
    }

    const fn new(aifsn: u32, cw_min: u32, cw_max: u32, txop_ns: Nanos) -> Edca {
        Edca {
            aifsn,
            cw_min,
            cw_max,
            txop_ns,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rrul_markings_land_in_the_four_categories() {
        // rrul's four classes: CS0 (best effort), CS1 (bulk), CS5, EF.
        assert_eq!(Ac::of_dscp(0), Ac::Be);
        assert_eq!(Ac::of_dscp(8), Ac::Bk);
        assert_eq!(Ac::of_dscp(40), Ac::Vi);
        assert_eq!(Ac::of_dscp(46), Ac::Vo);
        // RFC 8325 exceptions to the class-selector rule.
        assert_eq!(user_priority(18), 3, "AF21 is low-latency data, BE");
        assert_eq!(user_priority(16), 0, "CS2");
        assert_eq!(user_priority(26), 4, "AF31");
        assert_eq!(user_priority(34), 4, "AF41 keeps its class bits");
        assert_eq!(user_priority(56), 7, "CS7");
        assert_eq!(Ac::of_priority(2), Ac::Bk);
        assert_eq!(Ac::of_priority(3), Ac::Be);
        assert_eq!(Ac::of_priority(7), Ac::Vo);
    }

    #[test]
    fn voice_contends_hardest_and_background_least() {
        for table in [Edca::station, Edca::access_point] {
            let (bk, be, vi, vo) = (table(Ac::Bk), table(Ac::Be), table(Ac::Vi), table(Ac::Vo));
            assert!(vo.aifsn <= vi.aifsn && vi.aifsn < be.aifsn && be.aifsn < bk.aifsn);
            assert!(vo.cw_max < vi.cw_max && vi.cw_max < be.cw_max.max(64));
            assert_eq!(be.txop_ns, 0);
            assert_eq!(vo.txop_ns, 1_504_000);
        }
    }
}
