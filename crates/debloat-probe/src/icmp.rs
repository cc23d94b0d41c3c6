//! ICMP echo (flent's `Ping (ms) ICMP`, fping/ping's job): an unprivileged ICMP socket where
//! `net.ipv4.ping_group_range` allows it, a raw socket otherwise (root or CAP_NET_RAW).
//!
//! Requests go out every `interval` on a fixed grid; each carries a random 8-byte cookie so
//! replies to other programs' pings (a raw socket sees them all) are ignored.

use socket2::{Domain, Protocol, Socket, Type};
use std::io::Read;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One echo: sequence number, send time (s since the test's start) and RTT (ms) if answered.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Echo {
    /// Sequence number.
    pub seq: u16,
    /// Send time, seconds since the test's start.
    pub t: f64,
    /// Round-trip time, ms; None if no reply came.
    pub rtt_ms: Option<f64>,
}

/// One ICMP series: its echoes and the kind of socket that sent them.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Every request sent, answered or not, in order.
    pub echoes: Vec<Echo>,
    /// Unprivileged or raw.
    pub socket: SocketKind,
}

/// Which kind of socket was used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum SocketKind {
    /// SOCK_DGRAM + IPPROTO_ICMP (no privilege needed where the sysctl allows).
    Unprivileged,
    /// SOCK_RAW.
    Raw,
}

fn open(ip: IpAddr) -> std::io::Result<(Socket, SocketKind)> {
    let (domain, proto) = match ip {
        IpAddr::V4(_) => (Domain::IPV4, Protocol::ICMPV4),
        IpAddr::V6(_) => (Domain::IPV6, Protocol::ICMPV6),
    };
    match Socket::new(domain, Type::DGRAM, Some(proto)) {
        Ok(s) => Ok((s, SocketKind::Unprivileged)),
        Err(_) => Socket::new(domain, Type::RAW, Some(proto))
            .map(|s| (s, SocketKind::Raw))
            .map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!("no ICMP socket ({e}): run as root, or allow unprivileged ping with `sysctl net.ipv4.ping_group_range=\"0 2147483647\"`"),
                )
            }),
    }
}

/// RFC 1071 checksum.
fn checksum(b: &[u8]) -> u16 {
    let mut sum = 0u32;
    for c in b.chunks(2) {
        let w = u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]);
        sum += u32::from(w);
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// An echo request: type, code, checksum, id, seq, then the cookie and 48 bytes of padding
/// (a 64-byte ICMP message, as ping sends).
fn request(v6: bool, id: u16, seq: u16, cookie: u64) -> Vec<u8> {
    let mut p = vec![0u8; 64];
    p[0] = if v6 { 128 } else { 8 };
    p[4..6].copy_from_slice(&id.to_be_bytes());
    p[6..8].copy_from_slice(&seq.to_be_bytes());
    p[8..16].copy_from_slice(&cookie.to_be_bytes());
    if !v6 {
        // ICMPv6's checksum covers a pseudo-header; the kernel computes it for both kinds.
        let c = checksum(&p);
        p[2..4].copy_from_slice(&c.to_be_bytes());
    }
    p
}

/// Parse a received datagram: the sequence number if it is an echo reply with our cookie.
fn parse_reply(kind: SocketKind, v6: bool, pkt: &[u8], cookie: u64) -> Option<u16> {
    // A raw IPv4 socket delivers the IP header too.
    let icmp = if kind == SocketKind::Raw && !v6 {
        let ihl = usize::from(pkt.first()? & 0x0f) * 4;
        pkt.get(ihl..)?
    } else {
        pkt
    };
    let reply_type = if v6 { 129 } else { 0 };
    if *icmp.first()? != reply_type || icmp.len() < 16 {
        return None;
    }
    let c = u64::from_be_bytes(icmp[8..16].try_into().ok()?);
    (c == cookie).then(|| u16::from_be_bytes([icmp[6], icmp[7]]))
}

/// Ping `ip` every `interval` from `start_s` for `length_s` seconds after the test's start
/// `t0`, until `stop`. Lost echoes have no RTT. The last RTT (µs) goes to `live_us`. With
/// `realtime`, the sending (calling) and receiving threads run under SCHED_FIFO at that priority.
#[allow(clippy::too_many_arguments)]
pub fn run(
    ip: IpAddr,
    interval: Duration,
    start_s: f64,
    length_s: f64,
    t0: Instant,
    stop: &AtomicBool,
    live_us: &AtomicU64,
    realtime: Option<u8>,
) -> std::io::Result<Series> {
    if let Some(p) = realtime {
        crate::sys::realtime(p)?;
    }
    let (sock, kind) = open(ip)?;
    let v6 = ip.is_ipv6();
    sock.connect(&SocketAddr::new(ip, 0).into())?;
    sock.set_read_timeout(Some(Duration::from_millis(20)))?;
    let mut cookie_b = [0u8; 8];
    let _ = getrandom::fill(&mut cookie_b);
    let cookie = u64::from_be_bytes(cookie_b);
    let id = (cookie >> 48) as u16;
    let echoes: Arc<Mutex<Vec<(Instant, Echo)>>> = Arc::new(Mutex::new(Vec::new()));
    let done = AtomicBool::new(false);
    let rx = sock.try_clone()?;
    let mine = Mine { kind, v6, cookie };
    std::thread::scope(|scope| {
        scope.spawn(|| receive(&rx, &mine, &echoes, &done, live_us, realtime));
        let start = t0 + Duration::from_secs_f64(start_s);
        let mut k = 0u32;
        loop {
            let at = start + interval * k;
            if at > start + Duration::from_secs_f64(length_s) || stop.load(Ordering::Relaxed) {
                break;
            }
            let now = Instant::now();
            if at > now {
                std::thread::sleep(at - now);
            }
            let seq = k as u16;
            let pkt = request(v6, id, seq, cookie);
            let sent = Instant::now();
            if let Ok(mut e) = echoes.lock() {
                e.push((
                    sent,
                    Echo {
                        seq,
                        t: sent.duration_since(t0).as_secs_f64(),
                        rtt_ms: None,
                    },
                ));
            }
            let _ = sock.send(&pkt);
            k += 1;
        }
        wait_for_late(&echoes, stop);
        done.store(true, Ordering::Relaxed);
    });
    let e = match Arc::try_unwrap(echoes) {
        Ok(m) => m.into_inner().unwrap_or_else(|p| p.into_inner()),
        Err(a) => a.lock().map(|v| v.clone()).unwrap_or_default(),
    };
    Ok(Series {
        echoes: e.into_iter().map(|(_, x)| x).collect(),
        socket: kind,
    })
}

/// How to recognise this run's replies.
struct Mine {
    kind: SocketKind,
    v6: bool,
    cookie: u64,
}

/// The receiving thread: give each request its RTT when its reply arrives (the first one).
fn receive(
    rx: &Socket,
    mine: &Mine,
    echoes: &Mutex<Vec<(Instant, Echo)>>,
    done: &AtomicBool,
    live_us: &AtomicU64,
    realtime: Option<u8>,
) {
    if let Some(p) = realtime {
        // The sender already proved the privilege; a failure here only costs accuracy.
        let _ = crate::sys::realtime(p);
    }
    let mut buf = [0u8; 1500];
    while !done.load(Ordering::Relaxed) {
        let Ok(n) = (&*rx).read(&mut buf) else {
            continue;
        };
        let now = Instant::now();
        let Some(seq) = parse_reply(mine.kind, mine.v6, &buf[..n], mine.cookie) else {
            continue;
        };
        let Ok(mut e) = echoes.lock() else { continue };
        if let Some((sent, echo)) = e.iter_mut().find(|(_, x)| x.seq == seq) {
            if echo.rtt_ms.is_none() {
                let rtt = now.duration_since(*sent);
                echo.rtt_ms = Some(rtt.as_secs_f64() * 1e3);
                live_us.store(rtt.as_micros() as u64, Ordering::Relaxed);
            }
        }
    }
}

/// Late replies: wait up to a second while one of the last three requests is unanswered.
fn wait_for_late(echoes: &Mutex<Vec<(Instant, Echo)>>, stop: &AtomicBool) {
    let until = Instant::now() + Duration::from_secs(1);
    while Instant::now() < until && !stop.load(Ordering::Relaxed) {
        let pending = echoes
            .lock()
            .map(|e| e.iter().rev().take(3).any(|(_, x)| x.rtt_ms.is_none()))
            .unwrap_or(false);
        if !pending {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_of_a_request_verifies() {
        let p = request(false, 7, 9, 42);
        assert_eq!(checksum(&p), 0, "a packet with its checksum sums to zero");
    }

    #[test]
    fn replies_are_matched_by_cookie() {
        let mut p = request(false, 7, 9, 42);
        p[0] = 0;
        assert_eq!(
            parse_reply(SocketKind::Unprivileged, false, &p, 42),
            Some(9)
        );
        assert_eq!(parse_reply(SocketKind::Unprivileged, false, &p, 43), None);
        let mut raw = vec![0x45u8; 1];
        raw.extend_from_slice(&[0; 19]);
        raw.extend_from_slice(&p);
        assert_eq!(parse_reply(SocketKind::Raw, false, &raw, 42), Some(9));
        // Truncated garbage is ignored, not a panic.
        assert_eq!(parse_reply(SocketKind::Raw, false, &[0x4f], 42), None);
    }
}
