//! Bulk TCP: the one way debloat fills a stream and the one way it reads one dry. Every TCP bulk
//! flow goes through here: the probe's uploads ([`crate::flow`]) and downloads, `debloat
//! server`'s ends of them ([`crate::server`]), and the testbed's `tcp-send` and `tcp-sink`
//! ([`send`], [`sink`]), which the root tests use for iperf3-style goodput per connection.
//!
//! Both loops block in `write`/`read` with a socket timeout rather than polling: data is taken as
//! soon as it arrives. (When the testbed's sink polled its sockets every millisecond, a BBR
//! sender's bandwidth estimate rose above the link's rate and kept up to a BDP standing in a
//! FIFO where iperf3's receiver left none: a receiver that has not read its data holds back the
//! ACKs that would shrink the window, and bunched ACKs inflate BBR's delivery-rate samples.)

use socket2::{Domain, Protocol, Socket, Type};
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Write `buf` again and again until `end` or `stop`; `each(n)` runs after every attempt (`n` is
/// 0 when the write timed out). Returns the bytes written, or the first error that is not a
/// timeout. The caller sets the socket's write timeout, which bounds how late `end` is noticed.
pub fn fill<W: Write>(
    mut w: W,
    buf: &[u8],
    end: Instant,
    stop: &AtomicBool,
    mut each: impl FnMut(usize),
) -> std::io::Result<u64> {
    let mut sent = 0u64;
    while Instant::now() < end && !stop.load(Ordering::Relaxed) {
        match w.write(buf) {
            Ok(n) => {
                sent += n as u64;
                each(n);
            }
            Err(e) if crate::timed_out(&e) || e.kind() == std::io::ErrorKind::Interrupted => {
                each(0)
            }
            Err(e) => return Err(e),
        }
    }
    Ok(sent)
}

/// Read until the peer closes or `each(n, now)` breaks; `each` runs after every attempt (`n` is 0
/// when the read timed out, so the caller can keep time with the socket's read timeout). Returns
/// the bytes read, or the first error that is not a timeout.
pub fn drain<R: Read>(
    mut r: R,
    buf: &mut [u8],
    mut each: impl FnMut(usize, Instant) -> ControlFlow<()>,
) -> std::io::Result<u64> {
    let mut total = 0u64;
    loop {
        let n = match r.read(buf) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if crate::timed_out(&e) || e.kind() == std::io::ErrorKind::Interrupted => 0,
            Err(e) => return Err(e),
        };
        total += n as u64;
        if each(n, Instant::now()).is_break() {
            return Ok(total);
        }
    }
}

/// What `tcp-send` opens.
#[derive(Clone, Debug)]
pub struct SendConfig {
    /// The sink.
    pub to: SocketAddr,
    /// Parallel connections.
    pub streams: u32,
    /// How long to send.
    pub duration: Duration,
    /// Congestion control (TCP_CONGESTION), e.g. `cubic` or `bbr`.
    pub cc: String,
    /// Local address to send from.
    pub bind: Option<IpAddr>,
    /// TOS byte (DSCP << 2 | ECN bits are the kernel's) of every segment; 0 leaves it alone.
    pub tos: u8,
}

fn context(e: std::io::Error, what: String) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// Open one connection of `cfg`: congestion control set before connecting, bound if asked.
pub fn connect(cfg: &SendConfig) -> std::io::Result<TcpStream> {
    let sock = Socket::new(
        Domain::for_address(cfg.to),
        Type::STREAM,
        Some(Protocol::TCP),
    )?;
    sock.set_tcp_congestion(cfg.cc.as_bytes()).map_err(|e| {
        context(e, format!("congestion control `{}` not available in this kernel (see /proc/sys/net/ipv4/tcp_available_congestion_control)", cfg.cc))
    })?;
    crate::flow::set_tos(&sock, cfg.to, cfg.tos)
        .map_err(|e| context(e, format!("setting TOS {:#04x}", cfg.tos)))?;
    if let Some(ip) = cfg.bind {
        sock.bind(&SocketAddr::new(ip, 0).into())
            .map_err(|e| context(e, format!("binding to {ip} (not an address of this host?)")))?;
    }
    sock.connect(&cfg.to.into())
        .map_err(|e| context(e, format!("connecting to {}", cfg.to)))?;
    Ok(sock.into())
}

/// `tcp-send`: `cfg.streams` connections, each filled from its own thread for `cfg.duration`.
/// Returns the bytes written over all of them.
pub fn send(cfg: &SendConfig) -> std::io::Result<u64> {
    let mut threads = Vec::new();
    // One deadline from the start, as iperf3's -t: a connection slow to open (a SYN lost and
    // sent again a second later) sends less rather than past the sink's end.
    let end = Instant::now() + cfg.duration;
    for _ in 0..cfg.streams.max(1) {
        let s = connect(cfg)?;
        threads.push(std::thread::spawn(move || -> std::io::Result<u64> {
            s.set_write_timeout(Some(Duration::from_millis(200)))?;
            fill(&s, &[0x5a; 1 << 16], end, &AtomicBool::new(false), |_| {})
        }));
    }
    let mut total = 0;
    for t in threads {
        total += t
            .join()
            .map_err(|_| std::io::Error::other("a sender thread panicked"))??;
    }
    Ok(total)
}

/// What `tcp-sink` counts of one connection.
#[derive(Clone, Copy, Debug, Default)]
pub struct Received {
    /// Bytes received in all.
    pub bytes: u64,
    /// Bytes received after the omitted start.
    pub counted: u64,
    /// When the first byte arrived.
    pub first: Option<Instant>,
    /// When the last byte arrived.
    pub last: Option<Instant>,
}

impl Received {
    /// Goodput of the counted part, bit/s: from the first byte plus `omit` to the last byte.
    pub fn goodput_bps(&self, omit: Duration) -> (f64, Duration) {
        let span = match (self.first, self.last) {
            (Some(f), Some(l)) => l
                .saturating_duration_since(f + omit)
                .max(Duration::from_millis(1)),
            _ => Duration::from_secs(1),
        };
        (self.counted as f64 * 8.0 / span.as_secs_f64(), span)
    }
}

/// What `tcp-sink` does.
#[derive(Clone, Copy, Debug)]
pub struct SinkConfig {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// How long to accept and read.
    pub duration: Duration,
    /// Each connection's first part (from its first byte) left out of `counted`, as iperf3's
    /// `--omit` does.
    pub omit: Duration,
    /// Call the observer this often with every connection's bytes so far (`None`: never).
    pub interval: Option<Duration>,
}

/// Read one connection until it closes or `end`, counting into `c`.
fn read_conn(stream: TcpStream, c: &Mutex<Received>, end: Instant, omit: Duration) {
    if stream
        .set_read_timeout(Some(Duration::from_millis(50)))
        .is_err()
    {
        return;
    }
    let mut buf = vec![0u8; 1 << 16];
    let _ = drain(&stream, &mut buf, |n, now| {
        if n > 0 {
            let Ok(mut c) = c.lock() else {
                return ControlFlow::Break(());
            };
            let first = *c.first.get_or_insert(now);
            c.last = Some(now);
            c.bytes += n as u64;
            if now - first >= omit {
                c.counted += n as u64;
            }
        }
        if now >= end {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
}

fn snapshot(conns: &[Arc<Mutex<Received>>]) -> Vec<Received> {
    conns
        .iter()
        .map(|c| c.lock().map(|c| *c).unwrap_or_default())
        .collect()
}

/// `tcp-sink`: accept connections on `cfg.listen` for `cfg.duration`, each read on its own
/// thread; `every(t, conns)` is called at each interval (`t` seconds from the start). Returns
/// each connection's count, in the order they were accepted.
pub fn sink(
    cfg: &SinkConfig,
    every: impl FnMut(Duration, &[Received]),
) -> std::io::Result<Vec<Received>> {
    let l = TcpListener::bind(cfg.listen)
        .map_err(|e| context(e, format!("listening on {}", cfg.listen)))?;
    sink_on(l, cfg, every)
}

/// [`sink`] on a listener already bound (`cfg.listen` is not used).
pub fn sink_on(
    l: TcpListener,
    cfg: &SinkConfig,
    mut every: impl FnMut(Duration, &[Received]),
) -> std::io::Result<Vec<Received>> {
    l.set_nonblocking(true)?;
    let start = Instant::now();
    let end = start + cfg.duration;
    let mut conns: Vec<Arc<Mutex<Received>>> = Vec::new();
    let mut readers = Vec::new();
    let mut next_report = cfg.interval.map(|e| start + e);
    while Instant::now() < end {
        if let (Some(e), Some(at)) = (cfg.interval, next_report) {
            if Instant::now() >= at {
                every(at - start, &snapshot(&conns));
                next_report = Some(at + e);
            }
        }
        match l.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false)?;
                let c = Arc::new(Mutex::new(Received::default()));
                conns.push(Arc::clone(&c));
                let omit = cfg.omit;
                readers.push(std::thread::spawn(move || read_conn(stream, &c, end, omit)));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(1)),
        }
    }
    for r in readers {
        r.join()
            .map_err(|_| std::io::Error::other("a reader thread panicked"))?;
    }
    Ok(snapshot(&conns))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn drain_counts_until_the_peer_closes_and_reports_timeouts_as_zero() {
        let data = vec![7u8; 10_000];
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        let n = drain(&data[..], &mut buf, |n, _| {
            seen.push(n);
            ControlFlow::Continue(())
        })
        .unwrap();
        assert_eq!(n, 10_000);
        assert_eq!(seen, vec![4096, 4096, 1808]);
    }

    #[test]
    fn fill_stops_at_the_flag() {
        let stop = AtomicBool::new(true);
        let mut out = Vec::new();
        let end = Instant::now() + Duration::from_secs(10);
        assert_eq!(fill(&mut out, &[1; 100], end, &stop, |_| {}).unwrap(), 0);
        let stop = AtomicBool::new(false);
        let mut calls = 0;
        let n = fill(&mut out, &[1; 100], Instant::now(), &stop, |_| calls += 1).unwrap();
        assert_eq!((n, calls), (0, 0), "a past end writes nothing");
    }

    #[test]
    fn sink_and_send_count_the_same_bytes_on_loopback() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let to = l.local_addr().unwrap();
        let cfg = SinkConfig {
            listen: to,
            duration: Duration::from_millis(1500),
            omit: Duration::ZERO,
            interval: None,
        };
        let h = std::thread::spawn(move || sink_on(l, &cfg, |_, _| {}).unwrap());
        let sent = send(&SendConfig {
            to,
            streams: 2,
            duration: Duration::from_millis(300),
            cc: "reno".into(), // built into every Linux kernel
            bind: None,
            tos: 0x20,
        })
        .unwrap();
        let got = h.join().unwrap();
        assert_eq!(got.len(), 2, "two connections accepted");
        assert_eq!(got.iter().map(|c| c.bytes).sum::<u64>(), sent);
        assert!(got.iter().all(|c| c.counted == c.bytes && c.bytes > 0));
    }
}
