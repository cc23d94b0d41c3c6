//! The catalog against flent's own definitions.

use super::*;

fn opts() -> Options {
    Options {
        streams: 4,
        hosts: vec!["h".into()],
        ramp: (1, 16),
    }
}

#[test]
fn rrul_has_flents_series_markings_and_timing() {
    let t = test("rrul", &opts()).expect("rrul");
    let names: Vec<&str> = t.flows().map(|f| f.name.as_str()).collect();
    assert_eq!(names[..2], ["TCP upload BE", "TCP download BE"]);
    assert_eq!(t.flows().count(), 8);
    let ef = t.flows().find(|f| f.name == "TCP upload EF").expect("EF");
    assert_eq!((ef.dscp, ef.start.seconds(5.0, 60.0)), (46, 5.0));
    let udp: Vec<&str> = t
        .probes()
        .filter(|p| p.kind == ProbeKind::Udp)
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(
        udp,
        ["Ping (ms) UDP EF", "Ping (ms) UDP BK", "Ping (ms) UDP BE"]
    );
    assert_eq!(t.total_s(5.0, 60.0), 70.0);
}

#[test]
fn the_square_waves_follow_flents_timing() {
    let t = test("tcp_2up_square", &opts()).expect("square");
    let w: Vec<(String, f64, f64)> = t
        .flows()
        .map(|f| {
            (
                f.name.clone(),
                f.start.seconds(5.0, 60.0),
                f.length.seconds(5.0, 60.0),
            )
        })
        .collect();
    assert_eq!(w[0], ("TCP cubic".into(), 0.0, 60.0));
    assert_eq!(w[2], ("TCP reno".into(), 15.0, 5.0));
    assert_eq!(t.total_s(5.0, 60.0), 60.0);
    assert_eq!(t.total_s(15.0, 60.0), 90.0);
    let s = test("tcp_4up_squarewave", &opts()).expect("staircase");
    assert_eq!(s.total_s(5.0, 60.0), 90.0);
    assert!(
        s.probes().all(|p| !p.in_flent),
        "flent's has no latency series"
    );
    assert_eq!(
        lookup("tcp_square_wave", Driver::Simulator),
        Ok("tcp_4up_squarewave")
    );
}

#[test]
fn both_drivers_get_the_same_words() {
    let sim = lookup("tcp_9up", Driver::Simulator).expect_err("unknown");
    let probe = lookup("tcp_9up", Driver::Probe).expect_err("unknown");
    assert_eq!(sim, probe);
    let sim = sim.to_string();
    assert!(
        sim.contains("tcp_1down") && sim.contains("rtt_fair_up"),
        "{sim}"
    );
    let e = lookup("responsiveness", Driver::Simulator).expect_err("real only");
    assert!(matches!(e, LookupError::RealNetworkOnly { .. }), "{e:?}");
    assert!(e.to_string().contains("debloat test responsiveness"), "{e}");
    assert_eq!(
        lookup("responsiveness", Driver::Probe),
        Ok("responsiveness")
    );
}

#[test]
fn rtt_fair_up_takes_four_hosts() {
    let e = test("rtt_fair_up", &opts()).expect_err("one host");
    assert!(e.contains("four hosts"), "{e}");
    let mut o = opts();
    o.hosts = (1..=4).map(|i| format!("h{i}")).collect();
    let t = test("rtt_fair_up", &o).expect("four");
    assert_eq!(t.items.len(), 8);
    assert_eq!(
        t.probes().nth(3).map(|p| p.name.as_str()),
        Some("Ping (ms) ICMP4 h4")
    );
}

#[test]
fn bufferbloat_loads_one_direction_then_the_other() {
    let t = test("bufferbloat", &opts()).expect("bufferbloat");
    let down = t.flows().find(|f| f.dir == Dir::Down).expect("down");
    let up = t.flows().find(|f| f.dir == Dir::Up).expect("up");
    assert_eq!(down.start.seconds(5.0, 60.0), 5.0);
    assert_eq!(up.start.seconds(5.0, 60.0), 40.0);
    assert_eq!(up.length.seconds(5.0, 60.0), 30.0);
    assert_eq!(
        (t.flent_name, t.total_s(5.0, 60.0)),
        ("rrul_be_nflows", 75.0)
    );
}
