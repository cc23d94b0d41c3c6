//! The queue in front of a link whose capacity follows a trace: a drop-tail FIFO of N packets
//! or bytes drained as the trace allows — mahimahi's `mm-link` with its `droptail` queue, the
//! buffer of an LTE modem or a cable node that no AQM reaches.
//!
//! Sans-IO and without storing packets: the FIFO serves in order and the trace is known, so a
//! packet's departure is fixed the moment it enters ([`Modem::admit`]); the link places it on
//! the wire for that time. What the FIFO holds at `t` is what entered and departs after `t`.
//!
//! Service, as mm-link does it for a mahimahi trace: each delivery opportunity carries 1504
//! bytes; a packet costs its IP length plus 4 (a full-size packet is one opportunity, a
//! larger one spans several, small ones share); a packet is served only by opportunities
//! after it entered (mm-link burns those at or before the arrival's millisecond first); bytes
//! of an opportunity nobody was queued for are lost. For a step trace the FIFO is a server at
//! the current rate, the rate changing mid-packet where a step falls.
//!
//! Deviation: mm-link counts in whole milliseconds; here times are nanoseconds, so "after it
//! entered" is exact rather than "in a later millisecond".

use super::trace::{Trace, OPPORTUNITY_BYTES};
use crate::packet::{Nanos, PacketMeta};
use crate::qdisc::fifo::Limit;
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::Arc;

/// What the modem did.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct ModemCounters {
    /// Packets that entered the FIFO.
    pub admitted: u64,
    /// Packets dropped because the FIFO was full.
    pub dropped: u64,
    /// Most packets the FIFO held at once.
    pub max_packets: u64,
}

/// A modem as configured: its trace and its FIFO's limit (what `rate trace FILE buffer N`
/// says). Cheap to clone: the trace is shared.
#[derive(Clone, Debug)]
pub struct ModemSpec {
    /// The capacity trace.
    pub trace: Arc<Trace>,
    /// The FIFO's limit.
    pub limit: Limit,
}

/// The FIFO's size when the words name none: 1000 packets, Linux's default `txqueuelen`
/// (mm-link's own default queue is unbounded).
pub const DEFAULT_LIMIT: Limit = Limit::Packets(1000);

impl ModemSpec {
    /// A fresh modem for this spec.
    pub fn build(&self) -> Modem {
        Modem::new(self.trace.clone(), self.limit)
    }
}

/// A modem FIFO's size as users write it: N packets (a whole number above 0), or bytes in tc's
/// size words (`150kb`, `64KB`), at most 4 GB.
pub fn parse_limit(word: &str) -> Result<Limit, String> {
    if let Ok(n) = word.parse::<u32>() {
        if n > 0 {
            return Ok(Limit::Packets(n));
        }
    }
    let bytes = crate::units::parse_size(word)
        .map_err(|e| format!("{e} (N packets, or a size such as 150kb)"))?;
    let bytes = u32::try_from(bytes).map_err(|_| "at most 4gb".to_string())?;
    Ok(Limit::Bytes(bytes.max(1)))
}

/// Netem-style words with a trace in them, split: `rate trace FILE` (and its `buffer N` or
/// `buffer SIZE`: the modem's FIFO, packets or bytes) taken out, the rest left for
/// [`super::Emulation`]'s parser. Returns the rest, and the trace's file name with the limit
/// when there is one. The caller reads the file ([`Trace::parse`]).
pub fn split_trace_words(words: &str) -> Result<(String, Option<(String, Limit)>), String> {
    let toks: Vec<&str> = words.split_whitespace().collect();
    let Some(at) = toks.windows(2).position(|w| w == ["rate", "trace"]) else {
        return Ok((words.to_string(), None));
    };
    let file = toks.get(at + 2).ok_or(
        "`rate trace` needs a file: `rate trace FILE` (mahimahi's format or `seconds,rate` lines)",
    )?;
    let mut rest: Vec<&str> = toks[..at].iter().chain(&toks[at + 3..]).copied().collect();
    if rest.contains(&"rate") {
        return Err("`rate trace FILE` and a fixed `rate` cannot both be given".into());
    }
    let mut limit = DEFAULT_LIMIT;
    if let Some(b) = rest.iter().position(|&w| w == "buffer") {
        let v = rest
            .get(b + 1)
            .copied()
            .ok_or("`buffer` needs a size: N packets, or bytes such as 150kb")?;
        limit = parse_limit(v).map_err(|e| format!("`buffer {v}`: {e}"))?;
        rest.drain(b..b + 2);
    }
    Ok((rest.join(" "), Some(((*file).to_string(), limit))))
}

/// A trace-driven link's FIFO.
#[derive(Clone, Debug)]
pub struct Modem {
    trace: Arc<Trace>,
    limit: Limit,
    /// (departure, bytes) of the packets inside, in order.
    inside: VecDeque<(Nanos, u32)>,
    inside_bytes: u64,
    /// The next opportunity no packet has used.
    next_opp: u64,
    /// Bytes left in the last opportunity used, and its time.
    credit: u64,
    credit_at: Nanos,
    /// Steps: when the server finishes the last packet.
    free_at: Nanos,
    counters: ModemCounters,
}

impl Modem {
    /// A FIFO of `limit` drained by `trace`.
    pub fn new(trace: Arc<Trace>, limit: Limit) -> Modem {
        Modem {
            trace,
            limit,
            inside: VecDeque::new(),
            inside_bytes: 0,
            next_opp: 0,
            credit: 0,
            credit_at: 0,
            free_at: 0,
            counters: ModemCounters::default(),
        }
    }

    /// The trace.
    pub fn trace(&self) -> &Arc<Trace> {
        &self.trace
    }

    /// The FIFO's limit.
    pub fn limit(&self) -> Limit {
        self.limit
    }

    /// Counters.
    pub fn counters(&self) -> ModemCounters {
        self.counters
    }

    /// Packets that have left by `now`: admitted, less those still inside. (Dropped packets
    /// never entered: offered = admitted + dropped; admitted = departed + inside.)
    pub fn departed(&self, now: Nanos) -> u64 {
        self.counters.admitted - self.occupancy(now).0 as u64
    }

    /// Packets and bytes inside at `now` (those departing after `now`).
    pub fn occupancy(&self, now: Nanos) -> (usize, u64) {
        self.inside
            .iter()
            .filter(|x| x.0 > now)
            .fold((0, 0), |(n, b), x| (n + 1, b + u64::from(x.1)))
    }

    fn forget_departed(&mut self, now: Nanos) {
        while let Some(&(d, b)) = self.inside.front() {
            if d > now {
                break;
            }
            self.inside.pop_front();
            self.inside_bytes -= u64::from(b);
        }
    }

    /// A packet reaches the FIFO at `at` (`wire_len`: its length as the link's framing counts
    /// it, used by a step trace). Returns when it leaves the link, or None when the full FIFO
    /// drops it.
    pub fn admit(&mut self, meta: &PacketMeta, wire_len: u64, at: Nanos) -> Option<Nanos> {
        self.forget_departed(at);
        let bytes = meta.len;
        let full = match self.limit {
            Limit::Packets(n) => self.inside.len() >= n as usize,
            Limit::Bytes(b) => self.inside_bytes + u64::from(bytes) > u64::from(b),
        };
        if full {
            self.counters.dropped += 1;
            return None;
        }
        let depart = match self.trace.as_ref() {
            Trace::Opportunities { .. } => {
                let ip = u64::from(bytes.saturating_sub(u32::from(meta.network_offset)));
                self.serve_opportunities(ip + 4, at)
            }
            Trace::Steps(_) => self.serve_steps(wire_len * 8, at),
        };
        self.inside.push_back((depart, bytes));
        self.inside_bytes += u64::from(bytes);
        self.counters.admitted += 1;
        self.counters.max_packets = self.counters.max_packets.max(self.inside.len() as u64);
        Some(depart)
    }

    fn serve_opportunities(&mut self, mut need: u64, at: Nanos) -> Nanos {
        if at >= self.credit_at {
            // The rest of that opportunity went by with nobody queued for it.
            self.credit = 0;
        }
        let take = self.credit.min(need);
        self.credit -= take;
        need -= take;
        while need > 0 {
            let k = self.next_opp.max(self.trace.first_opportunity_after(at));
            self.next_opp = k + 1;
            self.credit_at = self.trace.opportunity_time(k);
            let take = OPPORTUNITY_BYTES.min(need);
            self.credit = OPPORTUNITY_BYTES - take;
            need -= take;
        }
        self.credit_at
    }

    fn serve_steps(&mut self, bits: u64, at: Nanos) -> Nanos {
        let Trace::Steps(steps) = self.trace.as_ref() else {
            return at;
        };
        let mut t = at.max(self.free_at);
        let mut left = u128::from(bits);
        let mut i = steps.partition_point(|s| s.0 <= t).saturating_sub(1);
        loop {
            let (rate, end) = (steps[i].1, steps.get(i + 1).map(|s| s.0));
            if rate > 0 {
                let need_ns = (left * 1_000_000_000).div_ceil(u128::from(rate));
                match end {
                    Some(e) if u128::from(t) + need_ns > u128::from(e) => {
                        left -= u128::from(e - t) * u128::from(rate) / 1_000_000_000;
                    }
                    _ => {
                        t += need_ns as Nanos;
                        break;
                    }
                }
            }
            // The last step holds for ever and is above 0 (the parser insists), so this ends.
            t = end.unwrap_or(t);
            i += 1;
        }
        self.free_at = t;
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::udp_flow;

    fn meta(len: u32) -> PacketMeta {
        PacketMeta::new(len, udp_flow(1, 2, 3))
    }

    fn modem(text: &str, limit: Limit) -> Modem {
        Modem::new(Arc::new(Trace::parse(text).expect("trace")), limit)
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn full_packets_take_one_opportunity_each_small_ones_share() {
        let mut m = modem("1\n2\n3\n4\n", Limit::Packets(10));
        // Full-size frames (1514 B with a 14-byte Ethernet header = 1500 B IP + 4).
        assert_eq!(m.admit(&meta(1514), 0, 0), Some(MS));
        assert_eq!(m.admit(&meta(1514), 0, 0), Some(2 * MS));
        // Two 700-byte IP packets share an opportunity: 704 + 704 ≤ 1504.
        assert_eq!(m.admit(&meta(714), 0, 0), Some(3 * MS));
        assert_eq!(m.admit(&meta(714), 0, 0), Some(3 * MS));
        // A third spills into the next one.
        assert_eq!(m.admit(&meta(714), 0, 0), Some(4 * MS));
    }

    #[test]
    fn unused_opportunities_are_lost_and_only_later_ones_serve() {
        let mut m = modem("1\n2\n3\n4\n", Limit::Packets(10));
        assert_eq!(m.admit(&meta(114), 0, 0), Some(MS));
        // Arriving exactly at 2 ms: the opportunity at 2 ms went by; the next is 3 ms.
        assert_eq!(m.admit(&meta(114), 0, 2 * MS), Some(3 * MS));
        // The trace repeats with period 4 ms: 5, 6, 7, 8 ms.
        assert_eq!(m.admit(&meta(1514), 0, 4 * MS), Some(5 * MS));
    }

    #[test]
    fn a_full_fifo_drops_and_frees_as_packets_leave() {
        let mut m = modem("10\n20\n30\n40\n", Limit::Packets(2));
        assert!(m.admit(&meta(1514), 0, 0).is_some());
        assert!(m.admit(&meta(1514), 0, 0).is_some());
        assert_eq!(m.admit(&meta(1514), 0, 0), None);
        assert_eq!(m.occupancy(15 * MS), (1, 1514));
        assert_eq!(m.admit(&meta(1514), 0, 15 * MS), Some(30 * MS));
        let c = m.counters();
        assert_eq!((c.admitted, c.dropped, c.max_packets), (3, 1, 2));
        let mut b = modem("10\n", Limit::Bytes(3000));
        assert!(b.admit(&meta(1500), 0, 0).is_some());
        assert!(b.admit(&meta(1500), 0, 0).is_some());
        assert_eq!(b.admit(&meta(1), 0, 0), None);
    }

    #[test]
    fn trace_words_come_out_of_netems() {
        let (rest, t) = split_trace_words("delay 20ms rate trace a.mahi buffer 200").expect("ok");
        assert_eq!(rest, "delay 20ms");
        assert_eq!(t, Some(("a.mahi".to_string(), Limit::Packets(200))));
        let (_, t) = split_trace_words("rate trace a.csv buffer 150kb").expect("ok");
        assert_eq!(t.map(|x| x.1), Some(Limit::Bytes(150 * 1024)));
        let (rest, t) = split_trace_words("rate 10mbit buffer 50").expect("ok");
        assert_eq!((rest.as_str(), t), ("rate 10mbit buffer 50", None));
        assert_eq!(
            split_trace_words("rate trace x")
                .expect("ok")
                .1
                .map(|x| x.1),
            Some(DEFAULT_LIMIT)
        );
        assert!(split_trace_words("rate trace")
            .expect_err("no file")
            .contains("needs a file"));
        assert!(split_trace_words("rate trace x rate 5mbit").is_err());
        assert!(split_trace_words("rate trace x buffer lots")
            .expect_err("size")
            .contains("lots"));
    }

    #[test]
    fn steps_serve_at_the_rate_and_change_mid_packet() {
        let mut m = modem("0,8mbit\n0.001,4mbit\n", Limit::Packets(10));
        // 500 B at 8 Mbit/s = 0.5 ms.
        assert_eq!(m.admit(&meta(500), 500, 0), Some(MS / 2));
        // 1000 B: 500 B by 1 ms at 8 Mbit/s, the other 500 B at 4 Mbit/s = 1 ms more.
        assert_eq!(m.admit(&meta(1000), 1000, 0), Some(2 * MS));
    }

    #[test]
    fn a_real_trace_carries_its_stated_mean() {
        let text = include_str!("../../../../data/link-traces/Verizon-LTE-short.down.mahi");
        let t = Trace::parse(text).expect("trace");
        let mean = t.bits_in(0, t.length()) as f64 / (t.length() as f64 / 1e9) / 1e6;
        assert!((mean - 5.03).abs() < 0.01, "{mean} Mbit/s");
    }
}
