//! The reproduction suite's wired rows on the real kernel (`debloat reproduce --kernel`): each
//! row's configurations as side-by-side plans ([`crate::side`]), and which figure of a run
//! answers which of the simulator's checks (the names are `debloat_sim::reproduce`'s).
//!
//! Unlike `debloat lab compare`, the kernel runs at the experiment's own round trip (no
//! matching): the kernel column is the experiment as published. The gateway's column is the
//! same run through `debloat gateway`, whose forwarding in the guest adds 0.2–2 ms of round
//! trip (docs/kernel-lab.md); on a real machine it adds tens of microseconds.
//!
//! Covered: every wired row but HASH and BQL (no traffic; no BQL in UML): PI-55, FIFO-DEPTH,
//! SQW-20M (flows start staggered with their own congestion control, [`Plan::starts`]),
//! CAKE-HOSTS, and RRUL-110-10 and ACK-FILTER with downloads ([`Plan::downloads`]) at rates
//! the guest carries — RRUL at 44/4 Mbit/s (the published 11:1), ACK-FILTER at 40 Mbit/s /
//! 800 kbit/s (the published 50:1) — while the simulator's column stays at the published
//! rates. rrul's UDP probes are left out: the ping flows measure the induced delay.
//!
//! CAKE-HOSTS's unshaped fq_codel sits at line rate in front of the modem: it never holds a
//! queue, the modem's 1000-packet FIFO at 20 Mbit/s does. The kernel has no second hop here, so
//! that row runs the modem itself — `pfifo limit 1000` behind HTB at 20 Mbit/s — in both
//! columns; the simulator models the same FIFO as a 1000-descriptor ring under fq_codel.
//! cake at 95 % shapes below the modem, which then never queues: cake alone on the link.

use crate::side::{Measured, Plan};

/// Which figure of a run a check reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// Ping median under load, ms (raw, as the simulator's checks).
    PingP50,
    /// Goodput over all hosts, Mbit/s.
    Goodput,
    /// Drops over packets offered, up direction, %.
    DroppedPct,
    /// CE marks over packets sent, up direction, %.
    MarkedPct,
    /// Ping median under load less the idle round trip measured before it, ms.
    PingP50AboveIdle,
    /// The first host's goodput over the second's.
    HostRatio,
    /// One connection's goodput (host by host, in start order), Mbit/s.
    FlowGoodput(usize),
    /// The goodput of some connections over others' (e.g. the CUBIC flows over the BBR ones).
    FlowRatio(&'static [usize], &'static [usize]),
    /// The downloads' goodput, Mbit/s.
    DownloadGoodput,
    /// The downloads' goodput over that of the row's run with this index (an earlier one).
    DownloadOverRun(usize),
}

impl Metric {
    /// The figure from one side's run.
    pub fn of(self, m: &Measured) -> f64 {
        self.of_after(m, &[])
    }

    /// The figure from one side's run, given the same side's earlier runs of the row.
    pub fn of_after(self, m: &Measured, earlier: &[Measured]) -> f64 {
        let down = |m: &Measured| m.download_bps.iter().sum::<f64>() / 1e6;
        match self {
            Metric::DownloadGoodput => down(m),
            Metric::DownloadOverRun(i) => earlier.get(i).map_or(f64::NAN, |e| down(m) / down(e)),
            Metric::PingP50 => m.ping_pct(50.0),
            Metric::Goodput => m.host_bps.iter().sum::<f64>() / 1e6,
            Metric::DroppedPct => m.up.drop_rate() * 100.0,
            Metric::MarkedPct => m.up.mark_rate() * 100.0,
            Metric::PingP50AboveIdle => Metric::PingP50.of(m) - m.idle_ms,
            Metric::HostRatio => match m.host_bps.as_slice() {
                [a, b, ..] if *b > 0.0 => a / b,
                _ => f64::NAN,
            },
            Metric::FlowGoodput(i) => m.flow_bps.get(i).map_or(f64::NAN, |b| b / 1e6),
            Metric::FlowRatio(num, den) => {
                let sum = |ix: &[usize]| -> f64 {
                    ix.iter()
                        .map(|&i| m.flow_bps.get(i).copied().unwrap_or(f64::NAN))
                        .sum()
                };
                sum(num) / sum(den)
            }
        }
    }
}

/// One configuration of a row and the checks it answers.
#[derive(Clone, Debug)]
pub struct Run {
    /// The plan (both directions' specs, rates, delay, uploads).
    pub plan: Plan,
    /// (the simulator's check name, the figure that answers it).
    pub checks: Vec<(String, Metric)>,
}

fn plan(spec: &str, up_bps: u64, down_bps: u64, delay: &str, n: u32, cc: &str) -> Plan {
    Plan {
        up: spec.to_string(),
        down: spec.to_string(),
        up_bps,
        down_bps,
        delay: delay.to_string(),
        hosts: vec![n],
        cc: cc.to_string(),
        starts: Vec::new(),
        seconds: 25,
        omit: 5,
        tos: Vec::new(),
        ecn: false,
        netem: None,
        match_rtt: false,
        upstream_rate: None,
        server_per_host: false,
        downloads: Vec::new(),
        client_rmem_max: None,
        gateway_bps: None,
        gateway_specs: None,
        kernel_via_gateway: false,
        kernel_first: false,
        host_qdisc: None,
    }
}

fn pi_55() -> Vec<Run> {
    let p = |spec: &str| plan(spec, 5_500_000, 500_000, "300us", 4, "cubic");
    let s = |v: &[(&str, Metric)]| v.iter().map(|(n, m)| (n.to_string(), *m)).collect();
    vec![
        Run {
            plan: p("pfifo limit 1000"),
            checks: s(&[("pfifo 1000: ping median", Metric::PingP50)]),
        },
        Run {
            plan: p("fq_codel limit 1001 noecn"),
            checks: s(&[
                ("fq_codel: ping median", Metric::PingP50),
                ("fq_codel: goodput", Metric::Goodput),
                ("fq_codel, no ECN: dropped of offered", Metric::DroppedPct),
            ]),
        },
        Run {
            plan: Plan {
                ecn: true,
                ..p("fq_codel limit 1001 ecn")
            },
            checks: s(&[
                ("fq_codel, ECN: CE-marked of sent", Metric::MarkedPct),
                ("fq_codel, ECN: dropped of offered", Metric::DroppedPct),
            ]),
        },
    ]
}

fn fifo_depth() -> Vec<Run> {
    let p = |spec: &str, n: u32, cc: &str| plan(spec, 20_000_000, 20_000_000, "48ms", n, cc);
    let one = |plan: Plan, name: String| Run {
        plan,
        checks: vec![(name, Metric::PingP50)],
    };
    let mut runs = Vec::new();
    for n in [1, 2] {
        runs.push(one(
            p("pfifo limit 1000", n, "cubic"),
            format!("pfifo 1000, {n} CUBIC: ping median"),
        ));
    }
    for q in [
        "pfifo limit 1000",
        "pfifo limit 100",
        "fq_codel",
        "cake bandwidth 20Mbit",
    ] {
        runs.push(one(p(q, 1, "bbr"), format!("{q}, 1 BBR: ping median")));
    }
    for (n, cc) in [(1, "cubic"), (2, "cubic"), (2, "bbr")] {
        runs.push(one(
            p("cake bandwidth 20Mbit", n, cc),
            format!("cake, {n} {cc}: ping median"),
        ));
    }
    runs
}

fn cake_hosts() -> Vec<Run> {
    // Host A 2 uploads, host B 1; 20 Mbit/s up, base round trip 20 ms.
    // Each host to a server of its own, as the published uploads went to Internet hosts (and
    // the simulator's flows each to a remote host): with one shared destination
    // triple-isolate is fair per flow (2.0 here, kernel and gateway alike), not per host.
    let p = |spec: &str| Plan {
        hosts: vec![2, 1],
        server_per_host: true,
        ..plan(spec, 20_000_000, 100_000_000, "20ms", 0, "cubic")
    };
    let two = |spec: &str, what: &str| Run {
        plan: p(spec),
        checks: vec![
            (format!("{what}: host A / host B"), Metric::HostRatio),
            (
                format!("{what}: ping median − base"),
                Metric::PingP50AboveIdle,
            ),
        ],
    };
    vec![
        two("pfifo limit 1000", "fq_codel, no shaper"),
        two(
            "cake bandwidth 19Mbit dual-srchost",
            "cake 95 % dual-srchost",
        ),
        two(
            "cake bandwidth 19Mbit triple-isolate",
            "cake 95 % triple-isolate",
        ),
    ]
}

fn sqw_20m() -> Vec<Run> {
    // flent's tcp_4up_squarewave with -d 3: BBR at 0 s, CUBIC at 3 s, BBR at 9 s, CUBIC at
    // 15 s, one host (address) each, 20 Mbit/s both ways, 48 ms; measured 15–60 s, all four
    // running (every upload here ends at 60 s rather than 60 s after its start).
    let p = |spec: &str| Plan {
        hosts: vec![1, 1, 1, 1],
        cc: "bbr,cubic,bbr,cubic".into(),
        starts: vec![0, 3, 9, 15],
        seconds: 60,
        omit: 15,
        ..plan(spec, 20_000_000, 20_000_000, "48ms", 0, "cubic")
    };
    let mut cake = vec![("cake: ping median".to_string(), Metric::PingP50)];
    for (i, name) in ["BBR 1", "CUBIC 2", "BBR 4", "CUBIC 3"].iter().enumerate() {
        cake.push((format!("cake: {name} throughput"), Metric::FlowGoodput(i)));
    }
    vec![
        Run {
            plan: p("cake bandwidth 20Mbit"),
            checks: cake,
        },
        Run {
            plan: p("pfifo limit 1000"),
            checks: vec![
                ("pfifo 1000: ping median".into(), Metric::PingP50),
                (
                    "pfifo 1000: CUBIC / BBR throughput".into(),
                    Metric::FlowRatio(&[1, 3], &[0, 2]),
                ),
            ],
        },
        Run {
            plan: p("pfifo limit 100"),
            checks: vec![(
                "pfifo 100: BBR / CUBIC throughput".into(),
                Metric::FlowRatio(&[0, 2], &[1, 3]),
            )],
        },
    ]
}

/// RRUL-110-10's rate in the guest: 44/4 Mbit/s, the published 11:1 at 2/5 of the rate (the
/// userspace gateway under User-Mode Linux does not carry 110 Mbit/s; at 22/2 one upload
/// packet alone would take 6 ms, past cake's 3 ms band).
const RRUL_DOWN_BPS: u64 = 44_000_000;
const RRUL_UP_BPS: u64 = 4_000_000;

fn rrul_110_10() -> Vec<Run> {
    // flent's rrul: 4 uploads and 4 downloads marked BE, BK (CS1), CS5, EF; each upload from
    // an address of its own (the lab marks per host), the downloads to the first; 48 ms.
    let marks = vec![0x00, 0x20, 0xa0, 0xb8];
    let p = |up: &str, down: &str| Plan {
        down: down.to_string(),
        hosts: vec![1, 1, 1, 1],
        tos: marks.clone(),
        downloads: marks.clone(),
        seconds: 30,
        ..plan(up, RRUL_UP_BPS, RRUL_DOWN_BPS, "48ms", 0, "cubic")
    };
    let one = |up: &str, down: &str, name: &str| Run {
        plan: p(up, down),
        checks: vec![(
            format!("{name}: ICMP induced delay"),
            Metric::PingP50AboveIdle,
        )],
    };
    vec![
        one("cake bandwidth 4Mbit", "cake bandwidth 44Mbit", "cake"),
        one("fq_codel", "fq_codel", "fq_codel"),
        one("codel", "codel", "codel (single queue)"),
    ]
}

/// ACK-FILTER's downloads' receive buffer in the guest: the published stack's 3 MiB windows
/// (the simulator's cap, Linux 4.x's 6 MiB `tcp_rmem` at half) scaled with the rate, 1 Gbit/s
/// to 40 Mbit/s: 126 kB windows, 252 kB of buffer. Four such windows fill 40 Mbit/s at the
/// 100 ms base round trip and no more — as four 3 MiB ones filled 1 Gbit/s — so ACKs queued
/// in the uplink slow the downloads as they did. Uncapped (6.1's 6 MiB), no window binds at
/// 40 Mbit/s and the filter changes nothing (1.01 on the kernel, 2026-11-25).
const ACK_FILTER_RMEM_MAX: u32 = 3 * 1024 * 1024 * 2 / 25;

fn ack_filter() -> Vec<Run> {
    // rrul_be (4 uploads, 4 downloads, best effort) at the published 50:1 asymmetry, 40 Mbit/s
    // down and 800 kbit/s up (the guest does not carry 1 Gbit/s), 100 ms; cake both ways, the
    // uplink's with and without ack-filter. The downloads' ACKs alone would need about as
    // much as the uplink has.
    let p = |up: &str| Plan {
        down: "cake bandwidth 40Mbit".into(),
        downloads: vec![0; 4],
        client_rmem_max: Some(ACK_FILTER_RMEM_MAX),
        seconds: 30,
        ..plan(up, 800_000, 40_000_000, "100ms", 4, "cubic")
    };
    vec![
        Run {
            plan: p("cake bandwidth 800kbit"),
            checks: Vec::new(),
        },
        Run {
            plan: p("cake bandwidth 800kbit ack-filter"),
            checks: vec![(
                "download with ack-filter / without".into(),
                Metric::DownloadOverRun(0),
            )],
        },
    ]
}

/// The kernel runs of an experiment (by its id), or None where it has none yet.
pub fn runs(id: &str) -> Option<Vec<Run>> {
    match id {
        "PI-55" => Some(pi_55()),
        "FIFO-DEPTH" => Some(fifo_depth()),
        "CAKE-HOSTS" => Some(cake_hosts()),
        "SQW-20M" => Some(sqw_20m()),
        "RRUL-110-10" => Some(rrul_110_10()),
        "ACK-FILTER" => Some(ack_filter()),
        _ => None,
    }
}

/// The experiments that have kernel runs.
pub const IDS: [&str; 6] = [
    "PI-55",
    "FIFO-DEPTH",
    "SQW-20M",
    "CAKE-HOSTS",
    "RRUL-110-10",
    "ACK-FILTER",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_answers_distinct_checks_with_valid_specs() {
        for id in IDS {
            let runs = runs(id).unwrap_or_default();
            assert!(!runs.is_empty(), "{id}");
            let mut names: Vec<&str> = runs
                .iter()
                .flat_map(|r| r.checks.iter().map(|(n, _)| n.as_str()))
                .collect();
            let n = names.len();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), n, "{id}: a check answered twice");
            for (j, r) in runs.iter().enumerate() {
                assert_eq!(
                    crate::side::shapes(&r.plan.up),
                    Ok(r.plan.up.starts_with("cake"))
                );
                for (name, m) in &r.checks {
                    if let Metric::DownloadOverRun(i) = m {
                        assert!(*i < j, "{id}: `{name}` reads a later run");
                        assert!(!runs[*i].plan.downloads.is_empty(), "{id}: {name}");
                    }
                }
            }
        }
    }

    #[test]
    fn host_ratio_and_ping_above_idle_read_one_run() {
        let m = Measured {
            ping_flows_ms: vec![vec![30.0, 40.0, 50.0]],
            idle_ms: 20.5,
            host_bps: vec![12e6, 6e6],
            ..Measured::default()
        };
        assert_eq!(Metric::HostRatio.of(&m), 2.0);
        assert_eq!(Metric::PingP50AboveIdle.of(&m), 19.5);
        let one = Measured {
            host_bps: vec![12e6],
            ..Measured::default()
        };
        assert!(Metric::HostRatio.of(&one).is_nan());
    }

    #[test]
    fn download_ratio_reads_the_earlier_run() {
        let m = |d: &[f64]| Measured {
            download_bps: d.to_vec(),
            ..Measured::default()
        };
        let (before, after) = (m(&[10e6, 10e6]), m(&[20e6, 16e6]));
        assert_eq!(Metric::DownloadGoodput.of(&after), 36.0);
        let earlier = [before];
        assert_eq!(Metric::DownloadOverRun(0).of_after(&after, &earlier), 1.8);
        assert!(Metric::DownloadOverRun(1)
            .of_after(&after, &earlier)
            .is_nan());
    }

    #[test]
    fn flow_figures_read_connections_in_start_order() {
        let m = Measured {
            flow_bps: vec![4e6, 6e6, 2e6, 8e6],
            ..Measured::default()
        };
        assert_eq!(Metric::FlowGoodput(1).of(&m), 6.0);
        assert!(Metric::FlowGoodput(4).of(&m).is_nan());
        assert_eq!(Metric::FlowRatio(&[1, 3], &[0, 2]).of(&m), 14.0 / 6.0);
    }

    #[test]
    fn squarewave_hosts_start_late_with_their_own_cc() {
        let p = &sqw_20m()[0].plan;
        let cc: Vec<&str> = (0..4).map(|i| p.cc_of(i)).collect();
        assert_eq!(cc, ["bbr", "cubic", "bbr", "cubic"]);
        assert_eq!(
            (0..4).map(|i| p.start_of(i)).collect::<Vec<_>>(),
            [0, 3, 9, 15]
        );
        let one = plan("pfifo", 1, 1, "1ms", 2, "reno");
        assert_eq!((one.cc_of(1), one.start_of(1)), ("reno", 0));
    }
}
