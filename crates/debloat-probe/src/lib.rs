//! debloat's probe: latency under load on a real network. A client runs flent's tests (same
//! names, same series, same defaults) on real sockets against `debloat server`: TCP bulk flows
//! with per-flow congestion control and DSCP, throughput sampled from what the receiver
//! counted; irtt-protocol UDP probes (RTT, one-way delays, IPDV, loss up and down) that also
//! work against a stock `irtt server`; ICMP echo. Results are the same set the simulator
//! writes: flent data files, JSON, a table and the HTML report, plus a bufferbloat grade and
//! RPM.
//!
//! ```text
//! catalog (test → flows and probes) ──► run (threads: tcp, irtt, icmp; sampler every step)
//!        ──► results (series, grade, rpm) ──► flent file / JSON ──► debloat-report
//! ```

pub mod bulk;
pub mod catalog;
pub mod churn;
pub mod control;
pub mod flow;
pub mod grade;
pub mod icmp;
pub mod irtt;
#[cfg(feature = "http")]
pub mod nq;
pub mod results;
pub mod rpm;
pub mod run;
pub mod server;
pub mod sys;

/// A read or write that hit its socket timeout (or would block): not an error, try again.
pub(crate) fn timed_out(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}
