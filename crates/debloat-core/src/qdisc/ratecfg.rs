//! `struct psched_ratecfg` (net/sched/sch_generic.c): a rate's byte time as a multiply and a
//! shift, with the overhead, minimum size and link layer tc hands the kernel beside the rate.
//! The shapers that charge tokens in nanoseconds — `tbf` and `htb` — share it, so a packet
//! costs the same time in both, to the nanosecond the kernel computes.

/// How the link frames bytes: `linklayer ethernet` (as counted) or `atm` (`adsl`): whole
/// 48-byte cells, each 53 bytes on the wire.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LinkLayer {
    /// Bytes as counted.
    #[default]
    Ethernet,
    /// ATM cells (`TC_LINKLAYER_ATM`).
    Atm,
}

/// A rate's byte time as a multiply and shift (`psched_ratecfg_precompute`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateCfg {
    /// Bytes per second.
    pub rate_bytes_ps: u64,
    mult: u32,
    shift: u8,
    overhead: i32,
    mpu: u32,
    linklayer: LinkLayer,
}

impl RateCfg {
    /// `psched_ratecfg_precompute` for an Ethernet link.
    pub fn new(rate_bytes_ps: u64, overhead: i32, mpu: u32) -> RateCfg {
        RateCfg::with_link(rate_bytes_ps, overhead, mpu, LinkLayer::Ethernet)
    }

    /// `psched_ratecfg_precompute` with a link layer.
    pub fn with_link(rate_bytes_ps: u64, overhead: i32, mpu: u32, linklayer: LinkLayer) -> Self {
        let (mut mult, mut shift) = (1u32, 0u8);
        let mut factor: u64 = 1_000_000_000;
        while let Some(m) = factor.checked_div(rate_bytes_ps) {
            mult = m as u32;
            if mult & (1 << 31) != 0 || factor & (1 << 63) != 0 {
                break;
            }
            factor <<= 1;
            shift += 1;
        }
        RateCfg {
            rate_bytes_ps,
            mult,
            shift,
            overhead,
            mpu,
            linklayer,
        }
    }

    /// `psched_l2t_ns`: nanoseconds to send `len` bytes.
    pub fn l2t_ns(&self, len: u32) -> u64 {
        let mut len = (i64::from(len) + i64::from(self.overhead))
            .max(i64::from(self.mpu))
            .max(0) as u64;
        if self.linklayer == LinkLayer::Atm {
            len = len.div_ceil(48) * 53;
        }
        (len * u64::from(self.mult)) >> self.shift
    }
}

/// iproute2's `tc_calc_xmittime` with the kernel's tick (64 ns): the psched ticks `size` bytes
/// take at `bytes_ps`, through whole microseconds, as tc truncates them. The kernel keeps a
/// bucket as these ticks × 64 ns, so a burst is slightly less than the bytes given.
pub fn tc_xmittime_ticks(bytes_ps: u64, size: u32) -> u32 {
    if bytes_ps == 0 {
        return 0;
    }
    let us = (1e6 * f64::from(size) / bytes_ps as f64).min(f64::from(u32::MAX)) as u32;
    (f64::from(us) * 15.625).min(f64::from(u32::MAX)) as u32
}

/// iproute2's `tc_core_tick2time`: psched ticks to whole µs.
pub fn tick2us(ticks: u32) -> u32 {
    (f64::from(ticks) / 15.625) as u32
}

/// iproute2's `tc_calc_xmitsize`: the bytes `ticks` of sending at `bytes_ps` make (what tc
/// prints as a burst).
pub fn tc_xmitsize(bytes_ps: u64, ticks: u32) -> u64 {
    (bytes_ps as f64 * f64::from(tick2us(ticks)) / 1e6) as u32 as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// tc's arithmetic as the lab's tc printed it (Linux 7.2, iproute2 6.1): a 1600-byte
    /// bucket at 3 Mbit/s is 66656 ticks, 15 KiB at 7 Mbit/s 274281; at 1 Gbit/s the 1600
    /// bytes read back as 1375.
    #[test]
    fn tc_ticks_are_truncated_through_microseconds() {
        assert_eq!(tc_xmittime_ticks(375_000, 1600), 66656);
        assert_eq!(tc_xmittime_ticks(875_000, 15 * 1024), 274281);
        assert_eq!(tc_xmittime_ticks(1_250_000, 1600), 20000);
        assert_eq!(
            tc_xmitsize(125_000_000, tc_xmittime_ticks(125_000_000, 1600)),
            1375
        );
        assert_eq!(tc_xmitsize(375_000, 66656), 1599);
    }

    /// ATM: 100 bytes take three 48-byte cells, 159 bytes on the wire.
    #[test]
    fn atm_cells() {
        let r = RateCfg::with_link(1_000_000, 0, 0, LinkLayer::Atm);
        assert_eq!(r.l2t_ns(100), 159_000);
        assert_eq!(r.l2t_ns(96), 106_000);
    }
}
