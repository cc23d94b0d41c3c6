//! `tc qdisc add … cake …`: the spec, its defaults, and its keywords (iproute2 tc/q_cake.c).

use super::ack_filter::AckFilter;
use super::hash::FlowMode;
use super::overhead::{AtmMode, Overhead};
use super::tins::Diffserv;
use crate::qdisc::words::{expect_value, SpecError, Tokens};
use crate::units::{
    fmt_rate_exact as fmt_rate, fmt_size, fmt_time_exact as fmt_time, parse_rate, parse_size,
    parse_time,
};
use std::fmt;

/// A CAKE configuration. Defaults are the kernel's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CakeSpec {
    /// Shaper rate in bytes/s; `None` = unlimited.
    pub bandwidth_bytes_per_s: Option<u64>,
    /// DiffServ mode (default diffserv3).
    pub diffserv: Diffserv,
    /// Isolation mode (default triple-isolate).
    pub flow_mode: FlowMode,
    /// Interval in µs (default 100000).
    pub rtt_us: u64,
    /// Target in µs (default 5000).
    pub target_us: u64,
    /// Overhead compensation.
    pub overhead: Overhead,
    /// ACK filter.
    pub ack_filter: AckFilter,
    /// NAT lookup (accepted; no effect without conntrack).
    pub nat: bool,
    /// Clear DSCP after classifying.
    pub wash: bool,
    /// Split GSO super-packets (default on).
    pub split_gso: bool,
    /// Ingress mode: count drops against the shaper.
    pub ingress: bool,
    /// `autorate-ingress`: estimate the arriving traffic's rate and shape at 15/16 of it
    /// (see [`super::autorate`]).
    pub autorate_ingress: bool,
    /// Memory limit override, bytes.
    pub memlimit: Option<u32>,
    /// Firewall-mark mask for tin override (0 = off).
    pub fwmark: u32,
}

impl Default for CakeSpec {
    fn default() -> Self {
        CakeSpec {
            bandwidth_bytes_per_s: None,
            diffserv: Diffserv::Diffserv3,
            flow_mode: FlowMode::TRIPLE_ISOLATE,
            rtt_us: 100_000,
            target_us: 5_000,
            overhead: Overhead::default(),
            ack_filter: AckFilter::None,
            nat: false,
            wash: false,
            split_gso: true,
            ingress: false,
            autorate_ingress: false,
            memlimit: None,
            fwmark: 0,
        }
    }
}

/// Every keyword `cake` accepts, for error messages.
pub const KEYWORDS: &[&str] = &[
    "bandwidth RATE",
    "unlimited",
    "rtt TIME",
    "datacentre",
    "lan",
    "metro",
    "regional",
    "internet",
    "oceanic",
    "satellite",
    "interplanetary",
    "besteffort",
    "precedence",
    "diffserv8",
    "diffserv4",
    "diffserv3",
    "flowblind",
    "srchost",
    "dsthost",
    "hosts",
    "flows",
    "dual-srchost",
    "dual-dsthost",
    "triple-isolate",
    "nat",
    "nonat",
    "wash",
    "nowash",
    "split-gso",
    "no-split-gso",
    "ack-filter",
    "ack-filter-aggressive",
    "no-ack-filter",
    "memlimit SIZE",
    "fwmark MASK",
    "overhead N",
    "mpu N",
    "atm",
    "noatm",
    "ptm",
    "raw",
    "conservative",
    "ethernet",
    "ether-vlan",
    "docsis",
    "ipoa-vcmux",
    "ipoa-llcsnap",
    "bridged-vcmux",
    "bridged-llcsnap",
    "pppoa-vcmux",
    "pppoa-llc",
    "pppoe-vcmux",
    "pppoe-llcsnap",
    "pppoe-ptm",
    "bridged-ptm",
    "via-ethernet",
    "ingress",
    "egress",
    "autorate-ingress",
];

const RTT_PRESETS: &[(&str, u64, u64)] = &[
    ("datacentre", 100, 5),
    ("lan", 1_000, 50),
    ("metro", 10_000, 500),
    ("regional", 30_000, 1_500),
    ("internet", 100_000, 5_000),
    ("oceanic", 300_000, 15_000),
    ("satellite", 1_000_000, 50_000),
    ("interplanetary", 1_000_000_000, 50_000_000),
];

/// The host-isolation words and their modes.
const FLOW_MODES: &[(&str, FlowMode)] = &[
    ("flowblind", FlowMode::FLOWBLIND),
    ("srchost", FlowMode::SRCHOST),
    ("dsthost", FlowMode::DSTHOST),
    ("hosts", FlowMode::HOSTS),
    ("flows", FlowMode::FLOWS_ONLY),
    ("dual-srchost", FlowMode::DUAL_SRCHOST),
    ("dual-dsthost", FlowMode::DUAL_DSTHOST),
    ("triple-isolate", FlowMode::TRIPLE_ISOLATE),
];

const ATM_LINKS: &[(&str, i32)] = &[
    ("ipoa-vcmux", 8),
    ("ipoa-llcsnap", 16),
    ("bridged-vcmux", 24),
    ("bridged-llcsnap", 32),
    ("pppoa-vcmux", 10),
    ("pppoa-llc", 14),
    ("pppoe-vcmux", 32),
    ("pppoe-llcsnap", 40),
];

impl CakeSpec {
    /// Parse the words after `cake`.
    pub fn parse(t: &mut Tokens<'_>) -> Result<CakeSpec, SpecError> {
        let mut s = CakeSpec::default();
        let mut overhead_set = false;
        let mut raw = false;
        while let Some(word) = t.next() {
            let w = word.to_ascii_lowercase();
            if s.keyword(&w, t, &mut overhead_set, &mut raw)? {
                continue;
            }
            return Err(SpecError::unknown(word, "cake", KEYWORDS));
        }
        s.overhead.strip_l2 = overhead_set && !raw;
        Ok(s)
    }

    fn keyword(
        &mut self,
        w: &str,
        t: &mut Tokens<'_>,
        set: &mut bool,
        raw: &mut bool,
    ) -> Result<bool, SpecError> {
        if let Some(&(_, rtt, target)) = RTT_PRESETS.iter().find(|p| p.0 == w) {
            self.rtt_us = rtt;
            self.target_us = target;
            return Ok(true);
        }
        if let Some(&(_, m)) = FLOW_MODES.iter().find(|p| p.0 == w) {
            self.flow_mode = m;
            return Ok(true);
        }
        if let Some(&(_, o)) = ATM_LINKS.iter().find(|p| p.0 == w) {
            self.overhead.atm = AtmMode::Atm;
            self.overhead.overhead += o;
            *set = true;
            return Ok(true);
        }
        match w {
            "bandwidth" => {
                let v = expect_value(t, "bandwidth", "a rate such as 20Mbit")?;
                // `bandwidth unlimited` is how tc prints an unshaped cake: read it back.
                let bits = match v {
                    "unlimited" => 0,
                    _ => parse_rate(v).map_err(|e| SpecError::value(v, &e.to_string()))?,
                };
                // tc sends bytes/s; a rate under 8 bit/s is 0, which the kernel reads as unlimited.
                self.bandwidth_bytes_per_s = (bits / 8 > 0).then_some(bits / 8);
                // As tc parses it: a rate given after `autorate-ingress` turns it off.
                self.autorate_ingress = false;
            }
            "unlimited" => {
                self.bandwidth_bytes_per_s = None;
                self.autorate_ingress = false;
            }
            "autorate-ingress" | "autorate_ingress" => self.autorate_ingress = true,
            "rtt" => {
                let v = expect_value(t, "rtt", "a time such as 100ms")?;
                let ns = parse_time(v).map_err(|e| SpecError::value(v, &e.to_string()))?;
                self.rtt_us = (ns / 1000).max(1);
                self.target_us = (self.rtt_us / 20).max(1);
            }
            "besteffort" => self.diffserv = Diffserv::Besteffort,
            "precedence" => self.diffserv = Diffserv::Precedence,
            "diffserv8" => self.diffserv = Diffserv::Diffserv8,
            "diffserv4" => self.diffserv = Diffserv::Diffserv4,
            "diffserv3" => self.diffserv = Diffserv::Diffserv3,
            "nat" => self.nat = true,
            "nonat" => self.nat = false,
            "wash" => self.wash = true,
            "nowash" => self.wash = false,
            "split-gso" => self.split_gso = true,
            "no-split-gso" => self.split_gso = false,
            "ack-filter" => self.ack_filter = AckFilter::Filter,
            "ack-filter-aggressive" => self.ack_filter = AckFilter::Aggressive,
            "no-ack-filter" => self.ack_filter = AckFilter::None,
            "ingress" => self.ingress = true,
            "egress" => self.ingress = false,
            "memlimit" => {
                let v = expect_value(t, "memlimit", "a size such as 32Mb")?;
                let b = parse_size(v).map_err(|e| SpecError::value(v, &e.to_string()))?;
                self.memlimit = Some(
                    u32::try_from(b)
                        .map_err(|_| SpecError::value(v, "memlimit must be below 4Gb"))?,
                );
            }
            "fwmark" => {
                let v = expect_value(t, "fwmark", "a mask such as 0xff")?;
                self.fwmark = parse_u32(v)?;
            }
            _ => return self.overhead_keyword(w, t, set, raw),
        }
        Ok(true)
    }

    fn overhead_keyword(
        &mut self,
        w: &str,
        t: &mut Tokens<'_>,
        set: &mut bool,
        raw: &mut bool,
    ) -> Result<bool, SpecError> {
        let o = &mut self.overhead;
        match w {
            "overhead" => {
                let v = expect_value(t, "overhead", "bytes from -64 to 256")?;
                let n: i32 = v.parse().map_err(|_| {
                    SpecError::value(v, "overhead takes whole bytes from -64 to 256")
                })?;
                if !(-64..=256).contains(&n) {
                    return Err(SpecError::value(v, "overhead must be between -64 and 256"));
                }
                o.overhead = n;
                *set = true;
            }
            "mpu" => {
                let v = expect_value(t, "mpu", "bytes from 0 to 256")?;
                let n: u32 = v
                    .parse()
                    .map_err(|_| SpecError::value(v, "mpu takes whole bytes from 0 to 256"))?;
                if n > 256 {
                    return Err(SpecError::value(v, "mpu must be between 0 and 256"));
                }
                o.mpu = n;
            }
            "atm" => o.atm = AtmMode::Atm,
            "noatm" => o.atm = AtmMode::None,
            "ptm" => o.atm = AtmMode::Ptm,
            "raw" => {
                *raw = true;
                *set = true;
                o.overhead = 0;
            }
            "conservative" => {
                o.atm = AtmMode::Atm;
                o.overhead = 48;
                *set = true;
            }
            "pppoe-ptm" | "bridged-ptm" => {
                o.atm = AtmMode::Ptm;
                o.overhead += if w == "pppoe-ptm" { 30 } else { 22 };
                *set = true;
            }
            "ether-vlan" => {
                o.overhead += 4;
                *set = true;
            }
            "ethernet" => {
                o.overhead += 38;
                o.mpu = 84;
                *set = true;
            }
            "docsis" => {
                o.atm = AtmMode::None;
                o.overhead += 18;
                o.mpu = 64;
                *set = true;
            }
            "via-ethernet" => {}
            _ => return Ok(false),
        }
        Ok(true)
    }
}

fn parse_u32(v: &str) -> Result<u32, SpecError> {
    let r = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16),
        None => v.parse(),
    };
    r.map_err(|_| SpecError::value(v, "expected a number such as 0xff"))
}

impl CakeSpec {
    /// The options as `tc qdisc show` prints them: like [`Display`](fmt::Display), but an
    /// unshaped cake reads `bandwidth unlimited` (both parse back), and `rtt` has iproute2's
    /// three significant digits (`12345us` → `12.3ms`) where the spec text is exact.
    pub fn tc_options(&self) -> String {
        let s = self.to_string().replacen(
            &format!(" rtt {} ", fmt_time(self.rtt_us * 1000)),
            &format!(" rtt {} ", crate::units::fmt_usecs(self.rtt_us)),
            1,
        );
        match s.strip_prefix("unlimited") {
            Some(rest) => format!("bandwidth unlimited{rest}"),
            None => s,
        }
    }
}

impl fmt::Display for CakeSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.bandwidth_bytes_per_s {
            Some(b) => write!(f, "bandwidth {}", fmt_rate(b * 8))?,
            None => write!(f, "unlimited")?,
        }
        if self.autorate_ingress {
            write!(f, " autorate-ingress")?;
        }
        write!(
            f,
            " {} {}",
            self.diffserv.keyword(),
            self.flow_mode.keyword()
        )?;
        write!(f, " {}", if self.nat { "nat" } else { "nonat" })?;
        write!(f, " {}", if self.wash { "wash" } else { "nowash" })?;
        if self.ingress {
            write!(f, " ingress")?;
        }
        let af = match self.ack_filter {
            AckFilter::None => "no-ack-filter",
            AckFilter::Filter => "ack-filter",
            AckFilter::Aggressive => "ack-filter-aggressive",
        };
        write!(
            f,
            " {af} {}",
            if self.split_gso {
                "split-gso"
            } else {
                "no-split-gso"
            }
        )?;
        write!(f, " rtt {}", fmt_time(self.rtt_us * 1000))?;
        let o = &self.overhead;
        // As tc prints it: `raw` when no overhead keyword set the L2 strip, then the framing.
        let link = match (o.strip_l2, o.atm) {
            (false, AtmMode::None) => "raw",
            (false, AtmMode::Atm) => "raw atm",
            (false, AtmMode::Ptm) => "raw ptm",
            (true, AtmMode::None) => "noatm",
            (true, AtmMode::Atm) => "atm",
            (true, AtmMode::Ptm) => "ptm",
        };
        write!(f, " {link} overhead {}", o.overhead)?;
        if o.mpu != 0 {
            write!(f, " mpu {}", o.mpu)?;
        }
        if let Some(m) = self.memlimit {
            write!(f, " memlimit {}", fmt_size(u64::from(m)))?;
        }
        if self.fwmark != 0 {
            write!(f, " fwmark 0x{:x}", self.fwmark)?;
        }
        Ok(())
    }
}
