//! 802.11 PHY rates and airtime: what one frame or one aggregate costs on the air, and the
//! estimate mac80211 charges to AQL before a frame is sent (net/mac80211/airtime.c).
//!
//! Two different numbers live here on purpose:
//! * [`PhyRate::ppdu_ns`] is the *true* duration of a PPDU (preamble + OFDM symbols), which the
//!   simulator's medium uses;
//! * [`expected_tx_airtime_us`] is mac80211's *estimate* (`ieee80211_calc_expected_tx_airtime`),
//!   which only AQL uses. It assumes a per-rate average aggregate size and is deliberately rough.
//!
//! Deviation: mac80211 stores each rate group's 1024-byte durations right-shifted to fit a `u16`
//! (`airtime_mcs_groups[].shift`); we keep the unshifted value. The difference is below 1/1000
//! of the estimate.

use std::fmt;
use std::str::FromStr;

/// Legacy rates in Mbit/s ×10: CCK (802.11b) then OFDM (802.11a/g).
const CCK: [u32; 4] = [10, 20, 55, 110];
const OFDM: [u32; 8] = [60, 90, 120, 180, 240, 360, 480, 540];
/// Data bits per OFDM symbol per stream, HT/VHT MCS 0–9, by channel width (20/40/80 MHz).
const BITS_20: [u32; 10] = [26, 52, 78, 104, 156, 208, 234, 260, 312, 347];
const BITS_40: [u32; 10] = [54, 108, 162, 216, 324, 432, 486, 540, 648, 720];
const BITS_80: [u32; 10] = [117, 234, 351, 468, 702, 936, 1053, 1170, 1404, 1560];

/// A transmit rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PhyRate {
    /// A legacy (non-HT) rate in units of 100 kbit/s, as mac80211's `bitrate` (60 = 6 Mbit/s).
    /// No aggregation.
    Legacy {
        /// Rate in 100 kbit/s.
        bitrate: u32,
    },
    /// HT (802.11n) or VHT (802.11ac): MCS index within its stream count (0–7 for HT, 0–9 for
    /// VHT), spatial streams, channel width and guard interval.
    Mcs {
        /// MCS within one stream's table (HT MCS 13 = index 5 with 2 streams).
        idx: u8,
        /// Spatial streams, 1–4.
        streams: u8,
        /// Channel width in MHz: 20, 40 or 80 (80 only for VHT).
        width: u16,
        /// Short guard interval (3.6 µs symbols instead of 4).
        sgi: bool,
        /// VHT (802.11ac) rather than HT.
        vht: bool,
    },
}

impl PhyRate {
    /// An 802.11n MCS (0–31) at 20 MHz with the long guard interval.
    pub fn ht(mcs: u8) -> PhyRate {
        PhyRate::Mcs {
            idx: mcs % 8,
            streams: mcs / 8 + 1,
            width: 20,
            sgi: false,
            vht: false,
        }
    }

    /// The rate minstrel_ht puts last in a multi-rate retry chain (its `max_prob_rate`) when
    /// this is the best-throughput rate: minstrel_ht takes the most reliable rate from groups
    /// with fewer spatial streams than the best rate's, as a safe last try when the channel
    /// fluctuates (mac80211's `minstrel_ht_update_stats`, "max_prob_rate must use only one
    /// stream"; `minstrel_ht_prob_rate_reduce_streams` in later kernels). Which one-stream rate
    /// depends on the channel; this model takes the one-stream rate with the same modulation,
    /// coding, width and guard interval, which a channel that carries this rate on every
    /// stream also carries on one. A single-stream or legacy rate is its own.
    pub fn minstrel_prob_rate(self) -> PhyRate {
        let mut r = self;
        if let PhyRate::Mcs { streams, .. } = &mut r {
            *streams = 1;
        }
        r
    }

    /// True for legacy rates (no A-MPDU aggregation).
    pub fn is_legacy(self) -> bool {
        matches!(self, PhyRate::Legacy { .. })
    }

    fn is_cck(self) -> bool {
        matches!(self, PhyRate::Legacy { bitrate } if CCK.contains(&bitrate))
    }

    /// Data bits per OFDM symbol, all streams together (legacy: rate × 4 µs).
    fn bits_per_symbol(self) -> u32 {
        match self {
            PhyRate::Legacy { bitrate } => bitrate * 4 / 10,
            PhyRate::Mcs {
                idx,
                streams,
                width,
                ..
            } => {
                let t = match width {
                    40 => &BITS_40,
                    80 => &BITS_80,
                    _ => &BITS_20,
                };
                t[usize::from(idx.min(9))] * u32::from(streams)
            }
        }
    }

    /// Symbol time in ns: 4 µs, or 3.6 µs with the short guard interval.
    fn symbol_ns(self) -> u64 {
        match self {
            PhyRate::Mcs { sgi: true, .. } => 3_600,
            _ => 4_000,
        }
    }

    /// The PHY rate in bit/s.
    pub fn bps(self) -> u64 {
        match self {
            PhyRate::Legacy { bitrate } => u64::from(bitrate) * 100_000,
            _ => u64::from(self.bits_per_symbol()) * 1_000_000_000 / self.symbol_ns(),
        }
    }

    /// PHY preamble and headers, ns: OFDM 20 µs; CCK long preamble 192 µs; HT/VHT mixed format
    /// 36 µs + 4 µs per stream (the value mac80211 uses).
    pub fn preamble_ns(self) -> u64 {
        match self {
            PhyRate::Legacy { .. } if self.is_cck() => 192_000,
            PhyRate::Legacy { .. } => 20_000,
            PhyRate::Mcs { streams, .. } => (36 + 4 * u64::from(streams)) * 1_000,
        }
    }

    /// Duration of a PPDU carrying `bytes` of PSDU (MPDU or A-MPDU), ns: preamble plus whole
    /// symbols for SERVICE (16 bits) + data + tail (6 bits). CCK has no symbols: bits / rate.
    pub fn ppdu_ns(self, bytes: u32) -> u64 {
        if self.is_cck() {
            return self.preamble_ns() + u64::from(bytes) * 8 * 1_000_000_000 / self.bps();
        }
        let bits = 16 + 8 * u64::from(bytes) + 6;
        let syms = bits.div_ceil(u64::from(self.bits_per_symbol().max(1)));
        self.preamble_ns() + syms * self.symbol_ns()
    }

    /// mac80211's duration of the data part of a 1024-byte frame, in 1/1024 µs
    /// (`MCS_DURATION`): whole kilo-symbols rounded up, times the symbol time.
    fn mcs_duration_1024(self) -> u64 {
        let ksyms = ((1024u64 * 8) << 10).div_ceil(u64::from(self.bits_per_symbol().max(1)));
        match self {
            PhyRate::Mcs { sgi: true, .. } => ksyms * 4 * 18 / 20,
            _ => ksyms * 4,
        }
    }
}

/// mac80211's legacy duration (`ieee80211_calc_legacy_rate_duration`), µs: OFDM 20 µs preamble
/// + 16 µs SIFS, CCK 192 µs long preamble + 10 µs SIFS, plus `len·8·10 / bitrate`.
fn legacy_duration_us(bitrate: u32, cck: bool, len: u32) -> u32 {
    let base = if cck { 144 + 48 + 10 } else { 20 + 16 };
    base + (len * 8 * 10) / bitrate.max(1)
}

/// mac80211's expected TX airtime of one frame of `len` bytes to a station at `rate`, µs
/// (`ieee80211_calc_expected_tx_airtime`): 38 bytes of headers are added; HT/VHT frames that
/// will be aggregated (`ampdu`: every AC except VO) pay the per-PPDU overhead divided by
/// 2^agg_shift, an assumed aggregate size that grows with the rate; at least 4 µs.
pub fn expected_tx_airtime_us(rate: PhyRate, len: u32, ampdu: bool) -> u32 {
    let len = len + 38;
    let dur = match rate {
        PhyRate::Legacy { bitrate } => return legacy_duration_us(bitrate, rate.is_cck(), len),
        PhyRate::Mcs { .. } => rate.mcs_duration_1024(),
    };
    let overhead = (rate.preamble_ns() / 1000) as u32;
    if !ampdu {
        return (dur * u64::from(len) / 1024 / 1024) as u32 + overhead;
    }
    let shift = if dur > 400 * 1024 {
        1
    } else if dur > 250 * 1024 {
        2
    } else if dur > 150 * 1024 {
        3
    } else if dur > 70 * 1024 {
        4
    } else {
        5
    };
    ((dur * u64::from(len) / 1024 / 1024) as u32 + (overhead >> shift)).max(4)
}

/// AQL stores each frame's estimate in 4 µs units in 10 bits (`tx_time_est`): rounded down to a
/// multiple of 4 and capped at 4092 µs. The same value is added when the frame is dequeued and
/// subtracted on its TX status.
pub fn aql_quantize(us: u32) -> u32 {
    (us / 4).min(1023) * 4
}

/// A rate that does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateError(pub String);

impl fmt::Display for RateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RateError {}

impl FromStr for PhyRate {
    type Err = RateError;

    /// `6`, `54`, `5.5` (legacy Mbit/s); `6.5`, `65`, `130` (the HT20 long-GI MCS with that
    /// rate); `mcs7`, `mcs15/40/sgi` (HT); `vht9x2/80/sgi` (VHT MCS 9, 2 streams, 80 MHz).
    fn from_str(s: &str) -> Result<PhyRate, RateError> {
        let t = s.trim().to_ascii_lowercase();
        let bad = || {
            RateError(format!(
                "bad Wi-Fi rate '{s}': use a legacy rate in Mbit/s (1 2 5.5 11 6 9 12 18 24 36 48 54), \
                 an HT20 rate in Mbit/s (6.5 13 19.5 26 39 52 58.5 65, ×2 to ×4 for 2–4 streams), \
                 `mcsN[/40][/sgi]` (N 0–31) or `vhtMxS[/40|/80][/sgi]` (M 0–9, S 1–4 streams)"
            ))
        };
        let mut parts = t.split('/');
        let head = parts.next().unwrap_or("");
        let (mut width, mut sgi) = (20u16, false);
        for p in parts {
            match p {
                "20" => width = 20,
                "40" => width = 40,
                "80" => width = 80,
                "sgi" => sgi = true,
                _ => return Err(bad()),
            }
        }
        if let Some(n) = head.strip_prefix("mcs") {
            let m: u8 = n.parse().map_err(|_| bad())?;
            if m > 31 || width == 80 {
                return Err(bad());
            }
            return Ok(PhyRate::Mcs {
                idx: m % 8,
                streams: m / 8 + 1,
                width,
                sgi,
                vht: false,
            });
        }
        if let Some(n) = head.strip_prefix("vht") {
            let (m, st) = n.split_once('x').unwrap_or((n, "1"));
            let m: u8 = m.parse().map_err(|_| bad())?;
            let st: u8 = st.parse().map_err(|_| bad())?;
            if m > 9 || !(1..=4).contains(&st) {
                return Err(bad());
            }
            return Ok(PhyRate::Mcs {
                idx: m,
                streams: st,
                width,
                sgi,
                vht: true,
            });
        }
        let mbps: f64 = head.parse().map_err(|_| bad())?;
        if !mbps.is_finite() || mbps <= 0.0 {
            return Err(bad());
        }
        let tenths = (mbps * 10.0).round() as u32;
        if (mbps * 10.0 - f64::from(tenths)).abs() < 1e-6
            && (CCK.contains(&tenths) || OFDM.contains(&tenths))
        {
            return Ok(PhyRate::Legacy { bitrate: tenths });
        }
        for mcs in 0..32u8 {
            let r = PhyRate::ht(mcs);
            if (r.bps() as f64 - mbps * 1e6).abs() < 1.0 {
                return Ok(r);
            }
        }
        Err(bad())
    }
}

impl fmt::Display for PhyRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            PhyRate::Legacy { bitrate } => write!(f, "{}", f64::from(bitrate) / 10.0),
            PhyRate::Mcs {
                idx,
                streams,
                width,
                sgi,
                vht,
            } => {
                if vht {
                    write!(f, "vht{idx}x{streams}")?;
                } else {
                    write!(f, "mcs{}", u32::from(idx) + 8 * (u32::from(streams) - 1))?;
                }
                if width != 20 {
                    write!(f, "/{width}")?;
                }
                if sgi {
                    f.write_str("/sgi")?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn phy_rates_match_the_standard_tables() {
        assert_eq!(PhyRate::ht(0).bps(), 6_500_000);
        assert_eq!(PhyRate::ht(7).bps(), 65_000_000);
        assert_eq!(PhyRate::ht(15).bps(), 130_000_000);
        let sgi40: PhyRate = "mcs7/40/sgi".parse().unwrap();
        assert_eq!(sgi40.bps(), 150_000_000);
        let vht: PhyRate = "vht9x2/80/sgi".parse().unwrap();
        assert_eq!(vht.bps(), 866_666_666);
        assert_eq!("6".parse::<PhyRate>().unwrap().bps(), 6_000_000);
        assert_eq!("6.5".parse::<PhyRate>().unwrap(), PhyRate::ht(0));
        assert_eq!("65".parse::<PhyRate>().unwrap(), PhyRate::ht(7));
    }

    #[test]
    fn minstrel_falls_back_to_one_stream() {
        // HT MCS 12 (2 streams, 16-QAM 3/4, 78 Mbit/s) → MCS 4 (39 Mbit/s); MCS 15/sgi → 7/sgi.
        assert_eq!(PhyRate::ht(12).minstrel_prob_rate(), PhyRate::ht(4));
        let sgi: PhyRate = "mcs15/sgi".parse().unwrap();
        assert_eq!(sgi.minstrel_prob_rate(), "mcs7/sgi".parse().unwrap());
        let vht: PhyRate = "vht9x2/80/sgi".parse().unwrap();
        assert_eq!(vht.minstrel_prob_rate(), "vht9x1/80/sgi".parse().unwrap());
        assert_eq!(PhyRate::ht(7).minstrel_prob_rate(), PhyRate::ht(7));
        let legacy: PhyRate = "54".parse().unwrap();
        assert_eq!(legacy.minstrel_prob_rate(), legacy);
    }

    #[test]
    fn bad_rates_name_the_token_and_the_choices() {
        let e = "7".parse::<PhyRate>().unwrap_err().to_string();
        assert!(e.contains("'7'") && e.contains("mcsN"), "{e}");
        assert!("mcs40".parse::<PhyRate>().is_err());
        assert!("vht10".parse::<PhyRate>().is_err());
        assert!("mcs7/30".parse::<PhyRate>().is_err());
    }

    #[test]
    fn a_full_frame_at_6_mbit_takes_about_2_ms() {
        // 1538-byte MPDU (1514-byte frame + 802.11 headers): 514 symbols of 4 µs + 20 µs.
        let r: PhyRate = "6".parse().unwrap();
        assert_eq!(r.ppdu_ns(1538), 20_000 + 514 * 4_000);
    }

    #[test]
    fn estimate_matches_mac80211_arithmetic() {
        // Legacy OFDM 6 Mbit/s, 1500 + 38 bytes: 36 + 1538·8·10/60 = 36 + 2050.
        let r: PhyRate = "6".parse().unwrap();
        assert_eq!(expected_tx_airtime_us(r, 1500, true), 2086);
        // HT20 MCS0: 1024-byte duration 1260.3 µs (> 400 µs, agg_shift 1): 1538 bytes take
        // 1892 µs plus (36+4)/2 = 20 µs of overhead.
        let e = expected_tx_airtime_us(PhyRate::ht(0), 1500, true);
        assert_eq!(e, 1892 + 20);
        // HT20 MCS7: 1024-byte duration 126 µs (agg_shift 4): 189 + 40/16 = 191 µs.
        let e = expected_tx_airtime_us(PhyRate::ht(7), 1500, true);
        assert_eq!(e, 189 + 2);
        // Not aggregated (VO): the whole overhead.
        assert_eq!(
            expected_tx_airtime_us(PhyRate::ht(7), 1500, false),
            189 + 40
        );
        assert_eq!(aql_quantize(191), 188);
        assert_eq!(aql_quantize(9000), 4092);
    }
}
