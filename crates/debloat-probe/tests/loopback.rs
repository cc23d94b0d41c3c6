//! rrul against `debloat server` on loopback, end to end through real sockets: every series
//! flent's rrul has, throughput equal (within 5 %) to what the receiving end counted, latency
//! samples at the configured step with no gaps, irtt's timer error at most 100 µs, and the
//! server's limits and refusals.

use debloat_gateway::tools::host_stalls::{HostStalls, Watch};
use debloat_probe::catalog::{plan, Options};
use debloat_probe::results;
use debloat_probe::run::{run, RunOptions};
use debloat_probe::server;
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Tests here load the CPUs; they run one at a time so the timer test measures the timer.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn start(cfg: server::Config) -> server::Running {
    server::start(server::Config {
        bind: "127.0.0.1:0".parse().expect("addr"),
        ..cfg
    })
    .expect("server starts")
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// The flent file of an rrul run, after checking that it has every series flent's rrul has, none
/// empty, and that nothing failed except ICMP where this process may not ping (not root and
/// unprivileged ICMP not allowed), which it says.
fn every_rrul_series(out: &debloat_probe::run::Outcome, title: &str) -> Value {
    let errors = results::errors(out);
    let icmp_ok = out.icmp.iter().all(|(_, r)| r.is_ok());
    if icmp_ok {
        assert!(errors.is_empty(), "{errors:?}");
    } else {
        assert!(!is_root(), "ICMP failed as root: {errors:?}");
        println!(
            "SKIP (part): ICMP series not checked: not root and unprivileged ping not allowed"
        );
        assert!(errors.iter().all(|e| e.contains("ICMP")), "{errors:?}");
    }
    let file = results::flent_file(out, title);
    let res = file["results"].as_object().expect("results");
    let mut want: Vec<String> = ["BE", "BK", "CS5", "EF"]
        .iter()
        .flat_map(|m| [format!("TCP upload {m}"), format!("TCP download {m}")])
        .collect();
    want.extend(["Ping (ms) UDP EF", "Ping (ms) UDP BK", "Ping (ms) UDP BE"].map(String::from));
    if icmp_ok {
        want.push("Ping (ms) ICMP".into());
    }
    for name in &want {
        let n = res
            .get(name)
            .and_then(Value::as_array)
            .map(|a| a.iter().filter(|v| !v.is_null()).count())
            .unwrap_or(0);
        assert!(n > 0, "series {name} missing or empty in {title}");
    }
    file
}

#[test]
fn rrul_on_loopback_has_every_series_counts_what_was_received_and_has_no_gaps() {
    let _serial = serial();
    let srv = start(server::Config::default());
    let o = Options {
        length_s: 3.0,
        delay_s: 1.0,
        step_s: 0.2,
        servers: vec![("127.0.0.1".into(), srv.tcp)],
        ..Options::default()
    };
    let p = plan("rrul", &o).expect("plan");
    let stop = AtomicBool::new(false);
    let out = run(&p, &RunOptions::default(), &stop);
    let file = every_rrul_series(&out, "loopback");
    assert_eq!(
        file["x_values"].as_array().expect("x").len(),
        26,
        "0..5 s every 0.2 s"
    );

    // Throughput = what the receiver counted. Uploads: the series sums to the bytes the server
    // itself counted. Downloads: the series sums to what the client read, and that is what the
    // server wrote less what was still in flight (socket buffers) when the flow ended.
    let integral = |f: &debloat_probe::run::FlowResult| -> f64 {
        let mut prev = f.samples[0].0;
        results::throughput(f)
            .iter()
            .map(|s| {
                let b = s.1 * 1e6 / 8.0 * (s.0 - prev);
                prev = s.0;
                b
            })
            .sum()
    };
    let (mut up_series, mut down_series) = (0.0, 0.0);
    for f in &out.flows {
        let counted = results::received_bytes(f) as f64;
        assert!(counted > 1e6, "{} moved only {counted} bytes", f.spec.name);
        let i = integral(f);
        assert!(
            (i - counted).abs() <= 0.05 * counted,
            "{}: series {i} vs counted {counted}",
            f.spec.name
        );
        match f.spec.dir {
            debloat_probe::flow::Direction::Up => up_series += i,
            debloat_probe::flow::Direction::Down => down_series += i,
        }
    }
    let server_received = srv.counters.bytes_received.load(Ordering::Relaxed) as f64;
    let server_sent = srv.counters.bytes_sent.load(Ordering::Relaxed) as f64;
    assert!(
        (up_series - server_received).abs() <= 0.05 * server_received,
        "uploads: series {up_series} vs server counted {server_received}"
    );
    assert!(
        down_series <= server_sent * 1.0001 && down_series >= 0.95 * server_sent,
        "downloads: series {down_series} vs server sent {server_sent}"
    );

    // Latency samples at the step, with no gaps: every irtt probe sent one packet per step for
    // the whole run, got every reply on loopback, and its timer stayed within 100 µs.
    for (spec, r) in &out.udp {
        let pr = r.as_ref().expect("probe ran");
        let st = pr.stats();
        let want = (spec.length_s / 0.2).round() as usize;
        assert!(
            st.sent + 1 >= want && st.sent <= want + 1,
            "{}: sent {} of {want}",
            spec.name,
            st.sent
        );
        assert_eq!(st.received, st.sent, "{}: lost on loopback", spec.name);
        for w in pr.trips.windows(2) {
            assert_eq!(w[1].seq, w[0].seq + 1);
            let gap = (w[1].send_mono - w[0].send_mono) as f64 / 1e9;
            assert!((gap - 0.2).abs() < 0.02, "{}: send gap {gap} s", spec.name);
        }
        // Under 16 loopback flows the two CPUs are saturated copying bytes, so the timer is
        // only reported here; its ≤ 100 µs bound is checked without load below.
        println!(
            "{}: mean timer error {:.1} µs under load",
            spec.name,
            st.timer_error.mean / 1e3
        );
        let grid = file["results"][&spec.name].as_array().expect("grid");
        assert!(
            grid[..grid.len() - 1].iter().all(|v| !v.is_null()),
            "{}: gap in the grid",
            spec.name
        );
    }
    let s = results::summary(&out, Default::default());
    assert_eq!(
        s["grade"]["letter"].as_str().map(str::len).map(|l| l <= 2),
        Some(true),
        "{s}"
    );
    srv.shutdown();
}

#[test]
fn isochronous_probes_keep_time_within_100_us_on_loopback() {
    let _serial = serial();
    // Timer accuracy is the machine's as much as the code's. The test makes its own conditions:
    // under SCHED_FIFO (root), which the client's threads inherit, another process keeping a
    // core busy does not decide it. Without the privilege the accuracy is printed, not asserted.
    // What SCHED_FIFO cannot hold off is the hypervisor taking the vCPU away (a CI run read a
    // mean of 120.9 µs on a host stealing the CPU): a watch notes each such stall, the sends
    // scheduled or made during one (±1 ms) are left out of the mean judged, and a mean that still
    // fails while the host stole 5 % of a CPU or more is printed as not judged.
    let rt = debloat_gateway::sys::realtime(10);
    let srv = start(server::Config::default());
    let o = Options {
        length_s: 3.0,
        step_s: 0.01,
        servers: vec![("127.0.0.1".into(), srv.tcp)],
        ..Options::default()
    };
    let mut p = plan("ping", &o).expect("plan");
    p.icmp.clear();
    let stop = AtomicBool::new(false);
    let watch = Watch::start();
    let out = run(&p, &RunOptions::default(), &stop);
    let host = watch.stop();
    let (_, r) = &out.udp[0];
    let probe = r.as_ref().expect("probe ran");
    let st = probe.stats();
    let (kept, mean) = timer_error_unstalled(probe, &host);
    println!(
        "irtt timer: mean error {:.1} µs over {} sends at 10 ms, {} misses; {:.1} µs over the \
         {kept} the host did not stall (meanwhile {host})",
        st.timer_error.mean / 1e3,
        st.sent,
        st.timer_misses,
        mean / 1e3,
    );
    // Every 10 ms slot is sent, or skipped for being half an interval late: only a stall of
    // 5 ms or more makes it so late.
    let slots = st.sent as u64 + st.timer_misses;
    assert!(
        slots >= 299,
        "sent {} and skipped {}",
        st.sent,
        st.timer_misses
    );
    assert!(
        st.timer_misses == 0 || host.longest_pause_ms >= 5.0,
        "{} slots skipped without a stall of 5 ms (meanwhile {host})",
        st.timer_misses
    );
    match rt {
        Ok(()) => {
            let ok = kept >= 200 && mean <= 100_000.0;
            let figure = format!("mean timer error {mean:.0} ns over {kept} unstalled sends");
            assert!(ok || host.decides_timing(), "{figure} under SCHED_FIFO");
            if !ok {
                println!("NOT JUDGED, the host decided it: {figure} (meanwhile {host})");
            }
        }
        Err(e) => {
            assert!(std::env::var_os("CI").is_none(), "CI runs as root: {e}");
            println!("SKIP the timer-accuracy assertion: {e}");
        }
    }
    srv.shutdown();
}

/// How many sends no host stall touched (from their scheduled time to their sending, ±1 ms),
/// and their mean timer error, ns.
fn timer_error_unstalled(
    p: &debloat_probe::irtt::client::Probe,
    host: &HostStalls,
) -> (usize, f64) {
    let errs: Vec<f64> = p
        .trips
        .iter()
        .filter(|t| {
            let late = t.send_mono - t.scheduled;
            let sent = t.send_wall as f64 / 1e9;
            !host.touches(sent - late.max(0) as f64 / 1e9, sent, 1e-3)
        })
        .map(|t| (t.send_mono - t.scheduled).abs() as f64)
        .collect();
    let mean = errs.iter().sum::<f64>() / errs.len().max(1) as f64;
    (errs.len(), mean)
}

fn greeting(s: &mut BufReader<TcpStream>) -> String {
    let mut g = String::new();
    s.read_line(&mut g).expect("greeting");
    g.split_whitespace().nth(1).expect("nonce").to_string()
}

fn ask(addr: std::net::SocketAddr, line: &str) -> String {
    let c = TcpStream::connect(addr).expect("connect");
    let mut r = BufReader::new(c.try_clone().expect("clone"));
    greeting(&mut r);
    (&c).write_all(line.as_bytes()).expect("write");
    let mut a = String::new();
    r.read_line(&mut a).expect("answer");
    a
}

#[test]
fn server_rejects_malformed_unauthenticated_and_overlong_requests() {
    let _serial = serial();
    let srv = start(server::Config {
        max_length: Duration::from_secs(10),
        ..Default::default()
    });
    let a = ask(srv.tcp, "sideways 12\n");
    assert!(a.starts_with("ERR") && a.contains("`sideways`"), "{a}");
    let a = ask(srv.tcp, "up 20000 200\n");
    assert!(a.starts_with("ERR") && a.contains("--max-length"), "{a}");
    let a = ask(srv.tcp, "down 1000 no_such_cc 0\n");
    assert!(
        a.starts_with("ERR") && a.contains("no_such_cc") && a.contains("available"),
        "{a}"
    );
    let a = ask(srv.tcp, "probe mac=00112233445566778899aabbccddeeff\n");
    assert!(a.starts_with("ERR") && a.contains("no key"), "{a}");
    assert_eq!(srv.counters.rejected.load(Ordering::Relaxed), 4);
    srv.shutdown();

    let srv = start(server::Config {
        hmac_key: Some(b"sekrit".to_vec()),
        ..Default::default()
    });
    let a = ask(srv.tcp, "probe\n");
    assert!(a.starts_with("ERR") && a.contains("requires"), "{a}");
    // With the key, the same request is served.
    let r = debloat_probe::flow::request(
        srv.tcp,
        &debloat_probe::control::Request::Probe,
        Some(b"sekrit"),
        |_| Ok(()),
    );
    assert!(r.is_ok(), "{:?}", r.err());
    let r = debloat_probe::flow::request(
        srv.tcp,
        &debloat_probe::control::Request::Probe,
        Some(b"wrong"),
        |_| Ok(()),
    );
    assert!(r.expect_err("wrong key").contains("bad HMAC"));
    srv.shutdown();
}

#[test]
fn server_limits_concurrent_flows() {
    let _serial = serial();
    let srv = start(server::Config {
        max_flows: 2,
        ..Default::default()
    });
    let hold: Vec<_> = (0..2)
        .map(|_| {
            debloat_probe::flow::request(
                srv.tcp,
                &debloat_probe::control::Request::Probe,
                None,
                |_| Ok(()),
            )
            .expect("within the limit")
        })
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    let c = TcpStream::connect(srv.tcp).expect("connect");
    let mut a = String::new();
    BufReader::new(c).read_line(&mut a).expect("answer");
    assert!(a.starts_with("ERR server busy"), "{a}");
    drop(hold);
    srv.shutdown();
}

#[test]
fn stopping_early_keeps_what_was_measured() {
    let _serial = serial();
    let srv = start(server::Config::default());
    let o = Options {
        length_s: 30.0,
        delay_s: 0.5,
        servers: vec![("127.0.0.1".into(), srv.tcp)],
        ..Options::default()
    };
    let p = plan("tcp_1up", &o).expect("plan");
    let stop = AtomicBool::new(false);
    let t = std::time::Instant::now();
    let out = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_secs(2));
            stop.store(true, Ordering::Relaxed);
        });
        run(&p, &RunOptions::default(), &stop)
    });
    assert!(
        t.elapsed() < Duration::from_secs(8),
        "took {:?}",
        t.elapsed()
    );
    assert!(out.interrupted);
    assert!(out.elapsed_s < 5.0);
    let f = &out.flows[0];
    assert!(
        results::received_bytes(f) > 1_000_000,
        "the flow's data up to the stop is kept"
    );
    let file: Value = results::flent_file(&out, "");
    assert!(file["metadata"]["NOTE"]
        .as_str()
        .expect("note")
        .contains("stopped early"));
    srv.shutdown();
}

/// The same client and server over IPv6 (`::1`): TCP flows both ways, irtt probes and ICMPv6.
#[test]
fn rrul_over_ipv6_loopback_has_every_series_and_loses_no_probe() {
    let _serial = serial();
    let srv = match server::start(server::Config {
        bind: "[::1]:0".parse().expect("addr"),
        ..server::Config::default()
    }) {
        Ok(s) => s,
        Err(e) => {
            println!("SKIP: no IPv6 loopback here (binding [::1]:0 failed: {e})");
            return;
        }
    };
    assert!(srv.tcp.is_ipv6() && srv.udp.is_ipv6());
    let o = Options {
        length_s: 2.0,
        delay_s: 1.0,
        step_s: 0.2,
        servers: vec![("::1".into(), srv.tcp)],
        ..Options::default()
    };
    let p = plan("rrul", &o).expect("plan");
    let stop = AtomicBool::new(false);
    let out = run(&p, &RunOptions::default(), &stop);
    every_rrul_series(&out, "loopback-v6");
    for f in &out.flows {
        let counted = results::received_bytes(f);
        assert!(
            counted > 1_000_000,
            "{} moved only {counted} B over IPv6",
            f.spec.name
        );
    }
    for (spec, r) in &out.udp {
        let st = r.as_ref().expect("probe ran").stats();
        assert!(st.sent >= 9, "{}: sent only {}", spec.name, st.sent);
        assert_eq!(st.received, st.sent, "{}: lost on ::1", spec.name);
    }
    let server_received = srv.counters.bytes_received.load(Ordering::Relaxed);
    assert!(
        server_received > 4_000_000,
        "server counted {server_received} B"
    );
    srv.shutdown();
}
