//! `debloat server` under faults, on loopback through real sockets: irtt sessions beyond its
//! limit are refused and their slots come back; garbage, oversized, truncated, unsigned and
//! spoofed datagrams get no answer at all; a client that vanishes without closing loses its
//! session to the idle timeout; TCP clients that vanish mid-flow leave no thread behind. After
//! each, a real client is served.

use debloat_probe::irtt::{client, server::Limits};
use debloat_probe::server;
use irtt_proto::{encode_request, Params, RequestToEncode, PROTOCOL_VERSION};
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

fn start(limits: Limits, hmac: Option<&[u8]>) -> server::Running {
    server::start(server::Config {
        bind: "127.0.0.1:0".parse().expect("addr"),
        irtt: limits,
        hmac_key: hmac.map(<[u8]>::to_vec),
        ..Default::default()
    })
    .expect("server starts")
}

/// One irtt client for `secs` at 50 ms: Ok(replies received) or the refusal.
fn irtt(to: SocketAddr, secs: f64, key: Option<&[u8]>) -> Result<usize, String> {
    let mut c = client::Config::new(to, Duration::from_millis(50), Duration::from_secs_f64(secs));
    c.open_timeouts = vec![Duration::from_secs(1)];
    c.hmac_key = key.map(<[u8]>::to_vec);
    let r = client::run(&c, &AtomicBool::new(false), &client::Live::default());
    r.map(|p| p.stats().received).map_err(|e| e.to_string())
}

fn open_packet(key: Option<&[u8]>) -> Vec<u8> {
    let p = Params {
        protocol_version: PROTOCOL_VERSION,
        duration_ns: 30_000_000_000,
        interval_ns: 50_000_000,
        received_stats: irtt_proto::ReceivedStats::Both,
        stamp_at: irtt_proto::StampAt::Both,
        clock: irtt_proto::Clock::Both,
        ..Params::default()
    };
    encode_request(
        RequestToEncode::Open {
            params: &p,
            no_test: false,
        },
        key,
    )
    .expect("encode")
}

/// Whether anything comes back to `u` within 300 ms.
fn answered(u: &UdpSocket) -> bool {
    u.set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    let mut b = [0u8; 2048];
    u.recv(&mut b).is_ok()
}

fn udp() -> UdpSocket {
    UdpSocket::bind("127.0.0.1:0").expect("udp")
}

#[test]
fn irtt_sessions_beyond_the_limit_are_refused_and_their_slots_come_back() {
    let srv = start(
        Limits {
            max_sessions: 3,
            ..Limits::default()
        },
        None,
    );
    let results: Vec<Result<usize, String>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..6)
            .map(|_| s.spawn(|| irtt(srv.udp, 1.5, None)))
            .collect();
        hs.into_iter()
            .map(|h| h.join().expect("client thread"))
            .collect()
    });
    let ok = results.iter().filter(|r| r.is_ok()).count();
    let refused = results
        .iter()
        .filter(|r| matches!(r, Err(e) if e.contains("refused")))
        .count();
    println!("6 clients at a limit of 3: {ok} served, {refused} refused: {results:?}");
    assert_eq!((ok, refused), (3, 3), "{results:?}");
    // The three that ran closed their sessions: three more are served.
    let again: Vec<_> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..3)
            .map(|_| s.spawn(|| irtt(srv.udp, 1.0, None)))
            .collect();
        hs.into_iter()
            .map(|h| h.join().expect("client thread"))
            .collect()
    });
    assert!(
        again.iter().all(|r| matches!(r, Ok(n) if *n >= 15)),
        "{again:?}"
    );
    srv.shutdown();
}

#[test]
fn datagrams_that_are_not_a_clients_get_no_answer() {
    let key: &[u8] = b"shared secret";
    let srv = start(Limits::default(), Some(key));
    let u = udp();
    let open = open_packet(Some(key));
    let cases: [(&str, Vec<u8>); 6] = [
        (
            "random bytes",
            (0..200u32)
                .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
                .collect(),
        ),
        ("a 65,000-byte datagram", vec![0x14; 65_000]),
        ("an empty datagram", Vec::new()),
        ("a truncated open", open[..open.len() / 2].to_vec()),
        ("an open without the key", open_packet(None)),
        (
            "an open signed with another key",
            open_packet(Some(b"guess")),
        ),
    ];
    for (what, d) in &cases {
        u.send_to(d, srv.udp).expect("send");
        assert!(!answered(&u), "{what} was answered");
    }
    // A session opened from one address; its token sent from another (a spoofed source): the
    // opener is answered, the other address never.
    u.send_to(&open, srv.udp).expect("send");
    let mut b = [0u8; 2048];
    u.set_read_timeout(Some(Duration::from_secs(1)))
        .expect("timeout");
    let n = u.recv(&mut b).expect("the open is answered");
    let reply = irtt_proto::decode_open_reply(&b[..n], Some(key)).expect("open reply");
    let echo = encode_request(
        RequestToEncode::Echo {
            token: reply.token,
            sequence: 0,
            params: &reply.params,
            payload: &[],
        },
        Some(key),
    )
    .expect("echo");
    let spoofer = udp();
    spoofer.send_to(&echo, srv.udp).expect("send");
    assert!(
        !answered(&spoofer),
        "a token from another address was answered"
    );
    u.send_to(&echo, srv.udp).expect("send");
    assert!(answered(&u), "the opener was not answered");
    // And a real client, with the key, is served.
    let n = irtt(srv.udp, 1.0, Some(key)).expect("a real client");
    assert!(n >= 15, "{n} replies");
    srv.shutdown();
}

#[test]
fn a_client_that_vanishes_loses_its_session_to_the_idle_timeout() {
    let limits = Limits {
        max_sessions: 1,
        idle_timeout: Duration::from_secs(1),
        ..Limits::default()
    };
    let srv = start(limits, None);
    // Opens the only slot for 30 s, then never sends again.
    let ghost = udp();
    ghost.send_to(&open_packet(None), srv.udp).expect("send");
    assert!(answered(&ghost), "the open was not answered");
    let refused = irtt(srv.udp, 0.5, None);
    assert!(
        matches!(&refused, Err(e) if e.contains("refused")),
        "{refused:?}"
    );
    std::thread::sleep(Duration::from_millis(1500));
    let n = irtt(srv.udp, 1.0, None).expect("the slot came back");
    assert!(n >= 15, "{n} replies");
    srv.shutdown();
}

#[test]
fn tcp_clients_that_vanish_mid_flow_leave_nothing_behind() {
    let threads = || std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count());
    let srv = start(Limits::default(), None);
    let before = threads();
    for req in ["down 10000 cubic 0", "up 10000 200", "probe"] {
        for _ in 0..5 {
            let mut s = std::net::TcpStream::connect(srv.tcp).expect("connect");
            let mut greeting = String::new();
            std::io::BufRead::read_line(&mut std::io::BufReader::new(&s), &mut greeting)
                .expect("greeting");
            std::io::Write::write_all(&mut s, format!("{req}\n").as_bytes()).expect("request");
            std::thread::sleep(Duration::from_millis(100));
            drop(s); // gone, mid-flow, without a word
        }
    }
    let served = srv
        .counters
        .flows
        .load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(served, 15, "every request was taken up");
    // The server notices within its timeouts and its flow threads end.
    let t = std::time::Instant::now();
    while threads() > before && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(100));
    }
    println!(
        "threads: {before} before, {} after {:?}",
        threads(),
        t.elapsed()
    );
    assert!(
        threads() <= before,
        "{} threads left of {before}",
        threads()
    );
    assert!(srv
        .counters
        .download_rtts("127.0.0.1".parse().expect("ip"))
        .is_empty());
    let n = irtt(srv.udp, 1.0, None).expect("still serving");
    assert!(n >= 15, "{n} replies");
    srv.shutdown();
}
