//! The kernel's side of a comparison: the Linux bridge (or a pass-through gateway) between
//! `lan0` and `wan0`, each direction's discipline put on with tc's own commands, and the
//! kernel's counters read back with `tc -s -j qdisc show`.

use super::*;
use std::time::Duration;

/// The bridge (or, with `kernel_via_gateway`, a pass-through gateway), and each direction's
/// discipline on its egress port. A failure part-way leaves the rest to [`Teardown`], which
/// stops any gateway with the namespaces.
pub(super) fn kernel_up(
    plan: &Plan,
    prefix: &str,
    exe: &std::path::Path,
) -> Result<(), TestbedError> {
    let [_, g, _] = testbed::namespaces(prefix);
    if plan.kernel_via_gateway {
        // debloat's forwarder hands every frame on at once (no emulated link) into the veth,
        // whose qdisc is the kernel's: AF_PACKET's sends go through it (no QDISC_BYPASS).
        testbed::start_gateway(&Setup {
            prefix: prefix.to_string(),
            exe: exe.to_path_buf(),
            gateway_args: pass_through_args(),
        })?;
    } else {
        sh(&["ip", "-n", &g, "link", "add", "br0", "type", "bridge"])?;
        for dev in ["lan0", "wan0"] {
            sh(&["ip", "-n", &g, "link", "set", dev, "master", "br0"])?;
        }
        sh(&["ip", "-n", &g, "link", "set", "br0", "up"])?;
    }
    for (dev, spec, bps) in [
        ("wan0", &plan.up, plan.up_bps),
        ("lan0", &plan.down, plan.down_bps),
    ] {
        let tc = |more: &[&str]| {
            let mut a = vec!["tc", "-n", g.as_str()];
            a.extend_from_slice(more);
            sh(&a)
        };
        // `root`, or under the netem that frees segments from their sockets (`hosts`).
        let release = dev == "wan0" && hosts::release_at_gateway(plan);
        if release {
            hosts::add_release(&g, dev)?;
        }
        let root: &[&str] = if release {
            &["parent", hosts::RELEASE_PARENT]
        } else {
            &["root"]
        };
        let at = |head: &[&'static str], rest: &[&'static str]| -> Vec<&'static str> {
            let mut a = head.to_vec();
            a.extend_from_slice(root);
            a.extend_from_slice(rest);
            a
        };
        if let (Some(words_), "wan0") = (&plan.netem, dev) {
            let mut a = vec!["qdisc", "add", "dev", dev, "root", "handle", "10:", "netem"];
            a.extend(words(words_));
            tc(&a)?;
        } else if let Ok(debloat_core::QdiscSpec::Htb(h)) = spec.parse() {
            // tc's own commands for the tree: the qdisc, its classes, leaves, filters.
            for cmd in debloat_core::qdisc::htb::show::tc_commands(&h, dev) {
                let a: Vec<&str> = words(&cmd)
                    .into_iter()
                    .flat_map(|w| if w == "root" { root.to_vec() } else { vec![w] })
                    .collect();
                tc(&a)?;
            }
        } else if shapes(spec).map_err(TestbedError)? {
            let mut a = at(&["qdisc", "add", "dev", dev], &["handle", "10:"]);
            a.extend(words(spec));
            tc(&a)?;
        } else {
            let rate = format!("{bps}bit");
            tc(&at(
                &["qdisc", "add", "dev", dev],
                &["handle", "1:", "htb", "default", "1"],
            ))?;
            tc(&[
                "class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", &rate,
            ])?;
            let mut a = vec!["qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:"];
            a.extend(words(spec));
            tc(&a)?;
        }
    }
    // Let the bridge's ports forward (no STP: at once) and the neighbours be learnt.
    std::thread::sleep(Duration::from_millis(300));
    Ok(())
}

pub(super) fn kernel_down(plan: &Plan, prefix: &str) -> Result<(), TestbedError> {
    let [_, g, _] = testbed::namespaces(prefix);
    for dev in ["lan0", "wan0"] {
        let _ = sh(&["tc", "-n", &g, "qdisc", "del", "dev", dev, "root"]);
    }
    if plan.kernel_via_gateway {
        testbed::stop_gateway(prefix);
        return Ok(());
    }
    sh(&["ip", "-n", &g, "link", "del", "br0"]).map(|_| ())
}

/// The gateway as a plain forwarder: a FIFO that is never more than a send batch deep, no
/// link of its own, the same CPU and priority as when it is the one under test.
pub(super) fn pass_through_args() -> Vec<String> {
    ["--egress", "pfifo", "--ingress", "pfifo"]
        .into_iter()
        .chain(REALTIME_ON_CPU0)
        .map(String::from)
        .collect()
}

/// The guest has one CPU, shared by the hosts' TCP and the forwarder. The kernel's bridge
/// and qdisc run in softirq, ahead of every process; the gateway gets the same standing by
/// running under SCHED_FIFO, as a router on its own CPU would have it.
pub(super) const REALTIME_ON_CPU0: [&str; 4] = ["--cpu", "0", "--realtime", "50"];

/// Each direction's leaf discipline, as the kernel counts it.
pub(super) fn kernel_counts(plan: &Plan, prefix: &str) -> Result<(Counts, Counts), TestbedError> {
    let [_, g, _] = testbed::namespaces(prefix);
    let read = |dev: &str, spec: &str| {
        let json = sh(&["tc", "-n", &g, "-s", "-j", "qdisc", "show", "dev", dev])?;
        let kind = spec.split_whitespace().next().unwrap_or("");
        Counts::from_tc_json(&json, kind).map_err(TestbedError)
    };
    let up = if plan.netem.is_some() {
        read("wan0", "netem")?
    } else {
        read("wan0", &plan.up)?
    };
    Ok((up, read("lan0", &plan.down)?))
}
