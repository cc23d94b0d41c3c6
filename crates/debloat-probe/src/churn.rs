//! Churn, for soak tests of a shaper: many short TCP connections (connect, send a few kilobytes,
//! close, wait for the peer's close) at a steady rate, and UDP from source ports that change
//! every second — a new set of flows each second, as a household's DNS, QUIC and games make
//! them — with [`serve`], the server that takes both on one port number and counts them.
//!
//! What a shaper must survive is the flow table turning over: every connection and every
//! second's UDP sockets are new flows to its hash, so state that is created per flow and never
//! freed shows up as growing memory over an hour of this.

use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What [`run`] sends.
#[derive(Clone, Debug)]
pub struct Config {
    /// The server ([`serve`]): TCP and UDP on this address.
    pub to: SocketAddr,
    /// How long.
    pub duration: Duration,
    /// Short TCP connections started per second.
    pub flows_per_sec: f64,
    /// Bytes each connection sends before closing.
    pub flow_bytes: usize,
    /// UDP bits per second, all ports together (0: no UDP).
    pub udp_bps: u64,
    /// UDP sockets (source ports) opened afresh every second.
    pub udp_flows: u32,
}

/// What [`run`] did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    /// Connections started.
    pub flows_started: u64,
    /// Connections that sent everything and saw the server close.
    pub flows_done: u64,
    /// Connections that failed (refused, timed out, reset).
    pub flows_failed: u64,
    /// The failures by step and error kind ("connect: TimedOut": 3).
    pub failures: BTreeMap<String, u64>,
    /// UDP datagrams sent.
    pub udp_datagrams: u64,
    /// Distinct UDP source sockets used.
    pub udp_flows: u64,
}

/// What [`serve`] took.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Served {
    /// TCP connections accepted.
    pub connections: u64,
    /// TCP bytes received.
    pub tcp_bytes: u64,
    /// UDP datagrams received.
    pub udp_datagrams: u64,
}

/// Give up on a connection that makes no progress for this long.
const STALL: Duration = Duration::from_secs(5);
/// Concurrent connection starters: a connection that waits for a lost SYN does not hold up
/// the schedule.
const WORKERS: u64 = 8;
const DATAGRAM: usize = 1000;

/// Send churn to `cfg.to` for `cfg.duration`.
pub fn run(cfg: &Config) -> std::io::Result<Report> {
    let start = Instant::now();
    let started = AtomicU64::new(0);
    let done = AtomicU64::new(0);
    let failed = Mutex::new(BTreeMap::<String, u64>::new());
    let udp = std::thread::scope(|s| {
        for w in 0..WORKERS {
            let (started, done, failed) = (&started, &done, &failed);
            s.spawn(move || {
                for_each_turn(cfg, start, w, |payload| {
                    started.fetch_add(1, Relaxed);
                    match one_flow(cfg.to, payload) {
                        Ok(()) => {
                            done.fetch_add(1, Relaxed);
                        }
                        Err((step, e)) => {
                            let mut f = failed.lock().unwrap_or_else(|p| p.into_inner());
                            *f.entry(format!("{step}: {:?}", e.kind())).or_default() += 1;
                        }
                    }
                });
            });
        }
        udp_ports(cfg, start)
    })?;
    let failures = failed.into_inner().unwrap_or_else(|p| p.into_inner());
    Ok(Report {
        flows_started: started.into_inner(),
        flows_done: done.into_inner(),
        flows_failed: failures.values().sum(),
        failures,
        udp_datagrams: udp.0,
        udp_flows: udp.1,
    })
}

/// Call `f` at worker `w`'s turns: the k-th connection of all starts at k / flows_per_sec, and
/// worker w takes every WORKERS-th one; a late worker starts its next at once.
fn for_each_turn(cfg: &Config, start: Instant, w: u64, mut f: impl FnMut(&[u8])) {
    if cfg.flows_per_sec <= 0.0 {
        return;
    }
    let payload = vec![0x5a; cfg.flow_bytes];
    let gap = Duration::from_secs_f64(1.0 / cfg.flows_per_sec);
    let mut k = w;
    loop {
        let at = start + gap.mul_f64(k as f64);
        if at >= start + cfg.duration {
            return;
        }
        std::thread::sleep(at.saturating_duration_since(Instant::now()));
        f(&payload);
        k += WORKERS;
    }
}

/// One short connection: connect, send, half-close, wait for the server's close. An error
/// says at which step.
fn one_flow(to: SocketAddr, payload: &[u8]) -> Result<(), (&'static str, std::io::Error)> {
    let mut s = TcpStream::connect_timeout(&to, STALL).map_err(|e| ("connect", e))?;
    let set = |s: &TcpStream| {
        s.set_write_timeout(Some(STALL))?;
        s.set_read_timeout(Some(STALL))
    };
    set(&s).map_err(|e| ("connect", e))?;
    s.write_all(payload).map_err(|e| ("send", e))?;
    s.shutdown(Shutdown::Write).map_err(|e| ("send", e))?;
    let mut b = [0u8; 64];
    while s.read(&mut b).map_err(|e| ("close", e))? > 0 {}
    Ok(())
}

/// UDP at `udp_bps`, round robin over `udp_flows` sockets replaced by new ones every second.
/// Returns (datagrams sent, sockets used).
fn udp_ports(cfg: &Config, start: Instant) -> std::io::Result<(u64, u64)> {
    if cfg.udp_bps == 0 || cfg.udp_flows == 0 {
        return Ok((0, 0));
    }
    let local: SocketAddr = if cfg.to.is_ipv4() {
        "0.0.0.0:0".parse().map_err(std::io::Error::other)?
    } else {
        "[::]:0".parse().map_err(std::io::Error::other)?
    };
    let gap = Duration::from_secs_f64((DATAGRAM * 8) as f64 / cfg.udp_bps as f64);
    let payload = [0xa5u8; DATAGRAM];
    let (mut sent, mut used, mut second) = (0u64, 0u64, u64::MAX);
    let mut socks: Vec<UdpSocket> = Vec::new();
    let mut next = start;
    while next < start + cfg.duration {
        let now_s = next.duration_since(start).as_secs();
        if now_s != second {
            second = now_s;
            socks = (0..cfg.udp_flows)
                .map(|_| UdpSocket::bind(local))
                .collect::<Result<_, _>>()?;
            used += socks.len() as u64;
        }
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        let s = &socks[(sent % socks.len() as u64) as usize];
        // A full socket buffer or an ICMP error is the network's business, not ours.
        if s.send_to(&payload, cfg.to).is_ok() {
            sent += 1;
        }
        next += gap;
    }
    Ok((sent, used))
}

/// Take churn on `listen` (TCP and UDP, the same port) for `duration`: read every connection to
/// its end and close it, count UDP datagrams.
pub fn serve(listen: SocketAddr, duration: Duration) -> std::io::Result<Served> {
    let l = TcpListener::bind(listen)?;
    let u = UdpSocket::bind(listen)?;
    l.set_nonblocking(true)?;
    u.set_nonblocking(true)?;
    let counts = Arc::new([AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)]);
    let stop = Arc::new(AtomicBool::new(false));
    let end = Instant::now() + duration;
    let mut buf = [0u8; 2048];
    while Instant::now() < end {
        let mut idle = true;
        while let Ok((s, _)) = l.accept() {
            counts[0].fetch_add(1, Relaxed);
            let (counts, stop) = (Arc::clone(&counts), Arc::clone(&stop));
            // Detached: a finished reader leaves nothing behind.
            std::thread::spawn(move || drain(s, &counts[1], &stop));
            idle = false;
        }
        // Both sockets polled without blocking: a socket timeout is rounded up to the kernel's
        // tick, and datagrams arriving once a tick would keep a blocking read from returning.
        while u.recv(&mut buf).is_ok() {
            counts[2].fetch_add(1, Relaxed);
            idle = false;
        }
        if idle {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    stop.store(true, Relaxed);
    Ok(Served {
        connections: counts[0].load(Relaxed),
        tcp_bytes: counts[1].load(Relaxed),
        udp_datagrams: counts[2].load(Relaxed),
    })
}

fn drain(mut s: TcpStream, bytes: &AtomicU64, stop: &AtomicBool) {
    if s.set_nonblocking(false).is_err() || s.set_read_timeout(Some(STALL)).is_err() {
        return;
    }
    let mut b = [0u8; 16384];
    while !stop.load(Relaxed) {
        match s.read(&mut b) {
            Ok(0) | Err(_) => break,
            Ok(n) => bytes.fetch_add(n as u64, Relaxed),
        };
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn every_short_flow_and_datagram_reaches_the_server_on_loopback() {
        let probe = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = probe.local_addr().unwrap();
        drop(probe);
        let server = std::thread::spawn(move || serve(addr, Duration::from_millis(2500)).unwrap());
        std::thread::sleep(Duration::from_millis(100));
        let r = run(&Config {
            to: addr,
            duration: Duration::from_millis(1000),
            flows_per_sec: 40.0,
            flow_bytes: 3000,
            udp_bps: 800_000,
            udp_flows: 3,
        })
        .unwrap();
        let s = server.join().unwrap();
        assert_eq!(r.flows_started, 40, "{r:?}");
        assert_eq!(r.flows_done, 40, "{r:?}");
        assert_eq!(s.connections, 40, "{s:?}");
        assert_eq!(s.tcp_bytes, 40 * 3000, "{s:?}");
        // 800 kbit/s of 1000-byte datagrams for 1 s: 100, from 3 new sockets each second.
        assert_eq!(r.udp_datagrams, 100, "{r:?}");
        assert_eq!(r.udp_flows, 3, "{r:?}");
        assert_eq!(s.udp_datagrams, 100, "{s:?}");
    }
}
