//! `tbf`'s words, as tc-tbf(8) takes them: `rate RATE`, `burst|buffer|maxburst SIZE`,
//! `limit SIZE` or `latency TIME`, `peakrate RATE` with `mtu|minburst SIZE`, `mpu SIZE`,
//! `overhead N`; rate, burst and one of limit and latency are required, as tc requires them.
//! debloat adds `child SPEC…`: the rest of the words are the child's spec (by default a
//! `bfifo` of `limit` bytes, as the kernel makes).

use crate::qdisc::ratecfg::{tc_xmitsize as shown_size, tick2us};
use crate::qdisc::spec::QdiscSpec;
use crate::qdisc::words::{expect_value, time_value, SpecError, TcForm, Tokens};
use crate::units::{
    fmt_rate, fmt_rate_exact, fmt_size_tc as fmt_size, fmt_usecs, parse_rate, parse_size,
};
use std::fmt;

const TBF_WORDS: &[&str] = &[
    "rate RATE",
    "burst SIZE",
    "limit SIZE",
    "latency TIME",
    "peakrate RATE",
    "mtu SIZE",
    "mpu SIZE",
    "overhead N",
    "child SPEC",
];

/// `tbf rate R burst B (limit L | latency T) [peakrate P mtu M] [mpu N] [overhead N]
/// [child SPEC…]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TbfSpec {
    /// bit/s.
    pub rate_bps: u64,
    /// Bucket size, bytes.
    pub burst: u32,
    /// The child bfifo's limit, bytes (given, or from `latency` as tc computes it).
    pub limit: u32,
    /// Peak rate, bit/s.
    pub peakrate_bps: Option<u64>,
    /// Peak bucket size, bytes (required with `peakrate`).
    pub mtu: u32,
    /// Minimum packet size the rate counts.
    pub mpu: u32,
    /// Bytes added to each packet's size.
    pub overhead: i32,
    /// The child discipline; None: `bfifo limit <limit>`.
    pub child: Option<Box<QdiscSpec>>,
}

fn size_value(t: &mut Tokens<'_>, w: &str) -> Result<u32, SpecError> {
    let v = expect_value(t, w, "a size such as 10kb")?;
    let b = parse_size(v).map_err(|e| SpecError::value(v, &e.to_string()))?;
    u32::try_from(b).map_err(|_| SpecError::value(v, "must be below 4Gb"))
}

fn rate_value(t: &mut Tokens<'_>, w: &str) -> Result<u64, SpecError> {
    let v = expect_value(t, w, "a rate such as 10Mbit")?;
    parse_rate(v).map_err(|e| SpecError::value(v, &e.to_string()))
}

impl TbfSpec {
    pub(crate) fn parse(t: &mut Tokens<'_>) -> Result<Self, SpecError> {
        let (mut rate, mut burst, mut limit, mut latency_us) = (0u64, 0u32, 0u32, 0u64);
        let mut s = TbfSpec {
            rate_bps: 0,
            burst: 0,
            limit: 0,
            peakrate_bps: None,
            mtu: 0,
            mpu: 0,
            overhead: 0,
            child: None,
        };
        while let Some(w) = t.next() {
            match w {
                "rate" => rate = rate_value(t, w)?,
                "burst" | "buffer" | "maxburst" => burst = size_value(t, w)?,
                "limit" => limit = size_value(t, w)?,
                "latency" => latency_us = time_value(t, w)? / 1000,
                "peakrate" => s.peakrate_bps = Some(rate_value(t, w)?),
                "mtu" | "minburst" => s.mtu = size_value(t, w)?,
                "mpu" => s.mpu = size_value(t, w)?,
                "overhead" => {
                    let v = expect_value(t, w, "a whole number of bytes, -64 to 256")?;
                    s.overhead = v
                        .parse()
                        .ok()
                        .filter(|o| (-64..=256).contains(o))
                        .ok_or_else(|| SpecError::value(v, "overhead is -64 to 256 bytes"))?;
                }
                "child" => {
                    let rest: Vec<&str> = t.by_ref().collect();
                    s.child = Some(Box::new(QdiscSpec::parse(&rest.join(" "))?));
                }
                _ => return Err(SpecError::unknown(w, "tbf", TBF_WORDS)),
            }
        }
        let missing = |what: &str| SpecError::value("tbf", what);
        if rate == 0 {
            return Err(missing("the \"rate\" parameter is mandatory"));
        }
        if burst == 0 {
            return Err(missing("the \"burst\" parameter is mandatory"));
        }
        if s.peakrate_bps.is_some() && s.mtu == 0 {
            return Err(missing("when \"peakrate\" is given, \"mtu\" must be too"));
        }
        if s.peakrate_bps.is_some_and(|p| p / 8 <= rate / 8) {
            return Err(missing(
                "peakrate must be above rate (the kernel refuses it)",
            ));
        }
        if limit == 0 && latency_us == 0 {
            return Err(missing("either \"limit\" or \"latency\" is required"));
        }
        if limit == 0 {
            // tc's arithmetic: bytes/s × µs + the bucket, the smaller with the peak bucket.
            let bps = (rate / 8) as f64;
            let mut lim = bps * latency_us as f64 / 1e6 + f64::from(burst);
            if let Some(p) = s.peakrate_bps {
                lim = lim.min((p / 8) as f64 * latency_us as f64 / 1e6 + f64::from(s.mtu));
            }
            limit = lim.min(f64::from(u32::MAX)) as u32;
        }
        s.rate_bps = rate;
        s.burst = burst;
        s.limit = limit;
        Ok(s)
    }

    /// The child's spec.
    pub fn child(&self) -> QdiscSpec {
        match &self.child {
            Some(c) => (**c).clone(),
            None => QdiscSpec::Bfifo { limit: self.limit },
        }
    }

    /// The options as `tc qdisc show` prints them: rate, the burst as the kernel keeps it
    /// (psched ticks, converted back through whole microseconds), the latency the limit makes.
    pub fn tc_options(&self) -> String {
        TcForm(|f| {
            let bps = self.rate_bps / 8;
            let rate = super::RateCfg::new(bps, self.overhead, self.mpu);
            let ticks = (rate.l2t_ns(self.burst) >> 6) as u32;
            write!(
                f,
                "rate {} burst {}",
                fmt_rate(self.rate_bps),
                fmt_size(shown_size(bps, ticks))
            )?;
            let mut lat = 1e6 * (f64::from(self.limit) / bps as f64) - tick2us(ticks) as f64;
            if let Some(p) = self.peakrate_bps {
                let peak = super::RateCfg::new(p / 8, self.overhead, self.mpu);
                let mticks = (peak.l2t_ns(self.mtu) >> 6) as u32;
                write!(
                    f,
                    " peakrate {} minburst {}",
                    fmt_rate(p),
                    fmt_size(shown_size(p / 8, mticks))
                )?;
                let lat2 = 1e6 * (f64::from(self.limit) / (p / 8) as f64) - tick2us(mticks) as f64;
                lat = lat.max(lat2);
            }
            if lat >= 0.0 {
                write!(f, " lat {}", fmt_usecs(lat as u32 as u64))?;
            } else {
                write!(f, " limit {}", fmt_size(u64::from(self.limit)))?;
            }
            if self.overhead != 0 {
                write!(f, " overhead {}", self.overhead)?;
            }
            Ok(())
        })
        .to_string()
    }
}

impl fmt::Display for TbfSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "rate {} burst {}b limit {}b",
            fmt_rate_exact(self.rate_bps),
            self.burst,
            self.limit
        )?;
        if let Some(p) = self.peakrate_bps {
            write!(f, " peakrate {} mtu {}b", fmt_rate_exact(p), self.mtu)?;
        }
        if self.mpu != 0 {
            write!(f, " mpu {}b", self.mpu)?;
        }
        if self.overhead != 0 {
            write!(f, " overhead {}", self.overhead)?;
        }
        if let Some(c) = &self.child {
            write!(f, " child {c}")?;
        }
        Ok(())
    }
}
