//! Leaving out the pings the host stalled.
//!
//! The guest is one process of this machine, and the machine is virtual: when the hypervisor
//! takes a vCPU away (steal) for 10 or 20 ms, every packet in the guest waits, whichever
//! discipline forwards it. On the Intel host of 2026-11-28 that happened a few times a second
//! under load (the host stole 270–650 ms of CPU over a 56 s comparison), and a p99 of 300
//! pings moves when four of them wait: three CI runs of the comparisons failed on a ping p99
//! that one side or the other (never the same) read 5 to 100 ms higher.
//!
//! So the host watches its CPUs while the guest runs (`debloat_gateway::tools::host_stalls`,
//! a SCHED_FIFO thread on each that notes every oversleep of 2 ms or more, with its wall-clock
//! times), and a round trip in flight during such a stall, give or take [`MARGIN_S`], is left
//! out of both sides' percentiles: the guest's clock is the host's, and `ping -D` stamps each
//! reply. What was left out is counted in the result and printed beside the table. Nothing of
//! the sort happens in Linux or flent; it is the bed's correction, not the discipline's.

use super::{Measured, SideBySide};
use debloat_gateway::tools::host_stalls::HostStalls;

/// Widening of a ping's flight either side when matched against the stalls, s: the backlog a
/// stall leaves drains over the next few milliseconds.
pub const MARGIN_S: f64 = 0.005;

/// Pings left out of one side's percentiles, of how many.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LeftOut {
    /// Round trips in flight while the host stalled.
    pub stalled: usize,
    /// Round trips measured (after `omit`).
    pub of: usize,
}

/// Rebuild `m`'s ping flows from its stamped round trips without those in flight during one
/// of `host`'s stalls. A result without stamps (written before they were) is left as it was.
pub fn leave_out(m: &mut Measured, host: &HostStalls) -> LeftOut {
    let of = m.ping_flows_ms.iter().map(Vec::len).sum();
    if m.ping_flows_at.is_empty() {
        return LeftOut { stalled: 0, of };
    }
    let mut stalled = 0;
    m.ping_flows_ms = m
        .ping_flows_at
        .iter()
        .map(|flow| {
            let mut kept: Vec<f64> = flow
                .iter()
                .filter(|&&[at, ms]| {
                    let hit = host.touches(at - ms / 1e3, at, MARGIN_S);
                    stalled += usize::from(hit);
                    !hit
                })
                .map(|s| s[1])
                .collect();
            kept.sort_by(f64::total_cmp);
            kept
        })
        .collect();
    LeftOut { stalled, of }
}

/// [`leave_out`] on both sides, recorded in the result: the stalls the host's watch noted and
/// those the guest's own noted ([`SideBySide::stalls`]).
pub fn apply(s: &mut SideBySide) {
    let Some(host) = s.stalls() else { return };
    s.left_out = Some([
        leave_out(&mut s.kernel, &host),
        leave_out(&mut s.debloat, &host),
    ]);
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// 300 pings 50 ms apart at 12 ms; four of them waited 30 ms more during stalls the
    /// witness saw. With them, the p99 is 42 ms; without, 12 ms, and those four are counted.
    #[test]
    fn pings_in_flight_during_a_stall_leave_the_percentiles() {
        let t0 = 1_795_909_554.0;
        let stalled_at = [40, 41, 100, 250];
        let mut flow = Vec::new();
        let mut stalls = Vec::new();
        for i in 0..300 {
            let sent = t0 + f64::from(i) * 0.05;
            let ms = if stalled_at.contains(&i) {
                stalls.push([sent + 0.004, sent + 0.034]);
                42.0
            } else {
                12.0
            };
            flow.push([sent + ms / 1e3, ms]);
        }
        let mut m = Measured {
            ping_flows_ms: vec![flow.iter().map(|s| s[1]).collect()],
            ping_flows_at: vec![flow],
            ..Measured::default()
        };
        m.ping_flows_ms[0].sort_by(f64::total_cmp);
        assert_eq!(m.ping_pct(99.0), 42.0);
        let host = HostStalls {
            stalls,
            ..HostStalls::default()
        };
        let l = leave_out(&mut m, &host);
        assert_eq!(
            l,
            LeftOut {
                stalled: 4,
                of: 300
            }
        );
        assert_eq!(m.ping_pct(99.0), 12.0);
        assert_eq!(m.ping_flows_ms[0].len(), 296);
    }

    /// A stall 10 ms after a reply (beyond the margin) leaves it in; no stamps, nothing moves.
    #[test]
    fn a_stall_apart_from_every_flight_or_no_stamps_leave_all_in() {
        let host = HostStalls {
            stalls: vec![[100.030, 100.050]],
            ..HostStalls::default()
        };
        let mut m = Measured {
            ping_flows_ms: vec![vec![12.0, 13.0]],
            ping_flows_at: vec![vec![[100.012, 12.0], [100.063, 13.0]]],
            ..Measured::default()
        };
        // The second flew from 100.050 to 100.063: it touches the stall's end.
        assert_eq!(leave_out(&mut m, &host), LeftOut { stalled: 1, of: 2 });
        assert_eq!(m.ping_flows_ms, vec![vec![12.0]]);
        let mut old = Measured {
            ping_flows_ms: vec![vec![12.0, 40.0]],
            ..Measured::default()
        };
        assert_eq!(leave_out(&mut old, &host), LeftOut { stalled: 0, of: 2 });
        assert_eq!(old.ping_flows_ms, vec![vec![12.0, 40.0]]);
    }
}
