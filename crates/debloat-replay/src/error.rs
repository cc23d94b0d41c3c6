//! The one error of this crate: what went wrong, in words that name the file, line, column or
//! packet and say how to fix it. Built with [`bail!`] and [`Context`], as the binary's errors
//! are, without a dependency on `anyhow` in a library.

use std::fmt::Display;

/// Why a trace could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ReplayError(pub String);

/// This crate's results.
pub type Result<T> = std::result::Result<T, ReplayError>;

/// Return early with a formatted [`ReplayError`].
macro_rules! bail {
    ($($t:tt)*) => {
        return Err($crate::error::ReplayError(format!($($t)*)))
    };
}
pub(crate) use bail;

/// Put what was being done in front of an error: `reading x.pcap: bad header`.
pub trait Context<T> {
    /// With a fixed description.
    fn context(self, what: impl Display) -> Result<T>;
    /// With a description built only on error.
    fn with_context<D: Display>(self, what: impl FnOnce() -> D) -> Result<T>;
}

impl<T, E: Display> Context<T> for std::result::Result<T, E> {
    fn context(self, what: impl Display) -> Result<T> {
        self.map_err(|e| ReplayError(format!("{what}: {e}")))
    }
    fn with_context<D: Display>(self, what: impl FnOnce() -> D) -> Result<T> {
        self.map_err(|e| ReplayError(format!("{}: {e}", what())))
    }
}

impl<T> Context<T> for Option<T> {
    fn context(self, what: impl Display) -> Result<T> {
        self.ok_or_else(|| ReplayError(what.to_string()))
    }
    fn with_context<D: Display>(self, what: impl FnOnce() -> D) -> Result<T> {
        self.ok_or_else(|| ReplayError(what().to_string()))
    }
}

impl From<std::io::Error> for ReplayError {
    fn from(e: std::io::Error) -> Self {
        ReplayError(e.to_string())
    }
}

impl From<pcap_file::PcapError> for ReplayError {
    fn from(e: pcap_file::PcapError) -> Self {
        ReplayError(e.to_string())
    }
}

impl From<csv::Error> for ReplayError {
    fn from(e: csv::Error) -> Self {
        ReplayError(e.to_string())
    }
}

impl From<etherparse::err::packet::BuildWriteError> for ReplayError {
    fn from(e: etherparse::err::packet::BuildWriteError) -> Self {
        ReplayError(e.to_string())
    }
}
