//! `debloat sim` as a user runs it: flent files and their series names, TOML scenarios, the
//! flags' errors, captures as pcap, Wi-Fi stations, and what it prints. Part of `tests/cli.rs`
//! (one test binary).

use super::common::{debloat, read_flent, text};
use std::path::Path;
use std::process::Command;

/// flent's output for `flent -i FILE -f FORMAT`, or None — with a SKIP line saying what did not
/// run — where flent is not installed (CI installs it).
pub(super) fn flent(file: &Path, format: &str, what: &str) -> Option<String> {
    if !Command::new("flent")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        println!("SKIP: flent is not installed; {what} did not run (apt-get install flent)");
        return None;
    }
    let out = Command::new("flent")
        .args(["-i", file.to_str().unwrap_or(""), "-f", format])
        .output()
        .expect("flent runs");
    assert!(
        out.status.success(),
        "flent -f {format}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn sim_writes_a_flent_file_and_a_summary() {
    let dir = tempfile::tempdir().expect("tmp");
    let o = debloat(&[
        "sim",
        "tcp_nup",
        "--link",
        "20Mbit/20Mbit",
        "--rtt",
        "48ms",
        "--qdisc",
        "cake bandwidth 20Mbit",
        "--streams",
        "2",
        "--length",
        "10",
        "--output",
        dir.path().to_str().unwrap_or(""),
        "--title",
        "cake test",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("TCP upload::1")
            && t.contains("Ping (ms) ICMP")
            && t.contains("Mbit/s")
            && t.contains("ms"),
        "{t}"
    );
    let name = "tcp_nup-2026-01-01T000000.000000.cake_test.flent.gz";
    let v = read_flent(&dir.path().join(name));
    assert_eq!(v["version"], 4);
    assert_eq!(v["metadata"]["NAME"], "tcp_nup");
    assert_eq!(v["metadata"]["T0"], "2026-01-01T00:00:00.000000Z");
    assert_eq!(v["metadata"]["TEST_PARAMETERS"]["upload_streams"], "2");
    let n = v["x_values"].as_array().map(|a| a.len()).unwrap_or(0);
    assert_eq!(n, 101, "20 s at 0.2 s steps");
    for s in ["TCP upload::1", "TCP upload::2", "Ping (ms) ICMP"] {
        assert_eq!(v["results"][s].as_array().map(|a| a.len()), Some(n), "{s}");
        assert!(
            !v["raw_values"][s]
                .as_array()
                .map(|a| a.is_empty())
                .unwrap_or(true),
            "{s} has raw samples"
        );
    }
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("summary.json")).expect("summary"),
    )
    .expect("json");
    assert_eq!(summary["flows"].as_array().map(|a| a.len()), Some(2));
    assert_eq!(summary["queues"][0]["where"], "bottleneck up");
    let p50 = summary["pings"][0]["latency_ms"]["p50"]
        .as_f64()
        .unwrap_or(0.0);
    assert!(
        p50 > 48.0 && p50 < 52.0,
        "cake keeps the ping near the 48 ms base: {p50}"
    );
    let tp = summary["flows"][0]["throughput_mbps"]
        .as_f64()
        .unwrap_or(0.0);
    assert!(tp > 5.0, "throughput {tp}");

    // The real flent opens it.
    if let Some(csv) = flent(
        &dir.path().join(name),
        "csv",
        "the flent-loads-the-file check",
    ) {
        let rows = csv
            .lines()
            .filter(|l| l.chars().next().is_some_and(|c| c.is_ascii_digit()))
            .count();
        assert_eq!(rows, n, "flent -f csv prints one row per x value:\n{csv}");
        assert!(
            csv.lines().any(|l| l.starts_with("tcp_nup,")
                && l.contains("TCP upload::1")
                && l.contains("Ping (ms) ICMP")),
            "{csv}"
        );
    }
    if let Some(sum) = flent(&dir.path().join(name), "summary", "the flent summary check") {
        assert!(sum.contains("Ping (ms) ICMP"), "{sum}");
    }
}

#[test]
fn sim_rrul_file_has_flents_series_names() {
    let dir = tempfile::tempdir().expect("tmp");
    let o = debloat(&[
        "sim",
        "rrul",
        "--link",
        "20Mbit/2Mbit",
        "--rtt",
        "20ms",
        "--qdisc",
        "fq_codel",
        "--length",
        "5",
        "--output",
        dir.path().to_str().unwrap_or(""),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let name = "rrul-2026-01-01T000000.000000.flent.gz";
    let v = read_flent(&dir.path().join(name));
    for s in [
        "TCP upload BE",
        "TCP upload BK",
        "TCP upload CS5",
        "TCP upload EF",
        "TCP download BE",
        "TCP download BK",
        "TCP download CS5",
        "TCP download EF",
        "Ping (ms) UDP EF",
        "Ping (ms) UDP BK",
        "Ping (ms) UDP BE",
        "Ping (ms) ICMP",
    ] {
        assert!(v["results"][s].is_array(), "missing series {s}");
    }
    if let Some(out) = flent(
        &dir.path().join(name),
        "summary",
        "the flent-opens-rrul check",
    ) {
        assert!(
            out.contains("TCP totals") && out.contains("Ping (ms) UDP EF"),
            "{out}"
        );
    }
}

#[test]
fn sim_rtt_fair_up_names_its_four_hosts_as_flent_does() {
    let dir = tempfile::tempdir().expect("tmp");
    let o = debloat(&[
        "sim",
        "rtt_fair_up",
        "--link",
        "5500kbit/500kbit",
        "--rtt",
        "300us",
        "--qdisc",
        "fq_codel",
        "--length",
        "5",
        "--output",
        dir.path().to_str().unwrap_or(""),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let v = read_flent(
        &dir.path()
            .join("rtt_fair_up-2026-01-01T000000.000000.flent.gz"),
    );
    assert_eq!(v["metadata"]["HOSTS"].as_array().map(|a| a.len()), Some(4));
    for i in 1..=4 {
        let h = format!("198.18.2.{}", 10 + i);
        for s in [
            format!("TCP upload BE{i} {h}"),
            format!("Ping (ms) ICMP{i} {h}"),
        ] {
            assert!(v["results"][&s].is_array(), "missing {s}");
        }
    }
}

#[test]
fn sim_voip_writes_flents_voip_series() {
    let dir = tempfile::tempdir().expect("tmp");
    let o = debloat(&[
        "sim",
        "voip",
        "--link",
        "1Mbit/1Mbit",
        "--rtt",
        "50ms",
        "--qdisc",
        "fq_codel",
        "--length",
        "4",
        "--output",
        dir.path().to_str().unwrap_or(""),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let v = read_flent(&dir.path().join("voip-2026-01-01T000000.000000.flent.gz"));
    for s in ["VoIP::rtt", "VoIP::delay", "VoIP::jitter", "VoIP::loss"] {
        assert!(v["results"][s].is_array(), "missing {s}");
    }
    let raw = v["raw_values"]["VoIP"]
        .as_array()
        .map(|a| a.len())
        .unwrap_or(0);
    assert_eq!(
        raw, 201,
        "every 20 ms from 0 to 4 s inclusive: 201 packets, all answered"
    );
    let delay = v["metadata"]["SERIES_META"]["VoIP"]["OWD_UP_MEAN"]
        .as_f64()
        .unwrap_or(0.0);
    assert!(
        (25.0..27.0).contains(&delay),
        "one-way delay ≈ half the RTT + serialisation: {delay}"
    );
    if let Some(out) = flent(
        &dir.path().join("voip-2026-01-01T000000.000000.flent.gz"),
        "summary",
        "the flent-opens-voip check",
    ) {
        assert!(
            out.contains("VoIP::delay") && out.contains("VoIP::loss"),
            "{out}"
        );
    }
}

#[test]
fn sim_runs_a_toml_scenario() {
    let dir = tempfile::tempdir().expect("tmp");
    let sc = dir.path().join("s.toml");
    std::fs::write(&sc, "name = \"t\"\nlength = 10\n[link]\ndown = \"20Mbit\"\nup = \"2Mbit\"\nrtt = \"20ms\"\nqdisc = \"fq_codel\"\n[[flow]]\nname = \"up\"\nkind = \"tcp\"\n[[flow]]\nname = \"down\"\nkind = \"tcp\"\ndirection = \"down\"\ncc = \"bbr\"\n[[flow]]\nname = \"ping\"\nkind = \"ping\"\n").expect("write");
    let o = debloat(&[
        "sim",
        "--scenario",
        sc.to_str().unwrap_or(""),
        "--output",
        dir.path().to_str().unwrap_or(""),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("up") && t.contains("down") && t.contains("ping: under load"),
        "{t}"
    );
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("summary.json")).expect("summary"),
    )
    .expect("json");
    assert_eq!(summary["flows"].as_array().map(|a| a.len()), Some(2));
    assert_eq!(summary["flows"][1]["cc"], "bbr");
    std::fs::write(&sc, "length = 10\n[link]\ndown = \"20Mbit\"\n").expect("write");
    let o = debloat(&["sim", "--scenario", sc.to_str().unwrap_or("")]);
    assert!(
        !o.status.success() && text(&o).contains("missing field"),
        "{}",
        text(&o)
    );
}

/// A misspelt word is reported against the flag the user typed, with the nearest valid word.
#[test]
fn sim_names_the_flag_typed_and_the_word_meant() {
    let o = debloat(&["sim", "rrul", "--qdisc", "cake bandwith 20Mbit"]);
    let t = text(&o);
    assert!(!o.status.success());
    assert!(t.contains("--qdisc \"cake bandwith 20Mbit\""), "{t}");
    assert!(!t.contains("--qdisc-up"), "{t}");
    assert!(t.contains("did you mean `bandwidth`?"), "{t}");
    let o = debloat(&["sim", "rrul", "--qdisc-down", "fq_codle"]);
    let t = text(&o);
    assert!(
        t.contains("--qdisc-down") && t.contains("`fq_codel`"),
        "{t}"
    );
    let o = debloat(&["sim", "rrul", "--impair", "delay 5ms jiter 1ms"]);
    let t = text(&o);
    assert!(t.contains("--impair") && t.contains("`jitter`"), "{t}");
    let o = debloat(&["sim", "rrul", "--impair", "rate 5mbit"]);
    let t = text(&o);
    assert!(!o.status.success() && t.contains("--link"), "{t}");
    let o = debloat(&["sim", "rrul", "--loss", "120%"]);
    assert!(
        !o.status.success() && text(&o).contains("between 0 and 100"),
        "{}",
        text(&o)
    );
}

/// `--impair` takes netem's words: a 10 ms delay on each wire adds 20 ms to the idle RTT.
#[test]
fn sim_impair_adds_netems_delay_to_both_wires() {
    let run = |extra: &[&str]| {
        let mut args = vec!["sim", "ping", "--length", "5", "--rtt", "20ms"];
        args.extend_from_slice(extra);
        let o = debloat(&args);
        assert!(o.status.success(), "{}", text(&o));
        text(&o)
    };
    let p50 = |t: &str| -> f64 {
        let i = t.find("p50 ").expect("a p50");
        t[i + 4..]
            .split_whitespace()
            .next()
            .and_then(|v| v.parse().ok())
            .expect("a number")
    };
    let (plain, delayed) = (p50(&run(&[])), p50(&run(&["--impair", "delay 10ms"])));
    assert!(
        (delayed - plain - 20.0).abs() < 0.5,
        "{plain} ms → {delayed} ms"
    );
}

#[test]
fn sim_says_which_tests_exist() {
    // One catalog: a name neither knows is refused with the same list the probe gives, and a
    // test that needs a real network says so and how to run it there.
    let o = debloat(&["sim", "tcp_9up"]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("unknown test `tcp_9up`") && text(&o).contains("tcp_nup"),
        "{}",
        text(&o)
    );
    let probe = debloat(&["test", "tcp_9up", "198.18.0.1"]);
    let line = |t: String| {
        t.lines()
            .find(|l| l.contains("unknown test"))
            .map(|l| l[l.find("unknown test").unwrap_or(0)..].to_string())
    };
    assert_eq!(line(text(&o)), line(text(&probe)), "same words in both");
    let o = debloat(&["sim", "responsiveness"]);
    assert!(
        !o.status.success() && text(&o).contains("debloat test responsiveness SERVER"),
        "{}",
        text(&o)
    );
    let o = debloat(&["sim", "tcp_1down", "--length", "2"]);
    assert!(
        o.status.success() && text(&o).contains("TCP download"),
        "{}",
        text(&o)
    );
    let o = debloat(&["sim", "tcp_nup", "--cc", "vegas"]);
    assert!(
        !o.status.success() && text(&o).contains("cubic"),
        "{}",
        text(&o)
    );
    let o = debloat(&["sim", "tcp_nup", "--link", "fast"]);
    assert!(
        !o.status.success() && text(&o).contains("Mbit"),
        "{}",
        text(&o)
    );
}
