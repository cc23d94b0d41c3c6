//! Unit tests of `spec`.

use super::*;

#[test]
fn a_misspelt_word_gets_the_nearest_valid_one() {
    let e = "cake bandwith 20Mbit"
        .parse::<QdiscSpec>()
        .expect_err("misspelt");
    let msg = e.to_string();
    assert!(
        msg.starts_with("unknown cake option `bandwith`: did you mean `bandwidth`?"),
        "{msg}"
    );
    assert!(msg.contains("valid choices: "), "{msg}");
    let e = "fq_codle".parse::<QdiscSpec>().expect_err("misspelt kind");
    assert!(e.to_string().contains("did you mean `fq_codel`?"), "{e}");
    // Nothing near: no guess.
    let e = "cake zzz".parse::<QdiscSpec>().expect_err("unknown");
    assert!(!e.to_string().contains("did you mean"), "{e}");
    let e = "delay 5ms jiter 1ms"
        .parse::<crate::link::Emulation>()
        .expect_err("misspelt");
    assert!(e.to_string().contains("did you mean `jitter`?"), "{e}");
}
use crate::qdisc::cake::hash::FlowMode;
use crate::qdisc::cake::overhead::AtmMode;
use crate::qdisc::cake::tins::Diffserv;

#[test]
fn parses_the_issue_examples() {
    let QdiscSpec::Cake(c) =
        QdiscSpec::parse("cake bandwidth 20Mbit diffserv4 dual-dsthost nat overhead 44 mpu 84")
            .expect("valid")
    else {
        panic!("not cake")
    };
    assert_eq!(c.bandwidth_bytes_per_s, Some(2_500_000));
    assert_eq!(c.diffserv, Diffserv::Diffserv4);
    assert_eq!(c.flow_mode, FlowMode::DUAL_DSTHOST);
    assert!(c.nat);
    assert_eq!(
        (c.overhead.overhead, c.overhead.mpu, c.overhead.strip_l2),
        (44, 84, true)
    );
    let QdiscSpec::FqCodel(f) = QdiscSpec::parse("fq_codel target 3ms noecn").expect("valid")
    else {
        panic!("not fq_codel")
    };
    assert_eq!(
        (f.knobs.target_ns, f.knobs.ecn, f.limit, f.flows),
        (3_000_000, false, 10240, 1024)
    );
}

#[test]
fn defaults_equal_the_kernels() {
    assert_eq!(
        QdiscSpec::parse("pfifo").expect("ok"),
        QdiscSpec::Pfifo { limit: 1000 }
    );
    let QdiscSpec::Codel(c) = QdiscSpec::parse("codel").expect("ok") else {
        panic!()
    };
    assert_eq!(
        (c.limit, c.knobs.ecn, c.knobs.target_ns),
        (1000, false, 5_000_000)
    );
    let QdiscSpec::FqCodel(f) = QdiscSpec::parse("fq_codel").expect("ok") else {
        panic!()
    };
    assert_eq!(
        (f.quantum, f.memory_limit, f.drop_batch, f.knobs.ecn),
        (1514, 32 << 20, 64, true)
    );
    let QdiscSpec::Cake(k) = QdiscSpec::parse("cake").expect("ok") else {
        panic!()
    };
    assert_eq!(k, CakeSpec::default());
    assert!(k.split_gso);
}

#[test]
fn overhead_keywords_add_and_presets_set() {
    let QdiscSpec::Cake(c) = QdiscSpec::parse("cake pppoe-ptm ether-vlan").expect("ok") else {
        panic!()
    };
    assert_eq!((c.overhead.overhead, c.overhead.atm), (34, AtmMode::Ptm));
    let QdiscSpec::Cake(c) = QdiscSpec::parse("cake docsis").expect("ok") else {
        panic!()
    };
    assert_eq!((c.overhead.overhead, c.overhead.mpu), (18, 64));
    let QdiscSpec::Cake(c) = QdiscSpec::parse("cake conservative").expect("ok") else {
        panic!()
    };
    assert_eq!((c.overhead.overhead, c.overhead.atm), (48, AtmMode::Atm));
    let QdiscSpec::Cake(c) = QdiscSpec::parse("cake ethernet raw").expect("ok") else {
        panic!()
    };
    assert!(!c.overhead.strip_l2, "raw clears the L2 strip");
    let QdiscSpec::Cake(c) = QdiscSpec::parse("cake satellite").expect("ok") else {
        panic!()
    };
    assert_eq!((c.rtt_us, c.target_us), (1_000_000, 50_000));
    let QdiscSpec::Cake(c) = QdiscSpec::parse("cake rtt 40ms").expect("ok") else {
        panic!()
    };
    assert_eq!((c.rtt_us, c.target_us), (40_000, 2_000));
}

#[test]
fn bad_specs_name_the_token_and_the_choices() {
    let e = QdiscSpec::parse("cake bandwith 20Mbit").expect_err("typo");
    let msg = e.to_string();
    assert!(
        msg.contains("`bandwith`") && msg.contains("bandwidth RATE"),
        "{msg}"
    );
    let e = QdiscSpec::parse("fq_codel target fast")
        .expect_err("bad time")
        .to_string();
    assert!(e.contains("`fast`") && e.contains("ms"), "{e}");
    let e = QdiscSpec::parse("fq_codle")
        .expect_err("bad kind")
        .to_string();
    assert!(e.contains("`fq_codle`") && e.contains("fq_codel"), "{e}");
    let e = QdiscSpec::parse("fq_codel flows 70000")
        .expect_err("range")
        .to_string();
    assert!(e.contains("between 1 and 65536"), "{e}");
    assert!(QdiscSpec::parse("cake bandwidth").is_err());
    assert_eq!(QdiscSpec::parse("   "), Err(SpecError::Empty));
}

#[test]
fn display_round_trips() {
    for s in [
        "pfifo limit 50",
        "bfifo limit 30000",
        "codel target 2ms ecn ce_threshold 1ms",
        "fq_codel limit 500 flows 64 quantum 300 noecn memory_limit 4Mb drop_batch 8",
        "cake bandwidth 20Mbit diffserv4 dual-dsthost nat wash ack-filter overhead 44 mpu 84 memlimit 8Mb",
        "cake unlimited besteffort flows pppoe-vcmux",
        "cake atm",
        "cake ptm mpu 64",
        "deadline 20ms limit 100 ecn",
    ] {
        let a = QdiscSpec::parse(s).expect(s);
        let b = QdiscSpec::parse(&a.to_string()).expect("re-parse");
        assert_eq!(a, b, "{s} -> {a}");
    }
}
