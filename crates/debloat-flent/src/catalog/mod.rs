//! flent's tests, once: which flows and latency probes each runs, with flent's series names,
//! markings, start times and lengths (docs/measurement.md §2). The simulator (`debloat sim`) and
//! the probe (`debloat test`) both build their runs from [`test`], so a test exists in both or
//! is refused in both with the same words, and its series carry the same names either way.
//!
//! Times are written in flent's units: a start or a length is `a·DELAY + b·LENGTH` ([`Span`]),
//! so each driver turns them into its own clock. Items come in the order a driver adds them
//! (the simulator's flow and probe numbering, and so its flow hashes, follow it).
//!
//! Two tests are debloat's own and run on a real network only: `bufferbloat` (DSLReports-style,
//! one direction after the other) and `responsiveness` (draft-ietf-ippm-responsiveness-09's
//! ramped load). flent cannot open a file under a test it has no definition for, so their files
//! are written under the name of the flent test with the same series (`rrul_be_nflows`).

/// The direction of a flow: up is away from the machine that runs the test (the core's one
/// [`Direction`], by the short name the catalog uses).
pub use debloat_core::Direction as Dir;

/// A time in flent's units: `delays·DELAY + lengths·LENGTH`.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Span {
    /// Multiples of DELAY.
    pub delays: f64,
    /// Multiples of LENGTH.
    pub lengths: f64,
}

impl Span {
    const fn new(delays: f64, lengths: f64) -> Span {
        Span { delays, lengths }
    }

    /// In seconds, for this DELAY and LENGTH (s).
    pub fn seconds(self, delay_s: f64, length_s: f64) -> f64 {
        self.delays * delay_s + self.lengths * length_s
    }

    /// In nanoseconds, for this DELAY and LENGTH (ns); exact for whole multiples.
    pub fn nanos(self, delay_ns: u64, length_ns: u64) -> u64 {
        let part = |k: f64, ns: u64| (k * ns as f64).round() as u64;
        part(self.delays, delay_ns) + part(self.lengths, length_ns)
    }
}

/// A bulk TCP transfer.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct FlowDef {
    /// flent's series name, e.g. `TCP upload BE`.
    pub name: String,
    /// Direction of the data.
    pub dir: Dir,
    /// DSCP of its packets (TOS byte >> 2).
    pub dscp: u8,
    /// Congestion control the test fixes (None: the user's choice).
    pub cc: Option<&'static str>,
    /// When it starts.
    pub start: Span,
    /// How long it runs.
    pub length: Span,
    /// Which of the test's hosts it goes to (None: the one host).
    pub host: Option<usize>,
    /// Held at its start until a load ramp releases it (`responsiveness`).
    pub gated: bool,
}

/// What a latency probe sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum ProbeKind {
    /// ICMP echo every STEP.
    Icmp,
    /// UDP round trips (irtt) every STEP.
    Udp,
    /// The VoIP flow: irtt with 172-byte packets every 20 ms.
    Voip,
}

/// A latency probe, from 0 for the whole test.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ProbeDef {
    /// flent's series name, e.g. `Ping (ms) UDP EF`.
    pub name: String,
    /// What it sends.
    pub kind: ProbeKind,
    /// DSCP of its packets.
    pub dscp: u8,
    /// Which of the test's hosts it measures (None: the one host).
    pub host: Option<usize>,
    /// Part of flent's definition (false: debloat measures it for its own summary only, and
    /// leaves it out of the flent file).
    pub in_flent: bool,
    /// The ECN field of its packets (0 Not-ECT, 1 ECT(1): an L4S probe).
    pub ecn: u8,
}

/// One flow or probe of a test.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub enum Item {
    /// A TCP transfer.
    Flow(FlowDef),
    /// A latency probe.
    Probe(ProbeDef),
}

/// How long a test lasts in all (flent's TOTAL_LENGTH).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub enum Total {
    /// This span.
    Span(Span),
    /// `max(LENGTH, 6·DELAY)` (`tcp_2up_square`).
    LengthOrSixDelays,
}

/// One test, ready to run.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct TestDef {
    /// The name it was asked for (flent's, or debloat's own).
    pub name: String,
    /// The NAME written in the flent file (flent opens a file only under a test it knows).
    pub flent_name: &'static str,
    /// Flows and probes, in the order a driver adds them.
    pub items: Vec<Item>,
    /// Whether the load waits DELAY (false for `ping` and `voip`: they run LENGTH from 0).
    pub has_delay: bool,
    /// TOTAL_LENGTH.
    pub total: Total,
    /// Test parameters as flent records them (`upload_streams` …).
    pub parameters: Vec<(String, String)>,
}

impl TestDef {
    /// TOTAL_LENGTH in seconds for this DELAY and LENGTH.
    pub fn total_s(&self, delay_s: f64, length_s: f64) -> f64 {
        match self.total {
            Total::Span(s) => s.seconds(delay_s, length_s),
            Total::LengthOrSixDelays => length_s.max(6.0 * delay_s),
        }
    }

    /// The flows, in order.
    pub fn flows(&self) -> impl Iterator<Item = &FlowDef> {
        self.items.iter().filter_map(|i| match i {
            Item::Flow(f) => Some(f),
            Item::Probe(_) => None,
        })
    }

    /// The probes, in order.
    pub fn probes(&self) -> impl Iterator<Item = &ProbeDef> {
        self.items.iter().filter_map(|i| match i {
            Item::Probe(p) => Some(p),
            Item::Flow(_) => None,
        })
    }
}

/// Where a test can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runs {
    /// In the simulator and on a real network.
    Both,
    /// Only on a real network (`debloat test`), for this reason.
    RealNetworkOnly(&'static str),
    /// Only in the simulator (`debloat sim`), for this reason.
    SimulatorOnly(&'static str),
}

/// Which driver asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Driver {
    /// `debloat sim`.
    Simulator,
    /// `debloat test`.
    Probe,
}

/// Every test: name, one-line description, where it runs.
pub const TESTS: &[(&str, &str, Runs)] = &[
    ("ping", "ICMP and UDP ping, no load", Runs::Both),
    ("tcp_1up", "one TCP upload + ICMP ping", Runs::Both),
    ("tcp_1down", "one TCP download + ICMP ping", Runs::Both),
    ("tcp_nup", "N TCP uploads (--streams) + ICMP ping", Runs::Both),
    ("tcp_ndown", "N TCP downloads (--streams) + ICMP ping", Runs::Both),
    ("tcp_bidirectional", "one TCP upload and one download + ICMP ping", Runs::Both),
    ("rrul", "4 up + 4 down TCP (BE, BK, CS5, EF) + UDP EF/BK/BE + ICMP", Runs::Both),
    ("rrul_be", "4 up + 4 down TCP best effort + 3 UDP + ICMP", Runs::Both),
    ("voip", "G.711-like UDP flow: 172 bytes every 20 ms", Runs::Both),
    ("tcp_4up_squarewave", "BBR, CUBIC, BBR, CUBIC uploads started at 0, D, 3D, 5D (alias tcp_square_wave)", Runs::Both),
    ("tcp_2up_square", "a CUBIC upload, and a CUBIC, Reno, Westwood+ competitor on for D, off for D", Runs::Both),
    ("rtt_fair_up", "one TCP upload + ICMP ping to each of four hosts", Runs::Both),
    ("rtt_fair_var_up", "one TCP upload + ICMP ping per host given", Runs::Both),
    ("rtt_fair_var_down", "one TCP download + ICMP ping per host given", Runs::Both),
    (
        "responsiveness",
        "debloat's own, draft-09 RPM: up and down load ramped 1 → 16 connections each way until goodput saturates + ICMP and UDP ping",
        Runs::RealNetworkOnly("it ramps its load on the goodput it measures and probes with fresh connections, which the simulator does not model"),
    ),
    (
        "l4s_mixed",
        "debloat's own: a CUBIC and a Prague (L4S, ECT(1)) upload + ICMP ping (Not-ECT) and UDP ping marked ECT(1)",
        Runs::SimulatorOnly("it needs a TCP Prague sender, which mainline Linux does not have"),
    ),
    (
        "bufferbloat",
        "debloat's own, DSLReports-style: N downloads, idle, N uploads (LENGTH/2 each) + ICMP and UDP ping; graded per direction",
        Runs::RealNetworkOnly("its grade is a speed test's verdict on a real connection; in the simulator run tcp_ndown and tcp_nup"),
    ),
];

/// What the user chose that shapes a test.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Streams for `tcp_nup`, `tcp_ndown` and `bufferbloat`.
    pub streams: usize,
    /// The hosts' names, in order (series names carry them): four for `rtt_fair_up`, any number
    /// for `rtt_fair_var_*`, one otherwise.
    pub hosts: Vec<String>,
    /// `responsiveness`'s ramp: connections per direction at the start and at most.
    pub ramp: (usize, usize),
}

/// The names a user may type, aliases included.
pub fn names() -> Vec<&'static str> {
    TESTS.iter().map(|t| t.0).collect()
}

/// The tests `driver` runs, one per line with what each does: the list `--help` prints, so
/// it cannot differ from what runs.
pub fn help_list(driver: Driver) -> String {
    TESTS
        .iter()
        .filter(|t| match t.2 {
            Runs::Both => true,
            Runs::RealNetworkOnly(_) => driver == Driver::Probe,
            Runs::SimulatorOnly(_) => driver == Driver::Simulator,
        })
        .map(|(name, what, _)| format!("  {name:<20} {what}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The canonical name of `name` (`tcp_square_wave` is `tcp_4up_squarewave`), or an error that
/// lists the tests; a test that cannot run in `driver` is refused with its reason. Both
/// drivers use this, so both say the same words.
pub fn lookup(name: &str, driver: Driver) -> Result<&'static str, LookupError> {
    let name = if name == "tcp_square_wave" {
        "tcp_4up_squarewave"
    } else {
        name
    };
    let Some(&(canonical, _, runs)) = TESTS.iter().find(|t| t.0 == name) else {
        return Err(LookupError::Unknown {
            name: name.to_string(),
            choices: names().join(", "),
        });
    };
    match (runs, driver) {
        (Runs::RealNetworkOnly(why), Driver::Simulator) => Err(LookupError::RealNetworkOnly {
            name: canonical,
            why,
        }),
        (Runs::SimulatorOnly(why), Driver::Probe) => Err(LookupError::SimulatorOnly {
            name: canonical,
            why,
        }),
        _ => Ok(canonical),
    }
}

/// A test name the catalog cannot give a driver.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    /// Not a test flent or debloat defines.
    #[error("unknown test `{name}`: choose one of {choices}")]
    Unknown {
        /// As given.
        name: String,
        /// Every test, comma-separated.
        choices: String,
    },
    /// A test the simulator cannot run (it needs a real network).
    #[error("`{name}` runs on a real network only (`debloat test {name} SERVER`): {why}")]
    RealNetworkOnly {
        /// The test.
        name: &'static str,
        /// Why.
        why: &'static str,
    },
    /// A test only the simulator can run.
    #[error("`{name}` runs in the simulator only (`debloat sim {name}`): {why}")]
    SimulatorOnly {
        /// The test.
        name: &'static str,
        /// Why.
        why: &'static str,
    },
}

const CS0: u8 = 0;
const CS1: u8 = 8;
const CS5: u8 = 40;
const EF: u8 = 46;
const AT_DELAY: Span = Span::new(1.0, 0.0);
const LENGTH: Span = Span::new(0.0, 1.0);

fn flow(name: String, dir: Dir, dscp: u8) -> Item {
    Item::Flow(FlowDef {
        name,
        dir,
        dscp,
        cc: None,
        start: AT_DELAY,
        length: LENGTH,
        host: None,
        gated: false,
    })
}

fn probe(name: &str, kind: ProbeKind, dscp: u8) -> Item {
    Item::Probe(ProbeDef {
        name: name.into(),
        kind,
        dscp,
        host: None,
        in_flent: true,
        ecn: 0,
    })
}

fn icmp() -> Item {
    probe("Ping (ms) ICMP", ProbeKind::Icmp, CS0)
}

/// Test `name` (after [`lookup`]) with these options.
pub fn test(name: &str, o: &Options) -> Result<TestDef, String> {
    let mut t = TestDef {
        name: name.to_string(),
        flent_name: "",
        items: Vec::new(),
        has_delay: true,
        total: Total::Span(Span::new(2.0, 1.0)),
        parameters: Vec::new(),
    };
    t.flent_name = TESTS
        .iter()
        .find(|x| x.0 == name)
        .map(|x| x.0)
        .ok_or_else(|| {
            format!(
                "unknown test `{name}`: choose one of {}",
                names().join(", ")
            )
        })?;
    match name {
        "ping" | "voip" => simple(&mut t),
        "tcp_1up" | "tcp_1down" | "tcp_bidirectional" => single_flows(&mut t),
        "tcp_nup" | "tcp_ndown" | "bufferbloat" => streams(&mut t, o)?,
        "rrul" | "rrul_be" => rrul(&mut t),
        "tcp_4up_squarewave" | "tcp_2up_square" => square(&mut t),
        "rtt_fair_up" | "rtt_fair_var_up" | "rtt_fair_var_down" => rtt_fair(&mut t, o)?,
        "responsiveness" => responsiveness(&mut t, o),
        "l4s_mixed" => l4s_mixed(&mut t),
        _ => {}
    }
    Ok(t)
}

/// `ping` and `voip`: no load, LENGTH from 0.
fn simple(t: &mut TestDef) {
    t.has_delay = false;
    t.total = Total::Span(LENGTH);
    if t.name == "ping" {
        t.items = vec![icmp(), probe("Ping (ms) UDP", ProbeKind::Udp, CS0)];
    } else {
        t.items = vec![probe("VoIP", ProbeKind::Voip, CS0)];
    }
}

fn single_flows(t: &mut TestDef) {
    t.items.push(icmp());
    if t.name != "tcp_1up" {
        t.items.push(flow("TCP download".into(), Dir::Down, CS0));
    }
    if t.name != "tcp_1down" {
        t.items.push(flow("TCP upload".into(), Dir::Up, CS0));
    }
}

fn streams(t: &mut TestDef, o: &Options) -> Result<(), String> {
    if o.streams == 0 {
        return Err(format!("{} needs --streams of at least 1", t.name));
    }
    if t.name == "bufferbloat" {
        bufferbloat(t, o.streams);
        return Ok(());
    }
    let n = o.streams.to_string();
    let (dir, word, param) = match t.name.as_str() {
        "tcp_nup" => (Dir::Up, "upload", "upload_streams"),
        _ => (Dir::Down, "download", "download_streams"),
    };
    t.items.push(icmp());
    for i in 1..=o.streams {
        t.items.push(flow(format!("TCP {word}::{i}"), dir, CS0));
    }
    t.parameters.push((param.into(), n));
    Ok(())
}

/// Downloads for LENGTH/2 from DELAY, an idle DELAY, uploads for LENGTH/2.
fn bufferbloat(t: &mut TestDef, n: usize) {
    t.flent_name = "rrul_be_nflows";
    t.total = Total::Span(Span::new(3.0, 1.0));
    for (dir, word, start) in [
        (Dir::Down, "download", AT_DELAY),
        (Dir::Up, "upload", Span::new(2.0, 0.5)),
    ] {
        for i in 1..=n {
            t.items.push(Item::Flow(FlowDef {
                start,
                length: Span::new(0.0, 0.5),
                ..flow_def(format!("TCP {word} BE::{i}"), dir)
            }));
        }
    }
    for p in ["download_streams", "upload_streams"] {
        t.parameters.push((p.into(), n.to_string()));
    }
    t.items.push(probe("Ping (ms) UDP BE", ProbeKind::Udp, CS0));
    t.items.push(icmp());
}

/// One CUBIC and one Prague upload, a classic ping and an L4S one: what DualPI2, fq_codel's
/// `ce_threshold` and cake make of the two kinds of traffic side by side. flent has no such
/// test; its file is written as `tcp_nup` with two streams.
fn l4s_mixed(t: &mut TestDef) {
    t.flent_name = "tcp_nup";
    t.items.push(icmp());
    if let Item::Probe(mut p) = probe("Ping (ms) UDP L4S", ProbeKind::Udp, CS0) {
        p.ecn = 1;
        p.in_flent = false;
        t.items.push(Item::Probe(p));
    }
    for (name, cc) in [
        ("TCP upload CUBIC", "cubic"),
        ("TCP upload Prague", "prague"),
    ] {
        t.items.push(Item::Flow(FlowDef {
            cc: Some(cc),
            ..flow_def(name.into(), Dir::Up)
        }));
    }
    t.parameters.push(("upload_streams".into(), "2".into()));
}

fn flow_def(name: String, dir: Dir) -> FlowDef {
    match flow(name, dir, CS0) {
        Item::Flow(f) => f,
        Item::Probe(_) => unreachable!("flow() makes a flow"),
    }
}

fn rrul(t: &mut TestDef) {
    t.items.push(icmp());
    let marks: [(&str, u8); 4] = if t.name == "rrul" {
        [("BE", CS0), ("BK", CS1), ("CS5", CS5), ("EF", EF)]
    } else {
        [("BE", CS0), ("BE2", CS0), ("BE3", CS0), ("BE4", CS0)]
    };
    for (label, dscp) in marks {
        t.items
            .push(flow(format!("TCP upload {label}"), Dir::Up, dscp));
        t.items
            .push(flow(format!("TCP download {label}"), Dir::Down, dscp));
    }
    let udp: [(&str, u8); 3] = if t.name == "rrul" {
        [("EF", EF), ("BK", CS1), ("BE", CS0)]
    } else {
        [("BE1", CS0), ("BE2", CS0), ("BE3", CS0)]
    };
    for (label, dscp) in udp {
        t.items.push(probe(
            &format!("Ping (ms) UDP {label}"),
            ProbeKind::Udp,
            dscp,
        ));
    }
}

/// The staircase and the square wave: uploads with fixed congestion control; no latency series
/// in flent's definition (debloat pings for its own summary and leaves it out of the file).
fn square(t: &mut TestDef) {
    let mut ping = icmp();
    if let Item::Probe(p) = &mut ping {
        p.in_flent = false;
    }
    t.items.push(ping);
    let staircase = t.name == "tcp_4up_squarewave";
    let plan: &[(&str, &str, f64)] = if staircase {
        t.total = Total::Span(Span::new(6.0, 1.0));
        &[
            ("TCP bbr 1", "bbr", 0.0),
            ("TCP cubic 2", "cubic", 1.0),
            ("TCP bbr 4", "bbr", 3.0),
            ("TCP cubic 3", "cubic", 5.0),
        ]
    } else {
        t.total = Total::LengthOrSixDelays;
        &[
            ("TCP cubic", "cubic", 0.0),
            ("TCP cubic 2", "cubic", 1.0),
            ("TCP reno", "reno", 3.0),
            ("TCP westwood", "westwood", 5.0),
        ]
    };
    for &(name, cc, at) in plan {
        // The square wave's long flow runs LENGTH from 0; its competitors run one DELAY each.
        let length = if staircase || at == 0.0 {
            LENGTH
        } else {
            Span::new(1.0, 0.0)
        };
        t.items.push(Item::Flow(FlowDef {
            cc: Some(cc),
            start: Span::new(at, 0.0),
            length,
            ..flow_def(name.into(), Dir::Up)
        }));
    }
}

fn rtt_fair(t: &mut TestDef, o: &Options) -> Result<(), String> {
    let four = t.name == "rtt_fair_up";
    if four && o.hosts.len() != 4 {
        return Err(format!(
            "rtt_fair_up runs against four hosts (flent's HOSTS), {} given: give four, or use \
             rtt_fair_var_up for any number",
            o.hosts.len()
        ));
    }
    if o.hosts.is_empty() {
        return Err(format!("{} needs at least one host", t.name));
    }
    let (dir, word) = match t.name.as_str() {
        "rtt_fair_var_down" => (Dir::Down, "download"),
        _ => (Dir::Up, "upload"),
    };
    for (h, host) in o.hosts.iter().enumerate() {
        let (flow_label, ping_label) = if four {
            (format!("BE{}", h + 1), format!("ICMP{}", h + 1))
        } else {
            ("BE".into(), "ICMP".into())
        };
        t.items.push(Item::Flow(FlowDef {
            host: Some(h),
            ..flow_def(format!("TCP {word} {flow_label} {host}"), dir)
        }));
        t.items.push(Item::Probe(ProbeDef {
            name: format!("Ping (ms) {ping_label} {host}"),
            kind: ProbeKind::Icmp,
            dscp: CS0,
            host: Some(h),
            in_flent: true,
            ecn: 0,
        }));
    }
    Ok(())
}

/// draft-09's load: up and down together, `first` connections each way, more per interval
/// until goodput saturates, at most `most`; the ones after the first are gated.
fn responsiveness(t: &mut TestDef, o: &Options) {
    t.flent_name = "rrul_be_nflows";
    let (first, most) = o.ramp;
    for (dir, word) in [(Dir::Down, "download"), (Dir::Up, "upload")] {
        for i in 1..=most {
            t.items.push(Item::Flow(FlowDef {
                gated: i > first,
                ..flow_def(format!("TCP {word} BE::{i}"), dir)
            }));
        }
    }
    for p in ["download_streams", "upload_streams"] {
        t.parameters.push((p.into(), most.to_string()));
    }
    t.items.push(probe("Ping (ms) UDP BE", ProbeKind::Udp, CS0));
    t.items.push(icmp());
}

#[cfg(test)]
mod tests;
