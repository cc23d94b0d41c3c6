//! The configuration an OpenWrt user already has, as a debloat gateway setup: sqm-scripts'
//! `/etc/config/sqm` ([`sqm`]) and qosify's `/etc/config/qosify` ([`qosify`]), both UCI files
//! ([`uci`]). Each importer returns the disciplines (tc's words, as `--egress`/`--ingress` take
//! them) and a warning for every setting that has no equivalent here; nothing is dropped
//! silently. `debloat gateway --sqm FILE --dry-run` prints the result.

pub mod qosify;
pub mod sqm;
mod sqm_htb;
pub mod uci;

use debloat_core::QdiscSpec;

/// A line of an imported file that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: `{token}`: {why}")]
pub struct ImportError {
    /// The file.
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// The token at fault.
    pub token: String,
    /// What is wrong, and what would be right.
    pub why: String,
}

impl ImportError {
    /// An error at `file:line` about `token`.
    pub fn new(file: &str, line: usize, token: &str, why: &str) -> ImportError {
        ImportError {
            file: file.to_string(),
            line,
            token: token.to_string(),
            why: why.to_string(),
        }
    }
}

/// What an imported file sets up.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Setup {
    /// The WAN interface the file names (sqm's `interface`; qosify's `device` or `interface`).
    pub wan: Option<String>,
    /// LAN → WAN discipline.
    pub egress: Option<QdiscSpec>,
    /// WAN → LAN discipline.
    pub ingress: Option<QdiscSpec>,
    /// The file also configures the marking stage (qosify's UCI file).
    pub classify: Option<std::path::PathBuf>,
    /// Settings without an equivalent, and choices made for the user, one sentence each.
    pub warnings: Vec<String>,
}

/// Parse tc's words for a discipline an importer built, naming the file's line on failure
/// (words such as a user's `eqdisc_opts` may be ones debloat does not take).
fn spec(words: &str, file: &str, line: usize, what: &str) -> Result<QdiscSpec, ImportError> {
    let words = words.split_whitespace().collect::<Vec<_>>().join(" ");
    words
        .parse()
        .map_err(|e| ImportError::new(file, line, &words, &format!("{what}: {e}")))
}
