//! A flent data file (gzip or plain JSON, any version) for `debloat report`: reading never
//! panics, and what reads has a load window inside its own time span.
//!
//! Run: `cargo +nightly fuzz run flent_file` (from the repository root; needs cargo-fuzz).
#![no_main]

use debloat_report::Dataset;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(d) = Dataset::from_bytes(data, "fuzz") else { return };
    let (a, b) = d.load_window();
    assert!(!(a > b), "load window {a}..{b}");
});
