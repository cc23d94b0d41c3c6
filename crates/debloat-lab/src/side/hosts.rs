//! The hosts' side of a comparison, the same for both runs: ECN, one address per host, the base
//! delay, the hosts' own qdisc if the plan gives one, and nothing cached between runs.
//!
//! Where the base delay sits matters to TCP Small Queues (TSQ). A segment waiting in a qdisc
//! still counts against its socket's memory; TSQ holds a sender to about a millisecond of its
//! pacing rate in flight below the socket. A router's queue is on another machine and never
//! counts, but the lab's gateway is a bridge in the same kernel, and the socket reference
//! survives the namespace crossing (since Linux 5.1): left alone, the kernel's qdisc would hold
//! each sender to a few packets and a 50-packet FIFO would never fill. netem frees each segment
//! from its socket's memory as it takes it (`skb_orphan_partial`, netem's enqueue, whenever it
//! delays), which is what the client's delay does by default.
//!
//! With a host qdisc (`Plan::host_qdisc`, e.g. `fq`, as Linux hosts pace with sch_fq before
//! their NIC) the client's egress belongs to that qdisc, so:
//! - the base delay moves to the server's egress, the ACKs' way: the same round trip;
//! - TSQ now counts the host qdisc, as on a real host;
//! - in the kernel's run a netem of 1 µs becomes `wan0`'s root, with the compared discipline
//!   under it ([`RELEASE_PARENT`]), to free the segments as a router would. The gateway's run
//!   needs none: `debloat gateway` copies each frame out of the kernel (AF_PACKET), which frees it.

use super::{traffic, Plan};
use debloat_gateway::testbed::{self, sh, TestbedError};

/// netem's handle when it frees segments in front of the kernel's discipline on `wan0`.
pub const RELEASE_PARENT: &str = "1f:";

fn sysctl(ns: &str, setting: &str) -> Result<(), TestbedError> {
    sh(&["ip", "netns", "exec", ns, "sysctl", "-qw", setting]).map(|_| ())
}

/// Whether the kernel's run needs the 1 µs netem on `wan0` (a host qdisc took the client's
/// egress, and no netem link is `wan0`'s root already).
pub fn release_at_gateway(plan: &Plan) -> bool {
    plan.host_qdisc.is_some() && plan.netem.is_none()
}

/// Put the 1 µs netem on `dev` of namespace `g` as its root; the discipline goes under
/// [`RELEASE_PARENT`].
pub fn add_release(g: &str, dev: &str) -> Result<(), TestbedError> {
    sh(&[
        "tc",
        "-n",
        g,
        "qdisc",
        "add",
        "dev",
        dev,
        "root",
        "handle",
        RELEASE_PARENT,
        "netem",
        "delay",
        "1us",
        "limit",
        "100000",
    ])
    .map(|_| ())
}

/// netem's base delay (`op`: add or change): on the client's egress at the plan's upstream rate
/// if it has one, or on the server's egress when the client has a host qdisc.
pub fn base_delay(plan: &Plan, prefix: &str, op: &str, delay: &str) -> Result<(), TestbedError> {
    let [c, _, v] = testbed::namespaces(prefix);
    let ns = if plan.host_qdisc.is_some() { v } else { c };
    let args = [
        "qdisc", op, "dev", "eth0", "root", "netem", "delay", delay, "limit", "100000",
    ];
    let mut a = vec!["tc", "-n", &ns];
    a.extend_from_slice(&args);
    if let Some(r) = &plan.upstream_rate {
        a.extend_from_slice(&["rate", r]);
    }
    sh(&a).map(|_| ())
}

/// The plan's checks of its own: a host qdisc leaves no room for a rate on the client's egress.
pub fn check(plan: &Plan) -> Result<(), TestbedError> {
    let Some(q) = &plan.host_qdisc else {
        return Ok(());
    };
    q.parse::<debloat_core::QdiscSpec>()
        .map_err(|e| TestbedError(format!("the host qdisc \"{q}\": {e}")))?;
    if plan.upstream_rate.is_some() || plan.kernel_via_gateway {
        return Err(TestbedError(
            "a host qdisc takes the client's egress: it cannot go with an upstream rate or the kernel via the gateway"
                .into(),
        ));
    }
    Ok(())
}

/// Set up the hosts (see the module's notes).
pub fn prepare(plan: &Plan, prefix: &str) -> Result<(), TestbedError> {
    check(plan)?;
    let [c, _, v] = testbed::namespaces(prefix);
    if plan.ecn {
        sysctl(&c, "net.ipv4.tcp_ecn=1")?;
    }
    if let Some(max) = plan.client_rmem_max {
        sysctl(
            &c,
            &format!("net.ipv4.tcp_rmem=4096 {} {max}", max.min(131_072)),
        )?;
    }
    for k in 0..traffic::PING_FLOWS {
        let addr = format!("{}/24", traffic::ping_source(k));
        sh(&["ip", "-n", &c, "addr", "add", &addr, "dev", "eth0"])?;
    }
    for i in 1..plan.hosts.len() {
        let addr = format!("198.18.1.{}/24", 2 + i);
        sh(&["ip", "-n", &c, "addr", "add", &addr, "dev", "eth0"])?;
        if plan.server_per_host {
            let addr = format!("198.18.2.{}/24", 2 + i);
            sh(&["ip", "-n", &v, "addr", "add", &addr, "dev", "eth0"])?;
        }
    }
    if let Some(q) = &plan.host_qdisc {
        let mut a = vec!["tc", "-n", &c, "qdisc", "add", "dev", "eth0", "root"];
        a.extend(q.split_whitespace());
        sh(&a)?;
    }
    base_delay(plan, prefix, "add", &plan.delay)?;
    // Every run starts from nothing learnt: no cached ssthresh or RTT from the run before.
    for ns in [&c, &v] {
        sysctl(ns, "net.ipv4.tcp_no_metrics_save=1")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(extra: &str) -> Plan {
        serde_json::from_str(&format!(
            r#"{{"up":"pfifo","down":"pfifo","up_bps":20000000,"down_bps":20000000,"delay":"24ms","hosts":[2,2],"cc":"bbr,cubic","seconds":60,"omit":15,"match_rtt":false{extra}}}"#
        ))
        .expect("a plan")
    }

    #[test]
    fn a_host_qdisc_is_checked_and_takes_the_clients_egress() {
        assert!(check(&plan("")).is_ok());
        assert!(check(&plan(r#","host_qdisc":"fq""#)).is_ok());
        assert!(release_at_gateway(&plan(r#","host_qdisc":"fq""#)));
        assert!(!release_at_gateway(&plan("")));
        let e =
            check(&plan(r#","host_qdisc":"fq pacing_rate 1""#)).expect_err("an unknown fq word");
        assert!(e.0.contains("pacing_rate"), "{}", e.0);
        let e = check(&plan(r#","host_qdisc":"fq","upstream_rate":"8Mbit""#))
            .expect_err("fq with an upstream rate");
        assert!(e.0.contains("upstream rate"), "{}", e.0);
    }
}
