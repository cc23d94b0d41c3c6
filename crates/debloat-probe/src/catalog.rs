//! flent's tests under flent's names (docs/measurement.md §2): which flows and probes each runs,
//! with flent's series names, markings, start times and lengths, so the files open in flent
//! and compare with its own.
//!
//! Timing follows flent: TCP flows start at DELAY and run LENGTH; latency probes run from 0 to
//! TOTAL_LENGTH = LENGTH + 2·DELAY, recording an idle baseline before and after the load.
//! `ping` and `voip` have no delay; `tcp_4up_squarewave` starts its flows at 0, D, 3D, 5D.
//!
//! Two tests are debloat's own, not flent's. `bufferbloat` loads the link the way DSLReports'
//! speed test did, one direction after the other (downloads for LENGTH/2, an idle DELAY so the
//! download's queue drains, uploads for LENGTH/2), so the grade can follow DSLReports' rule
//! (the mean of the two directions' increases) and show each direction's own.
//! `responsiveness` loads both directions as draft-ietf-ippm-responsiveness-09 does, adding a
//! connection each way per interval until goodput saturates ([`crate::rpm::Ramp`]).

use crate::flow::{Direction, FlowSpec};
use std::net::SocketAddr;
use std::time::Duration;

/// The tests `debloat test` runs, with flent's one-line descriptions.
pub const TESTS: &[(&str, &str)] = &[
    ("ping", "ICMP and UDP ping, no load"),
    ("tcp_1up", "one TCP upload + ICMP ping"),
    ("tcp_1down", "one TCP download + ICMP ping"),
    ("tcp_nup", "N TCP uploads (--streams) + ICMP ping"),
    ("tcp_ndown", "N TCP downloads (--streams) + ICMP ping"),
    (
        "tcp_bidirectional",
        "one TCP upload and one download + ICMP ping",
    ),
    (
        "rrul",
        "4 up + 4 down TCP (BE, BK, CS5, EF) + UDP EF/BK/BE + ICMP",
    ),
    ("rrul_be", "4 up + 4 down TCP best effort + 3 UDP + ICMP"),
    ("voip", "G.711-like UDP flow: 172 bytes every 20 ms"),
    (
        "tcp_4up_squarewave",
        "BBR, CUBIC, BBR, CUBIC uploads started at 0, D, 3D, 5D",
    ),
    ("rtt_fair_var_up", "one TCP upload + ICMP per server given"),
    (
        "rtt_fair_var_down",
        "one TCP download + ICMP per server given",
    ),
    (
        "responsiveness",
        "debloat's own, draft-09 RPM: up and down load ramped 1 → 16 connections each way until goodput saturates + ICMP and UDP ping",
    ),
    (
        "bufferbloat",
        "debloat's own, DSLReports-style: N downloads, idle, N uploads (LENGTH/2 each) + ICMP and UDP ping; graded per direction",
    ),
];

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

/// TOS bytes flent uses (DSCP << 2).
const CS0: u8 = 0x00;
const CS1: u8 = 0x20;
const CS5: u8 = 0xa0;
const EF: u8 = 0xb8;

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
    let (d, l, step) = (o.delay_s, o.length_s, o.step_s);
    let irtt = o.irtt.unwrap_or(first);
    let flow = |name: &str, dir, cc: Option<&str>, tos, start_s, length_s, server| FlowSpec {
        name: name.to_string(),
        dir,
        cc: cc.map(str::to_string).or_else(|| o.cc.clone()),
        tos,
        start_s,
        length_s,
        server,
        gated: false,
    };
    let udp = |name: &str, tos, start_s, length_s| UdpSpec {
        name: name.to_string(),
        tos,
        interval: Duration::from_secs_f64(step),
        length: 0,
        start_s,
        length_s,
        server: irtt,
    };
    let icmp = |name: &str, target, length_s| IcmpSpec {
        name: name.to_string(),
        target,
        start_s: 0.0,
        length_s,
    };
    let total = l + 2.0 * d;
    let mut p = Plan {
        name: name.to_string(),
        flent_name: name.to_string(),
        flows: Vec::new(),
        udp: Vec::new(),
        voip: None,
        icmp: Vec::new(),
        length_s: l,
        delay_s: d,
        total_s: total,
        step_s: step,
        parameters: Vec::new(),
        ramp: None,
    };
    use Direction::{Down, Up};
    match name {
        "ping" => {
            p.delay_s = 0.0;
            p.total_s = l;
            p.icmp.push(icmp("Ping (ms) ICMP", first, l));
            p.udp.push(udp("Ping (ms) UDP", CS0, 0.0, l));
        }
        "tcp_1up" | "tcp_1down" | "tcp_bidirectional" => {
            if name != "tcp_1up" {
                p.flows
                    .push(flow("TCP download", Down, None, CS0, d, l, first));
            }
            if name != "tcp_1down" {
                p.flows.push(flow("TCP upload", Up, None, CS0, d, l, first));
            }
            p.icmp.push(icmp("Ping (ms) ICMP", first, total));
        }
        "tcp_nup" | "tcp_ndown" => {
            let (dir, word, param) = if name == "tcp_nup" {
                (Up, "upload", "upload_streams")
            } else {
                (Down, "download", "download_streams")
            };
            if o.streams == 0 {
                return Err(format!("{name} needs --streams of at least 1"));
            }
            for i in 1..=o.streams {
                p.flows.push(flow(
                    &format!("TCP {word}::{i}"),
                    dir,
                    None,
                    CS0,
                    d,
                    l,
                    first,
                ));
            }
            p.parameters.push((param.into(), o.streams.to_string()));
            p.icmp.push(icmp("Ping (ms) ICMP", first, total));
        }
        "rrul" | "rrul_be" => {
            let marks: [(&str, u8); 4] = if name == "rrul" {
                [("BE", CS0), ("BK", CS1), ("CS5", CS5), ("EF", EF)]
            } else {
                [("BE", CS0), ("BE2", CS0), ("BE3", CS0), ("BE4", CS0)]
            };
            for (label, tos) in marks {
                p.flows.push(flow(
                    &format!("TCP upload {label}"),
                    Up,
                    None,
                    tos,
                    d,
                    l,
                    first,
                ));
            }
            for (label, tos) in marks {
                p.flows.push(flow(
                    &format!("TCP download {label}"),
                    Down,
                    None,
                    tos,
                    d,
                    l,
                    first,
                ));
            }
            if name == "rrul" {
                for (label, tos) in [("EF", EF), ("BK", CS1), ("BE", CS0)] {
                    p.udp
                        .push(udp(&format!("Ping (ms) UDP {label}"), tos, 0.0, total));
                }
            } else {
                for label in ["BE1", "BE2", "BE3"] {
                    p.udp
                        .push(udp(&format!("Ping (ms) UDP {label}"), CS0, 0.0, total));
                }
            }
            p.icmp.push(icmp("Ping (ms) ICMP", first, total));
        }
        "voip" => {
            p.delay_s = 0.0;
            p.total_s = l;
            p.voip = Some(UdpSpec {
                name: "VoIP".into(),
                tos: CS0,
                interval: Duration::from_millis(20),
                length: 172,
                start_s: 0.0,
                length_s: l,
                server: irtt,
            });
        }
        "tcp_4up_squarewave" => {
            p.total_s = l + 6.0 * d;
            for (n, cc, at) in [
                ("TCP bbr 1", "bbr", 0.0),
                ("TCP cubic 2", "cubic", d),
                ("TCP bbr 4", "bbr", 3.0 * d),
                ("TCP cubic 3", "cubic", 5.0 * d),
            ] {
                p.flows.push(flow(n, Up, Some(cc), CS0, at, l, first));
            }
        }
        "rtt_fair_var_up" | "rtt_fair_var_down" => {
            let (dir, word) = if name.ends_with("up") {
                (Up, "upload")
            } else {
                (Down, "download")
            };
            for (host, addr) in &o.servers {
                p.flows.push(flow(
                    &format!("TCP {word} BE {host}"),
                    dir,
                    None,
                    CS0,
                    d,
                    l,
                    *addr,
                ));
                p.icmp
                    .push(icmp(&format!("Ping (ms) ICMP {host}"), *addr, total));
            }
        }
        "bufferbloat" => {
            if o.streams == 0 {
                return Err(format!("{name} needs --streams of at least 1"));
            }
            let half = l / 2.0;
            p.total_s = l + 3.0 * d;
            p.flent_name = "rrul_be_nflows".into();
            for (dir, word, start) in [(Down, "download", d), (Up, "upload", 2.0 * d + half)] {
                for i in 1..=o.streams {
                    p.flows.push(flow(
                        &format!("TCP {word} BE::{i}"),
                        dir,
                        None,
                        CS0,
                        start,
                        half,
                        first,
                    ));
                }
            }
            p.parameters
                .push(("download_streams".into(), o.streams.to_string()));
            p.parameters
                .push(("upload_streams".into(), o.streams.to_string()));
            p.udp.push(udp("Ping (ms) UDP BE", CS0, 0.0, p.total_s));
            p.icmp.push(icmp("Ping (ms) ICMP", first, p.total_s));
        }
        "responsiveness" => {
            // draft-ietf-ippm-responsiveness-09's load: up and down together, INP connections
            // each way, INC more per interval ID until goodput saturates, at most MNP.
            use crate::rpm::{ID_S, INP, MNP};
            p.flent_name = "rrul_be_nflows".into();
            p.ramp = Some((ID_S, MNP));
            for (dir, word) in [(Down, "download"), (Up, "upload")] {
                for i in 1..=MNP {
                    let mut f = flow(&format!("TCP {word} BE::{i}"), dir, None, CS0, d, l, first);
                    f.gated = i > INP;
                    p.flows.push(f);
                }
            }
            p.parameters
                .push(("download_streams".into(), MNP.to_string()));
            p.parameters
                .push(("upload_streams".into(), MNP.to_string()));
            p.udp.push(udp("Ping (ms) UDP BE", CS0, 0.0, total));
            p.icmp.push(icmp("Ping (ms) ICMP", first, total));
        }
        other => {
            let names: Vec<&str> = TESTS.iter().map(|t| t.0).collect();
            return Err(format!(
                "unknown test `{other}`: choose one of {}",
                names.join(", ")
            ));
        }
    }
    if o.servers.len() > 1 && !name.starts_with("rtt_fair_var") {
        return Err(format!(
            "{name} takes one server; only rtt_fair_var_up/_down take several"
        ));
    }
    Ok(p)
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
                "TCP upload BK",
                "TCP upload CS5",
                "TCP upload EF",
                "TCP download BE",
                "TCP download BK",
                "TCP download CS5",
                "TCP download EF"
            ]
        );
        assert_eq!(p.flows[3].tos, 0xb8);
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
        for (name, _) in TESTS {
            let p = plan(name, &opts()).expect(name);
            assert!(
                !p.flows.is_empty() || !p.udp.is_empty() || p.voip.is_some(),
                "{name} runs nothing"
            );
        }
    }
}
