//! Interop with the real tools (Debian's irtt and flent; CI installs both): debloat's irtt
//! client against `irtt server`, stock `irtt client` against debloat's server, HMAC both ways,
//! RTTs agreeing within 0.2 ms on loopback; and debloat's data files loading in flent.
//! Without the tools these tests print a SKIP line; under CI (`CI` set) they fail instead.

use debloat_gateway::tools::host_stalls::Watch;
use debloat_probe::irtt::client::{self, Config, Live};
use debloat_probe::server;
use serde_json::Value;
use std::net::{SocketAddr, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn have(tool: &str) -> bool {
    let ok = Command::new(tool)
        .arg("--help")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "{tool} is not installed but CI must run this test (.ci/run installs it)"
        );
        println!("SKIP: {tool} not installed (apt-get install {tool})");
    }
    ok
}

fn free_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

struct Kill(Child);
impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn irtt_server(port: u16, hmac: Option<&str>) -> Kill {
    let mut c = Command::new("irtt");
    c.args(["server", "-b", &format!("127.0.0.1:{port}")]);
    if let Some(k) = hmac {
        c.arg(format!("--hmac={k}"));
    }
    let k = Kill(
        c.stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("irtt server"),
    );
    std::thread::sleep(Duration::from_millis(300));
    k
}

/// Our client's 2 s, 10 ms run against `server`: its statistics, every one of the 200 slots
/// sent or skipped for lateness (irtt skips a slot over half an interval late). A slot is
/// skipped only when the host stalled the machine 5 ms or more meanwhile (a CI run on a
/// stealing host sent 199): `host_stalls` watches.
fn our_probe(server: SocketAddr, hmac: Option<&[u8]>) -> client::Stats {
    let mut c = Config::new(server, Duration::from_millis(10), Duration::from_secs(2));
    c.hmac_key = hmac.map(<[u8]>::to_vec);
    c.open_timeouts = vec![Duration::from_millis(500), Duration::from_secs(1)];
    let stop = AtomicBool::new(false);
    let watch = Watch::start();
    let st = client::run(&c, &stop, &Live::default())
        .expect("probe runs")
        .stats();
    let host = watch.stop();
    assert_eq!(st.sent as u64 + st.timer_misses, 200, "{st:?}");
    assert!(
        st.timer_misses == 0 || host.longest_pause_ms >= 5.0,
        "{} slots skipped without a stall of 5 ms (meanwhile {host})",
        st.timer_misses
    );
    st
}

/// Stock irtt client's JSON for a 2 s, 10 ms run against `target`.
fn stock_client(target: &str, hmac: Option<&str>) -> Value {
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("irtt.json");
    let mut c = Command::new("irtt");
    c.args([
        "client",
        "-i",
        "10ms",
        "-d",
        "2s",
        "-Q",
        "--timeouts=500ms,1s",
    ]);
    if let Some(k) = hmac {
        c.arg(format!("--hmac={k}"));
    }
    let st = c
        .arg("-o")
        .arg(&out)
        .arg(target)
        .status()
        .expect("irtt client");
    assert!(st.success(), "irtt client failed against {target}");
    serde_json::from_str(&std::fs::read_to_string(&out).expect("json")).expect("irtt json")
}

#[test]
fn our_client_against_stock_irtt_server() {
    let _s = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if !have("irtt") {
        return;
    }
    let port = free_port();
    let _srv = irtt_server(port, None);
    let st = our_probe(SocketAddr::from(([127, 0, 0, 1], port)), None);
    assert_eq!(st.received, st.sent, "{st:?}");
    assert_eq!(
        st.server_received.map(|n| n as usize),
        Some(st.sent),
        "the server's received count comes back"
    );
    assert_eq!(st.upstream_loss_percent, Some(0.0));
    // Timestamps from the server: one-way delays exist and lie within the RTT on one host.
    assert_eq!(st.send_delay.n, st.sent);
    assert!(
        st.send_delay.mean > 0.0 && st.send_delay.mean < st.rtt.mean + 1e6,
        "{st:?}"
    );

    let port = free_port();
    let _srv = irtt_server(port, Some("sekrit"));
    let st = our_probe(SocketAddr::from(([127, 0, 0, 1], port)), Some(b"sekrit"));
    assert_eq!(st.received, st.sent, "HMAC accepted by stock irtt: {st:?}");
}

#[test]
fn stock_irtt_client_against_our_server_agrees_on_rtt() {
    let _s = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if !have("irtt") {
        return;
    }
    let srv = server::start(server::Config {
        bind: "127.0.0.1:0".parse().expect("addr"),
        ..Default::default()
    })
    .expect("server");
    // Both clients run at the same time against the same server, so whatever else the machine
    // is doing delays both alike and the comparison is of the clients, not of two moments.
    let target = srv.udp.to_string();
    let (j, ours) = std::thread::scope(|s| {
        let stock = s.spawn(|| stock_client(&target, None));
        let ours = our_probe(srv.udp, None);
        (stock.join().expect("stock irtt client"), ours)
    });
    let stats = &j["stats"];
    // Stock irtt's own timer may skip a slot or two (its timer_misses); none may be lost.
    assert!(
        stats["packets_sent"].as_u64().unwrap_or(0) >= 190,
        "{stats}"
    );
    assert_eq!(stats["packets_received"], stats["packets_sent"], "{stats}");
    assert_eq!(stats["upstream_loss_percent"], 0.0);
    let stock_median_ms = stats["rtt"]["median"].as_f64().expect("median") / 1e6;
    // The server stamped both ends: stock irtt computed a server processing time.
    assert_eq!(
        stats["server_processing_time"]["n"], stats["packets_received"],
        "{stats}"
    );
    let our_median_ms = ours.rtt.median / 1e6;
    println!("loopback RTT median: irtt client {stock_median_ms:.3} ms, debloat client {our_median_ms:.3} ms");
    assert!(
        (stock_median_ms - our_median_ms).abs() <= 0.2,
        "irtt {stock_median_ms} ms vs debloat {our_median_ms} ms"
    );
    // `irtt client -n` (no test) is answered.
    let st = Command::new("irtt")
        .args(["client", "-n", "-Q", "--timeouts=500ms"])
        .arg(srv.udp.to_string())
        .status()
        .expect("irtt");
    assert!(st.success());
    srv.shutdown();

    // With a key: stock irtt with the key works, without it gets no session.
    let srv = server::start(server::Config {
        bind: "127.0.0.1:0".parse().expect("addr"),
        hmac_key: Some(b"sekrit".to_vec()),
        ..Default::default()
    })
    .expect("server");
    let j = stock_client(&srv.udp.to_string(), Some("sekrit"));
    assert!(
        j["stats"]["packets_received"].as_u64().unwrap_or(0) >= 190,
        "{}",
        j["stats"]
    );
    assert_eq!(j["stats"]["packets_received"], j["stats"]["packets_sent"]);
    let st = Command::new("irtt")
        .args(["client", "-d", "1s", "-Q", "--timeouts=300ms,300ms"])
        .arg(srv.udp.to_string())
        .stderr(Stdio::null())
        .status()
        .expect("irtt");
    assert!(
        !st.success(),
        "an unauthenticated client must get no session"
    );
    srv.shutdown();
}

#[test]
fn data_files_load_in_flent() {
    let _s = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if !have("flent") {
        return;
    }
    let srv = server::start(server::Config {
        bind: "127.0.0.1:0".parse().expect("addr"),
        ..Default::default()
    })
    .expect("server");
    let o = debloat_probe::catalog::Options {
        length_s: 2.0,
        delay_s: 1.0,
        servers: vec![("127.0.0.1".into(), srv.tcp)],
        ..Default::default()
    };
    let dir = tempfile::tempdir().expect("tmp");
    for test in ["rrul", "tcp_nup", "voip", "bufferbloat", "responsiveness"] {
        let p = debloat_probe::catalog::plan(test, &o).expect("plan");
        let out = debloat_probe::run::run(&p, &Default::default(), &AtomicBool::new(false));
        let file = debloat_probe::results::flent_file(&out, "interop");
        let path = dir.path().join(format!("{test}.flent.gz"));
        std::fs::write(
            &path,
            debloat_report::flent_write::gzip(&file).expect("gzip"),
        )
        .expect("write");
        let o = Command::new("flent")
            .arg("-i")
            .arg(&path)
            .args(["-f", "csv"])
            .output()
            .expect("flent");
        let csv = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "flent failed on {test}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        // flent prints its banner first; the CSV header starts with the test's name as the
        // file gives it (`bufferbloat` is written as flent's rrul_be_nflows).
        let header = csv
            .lines()
            .find(|l| l.starts_with(&format!("{},", p.flent_name)))
            .unwrap_or_default();
        let want = match test {
            "rrul" => "TCP download EF",
            "tcp_nup" => "TCP upload::4",
            "bufferbloat" => "TCP upload BE::4",
            "responsiveness" => "TCP download BE::1",
            _ => "VoIP::delay",
        };
        assert!(
            header.contains(want),
            "{test}: flent's csv lacks {want}: {header}"
        );
        assert!(csv.lines().count() > 10, "{test}: {csv}");
    }
    srv.shutdown();
}
