//! `pfifo_fast`'s words. tc takes none (the kernel reads the device's `txqueuelen` and has a
//! fixed priomap); debloat adds `txqueuelen N` (default 1000) for the device it stands in for.

use crate::qdisc::words::{count_value, SpecError, Tokens};
use std::fmt;

/// What `tc qdisc show` prints for every pfifo_fast.
pub const TC_OPTIONS: &str = "bands 3 priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1";

/// `pfifo_fast [txqueuelen N]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PfifoFastSpec {
    /// Packets each band holds (the device's `txqueuelen`; default 1000).
    pub txqueuelen: u32,
}

impl Default for PfifoFastSpec {
    fn default() -> Self {
        PfifoFastSpec { txqueuelen: 1000 }
    }
}

impl PfifoFastSpec {
    pub(crate) fn parse(t: &mut Tokens<'_>) -> Result<Self, SpecError> {
        let mut s = PfifoFastSpec::default();
        while let Some(w) = t.next() {
            match w {
                "txqueuelen" => s.txqueuelen = count_value(t, w, 1, u32::MAX)?,
                _ => {
                    return Err(SpecError::unknown(
                        w,
                        "pfifo_fast (tc takes no options; debloat's txqueuelen is the device's)",
                        &["txqueuelen N"],
                    ))
                }
            }
        }
        Ok(s)
    }
}

impl fmt::Display for PfifoFastSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "txqueuelen {}", self.txqueuelen)
    }
}
