//! Capacity traces on the command line: `--link trace:FILE/…` for the simulator and
//! `rate trace FILE` in the gateway's emulation words (docs/link-traces.md).

use anyhow::{Context, Result};
use debloat_core::link::{split_trace_words, ModemSpec, Trace};
use debloat_core::qdisc::fifo::Limit;
use std::path::Path;
use std::sync::Arc;

/// The rate of the interface in front of a trace-driven modem (the simulator's transmitter on
/// that direction): far above any trace, so the queue forms in the modem or the discipline.
pub const INTERFACE_BPS: u64 = 1_000_000_000;

/// Read a trace file (mahimahi's format or `seconds,rate` lines).
pub fn load(path: &Path) -> Result<Arc<Trace>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the capacity trace {}", path.display()))?;
    let t = Trace::parse(&text).with_context(|| format!("capacity trace {}", path.display()))?;
    Ok(Arc::new(t))
}

/// A modem's FIFO limit: N packets, or a size such as 150kb.
pub fn limit(word: &str) -> Result<Limit> {
    debloat_core::link::parse_limit(word).map_err(|e| anyhow::anyhow!("`{word}`: {e}"))
}

/// One half of `--link`: a rate, or `trace:FILE` (then the interface's rate and a modem).
pub fn link_side(word: &str, buffer: Limit) -> Result<(u64, Option<ModemSpec>)> {
    match word.strip_prefix("trace:") {
        Some(file) => Ok((
            INTERFACE_BPS,
            Some(ModemSpec {
                trace: load(Path::new(file))?,
                limit: buffer,
            }),
        )),
        None => Ok((
            debloat_core::units::parse_rate(word).map_err(anyhow::Error::msg)?,
            None,
        )),
    }
}

/// Emulation words that may hold `rate trace FILE [buffer N]`: the rest, and the modem.
pub fn emulation_words(words: &str) -> Result<(String, Option<ModemSpec>)> {
    let (rest, t) = split_trace_words(words).map_err(anyhow::Error::msg)?;
    let modem = match t {
        None => None,
        Some((file, limit)) => Some(ModemSpec {
            trace: load(Path::new(&file))?,
            limit,
        }),
    };
    Ok((rest, modem))
}
