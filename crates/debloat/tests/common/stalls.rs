//! Measuring again, or not judging, when the host stalled the machine
//! (`debloat_gateway::tools::host_stalls`, docs/testing.md).

use super::rx::Rate;
use debloat_gateway::tools::host_stalls::{HostStalls, Watch};

/// Run `measure` under a host-stall watch; when `ok` rejects its result and the host stalled
/// enough to void it ([`HostStalls::voids`]), say so and measure once more. The result judged
/// by the caller is the last one, with the watch over it: a run the host left alone is never
/// repeated.
pub fn again_if_the_host_stalled<T>(
    what: &str,
    mut measure: impl FnMut() -> T,
    ok: impl Fn(&T) -> bool,
) -> (T, HostStalls) {
    let watch = Watch::start();
    let first = measure();
    let host = watch.stop();
    println!("{what}: meanwhile {host}");
    if ok(&first) || !host.voids() {
        return (first, host);
    }
    println!("{what}: the figures fail and the host stalled: measuring again");
    let watch = Watch::start();
    let second = measure();
    let host = watch.stop();
    println!("{what} (again): meanwhile {host}");
    (second, host)
}

/// Assert a figure of timing (a shaped rate to a percent or two): it must hold, unless it failed
/// while the host stole 5 % of a CPU or more ([`HostStalls::decides_timing`]), when it is
/// printed as not judged, with the host's figures. Shares, counts and accounting are asserted
/// as they are, whatever the host did.
pub fn judge_timing(ok: bool, host: &HostStalls, figure: &str) {
    if ok {
        return;
    }
    assert!(host.decides_timing(), "{figure} (meanwhile {host})");
    println!("NOT JUDGED, the host decided it: {figure} (meanwhile {host})");
}

/// Assert a shaped rate read over a window: `rate.bps` within `tol` (0.02: 2 %) of `want_bps`.
/// A rate short of that is read again over the time the host left the machine running in the
/// window ([`HostStalls::stalled_within`]): in a stall the gateway forwards nothing, and a
/// shaper whose queue an AQM keeps a few milliseconds long cannot make a 30 ms stall up
/// afterwards (cake's clock catches up only while its queue lasts). A stall of one of the two
/// vCPUs counts half (the worker there stops, the other runs on). Then [`judge_timing`] as
/// before. A rate above the band is never explained this way.
pub fn judge_rate(rate: &Rate, want_bps: f64, tol: f64, host: &HostStalls, what: &str) {
    let near = |bps: f64| (bps / want_bps - 1.0).abs() <= tol;
    if near(rate.bps) {
        return;
    }
    let window = rate.to - rate.from;
    let stalled = host.stalled_within(rate.from, rate.to);
    let figure = format!(
        "{what}: {:.0} bit/s against {want_bps:.0} ± {:.0} %, read over {:.2} s of which the host stalled {:.1} ms",
        rate.bps,
        tol * 100.0,
        window,
        stalled * 1e3
    );
    if rate.bps < want_bps && window > stalled {
        let running = rate.bps * window / (window - stalled);
        if running >= want_bps * (1.0 - tol) {
            println!(
                "{figure}: over the time the machine ran, {running:.0} bit/s, within the band"
            );
            return;
        }
    }
    judge_timing(false, host, &figure);
}
