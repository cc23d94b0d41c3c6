//! Idle latency through each forwarder: `ping`'s round trips, the forwarders taking turns in
//! rounds so that the machine's drift falls on all of them alike; and the spinner that keeps the
//! forwarding core awake for the comparison with a busy-polling gateway.

use super::*;

/// The forwarders whose idle latency is measured, with what each is compared against.
pub(super) fn latency_variants(a: &Config) -> Vec<Latency> {
    // Idle latency: the forwarders take turns in rounds, so a drift in the machine's state
    // (seen here as ±50 µs between minutes) falls on all of them alike. A busy-polling gateway
    // keeps the forwarding core out of its idle states, which by itself shortens the path
    // (a VM's idle CPU wakes slowly); it is compared with the bridge on a core kept awake the
    // same way (a SCHED_IDLE spinner that yields to everything), not with the sleeping bridge.
    let busy = ["--busy-poll"];
    let mut variants = vec![Latency::new("kernel bridge", Forwarder::Kernel, &[], None)];
    if a.kernel_qdisc {
        variants.push(Latency::new(
            &format!("kernel bridge + {}", a.qdisc),
            Forwarder::KernelQdisc,
            &[],
            Some(0),
        ));
    }
    for io in &a.io {
        variants.push(Latency::new(
            &format!("debloat gateway, {io}"),
            Forwarder::Gateway,
            &["--io", io],
            Some(0),
        ));
    }
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
        for io in &a.io {
            variants.push(Latency::new(
                &format!("debloat gateway --busy-poll, {io}"),
                Forwarder::Gateway,
                &[busy[0], "--io", io],
                Some(awake_bridge),
            ));
        }
    }
    if a.realtime > 0 {
        let prio = a.realtime.to_string();
        for io in &a.io {
            variants.push(Latency::new(
                &format!("debloat gateway --realtime {prio}, {io}"),
                Forwarder::Gateway,
                &["--realtime", &prio, "--io", io],
                Some(0),
            ));
        }
    }
    variants
}

/// Pings through each variant, taking turns in rounds; the RTTs sorted.
pub(super) fn measure_latency(rig: &Rig, a: &Config, variants: &mut [Latency]) -> Result<()> {
    let per_round = a.pings.div_ceil(LATENCY_ROUNDS);
    println!(
        "Idle latency: {} pings 5 ms apart through each forwarder, in {LATENCY_ROUNDS} rounds \
         (each after {WARM_UP_PINGS} unmeasured ones through the forwarder just started)",
        per_round * LATENCY_ROUNDS
    );
    for _ in 0..LATENCY_ROUNDS {
        for v in variants.iter_mut() {
            start(rig, v.fwd, &v.extra, false)?;
            let awake = v.keep_awake.then(|| KeepAwake::start(rig.cpus.fwd));
            // The first frames through a forwarder just started pay for its start (the
            // bridge learning where the hosts are, the gateway's first touches of its queues,
            // the kernel's RCU work after an XDP program is attached): not idle latency.
            let got = ping(rig, WARM_UP_PINGS).and_then(|_| ping(rig, per_round));
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

/// Pings sent through a forwarder after its start and before its round trips are measured.
/// Measured on 2026-11-29 (Intel Xeon VM): without them the first round trip of a round was the
/// longest of its 60 in 16 rounds of 20 and the second longest in the other four, for
/// every forwarder (the bridge's 89–134 µs against
/// its p99 of 112; the busy-polling gateway's 120–293 µs against 67 µs at most for the rest),
/// so five rounds' first pings made the p99 of 300.
const WARM_UP_PINGS: u32 = 5;

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
        let said = String::from_utf8_lossy(&out.stdout);
        let tail: Vec<&str> = said.lines().rev().take(3).collect();
        bail!(
            "only {} of {n} pings were answered through the forwarder; ping said: {} {}",
            rtts.len(),
            tail.into_iter().rev().collect::<Vec<_>>().join(" / "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(rtts)
}

/// One forwarder's idle-latency measurement.
pub(super) struct Latency {
    pub(super) name: String,
    pub(super) fwd: Forwarder,
    /// The gateway's extra arguments.
    pub(super) extra: Vec<String>,
    /// Keep the forwarding core out of its idle states while pinging.
    pub(super) keep_awake: bool,
    /// Which variant this one is compared with.
    pub(super) baseline: Option<usize>,
    /// Round trips, µs.
    pub(super) rtts: Vec<f64>,
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
    fn start(cpu: usize) -> KeepAwake {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let flag = std::sync::Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            if let Err(e) = debloat_gateway::sys::pin_to_cpu(cpu)
                .and_then(|()| debloat_gateway::sys::idle_priority())
            {
                eprintln!("warning: cannot keep CPU {cpu} awake ({e}): the \"core kept awake\" bridge row is a sleeping bridge");
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
