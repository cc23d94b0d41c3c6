//! The HTTP side of the Prometheus endpoint and the live view: `GET /metrics` (OpenMetrics),
//! `GET /api/snapshot` (the snapshot as JSON), `GET /api/live` (the live view's history,
//! [`super::live`]) and `GET /` (the live page, `live.html`) answered
//! from the latest snapshot, anything else a 404, one request per connection.
//!
//! It is served by debloat's one HTTP stack ([`debloat_http`]: hyper on a one-thread tokio
//! runtime per listener). It faces whoever can reach its port, so nothing a client does may
//! hold it up or grow it: at most [`MAX_CLIENTS`] connections are served at once (the next
//! ones get a 503 at once); a request head must arrive whole within [`DEADLINE`] — however
//! slowly its bytes trickle — or the connection is closed (hyper closes it without an answer;
//! the hand-written server before it sent a 408), and within [`MAX_REQUEST`] bytes, or it is
//! answered 431; a malformed request is answered 400; a client that does not take its answer
//! is dropped when the connection's deadline ([`DEADLINE`] twice) passes.
//!
//! Built without the crate's `http` feature (the fuzz build), there is no listener: asking for
//! one is refused with that reason, and the rest of the gateway is unchanged.

use crate::snapshot::Snapshot;
#[cfg(feature = "http")]
use debloat_http::body::{self, Body};
#[cfg(feature = "http")]
use debloat_http::serve::{self, Handler, Limits};
#[cfg(feature = "http")]
use debloat_http::{Method, Response, StatusCode};
use std::io;
use std::net::SocketAddr;
#[cfg(feature = "http")]
use std::net::TcpListener;
use std::sync::{Arc, Mutex, PoisonError};
#[cfg(feature = "http")]
use std::time::Duration;

/// Connections served at once.
#[cfg(feature = "http")]
pub const MAX_CLIENTS: usize = 64;
/// Time for a whole request head to arrive.
#[cfg(feature = "http")]
pub const DEADLINE: Duration = Duration::from_secs(2);
/// Longest request head (request line and headers); hyper's smallest buffer.
#[cfg(feature = "http")]
pub const MAX_REQUEST: usize = 8192;

/// The HTTP listeners and the latest snapshot they serve.
pub struct Exporter {
    latest: Arc<Mutex<Published>>,
    /// (asked for, bound): a port 0 asked for is bound to a free one.
    addrs: Vec<(SocketAddr, SocketAddr)>,
    /// The running servers; dropping the exporter stops them.
    #[cfg(feature = "http")]
    servers: Vec<serve::Server>,
}

impl Exporter {
    /// Listen on `addr` and answer from a thread of its own.
    pub fn spawn(addr: SocketAddr) -> io::Result<Exporter> {
        let mut e = Exporter {
            latest: Arc::new(Mutex::new(Published::default())),
            addrs: Vec::new(),
            #[cfg(feature = "http")]
            servers: Vec::new(),
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

    #[cfg(not(feature = "http"))]
    fn listen(&mut self, addr: SocketAddr) -> io::Result<()> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("cannot listen on {addr}: this build of debloat-gateway has no HTTP listener (built without its `http` feature)"),
        ))
    }

    #[cfg(feature = "http")]
    fn listen(&mut self, addr: SocketAddr) -> io::Result<()> {
        let listener = TcpListener::bind(addr)?;
        let shared = Arc::clone(&self.latest);
        let handler: Handler = Arc::new(move |req| {
            let ok = req.method() == Method::GET;
            let path = req.uri().path().to_string();
            let shared = Arc::clone(&shared);
            Box::pin(async move { answer(ok, &path, &shared) })
        });
        let limits = Limits {
            max_clients: MAX_CLIENTS,
            head_deadline: DEADLINE,
            max_head: MAX_REQUEST,
            conn_deadline: Some(2 * DEADLINE),
            keep_alive: false,
            notsent_lowat: None,
        };
        let server = serve::spawn(listener, None, limits, handler, 1)?;
        self.addrs.push((addr, server.addr()));
        self.servers.push(server);
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

#[cfg(feature = "http")]
fn text(code: StatusCode, t: &'static str) -> Response<Body> {
    serve::status(code, t)
}

#[cfg(feature = "http")]
fn answer(get: bool, path: &str, latest: &Mutex<Published>) -> Response<Body> {
    if !get {
        return text(StatusCode::METHOD_NOT_ALLOWED, "only GET\n");
    }
    if path == "/" || path == "/index.html" {
        return serve::answer(
            StatusCode::OK,
            "text/html; charset=utf-8",
            body::full(LIVE_PAGE),
        );
    }
    if !["/metrics", "/api/snapshot", "/api/live"].contains(&path) {
        return text(
            StatusCode::NOT_FOUND,
            "try GET /metrics, GET /api/snapshot, GET /api/live or GET /\n",
        );
    }
    let (snap, live) = {
        let p = latest.lock().unwrap_or_else(PoisonError::into_inner);
        let live = (path == "/api/live").then(|| p.history.to_json());
        (p.latest.clone(), live)
    };
    let json = |s: String| serve::answer(StatusCode::OK, "application/json", body::full(s));
    match (path, snap, live) {
        (_, Some(_), Some(l)) => json(l),
        ("/metrics", Some(s), _) => {
            serve::answer(StatusCode::OK, OPENMETRICS, body::full(super::render(s)))
        }
        (_, Some(s), _) => json(serde_json::to_string(&s).unwrap_or_default()),
        (_, None, _) => text(
            StatusCode::SERVICE_UNAVAILABLE,
            "the gateway has not published its first numbers yet\n",
        ),
    }
}

/// The live view: one page, its script and styles inline, nothing fetched from elsewhere.
#[cfg(feature = "http")]
const LIVE_PAGE: &str = include_str!("live.html");
#[cfg(feature = "http")]
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[cfg(all(test, feature = "http"))]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::metrics::tests::snapshot;
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::time::Instant;

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
            live.starts_with("HTTP/1.1 200 OK\r\n")
                && live.to_lowercase().contains("\r\ncontent-type: text/html"),
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
        // Empty lines before a request are skipped (RFC 9112 §2.2), so they are a request
        // that never came: closed at the deadline, unanswered.
        let mut s = TcpStream::connect(e.addr()).unwrap();
        s.write_all(b"\r\n\r\n").unwrap();
        let (mut out, t) = (String::new(), Instant::now());
        let _ = s.read_to_string(&mut out);
        assert!(
            out.is_empty() && t.elapsed() < DEADLINE + Duration::from_secs(1),
            "{out}"
        );
        for junk in ["GARBAGE\r\n\r\n", "\u{0}\u{1}\u{2}\n\n", "GET\r\n\r\n"] {
            let mut s = TcpStream::connect(e.addr()).unwrap();
            s.write_all(junk.as_bytes()).unwrap();
            let mut out = String::new();
            s.read_to_string(&mut out).unwrap();
            assert!(
                ["HTTP/1.1 400", "HTTP/1.1 404", "HTTP/1.1 405"]
                    .iter()
                    .any(|c| out.starts_with(c)),
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
        // The trickler is cut off at the deadline, unanswered (hyper closes a late head).
        let (out, took) = trickle.join().unwrap();
        assert!(out.is_empty(), "{out}");
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
