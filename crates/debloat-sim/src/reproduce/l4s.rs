//! DUALQ-L4S: DualPI2 against its authors' published result (issue 44, item 4).
//!
//! The source is the abstract of the DualQ Coupled AQM drafts (draft-briscoe-aqm-dualq-coupled-00,
//! 2015, to draft-ietf-tsvwg-aqm-dualq-coupled-07, 2018; RFC 9332's ancestors): tested in a
//! residential broadband setting under a wide range of mixes of DCTCP and Classic (Reno/CUBIC)
//! traffic, DCTCP saw sub-millisecond average queuing delay and zero congestion loss; a flow ran
//! at about the same rate whichever of the two it used; the Classic traffic was not compromised.
//! The abstract gives no rate, RTT or mix, so this row fixes its own: 40 Mbit/s both ways (a
//! residential link), 20 ms, 30 s, Prague (the simulator's DCTCP-derived L4S sender,
//! `tcp/prague.rs`) against CUBIC in four mixes, an ECT(1) UDP probe and an ICMP one every 50 ms.
//!
//! The bands, each from a phrase of the source:
//! * "sub-millisecond average queuing delay": the ECT(1) probe's mean round trip from 3 s into
//!   the load, less its idle median, below 1 ms;
//! * "zero congestion loss": no Prague segment retransmitted;
//! * "about the same rate": a Prague flow's mean goodput 0.5–2× a CUBIC flow's (the band issue
//!   44 sets for its own DualPI2 acceptance; the source gives no number).
//!
//! "Not compromised" has no figure to check; the Classic probe's queuing delay is a note.

use super::{Band, Check, Outcome};
use crate::scenario_file;

/// When the uploads start, s (the probes run from 0: the idle samples).
const LOAD_FROM_S: f64 = 2.0;
const LENGTH_S: f64 = 30.0;
/// Prague : CUBIC flows.
const MIXES: [(usize, usize); 4] = [(1, 1), (1, 3), (3, 1), (2, 2)];

/// The scenario file for one mix.
fn scenario(seed: u64, prague: usize, cubic: usize) -> String {
    let mut s = format!(
        "name = \"DUALQ-L4S {prague}:{cubic}\"\nlength = {LENGTH_S}\nseed = {seed}\n\n[link]\n\
         down = \"40Mbit\"\nup = \"40Mbit\"\nrtt = \"20ms\"\nqdisc_up = \"dualpi2\"\n\
         qdisc_down = \"dualpi2\"\n\n[[flow]]\nname = \"l4s probe\"\nkind = \"udp-ping\"\n\
         l4s = true\ninterval = \"50ms\"\n\n[[flow]]\nname = \"classic probe\"\nkind = \"ping\"\n\
         interval = \"50ms\"\n"
    );
    for (cc, n) in [("prague", prague), ("cubic", cubic)] {
        for i in 0..n {
            s += &format!(
                "\n[[flow]]\nname = \"{cc} {i}\"\nkind = \"tcp\"\ndirection = \"up\"\n\
                 cc = \"{cc}\"\nstart = {LOAD_FROM_S}\n"
            );
        }
    }
    s
}

/// A probe's (idle median, loaded mean, loaded median) round trip, ms; loaded from 3 s after
/// the uploads start (past slow start).
fn probe_ms(samples: &[(u64, u64)]) -> (f64, f64, f64) {
    let load_from = LOAD_FROM_S * 1e9;
    let pick = |keep: &dyn Fn(f64) -> bool| {
        let mut v: Vec<f64> = samples
            .iter()
            .filter(|s| keep(s.0 as f64))
            .map(|s| s.1 as f64 / 1e6)
            .collect();
        v.sort_by(f64::total_cmp);
        v
    };
    let idle = pick(&|t| t < load_from);
    let load = pick(&|t| t >= load_from + 3e9);
    let med = |v: &[f64]| v.get(v.len() / 2).copied().unwrap_or(f64::NAN);
    let mean = load.iter().sum::<f64>() / load.len() as f64;
    (med(&idle), mean, med(&load))
}

/// One mix: (L4S mean queue ms, classic median queue ms, Prague per flow, CUBIC per flow
/// Mbit/s, Prague retransmissions, Prague CE marks).
fn mix(seed: u64, prague: usize, cubic: usize) -> [f64; 6] {
    let text = scenario(seed, prague, cubic);
    let Ok((_, run)) = scenario_file::run(&text, |_| {}) else {
        return [f64::NAN; 6];
    };
    let probe = |name: &str| {
        run.world
            .probes
            .iter()
            .find(|p| p.name == name)
            .map_or((f64::NAN, f64::NAN, f64::NAN), |p| probe_ms(&p.samples))
    };
    let (l4s_idle, l4s_mean, _) = probe("l4s probe");
    let (classic_idle, _, classic_p50) = probe("classic probe");
    let of = |cc: &str| {
        let f: Vec<_> = run
            .summary
            .flows
            .iter()
            .filter(|f| f.name.starts_with(cc))
            .collect();
        let n = f.len() as f64;
        (
            f.iter().map(|f| f.throughput_mbps).sum::<f64>() / n,
            f.iter().map(|f| f.retransmits).sum::<u64>() as f64,
            f.iter().map(|f| f.ce_marked).sum::<u64>() as f64,
        )
    };
    let ((prague_mbps, lost, ce), (cubic_mbps, _, _)) = (of("prague"), of("cubic"));
    [
        l4s_mean - l4s_idle,
        classic_p50 - classic_idle,
        prague_mbps,
        cubic_mbps,
        lost,
        ce,
    ]
}

/// DUALQ-L4S: four mixes of Prague and CUBIC uploads through DualPI2 at 40 Mbit/s, 20 ms.
pub fn dualq_l4s(seed: u64) -> Outcome {
    let mut o = Outcome::new("DUALQ-L4S");
    for (p, c) in MIXES {
        let [l4s, classic, prague, cubic, lost, ce] = mix(seed, p, c);
        let m = format!("Prague:CUBIC {p}:{c}");
        o.checks.push(Check::new(
            format!("{m}: L4S probe's mean queuing delay"),
            l4s,
            "ms",
            "sub-millisecond",
            Band::Below { max: 1.0 },
        ));
        o.checks.push(Check::new(
            format!("{m}: Prague segments lost"),
            lost,
            "segments",
            "zero",
            Band::AtMost { max: 0.0 },
        ));
        o.checks.push(Check::new(
            format!("{m}: per flow, Prague / CUBIC goodput"),
            prague / cubic,
            "×",
            "about the same",
            Band::Within { min: 0.5, max: 2.0 },
        ));
        o.notes.push(format!(
            "{m}: classic probe's median queuing delay {classic:.1} ms (DualPI2's target 15 ms); \
             Prague {prague:.2} / CUBIC {cubic:.2} Mbit/s a flow; {ce:.0} CE marks on Prague"
        ));
    }
    o
}
