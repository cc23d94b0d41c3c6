//! Measuring again, or not judging, when the host stalled the machine
//! (`debloat_gateway::tools::host_stalls`, docs/testing.md).

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
