//! From what a run measured to the result set the simulator also writes: flent's data file
//! (series named as flent names them, raw samples, SERIES_META), a JSON summary, and the grade
//! and RPM.

use crate::grade::{self, Grade, GradeStat};
use crate::irtt::client::{Probe, Stats};
use crate::rpm::{self, Rpm};
use crate::run::{FlowResult, Outcome};
use debloat_report::flent_write::{iso, tables, x_values, OutSeries, RawSample};
use serde_json::{json, Map, Value};

/// Throughput samples (t, Mbit/s) from a flow's (t, bytes received) samples.
pub fn throughput(f: &FlowResult) -> Vec<RawSample> {
    let mut w: Vec<(f64, f64, u64)> = f
        .samples
        .windows(2)
        .filter(|w| w[1].0 > w[0].0 + 1e-6)
        .map(|w| (w[0].0, w[1].0, w[1].1.saturating_sub(w[0].1)))
        .collect();
    // The last interval ends when the flow does, usually a few ms after the previous sample, and
    // holds what the socket buffers still had: as a rate of its own it is a spike many times the
    // link's (netperf, flent's runner, reports no such interim). It joins the interval before.
    if let [.., a, b] = w.as_slice() {
        if b.1 - b.0 < 0.5 * (a.1 - a.0) {
            let merged = (a.0, b.1, a.2 + b.2);
            w.truncate(w.len() - 2);
            w.push(merged);
        }
    }
    w.iter()
        .map(|&(t0, t1, bytes)| (t1, bytes as f64 * 8.0 / (t1 - t0) / 1e6, None))
        .collect()
}

/// Bytes the receiver counted over the whole flow.
pub fn received_bytes(f: &FlowResult) -> u64 {
    f.samples.last().map_or(0, |s| s.1)
}

/// RTT samples (send time s since start, ms, seq) of a probe's received packets; `t` is the
/// probe's own start offset in the test.
fn probe_rtts(p: &Probe, offset_s: f64, test_t0_unix: f64) -> Vec<RawSample> {
    let shift = probe_offset(p, offset_s, test_t0_unix);
    p.trips
        .iter()
        .filter_map(|t| {
            let rtt = t.rtt_ns()?;
            Some((
                shift + t.send_mono as f64 / 1e9,
                rtt as f64 / 1e6,
                Some(u64::from(t.seq)),
            ))
        })
        .collect()
}

/// Where a probe's monotonic zero sits on the test's timeline, s: from the wall clocks when
/// they agree, else the planned start.
fn probe_offset(p: &Probe, planned_s: f64, test_t0_unix: f64) -> f64 {
    let shift = p.wall_at_start as f64 / 1e9 - test_t0_unix;
    if shift.is_finite() && shift >= 0.0 && shift < planned_s + 10.0 {
        shift
    } else {
        planned_s
    }
}

/// Every latency sample of the run (t, ms): UDP and ICMP round trips.
pub fn latency_samples(o: &Outcome) -> Vec<(f64, f64)> {
    let mut v: Vec<(f64, f64)> = Vec::new();
    for (spec, r) in &o.udp {
        if let Ok(p) = r {
            v.extend(
                probe_rtts(p, spec.start_s, o.t0_unix)
                    .iter()
                    .map(|s| (s.0, s.1)),
            );
        }
    }
    for (_, r) in &o.icmp {
        if let Ok(e) = r {
            v.extend(e.echoes.iter().filter_map(|x| Some((x.t, x.rtt_ms?))));
        }
    }
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v
}

/// The test's grade, if it has both a load and latency probes running before it: of its one
/// loaded phase, or DSLReports' mean over the download and upload phases (`bufferbloat`).
pub fn grade_of(o: &Outcome, stat: GradeStat) -> Option<Grade> {
    grade::grade(&latency_samples(o), &o.plan.phases(), stat)
}

/// The run's RPM, if it had load and foreign probes answered.
pub fn rpm_of(o: &Outcome) -> Option<Rpm> {
    let (a, b) = o.plan.rpm_window();
    let b = b.min(o.elapsed_s);
    let tcp_f: Vec<rpm::Timed> = o.foreign.iter().map(|s| (s.t, s.tcp_ms)).collect();
    let http_f: Vec<rpm::Timed> = o.foreign.iter().map(|s| (s.t, s.req_ms)).collect();
    let mut http_l: Vec<rpm::Timed> = o
        .foreign
        .iter()
        .flat_map(|s| s.loaded_ms.iter().map(move |&x| (s.t, x)))
        .collect();
    for f in &o.flows {
        http_l.extend(f.rtts.iter().map(|&(t, us)| (t, f64::from(us) / 1e3)));
    }
    // Aggregate goodput per step (every flow's sample in the same step summed), for the
    // stability check: the draft's test is of the total, which a ramp's added connections share.
    let step = o.plan.step_s;
    let mut per_step: std::collections::BTreeMap<i64, f64> = std::collections::BTreeMap::new();
    for f in &o.flows {
        for s in throughput(f) {
            *per_step.entry((s.0 / step).round() as i64).or_default() += s.1;
        }
    }
    let goodput: Vec<rpm::Timed> = per_step
        .into_iter()
        .map(|(k, v)| (k as f64 * step, v))
        .collect();
    rpm::compute(a, b, &tcp_f, &http_f, &http_l, &goodput)
}

/// A one-line error list: every part that failed and why.
pub fn errors(o: &Outcome) -> Vec<String> {
    let mut e: Vec<String> = o
        .flows
        .iter()
        .filter_map(|f| f.error.as_ref().map(|x| format!("{}: {x}", f.spec.name)))
        .collect();
    for (s, r) in o.udp.iter().chain(o.voip.iter()) {
        if let Err(x) = r {
            e.push(format!("{}: {x}", s.name));
        }
    }
    for (s, r) in &o.icmp {
        if let Err(x) = r {
            e.push(format!("{}: {x}", s.name));
        }
    }
    e
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// The flent data file (version 4) for a run.
pub fn flent_file(o: &Outcome, title: &str) -> Value {
    let p = &o.plan;
    let step = p.step_s;
    let t0 = o.t0_unix;
    let mut series: Vec<OutSeries> = o.flows.iter().map(flow_series).collect();
    let irtt_raw = udp_series(o, &mut series);
    series.extend(icmp_series(o));
    let xs = x_values(p.total_s, step);
    let (mut results, mut raw_values, mut series_meta) = tables(&series, &xs, step, t0);
    for (name, recs) in irtt_raw {
        raw_values.insert(name, Value::Array(recs));
    }
    if let Some((spec, Ok(pr))) = &o.voip {
        voip(
            pr,
            spec.start_s,
            t0,
            &xs,
            step,
            &mut results,
            &mut raw_values,
            &mut series_meta,
        );
    }
    let params: Map<String, Value> = p
        .parameters
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    let hosts: Vec<String> = {
        let mut h: Vec<String> = p.flows.iter().map(|f| f.server.ip().to_string()).collect();
        h.extend(p.icmp.iter().map(|c| c.target.ip().to_string()));
        h.extend(p.udp.iter().map(|u| u.server.ip().to_string()));
        h.dedup();
        h
    };
    let local = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "localhost".into());
    json!({
        "version": 4,
        "metadata": {
            "NAME": p.flent_name,
            "TITLE": title,
            "NOTE": format!(
                "debloat test {} (real network{}){}",
                p.name,
                if p.flent_name == p.name { String::new() } else { format!("; written as flent's {} so flent opens it", p.flent_name) },
                if o.interrupted { ", stopped early by the user" } else { "" }
            ),
            "TIME": iso(t0),
            "T0": iso(t0),
            "HOST": hosts.first().cloned().unwrap_or_default(),
            "HOSTS": hosts,
            "LOCAL_HOST": local,
            "LENGTH": p.length_s,
            "TOTAL_LENGTH": p.total_s,
            "STEP_SIZE": step,
            "DELAY": p.delay_s,
            "IP_VERSION": if p.flows.first().map(|f| f.server.is_ipv6()).unwrap_or(false) { 6 } else { 4 },
            "TEST_PARAMETERS": params,
            "FLENT_VERSION": concat!("debloat ", env!("CARGO_PKG_VERSION")),
            "SERIES_META": series_meta,
        },
        "x_values": xs,
        "results": results,
        "raw_values": raw_values,
    })
}

/// A TCP flow's throughput series and its metadata.
fn flow_series(f: &crate::run::FlowResult) -> OutSeries {
    let mut meta = Map::new();
    meta.insert("RUNNER".into(), json!("debloat-tcp"));
    meta.insert(
        "CONG_CONTROL".into(),
        json!(f.spec.cc.clone().unwrap_or_else(|| "default".into())),
    );
    meta.insert("DATA_TOS".into(), json!(f.spec.tos));
    meta.insert("BYTES_RECEIVED".into(), json!(received_bytes(f)));
    if f.spec.dir == crate::flow::Direction::Up {
        meta.insert("TCP_RETRANSMIT".into(), json!(f.retransmits));
    }
    let raw = throughput(f);
    let vals: Vec<f64> = raw.iter().map(|r| r.1).collect();
    meta.insert("MEAN_VALUE".into(), json!(mean(&vals)));
    OutSeries {
        name: f.spec.name.clone(),
        units: "Mbits/s",
        raw,
        meta,
    }
}

/// The UDP probes' RTT series (pushed onto `series`) and their irtt-shaped raw records.
fn udp_series(o: &Outcome, series: &mut Vec<OutSeries>) -> Vec<(String, Vec<Value>)> {
    let t0 = o.t0_unix;
    let mut irtt_raw: Vec<(String, Vec<Value>)> = Vec::new();
    for (spec, r) in &o.udp {
        let Ok(pr) = r else { continue };
        let st = pr.stats();
        let raw = probe_rtts(pr, spec.start_s, t0);
        let meta = irtt_meta(&st, "debloat-irtt");
        irtt_raw.push((spec.name.clone(), irtt_records(pr, spec.start_s, t0)));
        series.push(OutSeries {
            name: spec.name.clone(),
            units: "ms",
            raw,
            meta,
        });
    }
    irtt_raw
}

/// The ICMP series with their metadata.
fn icmp_series(o: &Outcome) -> Vec<OutSeries> {
    let mut series = Vec::new();
    for (spec, r) in &o.icmp {
        let Ok(icmp) = r else { continue };
        let e = &icmp.echoes;
        let raw: Vec<RawSample> = e
            .iter()
            .filter_map(|x| Some((x.t, x.rtt_ms?, Some(u64::from(x.seq)))))
            .collect();
        let mut meta = Map::new();
        meta.insert("RUNNER".into(), json!("debloat-icmp"));
        meta.insert("DEBLOAT_ICMP_SOCKET".into(), json!(icmp.socket));
        meta.insert("PACKETS_SENT".into(), json!(e.len()));
        meta.insert("PACKETS_RECEIVED".into(), json!(raw.len()));
        let vals: Vec<f64> = raw.iter().map(|r| r.1).collect();
        meta.insert("MEAN_VALUE".into(), json!(mean(&vals)));
        series.push(OutSeries {
            name: spec.name.clone(),
            units: "ms",
            raw,
            meta,
        });
    }
    series
}

fn irtt_meta(st: &Stats, runner: &str) -> Map<String, Value> {
    let ms = |ns: f64| ns / 1e6;
    let mut m = Map::new();
    m.insert("RUNNER".into(), json!(runner));
    m.insert("RTT_MEAN".into(), json!(ms(st.rtt.mean)));
    m.insert("RTT_MEDIAN".into(), json!(ms(st.rtt.median)));
    m.insert("MEAN_VALUE".into(), json!(ms(st.rtt.mean)));
    m.insert("OWD_UP_MEAN".into(), json!(ms(st.send_delay.mean)));
    m.insert("OWD_DOWN_MEAN".into(), json!(ms(st.receive_delay.mean)));
    m.insert("IPDV_MEAN".into(), json!(ms(st.ipdv_rtt.mean)));
    m.insert("PACKETS_SENT".into(), json!(st.sent));
    m.insert("PACKETS_RECEIVED".into(), json!(st.received));
    m.insert(
        "PACKET_LOSS_RATE".into(),
        json!(st.packet_loss_percent / 100.0),
    );
    m.insert("TIMER_ERROR_MEAN_MS".into(), json!(ms(st.timer_error.mean)));
    m
}

/// flent's irtt raw records: t, val (rtt ms), seq, owd_up, owd_down, ipdv; lost ones marked.
fn irtt_records(pr: &Probe, offset_s: f64, t0: f64) -> Vec<Value> {
    let shift = probe_offset(pr, offset_s, t0);
    let mut prev: Option<f64> = None;
    pr.trips
        .iter()
        .map(|t| {
            let ts = t0 + shift + t.send_mono as f64 / 1e9;
            // How late the send left against its slot, ms (irtt's timer error, one a send).
            let timer = (t.send_mono - t.scheduled).abs() as f64 / 1e6;
            match t.rtt_ns() {
                Some(rtt) => {
                    let rtt = rtt as f64 / 1e6;
                    let mut r = json!({"t": ts, "val": rtt, "seq": t.seq, "timer_error": timer});
                    if let Some(up) = t.send_delay_ns() {
                        r["owd_up"] = json!(up as f64 / 1e6);
                    }
                    if let Some(down) = t.receive_delay_ns() {
                        r["owd_down"] = json!(down as f64 / 1e6);
                    }
                    if let Some(p) = prev {
                        r["ipdv"] = json!(rtt - p);
                    }
                    prev = Some(rtt);
                    r
                }
                None => {
                    prev = None;
                    json!({"t": ts, "seq": t.seq, "timer_error": timer, "lost": true, "lost_dir": pr.lost_direction(t.seq)})
                }
            }
        })
        .collect()
}

/// flent's VoIP series (docs/measurement.md §2.5): rtt, delay (one-way up), jitter (|send IPDV|),
/// loss per step, induced delay (delay − its minimum).
#[allow(clippy::too_many_arguments)]
fn voip(
    pr: &Probe,
    offset_s: f64,
    t0: f64,
    xs: &[f64],
    step: f64,
    results: &mut Map<String, Value>,
    raw_values: &mut Map<String, Value>,
    series_meta: &mut Map<String, Value>,
) {
    let shift = probe_offset(pr, offset_s, t0);
    let got: Vec<_> = pr.trips.iter().filter(|t| t.rtt_ns().is_some()).collect();
    let ts = |t: &crate::irtt::client::RoundTrip| shift + t.send_mono as f64 / 1e9;
    let rtt: Vec<RawSample> = got
        .iter()
        .filter_map(|t| Some((ts(t), t.rtt_ns()? as f64 / 1e6, None)))
        .collect();
    let delay: Vec<RawSample> = got
        .iter()
        .filter_map(|t| Some((ts(t), t.send_delay_ns()? as f64 / 1e6, None)))
        .collect();
    let jitter: Vec<RawSample> = delay
        .windows(2)
        .map(|w| (w[1].0, (w[1].1 - w[0].1).abs(), None))
        .collect();
    let min_delay = delay.iter().map(|d| d.1).fold(f64::INFINITY, f64::min);
    let induced: Vec<RawSample> = delay.iter().map(|d| (d.0, d.1 - min_delay, None)).collect();
    let loss: Vec<Value> = xs
        .iter()
        .map(|&x| {
            if x == 0.0 {
                return Value::Null;
            }
            let n = pr
                .trips
                .iter()
                .filter(|t| {
                    let s = ts(t);
                    s > x - step && s <= x && t.recv_mono.is_none()
                })
                .count();
            json!(n)
        })
        .collect();
    let g = |v: &[RawSample]| Value::Array(debloat_report::flent_write::grid(v, xs, step));
    results.insert("VoIP::rtt".into(), g(&rtt));
    results.insert("VoIP::delay".into(), g(&delay));
    results.insert("VoIP::jitter".into(), g(&jitter));
    results.insert("VoIP::induced_delay".into(), g(&induced));
    results.insert("VoIP::loss".into(), Value::Array(loss));
    raw_values.insert("VoIP".into(), Value::Array(irtt_records(pr, offset_s, t0)));
    let mut meta = irtt_meta(&pr.stats(), "debloat-irtt-voip");
    meta.insert("UNITS".into(), json!("ms"));
    series_meta.insert("VoIP".into(), Value::Object(meta));
}

/// Store the summary's grade and RPM in the flent file's metadata (`DEBLOAT_VERDICT`), so the
/// report made from the file — now or later by `debloat report` — shows them with their
/// definitions. flent ignores the key.
pub fn attach_verdict(file: &mut Value, summary: &Value) {
    if let Some(meta) = file.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert(
            debloat_report::verdict::KEY.into(),
            debloat_report::verdict::Verdict::metadata(&summary["grade"], &summary["rpm"]),
        );
    }
}

/// The JSON summary written beside the flent file.
pub fn summary(o: &Outcome, stat: GradeStat) -> Value {
    let flows: Vec<Value> = o
        .flows
        .iter()
        .map(|f| {
            let tp = throughput(f);
            let vals: Vec<f64> = tp.iter().map(|r| r.1).collect();
            json!({
                "name": f.spec.name, "direction": f.spec.dir, "cc": f.spec.cc, "tos": f.spec.tos,
                "mean_mbit_s": mean(&vals), "bytes_received": received_bytes(f),
                "retransmits": f.retransmits, "error": f.error,
            })
        })
        .collect();
    let udp: Vec<Value> = o
        .udp
        .iter()
        .chain(o.voip.iter())
        .map(|(s, r)| match r {
            Ok(p) => json!({"name": s.name, "tos": s.tos, "stats_ns": p.stats()}),
            Err(e) => json!({"name": s.name, "error": e}),
        })
        .collect();
    let icmp: Vec<Value> = o
        .icmp
        .iter()
        .map(|(s, r)| match r {
            Ok(e) => {
                let v: Vec<f64> = e.echoes.iter().filter_map(|x| x.rtt_ms).collect();
                json!({"name": s.name, "socket": e.socket, "sent": e.echoes.len(), "received": v.len(), "mean_ms": mean(&v)})
            }
            Err(e) => json!({"name": s.name, "error": e}),
        })
        .collect();
    json!({
        "test": o.plan.name,
        "t0": iso(o.t0_unix),
        "length_s": o.plan.length_s,
        "step_s": o.plan.step_s,
        "delay_s": o.plan.delay_s,
        "elapsed_s": o.elapsed_s,
        "interrupted": o.interrupted,
        "flows": flows,
        "udp_probes": udp,
        "icmp": icmp,
        "grade": grade_of(o, stat),
        "load_ramp": o.ramp,
        "rpm": rpm_of(o),
        "errors": errors(o),
        "one_way_delay_caveat": "send/receive delays subtract two hosts' clocks: right only as far as those clocks agree",
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::flow::{Direction, FlowSpec};

    fn flow(samples: Vec<(f64, u64)>) -> FlowResult {
        FlowResult {
            spec: FlowSpec {
                name: "TCP download BE".into(),
                dir: Direction::Down,
                cc: None,
                tos: 0,
                start_s: 0.0,
                length_s: 1.0,
                server: "127.0.0.1:2112".parse().unwrap(),
                gated: false,
            },
            samples,
            rtts: vec![],
            retransmits: 0,
            error: None,
        }
    }

    #[test]
    fn a_short_last_interval_joins_the_one_before_instead_of_spiking() {
        // 10 Mbit/s for two 0.2 s steps, then 5 ms more carrying 50 kB drained from buffers.
        let f = flow(vec![
            (0.0, 0),
            (0.2, 250_000),
            (0.4, 500_000),
            (0.405, 550_000),
        ]);
        let t = throughput(&f);
        assert_eq!(t.len(), 2, "{t:?}");
        assert!((t[0].1 - 10.0).abs() < 1e-9);
        assert!((t[1].0 - 0.405).abs() < 1e-12);
        // (250 kB + 50 kB) over 0.205 s, not 50 kB over 5 ms (80 Mbit/s).
        assert!(
            (t[1].1 - 300_000.0 * 8.0 / 0.205 / 1e6).abs() < 1e-9,
            "{t:?}"
        );
        // The bytes are all still there: the series integrates to what was received.
        let integral: f64 = [0.2, 0.205]
            .iter()
            .zip(&t)
            .map(|(dt, s)| s.1 * dt * 1e6 / 8.0)
            .sum();
        assert!((integral - 550_000.0).abs() < 1e-3);
        // A full last interval stays as it is.
        let f = flow(vec![
            (0.0, 0),
            (0.2, 250_000),
            (0.4, 500_000),
            (0.6, 600_000),
        ]);
        assert_eq!(throughput(&f).len(), 3);
    }
}
