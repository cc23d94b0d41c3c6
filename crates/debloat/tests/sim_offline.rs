//! The setup a user deploys, run offline: `debloat sim --config gateway.toml`, `--sqm`,
//! `--qosify`, `--egress/--ingress` and `--emulate-*` run the same simulation as the
//! simulator's own words for the same disciplines, links and marking — number for number.

mod common;
use common::{debloat, text};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");

/// A short run's printed table (stdout only: stderr holds the setup's warnings).
fn sim(args: &[&str]) -> String {
    let mut all = vec!["sim", "--length", "8", "--delay", "1"];
    all.extend_from_slice(args);
    let o = debloat(&all);
    assert!(o.status.success(), "{all:?}: {}", text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The two disciplines `debloat gateway --dry-run` resolves for these flags.
fn resolved(args: &[&str]) -> (String, String) {
    let mut all = vec!["gateway", "--dry-run"];
    all.extend_from_slice(args);
    let o = debloat(&all);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let find = |key: &str| -> String {
        out.lines()
            .find_map(|l| l.strip_prefix(&format!("{key} = \"")))
            .and_then(|l| l.strip_suffix('"'))
            .unwrap_or("fq_codel")
            .to_string()
    };
    (find("egress"), find("ingress"))
}

#[test]
fn the_deployed_gateway_toml_runs_as_its_disciplines_would() {
    let file = format!("{ROOT}/contrib/gateway.toml");
    let (e, i) = resolved(&["--config", &file]);
    assert!(e.starts_with("cake bandwidth 19Mbit"), "{e}");
    let offline = sim(&["rrul", "--link", "100Mbit/20Mbit", "--config", &file]);
    let own = sim(&[
        "rrul",
        "--link",
        "100Mbit/20Mbit",
        "--qdisc-up",
        &e,
        "--qdisc-down",
        &i,
    ]);
    assert_eq!(offline, own);
    assert!(
        offline.contains("cake bandwidth 19Mbit diffserv4"),
        "{offline}"
    );
}

#[test]
fn an_sqm_config_runs_as_the_gateway_imports_it() {
    let file = format!("{DATA}/sqm/layer_cake_atm");
    let (e, i) = resolved(&["--sqm", &file]);
    assert!(
        e.contains("atm overhead 44") && i.contains("14Mbit"),
        "{e} / {i}"
    );
    let offline = sim(&["tcp_ndown", "--sqm", &file]);
    let own = sim(&["tcp_ndown", "--qdisc-up", &e, "--qdisc-down", &i]);
    assert_eq!(offline, own);
}

#[test]
fn a_qosify_config_runs_its_disciplines_and_its_marking() {
    let file = format!("{DATA}/qosify/qosify");
    let (e, i) = resolved(&["--qosify", &file]);
    let offline = sim(&["rrul", "--qosify", &file]);
    let own = sim(&[
        "rrul",
        "--qdisc-up",
        &e,
        "--qdisc-down",
        &i,
        "--classify",
        &file,
    ]);
    assert_eq!(offline, own);
    // Without the marking the same disciplines give other numbers: the marking ran.
    let unmarked = sim(&["rrul", "--qdisc-up", &e, "--qdisc-down", &i]);
    assert_ne!(offline, unmarked);
}

/// An emulated link's rate and netem words are the bottleneck's in that direction; the other
/// direction keeps --link's rate and the gateway's default discipline (fq_codel).
#[test]
fn emulated_links_are_the_bottlenecks() {
    let offline = sim(&[
        "tcp_bidirectional",
        "--link",
        "30Mbit/30Mbit",
        "--egress",
        "cake bandwidth 4Mbit",
        "--emulate-egress",
        "rate 5Mbit delay 10ms loss 1%",
    ]);
    assert!(
        offline.contains("over 30Mbit/5Mbit"),
        "the up rate is the emulated one: {offline}"
    );
    let own = sim(&[
        "tcp_bidirectional",
        "--link",
        "30Mbit/5Mbit",
        "--qdisc-up",
        "cake bandwidth 4Mbit",
        "--qdisc-down",
        "fq_codel",
        "--impair",
        "delay 10ms loss 1%",
    ]);
    // --impair applies both ways, the emulated link one way: the up rows agree where only the
    // up wire matters, the whole run does not.
    assert_ne!(offline, own);
    let up = |t: &str| {
        t.lines()
            .find(|l| l.contains("bottleneck up"))
            .map(str::to_string)
    };
    assert!(up(&offline).is_some_and(|l| l.contains("cake bandwidth 4Mbit")));
    let both = sim(&[
        "tcp_bidirectional",
        "--link",
        "30Mbit/30Mbit",
        "--egress",
        "cake bandwidth 4Mbit",
        "--emulate-egress",
        "rate 5Mbit delay 10ms loss 1%",
        "--emulate-ingress",
        "delay 10ms loss 1%",
    ]);
    let own_both = sim(&[
        "tcp_bidirectional",
        "--link",
        "30Mbit/5Mbit",
        "--qdisc-up",
        "cake bandwidth 4Mbit",
        "--qdisc-down",
        "fq_codel",
        "--impair",
        "delay 10ms loss 1%",
    ]);
    assert_eq!(both, own_both);
}

#[test]
fn the_gateways_words_clash_with_the_simulators_own_for_the_same_thing() {
    let o = debloat(&["sim", "rrul", "--egress", "fq_codel", "--qdisc-up", "codel"]);
    assert!(!o.status.success());
    let o = debloat(&["sim", "rrul", "--config", "x.toml", "--qdisc", "codel"]);
    assert!(!o.status.success());
    let o = debloat(&["sim", "rrul", "--emulate-egress", "rate 5Mbit bogus 3"]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("emulate_egress \"rate 5Mbit bogus 3\""),
        "{}",
        text(&o)
    );
}

/// `--host-qdisc fq`: said in the headline, a queue row per side of hosts, every packet the
/// clients' fq let go counted at the bottleneck, and a bad spec refused naming the flag.
#[test]
fn host_qdisc_fq_shows_its_queues_and_bad_words_name_the_flag() {
    let out = sim(&[
        "tcp_1up",
        "--link",
        "100Mbit/100Mbit",
        "--rtt",
        "40ms",
        "--qdisc",
        "pfifo limit 30",
        "--host-qdisc",
        "fq",
    ]);
    assert!(
        out.lines()
            .next()
            .unwrap_or("")
            .ends_with("hosts' qdisc fq"),
        "{out}"
    );
    let row = |name: &str| -> Vec<u64> {
        let l = out
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no {name} row: {out}"));
        // sent, dropped, marked, max q: the numbers after the (possibly cut) spec.
        l.split_whitespace()
            .filter_map(|w| w.parse().ok())
            .take(4)
            .collect()
    };
    let (hosts, link) = (row("hosts up"), row("bottleneck up"));
    assert_eq!(
        hosts[0],
        link[0] + link[1],
        "hosts' sent = link's sent + dropped"
    );
    assert_eq!(hosts[1], 0, "TSQ keeps fq's flow limit unreached");
    assert!(
        row("hosts down")[0] > 0,
        "the ACKs leave through the servers' fq"
    );
    let o = debloat(&["sim", "tcp_1up", "--host-qdisc", "fq flowlimit 3"]);
    assert!(!o.status.success());
    let t = text(&o);
    assert!(
        t.contains("--host-qdisc") && t.contains("did you mean `flow_limit`"),
        "{t}"
    );
}
