//! The HTTP side of the Prometheus endpoint: `GET /metrics` answered from the latest snapshot,
//! anything else a 404, one request per connection.
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

/// The HTTP listener and the latest snapshot it serves.
pub struct Exporter {
    latest: Arc<Mutex<Option<Snapshot>>>,
    addr: SocketAddr,
}

impl Exporter {
    /// Listen on `addr` and answer from threads of its own.
    pub fn spawn(addr: SocketAddr) -> io::Result<Exporter> {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let latest: Arc<Mutex<Option<Snapshot>>> = Arc::new(Mutex::new(None));
        let shared = Arc::clone(&latest);
        std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || accept(&listener, &shared))?;
        Ok(Exporter { latest, addr })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serve this snapshot from now on.
    pub fn publish(&self, snap: Snapshot) {
        *self.latest.lock().unwrap_or_else(PoisonError::into_inner) = Some(snap);
    }
}

fn accept(listener: &TcpListener, latest: &Arc<Mutex<Option<Snapshot>>>) {
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

fn answer(stream: &TcpStream, latest: &Mutex<Option<Snapshot>>) -> io::Result<()> {
    let deadline = Instant::now() + DEADLINE;
    stream.set_write_timeout(Some(DEADLINE))?;
    let head = match read_head(stream, deadline) {
        Ok(h) => h,
        Err(Bad::Slow) => {
            reply(stream, "408 Request Timeout", "send the request at once\n")?;
            linger(stream);
            return Ok(());
        }
        Err(Bad::TooLong) => {
            reply(
                stream,
                "431 Request Header Fields Too Large",
                "request too long\n",
            )?;
            linger(stream);
            return Ok(());
        }
        Err(Bad::Io) => return Ok(()),
    };
    let mut parts = head.split_whitespace();
    let wants = (parts.next(), parts.next()) == (Some("GET"), Some("/metrics"));
    let snap = latest
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    match (wants, snap) {
        (true, Some(s)) => reply(stream, "200 OK", &super::render(s)),
        (true, None) => reply(
            stream,
            "503 Service Unavailable",
            "the gateway has not published its first numbers yet\n",
        ),
        _ => reply(stream, "404 Not Found", "try GET /metrics\n"),
    }
}

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
        "too many clients; try again\n",
    );
    let _ = stream.shutdown(std::net::Shutdown::Write);
}

fn reply(stream: &TcpStream, status: &str, body: &str) -> io::Result<()> {
    let mut w = stream;
    write!(
        w,
        "HTTP/1.1 {status}\r\nContent-Type: application/openmetrics-text; version=1.0.0; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
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
    fn the_listener_answers_get_metrics_and_404s_the_rest() {
        let e = Exporter::spawn("127.0.0.1:0".parse().unwrap()).unwrap();
        assert!(
            get(&e, "/metrics").starts_with("HTTP/1.1 503"),
            "nothing published yet"
        );
        e.publish(snapshot("fq_codel"));
        let page = get(&e, "/metrics");
        assert!(page.starts_with("HTTP/1.1 200 OK"), "{page}");
        assert!(page.contains(r#"debloat_gateway_frames_total{direction="egress",fate="sent"} 8"#));
        assert!(get(&e, "/").starts_with("HTTP/1.1 404"));
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
            assert!(out.starts_with("HTTP/1.1 404"), "{junk:?}: {out}");
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
