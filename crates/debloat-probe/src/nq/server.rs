//! The server side of the IETF responsiveness test: `debloat server --https ADDR` answers
//! the configuration, the small and large objects and uploads over HTTP/2 (or HTTP/1.1) on
//! TLS, with a certificate from files or one made at start.

use super::{Config, LARGE_BYTES, NOTSENT_LOWAT, WELL_KNOWN};
use debloat_http::body::{self, Zeros};
use debloat_http::serve::{self, Handler, Limits};
use debloat_http::{Method, Request, StatusCode};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What the server has done, for its last line.
#[derive(Debug, Default)]
pub struct Counters {
    /// Requests answered.
    pub requests: AtomicU64,
    /// Bytes of bodies handed to the connections.
    pub sent: Arc<AtomicU64>,
    /// Bytes of uploads taken.
    pub received: Arc<AtomicU64>,
}

/// A running responsiveness server.
pub struct Running {
    /// The HTTP server (dropping it stops it).
    pub server: serve::Server,
    /// Its counters.
    pub counters: Arc<Counters>,
}

/// Connections at once: 16 load connections each way and the probes' fresh ones, which some
/// clients (Cloudflare's mach) keep open to the end of their test.
pub const MAX_CLIENTS: usize = 512;

/// Serve on `bind` with this TLS identity.
pub fn start(
    bind: SocketAddr,
    id: &debloat_http::tls::Identity,
) -> Result<Running, debloat_http::Error> {
    let tls = debloat_http::tls::server(id, &debloat_http::tls::ALPN)?;
    let listener = std::net::TcpListener::bind(bind)?;
    let counters = Arc::new(Counters::default());
    let c = Arc::clone(&counters);
    let handler: Handler = Arc::new(move |req| Box::pin(answer(req, Arc::clone(&c))));
    let limits = Limits {
        max_clients: MAX_CLIENTS,
        head_deadline: Duration::from_secs(10),
        max_head: 8192,
        conn_deadline: None,
        keep_alive: true,
        notsent_lowat: Some(NOTSENT_LOWAT),
    };
    let server = serve::spawn(listener, Some(tls), limits, handler, 2)?;
    Ok(Running { server, counters })
}

async fn answer(
    req: Request<debloat_http::Incoming>,
    c: Arc<Counters>,
) -> debloat_http::Response<body::Body> {
    c.requests.fetch_add(1, Ordering::Relaxed);
    let path = req.uri().path().to_string();
    let method = req.method().clone();
    match (method, path.as_str()) {
        (Method::GET, WELL_KNOWN | "/config") => {
            // The URLs point back at the host the client reached (HTTP/2's :authority, or
            // HTTP/1.1's Host).
            let host = req
                .uri()
                .authority()
                .map(|a| a.to_string())
                .or_else(|| {
                    req.headers()
                        .get(debloat_http::header::HOST)
                        .and_then(|h| h.to_str().ok())
                        .map(str::to_string)
                })
                .unwrap_or_else(|| "localhost".into());
            serve::answer(
                StatusCode::OK,
                "application/json",
                body::full(Config::served(&host)),
            )
        }
        (Method::GET, "/small") => {
            c.sent.fetch_add(1, Ordering::Relaxed);
            serve::answer(StatusCode::OK, "application/octet-stream", body::full("x"))
        }
        (Method::GET, "/large") => {
            let z = Zeros::new(LARGE_BYTES)
                .chunk(NOTSENT_LOWAT as usize)
                .counted(Arc::clone(&c.sent));
            serve::answer(StatusCode::OK, "application/octet-stream", z.boxed())
        }
        (Method::POST | Method::PUT, "/slurp") => {
            let n = body::drain(req.into_body(), Some(&c.received)).await;
            match n {
                Ok(n) => serve::answer(
                    StatusCode::OK,
                    "text/plain; charset=utf-8",
                    body::full(format!("{n}\n")),
                ),
                Err(_) => serve::status(StatusCode::BAD_REQUEST, "upload cut short\n"),
            }
        }
        (_, WELL_KNOWN | "/config" | "/small" | "/large") => {
            serve::status(StatusCode::METHOD_NOT_ALLOWED, "only GET here\n")
        }
        (_, "/slurp") => serve::status(StatusCode::METHOD_NOT_ALLOWED, "POST or PUT here\n"),
        _ => serve::status(
            StatusCode::NOT_FOUND,
            "try GET /.well-known/nq, GET /small, GET /large or POST /slurp\n",
        ),
    }
}
