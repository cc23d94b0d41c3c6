//! `debloat server`: the far end of a test. It answers irtt clients on UDP (2112 by default,
//! irtt's port) and serves bulk flows and responsiveness probes on TCP (the same port number),
//! under limits: concurrent flows, concurrent irtt sessions, test length, an optional HMAC key.
//! A malformed or unauthenticated request is answered `ERR <reason>` (TCP) or dropped (UDP),
//! and logged with its reason and the peer's address.
//!
//! The server only ever answers: UDP replies go to the request's own source for a session that
//! address opened, and TCP data flows on the connection the client made. No request can make
//! it send to a third address.

use crate::control::{self, Request};
use crate::irtt;
use socket2::SockRef;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Server settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Address for both the TCP listener and the irtt UDP socket.
    pub bind: SocketAddr,
    /// Most TCP connections (flows and probes) at once.
    pub max_flows: usize,
    /// Longest flow or irtt session granted.
    pub max_length: Duration,
    /// irtt limits (the key and duration here are overridden by the fields above).
    pub irtt: irtt::server::Limits,
    /// Shared key: irtt packets carry HMAC-MD5 with it, TCP requests a MAC over a nonce.
    pub hmac_key: Option<Vec<u8>>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: SocketAddr::from(([0, 0, 0, 0], 2112)),
            max_flows: 64,
            max_length: Duration::from_secs(600),
            irtt: irtt::server::Limits::default(),
            hmac_key: None,
        }
    }
}

/// Counters, readable while the server runs.
#[derive(Debug, Default)]
pub struct Counters {
    /// TCP requests served.
    pub flows: AtomicU64,
    /// TCP requests rejected.
    pub rejected: AtomicU64,
    /// Bytes received on upload flows.
    pub bytes_received: AtomicU64,
    /// Bytes sent on download flows.
    pub bytes_sent: AtomicU64,
    /// Download flows running now, by id: the client's address and the sending socket (for
    /// its TCP_INFO RTT, which a probe connection from the same host can ask for).
    downloads: Mutex<HashMap<u64, (IpAddr, TcpStream)>>,
    next_id: AtomicU64,
}

impl Counters {
    /// Smoothed RTTs (µs) of the download flows this server is sending to `ip` right now.
    pub fn download_rtts(&self, ip: IpAddr) -> Vec<u32> {
        let Ok(d) = self.downloads.lock() else {
            return Vec::new();
        };
        d.values()
            .filter(|(i, _)| *i == ip)
            .filter_map(|(_, s)| crate::sys::tcp_info(s).ok())
            .map(|t| t.rtt_us)
            .collect()
    }
}

/// A running server.
pub struct Running {
    /// The TCP address it listens on.
    pub tcp: SocketAddr,
    /// The UDP (irtt) address.
    pub udp: SocketAddr,
    /// Set to stop it.
    pub stop: Arc<AtomicBool>,
    /// What it has done.
    pub counters: Arc<Counters>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Running {
    /// Stop and wait for the listener threads (flows in progress end on their own).
    pub fn shutdown(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn log(msg: &str) {
    eprintln!("debloat server: {msg}");
}

fn nonce() -> String {
    let mut b = [0u8; 16];
    let _ = getrandom::fill(&mut b);
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Start the server: bind both sockets now (so errors come back here), serve on threads.
pub fn start(cfg: Config) -> std::io::Result<Running> {
    let listener = TcpListener::bind(cfg.bind)?;
    let tcp = listener.local_addr()?;
    // The irtt socket takes the same port number as the TCP listener got.
    let udp_sock = UdpSocket::bind(SocketAddr::new(cfg.bind.ip(), tcp.port()))?;
    let udp = udp_sock.local_addr()?;
    listener.set_nonblocking(true)?;
    let stop = Arc::new(AtomicBool::new(false));
    let counters = Arc::new(Counters::default());
    let mut limits = cfg.irtt.clone();
    limits.hmac_key = cfg.hmac_key.clone();
    limits.max_duration = cfg.max_length;
    let mut threads = Vec::new();
    {
        let stop = stop.clone();
        threads.push(std::thread::spawn(move || {
            if let Err(e) = irtt::server::serve(&udp_sock, limits, &stop) {
                log(&format!("irtt socket failed: {e}"));
            }
        }));
    }
    {
        let stop = stop.clone();
        let counters = counters.clone();
        let active = Arc::new(AtomicUsize::new(0));
        threads.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let (conn, peer) = match listener.accept() {
                    Ok(x) => x,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(20));
                        continue;
                    }
                    Err(e) => {
                        log(&format!("accept: {e}"));
                        std::thread::sleep(Duration::from_millis(100));
                        continue;
                    }
                };
                if active.load(Ordering::Relaxed) >= cfg.max_flows {
                    counters.rejected.fetch_add(1, Ordering::Relaxed);
                    log(&format!(
                        "{peer}: rejected: {} flows already running (--max-flows)",
                        cfg.max_flows
                    ));
                    let mut conn = conn;
                    let _ = conn.set_nonblocking(false);
                    let _ = conn.write_all(b"ERR server busy: too many flows, try later\n");
                    continue;
                }
                active.fetch_add(1, Ordering::Relaxed);
                let (cfg, counters, active, stop) =
                    (cfg.clone(), counters.clone(), active.clone(), stop.clone());
                std::thread::spawn(move || {
                    if let Err(e) = serve_conn(conn, peer, &cfg, &counters, &stop) {
                        log(&format!("{peer}: {e}"));
                    }
                    active.fetch_sub(1, Ordering::Relaxed);
                });
            }
        }));
    }
    Ok(Running {
        tcp,
        udp,
        stop,
        counters,
        threads,
    })
}

fn serve_conn(
    conn: TcpStream,
    peer: SocketAddr,
    cfg: &Config,
    counters: &Counters,
    stop: &AtomicBool,
) -> std::io::Result<()> {
    conn.set_nonblocking(false)?;
    conn.set_nodelay(true)?;
    let n = nonce();
    let mut w = conn.try_clone()?;
    w.write_all(format!("{} {n}\n", control::MAGIC).as_bytes())?;
    conn.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let req = match read_request(&mut reader, cfg, &n) {
        Ok(r) => r,
        Err(e) => {
            counters.rejected.fetch_add(1, Ordering::Relaxed);
            log(&format!("{peer}: rejected: {e}"));
            let _ = w.write_all(format!("ERR {e}\n").as_bytes());
            return Ok(());
        }
    };
    let max_ms = cfg.max_length.as_millis() as u64;
    match req {
        Request::Up { length_ms, .. } | Request::Down { length_ms, .. } if length_ms > max_ms => {
            reject(
                &mut w,
                peer,
                counters,
                format!("length {length_ms} ms is over this server's limit of {max_ms} ms (--max-length)"),
            )
        }
        Request::Up { length_ms, step_ms } => {
            w.write_all(b"OK\n")?;
            counters.flows.fetch_add(1, Ordering::Relaxed);
            upload_sink(reader, w, length_ms, step_ms, counters, stop)
        }
        Request::Down { length_ms, cc, tos } => {
            serve_download(w, peer, (length_ms, &cc, tos), counters, stop)
        }
        Request::Probe => {
            w.write_all(b"OK\n")?;
            counters.flows.fetch_add(1, Ordering::Relaxed);
            serve_probe(reader, w, peer, counters, stop)
        }
    }
}

/// The client's request line, checked (at most 256 bytes: a longer one is malformed, not a
/// memory sink).
fn read_request(
    reader: &mut BufReader<TcpStream>,
    cfg: &Config,
    nonce: &str,
) -> Result<Request, control::BadRequest> {
    let mut line = String::new();
    match reader.take(256).read_line(&mut line) {
        Ok(_) if !line.ends_with('\n') => Err(control::BadRequest(
            "request line missing or longer than 256 bytes".into(),
        )),
        Ok(_) => control::verify_line(&line, cfg.hmac_key.as_deref(), nonce),
        Err(e) => Err(control::BadRequest(format!("no request: {e}"))),
    }
}

/// Refuse a request: count it, log it, tell the client why.
fn reject(
    w: &mut TcpStream,
    peer: SocketAddr,
    counters: &Counters,
    why: String,
) -> std::io::Result<()> {
    counters.rejected.fetch_add(1, Ordering::Relaxed);
    log(&format!("{peer}: rejected: {why}"));
    w.write_all(format!("ERR {why}\n").as_bytes())
}

/// A download: set the client's congestion control and TOS on the socket (refusing what this
/// host cannot do), then send for the length, registered so probes can read its RTT.
fn serve_download(
    mut w: TcpStream,
    peer: SocketAddr,
    (length_ms, cc, tos): (u64, &str, u8),
    counters: &Counters,
    stop: &AtomicBool,
) -> std::io::Result<()> {
    let sock = SockRef::from(&w);
    if let Err(e) = sock.set_tcp_congestion(cc.as_bytes()) {
        let avail = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
            .unwrap_or_default();
        let why = format!(
            "congestion control `{cc}` not available here ({e}); available: {}",
            avail.trim()
        );
        return reject(&mut w, peer, counters, why);
    }
    let tos_set = if peer.is_ipv4() {
        sock.set_tos_v4(u32::from(tos))
    } else {
        sock.set_tclass_v6(u32::from(tos))
    };
    if let Err(e) = tos_set {
        return reject(&mut w, peer, counters, format!("cannot set TOS {tos}: {e}"));
    }
    w.write_all(b"OK\n")?;
    counters.flows.fetch_add(1, Ordering::Relaxed);
    let id = counters.next_id.fetch_add(1, Ordering::Relaxed);
    if let (Ok(mut d), Ok(c)) = (counters.downloads.lock(), w.try_clone()) {
        d.insert(id, (peer.ip(), c));
    }
    let r = download_source(w, length_ms, counters, stop);
    if let Ok(mut d) = counters.downloads.lock() {
        d.remove(&id);
    }
    r
}

/// A responsiveness probe connection: each byte in gets a line out, `P` and the RTTs (µs) of
/// the downloads this server is sending to the same host, so the client sees its loaded RTT
/// at the sender.
fn serve_probe(
    mut reader: BufReader<TcpStream>,
    mut w: TcpStream,
    peer: SocketAddr,
    counters: &Counters,
    stop: &AtomicBool,
) -> std::io::Result<()> {
    reader
        .get_ref()
        .set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut b = [0u8; 1];
    while !stop.load(Ordering::Relaxed) {
        match reader.read(&mut b) {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                let rtts: Vec<String> = counters
                    .download_rtts(peer.ip())
                    .iter()
                    .map(u32::to_string)
                    .collect();
                w.write_all(format!("P {}\n", rtts.join(" ")).as_bytes())?;
            }
        }
    }
    Ok(())
}

/// Receive an upload, writing a report line every step and a final one at the client's end of
/// stream (or at the length plus 5 s of grace, when the server cuts it).
fn upload_sink(
    mut reader: BufReader<TcpStream>,
    mut w: TcpStream,
    length_ms: u64,
    step_ms: u64,
    counters: &Counters,
    stop: &AtomicBool,
) -> std::io::Result<()> {
    let step = Duration::from_millis(step_ms.max(10));
    reader
        .get_ref()
        .set_read_timeout(Some((step / 4).max(Duration::from_millis(5))))?;
    let begin = Instant::now();
    let hard_end = begin + Duration::from_millis(length_ms) + Duration::from_secs(5);
    let mut next = begin + step;
    let mut total = 0u64;
    let mut buf = vec![0u8; 256 * 1024];
    let _ = crate::bulk::drain(&mut reader, &mut buf, |n, now| {
        total += n as u64;
        counters
            .bytes_received
            .fetch_add(n as u64, Ordering::Relaxed);
        if now >= next {
            let us = now.duration_since(begin).as_micros();
            if w.write_all(format!("R {us} {total}\n").as_bytes()).is_err() {
                return ControlFlow::Break(());
            }
            while next <= now {
                next += step;
            }
        }
        if now >= hard_end || stop.load(Ordering::Relaxed) {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    let us = begin.elapsed().as_micros();
    let _ = w.write_all(format!("E {us} {total}\n").as_bytes());
    Ok(())
}

/// Send for `length_ms` (the client may close earlier; that ends it too).
fn download_source(
    w: TcpStream,
    length_ms: u64,
    counters: &Counters,
    stop: &AtomicBool,
) -> std::io::Result<()> {
    let mut buf = vec![0u8; 128 * 1024];
    let _ = getrandom::fill(&mut buf);
    let end = Instant::now() + Duration::from_millis(length_ms);
    w.set_write_timeout(Some(Duration::from_millis(500)))?;
    let _ = crate::bulk::fill(&w, &buf, end, stop, |n| {
        counters.bytes_sent.fetch_add(n as u64, Ordering::Relaxed);
    });
    let _ = w.shutdown(std::net::Shutdown::Write);
    Ok(())
}
