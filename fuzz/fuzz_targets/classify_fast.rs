//! Any bytes, as an Ethernet frame and as a bare IP packet: the classifier's direct path for the
//! common frame (`classify/fast.rs`) must give exactly what etherparse's path gives, whenever
//! it answers at all (it declines everything it does not handle), with and without the TCP
//! details.
//!
//! Input: the first byte chooses the wire length's excess over the bytes (a frame cut short by
//! a capture); the rest is the frame.
//! Run: `cargo +nightly fuzz run classify_fast` (from the repository root; needs cargo-fuzz).
#![no_main]

use debloat_core::classify::{classify, classify_general, classify_tcp, tcp_info, LinkType};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&extra, frame)) = data.split_first() else { return };
    let wire_len = frame.len() as u32 + u32::from(extra) * 8;
    for link in [LinkType::Ethernet, LinkType::RawIp] {
        let general = classify_general(frame, wire_len, link);
        match classify_tcp(frame, wire_len, link) {
            Ok(m) => assert_eq!(Ok(m), general, "{link:?} {frame:02x?}"),
            Err(e) => assert_eq!(Err(e), general, "{link:?} {frame:02x?}"),
        }
        // Without the TCP details: the same metadata; the details alone: the same details.
        let meta = general.as_ref().map(|g| g.0).map_err(Clone::clone);
        assert_eq!(classify(frame, wire_len, link), meta, "{link:?} {frame:02x?}");
        // The details read alone (their own direct path, no metadata built): etherparse's.
        let details = classify_general(frame, frame.len() as u32, link)
            .ok()
            .and_then(|(_, t)| t);
        assert_eq!(tcp_info(frame, link), details, "{link:?} {frame:02x?}");
    }
});
