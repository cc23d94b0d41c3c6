//! The HTTP side of the Prometheus endpoint and the live view: `GET /metrics` (OpenMetrics),
//! `GET /api/snapshot` (the snapshot as JSON), `GET /api/live` (the live view's history,
//! [`super::live`]) and `GET /` (the live page, `live.html`) answered
//! from the latest snapshot, anything else a 404, one request per connection.
//!
//! It faces whoever can reach its port, so nothing a client does may hold it up or grow it: each
//! connection is served by a thread of its own, at most [`MAX_CLIENTS`] at a time (the rest get
//! a 503 at once); a request must arrive whole within [`DEADLINE`] — however slowly its bytes
//! trickle — and within [`MAX_REQUEST`] bytes, or the connection is closed with a 408 or 431;
//! a client that does not read its answer is dropped after the same deadline.

use crate::snapshot::Snapshot;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Connections served at once.
pub const MAX_CLIENTS: usize = 64;
/// Time for a whole request to arrive (and for its answer to be taken).
pub const DEADLINE: Duration = Duration::from_secs(2);
/// Longest request head (request line and headers).
pub const MAX_REQUEST: usize = 8192;

/// The HTTP listeners and the latest snapshot they serve.
pub struct Exporter {
    latest: Arc<Mutex<Published>>,
    /// (asked for, bound): a port 0 asked for is bound to a free one.
    addrs: Vec<(SocketAddr, SocketAddr)>,
}

impl Exporter {
    /// Listen on `addr` and answer from threads of its own.
    pub fn spawn(addr: SocketAddr) -> io::Result<Exporter> {
        let mut e = Exporter {
            latest: Arc::new(Mutex::new(Published::default())),
            addrs: Vec::new(),
        };
        e.listen(addr)?;
        Ok(e)
    }

    /// One exporter for `--metrics` and `--http` (one listener if they are the same address);
    /// None if neither is given.
    pub fn spawn_on(
        metrics: Option<SocketAddr>,
        http: Option<SocketAddr>,
    ) -> io::Result<Option<Exporter>> {
        let mut wanted: Vec<SocketAddr> = metrics.into_iter().chain(http).collect();
        wanted.dedup();
        let Some((&first, rest)) = wanted.split_first() else {
            return Ok(None);
        };
        let mut e = Exporter::spawn(first)?;
        for &a in rest {
            e.listen(a)?;
        }
        Ok(Some(e))
    }

    fn listen(&mut self, addr: SocketAddr) -> io::Result<()> {
        let listener = TcpListener::bind(addr)?;
        let bound = listener.local_addr()?;
        let shared = Arc::clone(&self.latest);
        std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || accept(&listener, &shared))?;
        self.addrs.push((addr, bound));
        Ok(())
    }

    /// Where it listens (the first listener).
    pub fn addr(&self) -> SocketAddr {
        self.addrs[0].1
    }

    /// Where the listener asked for at `asked` is bound.
    pub fn addr_of(&self, asked: Option<SocketAddr>) -> Option<SocketAddr> {
        let asked = asked?;
        self.addrs
            .iter()
            .find(|(a, _)| *a == asked)
            .map(|(_, b)| *b)
    }

    /// Serve this snapshot from now on (and add it to the live view's history).
    pub fn publish(&self, snap: Snapshot) {
        let mut p = self.latest.lock().unwrap_or_else(PoisonError::into_inner);
        p.history.push(&snap);
        p.latest = Some(snap);
    }
}

/// What the listeners serve: the latest snapshot and the live view's history.
#[derive(Default)]
struct Published {
    latest: Option<Snapshot>,
    history: super::live::History,
}

fn accept(listener: &TcpListener, latest: &Arc<Mutex<Published>>) {
    let busy = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming().flatten() {
        if busy.load(Ordering::Acquire) >= MAX_CLIENTS {
            refuse(&stream);
            continue;
        }
        busy.fetch_add(1, Ordering::AcqRel);
        let (latest, done) = (Arc::clone(latest), Arc::clone(&busy));
        let served = std::thread::Builder::new()
            .name("metrics-client".into())
            .spawn(move || {
                let _ = answer(&stream, &latest);
                done.fetch_sub(1, Ordering::AcqRel);
            });
        if served.is_err() {
            busy.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// What went wrong with a request.
enum Bad {
    Slow,
    TooLong,
    Io,
}

/// Read a request head (up to the blank line) within the deadline and the size limit.
fn read_head(stream: &TcpStream, deadline: Instant) -> Result<String, Bad> {
    let mut head = Vec::with_capacity(256);
    let mut buf = [0u8; 1024];
    let mut r = stream;
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Bad::Slow);
        }
        stream.set_read_timeout(Some(left)).map_err(|_| Bad::Io)?;
        match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(Bad::Slow)
            }
            Err(_) => return Err(Bad::Io),
        }
        if head.len() > MAX_REQUEST {
            return Err(Bad::TooLong);
        }
    }
    Ok(String::from_utf8_lossy(&head).into_owned())
}

fn answer(stream: &TcpStream, latest: &Mutex<Published>) -> io::Result<()> {
    let deadline = Instant::now() + DEADLINE;
    stream.set_write_timeout(Some(DEADLINE))?;
    let head = match read_head(stream, deadline) {
        Ok(h) => h,
        Err(Bad::Slow) => {
            reply(
                stream,
                "408 Request Timeout",
                TEXT,
                "send the request at once\n",
            )?;
            linger(stream);
            return Ok(());
        }
        Err(Bad::TooLong) => {
            reply(
                stream,
                "431 Request Header Fields Too Large",
                TEXT,
                "request too long\n",
            )?;
            linger(stream);
            return Ok(());
        }
        Err(Bad::Io) => return Ok(()),
    };
    let mut parts = head.split_whitespace();
    let (method, path) = (parts.next(), parts.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or("");
    if method != Some("GET") {
        return reply(stream, "405 Method Not Allowed", TEXT, "only GET\n");
    }
    if path == "/" || path == "/index.html" {
        return reply(stream, "200 OK", "text/html; charset=utf-8", LIVE_PAGE);
    }
    if !["/metrics", "/api/snapshot", "/api/live"].contains(&path) {
        return reply(
            stream,
            "404 Not Found",
            TEXT,
            "try GET /metrics, GET /api/snapshot, GET /api/live or GET /\n",
        );
    }
    let (snap, live) = {
        let p = latest.lock().unwrap_or_else(PoisonError::into_inner);
        let live = (path == "/api/live").then(|| p.history.to_json());
        (p.latest.clone(), live)
    };
    if let (Some(json), true) = (live, snap.is_some()) {
        return reply(stream, "200 OK", "application/json", &json);
    }
    match (path, snap) {
        ("/metrics", Some(s)) => reply(stream, "200 OK", OPENMETRICS, &super::render(s)),
        (_, Some(s)) => reply(
            stream,
            "200 OK",
            "application/json",
            &serde_json::to_string(&s).unwrap_or_default(),
        ),
        (_, None) => reply(
            stream,
            "503 Service Unavailable",
            TEXT,
            "the gateway has not published its first numbers yet\n",
        ),
    }
}

/// The live view: one page, its script and styles inline, nothing fetched from elsewhere.
const LIVE_PAGE: &str = include_str!("live.html");
const TEXT: &str = "text/plain; charset=utf-8";
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Close after an error answer without resetting the connection: closing with unread bytes
/// would send a reset that can overtake the answer, so the rest of what the client is still
/// sending is read and dropped (at most 1 MiB, for at most 200 ms), as web servers' lingering
/// close does.
fn linger(stream: &TcpStream) {
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    let (mut r, mut buf, mut left) = (stream, [0u8; 8192], 1usize << 20);
    let until = Instant::now() + Duration::from_millis(200);
    while left > 0 && Instant::now() < until {
        match r.read(&mut buf) {
            Ok(n) if n > 0 => left = left.saturating_sub(n),
            _ => return,
        }
    }
}

/// A 503 without waiting for anything: what of the request has arrived is read first (closing
/// on unread bytes would reset the connection and lose the answer).
fn refuse(stream: &TcpStream) {
    let _ = stream.set_nonblocking(true);
    let mut r = stream;
    let mut buf = [0u8; 1024];
    while matches!(r.read(&mut buf), Ok(n) if n > 0) {}
    let _ = reply(
        stream,
        "503 Service Unavailable",
        TEXT,
        "too many clients; try again\n",
    );
    let _ = stream.shutdown(std::net::Shutdown::Write);
}

fn reply(stream: &TcpStream, status: &str, kind: &str, body: &str) -> io::Result<()> {
    let mut w = stream;
    write!(
        w,
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    w.flush()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::metrics::tests::snapshot;

    fn get(e: &Exporter, path: &str) -> String {
        let mut s = TcpStream::connect(e.addr()).unwrap();
        write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn the_listener_answers_metrics_the_live_page_and_its_json_and_404s_the_rest() {
        let e = Exporter::spawn("127.0.0.1:0".parse().unwrap()).unwrap();
        assert!(
            get(&e, "/metrics").starts_with("HTTP/1.1 503"),
            "nothing published yet"
        );
        e.publish(snapshot("fq_codel"));
        let page = get(&e, "/metrics");
        assert!(page.starts_with("HTTP/1.1 200 OK"), "{page}");
        assert!(page.contains(r#"debloat_gateway_frames_total{direction="egress",fate="sent"} 8"#));
        assert!(get(&e, "/nothing").starts_with("HTTP/1.1 404"));
        let live = get(&e, "/");
        assert!(
            live.starts_with("HTTP/1.1 200 OK\r\nContent-Type: text/html"),
            "{live}"
        );
        assert!(live.contains("<title>debloat gateway</title>"), "{live}");
        for fetch in ["src=\"http", "href=\"http", "@import", "url(http"] {
            assert!(!live.contains(fetch), "no asset from elsewhere: {fetch}");
        }
        let api = get(&e, "/api/snapshot");
        let body = api.split("\r\n\r\n").nth(1).unwrap();
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["egress"]["frames"]["sent"], 8, "{v}");
        for junk in [
            "\r\n\r\n",
            "GARBAGE\r\n\r\n",
            "\u{0}\u{1}\u{2}\n\n",
            "GET\r\n\r\n",
        ] {
            let mut s = TcpStream::connect(e.addr()).unwrap();
            s.write_all(junk.as_bytes()).unwrap();
            let mut out = String::new();
            s.read_to_string(&mut out).unwrap();
            assert!(
                out.starts_with("HTTP/1.1 404") || out.starts_with("HTTP/1.1 405"),
                "{junk:?}: {out}"
            );
        }
    }

    #[test]
    fn silent_slow_and_endless_clients_do_not_keep_a_scraper_waiting() {
        let e = Exporter::spawn("127.0.0.1:0".parse().unwrap()).unwrap();
        e.publish(snapshot("fq_codel"));
        // Twenty that connect and say nothing, one that trickles a byte every 100 ms.
        let silent: Vec<TcpStream> = (0..20)
            .map(|_| TcpStream::connect(e.addr()).unwrap())
            .collect();
        let trickle = std::thread::spawn({
            let a = e.addr();
            move || {
                let mut s = TcpStream::connect(a).unwrap();
                let t = Instant::now();
                for b in
                    b"GET /metrics HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                {
                    if s.write_all(&[*b]).is_err() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                let mut out = String::new();
                let _ = s.read_to_string(&mut out);
                (out, t.elapsed())
            }
        });
        // The scraper is answered at once, or told to come back (503) while all slots are held.
        let t = Instant::now();
        let page = get(&e, "/metrics");
        assert!(
            page.starts_with("HTTP/1.1 200") || page.starts_with("HTTP/1.1 503"),
            "{page}"
        );
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
        // After the deadline the silent ones are gone and the scraper gets the page.
        std::thread::sleep(DEADLINE + Duration::from_millis(300));
        let page = get(&e, "/metrics");
        assert!(page.starts_with("HTTP/1.1 200"), "{page}");
        let (out, took) = trickle.join().unwrap();
        assert!(out.starts_with("HTTP/1.1 408"), "{out}");
        assert!(took < DEADLINE + Duration::from_secs(2), "{took:?}");
        // A header that never ends is cut off at the size limit.
        let mut s = TcpStream::connect(e.addr()).unwrap();
        let endless = vec![b'a'; 64 * 1024];
        let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nX: ");
        let _ = s.write_all(&endless);
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        assert!(out.starts_with("HTTP/1.1 431"), "{out}");
        drop(silent);
    }
}
