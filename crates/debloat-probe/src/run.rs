//! Running a [`Plan`](crate::catalog::Plan): one thread per flow, per UDP probe, per ICMP
//! series and one for the responsiveness probes; the calling thread keeps time, prints the
//! progress line (when asked) and watches the stop flag, so Ctrl-C ends every part early and
//! whatever was measured is still returned.

use crate::catalog::{IcmpSpec, Plan, UdpSpec};
use crate::flow::{self, FlowLive, FlowSpec};
use crate::icmp;
use crate::irtt::client as irtt;
use crate::rpm::ForeignSample;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How to run.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Shared key for `debloat server` (TCP MAC) and irtt (HMAC).
    pub hmac_key: Option<Vec<u8>>,
    /// Print a progress line to stderr every step.
    pub progress: bool,
    /// Run the latency probes' threads (irtt, ICMP) under SCHED_FIFO at this priority.
    pub realtime: Option<u8>,
}

/// A flow's outcome.
#[derive(Debug, Clone)]
pub struct FlowResult {
    /// What was asked.
    pub spec: FlowSpec,
    /// (s since start, bytes the receiver had counted).
    pub samples: Vec<(f64, u64)>,
    /// (s, smoothed RTT µs at the sender) for uploads.
    pub rtts: Vec<(f64, u32)>,
    /// Retransmitted segments (uploads).
    pub retransmits: u64,
    /// Why it failed, if it did.
    pub error: Option<String>,
}

/// Everything a run measured.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The plan run.
    pub plan: Plan,
    /// Wall-clock start (Unix seconds): flent's T0.
    pub t0_unix: f64,
    /// How long it ran, s (shorter than planned when stopped).
    pub elapsed_s: f64,
    /// Stopped early by the user.
    pub interrupted: bool,
    /// TCP flows.
    pub flows: Vec<FlowResult>,
    /// UDP probes.
    pub udp: Vec<(UdpSpec, Result<irtt::Probe, String>)>,
    /// The VoIP flow.
    pub voip: Option<(UdpSpec, Result<irtt::Probe, String>)>,
    /// ICMP series.
    pub icmp: Vec<(IcmpSpec, Result<icmp::Series, String>)>,
    /// Responsiveness probes (fresh connections during the load).
    pub foreign: Vec<ForeignSample>,
    /// The load ramp as it ran (`responsiveness`).
    pub ramp: Option<crate::rpm::Ramp>,
}

fn irtt_config(u: &UdpSpec, key: Option<&[u8]>, realtime: Option<u8>) -> irtt::Config {
    let mut c = irtt::Config::new(u.server, u.interval, Duration::from_secs_f64(u.length_s));
    c.length = u.length;
    c.tos = u.tos;
    c.hmac_key = key.map(<[u8]>::to_vec);
    c.open_timeouts = [1, 2].map(Duration::from_secs).to_vec();
    c.realtime = realtime;
    c
}

fn run_udp(
    u: &UdpSpec,
    key: Option<&[u8]>,
    realtime: Option<u8>,
    t0: Instant,
    stop: &AtomicBool,
    live: &AtomicU64,
) -> Result<irtt::Probe, String> {
    let at = t0 + Duration::from_secs_f64(u.start_s);
    while Instant::now() < at && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let l = irtt::Live::default();
    let r = std::thread::scope(|s| {
        let h = s.spawn(|| irtt::run(&irtt_config(u, key, realtime), stop, &l));
        while !h.is_finished() {
            live.store(l.last_rtt_us.load(Ordering::Relaxed), Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(50));
        }
        h.join()
    });
    match r {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(_) => Err(format!("{}: the probe thread panicked", u.name)),
    }
}

/// Release the first `n` flows of each direction (the gated ones not yet running start now).
fn release(plan: &Plan, live: &[Arc<FlowLive>], n: usize) {
    for dir in [flow::Direction::Down, flow::Direction::Up] {
        for (_, l) in plan
            .flows
            .iter()
            .zip(live)
            .filter(|(f, _)| f.dir == dir)
            .take(n)
        {
            l.release.store(true, Ordering::Relaxed);
        }
    }
}

/// Run the plan against its servers. Returns when every part has finished or, after `stop`
/// was set, as soon as every part has noticed.
pub fn run(plan: &Plan, o: &RunOptions, user_stop: &AtomicBool) -> Outcome {
    // Every part watches `halt`: set when the user stops the test, or when the responsiveness
    // test has its answer (the draft ends the test once responsiveness is stable).
    let halt = AtomicBool::new(false);
    let stop = &halt;
    let t0 = Instant::now();
    let t0_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    let step = Duration::from_secs_f64(plan.step_s);
    let key = o.hmac_key.as_deref();
    let rt = o.realtime;
    let flows_live: Vec<Arc<FlowLive>> = plan.flows.iter().map(|_| Arc::default()).collect();
    let lat_live: Vec<AtomicU64> = (0..plan.udp.len() + plan.icmp.len() + 1)
        .map(|_| AtomicU64::new(0))
        .collect();
    let done = AtomicBool::new(false);
    let any_stop = || user_stop.load(Ordering::Relaxed);
    let foreign = Mutex::new(Vec::new());
    let (load_a, load_b) = plan.rpm_window();
    let mut out = std::thread::scope(|s| {
        let mut flow_h = Vec::new();
        for (f, live) in plan.flows.iter().zip(&flows_live) {
            flow_h.push(s.spawn(move || flow::run(f, step, key, t0, stop, live)));
        }
        let (udp_h, voip_h, icmp_h) = spawn_probes(s, plan, &lat_live, key, rt, t0, stop);
        let foreign_h = plan.flows.first().map(|f| {
            let server = f.server;
            let (done, foreign) = (&done, &foreign);
            s.spawn(move || {
                crate::rpm::foreign_probes(server, key, t0, load_a, load_b, stop, done, foreign)
            })
        });
        let live = Live {
            flows: &flows_live,
            latency: &lat_live,
            foreign: &foreign,
        };
        let ramp = keep_time(plan, o, t0, &live, user_stop, &halt);
        // Parts end on their own lengths; wait for them (they also watch `stop`).
        for h in flow_h {
            // A panicked flow thread leaves its error unset and its samples as they were.
            let _ = h.join();
        }
        done.store(true, Ordering::Relaxed);
        let (udp, voip, icmp) = join_probes(plan, udp_h, voip_h, icmp_h);
        if let Some(h) = foreign_h {
            let _ = h.join();
        }
        let foreign = foreign
            .lock()
            .map(|v| v.clone())
            .unwrap_or_else(|p| p.into_inner().clone());
        Outcome {
            ramp: ramp.map(|r| r.0),
            plan: plan.clone(),
            t0_unix,
            elapsed_s: 0.0,
            interrupted: any_stop(),
            flows: Vec::new(),
            udp,
            voip,
            icmp,
            foreign,
        }
    });
    if o.progress {
        eprintln!();
    }
    out.elapsed_s = t0.elapsed().as_secs_f64().min(plan.total_s);
    keep_what_ran(&mut out, plan, &flows_live);
    out
}

type Handle<'s, T> = std::thread::ScopedJoinHandle<'s, Result<T, String>>;
type ProbeHandles<'s> = (
    Vec<Handle<'s, irtt::Probe>>,
    Option<Handle<'s, irtt::Probe>>,
    Vec<Handle<'s, icmp::Series>>,
);
type Probes = (
    Vec<(UdpSpec, Result<irtt::Probe, String>)>,
    Option<(UdpSpec, Result<irtt::Probe, String>)>,
    Vec<(IcmpSpec, Result<icmp::Series, String>)>,
);

/// Start the latency probes (irtt, VoIP, ICMP), each reporting its last RTT to its slot of
/// `lat_live` (irtt first, then ICMP, VoIP last).
fn spawn_probes<'s, 'e: 's>(
    s: &'s std::thread::Scope<'s, 'e>,
    plan: &'e Plan,
    lat_live: &'e [AtomicU64],
    key: Option<&'e [u8]>,
    rt: Option<u8>,
    t0: Instant,
    stop: &'e AtomicBool,
) -> ProbeHandles<'s> {
    let step = Duration::from_secs_f64(plan.step_s);
    let mut udp_h = Vec::new();
    for (i, u) in plan.udp.iter().enumerate() {
        let live = &lat_live[i];
        udp_h.push(s.spawn(move || run_udp(u, key, rt, t0, stop, live)));
    }
    let voip_h = plan.voip.as_ref().map(|v| {
        let live = &lat_live[plan.udp.len() + plan.icmp.len()];
        s.spawn(move || run_udp(v, key, rt, t0, stop, live))
    });
    let mut icmp_h = Vec::new();
    for (i, c) in plan.icmp.iter().enumerate() {
        let live = &lat_live[plan.udp.len() + i];
        icmp_h.push(s.spawn(move || {
            icmp::run(
                c.target.ip(),
                step,
                c.start_s,
                c.length_s,
                t0,
                stop,
                live,
                rt,
            )
            .map_err(|e| format!("{}: {e}", c.name))
        }));
    }
    (udp_h, voip_h, icmp_h)
}

/// Wait for the latency probes and pair each result with its spec.
fn join_probes(
    plan: &Plan,
    udp_h: Vec<Handle<'_, irtt::Probe>>,
    voip_h: Option<Handle<'_, irtt::Probe>>,
    icmp_h: Vec<Handle<'_, icmp::Series>>,
) -> Probes {
    let udp = plan
        .udp
        .iter()
        .cloned()
        .zip(udp_h.into_iter().map(|h| joined(h, "probe")))
        .collect();
    let voip = plan.voip.clone().zip(voip_h.map(|h| joined(h, "probe")));
    let icmp = plan
        .icmp
        .iter()
        .cloned()
        .zip(icmp_h.into_iter().map(|h| joined(h, "icmp")))
        .collect();
    (udp, voip, icmp)
}

/// What the parts report while they run, read by the timekeeper.
struct Live<'a> {
    flows: &'a [Arc<FlowLive>],
    latency: &'a [AtomicU64],
    foreign: &'a Mutex<Vec<ForeignSample>>,
}

/// Timekeeping, the load ramp and progress, once a step until the test's end, the user's stop
/// or the ramp's answer (which sets `halt`). Returns the ramp's state.
fn keep_time(
    plan: &Plan,
    o: &RunOptions,
    t0: Instant,
    live: &Live,
    user_stop: &AtomicBool,
    halt: &AtomicBool,
) -> Option<RampState> {
    let step = Duration::from_secs_f64(plan.step_s);
    let (load_a, load_b) = plan.rpm_window();
    let mut last: Vec<(f64, u64)> = vec![(0.0, 0); plan.flows.len()];
    let mut ramp = plan
        .ramp
        .map(|(id, max)| (crate::rpm::Ramp::new(load_a, id, max), load_a + id, 0u64));
    let mut k = 1u32;
    loop {
        let at = t0 + step * k;
        let now = Instant::now();
        if at > now {
            std::thread::sleep(at - now);
        }
        k += 1;
        let t = t0.elapsed().as_secs_f64();
        if let Some(r) = &mut ramp {
            if ramp_step(plan, live.flows, live.foreign, r, load_b, t) {
                halt.store(true, Ordering::Relaxed);
            }
        }
        if o.progress {
            print_progress(plan, live.flows, live.latency, &mut last, t);
        }
        if user_stop.load(Ordering::Relaxed) {
            halt.store(true, Ordering::Relaxed);
        }
        if halt.load(Ordering::Relaxed) || t >= plan.total_s {
            return ramp;
        }
    }
}

/// A part's result, or an error saying its thread panicked.
fn joined<T>(
    h: std::thread::ScopedJoinHandle<'_, Result<T, String>>,
    what: &str,
) -> Result<T, String> {
    h.join()
        .unwrap_or_else(|_| Err(format!("{what} thread panicked")))
}

/// The load ramp's bookkeeping: the ramp, when its next interval ends, bytes counted then.
type RampState = (crate::rpm::Ramp, f64, u64);

/// One tick of the responsiveness test's load ramp: at each interval's end, measure the
/// goodput, release the flows the ramp asks for, and say whether the test has its answer
/// (saturated and responsiveness stable), which ends it.
fn ramp_step(
    plan: &Plan,
    flows_live: &[Arc<FlowLive>],
    foreign: &Mutex<Vec<ForeignSample>>,
    (r, next, bytes_before): &mut RampState,
    load_b: f64,
    t: f64,
) -> bool {
    if t < *next || *next >= load_b {
        return false;
    }
    let bytes: u64 = flows_live
        .iter()
        .map(|l| l.bytes.load(Ordering::Relaxed))
        .sum();
    let mbps = bytes.saturating_sub(*bytes_before) as f64 * 8.0 / r.interval_s / 1e6;
    *bytes_before = bytes;
    let n = r.interval_done(*next, mbps);
    *next += r.interval_s;
    release(plan, flows_live, n);
    if r.saturated_at_s.is_some() && responsive_enough(plan, flows_live, foreign, t) {
        r.ended_at_s = Some(t);
        return true;
    }
    false
}

/// The progress line: time, goodput each way since the last line, mean latency of the probes.
fn print_progress(
    plan: &Plan,
    flows_live: &[Arc<FlowLive>],
    lat_live: &[AtomicU64],
    last: &mut [(f64, u64)],
    t: f64,
) {
    let (mut up, mut down) = (0.0, 0.0);
    for (i, (f, live)) in plan.flows.iter().zip(flows_live).enumerate() {
        let b = live.bytes.load(Ordering::Relaxed);
        let mbps = (b.saturating_sub(last[i].1)) as f64 * 8.0 / (t - last[i].0) / 1e6;
        last[i] = (t, b);
        match f.dir {
            flow::Direction::Up => up += mbps,
            flow::Direction::Down => down += mbps,
        }
    }
    let lat: Vec<u64> = lat_live
        .iter()
        .map(|a| a.load(Ordering::Relaxed))
        .filter(|&x| x > 0)
        .collect();
    let lat = if lat.is_empty() {
        "  -   ".to_string()
    } else {
        format!(
            "{:6.1}",
            lat.iter().sum::<u64>() as f64 / lat.len() as f64 / 1e3
        )
    };
    let mut e = std::io::stderr().lock();
    let _ = write!(
        e,
        "\r  {t:5.1} / {:.0} s   down {down:7.2} Mbit/s   up {up:7.2} Mbit/s   latency {lat} ms ",
        plan.total_s
    );
    let _ = e.flush();
}

/// Gated flows the ramp never released did not run: they are left out of the results, and
/// the flent parameters give the streams that ran.
fn keep_what_ran(out: &mut Outcome, plan: &Plan, flows_live: &[Arc<FlowLive>]) {
    let ran = |f: &FlowSpec, l: &FlowLive| !f.gated || l.release.load(Ordering::Relaxed);
    if let Some(r) = &out.ramp {
        out.plan.flows = plan
            .flows
            .iter()
            .zip(flows_live)
            .filter(|(f, l)| ran(f, l))
            .map(|(f, _)| f.clone())
            .collect();
        for (k, v) in &mut out.plan.parameters {
            if k.ends_with("_streams") {
                *v = r.flows.to_string();
            }
        }
    }
    out.flows = flow_results(plan, flows_live)
        .into_iter()
        .zip(flows_live)
        .filter(|(f, l)| ran(&f.spec, l))
        .map(|(f, _)| f)
        .collect();
}

/// What each flow has measured so far.
fn flow_results(plan: &Plan, live: &[Arc<FlowLive>]) -> Vec<FlowResult> {
    plan.flows
        .iter()
        .zip(live)
        .map(|(spec, live)| FlowResult {
            spec: spec.clone(),
            samples: live.samples.lock().map(|v| v.clone()).unwrap_or_default(),
            rtts: live.rtts.lock().map(|v| v.clone()).unwrap_or_default(),
            retransmits: live.retransmits.load(Ordering::Relaxed),
            error: live.error.lock().map(|e| e.clone()).unwrap_or(None),
        })
        .collect()
}

/// The draft's end of the test: with goodput saturated, responsiveness computed over what was
/// measured up to `t` is stable too (the RPM's confidence is High).
fn responsive_enough(
    plan: &Plan,
    live: &[Arc<FlowLive>],
    foreign: &Mutex<Vec<ForeignSample>>,
    t: f64,
) -> bool {
    let so_far = Outcome {
        plan: plan.clone(),
        t0_unix: 0.0,
        elapsed_s: t,
        interrupted: false,
        flows: flow_results(plan, live),
        udp: Vec::new(),
        voip: None,
        icmp: Vec::new(),
        foreign: foreign.lock().map(|v| v.clone()).unwrap_or_default(),
        ramp: None,
    };
    crate::results::rpm_of(&so_far).is_some_and(|r| r.confidence == crate::rpm::Confidence::High)
}
