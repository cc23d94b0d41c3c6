//! Arbitrary text as qosify's UCI file and as a map file: parsing never panics, and an error
//! names a line that exists.
//!
//! Run: `cargo +nightly fuzz run qosify_config` (from the repository root; needs cargo-fuzz).
#![no_main]

use debloat_core::classify::qosify::parse_uci;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let lines = text.lines().count();
    match parse_uci("uci", text) {
        Ok(mut cfg) => {
            if let Err(e) = cfg.add_map("map", text) {
                assert!(e.line >= 1 && e.line <= lines);
            }
        }
        Err(e) => assert!(e.line >= 1 && e.line <= lines.max(1)),
    }
});
