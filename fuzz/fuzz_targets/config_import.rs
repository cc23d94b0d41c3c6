//! Arbitrary text as sqm-scripts' and qosify's UCI files: importing never panics, and an error
//! names a line of the file.
//!
//! Run: `cargo +nightly fuzz run config_import` (from the repository root; needs cargo-fuzz).
#![no_main]

use debloat_gateway::import::{qosify, sqm};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let lines = text.lines().count().max(1);
    if let Err(e) = sqm::import("sqm", text) {
        assert!(e.line >= 1 && e.line <= lines, "{e}");
    }
    if let Err(e) = qosify::import(std::path::Path::new("qosify"), text) {
        assert!(e.line >= 1 && e.line <= lines, "{e}");
    }
});
