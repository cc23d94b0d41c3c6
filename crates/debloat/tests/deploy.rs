//! Running as a service (contrib/): the systemd unit is checked by `systemd-analyze verify`,
//! its command line and the example `gateway.toml` parse, and (root) the gateway forwards
//! real traffic as an unprivileged user holding only CAP_NET_RAW and CAP_NET_ADMIN, as the
//! unit runs it, reloads on SIGHUP and exits 0 on SIGTERM. Without the tools or root a SKIP
//! line; under CI a failure.

mod common;
use common::{debloat, text};
use debloat_gateway::testbed;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_debloat");

fn contrib(f: &str) -> String {
    format!("{}/../../contrib/{f}", env!("CARGO_MANIFEST_DIR"))
}

fn skip(why: &str) -> bool {
    assert!(std::env::var_os("CI").is_none(), "CI must run this: {why}");
    println!("SKIP: {why}");
    true
}

#[test]
fn the_unit_verifies_and_its_command_line_parses() {
    let unit = std::fs::read_to_string(contrib("debloat-gateway.service")).expect("unit");
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("ExecStart");
    let args: Vec<&str> = exec.split_whitespace().collect();
    assert_eq!(
        args[..3],
        ["/usr/local/bin/debloat", "gateway", "--config"],
        "{exec}"
    );
    // Its flags, with the example configuration in place of /etc/debloat/gateway.toml.
    let example = contrib("gateway.toml");
    let mut a: Vec<&str> = args[1..].to_vec();
    a[2] = &example;
    a.push("--dry-run");
    let o = debloat(&a);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("--lan eth1") && text(&o).contains("--wan eth0"),
        "{}",
        text(&o)
    );
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
        && skip("systemd-analyze is not installed (apt-get install systemd)")
    {
        return;
    }
    let dir = tempfile::tempdir().expect("tmp");
    let f = dir.path().join("debloat-gateway.service");
    std::fs::write(&f, unit.replace("/usr/local/bin/debloat", EXE)).expect("write");
    let o = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&f)
        .output()
        .expect("verify");
    let complaints: Vec<String> = text(&o)
        .lines()
        .filter(|l| l.contains("debloat-gateway.service"))
        .map(String::from)
        .collect();
    assert!(o.status.success() && complaints.is_empty(), "{}", text(&o));
}

#[test]
fn an_unprivileged_gateway_with_two_capabilities_forwards_reloads_and_exits_0() {
    if let Err(w) = testbed::available() {
        if skip(&format!("testbed: {w}")) {
            return;
        }
    }
    if Command::new("setpriv").arg("--version").output().is_err()
        && skip("setpriv is not installed (util-linux)")
    {
        return;
    }
    let (_bed, [client, gw, _]) = common::bed::namespaces_only("dp");
    // A directory and a binary the unprivileged user can reach.
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let exe = dir.path().join("debloat");
    std::fs::copy(EXE, &exe).expect("copy");
    let sock = dir.path().join("gw.sock");
    let caps = "-all,+net_raw,+net_admin";
    let child = testbed::in_ns(
        &gw,
        &[
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            &format!("--inh-caps={caps}"),
            &format!("--ambient-caps={caps}"),
            &format!("--bounding-set={caps}"),
            "--no-new-privs",
            &exe.to_string_lossy(),
            "gateway",
            "--lan",
            "lan0",
            "--wan",
            "wan0",
            "--egress",
            "cake bandwidth 10Mbit",
            "--control",
            &sock.to_string_lossy(),
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("gateway starts");
    let t = Instant::now();
    while !sock.exists() && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
    let ping = testbed::in_ns(
        &client,
        &[
            "ping",
            "-n",
            "-c",
            "5",
            "-i",
            "0.2",
            "-W",
            "2",
            testbed::SERVER_V4,
        ],
    )
    .output()
    .expect("ping");
    let pid = child.id().to_string();
    // setpriv execs the gateway in place: the child's pid is the gateway's.
    let _ = Command::new("kill").args(["-HUP", &pid]).status();
    std::thread::sleep(Duration::from_millis(500));
    let _ = Command::new("kill").args(["-TERM", &pid]).status();
    let out = child.wait_with_output().expect("gateway ends");
    let log = text(&out);
    assert!(
        ping.status.success(),
        "ping across an unprivileged gateway: {}\n{log}",
        text(&ping)
    );
    assert!(status.contains("Uid:\t65534"), "{status}");
    let cap_eff = status
        .lines()
        .find(|l| l.starts_with("CapEff:"))
        .unwrap_or("");
    // CAP_NET_ADMIN is bit 12, CAP_NET_RAW bit 13.
    assert!(cap_eff.ends_with("0000000000003000"), "{cap_eff}");
    assert!(log.contains("reloaded: nothing changed"), "SIGHUP: {log}");
    assert_eq!(out.status.code(), Some(0), "exit on SIGTERM: {log}");
}

/// A gateway in the testbed's middle namespace, its output piped; waits for its first line.
fn start_gateway(gw: &str, args: &[&str]) -> std::process::Child {
    let mut full = vec![EXE, "gateway"];
    full.extend_from_slice(args);
    testbed::in_ns(gw, &full)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("gateway starts")
}

fn wait_for(path: &std::path::Path) -> bool {
    let t = Instant::now();
    while !path.exists() && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    path.exists()
}

fn stop(child: std::process::Child) -> String {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    text(&child.wait_with_output().expect("gateway ends"))
}

/// Issue 46's safe gateway, on real interfaces: `--lan X --wan X` is refused; a second gateway
/// on a port the first forwards is refused naming the first (its pid), before it touches the
/// port; a port that is down is named with the command that brings it up; a plain run serves
/// the default control socket that `gateway stats` asks, and a second plain run on other ports
/// takes one named after its ports.
#[test]
fn a_second_gateway_on_a_port_is_refused_naming_the_first() {
    if let Err(w) = testbed::available() {
        if skip(&format!("testbed: {w}")) {
            return;
        }
    }
    let (_bed, [_, gw, _]) = common::bed::namespaces_only("dq");
    let same = testbed::in_ns(&gw, &[EXE, "gateway", "--lan", "lan0", "--wan", "lan0"])
        .output()
        .expect("run");
    assert!(!same.status.success());
    assert!(
        text(&same).contains("--lan and --wan are both lan0"),
        "{}",
        text(&same)
    );

    let default = std::path::Path::new("/run/debloat/gateway.sock");
    let _ = std::fs::remove_file(default);
    let first = start_gateway(&gw, &["--lan", "lan0", "--wan", "wan0"]);
    assert!(wait_for(default), "the default control socket appears");
    let stats = testbed::in_ns(&gw, &[EXE, "gateway", "stats"])
        .output()
        .expect("stats");
    assert!(
        text(&stats).contains("fq_codel"),
        "plain `stats` asks the default: {}",
        text(&stats)
    );

    let second = testbed::in_ns(&gw, &[EXE, "gateway", "--lan", "wan0", "--wan", "lan0"])
        .output()
        .expect("run");
    let said = text(&second);
    assert!(!second.status.success(), "{said}");
    let holder = format!(
        "already forwarded by another gateway (pid {}: debloat gateway --lan lan0 --wan wan0",
        first.id()
    );
    assert!(said.contains(&holder), "{said}");
    assert!(
        !said.contains("offloads turned off"),
        "refused before touching the ports: {said}"
    );

    // Other ports, with one of them down: a warning, and a control socket of its own.
    for cmd in ["ip link add x0 type veth peer name x1", "ip link set x1 up"] {
        let args: Vec<&str> = cmd.split(' ').collect();
        assert!(
            testbed::in_ns(&gw, &args).status().expect("ip").success(),
            "{cmd}"
        );
    }
    let own = std::path::Path::new("/run/debloat/gateway-x0-x1.sock");
    let _ = std::fs::remove_file(own);
    let third = start_gateway(&gw, &["--lan", "x0", "--wan", "x1", "--io", "packet"]);
    let served = wait_for(own);
    let log3 = stop(third);
    let log1 = stop(first);
    assert!(
        log3.contains("warning: x0 is down: bring it up with `ip link set x0 up`"),
        "{log3}"
    );
    assert!(
        served,
        "a second plain gateway serves its own socket: {log3}"
    );
    assert!(
        log3.contains("control socket: /run/debloat/gateway-x0-x1.sock"),
        "{log3}"
    );
    assert!(log1.contains("stopped after"), "{log1}");
}
