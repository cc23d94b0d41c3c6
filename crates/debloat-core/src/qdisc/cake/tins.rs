//! CAKE's tins: DiffServ modes, the kernel's DSCP → tin tables, and per-tin parameters
//! (`cake_set_rate`, `cake_config_*`).

use super::cobalt;

/// DiffServ mode (tc keywords).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Diffserv {
    /// One tin.
    Besteffort,
    /// Eight tins by IP precedence.
    Precedence,
    /// Eight tins.
    Diffserv8,
    /// Four tins: Bulk, Best Effort, Video, Voice.
    Diffserv4,
    /// Three tins: Bulk, Best Effort, Voice (the default).
    #[default]
    Diffserv3,
}

impl Diffserv {
    /// The tc keyword.
    pub fn keyword(self) -> &'static str {
        match self {
            Diffserv::Besteffort => "besteffort",
            Diffserv::Precedence => "precedence",
            Diffserv::Diffserv8 => "diffserv8",
            Diffserv::Diffserv4 => "diffserv4",
            Diffserv::Diffserv3 => "diffserv3",
        }
    }

    /// Number of tins.
    pub fn tin_count(self) -> usize {
        match self {
            Diffserv::Besteffort => 1,
            Diffserv::Diffserv3 => 3,
            Diffserv::Diffserv4 => 4,
            Diffserv::Precedence | Diffserv::Diffserv8 => 8,
        }
    }

    /// `tin_order`: the tin a fwmark/priority of m (1-based) selects, and the order tc prints.
    pub fn tin_order(self) -> &'static [usize] {
        match self {
            Diffserv::Diffserv3 => &[1, 0, 2],
            Diffserv::Diffserv4 => &[1, 0, 2, 3],
            Diffserv::Besteffort => &[0],
            Diffserv::Precedence | Diffserv::Diffserv8 => &[0, 1, 2, 3, 4, 5, 6, 7],
        }
    }

    /// Names tc prints over the per-tin columns, in `tin_order`.
    pub fn tin_names(self) -> &'static [&'static str] {
        match self {
            Diffserv::Besteffort => &["Tin 0"],
            Diffserv::Diffserv3 => &["Bulk", "Best Effort", "Voice"],
            Diffserv::Diffserv4 => &["Bulk", "Best Effort", "Video", "Voice"],
            Diffserv::Precedence | Diffserv::Diffserv8 => &[
                "Tin 0", "Tin 1", "Tin 2", "Tin 3", "Tin 4", "Tin 5", "Tin 6", "Tin 7",
            ],
        }
    }

    /// The tin for a DSCP (tins indexed as in the kernel's `tins[]`).
    pub fn tin_for_dscp(self, dscp: u8) -> usize {
        let d = dscp & 0x3f;
        match self {
            Diffserv::Besteffort => 0,
            Diffserv::Precedence => usize::from(d >> 3),
            Diffserv::Diffserv3 => match d {
                1 | 8 => 1,
                4 | 44 | 46 | 48 | 56 => 2,
                _ => 0,
            },
            Diffserv::Diffserv4 => match d {
                1 | 8 => 1,
                4 | 16 | 18 | 20 | 22 | 24 | 26 | 28 | 30 | 34 | 36 | 38 => 2,
                32 | 40 | 44 | 46 | 48 | 56 => 3,
                _ => 0,
            },
            Diffserv::Diffserv8 => match d {
                1 => 0,
                2 | 8 | 10 | 12 | 14 => 1,
                24 | 26 | 28 | 30 | 34 | 36 | 38 => 3,
                4 | 18 | 20 | 22 => 4,
                16 => 5,
                32 | 40 | 44 | 46 => 6,
                48 | 56 => 7,
                _ => 2,
            },
        }
    }

    /// (rate, tin_quantum) for each tin given the configured rate in bytes/s.
    pub fn tin_rates(self, rate: u64) -> Vec<(u64, u16)> {
        match self {
            Diffserv::Besteffort => vec![(rate, 65535)],
            Diffserv::Diffserv3 => vec![(rate, 1024), (rate >> 4, 64), (rate >> 2, 256)],
            Diffserv::Diffserv4 => {
                vec![
                    (rate, 1024),
                    (rate >> 4, 64),
                    (rate >> 1, 512),
                    (rate >> 2, 256),
                ]
            }
            Diffserv::Precedence | Diffserv::Diffserv8 => {
                let (mut r, mut q) = (rate, 256u32);
                (0..8)
                    .map(|_| {
                        let t = (r, q.max(1) as u16);
                        r = (r * 7) >> 3;
                        q = (q * 7) >> 3;
                        t
                    })
                    .collect()
            }
        }
    }
}

/// A tin's derived parameters (`cake_set_rate`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TinParams {
    /// Threshold rate in bytes/s (0 = unlimited).
    pub rate_bps: u64,
    /// Nanoseconds per byte, fixed point with `rate_shft` fractional bits.
    pub rate_ns: u64,
    /// Fractional bits of `rate_ns`.
    pub rate_shft: u8,
    /// Per-flow DRR quantum, bytes.
    pub flow_quantum: u16,
    /// COBALT parameters.
    pub cparams: cobalt::Params,
}

/// `cake_set_rate`: derive a tin's quantum, time-per-byte and COBALT target/interval from its
/// rate `rate` (bytes/s), the MTU, and the configured target and rtt (ns).
pub fn set_rate(rate: u64, mtu: u32, target_ns: u64, rtt_ns: u64) -> TinParams {
    const MIN_RATE: u64 = 64;
    let mut flow_quantum = 1514u16;
    let (mut rate_ns, mut rate_shft) = (0u64, 0u8);
    if rate != 0 {
        flow_quantum = (rate >> 12).clamp(300, 1514) as u16;
        rate_shft = 34;
        rate_ns = (1_000_000_000u64 << rate_shft) / rate.max(MIN_RATE);
        while rate_ns >> 34 != 0 {
            rate_ns >>= 1;
            rate_shft -= 1;
        }
    }
    let mtu_time = (u64::from(mtu) * rate_ns) >> rate_shft;
    let target = (mtu_time * 3 / 2).max(target_ns);
    let interval = (rtt_ns + target - target_ns).max(target * 2);
    TinParams {
        rate_bps: rate,
        rate_ns,
        rate_shft,
        flow_quantum,
        cparams: cobalt::Params {
            target,
            interval,
            mtu_time,
            p_inc: 1 << 24,
            p_dec: 1 << 20,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mbit(m: f64) -> u64 {
        (m * 1e6 / 8.0) as u64
    }

    #[test]
    fn derivation_matches_kernel_table() {
        // docs/algorithms.md §3.2: rate, quantum, mtu_time ms, target ms, interval ms.
        let rows = [
            (0.5, 300, 24.22, 36.34, 131.34),
            (1.0, 300, 12.11, 18.17, 113.17),
            (2.0, 300, 6.06, 9.08, 104.08),
            (10.0, 305, 1.21, 5.0, 100.0),
            (20.0, 610, 0.61, 5.0, 100.0),
            (100.0, 1514, 0.121, 5.0, 100.0),
        ];
        for (rate, q, mtu_ms, target_ms, interval_ms) in rows {
            let t = set_rate(mbit(rate), 1514, 5_000_000, 100_000_000);
            assert_eq!(t.flow_quantum, q, "quantum at {rate} Mbit");
            let ms = |ns: u64| ns as f64 / 1e6;
            assert!(
                (ms(t.cparams.mtu_time) - mtu_ms).abs() < 0.01,
                "mtu_time at {rate}"
            );
            assert!(
                (ms(t.cparams.target) - target_ms).abs() < 0.01,
                "target at {rate}"
            );
            assert!(
                (ms(t.cparams.interval) - interval_ms).abs() < 0.01,
                "interval at {rate}"
            );
        }
        let unl = set_rate(0, 1514, 5_000_000, 100_000_000);
        assert_eq!(
            (unl.flow_quantum, unl.rate_ns, unl.cparams.target),
            (1514, 0, 5_000_000)
        );
    }

    #[test]
    fn dscp_maps_follow_the_kernel() {
        let d3 = Diffserv::Diffserv3;
        assert_eq!(
            [d3.tin_for_dscp(8), d3.tin_for_dscp(46), d3.tin_for_dscp(10)],
            [1, 2, 0]
        );
        let d4 = Diffserv::Diffserv4;
        assert_eq!(
            [
                d4.tin_for_dscp(1),
                d4.tin_for_dscp(34),
                d4.tin_for_dscp(46),
                d4.tin_for_dscp(10)
            ],
            [1, 2, 3, 0]
        );
        let d8 = Diffserv::Diffserv8;
        assert_eq!(
            [
                d8.tin_for_dscp(1),
                d8.tin_for_dscp(10),
                d8.tin_for_dscp(0),
                d8.tin_for_dscp(26)
            ],
            [0, 1, 2, 3]
        );
        assert_eq!(
            [
                d8.tin_for_dscp(20),
                d8.tin_for_dscp(16),
                d8.tin_for_dscp(46),
                d8.tin_for_dscp(56)
            ],
            [4, 5, 6, 7]
        );
        assert_eq!(Diffserv::Precedence.tin_for_dscp(46), 5);
    }

    #[test]
    fn diffserv8_rates_step_by_seven_eighths() {
        let r = Diffserv::Diffserv8.tin_rates(8000);
        assert_eq!(r[1], (7000, 224));
        assert_eq!(r[7].1, 98);
    }
}
