//! The configuration OpenWrt users already have: sqm-scripts' three example setups and
//! qosify's shipped file (tests/data/sqm, tests/data/qosify) import with `--dry-run` to the
//! equivalent debloat setup, every setting without an equivalent named in a warning; and
//! `--config gateway.toml` round-trips what `--dry-run` prints.

mod common;
use common::{debloat, text};

fn data(p: &str) -> String {
    format!("{}/tests/data/{p}", env!("CARGO_MANIFEST_DIR"))
}

/// `gateway … --dry-run`: its output, which must succeed.
fn dry(args: &[&str]) -> String {
    let mut a = vec!["gateway"];
    a.extend_from_slice(args);
    a.push("--dry-run");
    let o = debloat(&a);
    assert!(o.status.success(), "{}", text(&o));
    text(&o)
}

fn line<'a>(out: &'a str, key: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(&format!("{key} = ")))
        .unwrap_or_else(|| panic!("no `{key}` in:\n{out}"))
}

/// simple.qos builds HTB with three fq_codel tiers by DSCP; the import is that tree, the
/// script's rates, sqm's quantum and leaf words, one tier on the way in (`squash_ingress`).
#[test]
fn sqm_simple_becomes_its_htb_tree() {
    let out = dry(&["--sqm", &data("sqm/simple")]);
    assert_eq!(line(&out, "wan"), "wan = \"eth1\"");
    let e = line(&out, "egress");
    assert!(
        e.starts_with("egress = \"htb default 12 class 1:1 rate 10Mbit ceil 10Mbit quantum 1749b"),
        "{out}"
    );
    assert!(e.contains("class 1:11 parent 1:1 rate 128Kbit ceil 3333Kbit prio 1 quantum 1749b match dscp 48 match dscp 46"), "{out}");
    assert!(e.contains("class 1:13 parent 1:1 rate 1666Kbit ceil 9984Kbit prio 3 quantum 1749b match dscp 8 qdisc fq_codel limit 1001 target 5000us interval 100000us ecn quantum 300 flows 1024"), "{out}");
    assert_eq!(
        line(&out, "ingress"),
        "ingress = \"htb default 10 class 1:1 rate 85Mbit ceil 85Mbit quantum 10625b class 1:10 parent 1:1 rate 85Mbit ceil 85Mbit quantum 10625b qdisc fq_codel limit 1001 target 5000us interval 100000us ecn flows 1024\""
    );
    assert!(
        out.contains("squash_dscp"),
        "the ingress DSCP squash is named: {out}"
    );
    assert!(!out.contains("no equivalent"), "{out}");
    assert!(!out.contains("itarget"), "'auto' is sqm's default: {out}");
    assert!(out.contains("missing: --lan IF"), "{out}");
}

/// simplest.qos over ADSL with HTB's own link-layer words (`htb_private`): every class charges
/// ATM cells with the overhead, mpu and sqm's stab MTU; a 1 Mbit/s uplink gets sqm's longer
/// fq_codel target.
#[test]
fn sqm_simplest_over_atm_with_htbs_tables() {
    let out = dry(&["--sqm", &data("sqm/simplest_atm"), "--lan", "eth1"]);
    assert_eq!(
        line(&out, "egress"),
        "egress = \"htb default 10 class 1:1 rate 1Mbit ceil 1Mbit quantum 1749b mtu 2047b mpu 96b overhead 44 linklayer atm class 1:10 parent 1:1 rate 1Mbit ceil 1Mbit quantum 1749b mtu 2047b mpu 96b overhead 44 linklayer atm qdisc fq_codel limit 1001 target 13992us interval 108992us noecn flows 1024\""
    );
    assert!(
        line(&out, "ingress").contains("rate 16Mbit ceil 16Mbit quantum 2000b"),
        "{out}"
    );
    assert!(
        out.contains("warnings (0)") || !out.contains("warnings ("),
        "{out}"
    );
}

#[test]
fn sqm_piece_of_cake_with_ethernet_overhead() {
    let out = dry(&["--sqm", &data("sqm/piece_of_cake"), "--lan", "eth1"]);
    // The egress loses `nat` to the script's misspelt variable, as on OpenWrt.
    assert!(
        line(&out, "egress")
            .contains("cake bandwidth 19Mbit besteffort triple-isolate nonat nowash"),
        "{out}"
    );
    assert!(
        line(&out, "egress").ends_with("noatm overhead 18 mpu 64\""),
        "{out}"
    );
    assert!(
        line(&out, "ingress").contains("cake bandwidth 95Mbit besteffort triple-isolate nat wash"),
        "{out}"
    );
    // The one warning: the ingress's `nat`, accepted but inert in a layer-2 gateway (issue 46).
    assert!(out.contains("warnings (1):"), "{out}");
    assert!(
        out.contains("--ingress: cake's `nat` has no effect here"),
        "{out}"
    );
}

#[test]
fn sqm_layer_cake_over_atm() {
    let out = dry(&["--sqm", &data("sqm/layer_cake_atm")]);
    assert_eq!(line(&out, "wan"), "wan = \"pppoe-wan\"");
    let (e, i) = (line(&out, "egress"), line(&out, "ingress"));
    assert!(
        e.contains("cake bandwidth 900Kbit diffserv3 dual-srchost nat nowash")
            && e.contains("atm overhead 44"),
        "{e}"
    );
    assert!(
        i.contains("cake bandwidth 14Mbit diffserv3 dual-dsthost nat nowash")
            && i.contains("atm overhead 44"),
        "{i}"
    );
    for w in [
        "another queue section (guest)",
        "tcMTU '2047'",
        "tcTSIZE '128'",
        "egress_ecn 'NOECN'",
    ] {
        assert!(out.contains(w), "warning `{w}` missing:\n{out}");
    }
}

#[test]
fn qosifys_file_sets_up_cake_and_the_marking_stage() {
    let out = dry(&["--qosify", &data("qosify/qosify"), "--lan", "lan0"]);
    assert_eq!(line(&out, "wan"), "wan = \"eth0\"");
    let (e, i) = (line(&out, "egress"), line(&out, "ingress"));
    assert!(
        e.contains("cake bandwidth 19Mbit diffserv4 dual-srchost nonat nowash ack-filter"),
        "{e}"
    );
    assert!(
        i.contains("cake bandwidth 95Mbit diffserv4 dual-dsthost nonat nowash ingress"),
        "{i}"
    );
    assert!(line(&out, "classify").ends_with("qosify/qosify\""), "{out}");
}

#[test]
fn the_printed_toml_runs_as_config_and_flags_win_over_it() {
    let out = dry(&["--sqm", &data("sqm/layer_cake_atm"), "--lan", "lan0"]);
    let toml: String = out
        .split("as gateway.toml (--config):\n")
        .nth(1)
        .and_then(|t| t.split("\n\n").next())
        .expect("a TOML block")
        .to_string();
    let dir = tempfile::tempdir().expect("tmp");
    let f = dir.path().join("gateway.toml");
    std::fs::write(&f, &toml).expect("write");
    let again = dry(&["--config", &f.to_string_lossy()]);
    assert_eq!(line(&again, "egress"), line(&out, "egress"));
    let over = dry(&["--config", &f.to_string_lossy(), "--egress", "fq_codel"]);
    assert!(
        line(&over, "egress").starts_with("egress = \"fq_codel"),
        "{over}"
    );
    // A key the gateway does not have is an error naming it.
    std::fs::write(&f, format!("{toml}egres = \"cake\"\n")).expect("write");
    let o = debloat(&["gateway", "--config", &f.to_string_lossy(), "--dry-run"]);
    assert!(
        !o.status.success() && text(&o).contains("egres"),
        "{}",
        text(&o)
    );
}

#[test]
fn bad_sqm_lines_name_the_line_and_the_choices() {
    let dir = tempfile::tempdir().expect("tmp");
    let f = dir.path().join("sqm");
    for (body, line, token) in [
        (
            "config queue\n option enabled 1\n option script 'cake_lake.qos'\n",
            3,
            "cake_lake.qos",
        ),
        ("config queue\n option upload '10 000'\n", 2, "10 000"),
        // Found by the config_import fuzz target: kbit/s whose bit/s overflow 64 bits.
        (
            "config queue\n option upload 1000\n option download 4099276460824344247\n",
            3,
            "beyond any link",
        ),
        (
            "config queue\n option upload 1000\n option linklayer adsl\n",
            3,
            "adsl",
        ),
        (
            "config queue\n option upload 1000\n option eqdisc_opts 'diffserv9'\n",
            3,
            "diffserv9",
        ),
    ] {
        std::fs::write(&f, body).expect("write");
        let o = debloat(&["gateway", "--sqm", &f.to_string_lossy(), "--dry-run"]);
        let t = text(&o);
        assert!(!o.status.success(), "{body}: {t}");
        assert!(
            t.contains(&format!("sqm:{line}:")) && t.contains(token),
            "{body}: {t}"
        );
    }
}

/// cake-autorate's mode: its reflectors round-trip through `--dry-run`'s TOML, and a mode
/// without reflectors, reflectors without the mode, or a bad address are errors saying how to
/// fix them.
#[test]
fn cake_autorate_mode_needs_reflectors_and_round_trips_through_the_file() {
    let base = [
        "--lan",
        "lan0",
        "--wan",
        "wan0",
        "--egress",
        "cake bandwidth 5mbit",
        "--autorate-egress",
        "min=1mbit,base=5mbit,max=9mbit",
    ];
    let with = |more: &[&str]| {
        let mut a = vec!["gateway"];
        a.extend_from_slice(&base);
        a.extend_from_slice(more);
        a.push("--dry-run");
        debloat(&a)
    };
    let out = dry(&[
        &base[..],
        &[
            "--autorate-mode",
            "cake-autorate",
            "--reflectors",
            "198.18.2.2,2001:2::2",
        ],
        &["--reflector-interval", "100ms", "--ping-netns", "lan-side"],
    ]
    .concat());
    assert_eq!(
        line(&out, "reflectors"),
        "reflectors = \"198.18.2.2,2001:2::2\""
    );
    assert_eq!(
        line(&out, "reflector_interval"),
        "reflector_interval = \"100ms\""
    );
    let dir = tempfile::tempdir().expect("tmp");
    let toml: String = out
        .split("as gateway.toml (--config):\n")
        .nth(1)
        .expect("toml")
        .lines()
        .take_while(|l| l.contains(" = "))
        .map(|l| format!("{l}\n"))
        .collect();
    let f = dir.path().join("gateway.toml");
    std::fs::write(&f, &toml).expect("write");
    let again = dry(&["--config", &f.to_string_lossy()]);
    assert_eq!(line(&again, "ping_netns"), "ping_netns = \"lan-side\"");

    for (more, says) in [
        (
            &["--autorate-mode", "cake-autorate"][..],
            "give --reflectors",
        ),
        (
            &["--reflectors", "198.18.2.2"][..],
            "only --autorate-mode cake-autorate",
        ),
        (
            &[
                "--autorate-mode",
                "cake-autorate",
                "--reflectors",
                "198.18.2.2,resolver",
            ][..],
            "`resolver`",
        ),
        (&["--autorate-mode", "fast"][..], "passive"),
        (
            &[
                "--autorate-mode",
                "cake-autorate",
                "--reflectors",
                "198.18.2.2",
                "--reflector-interval",
                "0ms",
            ][..],
            "above 0",
        ),
    ] {
        let o = with(more);
        assert!(
            !o.status.success() && text(&o).contains(says),
            "{more:?}: {}",
            text(&o)
        );
    }
}
