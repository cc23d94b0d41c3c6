//! Times in `tc -s qdisc show` text are printed as iproute2 prints them: C's `%.3g` of the
//! value the kernel gives back (CoDel keeps 1.024-µs units; CAKE's rtt is whole µs), for any
//! value, not only round ones. The kernel lab checks the same against the real `tc`
//! (`crates/debloat/tests/lab.rs`).

use debloat_core::qdisc::spec::codel_time_as_tc_shows;
use debloat_core::QdiscSpec;
use proptest::prelude::*;

/// C's `%.3g` for a positive value, written independently of the library's: from Rust's
/// scientific form with three significant digits.
fn c_g3(v: f64) -> String {
    let sci = format!("{v:.2e}");
    let (mant, exp) = sci.split_once('e').expect("scientific form");
    let exp: i32 = exp.parse().expect("exponent");
    if !(-4..3).contains(&exp) {
        let m = mant.trim_end_matches('0').trim_end_matches('.');
        return format!("{m}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
    }
    let decimals = (2 - exp).max(0) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// iproute2's `sprint_time` of a time in µs.
fn iproute2(us: u64) -> String {
    let v = us as f64;
    if us >= 1_000_000 {
        format!("{}s", c_g3(v / 1e6))
    } else if us >= 1000 {
        format!("{}ms", c_g3(v / 1e3))
    } else {
        format!("{us}us")
    }
}

fn tc_text(spec: &str) -> String {
    let q: QdiscSpec = spec.parse().expect("a valid spec");
    q.build::<debloat_core::Record>(debloat_core::FlowHasher::default(), 0)
        .stats()
        .to_tc_string()
}

fn word_after<'a>(text: &'a str, key: &str) -> &'a str {
    let head = text.lines().next().expect("a qdisc line");
    let mut w = head.split_whitespace();
    w.find(|x| *x == key).expect("the key");
    w.next().expect("its value")
}

#[test]
fn the_issues_examples_print_as_tc_prints_them() {
    // 1024000 µs: the kernel keeps 1.024e9 ns >> 10 and returns 1024000 µs; tc prints 1.02s.
    let t = tc_text("fq_codel ce_threshold 1024000");
    assert_eq!(word_after(&t, "ce_threshold"), "1.02s", "{t}");
    let t = tc_text("cake rtt 12345us");
    assert_eq!(word_after(&t, "rtt"), "12.3ms", "{t}");
    // Spec text stays exact, so it parses back to the same values.
    let q: QdiscSpec = "fq_codel ce_threshold 1024000".parse().expect("valid");
    assert!(q.to_string().contains("ce_threshold 1024ms"), "{q}");
}

#[test]
fn codel_times_come_back_as_the_kernel_returns_them() {
    assert_eq!(codel_time_as_tc_shows(5_000_000), 4999);
    assert_eq!(codel_time_as_tc_shows(100_000_000), 99_999);
    assert_eq!(codel_time_as_tc_shows(1_024_000_000), 1_024_000);
}

proptest! {
    #[test]
    fn fq_codel_and_codel_times_print_as_iproute2(target in 1u64..2_000_000, ce in 1u64..20_000_000, interval in 1u64..60_000_000) {
        for kind in ["fq_codel", "codel"] {
            let t = tc_text(&format!("{kind} target {target}us ce_threshold {ce}us interval {interval}us"));
            for (key, us) in [("target", target), ("ce_threshold", ce), ("interval", interval)] {
                let back = codel_time_as_tc_shows(us * 1000);
                prop_assert_eq!(word_after(&t, key), iproute2(back), "{} {} {}us in {}", kind, key, us, t);
            }
        }
    }

    #[test]
    fn cake_rtt_prints_as_iproute2(rtt in 1u64..3_600_000_000) {
        let t = tc_text(&format!("cake rtt {rtt}us"));
        prop_assert_eq!(word_after(&t, "rtt"), iproute2(rtt), "{}", t);
    }
}
