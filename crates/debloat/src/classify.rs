//! `--classify FILE` for `gateway`, `replay` and `sim`: qosify's files through
//! `debloat_gateway::qosify_files`, with the flag named in the error.

use anyhow::Result;
use debloat_core::classify::qosify::Config;
use std::path::Path;

/// The marking stage's configuration, if `--classify` was given.
pub fn load(file: Option<&Path>) -> Result<Option<Config>> {
    file.map(debloat_gateway::qosify_files::load)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--classify: {e}"))
}
