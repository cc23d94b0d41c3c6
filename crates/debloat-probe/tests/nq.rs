//! The IETF responsiveness test over HTTP/2 and TLS on loopback: debloat's client against
//! debloat's server, and curl (a second HTTP/2 and TLS implementation, nghttp2 and OpenSSL)
//! against debloat's server. Under CI a missing curl is a failure; elsewhere a SKIP line.

use debloat_probe::nq::{self, client, server, Config};
use std::process::Command;
use std::sync::atomic::AtomicBool;

fn start() -> (server::Running, tempfile::TempDir, std::path::PathBuf) {
    let id =
        debloat_http::tls::Identity::self_signed(&["localhost".into()]).expect("a certificate");
    let running = server::start("127.0.0.1:0".parse().expect("addr"), &id).expect("serves");
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &id.cert_pem).expect("writes the certificate");
    (running, dir, ca)
}

#[test]
fn debloats_client_measures_debloats_server_over_http2_and_tls() {
    let (running, _dir, ca) = start();
    let port = running.server.addr().port();
    let o = client::Options {
        config_url: format!("https://localhost:{port}{}", nq::WELL_KNOWN),
        ca_pem: Some(std::fs::read_to_string(&ca).expect("ca")),
        length_s: 3.0,
        interval_s: 1.0,
        max_flows: 16,
        progress: false,
    };
    let out = client::run(&o, &AtomicBool::new(false)).expect("the test runs");
    assert!(out.http2, "load connections on HTTP/2");
    assert_eq!(out.urls[0], format!("https://localhost:{port}/small"));
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    // 10 probes of each kind per second for 3 s: about 30; at least 20 answered.
    for (name, v) in [
        ("tcp_f", &out.tcp_f),
        ("tls_f", &out.tls_f),
        ("http_f", &out.http_f),
        ("http_l", &out.http_l),
    ] {
        assert!(
            v.len() >= 20 && v.len() <= 32,
            "{name}: {} samples",
            v.len()
        );
        assert!(v.iter().all(|s| s.1 > 0.0 && s.1 < 2000.0), "{name}: {v:?}");
    }
    // The ramp added a connection each way per interval while goodput climbed: 1, then 2, 3.
    assert_eq!(out.ramp.steps.first().map(|s| s.1), Some(1));
    assert!(out.ramp.flows >= 2, "{:?}", out.ramp.steps);
    let down: f64 = out.goodput.iter().map(|g| g.1).sum();
    let up: f64 = out.goodput.iter().map(|g| g.2).sum();
    assert!(
        down > 10.0 && up > 10.0,
        "loopback carries load both ways: {down} / {up}"
    );
    let r = out.rpm.expect("an RPM");
    // The draft's formula: the mean of two RPMs, foreign from three trimmed means.
    assert!(
        (r.rpm - (r.foreign_rpm + r.loaded_rpm) / 2.0).abs() < 1e-6,
        "{r:?}"
    );
    assert!(r.definition.contains("TM(tls_f)"), "{}", r.definition);
    assert!(
        running
            .counters
            .received
            .load(std::sync::atomic::Ordering::Relaxed)
            > 0
    );
}

#[test]
fn a_bad_config_url_or_an_untrusted_server_is_a_clear_error() {
    let (running, _dir, ca) = start();
    let port = running.server.addr().port();
    let mut o = client::Options {
        config_url: format!("https://localhost:{port}/nothing"),
        ca_pem: None,
        length_s: 1.0,
        interval_s: 1.0,
        max_flows: 1,
        progress: false,
    };
    let e = client::run(&o, &AtomicBool::new(false)).expect_err("untrusted");
    assert!(
        e.contains("certificate") || e.contains("UnknownIssuer"),
        "{e}"
    );
    o.ca_pem = Some(std::fs::read_to_string(&ca).expect("ca"));
    let e = client::run(&o, &AtomicBool::new(false)).expect_err("404");
    assert!(e.contains("404"), "{e}");
    o.config_url = "ftp://localhost/x".into();
    let e = client::run(&o, &AtomicBool::new(false)).expect_err("scheme");
    assert!(e.contains("https://HOST[:PORT]/PATH"), "{e}");
}

fn curl(args: &[&str]) -> Option<String> {
    match Command::new("curl").args(args).output() {
        Ok(o) => Some(String::from_utf8_lossy(&o.stdout).into_owned()),
        Err(_) if std::env::var_os("CI").is_some() => panic!("curl is missing under CI"),
        Err(_) => {
            println!("SKIP: curl is not installed");
            None
        }
    }
}

#[test]
fn curl_reads_the_config_and_objects_and_uploads_over_http2() {
    let (running, _dir, ca) = start();
    let base = format!("https://localhost:{}", running.server.addr().port());
    let ca = ca.to_string_lossy().into_owned();
    let common = ["--http2", "--silent", "--cacert", &ca, "--max-time", "10"];
    let Some(cfg) = curl(&[&common[..], &[&format!("{base}{}", nq::WELL_KNOWN)]].concat()) else {
        return;
    };
    let c = Config::parse(&cfg).expect("curl got the draft's JSON");
    assert_eq!(c.large, format!("{base}/large"));
    let v = curl(
        &[
            &common[..],
            &[
                "-o",
                "/dev/null",
                "-w",
                "%{http_version} %{size_download}",
                &c.small,
            ],
        ]
        .concat(),
    )
    .unwrap_or_default();
    assert_eq!(v, "2 1", "the small object is one byte, over HTTP/2");
    // 3 MB of zeros up: the answer counts them.
    let sent = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "head -c 3000000 /dev/zero | curl --http2 --silent --cacert {ca} --max-time 10 -X POST --data-binary @- {}",
            c.upload
        ))
        .output()
        .expect("sh");
    assert_eq!(String::from_utf8_lossy(&sent.stdout).trim(), "3000000");
    // The large object streams: a second of it is many megabytes.
    let v = curl(
        &[
            &common[..],
            &[
                "--max-time",
                "1",
                "-o",
                "/dev/null",
                "-w",
                "%{http_version} %{size_download}",
                &c.large,
            ],
        ]
        .concat(),
    )
    .unwrap_or_default();
    let bytes: u64 = v
        .split(' ')
        .nth(1)
        .and_then(|b| b.parse().ok())
        .unwrap_or(0);
    assert!(v.starts_with("2 ") && bytes > 5_000_000, "{v}");
}
