//! The reproduction suite's wired rows on the real kernel (`debloat reproduce --kernel`): each
//! row's configurations as side-by-side plans ([`crate::side`]), and which figure of a run
//! answers which of the simulator's checks (the names are `debloat_sim::reproduce`'s).
//!
//! Unlike `debloat lab compare`, the kernel runs at the experiment's own round trip (no
//! matching): the kernel column is the experiment as published. The gateway's column is the
//! same run through `debloat gateway`, whose forwarding in the guest adds 0.2–2 ms of round
//! trip (docs/kernel-lab.md); on a real machine it adds tens of microseconds.
//!
//! Covered: PI-55 and FIFO-DEPTH (uploads only, as published). Not yet: SQW-20M, RRUL-110-10
//! and ACK-FILTER need downloads and flent's mixed tests inside the guest, CAKE-HOSTS's
//! fq_codel row needs a modem FIFO behind the discipline on a second hop.

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
}

impl Metric {
    /// The figure from one side's run.
    pub fn of(self, m: &Measured) -> f64 {
        match self {
            Metric::PingP50 => {
                debloat_report::percentile::percentile(&m.ping_ms, 50.0).unwrap_or(f64::NAN)
            }
            Metric::Goodput => m.host_bps.iter().sum::<f64>() / 1e6,
            Metric::DroppedPct => m.up.drop_rate() * 100.0,
            Metric::MarkedPct => m.up.mark_rate() * 100.0,
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
        seconds: 25,
        omit: 5,
        tos: Vec::new(),
        ecn: false,
        netem: None,
        match_rtt: false,
        upstream_rate: None,
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

/// The kernel runs of an experiment (by its id), or None where it has none yet.
pub fn runs(id: &str) -> Option<Vec<Run>> {
    match id {
        "PI-55" => Some(pi_55()),
        "FIFO-DEPTH" => Some(fifo_depth()),
        _ => None,
    }
}

/// The experiments that have kernel runs.
pub const IDS: [&str; 2] = ["PI-55", "FIFO-DEPTH"];

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
            for r in &runs {
                assert_eq!(
                    crate::side::shapes(&r.plan.up),
                    Ok(r.plan.up.starts_with("cake"))
                );
            }
        }
    }
}
