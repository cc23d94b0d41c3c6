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
use debloat_gateway::testbed::{self, in_ns, sh, Setup};
use std::process::Stdio;
use std::time::{Duration, Instant};

mod latency;
mod napi;
mod rows;
mod same_rate;
mod table;
use latency::{latency_variants, measure_latency, Latency};
use napi::{threaded_napi, write_sysfs};
use rows::{ceilings, forwarders, io_of, row_name};
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
    /// Both forwarders of the same-rate comparison with `--realtime PRIO` (0: without).
    pub same_rate_realtime: u8,
    /// Skip the runs of `gateway --busy-poll` (throughput and idle latency).
    pub no_busy_poll: bool,
    /// Also measure the kernel's bridge with the same discipline on its ports (`tc qdisc
    /// replace dev wan0 root …`): the kernel's cost of the discipline beside debloat's.
    pub kernel_qdisc: bool,
    /// Generator and forwarder on one CPU (the default where there is only one): a bed such as
    /// the kernel lab's one-CPU guest. CPU per packet then counts the generator's share too.
    pub one_cpu: bool,
    /// The `debloat` binary that runs the gateway and the generator (`testbed blast`).
    pub exe: std::path::PathBuf,
    /// The gateway's packet I/O back ends to measure (`gateway --io`), each with its
    /// do-nothing forwarder (`gateway --passthrough`): `packet`, `af_xdp`.
    pub io: Vec<String>,
    /// Also measure `gateway --workers N` (0 or 1: not), all N on the forwarding core: the cost
    /// of sharding itself (the fanout program, N loops, the rate split), and where the machine
    /// has N more CPUs than the generator's, N workers on N cores.
    pub workers: usize,
}

/// The unicast MAC address the generator sends to: locally administered, owned by no one.
const SINK_MAC: &str = "02:db:00:00:00:09";
/// Rounds of the idle-latency measurement (each forwarder once per round).
const LATENCY_ROUNDS: u32 = 5;
/// /proc/stat counts in USER_HZ, which Linux fixes at 100 for userspace.
const TICKS_PER_S: f64 = 100.0;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Forwarder {
    /// The kernel's bridge, its ports with their default (no) queue.
    Kernel,
    /// The kernel's bridge with the discipline under test on both ports.
    KernelQdisc,
    Gateway,
}

/// Where the generator and the forwarder run.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Cpus {
    gen: usize,
    fwd: usize,
}

impl Cpus {
    /// Apart: the generator on CPU 0, forwarding on CPU 1; together: both on CPU 0.
    fn of(one_cpu: bool) -> Cpus {
        Cpus {
            gen: 0,
            fwd: usize::from(!one_cpu),
        }
    }

    fn shared(self) -> bool {
        self.gen == self.fwd
    }
}

/// One forwarder's throughput at 64 and 1500 bytes.
struct Row {
    name: String,
    fwd: Forwarder,
    /// It spins (its core is always busy, so CPU per packet says nothing).
    spins: bool,
    /// The gateway's back end ("" for the kernel's rows).
    io: String,
    /// A do-nothing forwarder (`gateway --passthrough`).
    passthrough: bool,
    r: Vec<Throughput>,
}

/// The namespaces, removed when dropped (also on error or panic).
struct Rig {
    prefix: String,
    exe: std::path::PathBuf,
    qdisc: String,
    cpus: Cpus,
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
    /// The same busy time per packet offered, µs (what the generator alone costs, when
    /// nothing forwards and it shares the core).
    gen_us: f64,
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
    if cpus < 2 && !a.one_cpu {
        bail!("the gateway benchmark needs two CPUs (one generates, one forwards); this machine has {cpus} — add --one-cpu to run both on one (CPU per packet then includes the generator)");
    }
    a.qdisc
        .parse::<debloat_core::QdiscSpec>()
        .with_context(|| format!("--qdisc \"{}\"", a.qdisc))?;
    let mut a = a.clone();
    a.one_cpu |= cpus < 2;
    if a.one_cpu && !a.no_busy_poll {
        println!("One CPU: generator and forwarder share it, so no busy-polling gateway (it would starve the generator).");
        a.no_busy_poll = true;
    }
    let a = &a;
    let rig = build_rig(a)?;
    let (rows, generator_us) = throughput_rows(&rig, a)?;
    let same = same_rate::measure(&rig, a, &rows)?;
    let mut variants = latency_variants(a);
    measure_latency(&rig, a, &mut variants)?;
    let path_ns = if a.latency_only {
        0.0
    } else {
        path_cost(&a.qdisc)?
    };
    print_table(a, generator_us, &rows, &variants, path_ns);
    same_rate::print(&same, path_ns);
    let (syscall_ns, clock_ns) = bed_costs();
    println!(
        "\nThis bed charges a userspace process {syscall_ns:.0} ns a system call (getpid) and {clock_ns:.0} ns a clock read (a vDSO read where the kernel offers one): the gateway makes a few system calls a batch and reads the clock once a frame."
    );
    Ok(())
}

/// The namespaces, with both veths' receive processing steered to the forwarding core and this
/// process (and the generator and ping it starts) kept off it.
fn build_rig(a: &Config) -> Result<Rig> {
    let cpus = Cpus::of(a.one_cpu);
    // This process and its children (the generator, ping) stay off the forwarding core.
    debloat_gateway::sys::pin_to_cpu(cpus.gen)?;
    let rig = Rig {
        prefix: format!("dblb{}", std::process::id() % 100_000),
        exe: a.exe.clone(),
        qdisc: a.qdisc.clone(),
        cpus,
    };
    println!(
        "Building namespaces {}-client, -gw, -server (veth pairs, offloads off)…",
        rig.prefix
    );
    testbed::build_namespaces(&rig.prefix)?;
    let [_, g, _] = testbed::namespaces(&rig.prefix);
    if cpus.shared() {
        return Ok(rig);
    }
    // Steer lan0's and wan0's receive processing to the forwarding core.
    for dev in ["lan0", "wan0"] {
        let cpu = format!("{:x}", 1u64 << cpus.fwd);
        write_sysfs(&g, &format!("{dev}/queues/rx-0/rps_cpus"), &cpu)?;
    }
    Ok(rig)
}

/// Each forwarder's highest rate with at most `--loss` lost, at 64 and 1500 bytes.
fn throughput_rows(rig: &Rig, a: &Config) -> Result<(Vec<Row>, Option<[f64; 2]>)> {
    if a.latency_only {
        return Ok((Vec::new(), None));
    }
    let sizes = [(64usize, 60usize), (1500, 1514)];
    // On a shared core the generator's own cost is in every figure: measure it alone (nothing
    // forwards; lan0 drops what arrives) and take it out of each forwarder's CPU per packet.
    let generator_us = if rig.cpus.shared() {
        let mut us = [0.0; 2];
        for (i, &(label, frame)) in sizes.iter().enumerate() {
            let t = trial(rig, frame, 0, a.trial)?;
            println!(
                "generator alone, {label} B: {:.1} kpps offered, {:.2} µs CPU/packet (taken out of the forwarders' figures below)",
                t.offered_pps / 1e3,
                t.gen_us
            );
            us[i] = t.gen_us;
        }
        Some(us)
    } else {
        None
    };
    let busy = "--busy-poll".to_string();
    let mut rows = Vec::new();
    for (fwd, extra) in forwarders(a, rig.cpus) {
        let name = row_name(a, fwd, &extra);
        start(rig, fwd, &extra, true)?;
        let mut r = Vec::new();
        for &(label, frame) in &sizes {
            println!(
                "{name}, {label} B: searching for the highest rate with ≤ {} % loss",
                a.loss
            );
            let mut t = search(rig, frame, a)?;
            if let Some(g) = generator_us {
                t.at.cpu_us = (t.at.cpu_us - g[r.len()]).max(0.0);
            }
            r.push(t);
        }
        stop(rig, fwd)?;
        let spins = extra.contains(&busy);
        rows.push(Row {
            name,
            fwd,
            spins,
            io: io_of(&extra),
            passthrough: extra.iter().any(|x| x == "--passthrough"),
            r,
        });
    }
    Ok((rows, generator_us))
}

/// Start a forwarder (the gateway with `extra` arguments). `threaded`: on a bed with a
/// forwarding core of its own, an AF_XDP gateway's receive work (the veths' NAPI) runs in
/// threads pinned to that core, so the core's CPU per packet counts all of the forwarding
/// (the throughput rows); otherwise it runs where the kernel's default puts it, the sender's
/// softirq, as the bridge's forwarding does (the latency rows).
fn start(rig: &Rig, fwd: Forwarder, extra: &[String], threaded: bool) -> Result<()> {
    let [_, g, _] = testbed::namespaces(&rig.prefix);
    match fwd {
        Forwarder::Kernel | Forwarder::KernelQdisc => {
            sh(&["ip", "-n", &g, "link", "add", "br0", "type", "bridge"])?;
            for dev in ["lan0", "wan0"] {
                sh(&["ip", "-n", &g, "link", "set", dev, "master", "br0"])?;
            }
            sh(&["ip", "-n", &g, "link", "set", "br0", "up"])?;
            // A known destination, so the bridge forwards rather than floods.
            sh(&[
                "bridge", "-n", &g, "fdb", "add", SINK_MAC, "dev", "wan0", "master", "static",
            ])?;
            if fwd == Forwarder::KernelQdisc {
                // The same words as the gateway's spec: debloat's specs are tc's.
                for dev in ["lan0", "wan0"] {
                    let mut tc = vec!["tc", "-n", &g, "qdisc", "replace", "dev", dev, "root"];
                    tc.extend(rig.qdisc.split_whitespace());
                    sh(&tc).with_context(|| {
                        format!("the kernel has no \"{}\" here (tc refused it)", rig.qdisc)
                    })?;
                }
            }
        }
        Forwarder::Gateway => {
            let cpu = rig.cpus.fwd.to_string();
            let mut gateway_args = ["--egress", &rig.qdisc, "--ingress", &rig.qdisc]
                .map(String::from)
                .to_vec();
            // Workers are pinned by their own --cores.
            if !extra.iter().any(|x| x == "--cores") {
                gateway_args.extend(["--cpu".to_string(), cpu]);
            }
            gateway_args.extend_from_slice(extra);
            testbed::start_gateway(&Setup {
                prefix: rig.prefix.clone(),
                exe: rig.exe.clone(),
                gateway_args,
            })?;
            if !rig.cpus.shared() {
                // Native XDP runs in the veth's NAPI; generic XDP, like TPACKET, in the
                // sender's softirq (a veth without native XDP has no NAPI to thread).
                threaded_napi(rig, threaded && io_of(extra) == "af_xdp")?;
            }
        }
    }
    // Let the forwarder settle (bridge ports come up, ARP for the pings).
    std::thread::sleep(Duration::from_millis(300));
    Ok(())
}

fn stop(rig: &Rig, fwd: Forwarder) -> Result<()> {
    let [_, g, _] = testbed::namespaces(&rig.prefix);
    match fwd {
        Forwarder::Kernel | Forwarder::KernelQdisc => {
            sh(&["ip", "-n", &g, "link", "del", "br0"])?;
            if fwd == Forwarder::KernelQdisc {
                let shown = sh(&["tc", "-n", &g, "-s", "-j", "qdisc", "show", "dev", "wan0"])?;
                let v: serde_json::Value = serde_json::from_str(&shown)?;
                println!(
                    "  (the kernel's {} on wan0 sent {} packets in all)",
                    v[0]["kind"].as_str().unwrap_or("?"),
                    v[0]["packets"].as_u64().unwrap_or(0)
                );
                for dev in ["lan0", "wan0"] {
                    sh(&["tc", "-n", &g, "qdisc", "del", "dev", dev, "root"])?;
                }
            }
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
fn idle_s(cpu: usize) -> Result<f64> {
    let stat = std::fs::read_to_string("/proc/stat")?;
    let name = format!("cpu{cpu}");
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

/// The server's received-packet counter once it has not moved for 100 ms (at most 5 s on).
fn settled(ns: &str) -> Result<u64> {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut last = counter(ns, "rx")?;
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let now = counter(ns, "rx")?;
        if now == last || Instant::now() > deadline {
            return Ok(now);
        }
        last = now;
    }
}

/// Offer `pps` (0: as fast as the generator goes) for one trial.
fn trial(rig: &Rig, frame: usize, pps: u64, secs: f64) -> Result<Trial> {
    let [c, _, v] = testbed::namespaces(&rig.prefix);
    let exe = rig.exe.to_string_lossy().into_owned();
    // A forwarder slower than the offered load holds a backlog in its receive ring that it
    // forwards after the generator stops: let the last trial's drain before counting this one.
    let rx0 = settled(&v)?;
    let (idle0, t0) = (idle_s(rig.cpus.fwd)?, Instant::now());
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
            &rig.cpus.gen.to_string(),
        ],
    )
    .stderr(Stdio::inherit())
    .output()?;
    if !out.status.success() {
        bail!("the load generator failed");
    }
    // What is still in the forwarder's queues arrives within a few milliseconds (seconds for
    // a forwarder far behind, as in a one-CPU guest).
    let rx1 = settled(&v)?;
    let idle1 = idle_s(rig.cpus.fwd)?;
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
        gen_us: busy_s * 1e6 / offered.max(1.0),
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

/// The p-th percentile (0..=100), nearest rank, as every number debloat prints.
fn pct(sorted: &[f64], p: f64) -> f64 {
    debloat_report::percentile::percentile(sorted, p).unwrap_or(f64::NAN)
}

/// What the gateway's own per-packet work costs, in this process: parse, classify, the
/// discipline's enqueue and dequeue (nanoseconds per 64-byte frame over 64 flows).
fn path_cost(qdisc: &str) -> Result<f64> {
    let spec: debloat_core::QdiscSpec = qdisc.parse()?;
    Ok(debloat_gateway::tools::path_cost::PathCost::new(&spec, 60)?.run(2_000_000))
}

/// What the bed charges a userspace forwarder: one system call (`getpid`) and one read of the
/// monotonic clock, in nanoseconds, each the mean over 100,000 in a row.
fn bed_costs() -> (f64, f64) {
    let n = 100_000u32;
    let t = Instant::now();
    let mut acc = 0u64;
    for _ in 0..n {
        acc = acc.wrapping_add(u64::from(std::process::id()));
    }
    let syscall = t.elapsed().as_nanos() as f64 / f64::from(n);
    let t = Instant::now();
    for _ in 0..n {
        acc = acc.wrapping_add(Instant::now().duration_since(t).as_nanos() as u64);
    }
    let clock = t.elapsed().as_nanos() as f64 / f64::from(n);
    std::hint::black_box(acc);
    (syscall, clock)
}
