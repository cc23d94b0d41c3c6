//! ICMP without privilege: an unprivileged ICMP socket where the namespace's
//! `ping_group_range` admits the user, a raw socket otherwise. Part of `tests/probe.rs` (one test
//! binary).

use super::common::{summary_json, text};
use super::{exe_for_nobody, root_with_setpriv, Server, CPUS, NOBODY};
use std::process::{Command, Stdio};
use std::time::Duration;

/// A network namespace for one test, deleted when dropped (also when the test fails).
struct Netns(String);
impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// ICMP without privilege (issue 6, item 1): in a namespace of its own whose
/// `net.ipv4.ping_group_range` admits the `nobody` group, `debloat test ping` run as `nobody`
/// (no capabilities: a raw socket is out of reach) pings over an unprivileged ICMP socket,
/// every echo answered; with the range closed, root falls back to a raw socket. Root only (it
/// creates the namespace and changes user); prints a SKIP line elsewhere, fails under CI.
#[test]
fn icmp_uses_an_unprivileged_socket_where_allowed_and_raw_otherwise() {
    if !root_with_setpriv("unprivileged-ICMP") {
        return;
    }
    let ns = Netns(format!("dbl-icmp-{}", std::process::id()));
    let sh = |args: &[&str]| {
        let o = Command::new("ip").args(args).output().expect("ip runs");
        assert!(o.status.success(), "ip {args:?}: {}", text(&o));
    };
    sh(&["netns", "add", &ns.0]);
    sh(&["-n", &ns.0, "link", "set", "lo", "up"]);
    let dir = tempfile::tempdir().expect("tmp");
    let exe = exe_for_nobody(dir.path());
    let _srv = Server(
        debloat_gateway::testbed::in_ns(&ns.0, &[&exe, "server", "--bind", "127.0.0.1:2112"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("server starts"),
        String::new(),
        Box::new(CPUS.read().unwrap_or_else(|e| e.into_inner())),
    );
    std::thread::sleep(Duration::from_millis(300));
    let ping = |range: &str, user: &[&str], out: &str| -> serde_json::Value {
        let set = format!("net.ipv4.ping_group_range={range}");
        let o = debloat_gateway::testbed::in_ns(&ns.0, &["sysctl", "-qw", &set])
            .output()
            .expect("sysctl");
        assert!(o.status.success(), "{}", text(&o));
        let out = dir.path().join(out);
        let out = out.to_string_lossy();
        let mut a: Vec<&str> = user.to_vec();
        a.extend_from_slice(&[
            &exe,
            "test",
            "ping",
            "127.0.0.1",
            "--length",
            "2",
            "--no-report",
            "--output",
            &out,
        ]);
        let o = debloat_gateway::testbed::in_ns(&ns.0, &a)
            .output()
            .expect("test runs");
        assert!(o.status.success(), "{}", text(&o));
        summary_json(std::path::Path::new(&*out))
    };
    let nobody = NOBODY;
    let s = ping("65534 65534", &nobody, "unprivileged");
    let icmp = &s["icmp"][0];
    println!("as nobody, range open: {icmp}");
    assert_eq!(icmp["socket"], "Unprivileged", "{s}");
    let sent = icmp["sent"].as_u64().unwrap_or(0);
    assert!(
        sent >= 9 && icmp["received"].as_u64() == Some(sent),
        "{icmp}"
    );
    assert_eq!(s["errors"].as_array().map(Vec::len), Some(0), "{s}");

    let s = ping("1 0", &[], "raw");
    let icmp = &s["icmp"][0];
    println!("as root, range closed: {icmp}");
    assert_eq!(icmp["socket"], "Raw", "{s}");
    let sent = icmp["sent"].as_u64().unwrap_or(0);
    assert!(
        sent >= 9 && icmp["received"].as_u64() == Some(sent),
        "{icmp}"
    );

    // And nobody with the range closed has no ICMP socket at all: an error naming the fix.
    let s = ping("1 0", &nobody, "none");
    let e = s["icmp"][0]["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(e.contains("ping_group_range"), "{s}");
}
