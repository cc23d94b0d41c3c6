//! netem's words for the emulated link behind a discipline, parsed as
//! `tc qdisc add … netem <words>` parses them (iproute2's q_netem.c):
//!
//! ```text
//! rate RATE [PACKETOVERHEAD [CELLSIZE [CELLOVERHEAD]]]
//! delay TIME [JITTER [CORRELATION]]  distribution {uniform|normal|pareto|paretonormal}
//! loss [random] PERCENT [CORRELATION]
//! loss state P13 [P31 [P32 [P23 [P14]]]]
//! loss gemodel P [R [1-H [1-K]]]
//! duplicate PERCENT [CORRELATION]    corrupt PERCENT [CORRELATION]
//! reorder PERCENT [CORRELATION] [gap DISTANCE]
//! ecn    limit PACKETS    seed SEED
//! slot MIN [MAX] [packets N] [bytes N]
//! slot distribution {uniform|normal|pareto|paretonormal} DELAY JITTER [packets N] [bytes N]
//! buffer PACKETS                      (debloat's word, not netem's: see below)
//! ```
//!
//! Percentages are written `0.5%` or `0.5` (both mean half a percent, as in tc). A word's
//! optional numbers are taken while the next token starts with a digit, as tc does. `jitter
//! TIME` (debloat's) is the same as `delay`'s second number; `drop` and `latency` are tc's
//! aliases of `loss` and `delay`. `slot distribution uniform` (tc has no table file for it) is
//! uniform over DELAY ± JITTER, as `delay`'s uniform jitter is.
//!
//! Differences from netem, on purpose (see [`super`] for where each applies):
//! - `limit` has no default: the discipline in front is the queue, and the emulated wire holds
//!   only what is in flight; netem's default of 1000 packets is a known trap (silent drops once
//!   rate × delay passes it). Give `limit 1000` to get netem's behaviour.
//! - jitter never reorders (each frame leaves no earlier than the one before, as netem does
//!   when `rate` is set); ask for reordering with `reorder`.
//!
//! `buffer N` gives the link a drop-tail buffer of its own, N packets, between the discipline
//! and the wire, as a cable or DSL modem has: the discipline then hands frames on at once and
//! the queue forms in the buffer, unless the discipline shapes below the link's rate (the
//! situation SQM exists for). Without it the discipline is the link's only queue.

use super::dist::Distribution;
use super::loss::Loss;
use super::random::Prob;
use crate::link::framing::Framing;
use crate::units::{fmt_time, parse_rate, parse_size, parse_time};

/// netem's `slot`: the wire hands frames out in bursts, one burst ("slot") at a time, the next
/// slot opening a random time after the previous one closed, as Wi-Fi aggregation, DOCSIS
/// request-grant cycles or LTE scheduling do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    /// The time between slots.
    pub gap: SlotGap,
    /// Frames per slot at most (None: no limit).
    pub packets: Option<u32>,
    /// Bytes per slot at most (None: no limit); the frame that crosses it still goes.
    pub bytes: Option<u32>,
}

/// How long until the next slot opens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotGap {
    /// Uniform in [min, max), ns (`slot MIN [MAX]`; MAX defaults to MIN).
    Uniform {
        /// Shortest, ns.
        min_ns: u64,
        /// Longest, ns.
        max_ns: u64,
    },
    /// `slot distribution NAME DELAY JITTER`.
    Distribution {
        /// Shape.
        dist: Distribution,
        /// Mean, ns.
        delay_ns: u64,
        /// Spread, ns (above 0).
        jitter_ns: u64,
    },
}

/// An emulated link: what netem would do to the frames a discipline sends.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Emulation {
    /// Link rate, bit/s (None: the link never limits).
    pub rate_bps: Option<u64>,
    /// Per-packet and per-cell overhead the rate counts.
    pub framing: Framing,
    /// Mean one-way delay added after serialisation, ns.
    pub delay_ns: u64,
    /// Spread of the delay, ns (`delay 20ms 2ms`: uniform 18–22 ms unless a distribution is named).
    pub jitter_ns: u64,
    /// Correlation of consecutive delays.
    pub delay_corr: Prob,
    /// Shape of the delay's spread.
    pub distribution: Distribution,
    /// Loss model.
    pub loss: Loss,
    /// Mark ECN-capable packets CE instead of losing them.
    pub ecn: bool,
    /// Probability a frame is sent twice.
    pub duplicate: Prob,
    /// Correlation of consecutive duplications.
    pub duplicate_corr: Prob,
    /// Probability one bit of a frame is flipped.
    pub corrupt: Prob,
    /// Correlation of consecutive corruptions.
    pub corrupt_corr: Prob,
    /// Probability a frame skips the delay (sent at once, ahead of delayed frames).
    pub reorder: Prob,
    /// Correlation of consecutive reorder decisions.
    pub reorder_corr: Prob,
    /// Reorder at most one frame in `gap` (tc sets 1 when `reorder` is given alone).
    pub gap: u32,
    /// Frames the emulated wire holds at most (None: no limit; see the module docs).
    pub limit: Option<u32>,
    /// Seed of the emulation's randomness (None: from the gateway's `--seed`).
    pub seed: Option<u64>,
    /// The link's own drop-tail buffer behind the discipline, packets (debloat's word).
    pub buffer: Option<u32>,
    /// Frames leave the wire in slots (netem's `slot`).
    pub slot: Option<Slot>,
}

impl Emulation {
    /// A plain link at `rate_bps` (None: never limits), nothing else.
    pub fn rate(rate_bps: Option<u64>) -> Emulation {
        Emulation {
            rate_bps,
            ..Emulation::default()
        }
    }
}

/// A spec that does not parse: the bad token and what was expected.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("emulation spec: {0}")]
pub struct EmulateError(pub String);

const WORD_LIST: [&str; 14] = [
    "rate",
    "delay",
    "jitter",
    "distribution",
    "loss",
    "duplicate",
    "corrupt",
    "reorder",
    "gap",
    "ecn",
    "limit",
    "seed",
    "slot",
    "buffer",
];

fn err<T>(msg: String) -> Result<T, EmulateError> {
    Err(EmulateError(msg))
}

/// A cursor over the spec's tokens.
struct Words<'a> {
    toks: Vec<&'a str>,
    i: usize,
}

impl<'a> Words<'a> {
    fn next(&mut self) -> Option<&'a str> {
        let t = self.toks.get(self.i).copied();
        self.i += 1;
        t
    }

    fn need(&mut self, what: &str, example: &str) -> Result<&'a str, EmulateError> {
        self.next()
            .ok_or_else(|| EmulateError(format!("`{what}` needs a value, e.g. {what} {example}")))
    }

    /// The next token, if it is a number (tc's `NEXT_IS_NUMBER`: starts with a digit).
    fn number(&mut self, signed: bool) -> Option<&'a str> {
        let t = self.toks.get(self.i)?;
        let c = t.chars().next()?;
        if c.is_ascii_digit() || (signed && c == '-') {
            self.i += 1;
            Some(t)
        } else {
            None
        }
    }

    fn percent(&mut self, what: &str) -> Result<Prob, EmulateError> {
        let t = self.need(what, "0.5%")?;
        percent(t, what)
    }

    /// An optional percentage (a correlation or a model's further parameter).
    fn maybe_percent(&mut self, what: &str) -> Result<Option<Prob>, EmulateError> {
        self.number(false).map(|t| percent(t, what)).transpose()
    }
}

fn percent(t: &str, what: &str) -> Result<Prob, EmulateError> {
    let v: f64 = match t.strip_suffix('%').unwrap_or(t).parse() {
        Ok(v) => v,
        Err(_) => return err(format!("`{what} {t}`: expected a percentage, e.g. 0.5%")),
    };
    if !(0.0..=100.0).contains(&v) {
        return err(format!("`{what} {t}`: must be 0–100%"));
    }
    Ok(Prob::from_fraction(v / 100.0))
}

fn time(t: &str, what: &str) -> Result<u64, EmulateError> {
    parse_time(t).map_err(|e| EmulateError(format!("`{what} {t}`: {e}")))
}

fn integer<T: std::str::FromStr>(t: &str, what: &str) -> Result<T, EmulateError> {
    t.parse()
        .map_err(|_| EmulateError(format!("`{what} {t}`: expected a whole number")))
}

impl std::str::FromStr for Emulation {
    type Err = EmulateError;
    fn from_str(s: &str) -> Result<Emulation, EmulateError> {
        let mut w = Words {
            toks: s.split_whitespace().collect(),
            i: 0,
        };
        let mut e = Emulation::default();
        if w.toks.first() == Some(&"netem") {
            w.i = 1;
        }
        // How an emulation without words prints (`none`) reads back.
        if w.toks[w.i..] == ["none"] {
            return Ok(e);
        }
        let mut given = Given::default();
        while let Some(word) = w.next() {
            word_into(word, &mut w, &mut e, &mut given)?;
        }
        check(e, given)
    }
}

/// Words whose presence iproute2's final checks look at.
#[derive(Default)]
struct Given {
    reorder: bool,
    gap: bool,
    distribution: bool,
}

/// One word of the spec (and its numbers) into `e`.
fn word_into(
    word: &str,
    w: &mut Words,
    e: &mut Emulation,
    given: &mut Given,
) -> Result<(), EmulateError> {
    match word {
        "rate" => rate(w, e)?,
        "delay" | "latency" => {
            e.delay_ns = time(w.need(word, "20ms")?, word)?;
            if let Some(t) = w.number(false) {
                e.jitter_ns = time(t, "delay … jitter")?;
                if let Some(c) = w.maybe_percent("delay … correlation")? {
                    e.delay_corr = c;
                }
            }
        }
        "jitter" => {
            e.jitter_ns = time(w.need("jitter", "2ms")?, "jitter")?;
            if let Some(c) = w.maybe_percent("jitter … correlation")? {
                e.delay_corr = c;
            }
        }
        "distribution" => {
            let t = w.need("distribution", "normal")?;
            e.distribution = Distribution::from_name(t).ok_or_else(|| {
                EmulateError(format!(
                    "unknown distribution `{t}`: expected one of {}",
                    Distribution::NAMES
                ))
            })?;
            given.distribution = true;
        }
        "loss" | "drop" => e.loss = loss(w)?,
        "duplicate" => (e.duplicate, e.duplicate_corr) = with_correlation(w, "duplicate")?,
        "corrupt" => (e.corrupt, e.corrupt_corr) = with_correlation(w, "corrupt")?,
        "reorder" => {
            (e.reorder, e.reorder_corr) = with_correlation(w, "reorder")?;
            given.reorder = true;
        }
        "gap" => {
            e.gap = integer(w.need("gap", "5")?, "gap")?;
            given.gap = true;
        }
        "ecn" => e.ecn = true,
        "limit" => e.limit = Some(packets(w, "limit")?),
        "seed" => e.seed = Some(integer(w.need("seed", "42")?, "seed")?),
        "buffer" => e.buffer = Some(packets(w, "buffer")?),
        "slot" => e.slot = Some(slot(w)?),
        other => {
            let near = crate::qdisc::words::nearest(other, &WORD_LIST)
                .map(|w| format!(" (did you mean `{w}`?)"))
                .unwrap_or_default();
            return err(format!(
                "unknown word `{other}`{near}: expected one of {}",
                WORD_LIST.join(", ")
            ));
        }
    }
    Ok(())
}

/// `rate RATE [PACKETOVERHEAD [CELLSIZE [CELLOVERHEAD]]]`.
fn rate(w: &mut Words, e: &mut Emulation) -> Result<(), EmulateError> {
    let t = w.need("rate", "10Mbit")?;
    let r = parse_rate(t).map_err(|x| EmulateError(format!("`rate {t}`: {x}")))?;
    if r == 0 {
        return err("`rate` must be above 0".into());
    }
    e.rate_bps = Some(r);
    if let Some(t) = w.number(true) {
        e.framing.overhead = integer(t, "rate … packetoverhead")?;
        if let Some(t) = w.number(false) {
            e.framing.cell_size = integer(t, "rate … cellsize")?;
            if let Some(t) = w.number(true) {
                e.framing.cell_overhead = integer(t, "rate … celloverhead")?;
            }
        }
    }
    Ok(())
}

/// `WORD PERCENT [CORRELATION]`.
fn with_correlation(w: &mut Words, word: &str) -> Result<(Prob, Prob), EmulateError> {
    let p = w.percent(word)?;
    let corr = w
        .maybe_percent(&format!("{word} … correlation"))?
        .unwrap_or_default();
    Ok((p, corr))
}

/// A count of packets, at least one.
fn packets(w: &mut Words, word: &str) -> Result<u32, EmulateError> {
    let n: u32 = integer(w.need(word, "1000")?, word)?;
    if n == 0 {
        return err(format!("`{word}` must be at least 1 packet"));
    }
    Ok(n)
}

/// iproute2's checks on the whole spec, with its reasons.
fn check(mut e: Emulation, given: Given) -> Result<Emulation, EmulateError> {
    if given.reorder && e.reorder.is_set() {
        if e.delay_ns == 0 {
            return err(
                "`reorder` is not possible without some delay: add e.g. `delay 10ms`".into(),
            );
        }
        if e.gap == 0 {
            e.gap = 1;
        }
    } else if given.gap && e.gap > 0 {
        return err("`gap` given without a reorder probability: add e.g. `reorder 25%`".into());
    }
    if given.distribution && (e.delay_ns == 0 || e.jitter_ns == 0) {
        return err(
            "`distribution` needs a delay and a jitter: e.g. `delay 20ms 2ms distribution normal`"
                .into(),
        );
    }
    if e.buffer.is_some() && e.rate_bps.is_none() {
        return err("`buffer` needs a `rate`: the buffer drains at the link's rate".into());
    }
    if e.ecn && e.loss == Loss::None {
        return err("`ecn` given without a loss model: add e.g. `loss 1%`".into());
    }
    // A correlation without its probability (or a delay correlation without jitter) changes
    // nothing, and is not printed: drop it, so the words print back to what they mean.
    for (p, c) in [
        (e.duplicate, &mut e.duplicate_corr),
        (e.corrupt, &mut e.corrupt_corr),
        (e.reorder, &mut e.reorder_corr),
    ] {
        if !p.is_set() {
            *c = Prob::default();
        }
    }
    if e.jitter_ns == 0 {
        e.delay_corr = Prob::default();
    }
    Ok(e)
}

/// `slot MIN [MAX] | slot distribution NAME DELAY JITTER`, then `[packets N] [bytes N]` in
/// that order (after the word `slot`), with iproute2's checks.
fn slot(w: &mut Words) -> Result<Slot, EmulateError> {
    let gap = if let Some(t) = w.number(false) {
        let min_ns = time(t, "slot")?;
        let max_ns = match w.number(false) {
            Some(t) => time(t, "slot … max")?,
            None => min_ns,
        };
        if max_ns < min_ns {
            return err(format!(
                "`slot {t} {}`: the longest gap is shorter than the shortest",
                fmt_time(max_ns)
            ));
        }
        SlotGap::Uniform { min_ns, max_ns }
    } else {
        match w.next() {
            Some("distribution") => {
                let name = w.need("slot distribution", "normal 10ms 2ms")?;
                let dist = Distribution::from_name(name).ok_or_else(|| {
                    EmulateError(format!(
                        "unknown slot distribution `{name}`: expected one of {}",
                        Distribution::NAMES
                    ))
                })?;
                let delay_ns = time(w.need("slot distribution … delay", "10ms")?, "slot delay")?;
                let jitter_ns = time(w.need("slot distribution … jitter", "2ms")?, "slot jitter")?;
                if jitter_ns == 0 {
                    return err("`slot distribution` needs a jitter above 0".into());
                }
                SlotGap::Distribution {
                    dist,
                    delay_ns,
                    jitter_ns,
                }
            }
            Some(t) => {
                return err(format!(
                "`slot {t}`: expected a time (slot MIN [MAX], e.g. slot 1ms 5ms) or `distribution`"
            ))
            }
            None => return err("`slot` needs a value, e.g. slot 1ms 5ms".into()),
        }
    };
    let mut slot = Slot {
        gap,
        packets: None,
        bytes: None,
    };
    if w.toks.get(w.i) == Some(&"packets") {
        w.i += 1;
        let n: u32 = integer(w.need("slot … packets", "32")?, "slot … packets")?;
        slot.packets = (n > 0).then_some(n);
    }
    if w.toks.get(w.i) == Some(&"bytes") {
        w.i += 1;
        let t = w.need("slot … bytes", "64kb")?;
        let n = parse_size(t).map_err(|e| EmulateError(format!("`slot … bytes {t}`: {e}")))?;
        let n = u32::try_from(n)
            .ok()
            .filter(|&n| n <= i32::MAX as u32)
            .ok_or_else(|| EmulateError(format!("`slot … bytes {t}`: at most 2 GB")))?;
        slot.bytes = (n > 0).then_some(n);
    }
    Ok(slot)
}

/// `loss [random] P [CORR]`, `loss state …`, `loss gemodel …` (after the word `loss`).
fn loss(w: &mut Words) -> Result<Loss, EmulateError> {
    match w.toks.get(w.i).copied() {
        Some("state") => {
            w.i += 1;
            let p13 = w.percent("loss state p13")?;
            let mut m = (
                p13,
                Prob(u32::MAX - p13.0),
                Prob::ZERO,
                Prob::ONE,
                Prob::ZERO,
            );
            if let Some(v) = w.maybe_percent("loss state p31")? {
                m.1 = v;
                if let Some(v) = w.maybe_percent("loss state p32")? {
                    m.2 = v;
                    if let Some(v) = w.maybe_percent("loss state p23")? {
                        m.3 = v;
                        if let Some(v) = w.maybe_percent("loss state p14")? {
                            m.4 = v;
                        }
                    }
                }
            }
            Ok(Loss::State {
                p13: m.0,
                p31: m.1,
                p32: m.2,
                p23: m.3,
                p14: m.4,
            })
        }
        Some("gemodel") => {
            w.i += 1;
            let p = w.percent("loss gemodel p")?;
            let mut r = Prob(u32::MAX - p.0);
            // tc's third number is 1-h (the loss in Bad); the model holds h.
            let mut h = Prob::ZERO;
            let mut k1 = Prob::ZERO;
            if let Some(v) = w.maybe_percent("loss gemodel r")? {
                r = v;
                if let Some(v) = w.maybe_percent("loss gemodel 1-h")? {
                    h = Prob(u32::MAX - v.0);
                    if let Some(v) = w.maybe_percent("loss gemodel 1-k")? {
                        k1 = v;
                    }
                }
            }
            Ok(Loss::Gemodel { p, r, h, k1 })
        }
        Some("random") => {
            w.i += 1;
            random_loss(w)
        }
        _ => random_loss(w),
    }
}

fn random_loss(w: &mut Words) -> Result<Loss, EmulateError> {
    let p = w.percent("loss")?;
    let corr = w.maybe_percent("loss … correlation")?.unwrap_or_default();
    Ok(if p.is_set() {
        Loss::Random { p, corr }
    } else {
        Loss::None
    })
}

#[cfg(test)]
mod tests;
