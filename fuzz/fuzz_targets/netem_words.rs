//! netem's words for an emulated link (the gateway's `--emulate-*`, the simulator's `--impair`):
//! what parses prints back to words that parse to the same emulation.
//!
//! Run: `cargo +nightly fuzz run netem_words` (from the repository root; needs cargo-fuzz).
#![no_main]

use debloat_core::link::netem::Emulation;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(e) = text.parse::<Emulation>() else { return };
    let again: Emulation = e.to_string().parse().expect("printed words parse");
    assert_eq!(again, e, "{text} → {e}");
});
