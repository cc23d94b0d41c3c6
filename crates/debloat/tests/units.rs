//! Units people mean (issue 46): tc's reading is kept — `Mbps` is megabytes per second, a bare
//! number bits per second — but every command says what such a rate means and how to write
//! megabits, and a shaper or link rate below 64 kbit/s is refused unless `--allow-slow-rate`
//! says it is meant. The same rules for flags, `gateway.toml` and scenario files.

mod common;
use common::{debloat, text};

const MBPS_NOTE: &str =
    "`10Mbps` = 80 Mbit/s (tc reads Mbps as megabytes per second; write 10Mbit for megabits)";

#[test]
fn spec_says_what_mbps_means_and_refuses_a_bare_ten() {
    let o = debloat(&["spec", "cake bandwidth 10Mbps"]);
    assert!(o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&format!("note: spec: {MBPS_NOTE}")), "{err}");
    assert!(text(&o).contains("bandwidth 80Mbit"), "{}", text(&o));

    let o = debloat(&["spec", "cake bandwidth 10"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("`10` = 10 bit/s is below 64 kbit/s")
            && text(&o).contains("--allow-slow-rate"),
        "{}",
        text(&o)
    );
    let o = debloat(&[
        "spec",
        "--allow-slow-rate",
        "tbf rate 10 burst 1600 limit 3000",
    ]);
    assert!(o.status.success(), "meant: {}", text(&o));
    // Megabits say nothing.
    let o = debloat(&["spec", "cake bandwidth 10Mbit"]);
    assert!(o.stderr.is_empty(), "{}", text(&o));
}

#[test]
fn the_gateway_the_simulator_and_replay_say_it_too() {
    let o = debloat(&[
        "gateway",
        "--dry-run",
        "--lan",
        "eth1",
        "--wan",
        "eth0",
        "--egress",
        "cake bandwidth 10Mbps",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains(&format!("note: --egress: {MBPS_NOTE}")),
        "{}",
        text(&o)
    );

    let dir = tempfile::tempdir().expect("tmp");
    let toml = dir.path().join("gateway.toml");
    std::fs::write(&toml, "egress = \"cake bandwidth 100\"\n").expect("toml");
    let o = debloat(&["gateway", "--dry-run", "--config", &toml.to_string_lossy()]);
    assert!(
        !o.status.success(),
        "a file's bare 100 is refused too: {}",
        text(&o)
    );
    assert!(
        text(&o).contains("--egress: `100` = 100 bit/s is below 64 kbit/s"),
        "{}",
        text(&o)
    );

    let o = debloat(&["sim", "ping", "--link", "20mbps/2Mbit", "--length", "1"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("note: --link (down): `20mbps` = 160 Mbit/s (tc reads mbps as megabytes per second; write 20mbit for megabits)"),
        "{}",
        text(&o)
    );
    assert!(
        !text(&o).contains("--link (up)"),
        "2Mbit needs no note: {}",
        text(&o)
    );

    let o = debloat(&["sim", "ping", "--link", "20Mbit/2", "--length", "1"]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("--link (up): `2` = 2 bit/s is below 64 kbit/s"),
        "{}",
        text(&o)
    );

    let sc = dir.path().join("s.toml");
    std::fs::write(&sc, "length = 1\n[link]\ndown = \"20Mbit\"\nup = \"2Mbps\"\nrtt = \"20ms\"\n[[flow]]\nkind = \"ping\"\n").expect("scenario");
    let o = debloat(&["sim", "--scenario", &sc.to_string_lossy()]);
    let at = format!("note: {}:4: up: `2Mbps` = 16 Mbit/s", sc.display());
    assert!(text(&o).contains(&at), "{}", text(&o));

    let o = debloat(&[
        "replay", "--qdisc", "fq_codel", "--rate", "100", "--input", "x.csv", "--output", "y.csv",
    ]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("--rate: `100` = 100 bit/s is below 64 kbit/s"),
        "{}",
        text(&o)
    );
}
