//! One run's traffic: an idle ping, then bulk uploads per host (`testbed tcp-send`, one
//! `testbed tcp-sink` per host) and any downloads (server to host 1, one sink) with
//! [`PING_FLOWS`] ping flows beside them, each from an
//! address of its own every 50 ms; the discipline's counters are read once a second through
//! the measured part (for CAKE's sojourn average) and as the load ends.
//!
//! Why three flows and 50 ms: a flow queue puts a ping flow in the same bucket as a bulk flow
//! for a whole run now and then (fq_codel: 4 bulk flows in 1024 buckets, 0.4 %), and the
//! guest's CPU stalls for a few milliseconds now and then; with one flow at 200 ms (flent's
//! rate) either event alone moved a run's p50 or p99 beyond the tolerance. The median over
//! flows outvotes the first, 300 samples per flow the second.

use super::counts::Counts;
use super::{Measured, Plan};
use debloat_gateway::testbed::{self, in_ns, TestbedError};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

const PING_INTERVAL_S: f64 = 0.05;

/// Ping flows beside the load, each from its own address ([`ping_source`]).
pub(super) const PING_FLOWS: usize = 3;

/// The client address ping flow `k` comes from: 198.18.1.(250 + k), away from the hosts'.
pub(super) fn ping_source(k: usize) -> String {
    format!("198.18.1.{}", 250 + k)
}

fn err(what: &str) -> impl Fn(std::io::Error) -> TestbedError + '_ {
    move |e| TestbedError(format!("{what}: {e}"))
}

fn spawn(ns: &str, args: &[&str]) -> Result<Child, TestbedError> {
    in_ns(ns, args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(err(args[0]))
}

fn finish(c: Child, what: &str) -> Result<String, TestbedError> {
    let o = c.wait_with_output().map_err(err(what))?;
    if !o.status.success() {
        return Err(TestbedError(format!(
            "{what}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// `ping`'s round trips, ms, with their sequence numbers.
pub(super) fn ping_rtts(out: &str) -> Vec<(u32, f64)> {
    out.lines()
        .filter_map(|l| {
            let seq = l.split("icmp_seq=").nth(1)?.split_whitespace().next()?;
            let t = l.split("time=").nth(1)?.split_whitespace().next()?;
            Some((seq.parse().ok()?, t.parse().ok()?))
        })
        .collect()
}

/// `ping -D`'s replies: sequence number, when the reply came (seconds since the epoch, the
/// `[…]` stamp; the guest's clock is the host's) and the round trip, ms.
pub(super) fn ping_stamped(out: &str) -> Vec<(u32, f64, f64)> {
    out.lines()
        .filter_map(|l| {
            let at = l.strip_prefix('[')?.split(']').next()?.parse().ok()?;
            let (seq, rtt) = ping_rtts(l).into_iter().next()?;
            Some((seq, at, rtt))
        })
        .collect()
}

/// `tcp-sink`'s goodput per connection, bit/s.
pub(super) fn sink_bps(out: &str) -> Vec<f64> {
    out.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("connection ")?;
            let bytes: f64 = rest
                .split(" received ")
                .nth(1)?
                .split(' ')
                .next()?
                .parse()
                .ok()?;
            let secs: f64 = rest
                .split(" bytes in ")
                .nth(1)?
                .split(' ')
                .next()?
                .parse()
                .ok()?;
            Some(bytes * 8.0 / secs)
        })
        .collect()
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The idle round trip through whatever forwards now: the median of 10 pings, ms.
pub(super) fn idle_ms(prefix: &str) -> Result<f64, TestbedError> {
    let [c, _, _] = testbed::namespaces(prefix);
    let idle = spawn(
        &c,
        &["ping", "-n", "-c", "10", "-i", "0.2", testbed::SERVER_V4],
    )?;
    let mut v: Vec<f64> = ping_rtts(&finish(idle, "idle ping")?)
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    Ok(median(&mut v))
}

/// A `tcp-sink` in namespace `ns` on `port` that outlives the load by 3 s and counts each
/// connection after its first `omit` seconds.
fn sink(plan: &Plan, exe: &str, ns: &str, port: usize, omit: u32) -> Result<Child, TestbedError> {
    let listen = format!("0.0.0.0:{port}");
    let (secs, omit) = ((plan.seconds + 3).to_string(), omit.to_string());
    let args = [
        exe,
        "testbed",
        "tcp-sink",
        "--listen",
        &listen,
        "--seconds",
        &secs,
        "--omit",
        &omit,
    ];
    spawn(ns, &args)
}

/// One `tcp-sink` per host in the server namespace `v`, host i on port 5201 + i, counting
/// from the load's second `omit` whenever the host starts.
fn start_sinks(plan: &Plan, exe: &str, v: &str) -> Result<Vec<Child>, TestbedError> {
    (0..plan.hosts.len())
        .map(|i| {
            sink(
                plan,
                exe,
                v,
                5201 + i,
                plan.omit.saturating_sub(plan.start_of(i)),
            )
        })
        .collect()
}

/// Each host's uploads from the client namespace `c`, from 198.18.1.(2 + i) to its sink (at
/// 198.18.2.(2 + i) with [`Plan::server_per_host`]).
fn start_senders(plan: &Plan, exe: &str, c: &str) -> Result<Vec<Child>, TestbedError> {
    plan.hosts
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let to = match plan.server_per_host {
                true => format!("198.18.2.{}:{}", 2 + i, 5201 + i),
                false => format!("{}:{}", testbed::SERVER_V4, 5201 + i),
            };
            let from = format!("198.18.1.{}", 2 + i);
            let streams = n.to_string();
            let tos = plan.tos.get(i).copied().unwrap_or(0).to_string();
            let start = plan.start_of(i);
            let secs = (plan.seconds - start).to_string();
            let args = [
                "testbed",
                "tcp-send",
                "--to",
                &to,
                "--streams",
                &streams,
                "--seconds",
                &secs,
                "--cc",
                plan.cc_of(i),
                "--bind",
                &from,
                "--tos",
                &tos,
            ];
            // A late host waits in a shell that then becomes the sender.
            let wait = format!("sleep {start}; exec \"$0\" \"$@\"");
            let mut a = match start {
                0 => vec![exe],
                _ => vec!["sh", "-c", &wait, exe],
            };
            a.extend_from_slice(&args);
            spawn(c, &a)
        })
        .collect()
}

/// The download flows' port on the client (host 1, 198.18.1.2).
const DOWNLOAD_PORT: usize = 5300;

/// The download flows' one sink, in the client namespace `c` (None without downloads).
fn start_download_sink(plan: &Plan, exe: &str, c: &str) -> Result<Option<Child>, TestbedError> {
    if plan.downloads.is_empty() {
        return Ok(None);
    }
    sink(plan, exe, c, DOWNLOAD_PORT, plan.omit).map(Some)
}

/// One sender per download flow in the server namespace `v`, each with its TOS byte, to host
/// 1 (as flent's rrul downloads, whose server marks them).
fn start_downloads(plan: &Plan, exe: &str, v: &str) -> Result<Vec<Child>, TestbedError> {
    let to = format!("198.18.1.2:{DOWNLOAD_PORT}");
    let secs = plan.seconds.to_string();
    plan.downloads
        .iter()
        .map(|tos| {
            let tos = tos.to_string();
            let args = [
                exe,
                "testbed",
                "tcp-send",
                "--to",
                &to,
                "--streams",
                "1",
                "--seconds",
                &secs,
                "--cc",
                plan.cc_of(0),
                "--bind",
                testbed::SERVER_V4,
                "--tos",
                &tos,
            ];
            spawn(v, &args)
        })
        .collect()
}

/// Run the plan's load once through whatever forwards now; `counts` reads the discipline.
pub(super) fn measure(
    plan: &Plan,
    exe: &std::path::Path,
    prefix: &str,
    mut counts: impl FnMut() -> Result<(Counts, Counts), TestbedError>,
) -> Result<Measured, TestbedError> {
    let [c, _, v] = testbed::namespaces(prefix);
    let exe = exe.to_string_lossy().into_owned();
    let idle_ms = idle_ms(prefix)?;
    let sinks = start_sinks(plan, &exe, &v)?;
    let download_sink = start_download_sink(plan, &exe, &c)?;
    std::thread::sleep(Duration::from_millis(500));
    let secs = plan.seconds.to_string();
    let interval = PING_INTERVAL_S.to_string();
    let pings = (0..PING_FLOWS)
        .map(|k| {
            let from = ping_source(k);
            let args = [
                "ping", "-n", "-D", "-I", &from, "-i", &interval, "-w", &secs,
            ];
            spawn(&c, &[&args[..], &[testbed::SERVER_V4]].concat())
        })
        .collect::<Result<Vec<_>, _>>()?;
    let started = Instant::now();
    let mut senders = start_senders(plan, &exe, &c)?;
    senders.extend(start_downloads(plan, &exe, &v)?);
    let readings = read_through_load(plan, started, &mut counts);
    for s in senders {
        finish(s, "tcp-send")?;
    }
    let (mut up, mut down) = counts()?;
    up.average_sojourns(readings.iter().map(|r| &r.0));
    down.average_sojourns(readings.iter().map(|r| &r.1));
    let mut m = Measured {
        idle_ms,
        up,
        down,
        ..Measured::default()
    };
    for p in pings {
        let out = finish(p, "ping under load").unwrap_or_default();
        let stamped: Vec<[f64; 2]> = ping_stamped(&out)
            .into_iter()
            .filter(|&(seq, _, _)| f64::from(seq) * PING_INTERVAL_S >= f64::from(plan.omit))
            .map(|(_, at, rtt)| [at, rtt])
            .collect();
        let mut rtts: Vec<f64> = stamped.iter().map(|s| s[1]).collect();
        rtts.sort_by(f64::total_cmp);
        m.ping_flows_ms.push(rtts);
        m.ping_flows_at.push(stamped);
    }
    for s in sinks {
        let per_flow = sink_bps(&finish(s, "tcp-sink")?);
        m.host_bps.push(per_flow.iter().sum());
        m.flow_bps.extend(per_flow);
    }
    if let Some(s) = download_sink {
        m.download_bps = sink_bps(&finish(s, "tcp-sink (downloads)")?);
    }
    Ok(m)
}

/// The counters once a second from `omit` + 0.5 s to a second before the load ends (a
/// failed reading is skipped: the final one, which must succeed, is read after).
fn read_through_load(
    plan: &Plan,
    started: Instant,
    counts: &mut impl FnMut() -> Result<(Counts, Counts), TestbedError>,
) -> Vec<(Counts, Counts)> {
    let mut readings = Vec::new();
    let mut at = f64::from(plan.omit) + 0.5;
    while at < f64::from(plan.seconds) - 1.0 {
        let due = started + Duration::from_secs_f64(at);
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        if let Ok(r) = counts() {
            readings.push(r);
        }
        at += 1.0;
    }
    readings
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn ping_and_sink_lines_parse() {
        let p = "PING 198.18.2.2 (198.18.2.2) 56(84) bytes of data.\n64 bytes from 198.18.2.2: icmp_seq=1 ttl=64 time=2.31 ms\n64 bytes from 198.18.2.2: icmp_seq=2 ttl=64 time=10.5 ms\n";
        assert_eq!(ping_rtts(p), vec![(1, 2.31), (2, 10.5)]);
        let d = "PING 198.18.2.2 (198.18.2.2) 56(84) bytes of data.\n[1795909554.725141] 64 bytes from 198.18.2.2: icmp_seq=7 ttl=64 time=11.2 ms\n[1795909554.7] no answer yet for icmp_seq=8\n";
        assert_eq!(ping_stamped(d), vec![(7, 1795909554.725141, 11.2)]);
        let s = "connection 1 received 1000000 bytes in 2.000 s (first 5 s omitted): 4.000 Mbit/s\nconnection 2 received 500000 bytes in 1.000 s: 4.000 Mbit/s\n";
        assert_eq!(sink_bps(s), vec![4e6, 4e6]);
    }
}
