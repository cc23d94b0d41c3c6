//! The IETF responsiveness test through the testbed, measured by two clients: debloat's
//! (`debloat test responsiveness --config`) and Cloudflare's `mach rpm` (crates.io `cf-mach`,
//! an implementation of the same draft that no one here wrote), both against
//! `debloat server --https` in the server's namespace, over 10 Mbit/s each way and 20 ms, once
//! behind cake and once behind a 1000-packet FIFO.
//!
//! Bands, from the draft's classes (docs/measurement.md §6.1): behind the FIFO (1000 packets at
//! 10 Mbit/s: up to 1.2 s of queue) every RPM is Poor (< 300); behind cake every RPM is at least
//! Fair (≥ 300). Both clients must say so of both set-ups.
//! Long tier (two 60-s runs of each client, ≈ 4 min); `scripts/long-tests.sh` installs mach.

mod common;
use common::bed::*;
use common::text;
use debloat_gateway::testbed;
use std::process::{Command, Stdio};

/// RPMs one qdisc gave: debloat's (both directions at once), mach's download and upload.
#[derive(Debug)]
struct Rpms {
    debloat: f64,
    mach_down: f64,
    mach_up: f64,
}

fn mach() -> Option<String> {
    let m = std::env::var("DEBLOAT_MACH").unwrap_or_else(|_| "mach".into());
    match Command::new(&m).arg("--version").output() {
        Ok(o) if o.status.success() => Some(m),
        _ if std::env::var_os("CI").is_some() => {
            panic!("mach (cargo install cf-mach) is missing: scripts/long-tests.sh installs it")
        }
        _ => {
            println!("SKIP: mach is not installed (cargo install cf-mach)");
            None
        }
    }
}

fn measure(tag: &str, qdisc: &str, mach: &str) -> Rpms {
    let bed = up_with(tag, "10Mbit", "20ms", qdisc, qdisc);
    let dir = tempfile::tempdir().expect("tempdir");
    let cert = dir.path().join("cert.pem");
    let cert_s = cert.to_string_lossy().to_string();
    let https = format!("{}:4443", testbed::SERVER_V4);
    let mut srv = testbed::in_ns(
        &ns(&bed, "server"),
        &[
            EXE,
            "server",
            "--bind",
            &format!("{}:2112", testbed::SERVER_V4),
            "--https",
            &https,
            "--cert-out",
            &cert_s,
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .expect("server");
    std::thread::sleep(std::time::Duration::from_secs(1));
    let url = format!("https://{https}/.well-known/nq");
    let out = dir.path().join("out");
    let ours = testbed::in_ns(
        &ns(&bed, "client"),
        &[
            EXE,
            "test",
            "responsiveness",
            "--config",
            &url,
            "--ca",
            &cert_s,
            "--length",
            "60",
            "-o",
            &out.to_string_lossy(),
        ],
    )
    .output()
    .expect("debloat test");
    let theirs = testbed::in_ns(
        &ns(&bed, "client"),
        &[mach, "rpm", "--config", &url, "--disable-aim-scores"],
    )
    .env("SSL_CERT_FILE", &cert)
    .output()
    .expect("mach rpm");
    let _ = srv.kill();
    let _ = srv.wait();
    let t = text(&ours);
    println!(
        "{qdisc}, debloat:\n{t}\n{qdisc}, mach:\n{}",
        String::from_utf8_lossy(&theirs.stdout)
    );
    let debloat = t
        .lines()
        .find_map(|l| l.strip_prefix("responsiveness (IETF draft-09, HTTP/2 + TLS): "))
        .and_then(|r| r.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no RPM from debloat: {t}"));
    let j: serde_json::Value = serde_json::from_slice(&theirs.stdout)
        .unwrap_or_else(|e| panic!("mach's JSON: {e}: {}", text(&theirs)));
    let rpm = |d: &str| {
        j[d]["rpm"]
            .as_f64()
            .unwrap_or_else(|| panic!("mach {d}: {j}"))
    };
    Rpms {
        debloat,
        mach_down: rpm("download"),
        mach_up: rpm("upload"),
    }
}

#[test]
#[ignore = "long tier: scripts/long-tests.sh; dated results in docs/testing.md"]
fn two_clients_of_the_draft_grade_cake_and_a_deep_fifo_alike() {
    let Some(_one) = guard() else { return };
    let Some(mach) = mach() else { return };
    let cake = measure("k", "cake bandwidth 9500kbit", &mach);
    let fifo = measure("f", "pfifo limit 1000", &mach);
    println!("cake {cake:?}\nfifo {fifo:?}");
    for (what, c, f) in [
        ("debloat", cake.debloat, fifo.debloat),
        ("mach download", cake.mach_down, fifo.mach_down),
        ("mach upload", cake.mach_up, fifo.mach_up),
    ] {
        assert!(f < 300.0, "{what}: the FIFO is Poor: {f:.0} RPM");
        assert!(c >= 300.0, "{what}: cake is at least Fair: {c:.0} RPM");
    }
}
