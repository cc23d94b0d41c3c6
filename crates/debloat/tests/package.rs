//! The Debian package, as a newcomer meets it (issue 46; root: the testbed's namespaces, SKIP
//! elsewhere, failure under CI). `scripts/package-deb.sh` builds the `.deb` from the tested
//! binary; dpkg installs it into a root of its own (`dpkg --root`, so the test host is not
//! changed); the installed files are checked (binary, unit, conffile, man pages, completions);
//! then, as docs/deploy.md says, the installed `gateway.toml` is given the two ports and the
//! unit's own command line — read from the installed unit — is started between the testbed's
//! namespaces: a ping crosses it, `debloat gateway stats` (no flags) reads it, and a
//! responsiveness test from the client against `debloat server` in the server's namespace
//! gives an RPM through it. SIGTERM ends it with status 0.

mod common;
use common::text;
use debloat_gateway::testbed;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_debloat");

fn skip(why: &str) -> bool {
    assert!(std::env::var_os("CI").is_none(), "CI must run this: {why}");
    println!("SKIP: {why}");
    true
}

fn run(cmd: &mut Command) -> String {
    let o = cmd.output().expect("runs");
    assert!(o.status.success(), "{cmd:?}: {}", text(&o));
    text(&o)
}

/// Build the package and install it under `root` with dpkg; the installed binary.
fn install(dir: &Path, root: &Path) -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/package-deb.sh");
    let deb = run(Command::new("bash").arg(&script).arg(dir).env("BIN", EXE));
    let deb = deb.trim();
    assert!(deb.ends_with(".deb") && Path::new(deb).exists(), "{deb}");
    for d in ["var/lib/dpkg/info", "var/lib/dpkg/updates"] {
        std::fs::create_dir_all(root.join(d)).expect("admindir");
    }
    std::fs::write(root.join("var/lib/dpkg/status"), "").expect("status");
    let r = format!("--root={}", root.display());
    // The test root has no libc6, iproute2 or ethtool packages: the host's serve.
    run(Command::new("dpkg").args([
        &r,
        "--force-script-chrootless",
        "--force-depends",
        "-i",
        deb,
    ]));
    let status = run(Command::new("dpkg").args([&r, "-s", "debloat"]));
    assert!(status.contains("Status: install ok installed"), "{status}");
    assert!(
        status.contains("/etc/debloat/gateway.toml"),
        "a conffile: {status}"
    );
    root.join("usr/bin/debloat")
}

#[test]
fn the_package_installs_and_its_unit_command_line_shapes_a_link() {
    if let Err(w) = testbed::available() {
        if skip(&format!("testbed: {w}")) {
            return;
        }
    }
    if Command::new("dpkg-deb").arg("--version").output().is_err() && skip("dpkg-deb is missing") {
        return;
    }
    let dir = tempfile::tempdir().expect("tmp");
    let root = dir.path().join("root");
    let bin = install(dir.path(), &root);
    assert!(run(Command::new(&bin).arg("--version")).starts_with("debloat "));
    for f in [
        "usr/share/man/man1/debloat.1.gz",
        "usr/share/man/man1/debloat-gateway.1.gz",
        "usr/share/man/man1/debloat-test.1.gz",
        "usr/share/zsh/vendor-completions/_debloat",
        "usr/share/fish/vendor_completions.d/debloat.fish",
        "usr/share/doc/debloat/deploy.md",
    ] {
        assert!(root.join(f).exists(), "{f} is installed");
    }
    let bash = root.join("usr/share/bash-completion/completions/debloat");
    run(Command::new("bash").arg("-n").arg(&bash));

    // docs/deploy.md, step 4: name the ports in the installed configuration.
    let toml = root.join("etc/debloat/gateway.toml");
    let cfg = std::fs::read_to_string(&toml).expect("conffile");
    let cfg = cfg
        .replace("lan = \"eth1\"", "lan = \"lan0\"")
        .replace("wan = \"eth0\"", "wan = \"wan0\"");
    std::fs::write(&toml, cfg).expect("edit");
    let unit = std::fs::read_to_string(root.join("lib/systemd/system/debloat-gateway.service"))
        .expect("unit");
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("ExecStart");
    let r = root.to_string_lossy();
    let words: Vec<String> = exec
        .split_whitespace()
        .map(|w| match w {
            "/usr/bin/debloat" | "/etc/debloat/gateway.toml" => format!("{r}{w}"),
            w => w.to_string(),
        })
        .collect();
    assert_eq!(
        words[0],
        bin.to_string_lossy(),
        "the unit runs the installed binary"
    );

    let (_bed, [client, gw, server]) = common::bed::namespaces_only("pk");
    let sock = Path::new("/run/debloat/gateway.sock");
    let _ = std::fs::remove_file(sock);
    let args: Vec<&str> = words.iter().map(String::as_str).collect();
    let gateway = testbed::in_ns(&gw, &args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the unit's command line starts");
    let t = Instant::now();
    while !sock.exists() && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let b = bin.to_string_lossy();
    let ping = testbed::in_ns(
        &client,
        &[
            "ping",
            "-n",
            "-c",
            "3",
            "-i",
            "0.2",
            "-W",
            "2",
            testbed::SERVER_V4,
        ],
    )
    .output()
    .expect("ping");
    let stats = Command::new(&bin)
        .args(["gateway", "stats"])
        .output()
        .expect("stats");
    let cert = dir.path().join("server-cert.pem");
    let cert_s = cert.to_string_lossy();
    let mut srv = testbed::in_ns(
        &server,
        &[
            &b,
            "server",
            "--https",
            "0.0.0.0:4443",
            "--cert-name",
            testbed::SERVER_V4,
            "--cert-out",
            &cert_s,
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .expect("server");
    std::thread::sleep(Duration::from_millis(300));
    let out = dir.path().join("rpm");
    let rpm = testbed::in_ns(
        &client,
        &[
            &b,
            "test",
            "responsiveness",
            testbed::SERVER_V4,
            "--config",
            &format!("https://{}:4443/.well-known/nq", testbed::SERVER_V4),
            "--ca",
            &cert_s,
            "--length",
            "6",
            "--delay",
            "0.5",
            "--no-report",
            "--output",
            &out.to_string_lossy(),
        ],
    )
    .output()
    .expect("test");
    let _ = srv.kill();
    let _ = srv.wait();
    let _ = Command::new("kill")
        .args(["-TERM", &gateway.id().to_string()])
        .status();
    let done = gateway.wait_with_output().expect("gateway ends");
    let log = text(&done);
    assert!(
        ping.status.success(),
        "ping across the packaged gateway: {}\n{log}",
        text(&ping)
    );
    assert!(
        text(&stats).contains("cake bandwidth 19Mbit diffserv4 dual-srchost"),
        "plain `gateway stats` reads the unit's socket: {}",
        text(&stats)
    );
    let rt = text(&rpm);
    println!(
        "{}",
        rt.lines()
            .filter(|l| l.contains("RPM"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(rpm.status.success(), "{rt}");
    assert!(
        rt.contains("responsiveness (draft-ietf-ippm-responsiveness") && rt.contains(" RPM"),
        "{rt}"
    );
    // The IETF test ran beside it, over HTTP/2 and TLS, through the 19 Mbit/s shaper.
    assert!(rt.contains("HTTP/2 over TLS over"), "{rt}");
    assert!(
        rt.contains("responsiveness (IETF draft-09, HTTP/2 + TLS): "),
        "{rt}"
    );
    let up = rt
        .lines()
        .find(|l| l.contains("goodput in the last 5 s"))
        .and_then(|l| {
            l.split("up ")
                .nth(1)?
                .split(" Mbit/s")
                .next()?
                .parse::<f64>()
                .ok()
        })
        .expect("an upload goodput");
    assert!(
        up > 10.0 && up < 19.5,
        "upload through cake 19Mbit: {up} Mbit/s\n{rt}"
    );
    assert_eq!(
        done.status.code(),
        Some(0),
        "SIGTERM ends it cleanly: {log}"
    );
}
