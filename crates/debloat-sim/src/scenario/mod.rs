//! flent's tests under flent's names and defaults (docs/measurement.md §2): the load runs for
//! `length` seconds after a `delay` of 5 s, the ping runs from the start to `length + 2·delay`,
//! and everything is sampled every `step` (0.2 s). Implemented: `ping`, `tcp_1up`, `tcp_nup`,
//! `tcp_ndown`, `tcp_bidirectional`. The others (rrul, rrul_be, tcp_2up_square,
//! tcp_4up_squarewave, voip, rtt_fair_*) are not yet.

use crate::tcp::cc::Algorithm;
use crate::world::{Dir, LinkConfig, World};
use debloat_core::{FlowHasher, QdiscSpec};
use serde::Serialize;

mod build;
mod metrics;
mod summary;

pub(crate) use build::build_world;
pub use build::simulate_with_tap;
pub(crate) use summary::summarise;
pub use summary::{
    throughput_between, FlowSummary, Latency, ModemSummary, PingSummary, QueueSummary,
    StationSummary, Summary, WifiSummary,
};

/// A flent test name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Test {
    /// ICMP ping alone.
    Ping,
    /// One TCP upload.
    Tcp1Up,
    /// One TCP download.
    Tcp1Down,
    /// N TCP uploads.
    TcpNUp,
    /// N TCP downloads.
    TcpNDown,
    /// One upload and one download.
    TcpBidirectional,
    /// Realtime Response Under Load: 4 uploads and 4 downloads marked BE, BK, CS5, EF, with UDP
    /// probes marked EF, BK, BE and an ICMP ping.
    Rrul,
    /// rrul with everything best effort.
    RrulBe,
    /// The CUBIC-vs-BBR staircase: BBR 1 at 0, CUBIC 2 at DELAY, BBR 4 at 3·DELAY, CUBIC 3 at
    /// 5·DELAY, each for LENGTH (flent's definition has no latency probe; debloat pings anyway
    /// for its own summary, and leaves the ping out of the flent file).
    Tcp4UpSquarewave,
    /// Four remote hosts, one upload and one ping each (labels BE1–BE4, ICMP1–ICMP4).
    RttFairUp,
    /// N remote hosts, each with its own base RTT: one upload and one ping each.
    RttFairVarUp,
    /// N remote hosts, each with its own base RTT: one download and one ping each.
    RttFairVarDown,
    /// An isochronous VoIP-like flow alone (irtt, 172 B every 20 ms) for LENGTH.
    Voip,
    /// The square wave: TCP cubic for LENGTH from 0, and a competitor on for DELAY, off for
    /// DELAY, three times: cubic at DELAY, reno at 3·DELAY, westwood at 5·DELAY (no latency
    /// probe in flent's definition; debloat pings for its own summary only).
    Tcp2UpSquare,
    /// debloat's own: a CUBIC and a Prague upload, a Not-ECT ICMP ping and an ECT(1) UDP ping
    /// (L4S beside classic traffic, for DualPI2, fq_codel's `ce_threshold` and cake).
    L4sMixed,
    /// A scenario from a TOML file (not one of flent's tests: no flent data file).
    Custom,
}

/// A test the simulator cannot run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TestError {
    /// The catalog refused it (unknown, or real networks only), in its words.
    #[error(transparent)]
    Catalog(#[from] debloat_flent::catalog::LookupError),
    /// In the catalog, without a [`Test`] of the simulator's (a bug: `ALL` is checked against
    /// the catalog by a test).
    #[error("`{0}` is in the catalog but not in the simulator's Test")]
    NotInSimulator(&'static str),
}

impl std::str::FromStr for Test {
    type Err = TestError;
    /// A test by flent's name, through the shared catalog: a name it does not know, or a test
    /// that runs on a real network only, is refused in the catalog's words.
    fn from_str(s: &str) -> Result<Test, TestError> {
        let name = debloat_flent::catalog::lookup(s, debloat_flent::catalog::Driver::Simulator)?;
        Test::ALL
            .iter()
            .copied()
            .find(|t| t.name() == name)
            .ok_or(TestError::NotInSimulator(name))
    }
}

impl Test {
    /// Every flent test the simulator runs.
    pub const ALL: [Test; 15] = [
        Test::Ping,
        Test::Tcp1Up,
        Test::Tcp1Down,
        Test::TcpNUp,
        Test::TcpNDown,
        Test::TcpBidirectional,
        Test::Rrul,
        Test::RrulBe,
        Test::Tcp4UpSquarewave,
        Test::RttFairUp,
        Test::RttFairVarUp,
        Test::RttFairVarDown,
        Test::Voip,
        Test::Tcp2UpSquare,
        Test::L4sMixed,
    ];

    /// flent's name.
    pub fn name(self) -> &'static str {
        match self {
            Test::Ping => "ping",
            Test::Tcp1Up => "tcp_1up",
            Test::Tcp1Down => "tcp_1down",
            Test::TcpNUp => "tcp_nup",
            Test::TcpNDown => "tcp_ndown",
            Test::TcpBidirectional => "tcp_bidirectional",
            Test::Rrul => "rrul",
            Test::RrulBe => "rrul_be",
            Test::Tcp4UpSquarewave => "tcp_4up_squarewave",
            Test::RttFairUp => "rtt_fair_up",
            Test::RttFairVarUp => "rtt_fair_var_up",
            Test::RttFairVarDown => "rtt_fair_var_down",
            Test::Voip => "voip",
            Test::Custom => "custom",
            Test::Tcp2UpSquare => "tcp_2up_square",
            Test::L4sMixed => "l4s_mixed",
        }
    }

    /// flent's TOTAL_LENGTH for this test, s.
    pub fn total_length(self, length: f64, delay: f64) -> f64 {
        match self {
            Test::Ping | Test::Voip | Test::Custom => length,
            Test::Tcp4UpSquarewave => length + 6.0 * delay,
            Test::Tcp2UpSquare => length.max(6.0 * delay),
            _ => length + 2.0 * delay,
        }
    }

    /// Whether flent's definition of this test has latency series.
    pub fn has_probes(self) -> bool {
        !matches!(self, Test::Tcp4UpSquarewave | Test::Tcp2UpSquare)
    }
}

/// Everything a run needs.
#[derive(Clone, Debug)]
pub struct Config {
    /// Which test.
    pub test: Test,
    /// Down and up rates, bit/s.
    pub down_bps: u64,
    /// See `down_bps`.
    pub up_bps: u64,
    /// Base round-trip time, ns (split evenly between directions).
    pub rtt_ns: u64,
    /// Discipline in front of the up link.
    pub qdisc_up: QdiscSpec,
    /// Discipline in front of the down link.
    pub qdisc_down: QdiscSpec,
    /// Load duration, s.
    pub length_s: f64,
    /// Idle time before and after the load, s (flent's default 5).
    pub delay_s: f64,
    /// Sampling step, s (flent's default 0.2).
    pub step_s: f64,
    /// Streams for tcp_nup / tcp_ndown (flent's default 4).
    pub streams: u32,
    /// Congestion control of every flow.
    pub cc: Algorithm,
    /// With two or more, the TCP flows take these in turn instead of `cc`, in the test's order
    /// (`sim --cc bbr,cubic`); a test that names a flow's own (the square waves) keeps it.
    pub cc_turns: Vec<Algorithm>,
    /// ECN on the flows.
    pub ecn: bool,
    /// The discipline on the hosts themselves, before their NICs (`--host-qdisc`; None: the
    /// senders' packets go straight to the bottleneck). With `fq`, TCP paces through it.
    pub host_qdisc: Option<QdiscSpec>,
    /// Seed for flow-hash keys and discipline randomness.
    pub seed: u64,
    /// The device model on both bottleneck directions.
    pub device: crate::world::DeviceConfig,
    /// Framing, loss and jitter of both bottleneck wires (the seed is set per direction).
    pub wire: crate::world::Wire,
    /// The down wire, where it differs from `wire` (a gateway's `--emulate-ingress`).
    pub wire_down: Option<crate::world::Wire>,
    /// Every TCP flow's window limit, bytes of payload: the receive window the peer advertises
    /// or the send buffer, whichever is smaller (None: only cwnd limits). Linux 6.18's defaults
    /// (tcp_rmem max 32 MiB, tcp_wmem max 4 MiB) limit only long fat paths; Linux 4.x's
    /// receive side (tcp_rmem max 6 MiB, half of it advertised) capped a flow at 3 MiB.
    pub tcp_window: Option<u64>,
    /// BBR with Linux's ACK-aggregation head-room (since 5.1, 2019; the default) or as released
    /// in 2016 without it (`false`: what the published 2016 BBR runs used).
    pub bbr_ack_aggregation: bool,
    /// Base RTT of each remote host for the rtt_fair tests, ns (empty: every host at `rtt_ns`;
    /// rtt_fair_up always has 4 hosts, the var tests one per entry, or when empty one host, or
    /// over Wi-Fi one per station).
    pub host_rtts_ns: Vec<u64>,
    /// Links whose capacity follows a trace: a modem (its FIFO drained by the trace) behind
    /// that direction's transmitter, which then runs at the interface's rate (docs/link-traces.md).
    pub adaptive: Adaptive,
    /// qosify's rules marking DSCP before the bottleneck's discipline, both directions (up is
    /// egress); replies take the class of their flow (docs/classify.md).
    pub classify: Option<debloat_core::classify::qosify::Config>,
    /// A Wi-Fi AP and stations instead of the two wired links (the rates, qdiscs and device
    /// above are then unused; `rtt_ns` is the wired part between the AP and flent's host).
    pub wifi: Option<crate::wifi::WifiConfig>,
}

/// Links whose capacity moves and the controllers that follow them, per direction.
#[derive(Clone, Debug, Default)]
pub struct Adaptive {
    /// A trace-driven modem behind the up direction's transmitter.
    pub modem_up: Option<debloat_core::link::ModemSpec>,
    /// The same, down.
    pub modem_down: Option<debloat_core::link::ModemSpec>,
    /// A controller setting the up discipline's shaper rate (it must shape: cake).
    pub autorate_up: Option<crate::world::AutorateConfig>,
    /// The same, down.
    pub autorate_down: Option<crate::world::AutorateConfig>,
}

impl Config {
    /// A wired run of `test` with flent's defaults for the rest (60 s of load, 5 s idle either
    /// side, 0.2 s steps, 4 streams, CUBIC without ECN) and nothing else on the links: the
    /// default device and wire, no window cap, no marking stage, no trace or controller.
    pub fn wired(
        test: Test,
        (down_bps, up_bps): (u64, u64),
        rtt_ns: u64,
        (qdisc_up, qdisc_down): (QdiscSpec, QdiscSpec),
        seed: u64,
    ) -> Config {
        Config {
            test,
            down_bps,
            up_bps,
            rtt_ns,
            qdisc_up,
            qdisc_down,
            length_s: 60.0,
            delay_s: 5.0,
            step_s: 0.2,
            streams: 4,
            cc: Algorithm::Cubic,
            cc_turns: Vec::new(),
            ecn: false,
            host_qdisc: None,
            seed,
            device: crate::world::DeviceConfig::default(),
            wire: Default::default(),
            wire_down: None,
            tcp_window: None,
            bbr_ack_aggregation: true,
            host_rtts_ns: Vec::new(),
            adaptive: Adaptive::default(),
            classify: None,
            wifi: None,
        }
    }

    /// The congestion control as the run's header and flent note say it: `Cubic`, or
    /// `[Bbr, Cubic] in turn`.
    pub fn cc_words(&self) -> String {
        if self.cc_turns.is_empty() {
            format!("{:?}", self.cc)
        } else {
            format!("{:?} in turn", self.cc_turns)
        }
    }

    /// The remote hosts' base RTTs for this test.
    pub fn hosts(&self) -> Vec<u64> {
        match self.test {
            Test::RttFairUp => (0..4)
                .map(|i| self.host_rtts_ns.get(i).copied().unwrap_or(self.rtt_ns))
                .collect(),
            Test::RttFairVarUp | Test::RttFairVarDown if self.host_rtts_ns.is_empty() => {
                let n = self.wifi.as_ref().map_or(1, |w| w.stations.len().max(1));
                vec![self.rtt_ns; n]
            }
            Test::RttFairVarUp | Test::RttFairVarDown => self.host_rtts_ns.clone(),
            _ => Vec::new(),
        }
    }

    /// The host string of remote host `i` (198.18.2.11, .12, …).
    pub fn host_name(i: usize) -> String {
        format!("198.18.2.{}", 11 + i)
    }
}

/// A finished run: its summary and the world it ran in (for data files).
pub struct Run {
    /// The summary.
    pub summary: Summary,
    /// The simulated network at the end.
    pub world: World,
}

/// Run a test; `progress` gets the fraction done now and then.
pub fn run(cfg: &Config, progress: impl FnMut(f64)) -> Summary {
    simulate(cfg, progress).summary
}

/// Run a test and keep the world.
pub fn simulate(cfg: &Config, progress: impl FnMut(f64)) -> Run {
    simulate_with_tap(cfg, None, progress)
}

#[cfg(test)]
mod tests {
    use super::*;
    use debloat_flent::catalog::{Runs, TESTS};

    /// The simulator runs every test of the shared catalog that runs in both, under its name.
    #[test]
    fn every_catalog_test_for_both_is_a_simulator_test() {
        for &(name, _, runs) in TESTS {
            match runs {
                Runs::Both | Runs::SimulatorOnly(_) => {
                    let t: Test = name.parse().expect(name);
                    assert_eq!(t.name(), name);
                }
                Runs::RealNetworkOnly(_) => assert!(name.parse::<Test>().is_err(), "{name}"),
            }
        }
        assert_eq!(
            Test::ALL.len(),
            TESTS
                .iter()
                .filter(|t| !matches!(t.2, Runs::RealNetworkOnly(_)))
                .count()
        );
    }
}
