//! Scenarios from TOML files: topology, mixed flows, and the errors a user sees.

use debloat_sim::scenario_file::run;

const FLOOD: &str = r#"
length = 20
[link]
down = "20Mbit"
up = "2Mbit"
rtt = "20ms"
[[flow]]
name = "flood"
kind = "udp-flood"
rate = "3Mbit"
size = 300
start = 5
stop = 15
"#;

#[test]
fn a_udp_flood_is_capped_at_the_link_rate_and_loses_the_excess() {
    let (_, r) = run(FLOOD, |_| {}).expect("runs");
    let f = r
        .summary
        .flows
        .iter()
        .find(|f| f.name == "flood")
        .expect("flood");
    assert_eq!(f.kind, "udp");
    // 10 s at 3 Mbit/s into 2 Mbit/s: about 2 Mbit/s gets through (plus the FIFO draining after
    // the flood stops), about a third is lost.
    assert!(
        (1.9..=2.2).contains(&f.throughput_mbps),
        "flood goodput {:.2} Mbit/s",
        f.throughput_mbps
    );
    assert!(
        (25.0..=36.0).contains(&f.loss_pct),
        "flood loss {:.1} %",
        f.loss_pct
    );
}

#[test]
fn cake_protects_a_call_from_an_upload_and_a_flood() {
    let text = r#"
length = 20
seed = 3
[link]
down = "20Mbit"
up = "2Mbit"
rtt = "20ms"
qdisc_up = "cake bandwidth 1900kbit diffserv3"
qdisc_down = "cake bandwidth 19Mbit diffserv3"
[[flow]]
name = "backup"
kind = "tcp"
start = 1
[[flow]]
name = "flood"
kind = "udp-flood"
rate = "3Mbit"
start = 5
stop = 15
[[flow]]
name = "call"
kind = "voip"
dscp = 46
[[flow]]
name = "far ping"
kind = "ping"
rtt = "80ms"
"#;
    let (_, r) = run(text, |_| {}).expect("runs");
    let call = r
        .summary
        .pings
        .iter()
        .find(|p| p.name == "call")
        .expect("call");
    let l = call.latency_ms.as_ref().expect("samples");
    assert!(l.p99 < 20.0 + 15.0, "call p99 {:.1} ms", l.p99);
    let far = r
        .summary
        .pings
        .iter()
        .find(|p| p.name == "far ping")
        .expect("far ping");
    assert!(
        far.idle_latency_ms.is_none() || far.latency_ms.as_ref().expect("samples").p50 >= 80.0,
        "the far host is 80 ms away"
    );
    assert!(r
        .summary
        .flows
        .iter()
        .any(|f| f.name == "backup" && f.throughput_mbps > 0.3));
    let (_, again) = run(text, |_| {}).expect("runs");
    assert_eq!(
        serde_json::to_string(&r.summary).ok(),
        serde_json::to_string(&again.summary).ok(),
        "deterministic"
    );
}

/// The errors are typed: a caller can tell a flow's mistake (and which flow) from the link's.
#[test]
fn mistakes_are_typed() {
    use debloat_sim::scenario_file::ScenarioError;
    let link = "length = 5\n[link]\ndown=\"1Mbit\"\nup=\"1Mbit\"\nrtt=\"10ms\"\n";
    let e = run(
        &format!("{link}[[flow]]\nname=\"x\"\nkind=\"quic\"\n"),
        |_| {},
    )
    .err();
    assert!(
        matches!(&e, Some(ScenarioError::Flow { index: 1, name, source })
            if name == "x" && matches!(**source, ScenarioError::Value { .. })),
        "{e:?}"
    );
    let e = run(&format!("{link}qdisc=\"cake bandwith 1Mbit\"\n"), |_| {}).err();
    assert!(
        matches!(&e, Some(ScenarioError::Spec { key, .. }) if key == "link.qdisc_up"),
        "{e:?}"
    );
    let e = run("length = 5\n[lnk]\n", |_| {}).err();
    assert!(matches!(e, Some(ScenarioError::Toml(_))), "{e:?}");
}

#[test]
fn mistakes_are_named() {
    let e = run(
        "length = 5\n[link]\ndown=\"1Mbit\"\nup=\"1Mbit\"\nrtt=\"10ms\"\nqdsic=\"fq_codel\"\n",
        |_| {},
    )
    .err()
    .map(|e| e.to_string())
    .expect("unknown key");
    assert!(
        e.contains("qdsic") && e.contains("qdisc_up") && e.contains("line 6"),
        "{e}"
    );
    let e = run("length = 5\n[link]\ndown=\"1Mbit\"\nup=\"1Mbit\"\nrtt=\"10ms\"\n[[flow]]\nname=\"x\"\nkind=\"quic\"\n", |_| {}).err().map(|e| e.to_string()).expect("bad kind");
    assert!(
        e.contains("flow 1") && e.contains("\"x\"") && e.contains("udp-flood"),
        "{e}"
    );
    let e = run("length = 5\n[link]\ndown=\"1Mbit\"\nup=\"1Mbit\"\nrtt=\"10ms\"\nqdisc=\"cake bandwith 1Mbit\"\n", |_| {}).err().map(|e| e.to_string()).expect("bad spec");
    assert!(
        e.contains("bandwith") && e.contains("bandwidth RATE"),
        "{e}"
    );
    let e = run("length = 5\n[link]\ndown=\"1Mbit\"\nup=\"1Mbit\"\nrtt=\"10ms\"\n[[flow]]\nname=\"late\"\nkind=\"tcp\"\nstart=4\nstop=2\n", |_| {}).err().map(|e| e.to_string()).expect("start after stop");
    assert!(e.contains("late") && e.contains("start"), "{e}");
}

/// `l4s = true` marks a probe ECT(1) (what DualPI2 queues apart); `ecn` on a probe, which it
/// once ignored, and `l4s` on a TCP flow are refused with what to write instead.
#[test]
fn an_l4s_probe_is_marked_and_misplaced_ecn_words_are_named() {
    let link = "length = 4\n[link]\ndown=\"10Mbit\"\nup=\"10Mbit\"\nrtt=\"20ms\"\n";
    let probe = |extra: &str| format!("{link}[[flow]]\nname=\"p\"\nkind=\"udp-ping\"\n{extra}\n");
    let (_, r) = run(&probe("l4s = true"), |_| {}).expect("runs");
    assert_eq!(r.world.probes[0].ecn, debloat_core::packet::Ecn::Ect1);
    let (_, r) = run(&probe(""), |_| {}).expect("runs");
    assert_eq!(r.world.probes[0].ecn, debloat_core::packet::Ecn::NotEct);
    let e = run(&probe("ecn = true"), |_| {})
        .err()
        .map(|e| e.to_string())
        .expect("ecn on a probe");
    assert!(e.contains("ecn") && e.contains("l4s = true"), "{e}");
    let tcp = format!("{link}[[flow]]\nname=\"t\"\nkind=\"tcp\"\nl4s = true\n");
    let e = run(&tcp, |_| {})
        .err()
        .map(|e| e.to_string())
        .expect("l4s on tcp");
    assert!(e.contains("l4s") && e.contains("prague"), "{e}");
}

/// A flow's `window` caps it at window / RTT while a flow without one fills the rest of the
/// link: 256 KiB over 100 ms is 181 segments × 1448 B × 8 / 0.1 s ≈ 21 Mbit/s.
#[test]
fn a_flow_window_caps_only_that_flow() {
    let text = r#"
length = 15
[link]
down = "100Mbit"
up = "100Mbit"
rtt = "100ms"
qdisc = "fq_codel"
[[flow]]
name = "capped"
kind = "tcp"
window = "256kb"
[[flow]]
name = "free"
kind = "tcp"
"#;
    let (_, r) = run(text, |_| {}).expect("runs");
    let get = |n: &str| {
        r.summary
            .flows
            .iter()
            .find(|f| f.name == n)
            .map(|f| f.throughput_mbps)
            .expect("flow")
    };
    let (capped, free) = (get("capped"), get("free"));
    let cap = 181.0 * 1448.0 * 8.0 / 0.1 / 1e6;
    eprintln!("capped {capped:.1} Mbit/s (window/RTT {cap:.1}), free {free:.1} Mbit/s");
    assert!(capped <= cap * 1.001, "capped flow {capped:.1} > {cap:.1}");
    assert!(
        capped >= cap * 0.85,
        "capped flow {capped:.1} (slow start included)"
    );
    assert!(free >= 60.0, "the other flow takes the rest: {free:.1}");
    let e = run(&text.replace("256kb", "3 lightyears"), |_| {})
        .err()
        .map(|e| e.to_string())
        .expect("bad size");
    assert!(e.contains("window") && e.contains("lightyears"), "{e}");
}

#[test]
fn a_trace_side_gets_a_modem_and_the_controller_runs_on_its_cake() {
    let toml = r#"
length = 10
[link]
down = "trace:twelve"
up = "10Mbit"
rtt = "20ms"
qdisc_down = "cake bandwidth 4mbit"
trace_buffer = "50"
autorate_down = "min=1mbit,base=4mbit,max=12mbit"
[[flow]]
name = "dl"
kind = "tcp"
direction = "down"
"#;
    // One opportunity a millisecond: 12 Mbit/s.
    let load = |f: &str| -> Result<std::sync::Arc<debloat_core::link::Trace>, String> {
        assert_eq!(f, "twelve");
        Ok(std::sync::Arc::new(
            debloat_core::link::Trace::parse("1").expect("trace"),
        ))
    };
    let rules = |_: &str| -> Result<debloat_core::classify::qosify::Config, String> {
        Err("no rules here".into())
    };
    let files = debloat_sim::scenario_file::Files {
        trace: &load,
        classify: &rules,
    };
    let (cfg, r) = debloat_sim::scenario_file::run_with(toml, &files, |_| {}).expect("runs");
    assert!(cfg.adaptive.modem_down.is_some() && cfg.adaptive.autorate_down.is_some());
    let q = r
        .summary
        .queues
        .iter()
        .find(|q| q.r#where == "bottleneck down")
        .expect("down");
    let m = q.modem.as_ref().expect("a modem row");
    assert_eq!(m.limit, "50p");
    assert!((m.capacity_mbps - 12.0).abs() < 0.1, "{}", m.capacity_mbps);
    // One opportunity a millisecond: 12 Mbit/s in every whole second of the run.
    let secs = m.capacity_per_second_mbps.len();
    assert!(secs >= 1, "{:?}", m.capacity_per_second_mbps);
    assert!(
        m.capacity_per_second_mbps[secs - 1] > 11.9 && m.capacity_per_second_mbps[secs - 1] < 12.1
    );
    // The controller raised cake from 4 Mbit/s towards the link: the download beats 4 Mbit/s.
    let dl = &r.summary.flows[0];
    assert!(dl.throughput_mbps > 5.0, "{}", dl.throughput_mbps);
    let rates = r
        .world
        .autorate_series(debloat_sim::world::Dir::Down)
        .expect("decisions");
    assert!(rates.iter().any(|p| p.rate_bps > 4_000_000));
}

#[test]
fn traces_without_a_loader_and_bad_buffers_are_errors() {
    let base = "length = 1\n[link]\nup = \"10Mbit\"\nrtt = \"20ms\"\n";
    type Ran = (debloat_sim::Config, debloat_sim::Run);
    let err = |r: Result<Ran, debloat_sim::scenario_file::ScenarioError>| match r {
        Ok(_) => panic!("should be an error"),
        Err(e) => e.to_string(),
    };
    let e = err(run(&format!("{base}down = \"trace:x\"\n"), |_| {}));
    assert!(e.contains("trace:x"), "{e}");
    let load = |_: &str| -> Result<std::sync::Arc<debloat_core::link::Trace>, String> {
        Ok(std::sync::Arc::new(
            debloat_core::link::Trace::parse("1").expect("trace"),
        ))
    };
    let rules = |f: &str| -> Result<debloat_core::classify::qosify::Config, String> {
        Err(format!("{f}: no rules here"))
    };
    let files = debloat_sim::scenario_file::Files {
        trace: &load,
        classify: &rules,
    };
    let e = err(debloat_sim::scenario_file::run_with(
        &format!("{base}down = \"trace:x\"\ntrace_buffer = \"lots\"\n"),
        &files,
        |_| {},
    ));
    assert!(e.contains("trace_buffer") && e.contains("lots"), "{e}");
    let e = err(debloat_sim::scenario_file::run_with(
        &format!("{base}down = \"10Mbit\"\nautorate_down = \"min=1mbit\"\n"),
        &files,
        |_| {},
    ));
    assert!(e.contains("autorate_down"), "{e}");
}
