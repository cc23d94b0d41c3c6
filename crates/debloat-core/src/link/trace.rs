//! Link capacity that moves: a trace of when the link may send, read from text.
//!
//! Two formats, told apart by their lines:
//! * **mahimahi** (`mm-link`): one line per delivery opportunity, a whole number of
//!   milliseconds from the start, never decreasing; several opportunities in one millisecond
//!   repeat the number. Each opportunity carries [`OPPORTUNITY_BYTES`]: one full-size packet.
//!   The trace repeats, its period being its last timestamp (as mm-link loops). A link of one
//!   opportunity per millisecond (12 Mbit/s) is the one-line file `1`.
//! * **steps**: `t,rate` lines — seconds from the start (a decimal number), then a rate in tc's
//!   words (`5mbit`, `800kbit`) or a plain number of bit/s. The first step starts at 0; each
//!   rate holds until the next step; the last one holds for ever (so it must be above 0).
//!   `#` starts a comment; a first line that is not a number is taken as a header.
//!
//! Sans-IO: the caller reads the file; [`Trace::parse`] reads its text and names the line and
//! the token of the first thing it cannot take. [`super::modem::Modem`] turns a trace into
//! departure times; [`Trace::bits_in`] says what the link could carry in a window (the
//! per-second capacity the reports draw).

use crate::packet::Nanos;
use crate::units::parse_rate;
use std::fmt;

/// Bytes one mahimahi delivery opportunity carries: a 1500-byte IP packet plus the 4 bytes of
/// the tun header mm-link counts (its `PACKET_SIZE` is 1504).
pub const OPPORTUNITY_BYTES: u64 = 1504;
/// What an opportunity is worth in reported capacity: one 1500-byte IP packet (how the traces'
/// README states rates: one opportunity per millisecond = 12 Mbit/s).
pub const OPPORTUNITY_IP_BYTES: u64 = 1500;

const MS: u64 = 1_000_000;
/// The longest time a trace may name: 10^12 ms (about 31 years), so that times in nanoseconds
/// stay far from overflowing.
const MAX_MS: u64 = 1_000_000_000_000;

/// A capacity trace.
#[derive(Clone, Debug, PartialEq)]
pub enum Trace {
    /// mahimahi delivery opportunities, ms from the start, repeating every `period_ms`.
    Opportunities {
        /// Opportunity times, ms, non-decreasing.
        times_ms: Vec<u64>,
        /// The period, ms (the last timestamp).
        period_ms: u64,
    },
    /// Rate steps: (start, bit/s), the first at 0, increasing starts; the last holds for ever.
    Steps(Vec<(Nanos, u64)>),
}

/// A trace that cannot be read: where and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceError {
    /// 1-based line (0: the file as a whole).
    pub line: usize,
    /// The token at fault ("" for the file as a whole).
    pub token: String,
    /// What is wrong and what is expected.
    pub message: String,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}", self.message)
        } else {
            write!(f, "line {}: `{}`: {}", self.line, self.token, self.message)
        }
    }
}

impl std::error::Error for TraceError {}

fn err(line: usize, token: &str, message: impl Into<String>) -> TraceError {
    TraceError {
        line,
        token: token.to_string(),
        message: message.into(),
    }
}

/// The lines that carry something: (1-based number, trimmed text without a comment).
fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().filter_map(|(i, l)| {
        let l = l.split('#').next().unwrap_or("").trim();
        (!l.is_empty()).then_some((i + 1, l))
    })
}

impl Trace {
    /// Read a trace in either format (steps when a line holds a comma).
    pub fn parse(text: &str) -> Result<Trace, TraceError> {
        if lines(text).any(|(_, l)| l.contains(',')) {
            Trace::parse_steps(text)
        } else {
            Trace::parse_mahimahi(text)
        }
    }

    /// Read mahimahi's format.
    pub fn parse_mahimahi(text: &str) -> Result<Trace, TraceError> {
        let mut times_ms = Vec::new();
        for (n, l) in lines(text) {
            let t: u64 = l.parse().map_err(|_| {
                err(n, l, "expected a whole number of milliseconds (mahimahi's format: one delivery opportunity per line)")
            })?;
            if t > MAX_MS {
                return Err(err(n, l, "more than 10^12 ms (31 years) into the trace"));
            }
            if let Some(&prev) = times_ms.last() {
                if t < prev {
                    return Err(err(
                        n,
                        l,
                        format!("timestamps must not decrease (the line before says {prev})"),
                    ));
                }
            }
            times_ms.push(t);
        }
        let period_ms = *times_ms.last().ok_or_else(|| {
            err(
                0,
                "",
                "the trace is empty: give one delivery opportunity (ms) per line",
            )
        })?;
        if period_ms == 0 {
            return Err(err(
                0,
                "",
                "the trace lasts 0 ms: its last timestamp is its period and must be above 0",
            ));
        }
        Ok(Trace::Opportunities {
            times_ms,
            period_ms,
        })
    }

    /// Read the `t,rate` step format.
    pub fn parse_steps(text: &str) -> Result<Trace, TraceError> {
        let mut steps: Vec<(Nanos, u64)> = Vec::new();
        for (k, (n, l)) in lines(text).enumerate() {
            let (t, r) = l
                .split_once(',')
                .ok_or_else(|| err(n, l, "expected `seconds,rate` (e.g. `2.5,8mbit`)"))?;
            let (t, r) = (t.trim(), r.trim());
            let secs: f64 = match t.parse() {
                Ok(s) => s,
                Err(_) if k == 0 => continue, // a header
                Err(_) => return Err(err(n, t, "expected seconds from the start, e.g. `2.5`")),
            };
            if !secs.is_finite() || secs < 0.0 || secs > (MAX_MS / 1000) as f64 {
                return Err(err(n, t, "the time must be 0 to 10^9 seconds"));
            }
            let at = (secs * 1e9).round() as Nanos;
            let bps = match r.parse::<u64>() {
                Ok(b) => b,
                Err(_) => parse_rate(r)
                    .map_err(|e| err(n, r, format!("{e} (a rate such as 8mbit, or bit/s)")))?,
            };
            match steps.last() {
                None if at != 0 => return Err(err(n, t, "the first step must start at 0")),
                Some(&(prev, _)) if at <= prev => {
                    return Err(err(n, t, "step times must increase"));
                }
                _ => {}
            }
            steps.push((at, bps));
        }
        match steps.last() {
            None => Err(err(0, "", "the trace is empty: give `seconds,rate` lines")),
            Some(&(_, 0)) => Err(err(
                0,
                "",
                "the last step's rate holds for ever, so it must be above 0",
            )),
            Some(_) => Ok(Trace::Steps(steps)),
        }
    }

    /// Bits the link could carry in `[from, to)`, as IP bytes (see [`OPPORTUNITY_IP_BYTES`]).
    pub fn bits_in(&self, from: Nanos, to: Nanos) -> u64 {
        if to <= from {
            return 0;
        }
        match self {
            Trace::Opportunities { .. } => {
                (self.opportunities_before(to) - self.opportunities_before(from))
                    * OPPORTUNITY_IP_BYTES
                    * 8
            }
            Trace::Steps(s) => {
                let mut bits = 0u128;
                for (i, &(start, bps)) in s.iter().enumerate() {
                    let end = s.get(i + 1).map_or(Nanos::MAX, |x| x.0);
                    let (a, b) = (start.max(from), end.min(to));
                    if a < b {
                        bits += u128::from(b - a) * u128::from(bps) / 1_000_000_000;
                    }
                }
                bits as u64
            }
        }
    }

    /// Capacity of each whole second of `[0, secs)`, bit/s.
    pub fn per_second_bps(&self, secs: u64) -> Vec<u64> {
        (0..secs)
            .map(|s| self.bits_in(s * 1_000_000_000, (s + 1) * 1_000_000_000))
            .collect()
    }

    /// How long the trace runs before it repeats (steps: until its last step starts, at least
    /// 1 s).
    pub fn length(&self) -> Nanos {
        match self {
            Trace::Opportunities { period_ms, .. } => period_ms * MS,
            Trace::Steps(s) => s.last().map_or(0, |x| x.0).max(1_000_000_000),
        }
    }

    /// Opportunities strictly before `t` (mahimahi traces only; 0 otherwise).
    fn opportunities_before(&self, t: Nanos) -> u64 {
        self.count_opportunities(t, false)
    }

    /// Opportunities before `t`, or at or before it with `inclusive`. Repeat `r` holds the
    /// times `r·period + times[i]`; the last time equals the period, so the repeats run in
    /// order and only the two latest that reach `t` are partly counted.
    fn count_opportunities(&self, t: Nanos, inclusive: bool) -> u64 {
        let Trace::Opportunities {
            times_ms,
            period_ms,
        } = self
        else {
            return 0;
        };
        let count = |x: Nanos| {
            times_ms.partition_point(|&v| if inclusive { v * MS <= x } else { v * MS < x }) as u64
        };
        let (period, n) = (period_ms * MS, times_ms.len() as u64);
        let (r, offset) = (t / period, t % period);
        let mut total = count(offset);
        if r >= 1 {
            total += count(period + offset) + (r - 1) * n;
        }
        total
    }

    /// Time of opportunity number `k` (0-based, counting across repeats).
    pub(crate) fn opportunity_time(&self, k: u64) -> Nanos {
        match self {
            Trace::Opportunities {
                times_ms,
                period_ms,
            } => {
                let n = times_ms.len() as u64;
                (k / n)
                    .saturating_mul(period_ms * MS)
                    .saturating_add(times_ms[(k % n) as usize] * MS)
            }
            Trace::Steps(_) => 0,
        }
    }

    /// Index of the first opportunity strictly after `t` (mm-link serves a packet only at
    /// opportunities after it arrived).
    pub(crate) fn first_opportunity_after(&self, t: Nanos) -> u64 {
        self.count_opportunities(t, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mahimahi_counts_opportunities_and_repeats() {
        let t = Trace::parse("1\n").expect("one line");
        // One opportunity per ms: 12 Mbit/s (the first comes at 1 ms, so the first second has
        // 999).
        assert_eq!(t.per_second_bps(3), [11_988_000, 12_000_000, 12_000_000]);
        let t = Trace::parse("0\n0\n5\n10\n").expect("trace");
        // Period 10 ms; opportunities at 0, 0, 5, 10, then 10, 10, 15, 20, ...
        assert_eq!(t.opportunity_time(3), 10 * MS);
        assert_eq!(t.opportunity_time(4), 10 * MS);
        assert_eq!(t.opportunity_time(6), 15 * MS);
        assert_eq!(t.first_opportunity_after(0), 2);
        assert_eq!(t.opportunity_time(t.first_opportunity_after(0)), 5 * MS);
        assert_eq!(
            t.opportunity_time(t.first_opportunity_after(12 * MS)),
            15 * MS
        );
        assert_eq!(t.bits_in(0, 10 * MS), 3 * 1500 * 8);
        // [10, 20) ms holds the first pass's 10 and the second's 10, 10, 15: each later period
        // carries all 4 lines, as mm-link's loop does.
        assert_eq!(t.bits_in(10 * MS, 20 * MS), 4 * 1500 * 8);
        assert_eq!(t.bits_in(30 * MS, 40 * MS), 4 * 1500 * 8);
        // Counting agrees with the times, everywhere.
        for k in 0..40 {
            let at = t.opportunity_time(k);
            assert!(t.first_opportunity_after(at) > k, "{k}");
            assert!(t.opportunities_before(at) <= k, "{k}");
        }
    }

    #[test]
    fn steps_integrate_and_hold_the_last_rate() {
        let t = Trace::parse("t,rate\n0,8mbit\n1.5,2000000\n").expect("steps");
        assert_eq!(t.per_second_bps(3), [8_000_000, 5_000_000, 2_000_000]);
        assert_eq!(t.bits_in(10_000_000_000, 11_000_000_000), 2_000_000);
    }

    #[test]
    fn bad_traces_name_the_line_and_token() {
        let e = Trace::parse("").expect_err("empty");
        assert!(e.to_string().contains("empty"), "{e}");
        let e = Trace::parse("1\n5\n3\n").expect_err("decreasing");
        assert_eq!((e.line, e.token.as_str()), (3, "3"));
        assert!(e.message.contains("must not decrease"), "{e}");
        let e = Trace::parse("1\n2\nhello\n").expect_err("garbage");
        assert_eq!((e.line, e.token.as_str()), (3, "hello"));
        let e = Trace::parse("0\n0\n").expect_err("zero length");
        assert!(e.message.contains("0 ms"), "{e}");
        let e = Trace::parse("0,1mbit\n2,fast\n").expect_err("bad rate");
        assert_eq!((e.line, e.token.as_str()), (2, "fast"));
        let e = Trace::parse("0,1mbit\n2,0\n").expect_err("ends at zero");
        assert!(e.message.contains("above 0"), "{e}");
        let e = Trace::parse("0,1mbit\n3,2mbit\n2,1mbit\n").expect_err("order");
        assert_eq!((e.line, e.token.as_str()), (3, "2"));
        let e = Trace::parse("1,1mbit\n").expect_err("start");
        assert!(e.message.contains("start at 0"), "{e}");
        let e = Trace::parse("0,1mbit\n-1,1mbit\n").expect_err("negative");
        assert_eq!(e.line, 2);
    }
}
