//! One run's traffic: an idle ping, then bulk uploads per host (`testbed tcp-send`, one
//! `testbed tcp-sink` per host) with a ping every 200 ms beside them; the discipline's counters
//! are read as the load ends.

use super::counts::Counts;
use super::{Measured, Plan};
use debloat_gateway::testbed::{self, in_ns, TestbedError};
use std::process::{Child, Stdio};
use std::time::Duration;

const PING_INTERVAL_S: f64 = 0.2;

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

/// One `tcp-sink` per host in the server namespace `v`, host i on port 5201 + i.
fn start_sinks(plan: &Plan, exe: &str, v: &str) -> Result<Vec<Child>, TestbedError> {
    let sink_s = (plan.seconds + 3).to_string();
    let omit = plan.omit.to_string();
    (0..plan.hosts.len())
        .map(|i| {
            let listen = format!("0.0.0.0:{}", 5201 + i);
            let args = [
                "testbed",
                "tcp-sink",
                "--listen",
                &listen,
                "--seconds",
                &sink_s,
                "--omit",
                &omit,
            ];
            let mut a = vec![exe];
            a.extend_from_slice(&args);
            spawn(v, &a)
        })
        .collect()
}

/// Each host's uploads from the client namespace `c`, from 198.18.1.(2 + i) to its sink (at
/// 198.18.2.(2 + i) with [`Plan::server_per_host`]).
fn start_senders(plan: &Plan, exe: &str, c: &str) -> Result<Vec<Child>, TestbedError> {
    let secs = plan.seconds.to_string();
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
                &plan.cc,
                "--bind",
                &from,
                "--tos",
                &tos,
            ];
            let mut a = vec![exe];
            a.extend_from_slice(&args);
            spawn(c, &a)
        })
        .collect()
}

/// Run the plan's load once through whatever forwards now; `counts` reads the discipline.
pub(super) fn measure(
    plan: &Plan,
    exe: &std::path::Path,
    prefix: &str,
    counts: impl FnOnce() -> Result<(Counts, Counts), TestbedError>,
) -> Result<Measured, TestbedError> {
    let [c, _, v] = testbed::namespaces(prefix);
    let exe = exe.to_string_lossy().into_owned();
    let idle_ms = idle_ms(prefix)?;
    let sinks = start_sinks(plan, &exe, &v)?;
    std::thread::sleep(Duration::from_millis(500));
    let secs = plan.seconds.to_string();
    let ping = spawn(
        &c,
        &["ping", "-n", "-i", "0.2", "-w", &secs, testbed::SERVER_V4],
    )?;
    let senders = start_senders(plan, &exe, &c)?;
    for s in senders {
        finish(s, "tcp-send")?;
    }
    let (up, down) = counts()?;
    let ping = finish(ping, "ping under load").unwrap_or_default();
    let mut m = Measured {
        idle_ms,
        up,
        down,
        ..Measured::default()
    };
    for s in sinks {
        let per_flow = sink_bps(&finish(s, "tcp-sink")?);
        m.host_bps.push(per_flow.iter().sum());
        m.flow_bps.extend(per_flow);
    }
    m.ping_ms = ping_rtts(&ping)
        .into_iter()
        .filter(|&(seq, _)| f64::from(seq) * PING_INTERVAL_S >= f64::from(plan.omit))
        .map(|(_, t)| t)
        .collect();
    m.ping_ms.sort_by(f64::total_cmp);
    Ok(m)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn ping_and_sink_lines_parse() {
        let p = "PING 198.18.2.2 (198.18.2.2) 56(84) bytes of data.\n64 bytes from 198.18.2.2: icmp_seq=1 ttl=64 time=2.31 ms\n64 bytes from 198.18.2.2: icmp_seq=2 ttl=64 time=10.5 ms\n";
        assert_eq!(ping_rtts(p), vec![(1, 2.31), (2, 10.5)]);
        let s = "connection 1 received 1000000 bytes in 2.000 s (first 5 s omitted): 4.000 Mbit/s\nconnection 2 received 500000 bytes in 1.000 s: 4.000 Mbit/s\n";
        assert_eq!(sink_bps(s), vec![4e6, 4e6]);
    }
}
