//! `debloat testbed`: three network namespaces — client, gateway, server — joined by two veth
//! pairs, with `debloat gateway` forwarding between them and emulating the bottleneck link.
//!
//! ```text
//! {p}-client            {p}-gw                          {p}-server
//!   eth0 ──veth── lan0 [debloat gateway: egress qdisc → link → ] wan0 ──veth── eth0
//! 198.18.1.2/24      [ ← link ← ingress qdisc ]               198.18.2.2/24
//! 2001:2:0:1::2/64                                            2001:2:0:2::2/64
//! ```
//!
//! The gateway bridges at layer 2, so each end reaches the other's subnet on-link (ARP and
//! neighbour discovery pass through the gateway). Segmentation offloads (TSO, GSO, GRO) are
//! turned off on every veth, so the gateway forwards MTU-sized frames as a router's NIC would
//! see them; checksum offload stays on (the default), so the hosts' TCP and UDP checksums arrive
//! unfinished and the gateway completes them (except under `--io af_xdp`/`auto`: XDP cannot see
//! that a sum is unfinished, so the hosts then finish their own). Everything is done with `ip` and `ethtool` (iproute2, ethtool).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The client's IPv4 address.
pub const CLIENT_V4: &str = "198.18.1.2";
/// The server's IPv4 address.
pub const SERVER_V4: &str = "198.18.2.2";
/// The client's IPv6 address.
pub const CLIENT_V6: &str = "2001:2:0:1::2";
/// The server's IPv6 address.
pub const SERVER_V6: &str = "2001:2:0:2::2";

/// A testbed that failed to come up or down: what ran, and what it said.
#[derive(Debug, thiserror::Error)]
#[error("testbed: {0}")]
pub struct TestbedError(pub String);

/// How to build it.
#[derive(Clone, Debug)]
pub struct Setup {
    /// Name prefix: namespaces `{prefix}-client`, `{prefix}-gw`, `{prefix}-server`.
    pub prefix: String,
    /// The `debloat` binary to run as the gateway.
    pub exe: PathBuf,
    /// Gateway arguments after `gateway --lan lan0 --wan wan0` (disciplines, emulation).
    pub gateway_args: Vec<String>,
}

/// The namespace names of a prefix.
pub fn namespaces(prefix: &str) -> [String; 3] {
    ["client", "gw", "server"].map(|r| format!("{prefix}-{r}"))
}

/// Where the gateway's control socket, pid file and log live.
pub fn run_dir() -> PathBuf {
    PathBuf::from("/run/debloat")
}

/// The control socket of a testbed's gateway.
pub fn control_socket(prefix: &str) -> PathBuf {
    run_dir().join(format!("{prefix}.sock"))
}

fn pid_file(prefix: &str) -> PathBuf {
    run_dir().join(format!("{prefix}.pid"))
}

/// The process id of a testbed's running gateway, if it has one.
pub fn gateway_pid(prefix: &str) -> Option<u32> {
    std::fs::read_to_string(pid_file(prefix))
        .ok()?
        .trim()
        .parse()
        .ok()
        .filter(|&p| alive(p))
}

/// The gateway's log (its stdout and stderr).
pub fn log_file(prefix: &str) -> PathBuf {
    run_dir().join(format!("{prefix}-gateway.log"))
}

/// Run a command; its stderr becomes the error.
pub fn sh(args: &[&str]) -> Result<String, TestbedError> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            TestbedError(format!(
                "`{}` did not run: {e} (install iproute2 and ethtool)",
                args[0]
            ))
        })?;
    if !out.status.success() {
        return Err(TestbedError(format!(
            "`{}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Build the testbed (replacing one with the same prefix) and start the gateway in it.
pub fn up(s: &Setup) -> Result<(), TestbedError> {
    build_namespaces(&s.prefix)?;
    let res = start_gateway(s);
    if res.is_err() {
        let _ = down(&s.prefix);
    }
    res
}

/// Build the namespaces, veth pairs, addresses and routes with nothing forwarding between
/// `lan0` and `wan0` yet (replacing a testbed with the same prefix). Start a gateway with
/// [`start_gateway`], or bridge the two in the kernel for comparison.
pub fn build_namespaces(prefix: &str) -> Result<(), TestbedError> {
    build_namespaces_with_queues(prefix, 1)
}

/// [`build_namespaces`] with veth pairs of `queues` transmit and receive queues each, as a
/// multi-queue NIC has: a frame arrives on the receive queue its sender transmitted on (the
/// sender's XPS or flow hash picks it).
pub fn build_namespaces_with_queues(prefix: &str, queues: u32) -> Result<(), TestbedError> {
    down(prefix)?;
    let [c, g, v] = namespaces(prefix);
    let res = build(&c, &g, &v, queues.max(1));
    if res.is_err() {
        let _ = down(prefix);
    }
    res
}

/// The client's side: (namespace, filled in by the caller; its addresses; the routes to the
/// server's subnets).
const CLIENT_SIDE: (&str, &str, &str, &str, &str) = (
    "",
    "198.18.1.2/24",
    "2001:2:0:1::2/64",
    "198.18.2.0/24",
    "2001:2:0:2::/64",
);

/// A host's eth0: addresses, up, routes to the far side's subnets on-link.
fn host(ns: &str, v4: &str, v6: &str, peer4: &str, peer6: &str) -> Result<(), TestbedError> {
    sh(&["ip", "-n", ns, "addr", "add", v4, "dev", "eth0"])?;
    sh(&[
        "ip", "-n", ns, "-6", "addr", "add", v6, "dev", "eth0", "nodad",
    ])?;
    sh(&["ip", "-n", ns, "link", "set", "eth0", "up"])?;
    sh(&["ip", "-n", ns, "route", "add", peer4, "dev", "eth0"])?;
    sh(&["ip", "-n", ns, "-6", "route", "add", peer6, "dev", "eth0"])?;
    Ok(())
}

/// Delete the gateway's LAN interface (and with it the client's end of the pair) and make both
/// again under the same names, still down, every offload at the kernel's defaults: what happens
/// when a container or a VM on the LAN side is restarted. [`lan_up`] configures and raises them.
pub fn remake_lan(prefix: &str) -> Result<(), TestbedError> {
    let [c, g, _] = namespaces(prefix);
    sh(&["ip", "-n", &g, "link", "del", "lan0"])?;
    sh(&[
        "ip", "link", "add", "eth0", "netns", &c, "type", "veth", "peer", "name", "lan0", "netns",
        &g,
    ])
    .map(drop)
}

/// The client configured as before on a re-made pair, and both ends up. Its offloads stay at
/// the kernel's defaults, except that where the gateway's new lan0 has an XDP program (the
/// gateway re-opened it on AF_XDP) the client's checksum offload goes off, as [`start_gateway`]
/// does at start: XDP cannot finish a sum the host left for a NIC.
pub fn lan_up(prefix: &str) -> Result<(), TestbedError> {
    let [c, g, _] = namespaces(prefix);
    let (_, v4, v6, peer4, peer6) = CLIENT_SIDE;
    host(&c, v4, v6, peer4, peer6)?;
    if xdp_attached(&g, "lan0")? {
        host_checksum_offload_off(&c)?;
    }
    sh(&["ip", "-n", &g, "link", "set", "lan0", "up"]).map(drop)
}

/// Whether interface `dev` in namespace `ns` has an XDP program attached, native or generic
/// (`ip -d link show` prints a `prog/xdp` line for it).
pub fn xdp_attached(ns: &str, dev: &str) -> Result<bool, TestbedError> {
    let out = sh(&["ip", "-n", ns, "-d", "link", "show", "dev", dev])?;
    Ok(out.contains("prog/xdp"))
}

fn build(c: &str, g: &str, v: &str, queues: u32) -> Result<(), TestbedError> {
    for ns in [c, g, v] {
        sh(&["ip", "netns", "add", ns])?;
        sh(&["ip", "-n", ns, "link", "set", "lo", "up"])?;
    }
    let q = queues.to_string();
    let many = ["numtxqueues", &q, "numrxqueues", &q];
    let many: &[&str] = if queues > 1 { &many } else { &[] };
    for (host, dev) in [(c, "lan0"), (v, "wan0")] {
        let mut cmd = vec!["ip", "link", "add", "eth0", "netns", host];
        cmd.extend_from_slice(many);
        cmd.extend(["type", "veth", "peer", "name", dev, "netns", g]);
        cmd.extend_from_slice(many);
        sh(&cmd)?;
    }
    for (ns, v4, v6, peer4, peer6) in [
        CLIENT_SIDE,
        (
            v,
            "198.18.2.2/24",
            "2001:2:0:2::2/64",
            "198.18.1.0/24",
            "2001:2:0:1::/64",
        ),
    ] {
        let ns = if ns.is_empty() { c } else { ns };
        offloads_off(ns, "eth0")?;
        host(ns, v4, v6, peer4, peer6)?;
    }
    for dev in ["lan0", "wan0"] {
        offloads_off(g, dev)?;
        // No addresses and no forwarding: the gateway namespace's kernel leaves frames alone.
        sh(&["ip", "-n", g, "link", "set", dev, "up"])?;
    }
    Ok(())
}

/// Segmentation offloads off (TSO, GSO, GRO): the gateway forwards MTU-sized frames, as a
/// router's NIC sees them. Checksum offload stays on, as veths have it by default: the hosts
/// send frames whose TCP/UDP checksum is left for a NIC, and the gateway completes it
/// (`crate::csum`).
fn offloads_off(ns: &str, dev: &str) -> Result<(), TestbedError> {
    sh(&[
        "ip", "netns", "exec", ns, "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off",
    ])
    .map(|_| ())
}

/// Whether the gateway's arguments ask for AF_XDP (`--io af_xdp` or `--io auto`);
/// `$DEBLOAT_IO` counts too: the gateway takes its default from it.
fn uses_xdp(args: &[String]) -> bool {
    let xdp = |w: &str| {
        matches!(
            w,
            "af_xdp" | "auto" | "af_xdp_generic" | "af_xdp_skb" | "xdpgeneric"
        )
    };
    match args.iter().position(|a| a == "--io") {
        Some(i) => args.get(i + 1).is_some_and(|w| xdp(w)),
        None => std::env::var("DEBLOAT_IO").is_ok_and(|w| xdp(&w)),
    }
}

/// A host's checksum offload off, for a gateway on AF_XDP. A veth hands its peer a frame whose
/// TCP/UDP checksum it left for a NIC (CHECKSUM_PARTIAL) together with the skb's note that it
/// is partial; AF_PACKET passes the note on and the gateway completes the sum, but XDP sees
/// only the bytes, and the frame leaves with a wrong checksum that the far host drops. A NIC's
/// frames come from a wire with their sums complete, so only locally made frames (veths,
/// containers) need this. The kernel's own XDP redirect between veths needs it too.
fn host_checksum_offload_off(ns: &str) -> Result<(), TestbedError> {
    sh(&[
        "ip", "netns", "exec", ns, "ethtool", "-K", "eth0", "tx", "off",
    ])
    .map(|_| ())
}

/// Start the gateway between `lan0` and `wan0` of built namespaces, in the background; returns
/// once its control socket is there.
pub fn start_gateway(s: &Setup) -> Result<(), TestbedError> {
    let [c, g, v] = namespaces(&s.prefix);
    if uses_xdp(&s.gateway_args) {
        for ns in [&c, &v] {
            host_checksum_offload_off(ns)?;
        }
    }
    let g = g.as_str();
    let io = |e: std::io::Error| TestbedError(format!("{}: {e}", run_dir().display()));
    std::fs::create_dir_all(run_dir()).map_err(io)?;
    let sock = control_socket(&s.prefix);
    let _ = std::fs::remove_file(&sock);
    let log = std::fs::File::create(log_file(&s.prefix)).map_err(io)?;
    let log2 = log.try_clone().map_err(io)?;
    let exe = s.exe.to_string_lossy().into_owned();
    let sock_s = sock.to_string_lossy().into_owned();
    let mut args = vec![
        "netns",
        "exec",
        g,
        exe.as_str(),
        "gateway",
        "--lan",
        "lan0",
        "--wan",
        "wan0",
        "--control",
        sock_s.as_str(),
    ];
    args.extend(s.gateway_args.iter().map(String::as_str));
    use std::os::unix::process::CommandExt;
    let child = Command::new("ip")
        .args(&args)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log2)
        .process_group(0)
        .spawn()
        .map_err(|e| TestbedError(format!("starting the gateway: {e}")))?;
    std::fs::write(pid_file(&s.prefix), child.id().to_string()).map_err(io)?;
    let t = Instant::now();
    while !sock.exists() {
        if t.elapsed() > Duration::from_secs(5) || !alive(child.id()) {
            let log = std::fs::read_to_string(log_file(&s.prefix)).unwrap_or_default();
            return Err(TestbedError(format!(
                "the gateway did not start: {}",
                log.trim()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

fn alive(pid: u32) -> bool {
    // A zombie (exited, not yet reaped) counts as gone.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.split_whitespace().nth(2).is_none_or(|st| st != "Z"))
}

/// Stop the gateway (SIGTERM; it prints its final statistics to its log) and remove the
/// namespaces. Removing what is not there is not an error.
pub fn down(prefix: &str) -> Result<(), TestbedError> {
    stop_gateway(prefix);
    let existing = sh(&["ip", "netns", "list"]).unwrap_or_default();
    for ns in namespaces(prefix) {
        if existing
            .lines()
            .any(|l| l.split_whitespace().next() == Some(ns.as_str()))
        {
            let stopped = stop_processes(&ns);
            if stopped > 0 {
                let what = if stopped == 1 { "process" } else { "processes" };
                eprintln!("stopped {stopped} {what} still running in {ns}");
            }
            sh(&["ip", "netns", "del", &ns])?;
        }
    }
    Ok(())
}

/// End every process still in namespace `ns` (a server someone started there, a test's
/// sender): SIGTERM, then SIGKILL after a second. `ip netns del` alone would only unmount the
/// name, and they would run on in a namespace nobody can reach by name. How many there were.
fn stop_processes(ns: &str) -> usize {
    let pids = |ns: &str| -> Vec<String> {
        sh(&["ip", "netns", "pids", ns])
            .unwrap_or_default()
            .split_whitespace()
            .filter(|p| p.parse::<u32>().is_ok_and(|n| n != std::process::id()))
            .map(str::to_string)
            .collect()
    };
    let first = pids(ns);
    if first.is_empty() {
        return 0;
    }
    for p in &first {
        let _ = sh(&["kill", "-TERM", p]);
    }
    let t = Instant::now();
    while !pids(ns).is_empty() && t.elapsed() < Duration::from_secs(1) {
        std::thread::sleep(Duration::from_millis(20));
    }
    for p in pids(ns) {
        let _ = sh(&["kill", "-KILL", &p]);
    }
    first.len()
}

/// Stop a testbed's gateway (SIGTERM, then SIGKILL after 3 s), leaving the namespaces.
pub fn stop_gateway(prefix: &str) {
    if let Ok(pid) = std::fs::read_to_string(pid_file(prefix)) {
        let pid = pid.trim();
        if let Ok(n) = pid.parse::<u32>() {
            if alive(n) {
                let _ = sh(&["kill", "-TERM", pid]);
                let t = Instant::now();
                while alive(n) && t.elapsed() < Duration::from_secs(3) {
                    std::thread::sleep(Duration::from_millis(20));
                }
                if alive(n) {
                    let _ = sh(&["kill", "-KILL", pid]);
                }
            }
        }
        let _ = std::fs::remove_file(pid_file(prefix));
    }
    let _ = std::fs::remove_file(control_socket(prefix));
}

/// Why a testbed cannot be built here.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unavailable {
    /// Not root.
    #[error("not root (network namespaces need CAP_NET_ADMIN)")]
    NotRoot,
    /// A tool the testbed runs is missing.
    #[error("`{0}` is not installed")]
    Missing(&'static str),
}

/// Whether this process can build a testbed here (root, and `ip netns` works).
pub fn available() -> Result<(), Unavailable> {
    let uid = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(str::to_string))
        })
        .unwrap_or_default();
    if uid != "0" {
        return Err(Unavailable::NotRoot);
    }
    for tool in ["ip", "ethtool"] {
        if Command::new(tool).arg("-V").output().is_err() {
            return Err(Unavailable::Missing(tool));
        }
    }
    Ok(())
}

/// Run `args` inside namespace `ns`.
pub fn in_ns(ns: &str, args: &[&str]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns]).args(args);
    c
}

/// The log of a prefix's gateway, for error messages.
pub fn read_log(prefix: &str) -> String {
    std::fs::read_to_string(log_file(prefix)).unwrap_or_default()
}
