//! A server facing whoever can reach its port: each connection a tokio task, at most
//! [`Limits::max_clients`] served at once (the next ones get a `503` at once and are closed),
//! a request head that must arrive whole within [`Limits::head_deadline`] and within
//! [`Limits::max_head`] bytes (hyper closes a connection whose head is late, and answers a
//! head too long with `431`), and, where a server wants it, a deadline on a whole connection
//! (a client that does not take its answer is dropped). Over TLS, ALPN picks HTTP/2 or
//! HTTP/1.1; without TLS it is HTTP/1.1.

use crate::body::{self, Body};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{Notify, Semaphore};

/// What one server allows its clients.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections served at once.
    pub max_clients: usize,
    /// Time for a request head (and a TLS handshake) to arrive whole.
    pub head_deadline: Duration,
    /// Longest request head, bytes (hyper's floor is 8192).
    pub max_head: usize,
    /// Longest a connection may last, request and answer; None: as long as it is used.
    pub conn_deadline: Option<Duration>,
    /// Serve more than one request per HTTP/1.1 connection.
    pub keep_alive: bool,
    /// Unsent bytes each accepted socket may hold (TCP_NOTSENT_LOWAT), if set, and the most
    /// TLS (rustls' buffer limit) and an HTTP/2 stream (hyper's `max_send_buf_size`) buffer
    /// for sending the same: keeps the sender's own buffers from adding delay to what it
    /// sends after them.
    pub notsent_lowat: Option<u32>,
}

/// A boxed future of an answer.
pub type Reply = Pin<Box<dyn Future<Output = Response<Body>> + Send>>;
/// What answers a request.
pub type Handler = Arc<dyn Fn(Request<Incoming>) -> Reply + Send + Sync>;

/// A running server: its address; dropping it (or [`Server::stop`]) stops accepting and ends
/// its connections.
pub struct Server {
    addr: SocketAddr,
    stop: Arc<Notify>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stop accepting, end the connections and wait for the server's thread.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Serve `listener` from a thread of its own with a runtime of `threads` workers.
pub fn spawn(
    listener: std::net::TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    limits: Limits,
    handler: Handler,
    threads: usize,
) -> std::io::Result<Server> {
    let addr = listener.local_addr()?;
    listener.set_nonblocking(true)?;
    let rt = crate::runtime(threads, "http")?;
    let stop = Arc::new(Notify::new());
    let halt = Arc::clone(&stop);
    let thread = std::thread::Builder::new()
        .name("http".into())
        .spawn(move || {
            rt.block_on(async move {
                let Ok(l) = tokio::net::TcpListener::from_std(listener) else {
                    return;
                };
                tokio::select! {
                    _ = accept(l, tls, limits, handler) => {}
                    _ = halt.notified() => {}
                }
            });
            rt.shutdown_background();
        })?;
    Ok(Server {
        addr,
        stop,
        thread: Some(thread),
    })
}

async fn accept(
    l: tokio::net::TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    limits: Limits,
    handler: Handler,
) {
    let slots = Arc::new(Semaphore::new(limits.max_clients));
    // Refusals are cheap but not free: as many at once as clients served, the rest dropped.
    let refusals = Arc::new(Semaphore::new(limits.max_clients));
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    loop {
        let Ok((stream, _)) = l.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        if let Some(n) = limits.notsent_lowat {
            let _ = socket2::SockRef::from(&stream).set_tcp_notsent_lowat(n);
        }
        let (acceptor, handler) = (acceptor.clone(), Arc::clone(&handler));
        match Arc::clone(&slots).try_acquire_owned() {
            Ok(slot) => {
                tokio::spawn(async move {
                    let work = connection(stream, acceptor, limits, handler);
                    match limits.conn_deadline {
                        Some(d) => drop(tokio::time::timeout(d, work).await),
                        None => work.await,
                    }
                    drop(slot);
                });
            }
            Err(_) => {
                let Ok(slot) = Arc::clone(&refusals).try_acquire_owned() else {
                    continue;
                };
                tokio::spawn(async move {
                    let busy: Handler = Arc::new(|_| {
                        Box::pin(async {
                            status(
                                StatusCode::SERVICE_UNAVAILABLE,
                                "too many clients; try again\n",
                            )
                        })
                    });
                    let refuse = Limits {
                        keep_alive: false,
                        ..limits
                    };
                    let work = connection(stream, acceptor, refuse, busy);
                    let _ = tokio::time::timeout(Duration::from_secs(1), work).await;
                    drop(slot);
                });
            }
        }
    }
}

/// A plain-text answer with this status.
pub fn status(code: StatusCode, text: &'static str) -> Response<Body> {
    answer(code, "text/plain; charset=utf-8", body::full(text))
}

/// An answer with this status, content type and body, never cached.
pub fn answer(code: StatusCode, kind: &str, body: Body) -> Response<Body> {
    let mut r = Response::new(body);
    *r.status_mut() = code;
    if let Ok(v) = hyper::header::HeaderValue::from_str(kind) {
        r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    r.headers_mut().insert(
        hyper::header::CACHE_CONTROL,
        hyper::header::HeaderValue::from_static("no-store"),
    );
    r
}

async fn connection(
    stream: tokio::net::TcpStream,
    tls: Option<tokio_rustls::TlsAcceptor>,
    limits: Limits,
    handler: Handler,
) {
    match tls {
        None => h1(stream, limits, handler).await,
        Some(acceptor) => {
            let Ok(Ok(mut s)) =
                tokio::time::timeout(limits.head_deadline, acceptor.accept(stream)).await
            else {
                return;
            };
            if let Some(n) = limits.notsent_lowat {
                // rustls' own buffer of records not yet written (64 KiB by default) is one
                // more queue in front of the socket.
                s.get_mut().1.set_buffer_limit(Some(n as usize));
            }
            if s.get_ref().1.alpn_protocol() == Some(b"h2") {
                h2(s, limits, handler).await;
            } else {
                h1(s, limits, handler).await;
            }
        }
    }
}

fn service(
    handler: Handler,
) -> impl hyper::service::Service<
    Request<Incoming>,
    Response = Response<Body>,
    Error = Infallible,
    Future = impl Future<Output = Result<Response<Body>, Infallible>> + Send,
> + Clone {
    hyper::service::service_fn(move |req| {
        let h = Arc::clone(&handler);
        async move { Ok::<_, Infallible>(h(req).await) }
    })
}

async fn h1<S>(io: S, limits: Limits, handler: Handler)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.head_deadline)
        .max_buf_size(limits.max_head.max(8192))
        .keep_alive(limits.keep_alive)
        .serve_connection(TokioIo::new(io), service(handler))
        .await;
}

async fn h2<S>(io: S, limits: Limits, handler: Handler)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut b = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    b.timer(TokioTimer::new()).adaptive_window(true);
    if let Some(n) = limits.notsent_lowat {
        b.max_send_buf_size(n as usize);
    }
    let _ = b.serve_connection(TokioIo::new(io), service(handler)).await;
}
