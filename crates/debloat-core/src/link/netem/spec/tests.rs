//! Unit tests of `spec`.

#![allow(clippy::unwrap_used)]

use super::*;

fn pc(p: f64) -> Prob {
    Prob::from_fraction(p / 100.0)
}

#[test]
fn parses_netems_words() {
    let e: Emulation = "rate 10Mbit delay 20ms 2ms loss random 0.5%"
        .parse()
        .unwrap();
    assert_eq!(e.rate_bps, Some(10_000_000));
    assert_eq!((e.delay_ns, e.jitter_ns), (20_000_000, 2_000_000));
    assert_eq!(
        e.loss,
        Loss::Random {
            p: pc(0.5),
            corr: Prob::ZERO
        }
    );
    let e: Emulation = "netem delay 10ms jitter 1ms duplicate 1%".parse().unwrap();
    assert_eq!((e.delay_ns, e.jitter_ns), (10_000_000, 1_000_000));
    assert_eq!((e.rate_bps, e.duplicate), (None, pc(1.0)));
}

#[test]
fn parses_every_optional_number() {
    let e: Emulation = "delay 100ms 10ms 25% distribution normal loss 0.3% 25% \
                        duplicate 1 50% corrupt 0.1% reorder 25% 50% gap 5 \
                        rate 1Mbit -4 48 5 ecn limit 1000 seed 7"
        .parse()
        .unwrap();
    assert_eq!(e.delay_corr, pc(25.0));
    assert_eq!(e.distribution, Distribution::Normal);
    assert_eq!(
        e.loss,
        Loss::Random {
            p: pc(0.3),
            corr: pc(25.0)
        }
    );
    assert_eq!((e.duplicate, e.duplicate_corr), (pc(1.0), pc(50.0)));
    assert_eq!(e.corrupt, pc(0.1));
    assert_eq!((e.reorder, e.reorder_corr, e.gap), (pc(25.0), pc(50.0), 5));
    assert_eq!(
        e.framing,
        Framing {
            overhead: -4,
            cell_size: 48,
            cell_overhead: 5
        }
    );
    assert!(e.ecn);
    assert_eq!((e.limit, e.seed), (Some(1000), Some(7)));
}

/// iproute2's defaults for the Markov models.
#[test]
fn loss_models_take_iproute2s_defaults() {
    let e: Emulation = "loss gemodel 1%".parse().unwrap();
    assert_eq!(
        e.loss,
        Loss::Gemodel {
            p: pc(1.0),
            r: Prob(u32::MAX - pc(1.0).0),
            h: Prob::ZERO,
            k1: Prob::ZERO
        }
    );
    let e: Emulation = "loss gemodel 1% 10% 70% 0.1%".parse().unwrap();
    let Loss::Gemodel { r, h, k1, .. } = e.loss else {
        panic!("gemodel")
    };
    assert_eq!((r, k1), (pc(10.0), pc(0.1)));
    assert!((h.fraction() - 0.3).abs() < 1e-9, "1-h = 70% means h = 30%");
    let e: Emulation = "loss state 2%".parse().unwrap();
    assert_eq!(
        e.loss,
        Loss::State {
            p13: pc(2.0),
            p31: Prob(u32::MAX - pc(2.0).0),
            p32: Prob::ZERO,
            p23: Prob::ONE,
            p14: Prob::ZERO
        }
    );
}

/// `reorder` alone gets gap 1, as tc sets it.
#[test]
fn reorder_alone_gets_gap_one() {
    let e: Emulation = "delay 10ms reorder 25%".parse().unwrap();
    assert_eq!(e.gap, 1);
}

#[test]
fn what_it_prints_parses_back_to_the_same_link() {
    for s in [
        "rate 10Mbit delay 20ms 2ms loss 0.5%",
        "delay 100ms 10ms 25% distribution pareto loss gemodel 1% 10% 70% 0.1% ecn",
        "rate 1Mbit -4 48 5 loss state 1% 30% 5% 20% 0.5% duplicate 1% 50%",
        "delay 10ms reorder 25% 50% gap 5 corrupt 0.1% limit 1000 seed 9",
        "rate 20Mbit buffer 1000",
        "rate 20Mbit slot distribution paretonormal 4ms 1ms packets 32 buffer 100",
        "",
    ] {
        let e: Emulation = s.parse().unwrap();
        let printed = e.to_string();
        let back: Emulation = if printed == "none" {
            Emulation::default()
        } else {
            printed.parse().unwrap()
        };
        assert_eq!(back, e, "{s} → {printed}");
    }
}

#[test]
fn bad_words_name_the_token_and_the_choices() {
    let e = "delay 20ms colour red".parse::<Emulation>().unwrap_err();
    assert!(e.0.contains("`colour`") && e.0.contains("reorder"), "{e}");
    let e = "delay 20ms 2ms distribution cauchy"
        .parse::<Emulation>()
        .unwrap_err();
    assert!(
        e.0.contains("`cauchy`") && e.0.contains("paretonormal"),
        "{e}"
    );
    let e = "reorder 25%".parse::<Emulation>().unwrap_err();
    assert!(e.0.contains("delay"), "{e}");
    let e = "delay 10ms gap 5".parse::<Emulation>().unwrap_err();
    assert!(e.0.contains("reorder"), "{e}");
    let e = "delay 10ms distribution normal"
        .parse::<Emulation>()
        .unwrap_err();
    assert!(e.0.contains("jitter"), "{e}");
    let e = "ecn".parse::<Emulation>().unwrap_err();
    assert!(e.0.contains("loss"), "{e}");
    let e = "loss gemodel".parse::<Emulation>().unwrap_err();
    assert!(e.0.contains("loss gemodel p"), "{e}");
    assert!("loss 150%".parse::<Emulation>().is_err());
    assert!("rate".parse::<Emulation>().is_err());
    assert!("rate 0bit".parse::<Emulation>().is_err());
    assert!("limit 0".parse::<Emulation>().is_err());
    let e = "buffer 100".parse::<Emulation>().unwrap_err();
    assert!(e.0.contains("needs a `rate`"), "{e}");
    assert!("rate 1Mbit 4x".parse::<Emulation>().is_err());
}

#[test]
fn parses_slot_as_tc_does() {
    let e: Emulation = "slot 1ms 5ms packets 32 bytes 64kb".parse().unwrap();
    assert_eq!(
        e.slot,
        Some(Slot {
            gap: SlotGap::Uniform {
                min_ns: 1_000_000,
                max_ns: 5_000_000
            },
            packets: Some(32),
            bytes: Some(65536)
        })
    );
    let e: Emulation = "delay 5ms slot 2ms".parse().unwrap();
    assert_eq!(
        e.slot.map(|s| (s.gap, s.packets, s.bytes)),
        Some((
            SlotGap::Uniform {
                min_ns: 2_000_000,
                max_ns: 2_000_000
            },
            None,
            None
        ))
    );
    assert_eq!(e.delay_ns, 5_000_000);
    let e: Emulation = "slot distribution pareto 10ms 2ms bytes 3000 loss 1%"
        .parse()
        .unwrap();
    assert_eq!(
        e.slot,
        Some(Slot {
            gap: SlotGap::Distribution {
                dist: Distribution::Pareto,
                delay_ns: 10_000_000,
                jitter_ns: 2_000_000
            },
            packets: None,
            bytes: Some(3000)
        })
    );
    assert!(e.loss != Loss::None, "words after the slot still parse");
    for s in [
        "slot 1ms 5ms packets 32 bytes 64Kb",
        "slot distribution normal 10ms 2ms packets 8",
        "rate 10Mbit slot 800us 1ms packets 16",
    ] {
        let e: Emulation = s.parse().unwrap();
        assert_eq!(e.to_string().parse::<Emulation>().unwrap(), e, "{s} → {e}");
    }
}

#[test]
fn bad_slots_name_the_problem() {
    for (s, says) in [
        ("slot", "needs a value"),
        ("slot 5ms 1ms", "shorter than the shortest"),
        ("slot often", "expected a time"),
        ("slot distribution normal 10ms 0ms", "jitter above 0"),
        ("slot distribution lumpy 10ms 1ms", "expected one of"),
        ("slot distribution normal 10ms", "needs a value"),
        ("slot 1ms packets many", "whole number"),
        ("slot 1ms bytes lots", "bytes lots"),
        ("slot 1ms bytes 3gb", "at most 2 GB"),
    ] {
        let e = s.parse::<Emulation>().unwrap_err().to_string();
        assert!(e.contains(says), "{s}: {e}");
    }
}
