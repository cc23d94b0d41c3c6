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

/// The traces debloat ships (data/link-traces, docs/link-traces.md), embedded in the binary so
/// that `data/link-traces/NAME` — the examples', the reproductions' and `autorate compare`'s
/// defaults — works from any directory and from the installed package.
const SHIPPED: [(&str, &str); 6] = [
    (
        "Verizon-LTE-short.down.mahi",
        include_str!("../../../data/link-traces/Verizon-LTE-short.down.mahi"),
    ),
    (
        "Verizon-LTE-short.up.mahi",
        include_str!("../../../data/link-traces/Verizon-LTE-short.up.mahi"),
    ),
    (
        "TMobile-LTE-short.down.mahi",
        include_str!("../../../data/link-traces/TMobile-LTE-short.down.mahi"),
    ),
    (
        "TMobile-LTE-short.up.mahi",
        include_str!("../../../data/link-traces/TMobile-LTE-short.up.mahi"),
    ),
    (
        "ATT-LTE-driving-2016.down.mahi",
        include_str!("../../../data/link-traces/ATT-LTE-driving-2016.down.mahi"),
    ),
    (
        "ATT-LTE-driving-2016.up.mahi",
        include_str!("../../../data/link-traces/ATT-LTE-driving-2016.up.mahi"),
    ),
];

/// A trace file's text: the file if it exists; else, for a path ending in
/// `link-traces/NAME` of a shipped trace, the embedded copy.
fn read(path: &Path) -> Result<String> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(t),
        Err(e) => {
            let shipped = path
                .parent()
                .and_then(Path::file_name)
                .is_some_and(|d| d == "link-traces")
                .then(|| path.file_name())
                .flatten()
                .and_then(|n| SHIPPED.iter().find(|(name, _)| n == *name));
            match (e.kind(), shipped) {
                (std::io::ErrorKind::NotFound, Some((_, text))) => Ok((*text).to_string()),
                _ => {
                    Err(e).with_context(|| format!("reading the capacity trace {}", path.display()))
                }
            }
        }
    }
}

/// Read a trace file (mahimahi's format or `seconds,rate` lines).
pub fn load(path: &Path) -> Result<Arc<Trace>> {
    let text = read(path)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The shipped traces load from any directory (a path that does not exist here), equal to
    /// the repository's files; other missing files stay errors.
    #[test]
    fn the_shipped_traces_load_from_anywhere() {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/link-traces");
        for (name, _) in SHIPPED {
            let far = Path::new("/nonexistent/data/link-traces").join(name);
            let a = load(&far).expect("embedded");
            let b = load(&repo.join(name)).expect("file");
            assert_eq!(a.length(), b.length(), "{name}");
            assert_eq!(a.per_second_bps(30), b.per_second_bps(30), "{name}");
        }
        assert!(load(Path::new("/nonexistent/data/link-traces/other.mahi")).is_err());
        assert!(load(Path::new("/nonexistent/Verizon-LTE-short.down.mahi")).is_err());
    }
}
