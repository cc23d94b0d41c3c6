//! A client connection with its handshakes timed: TCP connect, then TLS (ALPN `h2` or
//! `http/1.1`), then an HTTP/2 or HTTP/1.1 sender. The responsiveness test's foreign probes
//! need the TCP and TLS times apart; its load connections keep the sender and, on HTTP/2, send
//! probes on it too ([`Sender::share`]).

use crate::body::Body;
use crate::Error;
use hyper::body::Incoming;
use hyper::{Request, Response, Uri};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where a URL points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// `https` (true) or `http`.
    pub tls: bool,
    /// The host as written (name or address, without brackets).
    pub host: String,
    /// The port (443 or 80 unless written).
    pub port: u16,
    /// The URL itself.
    pub uri: Uri,
}

impl Target {
    /// Parse `https://HOST[:PORT]/PATH` or `http://…`.
    pub fn parse(url: &str) -> Result<Target, Error> {
        let bad =
            |why: &str| Error::Url(format!("{url:?}: {why} (write https://HOST[:PORT]/PATH)"));
        let uri: Uri = url.parse().map_err(|e| bad(&format!("{e}")))?;
        let tls = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            Some(s) => return Err(bad(&format!("scheme {s:?} is not http or https"))),
            None => return Err(bad("no scheme")),
        };
        let host = uri
            .host()
            .ok_or_else(|| bad("no host"))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
        Ok(Target {
            tls,
            host,
            port,
            uri,
        })
    }

    /// The host's addresses.
    pub async fn resolve(&self) -> Result<Vec<SocketAddr>, Error> {
        let v: Vec<SocketAddr> = tokio::net::lookup_host((self.host.as_str(), self.port))
            .await?
            .collect();
        if v.is_empty() {
            return Err(Error::Url(format!("{}: no address", self.host)));
        }
        Ok(v)
    }
}

/// A request sender on one connection.
pub enum Sender {
    /// HTTP/2: many requests at once on the connection.
    H2(hyper::client::conn::http2::SendRequest<Body>),
    /// HTTP/1.1: one at a time.
    H1(hyper::client::conn::http1::SendRequest<Body>),
}

impl Sender {
    /// Send a request and wait for its answer's head.
    pub async fn send(&mut self, req: Request<Body>) -> Result<Response<Incoming>, Error> {
        match self {
            Sender::H2(s) => Ok(s.send_request(req).await?),
            Sender::H1(s) => {
                s.ready().await?;
                Ok(s.send_request(req).await?)
            }
        }
    }

    /// A second sender on the same connection, where the protocol multiplexes (HTTP/2).
    pub fn share(&self) -> Option<Sender> {
        match self {
            Sender::H2(s) => Some(Sender::H2(s.clone())),
            Sender::H1(_) => None,
        }
    }

    /// Whether the connection is HTTP/2.
    pub fn is_h2(&self) -> bool {
        matches!(self, Sender::H2(_))
    }
}

/// An open connection and how long its handshakes took.
pub struct Connection {
    /// TCP connect time.
    pub tcp: Duration,
    /// TLS handshake time (None without TLS).
    pub tls: Option<Duration>,
    /// Round trips the TLS handshake took: 1 for TLS 1.3, 2 for TLS 1.2 (0 without TLS).
    pub tls_round_trips: u32,
    /// The sender.
    pub sender: Sender,
}

/// Connect to `addr` (the server named `host`), TLS by `tls` if given, within `deadline`.
pub async fn connect(
    addr: SocketAddr,
    host: &str,
    tls: Option<Arc<rustls::ClientConfig>>,
    deadline: Duration,
) -> Result<Connection, Error> {
    connect_with(addr, host, tls, deadline, None).await
}

/// [`connect`], the socket holding at most `notsent_lowat` unsent bytes (TCP_NOTSENT_LOWAT)
/// and TLS and HTTP/2 buffering as much for sending, if given: a load connection's own buffers then
/// add little delay to what is sent after its data (a probe on the same HTTP/2 connection).
pub async fn connect_with(
    addr: SocketAddr,
    host: &str,
    tls: Option<Arc<rustls::ClientConfig>>,
    deadline: Duration,
    notsent_lowat: Option<u32>,
) -> Result<Connection, Error> {
    let late = || {
        Error::Io(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "connect: no answer in time",
        ))
    };
    let t0 = Instant::now();
    let tcp = tokio::time::timeout(deadline, tokio::net::TcpStream::connect(addr))
        .await
        .map_err(|_| late())??;
    let tcp_t = t0.elapsed();
    let _ = tcp.set_nodelay(true);
    if let Some(n) = notsent_lowat {
        let _ = socket2::SockRef::from(&tcp).set_tcp_notsent_lowat(n);
    }
    let Some(cfg) = tls else {
        let sender = h1(tcp).await?;
        return Ok(Connection {
            tcp: tcp_t,
            tls: None,
            tls_round_trips: 0,
            sender,
        });
    };
    let name = rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|e| Error::Url(format!("{host:?}: {e}")))?;
    let t1 = Instant::now();
    let s = tokio::time::timeout(
        deadline,
        tokio_rustls::TlsConnector::from(cfg).connect(name, tcp),
    )
    .await
    .map_err(|_| late())??;
    let tls_t = t1.elapsed();
    let mut s = s;
    if let Some(n) = notsent_lowat {
        s.get_mut().1.set_buffer_limit(Some(n as usize));
    }
    let tls_round_trips = match s.get_ref().1.protocol_version() {
        Some(rustls::ProtocolVersion::TLSv1_3) => 1,
        _ => 2,
    };
    let sender = if s.get_ref().1.alpn_protocol() == Some(b"h2") {
        let mut b = hyper::client::conn::http2::Builder::new(TokioExecutor::new());
        b.timer(TokioTimer::new()).adaptive_window(true);
        if let Some(n) = notsent_lowat {
            b.max_send_buf_size(n as usize);
        }
        let (send, conn) = b.handshake(TokioIo::new(s)).await?;
        tokio::spawn(conn);
        Sender::H2(send)
    } else {
        h1(s).await?
    };
    Ok(Connection {
        tcp: tcp_t,
        tls: Some(tls_t),
        tls_round_trips,
        sender,
    })
}

async fn h1<S>(io: S) -> Result<Sender, Error>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io)).await?;
    tokio::spawn(conn);
    Ok(Sender::H1(send))
}

/// A GET of `uri` with the Host (`:authority`) the server expects.
pub fn get(uri: &Uri) -> Request<Body> {
    request(hyper::Method::GET, uri, crate::body::empty())
}

/// A request of `method` to `uri` with this body.
pub fn request(method: hyper::Method, uri: &Uri, body: Body) -> Request<Body> {
    let mut r = Request::new(body);
    *r.method_mut() = method;
    *r.uri_mut() = uri.clone();
    if let Some(a) = uri.authority() {
        if let Ok(v) = hyper::header::HeaderValue::from_str(a.as_str()) {
            r.headers_mut().insert(hyper::header::HOST, v);
        }
    }
    r
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::serve::{self, Limits};
    use crate::tls::{self, Identity, ALPN};

    #[test]
    fn urls_parse_and_bad_ones_say_how_to_write_them() {
        let t = Target::parse("https://[2001:2::1]:4443/.well-known/nq").unwrap();
        assert_eq!((t.tls, t.host.as_str(), t.port), (true, "2001:2::1", 4443));
        assert_eq!(Target::parse("http://198.18.0.1/x").unwrap().port, 80);
        let e = Target::parse("ftp://x/y").expect_err("not http");
        assert!(e.to_string().contains("https://HOST[:PORT]/PATH"), "{e}");
    }

    #[test]
    fn a_tls_client_gets_h2_from_the_server_and_shares_the_connection() {
        let id = Identity::self_signed(&["localhost".into()]).unwrap();
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let limits = Limits {
            max_clients: 4,
            head_deadline: Duration::from_secs(2),
            max_head: 8192,
            conn_deadline: None,
            keep_alive: true,
            notsent_lowat: Some(65536),
        };
        let handler: serve::Handler = Arc::new(|req| {
            Box::pin(async move {
                let v = format!("{:?} {}", req.version(), req.uri().path());
                serve::answer(hyper::StatusCode::OK, "text/plain", crate::body::full(v))
            })
        });
        let server = serve::spawn(
            l,
            Some(tls::server(&id, &ALPN).unwrap()),
            limits,
            handler,
            1,
        )
        .unwrap();
        let rt = crate::runtime(1, "t").unwrap();
        rt.block_on(async {
            let cfg = tls::client(Some(&id.cert_pem), &ALPN).unwrap();
            let mut c = connect(
                server.addr(),
                "localhost",
                Some(cfg),
                Duration::from_secs(5),
            )
            .await
            .unwrap();
            assert!(c.sender.is_h2() && c.tls.is_some());
            let uri: Uri = format!("https://localhost:{}/small", server.addr().port())
                .parse()
                .unwrap();
            let mut other = c.sender.share().unwrap();
            let (a, b) = tokio::join!(c.sender.send(get(&uri)), other.send(get(&uri)));
            for r in [a.unwrap(), b.unwrap()] {
                let body = http_body_util::BodyExt::collect(r.into_body())
                    .await
                    .unwrap();
                assert_eq!(&body.to_bytes()[..], b"HTTP/2.0 /small");
            }
        });
    }
}
