//! `debloat bench gateway`: how fast the gateway forwards, side by side with the kernel's own
//! forwarding of the same topology in the same run.
//!
//! The testbed's three namespaces and two veth pairs are built once. Between `lan0` and `wan0`
//! first the kernel forwards (a Linux bridge, the layer-2 equivalent of what the gateway does),
//! then `debloat gateway` with the discipline under test, unshaped. A load generator in the
//! client namespace (`debloat testbed blast`, UDP over 64 flows) sends to a MAC address that
//! nobody owns, so the server drops what arrives at once and the cost measured is forwarding.
//!
//! One core forwards: the generator runs on CPU 0, and everything the forwarder does — the
//! kernel's receive processing of `lan0` (steered there with RPS), the bridge or the gateway
//! process, the transmit on `wan0` — runs on CPU 1. The throughput is RFC 2544's: the highest
//! offered rate that is forwarded with at most 0.1 % loss, found by bisection; CPU per packet
//! is the forwarding core's busy time (/proc/stat) over the packets delivered at that rate.
//! Idle latency is `ping`'s round trip through each forwarder (the bridge, the gateway, the
//! gateway with `--realtime`), the forwarders taking turns in rounds so that the machine's
//! drift falls on all of them alike. A machine this noisy is compared only within one run.

use anyhow::{bail, Context, Result};
use debloat_core::link::Emulation;
use debloat_core::FlowHasher;
use debloat_gateway::path::Path;
use debloat_gateway::testbed::{self, in_ns, sh, Setup};
use std::process::Stdio;
use std::time::{Duration, Instant};

mod table;
use table::print_table;

/// What `debloat bench gateway` measures.
#[derive(Clone, Debug)]
pub struct Config {
    /// The gateway's discipline, both directions (unshaped unless it says otherwise).
    pub qdisc: String,
    /// Seconds per trial (the search runs about 8 trials per forwarder and frame size).
    pub trial: f64,
    /// Pings for the idle latency (5 ms apart).
    pub pings: u32,
    /// Loss allowed at the reported throughput, in percent.
    pub loss: f64,
    /// Measure only the idle latency (skip the throughput search).
    pub latency_only: bool,
    /// Also measure the idle latency with `gateway --realtime PRIO` (0: skip).
    pub realtime: u8,
    /// Skip the runs of `gateway --busy-poll` (throughput and idle latency).
    pub no_busy_poll: bool,
    /// The `debloat` binary that runs the gateway and the generator (`testbed blast`).
    pub exe: std::path::PathBuf,
}

/// The unicast MAC address the generator sends to: locally administered, owned by no one.
const SINK_MAC: &str = "02:db:00:00:00:09";
/// The generator's CPU and the forwarding CPU.
const GEN_CPU: usize = 0;
const FWD_CPU: usize = 1;
/// Rounds of the idle-latency measurement (each forwarder once per round).
const LATENCY_ROUNDS: u32 = 5;
/// /proc/stat counts in USER_HZ, which Linux fixes at 100 for userspace.
const TICKS_PER_S: f64 = 100.0;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Forwarder {
    Kernel,
    Gateway,
}

/// The namespaces, removed when dropped (also on error or panic).
struct Rig {
    prefix: String,
    exe: std::path::PathBuf,
    qdisc: String,
}

impl Drop for Rig {
    fn drop(&mut self) {
        let _ = testbed::down(&self.prefix);
    }
}

/// One trial's numbers.
#[derive(Clone, Copy, Debug)]
struct Trial {
    offered_pps: f64,
    delivered_pps: f64,
    loss: f64,
    /// Forwarding core's busy time per delivered packet, µs.
    cpu_us: f64,
}

/// One forwarder's result at one frame size.
#[derive(Clone, Copy, Debug)]
struct Throughput {
    /// The highest rate forwarded within the loss allowed.
    at: Trial,
    /// Whether the generator could not offer more (the forwarder may do better).
    generator_bound: bool,
}

/// Build the namespaces, measure every forwarder, print the tables; the namespaces are removed
/// whatever happens.
pub fn run(a: &Config) -> Result<()> {
    if let Err(why) = testbed::available() {
        bail!("cannot run the gateway benchmark here: {why}");
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        bail!("the gateway benchmark needs two CPUs (one generates, one forwards); this machine has {cpus}");
    }
    a.qdisc
        .parse::<debloat_core::QdiscSpec>()
        .with_context(|| format!("--qdisc \"{}\"", a.qdisc))?;
    let rig = build_rig(a)?;
    let rows = throughput_rows(&rig, a)?;
    let mut variants = latency_variants(a);
    measure_latency(&rig, a, &mut variants)?;
    let path_ns = if a.latency_only {
        0.0
    } else {
        path_cost(&a.qdisc)?
    };
    print_table(a, &rows, &variants, path_ns);
    Ok(())
}

/// The namespaces, with both veths' receive processing steered to the forwarding core and this
/// process (and the generator and ping it starts) kept off it.
fn build_rig(a: &Config) -> Result<Rig> {
    // This process and its children (the generator, ping) stay off the forwarding core.
    debloat_gateway::sys::pin_to_cpu(GEN_CPU)?;
    let rig = Rig {
        prefix: format!("dblb{}", std::process::id() % 100_000),
        exe: a.exe.clone(),
        qdisc: a.qdisc.clone(),
    };
    println!(
        "Building namespaces {}-client, -gw, -server (veth pairs, offloads off)…",
        rig.prefix
    );
    testbed::build_namespaces(&rig.prefix)?;
    let [_, g, _] = testbed::namespaces(&rig.prefix);
    // Steer lan0's and wan0's receive processing to the forwarding core.
    for dev in ["lan0", "wan0"] {
        sh(&[
            "ip",
            "netns",
            "exec",
            &g,
            "sh",
            "-c",
            &format!(
                "echo {:x} > /sys/class/net/{dev}/queues/rx-0/rps_cpus",
                1u64 << FWD_CPU
            ),
        ])?;
    }
    Ok(rig)
}

/// Each forwarder's highest rate with at most `--loss` lost, at 64 and 1500 bytes.
fn throughput_rows(rig: &Rig, a: &Config) -> Result<Vec<(String, bool, Vec<Throughput>)>> {
    let sizes = [(64usize, 60usize), (1500, 1514)];
    let mut rows = Vec::new();
    let busy = ["--busy-poll"];
    let mut forwarders: Vec<(Forwarder, Vec<String>)> =
        vec![(Forwarder::Kernel, vec![]), (Forwarder::Gateway, vec![])];
    if !a.no_busy_poll {
        forwarders.push((Forwarder::Gateway, busy.map(String::from).to_vec()));
    }
    let throughput_runs = if a.latency_only {
        &[][..]
    } else {
        &forwarders[..]
    };
    for (fwd, extra) in throughput_runs {
        let name = match fwd {
            Forwarder::Kernel => "kernel bridge".to_string(),
            Forwarder::Gateway => format!("debloat gateway, {} {}", a.qdisc, extra.join(" "))
                .trim_end()
                .to_string(),
        };
        start(rig, *fwd, extra)?;
        let mut row = Vec::new();
        for &(label, frame) in &sizes {
            println!(
                "{name}, {label} B: searching for the highest rate with ≤ {} % loss",
                a.loss
            );
            row.push(search(rig, frame, a)?);
        }
        stop(rig, *fwd)?;
        rows.push((name, extra.iter().any(|e| e == busy[0]), row));
    }
    Ok(rows)
}

/// The forwarders whose idle latency is measured, with what each is compared against.
fn latency_variants(a: &Config) -> Vec<Latency> {
    // Idle latency: the forwarders take turns in rounds, so a drift in the machine's state
    // (seen here as ±50 µs between minutes) falls on all of them alike. A busy-polling gateway
    // keeps the forwarding core out of its idle states, which by itself shortens the path
    // (a VM's idle CPU wakes slowly); it is compared with the bridge on a core kept awake the
    // same way (a SCHED_IDLE spinner that yields to everything), not with the sleeping bridge.
    let busy = ["--busy-poll"];
    let mut variants = vec![
        Latency::new("kernel bridge", Forwarder::Kernel, &[], None),
        Latency::new("debloat gateway", Forwarder::Gateway, &[], Some(0)),
    ];
    if !a.no_busy_poll {
        variants.push(Latency {
            keep_awake: true,
            ..Latency::new(
                "kernel bridge, core kept awake",
                Forwarder::Kernel,
                &[],
                None,
            )
        });
        let awake_bridge = variants.len() - 1;
        variants.push(Latency::new(
            "debloat gateway --busy-poll",
            Forwarder::Gateway,
            &busy,
            Some(awake_bridge),
        ));
    }
    if a.realtime > 0 {
        let prio = a.realtime.to_string();
        variants.push(Latency::new(
            &format!("debloat gateway --realtime {prio}"),
            Forwarder::Gateway,
            &["--realtime", &prio],
            Some(0),
        ));
    }
    variants
}

/// Pings through each variant, taking turns in rounds; the RTTs sorted.
fn measure_latency(rig: &Rig, a: &Config, variants: &mut [Latency]) -> Result<()> {
    let per_round = a.pings.div_ceil(LATENCY_ROUNDS);
    println!(
        "Idle latency: {} pings 5 ms apart through each forwarder, in {LATENCY_ROUNDS} rounds",
        per_round * LATENCY_ROUNDS
    );
    for _ in 0..LATENCY_ROUNDS {
        for v in variants.iter_mut() {
            start(rig, v.fwd, &v.extra)?;
            let awake = v.keep_awake.then(KeepAwake::start);
            let got = ping(rig, per_round);
            drop(awake);
            stop(rig, v.fwd)?;
            v.rtts.extend(got?);
        }
    }
    for v in variants.iter_mut() {
        v.rtts.sort_by(f64::total_cmp);
    }
    Ok(())
}

/// Start a forwarder (the gateway with `extra` arguments).
fn start(rig: &Rig, fwd: Forwarder, extra: &[String]) -> Result<()> {
    let [_, g, _] = testbed::namespaces(&rig.prefix);
    match fwd {
        Forwarder::Kernel => {
            sh(&["ip", "-n", &g, "link", "add", "br0", "type", "bridge"])?;
            for dev in ["lan0", "wan0"] {
                sh(&["ip", "-n", &g, "link", "set", dev, "master", "br0"])?;
            }
            sh(&["ip", "-n", &g, "link", "set", "br0", "up"])?;
            // A known destination, so the bridge forwards rather than floods.
            sh(&[
                "bridge", "-n", &g, "fdb", "add", SINK_MAC, "dev", "wan0", "master", "static",
            ])?;
        }
        Forwarder::Gateway => {
            let cpu = FWD_CPU.to_string();
            let mut gateway_args = [
                "--egress",
                &rig.qdisc,
                "--ingress",
                &rig.qdisc,
                "--cpu",
                &cpu,
            ]
            .map(String::from)
            .to_vec();
            gateway_args.extend_from_slice(extra);
            testbed::start_gateway(&Setup {
                prefix: rig.prefix.clone(),
                exe: rig.exe.clone(),
                gateway_args,
            })?;
        }
    }
    // Let the forwarder settle (bridge ports come up, ARP for the pings).
    std::thread::sleep(Duration::from_millis(300));
    Ok(())
}

fn stop(rig: &Rig, fwd: Forwarder) -> Result<()> {
    let [_, g, _] = testbed::namespaces(&rig.prefix);
    match fwd {
        Forwarder::Kernel => {
            sh(&["ip", "-n", &g, "link", "del", "br0"])?;
        }
        Forwarder::Gateway => testbed::stop_gateway(&rig.prefix),
    }
    Ok(())
}

/// A counter of an interface in a namespace, from `ip -s -j link`.
fn counter(ns: &str, dir: &str) -> Result<u64> {
    let out = sh(&["ip", "-n", ns, "-s", "-j", "link", "show", "dev", "eth0"])?;
    let v: serde_json::Value = serde_json::from_str(&out)?;
    v[0]["stats64"][dir]["packets"]
        .as_u64()
        .with_context(|| format!("no {dir} packet counter for eth0 in {ns}"))
}

/// The forwarding core's idle time so far, seconds (idle + iowait from /proc/stat). Linux
/// measures idle time exactly (from timestamps, even with the tick stopped), while the busy
/// fields are sampled by a tick that sleeps with the CPU: work done in short wake-ups between
/// idle periods (a softirq from an inter-processor interrupt) is missed by them. So busy time
/// is taken as wall time minus idle time.
fn idle_s() -> Result<f64> {
    let stat = std::fs::read_to_string("/proc/stat")?;
    let name = format!("cpu{FWD_CPU}");
    let line = stat
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name.as_str()))
        .with_context(|| format!("no {name} in /proc/stat"))?;
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let idle = f.get(3).copied().unwrap_or(0) + f.get(4).copied().unwrap_or(0);
    Ok(idle as f64 / TICKS_PER_S)
}

/// Offer `pps` (0: as fast as the generator goes) for one trial.
fn trial(rig: &Rig, frame: usize, pps: u64, secs: f64) -> Result<Trial> {
    let [c, _, v] = testbed::namespaces(&rig.prefix);
    let exe = rig.exe.to_string_lossy().into_owned();
    let (rx0, idle0, t0) = (counter(&v, "rx")?, idle_s()?, Instant::now());
    let out = in_ns(
        &c,
        &[
            &exe,
            "testbed",
            "blast",
            "--iface",
            "eth0",
            "--dst-mac",
            SINK_MAC,
            "--size",
            &frame.to_string(),
            "--pps",
            &pps.to_string(),
            "--seconds",
            &secs.to_string(),
            "--cpu",
            &GEN_CPU.to_string(),
        ],
    )
    .stderr(Stdio::inherit())
    .output()?;
    if !out.status.success() {
        bail!("the load generator failed");
    }
    // What is still in the forwarder's queues arrives within a few milliseconds.
    std::thread::sleep(Duration::from_millis(100));
    let (rx1, idle1) = (counter(&v, "rx")?, idle_s()?);
    let busy_s = (t0.elapsed().as_secs_f64() - (idle1 - idle0)).max(0.0);
    let r: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("the load generator's report")?;
    let num = |k: &str| r[k].as_f64().unwrap_or(0.0);
    let offered = num("sent") + num("refused");
    let elapsed = num("elapsed_s").max(1e-3);
    let delivered = (rx1 - rx0) as f64;
    Ok(Trial {
        offered_pps: offered / elapsed,
        delivered_pps: delivered / elapsed,
        loss: if offered > 0.0 {
            (1.0 - delivered / offered).max(0.0)
        } else {
            0.0
        },
        cpu_us: busy_s * 1e6 / delivered.max(1.0),
    })
}

/// RFC 2544's throughput: the highest offered rate forwarded within the loss allowed.
fn search(rig: &Rig, frame: usize, a: &Config) -> Result<Throughput> {
    let allowed = a.loss / 100.0;
    let show = |t: &Trial| {
        println!(
            "  offered {:7.1} kpps → delivered {:7.1} kpps, loss {:5.2} %, forwarding core {:.2} µs/packet",
            t.offered_pps / 1e3,
            t.delivered_pps / 1e3,
            t.loss * 100.0,
            t.cpu_us
        )
    };
    let flat_out = trial(rig, frame, 0, a.trial)?;
    show(&flat_out);
    if flat_out.loss <= allowed {
        return Ok(Throughput {
            at: flat_out,
            generator_bound: true,
        });
    }
    let (mut lo, mut hi) = (0.0f64, flat_out.offered_pps);
    let mut best: Option<Trial> = None;
    // First try just under what got through flat out, then bisect.
    let mut probe = flat_out.delivered_pps * 0.98;
    for _ in 0..7 {
        let t = trial(rig, frame, probe as u64, a.trial)?;
        show(&t);
        if t.loss <= allowed {
            lo = probe;
            best = Some(t);
        } else {
            hi = probe;
        }
        if hi - lo < 0.02 * hi {
            break;
        }
        probe = (lo + hi) / 2.0;
    }
    let at = match best {
        Some(t) => t,
        None => bail!(
            "no rate down to {:.0} kpps was forwarded within {} % loss",
            hi / 1e3,
            a.loss
        ),
    };
    Ok(Throughput {
        at,
        generator_bound: false,
    })
}

/// Round-trip times of `n` pings from client to server, µs.
fn ping(rig: &Rig, n: u32) -> Result<Vec<f64>> {
    let [c, _, _] = testbed::namespaces(&rig.prefix);
    let out = in_ns(
        &c,
        &[
            "ping",
            "-n",
            "-i",
            "0.005",
            "-c",
            &n.to_string(),
            "-W",
            "1",
            testbed::SERVER_V4,
        ],
    )
    .output()?;
    let rtts: Vec<f64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split("time=").nth(1))
        .filter_map(|t| t.split_whitespace().next()?.parse::<f64>().ok())
        .map(|ms| ms * 1e3)
        .collect();
    if rtts.len() < (n as usize) / 2 {
        bail!(
            "only {} of {n} pings were answered through the forwarder",
            rtts.len()
        );
    }
    Ok(rtts)
}

/// The p-th percentile (0..=100), nearest rank, as every number debloat prints.
fn pct(sorted: &[f64], p: f64) -> f64 {
    debloat_report::percentile::percentile(sorted, p).unwrap_or(f64::NAN)
}

/// What the gateway's own per-packet work costs, in this process: parse, classify, the
/// discipline's enqueue and dequeue (nanoseconds per 64-byte frame over 64 flows).
fn path_cost(qdisc: &str) -> Result<f64> {
    let spec: debloat_core::QdiscSpec = qdisc.parse()?;
    let blast = debloat_gateway::loadgen::Blast {
        frame_len: 60,
        flows: 64,
        pps: 0,
        duration: Duration::ZERO,
        src_mac: [2, 0, 0, 0, 0, 1],
        dst_mac: [2, 0xdb, 0, 0, 0, 9],
        src_ip: [198, 18, 1, 2],
        dst_ip: [198, 18, 2, 2],
        spread_sources: false,
    };
    let frames = blast.frames()?;
    let mut path = Path::new(&spec, Emulation::default(), FlowHasher::new([1, 2]), 1);
    let n = 2_000_000u64;
    let start = Instant::now();
    let mut out = 0u64;
    for i in 0..n {
        let now = start.elapsed().as_nanos() as u64;
        path.on_frame(frames[(i % 64) as usize].clone(), now);
        path.poll(now, &mut |f| out += f.len() as u64);
    }
    let ns = start.elapsed().as_nanos() as f64 / n as f64;
    std::hint::black_box(out);
    Ok(ns)
}

/// One forwarder's idle-latency measurement.
struct Latency {
    name: String,
    fwd: Forwarder,
    /// The gateway's extra arguments.
    extra: Vec<String>,
    /// Keep the forwarding core out of its idle states while pinging.
    keep_awake: bool,
    /// Which variant this one is compared with.
    baseline: Option<usize>,
    /// Round trips, µs.
    rtts: Vec<f64>,
}

impl Latency {
    fn new(name: &str, fwd: Forwarder, extra: &[&str], baseline: Option<usize>) -> Latency {
        Latency {
            name: name.to_string(),
            fwd,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            keep_awake: false,
            baseline,
            rtts: Vec::new(),
        }
    }
}

/// A thread on the forwarding core under SCHED_IDLE that spins until dropped: the core never
/// enters an idle state, yet any other task or softirq runs before it.
struct KeepAwake {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl KeepAwake {
    fn start() -> KeepAwake {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let flag = std::sync::Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            if let Err(e) = debloat_gateway::sys::pin_to_cpu(FWD_CPU)
                .and_then(|()| debloat_gateway::sys::idle_priority())
            {
                eprintln!("warning: cannot keep CPU {FWD_CPU} awake ({e}): the \"core kept awake\" bridge row is a sleeping bridge");
                return;
            }
            while !flag.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        });
        KeepAwake {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for KeepAwake {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
