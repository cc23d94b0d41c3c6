//! flent's tests as the probe runs them: the shared catalog's flows and probes
//! ([`debloat_flent::catalog`], the same one the simulator runs) turned into threads' work —
//! servers, TOS bytes, seconds — so the files open in flent and compare with its own
//! (docs/measurement.md §2).
//!
//! Timing follows flent: TCP flows start at DELAY and run LENGTH; latency probes run from 0 to
//! TOTAL_LENGTH = LENGTH + 2·DELAY, recording an idle baseline before and after the load.
//! `ping` and `voip` have no delay; `tcp_4up_squarewave` starts its flows at 0, D, 3D, 5D. A
//! probe the catalog marks as not part of flent's definition (the simulator's own ping in the
//! square-wave tests) is not run here.
//!
//! Two tests are debloat's own and run here only: `bufferbloat` loads the link the way
//! DSLReports' speed test did, one direction after the other, so the grade can follow
//! DSLReports' rule; `responsiveness` ramps both directions as draft-ietf-ippm-responsiveness-09
//! does ([`crate::rpm::Ramp`]).

use crate::flow::{Direction, FlowSpec};
use debloat_flent::catalog::{self, Driver, Item, ProbeKind};
use std::net::SocketAddr;
use std::time::Duration;

/// The tests `debloat test` runs, with their one-line descriptions (the shared catalog's).
pub fn tests() -> impl Iterator<Item = (&'static str, &'static str)> {
    catalog::TESTS
        .iter()
        .filter(|t| !matches!(t.2, catalog::Runs::SimulatorOnly(_)))
        .map(|t| (t.0, t.1))
}

/// A UDP latency probe (irtt protocol).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct UdpSpec {
    /// flent's series name (`Ping (ms) UDP EF`, or `VoIP` for the VoIP flow).
    pub name: String,
    /// TOS byte.
    pub tos: u8,
    /// Send interval.
    pub interval: Duration,
    /// Packet length, bytes (0 = irtt's minimum).
    pub length: usize,
    /// Start, s after the test's start.
    pub start_s: f64,
    /// Length, s.
    pub length_s: f64,
    /// irtt server.
    pub server: SocketAddr,
}

/// An ICMP echo series.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct IcmpSpec {
    /// flent's series name.
    pub name: String,
    /// Target.
    pub target: SocketAddr,
    /// Start, s.
    pub start_s: f64,
    /// Length, s.
    pub length_s: f64,
}

/// What one test runs.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Plan {
    /// The test's name (flent's, or `bufferbloat`).
    pub name: String,
    /// The name written as the flent file's NAME: flent opens a file only under a test it
    /// has a definition for, so `bufferbloat` is written as `rrul_be_nflows` (its series are
    /// named to match); every other test under its own name.
    pub flent_name: String,
    /// TCP flows.
    pub flows: Vec<FlowSpec>,
    /// UDP latency probes.
    pub udp: Vec<UdpSpec>,
    /// The VoIP flow, if the test has one.
    pub voip: Option<UdpSpec>,
    /// ICMP series.
    pub icmp: Vec<IcmpSpec>,
    /// LENGTH, s.
    pub length_s: f64,
    /// DELAY, s (0 for tests without one).
    pub delay_s: f64,
    /// TOTAL_LENGTH, s.
    pub total_s: f64,
    /// STEP_SIZE, s.
    pub step_s: f64,
    /// Test parameters as flent records them (`upload_streams` …).
    pub parameters: Vec<(String, String)>,
    /// The draft's load ramp (`responsiveness`): (interval ID s, most flows per direction).
    /// Flows after the first of each direction are gated and released by the runner.
    pub ramp: Option<(f64, usize)>,
}

/// The window `[first start, last end]` of some flows, s.
fn window<'a>(flows: impl Iterator<Item = &'a FlowSpec>) -> Option<(f64, f64)> {
    flows
        .map(|f| (f.start_s, f.start_s + f.length_s))
        .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)))
}

impl Plan {
    /// The window the load runs in: [DELAY, DELAY + LENGTH] (flent's cut-off for summaries).
    pub fn load_window(&self) -> (f64, f64) {
        window(self.flows.iter()).unwrap_or((0.0, self.total_s))
    }

    /// The loaded phases, in order, each with its direction and window: one per direction when
    /// the uploads and downloads run at different times (`bufferbloat`), otherwise one phase
    /// over the load window, named after the directions it loads. Empty without flows.
    pub fn phases(&self) -> Vec<(&'static str, (f64, f64))> {
        let of = |d: Direction| window(self.flows.iter().filter(|f| f.dir == d));
        match (of(Direction::Down), of(Direction::Up)) {
            (Some(d), Some(u)) if d.1 <= u.0 || u.1 <= d.0 => {
                let mut v = vec![("download", d), ("upload", u)];
                v.sort_by(|a, b| a.1 .0.total_cmp(&b.1 .0));
                v
            }
            (Some(_), Some(_)) => vec![("bidirectional", self.load_window())],
            (Some(d), None) => vec![("download", d)],
            (None, Some(u)) => vec![("upload", u)],
            (None, None) => Vec::new(),
        }
    }

    /// The window the responsiveness (RPM) is measured in: the load window, or the first phase
    /// when the directions load the link in turn (the draft measures one working condition;
    /// an idle gap between phases is not one).
    pub fn rpm_window(&self) -> (f64, f64) {
        match self.phases().as_slice() {
            [first, _, ..] => first.1,
            _ => self.load_window(),
        }
    }
}

/// What the user chose.
#[derive(Debug, Clone)]
pub struct Options {
    /// LENGTH, s (flent's `-l`, 60).
    pub length_s: f64,
    /// STEP_SIZE, s (flent's `-s`, 0.2).
    pub step_s: f64,
    /// DELAY, s (flent's `-d`, 5).
    pub delay_s: f64,
    /// Streams for tcp_nup / tcp_ndown.
    pub streams: usize,
    /// Congestion control for flows whose test does not fix one (None = the sender's default).
    pub cc: Option<String>,
    /// The servers' TCP addresses, with the names the user gave them (for series names).
    pub servers: Vec<(String, SocketAddr)>,
    /// irtt server for the UDP probes (default: each debloat server's own UDP port).
    pub irtt: Option<SocketAddr>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            length_s: 60.0,
            step_s: 0.2,
            delay_s: 5.0,
            streams: 4,
            cc: None,
            servers: Vec::new(),
            irtt: None,
        }
    }
}

/// The plan for test `name`; an unknown name is an error that lists the valid ones.
pub fn plan(name: &str, o: &Options) -> Result<Plan, String> {
    let Some(first) = o.servers.first().map(|s| s.1) else {
        return Err(
            "no server given: `debloat test NAME SERVER` (a host running `debloat server`)".into(),
        );
    };
    if !(o.step_s > 0.0 && o.length_s > 0.0 && o.delay_s >= 0.0) {
        return Err("--length and --step must be positive and --delay not negative".into());
    }
    let name = catalog::lookup(name, Driver::Probe).map_err(|e| e.to_string())?;
    if o.servers.len() > 1 && !name.starts_with("rtt_fair") {
        return Err(format!(
            "{name} takes one server; only rtt_fair_up (four) and rtt_fair_var_up/_down (any \
             number) take several"
        ));
    }
    let copts = catalog::Options {
        streams: o.streams,
        hosts: o.servers.iter().map(|s| s.0.clone()).collect(),
        ramp: (crate::rpm::INP, crate::rpm::MNP),
    };
    let def = catalog::test(name, &copts)?;
    let d = if def.has_delay { o.delay_s } else { 0.0 };
    let mut p = Plan {
        name: name.to_string(),
        flent_name: def.flent_name.to_string(),
        flows: Vec::new(),
        udp: Vec::new(),
        voip: None,
        icmp: Vec::new(),
        length_s: o.length_s,
        delay_s: d,
        total_s: def.total_s(d, o.length_s),
        step_s: o.step_s,
        parameters: def.parameters.clone(),
        ramp: (name == "responsiveness").then_some((crate::rpm::ID_S, crate::rpm::MNP)),
    };
    let server = |h: Option<usize>| h.and_then(|h| o.servers.get(h)).map_or(first, |s| s.1);
    for item in &def.items {
        match item {
            Item::Flow(f) => p.flows.push(FlowSpec {
                name: f.name.clone(),
                dir: f.dir,
                cc: f.cc.map(str::to_string).or_else(|| o.cc.clone()),
                tos: f.dscp << 2,
                start_s: f.start.seconds(d, o.length_s),
                length_s: f.length.seconds(d, o.length_s),
                server: server(f.host),
                gated: f.gated,
            }),
            Item::Probe(q) if q.in_flent => add_probe(&mut p, q, server(q.host), o),
            Item::Probe(_) => {}
        }
    }
    Ok(p)
}

/// A latency probe of the catalog, from 0 for the whole test.
fn add_probe(p: &mut Plan, q: &catalog::ProbeDef, target: SocketAddr, o: &Options) {
    let irtt = o.irtt.unwrap_or(target);
    let udp = |interval, length| UdpSpec {
        name: q.name.clone(),
        tos: q.dscp << 2,
        interval,
        length,
        start_s: 0.0,
        length_s: p.total_s,
        server: irtt,
    };
    match q.kind {
        ProbeKind::Icmp => p.icmp.push(IcmpSpec {
            name: q.name.clone(),
            target,
            start_s: 0.0,
            length_s: p.total_s,
        }),
        ProbeKind::Udp => {
            let u = udp(Duration::from_secs_f64(p.step_s), 0);
            p.udp.push(u);
        }
        ProbeKind::Voip => p.voip = Some(udp(Duration::from_millis(20), 172)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> Options {
        Options {
            servers: vec![(
                "198.18.0.2".into(),
                "198.18.0.2:2112".parse().expect("addr"),
            )],
            ..Options::default()
        }
    }

    #[test]
    fn rrul_has_flents_series_and_timing() {
        let p = plan("rrul", &opts()).expect("rrul");
        let names: Vec<&str> = p.flows.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "TCP upload BE",
                "TCP download BE",
                "TCP upload BK",
                "TCP download BK",
                "TCP upload CS5",
                "TCP download CS5",
                "TCP upload EF",
                "TCP download EF"
            ]
        );
        assert_eq!(p.flows[6].tos, 0xb8);
        assert_eq!(p.udp.len(), 3);
        assert_eq!(p.udp[0].name, "Ping (ms) UDP EF");
        assert_eq!(p.total_s, 70.0);
        assert_eq!(p.load_window(), (5.0, 65.0));
        assert_eq!(p.icmp[0].length_s, 70.0);
    }

    #[test]
    fn squarewave_staircase() {
        let p = plan("tcp_4up_squarewave", &opts()).expect("sqw");
        let starts: Vec<f64> = p.flows.iter().map(|f| f.start_s).collect();
        assert_eq!(starts, [0.0, 5.0, 15.0, 25.0]);
        assert_eq!(p.flows[1].cc.as_deref(), Some("cubic"));
        assert_eq!(p.total_s, 90.0);
    }

    #[test]
    fn bufferbloat_loads_one_direction_then_the_other() {
        let p = plan("bufferbloat", &opts()).expect("bufferbloat");
        assert_eq!(p.total_s, 75.0);
        let down: Vec<(f64, f64)> = p
            .flows
            .iter()
            .filter(|f| f.dir == Direction::Down)
            .map(|f| (f.start_s, f.length_s))
            .collect();
        assert_eq!(down, [(5.0, 30.0); 4]);
        assert!(p
            .flows
            .iter()
            .filter(|f| f.dir == Direction::Up)
            .all(|f| (f.start_s, f.length_s) == (40.0, 30.0)));
        assert_eq!(
            p.phases(),
            [("download", (5.0, 35.0)), ("upload", (40.0, 70.0))]
        );
        assert_eq!(p.rpm_window(), (5.0, 35.0));
        assert_eq!(p.load_window(), (5.0, 70.0));
        // Tests that load both directions together have one phase.
        let rrul = plan("rrul", &opts()).expect("rrul");
        assert_eq!(rrul.phases(), [("bidirectional", (5.0, 65.0))]);
        assert_eq!(rrul.rpm_window(), (5.0, 65.0));
        let up = plan("tcp_nup", &opts()).expect("tcp_nup");
        assert_eq!(up.phases(), [("upload", (5.0, 65.0))]);
        assert!(plan("ping", &opts()).expect("ping").phases().is_empty());
    }

    #[test]
    fn unknown_test_lists_the_choices() {
        let e = plan("rrull", &opts()).expect_err("must fail");
        assert!(
            e.contains("`rrull`") && e.contains("rrul_be") && e.contains("voip"),
            "{e}"
        );
    }

    #[test]
    fn every_listed_test_has_a_plan() {
        let four = Options {
            servers: (1..=4)
                .map(|i| {
                    let a = format!("198.18.0.{i}:2112");
                    (a.clone(), a.parse().expect("addr"))
                })
                .collect(),
            ..Options::default()
        };
        for (name, _) in tests() {
            let o = if name == "rtt_fair_up" {
                &four
            } else {
                &opts()
            };
            let p = plan(name, o).expect(name);
            assert!(
                !p.flows.is_empty() || !p.udp.is_empty() || p.voip.is_some(),
                "{name} runs nothing"
            );
        }
    }
}
