//! Side by side: the same traffic through the real kernel's discipline and through `debloat
//! gateway` with the same spec, one after the other on the same namespaces, in one guest.
//!
//! Runs *inside* the kernel lab (as root in the guest; `debloat lab compare` boots it and calls
//! `debloat lab side` there). The topology is the testbed's (`debloat_gateway::testbed`): a
//! client namespace (one address per host, 198.18.1.2, .3 …), a gateway namespace with `lan0`
//! and `wan0`, a server namespace at 198.18.2.2. Then, in turn:
//!
//! * **kernel**: a Linux bridge joins `lan0` and `wan0`; the up spec sits on `wan0`'s egress and
//!   the down spec on `lan0`'s. A spec with its own shaper (cake with a bandwidth, tbf, an htb
//!   tree, built with tc's commands) is the root; any other sits under HTB at the link's rate,
//!   as sqm-scripts' `simple.qos` puts it.
//! * **debloat**: the bridge is gone; `debloat gateway --egress UP --ingress DOWN` forwards,
//!   with `--emulate-egress "rate R"` (and ingress) where the spec does not shape.
//!
//! Both runs see the same base delay (netem on the client's `eth0`, outside what is compared;
//! on the server's when the hosts have a qdisc of their own, [`hosts`]),
//! the same bulk TCP uploads per host (`testbed tcp-send`, one sink per host counting the last
//! part after `omit`, as iperf3's `--omit`), and the same three ping flows, one from each of
//! three addresses of their own, every 50 ms each (see [`Measured::ping_pct`]). The
//! discipline's counters come from `tc -s -j qdisc show` and from `gateway stats --json`, read
//! into one shape ([`counts`]) as the load ends, and once a second through the measured part
//! for CAKE's sojourn average; [`compare`] holds the tolerances. The host watches its own CPUs
//! meanwhile, and pings in flight while it stalled the guest are left out of both sides
//! ([`stalled`]).

pub mod compare;
pub mod counts;
mod hosts;
mod kernel;
pub mod stalled;
mod traffic;

use counts::Counts;
use debloat_gateway::testbed::{self, sh, Setup, TestbedError};
use debloat_gateway::tools::host_stalls::{self, HostStalls};
use kernel::{kernel_counts, kernel_down, kernel_up, REALTIME_ON_CPU0};
use serde::{Deserialize, Serialize};

/// One comparison's setup.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Plan {
    /// The discipline on the up direction (client → server), tc's words.
    pub up: String,
    /// The discipline on the down direction (the ACKs' way).
    pub down: String,
    /// The link's rate up, bit/s (ignored by a spec with its own shaper).
    pub up_bps: u64,
    /// The link's rate down, bit/s.
    pub down_bps: u64,
    /// Base delay added by netem on the client's egress (both runs), e.g. `10ms` (on the
    /// server's egress with a `host_qdisc`).
    pub delay: String,
    /// Bulk uploads per client host (host i sends from 198.18.1.(2 + i)).
    pub hosts: Vec<u32>,
    /// TCP congestion control of the uploads: one name for every host, or one per host,
    /// comma-separated (`bbr,cubic`).
    pub cc: String,
    /// Second of the load at which each host's uploads start (missing: 0), as flent's
    /// `tcp_4up_squarewave` staggers its flows. Every upload ends with the load, and each
    /// host's goodput counts from `omit` (absolute), so all figures cover the same window.
    #[serde(default)]
    pub starts: Vec<u32>,
    /// Seconds of load.
    pub seconds: u32,
    /// Seconds at the start of the load left out of goodput and ping.
    pub omit: u32,
    /// TOS byte of each host's uploads (missing: 0).
    #[serde(default)]
    pub tos: Vec<u8>,
    /// Whether the client's TCP asks for ECN (`net.ipv4.tcp_ecn=1`).
    #[serde(default)]
    pub ecn: bool,
    /// netem's words for the up direction's link instead of a discipline and a rate: the
    /// kernel's `netem` as `wan0`'s root against the gateway's `--emulate-egress` of the same
    /// words with `buffer 1000` (netem's own queue at its default limit) as the link's queue.
    #[serde(default)]
    pub netem: Option<String>,
    /// Give the kernel's run the extra delay that makes its idle round trip the gateway's.
    pub match_rtt: bool,
    /// A rate for the netem on the client's egress (both runs): a bottleneck *in front of*
    /// the discipline, as a router's ingress sits behind a modem (what cake's
    /// `autorate-ingress` estimates). None: the client's egress only delays.
    #[serde(default)]
    pub upstream_rate: Option<String>,
    /// Host i uploads to a server address of its own, 198.18.2.(2 + i), as uploads to
    /// different Internet hosts do (cake's `dsthost` and `triple-isolate` then see one
    /// destination per host); false: every host to 198.18.2.2.
    #[serde(default)]
    pub server_per_host: bool,
    /// Bulk downloads from the server (198.18.2.2) to host 1, one per entry, each with this
    /// TOS byte (flent's rrul marks its four both ways). They cross the down spec; their ACKs
    /// queue in the up one.
    #[serde(default)]
    pub downloads: Vec<u8>,
    /// The client's largest TCP receive buffer, bytes (`net.ipv4.tcp_rmem`'s max in its
    /// namespace), which caps the downloads' windows at half of it (6.1's
    /// `tcp_adv_win_scale` 1). None: the kernel's default (6 MiB).
    #[serde(default)]
    pub client_rmem_max: Option<u32>,
    /// The gateway's emulated link rates, up and down, bit/s, where they should differ from
    /// `up_bps`/`down_bps` (the kernel's run keeps those): to run debloat's link at what the
    /// kernel's shaper was measured to deliver rather than at what it was told. None: the same.
    #[serde(default)]
    pub gateway_bps: Option<(u64, u64)>,
    /// The gateway's disciplines up and down, tc's words, where they should differ from
    /// `up`/`down` (the kernel's run keeps those): e.g. PIE with the update interval the lab's
    /// kernel was measured to run, to tell its timer from the control law. None: the same.
    #[serde(default)]
    pub gateway_specs: Option<(String, String)>,
    /// The kernel's run forwards through `debloat gateway` as a pass-through (`pfifo`, no
    /// emulated link) instead of a bridge, with the kernel's disciplines on the gateway's
    /// veths: the kernel's qdiscs with the userspace forwarder's timing, to tell what the
    /// forwarder does to the traffic from what debloat's disciplines and link do.
    #[serde(default)]
    pub kernel_via_gateway: bool,
    /// Run the kernel's side first (the gateway's is first by default, for its idle round
    /// trip): to see whether the order of the two runs in one guest moves a figure. Needs
    /// `match_rtt` off.
    #[serde(default)]
    pub kernel_first: bool,
    /// A qdisc on the client hosts' own egress, tc's words (e.g. `fq`: sch_fq paces each
    /// socket, as on the Linux hosts of 2016's BBR runs). The base delay then moves to the
    /// server's egress, and the kernel's run frees segments at the gateway (see `hosts`).
    #[serde(default)]
    pub host_qdisc: Option<String>,
}

/// What one run measured.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Measured {
    /// Round trips after `omit`, ms, sorted, one list per ping flow (each from its own
    /// address, [`traffic::PING_FLOWS`] of them).
    pub ping_flows_ms: Vec<Vec<f64>>,
    /// The same round trips in the order they came, each `[reply time, ms]` (the reply time in
    /// seconds since the epoch): to leave out those the host stalled ([`SideBySide::host`]).
    #[serde(default)]
    pub ping_flows_at: Vec<Vec<[f64; 2]>>,
    /// Idle round trip before the load (median of 10 pings), ms.
    pub idle_ms: f64,
    /// Goodput per host, bit/s (counted after `omit`).
    pub host_bps: Vec<f64>,
    /// Goodput per connection, bit/s, host by host.
    pub flow_bps: Vec<f64>,
    /// Goodput of each download, bit/s (counted after `omit`).
    #[serde(default)]
    pub download_bps: Vec<f64>,
    /// The up direction's discipline counters.
    pub up: Counts,
    /// The down direction's (the ACKs').
    pub down: Counts,
}

impl Plan {
    /// Host `i`'s congestion control.
    pub fn cc_of(&self, i: usize) -> &str {
        let all: Vec<&str> = self.cc.split(',').map(str::trim).collect();
        all.get(i).or(all.last()).copied().unwrap_or("cubic")
    }
    /// Second of the load at which host `i` starts (before the load ends).
    pub fn start_of(&self, i: usize) -> u32 {
        let s = self.starts.get(i).copied().unwrap_or(0);
        s.min(self.seconds.saturating_sub(1))
    }
}

impl Measured {
    /// The `p`th percentile of the pings' round trips, ms: each flow's, then the median of
    /// those. A flow queue hashes flows into buckets (fq_codel: 1024), so one ping flow in a
    /// few hundred shares a bulk flow's queue for the whole run; with three flows that one is
    /// outvoted rather than deciding the figure.
    pub fn ping_pct(&self, p: f64) -> f64 {
        let mut per_flow: Vec<f64> = self
            .ping_flows_ms
            .iter()
            .filter_map(|f| debloat_report::percentile::percentile(f, p))
            .collect();
        per_flow.sort_by(f64::total_cmp);
        match per_flow.len() {
            0 => f64::NAN,
            n if n % 2 == 1 => per_flow[n / 2],
            n => (per_flow[n / 2 - 1] + per_flow[n / 2]) / 2.0,
        }
    }
}

/// Both runs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SideBySide {
    /// What ran.
    pub plan: Plan,
    /// The kernel's discipline.
    pub kernel: Measured,
    /// debloat's gateway.
    pub debloat: Measured,
    /// Delay added to the kernel's run to match the gateway's idle round trip, ms.
    pub kernel_added_delay_ms: f64,
    /// `uname -r` of the guest.
    pub kernel_release: String,
    /// What the machine's host took away while the guest ran both sides ([`in_lab`]; None
    /// from [`run`] inside the guest, which cannot see it).
    #[serde(default)]
    pub host: Option<HostStalls>,
    /// The pings left out of each side's percentiles, kernel's then debloat's, since the host
    /// stalled while they flew ([`stalled`]; None inside the guest).
    #[serde(default)]
    pub left_out: Option<[stalled::LeftOut; 2]>,
    /// What a watch inside the guest saw while both sides ran: stalls the host's watch may not
    /// see. Unset for now: a SCHED_FIFO watcher in the guest preempts the gateway and not the
    /// kernel's forwarding, so it measured against debloat (docs/kernel-lab.md).
    #[serde(default)]
    pub guest: Option<HostStalls>,
}

impl SideBySide {
    /// The stalls that void a tail: the host's and the guest's together (None without the
    /// host's, inside the guest).
    pub fn stalls(&self) -> Option<HostStalls> {
        let host = self.host.as_ref()?;
        Some(match &self.guest {
            Some(g) => host.with_stalls_of(g),
            None => host.clone(),
        })
    }
}

/// Whether a spec shapes by itself (cake with a bandwidth, tbf), so needs no HTB or link rate.
pub fn shapes(spec: &str) -> Result<bool, String> {
    let q: debloat_core::QdiscSpec = spec.parse().map_err(|e| format!("\"{spec}\": {e}"))?;
    Ok(match q {
        debloat_core::QdiscSpec::Cake(c) => c.bandwidth_bytes_per_s.is_some(),
        debloat_core::QdiscSpec::Tbf(_) | debloat_core::QdiscSpec::Htb(_) => true,
        _ => false,
    })
}

/// Run both sides, the gateway first unless the plan says `kernel_first`. `exe` is the
/// debloat binary; `prefix` names the namespaces.
pub fn run(plan: &Plan, exe: &std::path::Path, prefix: &str) -> Result<SideBySide, TestbedError> {
    for s in [&plan.up, &plan.down] {
        shapes(s).map_err(TestbedError)?;
    }
    if plan.kernel_first && plan.match_rtt {
        return Err(TestbedError(
            "matching the round trip needs the gateway's run first: kernel_first needs match_rtt off"
                .into(),
        ));
    }
    testbed::build_namespaces(prefix)?;
    let _down = Teardown(prefix.to_string());
    hosts::prepare(plan, prefix)?;
    // The gateway first, for its idle round trip: under User-Mode Linux a userspace forwarder
    // adds a millisecond or two each way, and TCP's dynamics (and so the drop rate) follow the
    // round trip. With `match_rtt` the kernel's run gets that much more netem delay.
    let (kernel, debloat, added_ms) = if plan.kernel_first {
        let (kernel, added_ms) = kernel_run(plan, exe, prefix, 0.0)?;
        (kernel?, debloat_run(plan, exe, prefix)?, added_ms)
    } else {
        let debloat = debloat_run(plan, exe, prefix)?;
        let (kernel, added_ms) = kernel_run(plan, exe, prefix, debloat.idle_ms)?;
        (kernel?, debloat, added_ms)
    };
    let kernel_release = sh(&["uname", "-r"]).unwrap_or_default().trim().to_string();
    Ok(SideBySide {
        plan: plan.clone(),
        kernel,
        debloat,
        kernel_added_delay_ms: added_ms,
        kernel_release,
        host: None,
        left_out: None,
        // Not watched inside the guest: a SCHED_FIFO 99 thread waking every millisecond there
        // preempts the gateway (a user process) but not the kernel's forwarding (softirq), and
        // in CI it raised debloat's htb p99 to +7 ms against the kernel's +0.3 (2026-11-29).
        guest: None,
    })
}

/// debloat's gateway with the plan's specs, measured.
fn debloat_run(plan: &Plan, exe: &std::path::Path, prefix: &str) -> Result<Measured, TestbedError> {
    testbed::start_gateway(&Setup {
        prefix: prefix.to_string(),
        exe: exe.to_path_buf(),
        gateway_args: gateway_args(plan)?,
    })?;
    let debloat = traffic::measure(plan, exe, prefix, || gateway_counts(prefix));
    testbed::stop_gateway(prefix);
    debloat
}

/// The kernel's disciplines set up, measured and taken down again; the measurement and the
/// delay added to match `gateway_idle_ms`. Err only when setting up or taking down failed.
fn kernel_run(
    plan: &Plan,
    exe: &std::path::Path,
    prefix: &str,
    gateway_idle_ms: f64,
) -> Result<(Result<Measured, TestbedError>, f64), TestbedError> {
    kernel_up(plan, prefix, exe)?;
    let measured = match_and_measure(plan, exe, prefix, gateway_idle_ms);
    kernel_down(plan, prefix)?;
    Ok(measured)
}

/// With the kernel forwarding: add the delay that makes its idle round trip the gateway's
/// (`match_rtt`), then measure. Returns the run and the delay added, ms.
fn match_and_measure(
    plan: &Plan,
    exe: &std::path::Path,
    prefix: &str,
    gateway_idle_ms: f64,
) -> (Result<Measured, TestbedError>, f64) {
    let mut added_ms = 0.0;
    let res = (|| {
        let kernel_idle_ms = traffic::idle_ms(prefix)?;
        let base_ns = debloat_core::units::parse_time(&plan.delay)
            .map_err(|e| TestbedError(e.to_string()))?;
        if plan.match_rtt {
            added_ms = (gateway_idle_ms - kernel_idle_ms).max(0.0);
        }
        let delay_us = format!("{}us", (base_ns as f64 / 1e3 + added_ms * 1e3).round());
        hosts::base_delay(plan, prefix, "change", &delay_us)?;
        traffic::measure(plan, exe, prefix, || kernel_counts(plan, prefix))
    })();
    (res, added_ms)
}

/// Removes the namespaces when dropped, whatever happened.
struct Teardown(String);

impl Drop for Teardown {
    fn drop(&mut self) {
        let _ = testbed::down(&self.0);
    }
}

pub(super) fn words(s: &str) -> Vec<&str> {
    s.split_whitespace().collect()
}

/// Each direction's discipline (and emulated wire), as `gateway stats --json` counts it,
/// asked on the control socket from this process: a `debloat gateway stats` process spawned
/// once a second through the load stalled the forwarder (the guest's one CPU, a kernel that
/// does not preempt: the ping p99 rose from +1.8 ms to +9.9 ms, docs/kernel-lab.md).
fn gateway_counts(prefix: &str) -> Result<(Counts, Counts), TestbedError> {
    let sock = testbed::control_socket(prefix);
    let json = debloat_gateway::control::ask(&sock, "json")
        .map_err(|e| TestbedError(format!("the gateway's statistics: {e}")))?;
    let read = |dir| Counts::from_gateway_json(&json, dir).map_err(TestbedError);
    Ok((read("egress")?, read("ingress")?))
}

/// The gateway's arguments: the same specs, and a link at the rate where the spec does not shape.
fn gateway_args(plan: &Plan) -> Result<Vec<String>, TestbedError> {
    let (up, down) = plan
        .gateway_specs
        .clone()
        .unwrap_or_else(|| (plan.up.clone(), plan.down.clone()));
    let mut a: Vec<String> = vec!["--egress".into(), up, "--ingress".into(), down];
    a.extend(REALTIME_ON_CPU0.map(String::from));
    let (up_bps, down_bps) = plan.gateway_bps.unwrap_or((plan.up_bps, plan.down_bps));
    for (flag, spec, bps) in [
        ("--emulate-egress", &plan.up, up_bps),
        ("--emulate-ingress", &plan.down, down_bps),
    ] {
        if let (Some(w), "--emulate-egress") = (&plan.netem, flag) {
            // netem's own queue is the link's buffer (its default limit, 1000): the loss model
            // meets a packet as it enters that queue, as at netem's enqueue. The discipline
            // in front hands every packet on at once.
            a[1] = "pfifo".into();
            let buffered = words(w).contains(&"buffer");
            a.extend([
                flag.to_string(),
                if buffered {
                    w.clone()
                } else {
                    format!("{w} buffer 1000")
                },
            ]);
        } else if !shapes(spec).map_err(TestbedError)? {
            a.extend([flag.to_string(), format!("rate {bps}bit")]);
        }
    }
    Ok(a)
}

/// Boot `lab` and run [`run`] inside it (`exe lab side PLAN`), bringing the result back with
/// what the host took away meanwhile ([`SideBySide::host`]).
pub fn in_lab(lab: &crate::Lab, plan: &Plan, exe: &std::path::Path) -> Result<SideBySide, String> {
    let plan_json = serde_json::to_string(plan).map_err(|e| e.to_string())?;
    let script = format!(
        "cat > plan.json <<'PLAN'\n{plan_json}\nPLAN\n\"$DEBLOAT\" lab side plan.json > side.json\n"
    );
    let keep = tempfile::tempdir().map_err(|e| e.to_string())?;
    let watch = host_stalls::Watch::start();
    let o = lab
        .run_with_binary(&script, Some(keep.path()), exe)
        .map_err(|e| e.to_string())?;
    let host = watch.stop();
    if o.status != 0 {
        return Err(format!(
            "the side-by-side run failed in the guest (exit {}):\n{}{}",
            o.status, o.stdout, o.stderr
        ));
    }
    let text = std::fs::read_to_string(keep.path().join("side.json")).map_err(|e| e.to_string())?;
    let mut s: SideBySide = serde_json::from_str(&text).map_err(|e| format!("side.json: {e}"))?;
    s.host = Some(host);
    stalled::apply(&mut s);
    Ok(s)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn plan(extra: &str) -> Plan {
        let json = format!(
            r#"{{"up":"pfifo limit 1000","down":"pfifo limit 1000","up_bps":20000000,
            "down_bps":20000000,"delay":"48ms","hosts":[1,1],"cc":"bbr,cubic","seconds":60,
            "omit":15,"match_rtt":false{extra}}}"#
        );
        serde_json::from_str(&json).unwrap()
    }

    fn emulated(a: &[String], flag: &str) -> String {
        let i = a.iter().position(|w| w == flag).unwrap();
        a[i + 1].clone()
    }

    #[test]
    fn the_gateway_link_runs_at_the_plans_rate_unless_told_another() {
        let a = gateway_args(&plan("")).unwrap();
        assert_eq!(emulated(&a, "--emulate-egress"), "rate 20000000bit");
        assert_eq!(emulated(&a, "--emulate-ingress"), "rate 20000000bit");
        let p = plan(r#","gateway_bps":[19600000,19800000]"#);
        let a = gateway_args(&p).unwrap();
        assert_eq!(emulated(&a, "--emulate-egress"), "rate 19600000bit");
        assert_eq!(emulated(&a, "--emulate-ingress"), "rate 19800000bit");
        // The kernel's run keeps the plan's own rates.
        assert_eq!((p.up_bps, p.down_bps), (20_000_000, 20_000_000));
    }

    #[test]
    fn the_gateway_runs_its_own_specs_when_told_and_the_kernel_keeps_the_plans() {
        let a = gateway_args(&plan("")).unwrap();
        assert_eq!(emulated(&a, "--egress"), "pfifo limit 1000");
        let p = plan(r#","gateway_specs":["pie tupdate 30ms ecn","pfifo limit 50"]"#);
        let a = gateway_args(&p).unwrap();
        assert_eq!(emulated(&a, "--egress"), "pie tupdate 30ms ecn");
        assert_eq!(emulated(&a, "--ingress"), "pfifo limit 50");
        assert_eq!(
            p.up, "pfifo limit 1000",
            "the kernel's run keeps the plan's spec"
        );
    }

    #[test]
    fn the_pass_through_gateway_has_no_link_and_the_same_standing() {
        let a = kernel::pass_through_args();
        assert!(!a.iter().any(|w| w.starts_with("--emulate")), "{a:?}");
        assert_eq!(emulated(&a, "--egress"), "pfifo");
        assert_eq!(emulated(&a, "--ingress"), "pfifo");
        let b = gateway_args(&plan("")).unwrap();
        assert_eq!(emulated(&a, "--realtime"), emulated(&b, "--realtime"));
        assert_eq!(emulated(&a, "--cpu"), emulated(&b, "--cpu"));
        assert!(!plan("").kernel_via_gateway);
    }

    #[test]
    fn the_kernel_cannot_go_first_when_its_round_trip_is_matched_to_the_gateways() {
        let mut p = plan(r#","kernel_first":true"#);
        p.match_rtt = true;
        let e = run(&p, std::path::Path::new("/nonexistent"), "t").unwrap_err();
        assert!(e.0.contains("match_rtt"), "{}", e.0);
    }

    #[test]
    fn netem_words_get_netems_queue_as_the_links_buffer() {
        let a = gateway_args(&plan(r#","netem":"rate 10Mbit loss 1%""#)).unwrap();
        assert_eq!(emulated(&a, "--egress"), "pfifo");
        assert_eq!(
            emulated(&a, "--emulate-egress"),
            "rate 10Mbit loss 1% buffer 1000"
        );
        let a = gateway_args(&plan(r#","netem":"rate 10Mbit buffer 50""#)).unwrap();
        assert_eq!(emulated(&a, "--emulate-egress"), "rate 10Mbit buffer 50");
    }
}
