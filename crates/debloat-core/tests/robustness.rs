//! Outside input never panics: random frame bytes into the classifier and the DS-field rewrite,
//! random words into the spec parser and the unit parsers. Errors, where they happen, name the
//! offending token.

use debloat_core::classify::{classify, rewrite_ds_field, LinkType};
use debloat_core::packet::Ecn;
use debloat_core::units::{parse_rate, parse_size, parse_time};
use debloat_core::{QdiscSpec, SpecError};
use proptest::prelude::*;

fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => proptest::sample::select(vec![
            "pfifo", "bfifo", "codel", "fq_codel", "cake", "deadline", "limit", "flows", "quantum", "target",
            "interval", "ecn", "noecn", "ce_threshold", "ce_threshold_selector", "memory_limit", "drop_batch",
            "bandwidth", "unlimited", "rtt", "diffserv4", "besteffort", "triple-isolate", "dual-srchost",
            "overhead", "mpu", "atm", "ptm", "raw", "ethernet", "docsis", "memlimit", "fwmark", "ack-filter",
            "wash", "ingress", "nat", "autorate-ingress", "lan", "satellite",
        ]).prop_map(String::from),
        2 => "[0-9]{0,12}(\\.[0-9]{0,4})?(bit|kbit|Mbit|Gbit|ms|us|s|b|kb|Mb|p|)".prop_map(String::from),
        1 => "0x[0-9a-fA-F]{0,10}(/0x[0-9a-f]{0,3})?".prop_map(String::from),
        1 => "-?[0-9]{1,4}".prop_map(String::from),
        1 => "\\PC{0,12}".prop_map(String::from),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn classify_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200), raw in any::<bool>(), extra in 0u32..3000) {
        let link = if raw { LinkType::RawIp } else { LinkType::Ethernet };
        if let Ok(m) = classify(&bytes, bytes.len() as u32 + extra, link) {
            prop_assert!(m.len as usize >= bytes.len());
            let mut b = bytes.clone();
            let _ = rewrite_ds_field(&mut b, usize::from(m.network_offset), 46, Ecn::Ce);
            prop_assert_eq!(b.len(), bytes.len());
        }
    }

    #[test]
    fn ds_rewrite_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..80), off in 0usize..100, dscp in any::<u8>(), ecn in 0u8..4) {
        let mut b = bytes.clone();
        let _ = rewrite_ds_field(&mut b, off, dscp, Ecn::from_bits(ecn));
        prop_assert_eq!(b.len(), bytes.len());
    }

    #[test]
    fn spec_parser_never_panics_and_names_bad_tokens(words in proptest::collection::vec(word(), 0..10)) {
        let s = words.join(" ");
        match QdiscSpec::parse(&s) {
            Ok(spec) => {
                // Whatever parses also builds and re-parses to the same spec.
                let again = QdiscSpec::parse(&spec.to_string());
                prop_assert_eq!(again.as_ref().ok(), Some(&spec), "{} -> {}", s, spec);
                let _ = spec.build::<debloat_core::Record>(debloat_core::FlowHasher::default(), 0);
            }
            Err(SpecError::Unknown { token, .. }) | Err(SpecError::Value { token, .. }) | Err(SpecError::Unsupported { token, .. }) => {
                prop_assert!(s.contains(&token), "error names `{}` not in `{}`", token, s);
            }
            Err(SpecError::MissingValue { keyword, .. }) => prop_assert!(s.contains(&keyword)),
            Err(SpecError::Empty) => prop_assert!(s.trim().is_empty()),
        }
    }

    #[test]
    fn unit_parsers_never_panic(s in "\\PC{0,16}") {
        let _ = parse_rate(&s);
        let _ = parse_time(&s);
        let _ = parse_size(&s);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    /// Any time and rate a spec takes prints back to exactly the same spec.
    #[test]
    fn numeric_options_round_trip(ns in 1u64..4_000_000_000_000, bits in 8u64..100_000_000_000, limit in 1u32..100_000) {
        for s in [
            format!("deadline {ns}ns limit {limit}"),
            format!("fq_codel target {ns}ns interval {}ns limit {limit}", ns.saturating_mul(3)),
            format!("codel ce_threshold {ns}ns"),
            format!("cake bandwidth {bits}bit rtt {}us", ns / 1000 + 1),
        ] {
            let a = QdiscSpec::parse(&s).map_err(|e| TestCaseError::fail(format!("{s}: {e}")))?;
            let b = QdiscSpec::parse(&a.to_string()).map_err(|e| TestCaseError::fail(format!("{a}: {e}")))?;
            prop_assert_eq!(a, b);
        }
    }
}

/// Lines qosify's files are made of, and some that are not.
fn qosify_line() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => proptest::sample::select(vec![
            "config defaults", "config class voice", "config class bulk", "config alias x", "config interface wan",
            "\toption dscp_default_tcp +bulk", "\toption ingress CS6", "\toption egress LE", "\toption value EF",
            "\toption bulk_trigger_pps 100", "\toption timeout 30", "\toption active_timeout 0", "\tlist defaults /x/*.conf",
            "tcp:22 voice", "udp:1000-2000 +AF41", "198.18.0.0/15 bulk", "2001:2::/48 CS1", "dns:*.example.com video",
            "dns:/^(a|b)\\.test$ EF", "dns_c:*.cdn.test bulk", "dns:/( EF", "tcp:0 voice", "udp:9-1 CS0", "dns: EF",
        ]).prop_map(String::from),
        1 => "\\PC{0,20}".prop_map(String::from),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// qosify's UCI and map files: never a panic; an error names a line of the file and a
    /// token on it.
    #[test]
    fn qosify_files_never_panic_and_errors_name_their_line(lines in proptest::collection::vec(qosify_line(), 0..12)) {
        use debloat_core::classify::qosify::parse_uci;
        let text = lines.join("\n");
        let check = |e: &debloat_core::classify::qosify::ConfigError| -> Result<(), TestCaseError> {
            let line = text.lines().nth(e.line.saturating_sub(1)).unwrap_or("");
            prop_assert!(e.line >= 1 && e.line <= lines.len().max(1), "{}", e);
            prop_assert!(line.contains(e.token.trim()), "`{}` not on line {}: {:?}", e.token, e.line, line);
            Ok(())
        };
        match parse_uci("uci", &text) {
            Ok(_) => {}
            Err(e) => check(&e)?,
        }
        let mut cfg = debloat_core::classify::qosify::Config::default();
        if let Err(e) = cfg.add_map("map", &text) {
            check(&e)?;
        }
    }

    /// Random bytes as DNS answers from port 53 (UDP and TCP) never panic, and teach nothing
    /// that is not an address.
    #[test]
    fn dns_snooping_never_panics(msg in proptest::collection::vec(any::<u8>(), 0..300), tcp in any::<bool>()) {
        use debloat_core::classify::qosify::{parse_uci, Classifier};
        let mut cfg = parse_uci("q", "config defaults\n").expect("uci");
        cfg.add_map("m", "dns:* AF41\n").expect("map");
        let mut c = Classifier::new(cfg, 64, debloat_core::FlowHasher::new([1, 2]));
        let b = etherparse::PacketBuilder::ethernet2([4; 6], [2; 6]).ipv4([198, 18, 2, 53], [198, 18, 1, 2], 64);
        let mut f = Vec::new();
        if tcp { b.tcp(53, 40000, 1, 1000).write(&mut f, &msg) } else { b.udp(53, 40000).write(&mut f, &msg) }.expect("frame");
        let m = classify(&f, f.len() as u32, LinkType::Ethernet).expect("a well-formed frame");
        c.snoop(&f, LinkType::Ethernet, &m.flow, 0);
        let d = c.counters().dns;
        prop_assert!(d.answers + d.skipped + d.malformed <= 1 + msg.len() as u64 / 2);
        prop_assert!(d.held <= d.addresses);
    }
}
