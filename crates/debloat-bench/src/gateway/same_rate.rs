//! The gateway's own work against its back end's ceiling, both offered the same rate.
//!
//! The throughput rows give each forwarder's CPU per packet at its own highest rate, and those
//! rates differ: the do-nothing forwarder's is higher, and at a higher rate each wake-up finds
//! more frames, so the system calls and wake-ups of a batch are shared by more packets. The
//! difference of the two rows then counts batching as the gateway's work (on AF_XDP, 0.36 µs
//! against 0.25 µs of parse, classify and cake timed in-process, 2026-11-28). Here both are
//! offered the lower of their two throughputs, in turns — do-nothing, gateway, do-nothing, … —
//! so that the machine's drift falls on both, and the medians are compared. Each forwarder is
//! started afresh for its turn and warmed up for half a second at the rate before it counts.

use super::*;

/// Turns of each forwarder at each frame size.
const TURNS: usize = 3;
/// Seconds of load before each counted trial.
const WARM_UP_S: f64 = 0.5;

/// One back end at one frame size, both forwarders offered `pps`.
pub(super) struct SameRate {
    pub(super) io: String,
    pub(super) size: &'static str,
    pub(super) pps: f64,
    /// CPU per packet of the do-nothing forwarder, then the gateway, µs, turn by turn.
    pub(super) nothing_us: Vec<f64>,
    pub(super) gateway_us: Vec<f64>,
    /// The highest loss seen in any turn, as a fraction.
    pub(super) worst_loss: f64,
}

/// For each back end with a do-nothing row and a gateway row, both again at the lower of
/// their throughputs, in turns. Skipped where the generator shares the forwarding core.
pub(super) fn measure(rig: &Rig, a: &Config, rows: &[Row]) -> Result<Vec<SameRate>> {
    let mut out = Vec::new();
    if rig.cpus.shared() {
        return Ok(out);
    }
    for (nothing, g) in ceilings(rows) {
        for (i, (size, frame)) in [("64 B", 60usize), ("1500 B", 1514)]
            .into_iter()
            .enumerate()
        {
            let pps = g.r[i].at.delivered_pps.min(nothing.r[i].at.delivered_pps);
            println!(
                "{}, {size}: the do-nothing forwarder and the gateway in turns at {:.1} kpps",
                nothing.io,
                pps / 1e3
            );
            let mut s = SameRate {
                io: nothing.io.clone(),
                size,
                pps,
                nothing_us: Vec::new(),
                gateway_us: Vec::new(),
                worst_loss: 0.0,
            };
            for _ in 0..TURNS {
                for passthrough in [true, false] {
                    let mut extra = vec!["--io".to_string(), nothing.io.clone()];
                    if a.same_rate_realtime > 0 {
                        extra.push("--realtime".into());
                        extra.push(a.same_rate_realtime.to_string());
                    }
                    if passthrough {
                        extra.push("--passthrough".into());
                    }
                    start(rig, Forwarder::Gateway, &extra, true)?;
                    // A forwarder just started takes its first frames cold (page faults, the
                    // rings' first laps): a warm-up at the same rate, not counted.
                    let t = trial(rig, frame, pps as u64, WARM_UP_S)
                        .and_then(|_| trial(rig, frame, pps as u64, a.trial));
                    stop(rig, Forwarder::Gateway)?;
                    let t = t?;
                    s.worst_loss = s.worst_loss.max(t.loss);
                    let into = if passthrough {
                        &mut s.nothing_us
                    } else {
                        &mut s.gateway_us
                    };
                    into.push(t.cpu_us);
                }
            }
            out.push(s);
        }
    }
    Ok(out)
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s.get(s.len() / 2).copied().unwrap_or(f64::NAN)
}

fn turns(v: &[f64]) -> String {
    v.iter()
        .map(|x| format!("{x:.2}"))
        .collect::<Vec<_>>()
        .join(" / ")
}

/// The comparison, one line per back end and frame size, against `path_ns` (debloat's own
/// work timed in-process).
pub(super) fn print(results: &[SameRate], path_ns: f64) {
    if results.is_empty() {
        return;
    }
    println!(
        "\nThe gateway's work at the do-nothing forwarder's rate (both offered the lower of their throughputs, {TURNS} turns each, medians; µs CPU per packet):"
    );
    for s in results {
        let (n, g) = (median(&s.nothing_us), median(&s.gateway_us));
        println!(
            "on {}, {} at {:.1} kpps: do-nothing {n:.2} ({}), gateway {g:.2} ({}): the gateway's work {:+.2} µs = {:+.1} % of the ceiling (in-process: {:.0} ns = {:.1} %); worst loss {:.2} %",
            s.io,
            s.size,
            s.pps / 1e3,
            turns(&s.nothing_us),
            turns(&s.gateway_us),
            g - n,
            (g - n) / n * 100.0,
            path_ns,
            path_ns / (n * 1e3) * 100.0,
            s.worst_loss * 100.0
        );
    }
}
