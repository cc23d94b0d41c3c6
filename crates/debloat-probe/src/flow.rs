//! TCP bulk flows on real sockets, client side: flent's netperf TCP_STREAM (upload) and
//! TCP_MAERTS (download) replaced by `debloat server`'s `up` and `down` requests.
//!
//! Throughput is sampled from what the receiver counted: for a download the client counts the
//! bytes it read, every step; for an upload the server reports its count every step on the
//! same connection (`R <µs> <bytes>`), timed on the server's clock from the stream's start and
//! placed on the client's timeline at the moment the server accepted the flow. The sender's
//! congestion control and TOS byte are set on the sending socket (the server's for downloads).

use crate::control::{self, Request};
use socket2::{Domain, Protocol, SockRef, Socket, Type};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Which way the data goes (client → server is up): the core's one direction.
pub use debloat_core::Direction;

/// One flow of a test.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FlowSpec {
    /// flent's series name, e.g. `TCP upload BE`.
    pub name: String,
    /// Direction.
    pub dir: Direction,
    /// Congestion control of the sender (None = the sender's default).
    pub cc: Option<String>,
    /// TOS byte of the sender.
    pub tos: u8,
    /// Start, seconds after the test's start.
    pub start_s: f64,
    /// Length, seconds.
    pub length_s: f64,
    /// Server's TCP address.
    pub server: SocketAddr,
    /// Held at `start_s` until the runner releases it (the responsiveness test's load ramp);
    /// once released it runs until `start_s + length_s`.
    pub gated: bool,
}

/// What a running flow shares with the runner.
#[derive(Debug, Default)]
pub struct FlowLive {
    /// Bytes the receiver has counted so far.
    pub bytes: AtomicU64,
    /// (seconds since the test's start, bytes received so far), one per step.
    pub samples: Mutex<Vec<(f64, u64)>>,
    /// (seconds since the test's start, smoothed RTT µs at the sender), for uploads.
    pub rtts: Mutex<Vec<(f64, u32)>>,
    /// Retransmitted segments (uploads: from the client's TCP_INFO).
    pub retransmits: AtomicU64,
    /// Why the flow failed, if it did.
    pub error: Mutex<Option<String>>,
    /// Set by the runner to start a gated flow.
    pub release: AtomicBool,
}

fn push<T>(m: &Mutex<Vec<T>>, v: T) {
    match m.lock() {
        Ok(mut g) => g.push(v),
        Err(p) => p.into_inner().push(v),
    }
}

/// Connect, read the greeting and send the request; returns the stream once the server said OK.
pub fn request(
    server: SocketAddr,
    req: &Request,
    key: Option<&[u8]>,
    before_connect: impl FnOnce(&Socket) -> std::io::Result<()>,
) -> Result<(TcpStream, BufReader<TcpStream>), String> {
    request_timed(server, req, key, before_connect).map(|(s, r, _)| (s, r))
}

/// [`request`], also returning how long the TCP handshake took.
pub fn request_timed(
    server: SocketAddr,
    req: &Request,
    key: Option<&[u8]>,
    before_connect: impl FnOnce(&Socket) -> std::io::Result<()>,
) -> Result<(TcpStream, BufReader<TcpStream>, Duration), String> {
    let sock = Socket::new(
        Domain::for_address(server),
        Type::STREAM,
        Some(Protocol::TCP),
    )
    .map_err(|e| format!("socket: {e}"))?;
    before_connect(&sock).map_err(|e| e.to_string())?;
    let handshake = Instant::now();
    sock.connect_timeout(&server.into(), Duration::from_secs(5))
        .map_err(|e| format!("connect to {server}: {e} (is `debloat server` running there?)"))?;
    let handshake = handshake.elapsed();
    let stream: TcpStream = sock.into();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    let mut reader = BufReader::new(stream.try_clone().map_err(|e| e.to_string())?);
    let mut greeting = String::new();
    (&mut reader)
        .take(128)
        .read_line(&mut greeting)
        .map_err(|e| format!("{server}: no greeting: {e}"))?;
    let mut words = greeting.split_whitespace();
    let (Some(control::MAGIC), Some(nonce)) = (words.next(), words.next()) else {
        return Err(format!(
            "{server} is not a debloat server (it said {:?})",
            greeting.trim()
        ));
    };
    let mut w = stream.try_clone().map_err(|e| e.to_string())?;
    w.write_all(control::signed_line(req, key, nonce).as_bytes())
        .map_err(|e| e.to_string())?;
    let mut answer = String::new();
    (&mut reader)
        .take(512)
        .read_line(&mut answer)
        .map_err(|e| format!("{server}: no answer: {e}"))?;
    match answer.trim_end() {
        "OK" => Ok((stream, reader, handshake)),
        a => Err(format!(
            "{server} refused `{}`: {}",
            req.line(),
            a.trim_start_matches("ERR ")
        )),
    }
}

/// Run one flow to its end (or until `stop`); `t0` is the test's start.
pub fn run(
    spec: &FlowSpec,
    step: Duration,
    key: Option<&[u8]>,
    t0: Instant,
    stop: &AtomicBool,
    live: &FlowLive,
) {
    let start = t0 + Duration::from_secs_f64(spec.start_s);
    while Instant::now() < start {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        std::thread::sleep((start - Instant::now()).min(Duration::from_millis(20)));
    }
    let released;
    let spec = if spec.gated {
        let end = t0 + Duration::from_secs_f64(spec.start_s + spec.length_s);
        while !live.release.load(Ordering::Relaxed) {
            // Never released: the flow's window ends and it never ran.
            if stop.load(Ordering::Relaxed) || Instant::now() >= end {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        // Released late: run for what is left of the planned window.
        let now = since(t0);
        let left = spec.start_s + spec.length_s - now;
        if left < 0.1 {
            return;
        }
        released = FlowSpec {
            start_s: now,
            length_s: left,
            ..spec.clone()
        };
        &released
    } else {
        spec
    };
    let r = match spec.dir {
        Direction::Up => upload(spec, step, key, t0, stop, live),
        Direction::Down => download(spec, step, key, t0, stop, live),
    };
    if let Err(e) = r {
        match live.error.lock() {
            Ok(mut g) => *g = Some(e),
            Err(p) => *p.into_inner() = Some(e),
        }
    }
}

fn since(t0: Instant) -> f64 {
    t0.elapsed().as_secs_f64()
}

fn upload(
    spec: &FlowSpec,
    step: Duration,
    key: Option<&[u8]>,
    t0: Instant,
    stop: &AtomicBool,
    live: &FlowLive,
) -> Result<(), String> {
    let length_ms = (spec.length_s * 1000.0).round() as u64;
    let req = Request::Up {
        length_ms,
        step_ms: step.as_millis() as u64,
    };
    let (stream, mut reader) = request(spec.server, &req, key, |s| {
        if let Some(cc) = &spec.cc {
            s.set_tcp_congestion(cc.as_bytes()).map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!("congestion control `{cc}` not available on this host ({e}); see /proc/sys/net/ipv4/tcp_available_congestion_control"),
                )
            })?;
        }
        set_tos(s, spec.server, spec.tos)
    })?;
    let accepted = since(t0);
    let end = Instant::now() + Duration::from_millis(length_ms);
    // Reports arrive on the reverse direction; a thread reads them while this one sends.
    push(&live.samples, (accepted, 0));
    reader
        .get_ref()
        .set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| e.to_string())?;
    let reports = std::thread::scope(|scope| {
        let h = scope.spawn(|| read_reports(&mut reader, accepted, live));
        send_until(&stream, end, stop, t0, live);
        let _ = stream.shutdown(std::net::Shutdown::Write);
        h.join().ok().flatten()
    });
    match reports {
        None => Err(format!(
            "{}: the server reported no received bytes",
            spec.name
        )),
        Some((_, false)) if !stop.load(Ordering::Relaxed) => Err(ended_early(spec, accepted, t0)),
        Some(_) => Ok(()),
    }
}

/// A flow the server ended before its time (the server died, or the path went away): what
/// was measured until then is kept, and the run says so.
fn ended_early(spec: &FlowSpec, began_s: f64, t0: Instant) -> String {
    format!(
        "the server ended the flow {:.1} s into its {:.1} s (it stopped or the path failed); what arrived before is kept",
        since(t0) - began_s,
        spec.length_s
    )
}

/// The server's reports of an upload (`R µs bytes` each step, `E µs bytes` at the end), as
/// samples of bytes received; returns the last count and whether the end (`E`) came (`None`:
/// the server reported nothing).
fn read_reports(
    reader: &mut BufReader<TcpStream>,
    accepted: f64,
    live: &FlowLive,
) -> Option<(u64, bool)> {
    let mut line = String::new();
    let mut last = None;
    loop {
        line.clear();
        match (&mut *reader).take(128).read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let w: Vec<&str> = line.split_whitespace().collect();
        if let [kind @ ("R" | "E"), us, bytes] = w.as_slice() {
            if let (Ok(us), Ok(bytes)) = (us.parse::<u64>(), bytes.parse::<u64>()) {
                let t = accepted + us as f64 / 1e6;
                live.bytes.store(bytes, Ordering::Relaxed);
                push(&live.samples, (t, bytes));
                last = Some((bytes, *kind == "E"));
                if *kind == "E" {
                    break;
                }
            }
        }
    }
    last
}

/// Send random bytes until `end` or `stop`, sampling the socket's RTT and retransmissions
/// every 100 ms.
fn send_until(stream: &TcpStream, end: Instant, stop: &AtomicBool, t0: Instant, live: &FlowLive) {
    let mut buf = vec![0u8; 128 * 1024];
    let _ = getrandom::fill(&mut buf);
    let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
    let mut next_rtt = Instant::now();
    let _ = crate::bulk::fill(stream, &buf, end, stop, |_| {
        if Instant::now() >= next_rtt {
            if let Ok(i) = crate::sys::tcp_info(stream) {
                push(&live.rtts, (since(t0), i.rtt_us));
                live.retransmits
                    .store(u64::from(i.total_retrans), Ordering::Relaxed);
            }
            next_rtt += Duration::from_millis(100);
        }
    });
}

pub(crate) fn set_tos(s: &Socket, server: SocketAddr, tos: u8) -> std::io::Result<()> {
    if tos == 0 {
        return Ok(());
    }
    if server.is_ipv4() {
        s.set_tos_v4(u32::from(tos))
    } else {
        s.set_tclass_v6(u32::from(tos))
    }
}

fn download(
    spec: &FlowSpec,
    step: Duration,
    key: Option<&[u8]>,
    t0: Instant,
    stop: &AtomicBool,
    live: &FlowLive,
) -> Result<(), String> {
    let length_ms = (spec.length_s * 1000.0).round() as u64;
    let req = Request::Down {
        length_ms,
        cc: spec.cc.clone().unwrap_or_else(|| "cubic".into()),
        tos: spec.tos,
    };
    // The client's own TOS marks its ACKs, as netperf's `-Y local,remote` pair does.
    let (stream, mut reader) = request(spec.server, &req, key, |s| {
        set_tos(s, spec.server, spec.tos)
    })?;
    let _ = SockRef::from(&stream).set_recv_buffer_size(4 << 20);
    let began = Instant::now();
    let end = began + Duration::from_millis(length_ms) + Duration::from_secs(2);
    reader
        .get_ref()
        .set_read_timeout(Some((step / 4).max(Duration::from_millis(5))))
        .map_err(|e| e.to_string())?;
    let mut next = began + step;
    let mut total = 0u64;
    let mut buf = vec![0u8; 256 * 1024];
    push(&live.samples, (since(t0), 0));
    crate::bulk::drain(&mut reader, &mut buf, |n, now| {
        total += n as u64;
        live.bytes.store(total, Ordering::Relaxed);
        if now >= next {
            push(&live.samples, (since(t0), total));
            while next <= now {
                next += step;
            }
        }
        if now >= end || stop.load(Ordering::Relaxed) {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .map_err(|e| format!("{}: {e}", spec.name))?;
    push(&live.samples, (since(t0), total));
    // The server closes when the flow's time is up; closing well before it means it stopped.
    let planned = Duration::from_millis(length_ms).saturating_sub(Duration::from_millis(500));
    if began.elapsed() < planned && !stop.load(Ordering::Relaxed) {
        let began_s = (began - t0).as_secs_f64();
        return Err(ended_early(spec, began_s, t0));
    }
    Ok(())
}

/// A flow and its live state, for the runner.
pub type Running = (FlowSpec, Arc<FlowLive>);
