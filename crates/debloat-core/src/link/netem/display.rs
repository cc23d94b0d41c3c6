//! netem's words printed back, as `tc qdisc show` prints a netem qdisc: the inverse of
//! [`super::spec`]'s parser (a printed emulation parses to the same configuration).

use super::dist::Distribution;
use super::loss::Loss;
use super::random::Prob;
use super::spec::{Emulation, SlotGap};
use crate::link::framing::Framing;
use crate::units::{fmt_size, fmt_time_exact, parse_rate, parse_time};
use std::fmt;

/// A time as tc prints it (three significant digits) when that reads back exactly, else in
/// full: the printed words must parse to the same emulation.
fn fmt_time(ns: u64) -> String {
    let tc = crate::units::fmt_time(ns);
    if parse_time(&tc) == Ok(ns) {
        tc
    } else {
        fmt_time_exact(ns)
    }
}

/// A rate as tc prints it when that reads back exactly, else in bit/s.
fn fmt_rate(bps: u64) -> String {
    let tc = crate::units::fmt_rate(bps);
    if parse_rate(&tc) == Ok(bps) {
        tc
    } else {
        format!("{bps}bit")
    }
}

fn with_corr(word: &str, p: Prob, corr: Prob) -> String {
    if corr.is_set() {
        format!("{word} {} {}", p.percent(), corr.percent())
    } else {
        format!("{word} {}", p.percent())
    }
}

impl fmt::Display for Emulation {
    /// The words that parse back to this emulation (as `tc qdisc show` would print them).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = [self.rate_words(), self.delay_words(), loss_words(self.loss)]
            .into_iter()
            .flatten()
            .collect();
        if self.ecn {
            parts.push("ecn".into());
        }
        if self.duplicate.is_set() {
            parts.push(with_corr("duplicate", self.duplicate, self.duplicate_corr));
        }
        if self.corrupt.is_set() {
            parts.push(with_corr("corrupt", self.corrupt, self.corrupt_corr));
        }
        if self.reorder.is_set() {
            let mut s = with_corr("reorder", self.reorder, self.reorder_corr);
            if self.gap > 1 {
                s += &format!(" gap {}", self.gap);
            }
            parts.push(s);
        }
        parts.extend(self.limit.map(|n| format!("limit {n}")));
        parts.extend(self.seed.map(|s| format!("seed {s}")));
        parts.extend(self.slot.map(slot_words));
        parts.extend(self.buffer.map(|n| format!("buffer {n}")));
        if parts.is_empty() {
            parts.push("none".into());
        }
        write!(f, "{}", parts.join(" "))
    }
}

impl Emulation {
    /// `rate RATE [PACKETOVERHEAD [CELLSIZE CELLOVERHEAD]]`.
    fn rate_words(&self) -> Option<String> {
        let r = self.rate_bps?;
        let fr = self.framing;
        let mut s = format!("rate {}", fmt_rate(r));
        if fr != Framing::default() {
            s += &format!(" {}", fr.overhead);
            if fr.cell_size > 0 || fr.cell_overhead != 0 {
                s += &format!(" {} {}", fr.cell_size, fr.cell_overhead);
            }
        }
        Some(s)
    }

    /// `delay TIME [JITTER [CORRELATION]] [distribution NAME]`.
    fn delay_words(&self) -> Option<String> {
        if self.delay_ns == 0 && self.jitter_ns == 0 {
            return None;
        }
        let mut s = format!("delay {}", fmt_time(self.delay_ns));
        if self.jitter_ns > 0 {
            s += &format!(" {}", fmt_time(self.jitter_ns));
            if self.delay_corr.is_set() {
                s += &format!(" {}", self.delay_corr.percent());
            }
            if self.distribution != Distribution::Uniform {
                s += &format!(" distribution {}", self.distribution.name());
            }
        }
        Some(s)
    }
}

/// The loss model's words.
fn loss_words(loss: Loss) -> Option<String> {
    Some(match loss {
        Loss::None => return None,
        Loss::Random { p, corr } => with_corr("loss", p, corr),
        Loss::State {
            p13,
            p31,
            p32,
            p23,
            p14,
        } => format!(
            "loss state {} {} {} {} {}",
            p13.percent(),
            p31.percent(),
            p32.percent(),
            p23.percent(),
            p14.percent()
        ),
        Loss::Gemodel { p, r, h, k1 } => format!(
            "loss gemodel {} {} {} {}",
            p.percent(),
            r.percent(),
            Prob(u32::MAX - h.0).percent(),
            k1.percent()
        ),
    })
}

/// `slot MIN MAX` or `slot distribution NAME DELAY JITTER`, with its budgets.
fn slot_words(slot: super::spec::Slot) -> String {
    let mut s = match slot.gap {
        SlotGap::Uniform { min_ns, max_ns } => {
            format!("slot {} {}", fmt_time(min_ns), fmt_time(max_ns))
        }
        SlotGap::Distribution {
            dist,
            delay_ns,
            jitter_ns,
        } => format!(
            "slot distribution {} {} {}",
            dist.name(),
            fmt_time(delay_ns),
            fmt_time(jitter_ns)
        ),
    };
    if let Some(n) = slot.packets {
        s += &format!(" packets {n}");
    }
    if let Some(n) = slot.bytes {
        s += &format!(" bytes {}", fmt_size(u64::from(n)));
    }
    s
}
