//! Reflector pings for cake-autorate's mode (`--autorate-mode cake-autorate --reflectors …`):
//! ICMP echo requests to each reflector every `interval`, the streams staggered across the
//! interval as cake-autorate starts its pingers, each reply a round-trip sample.
//!
//! Where the pings come from matters. cake-autorate runs on the router and pings from the
//! router's own stack, so its pings leave through the shaper and the modem; a bump-in-the-wire
//! gateway's own stack is beside the path, not in it. `--ping-netns NAME` therefore opens the
//! sockets in a network namespace on the LAN side (`/run/netns/NAME`, as `ip netns` makes
//! them): the pings then cross the gateway's egress discipline, the link, and come back through
//! the ingress one, as a router's do (and as the simulator's do). Without it they leave from
//! the gateway host's stack (`--ping-device IFACE` binds them to one interface), which sees the
//! delay beyond the gateway but not its own shaper's queue.
//!
//! Sockets: an unprivileged ICMP datagram socket (`ping`'s; the kernel sets the identifier and
//! the checksum) where `net.ipv4.ping_group_range` allows it, else a raw one (root or
//! CAP_NET_RAW; identifier and IPv4 checksum ours, replies filtered by identifier). One socket
//! per stream, so a reflector listed twice is two streams. The pinger is a thread of its own;
//! samples reach the forwarding loop through a channel, read when the loop next turns (at most
//! one decision tick, 50 ms, later). Not done as cake-autorate does: reflector health checks
//! and replacement, and one-way delays (irtt's or ICMP timestamps): a round trip stands for
//! both directions, as with its default pinger (fping).

use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io;
use std::io::Read;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What to ping, how often, from where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PingerConfig {
    /// One stream per entry (an address listed twice is two streams).
    pub reflectors: Vec<IpAddr>,
    /// Each stream's interval (cake-autorate's `reflector_ping_interval_s`, 300 ms).
    pub interval: Duration,
    /// Open the sockets in this network namespace (`/run/netns/NAME`, or a path).
    pub netns: Option<String>,
    /// Bind the sockets to this interface.
    pub device: Option<String>,
}

/// A `--reflectors` list that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReflectorsError {
    /// A word that is not an address.
    #[error("`{0}`: not an IPv4 or IPv6 address")]
    NotAnAddress(String),
    /// No address at all.
    #[error("give at least one address: --reflectors 198.18.2.2,2001:2::2")]
    None,
    /// More streams than the pinger keeps.
    #[error("{0} reflectors: at most {MAX_STREAMS}")]
    TooMany(usize),
}

impl PingerConfig {
    /// Parse `--reflectors`: addresses separated by commas.
    pub fn parse_reflectors(words: &str) -> Result<Vec<IpAddr>, ReflectorsError> {
        let list: Result<Vec<IpAddr>, ReflectorsError> = words
            .split(',')
            .map(str::trim)
            .filter(|w| !w.is_empty())
            .map(|w| {
                w.parse()
                    .map_err(|_| ReflectorsError::NotAnAddress(w.to_string()))
            })
            .collect();
        let list = list?;
        if list.is_empty() {
            return Err(ReflectorsError::None);
        }
        if list.len() > MAX_STREAMS {
            return Err(ReflectorsError::TooMany(list.len()));
        }
        Ok(list)
    }
}

/// At most this many streams (cake-autorate runs 6 pingers).
pub const MAX_STREAMS: usize = 16;

/// cake-autorate's default interval per reflector.
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(300);

/// One reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// The stream (position in the reflector list).
    pub stream: usize,
    /// Its round trip, ns.
    pub rtt_ns: u64,
}

/// Counts, shared with the thread.
#[derive(Debug, Default)]
pub struct Counters {
    /// Echo requests sent.
    pub sent: AtomicU64,
    /// Replies matched to a request.
    pub received: AtomicU64,
    /// Sends that failed (unreachable, no route).
    pub send_errors: AtomicU64,
}

/// A running pinger; stops and joins its thread when dropped.
pub struct Pinger {
    rx: Receiver<Sample>,
    raw: bool,
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
    thread: Option<JoinHandle<()>>,
}

impl Pinger {
    /// Open the sockets (in the namespace, if one is named) and start pinging.
    pub fn spawn(cfg: PingerConfig) -> io::Result<Pinger> {
        let (tx, rx) = channel();
        let stop = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(Counters::default());
        let (ready_tx, ready_rx) = channel();
        let (s, c) = (stop.clone(), counters.clone());
        let thread = std::thread::Builder::new()
            .name("reflector-pings".into())
            .spawn(move || {
                let streams = match open_streams(&cfg) {
                    Ok(v) => {
                        let _ = ready_tx.send(Ok(v.iter().any(|s: &Stream| s.raw_id.is_some())));
                        v
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                run(streams, cfg.interval, &s, &c, &tx);
            })?;
        let raw = ready_rx.recv().map_err(|_| {
            io::Error::other("the pinger thread ended before opening its sockets")
        })??;
        Ok(Pinger {
            rx,
            raw,
            stop,
            counters,
            thread: Some(thread),
        })
    }

    /// The replies since the last call.
    pub fn drain(&self) -> Vec<Sample> {
        self.rx.try_iter().collect()
    }

    /// Which sockets it pings with: `datagram` (ping sockets) or `raw`.
    pub fn socket_kind(&self) -> &'static str {
        if self.raw {
            "raw"
        } else {
            "datagram"
        }
    }

    /// (sent, received, send errors) so far.
    pub fn counts(&self) -> (u64, u64, u64) {
        let c = &self.counters;
        (
            c.sent.load(Ordering::Relaxed),
            c.received.load(Ordering::Relaxed),
            c.send_errors.load(Ordering::Relaxed),
        )
    }
}

impl Drop for Pinger {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One echo stream: its socket, identifier (raw sockets), and the send times of recent
/// sequence numbers.
struct Stream {
    sock: Socket,
    to: SockAddr,
    v6: bool,
    /// Some(id) on a raw socket: we write it, and filter replies by it.
    raw_id: Option<u16>,
    seq: u16,
    sent_at: [Option<(u16, Instant)>; 64],
}

fn open_streams(cfg: &PingerConfig) -> io::Result<Vec<Stream>> {
    if let Some(ns) = &cfg.netns {
        enter_netns(ns)?;
    }
    let base_id = (std::process::id() as u16).wrapping_mul(0x9e37);
    cfg.reflectors
        .iter()
        .enumerate()
        .map(|(k, &ip)| {
            let (sock, raw) = icmp_socket(ip.is_ipv6())?;
            if let Some(dev) = &cfg.device {
                sock.bind_device(Some(dev.as_bytes()))
                    .map_err(|e| io::Error::new(e.kind(), format!("--ping-device {dev}: {e}")))?;
            }
            sock.set_nonblocking(true)?;
            Ok(Stream {
                sock,
                to: SockAddr::from(SocketAddr::new(ip, 0)),
                v6: ip.is_ipv6(),
                raw_id: raw.then_some(base_id.wrapping_add(k as u16)),
                seq: 0,
                sent_at: [None; 64],
            })
        })
        .collect()
}

/// Move this thread into a network namespace (a name under /run/netns, or a path).
fn enter_netns(ns: &str) -> io::Result<()> {
    let path = if ns.contains('/') {
        ns.to_string()
    } else {
        format!("/run/netns/{ns}")
    };
    let named = |e: io::Error| io::Error::new(e.kind(), format!("--ping-netns {path}: {e}"));
    let f = std::fs::File::open(&path).map_err(named)?;
    crate::sys::enter_netns(&f).map_err(named)
}

/// A datagram ICMP socket if the system allows it, else a raw one (true).
fn icmp_socket(v6: bool) -> io::Result<(Socket, bool)> {
    let (d, p) = if v6 {
        (Domain::IPV6, Protocol::ICMPV6)
    } else {
        (Domain::IPV4, Protocol::ICMPV4)
    };
    match Socket::new(d, Type::DGRAM, Some(p)) {
        Ok(s) => Ok((s, false)),
        Err(_) => Socket::new(d, Type::RAW, Some(p))
            .map(|s| (s, true))
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("opening an ICMP socket: {e} (run as root, or allow ping sockets: sysctl net.ipv4.ping_group_range=\"0 2147483647\")"),
                )
            }),
    }
}

fn run(
    mut streams: Vec<Stream>,
    interval: Duration,
    stop: &AtomicBool,
    c: &Counters,
    tx: &Sender<Sample>,
) {
    let start = Instant::now();
    let n = streams.len().max(1) as u32;
    // Stream k sends at start + k·interval/n + m·interval.
    let mut next: Vec<Instant> = (0..n).map(|k| start + interval * k / n).collect();
    let mut buf = [0u8; 1500];
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        for (k, s) in streams.iter_mut().enumerate() {
            if now >= next[k] {
                match send(s, now) {
                    Ok(()) => c.sent.fetch_add(1, Ordering::Relaxed),
                    Err(_) => c.send_errors.fetch_add(1, Ordering::Relaxed),
                };
                while next[k] <= now {
                    next[k] += interval;
                }
            }
        }
        let due = next.iter().min().copied().unwrap_or(now + interval);
        let wait = due
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(100));
        let mut fds = [-1; MAX_STREAMS];
        for (f, s) in fds.iter_mut().zip(&streams) {
            *f = s.sock.as_raw_fd();
        }
        if !matches!(crate::sys::wait(fds, Some(wait.as_nanos() as u64)), Ok(r) if r.contains(&true))
        {
            continue;
        }
        for (k, s) in streams.iter_mut().enumerate() {
            while let Ok(len) = (&s.sock).read(&mut buf) {
                if let Some(rtt) = s.reply(&buf[..len], Instant::now()) {
                    c.received.fetch_add(1, Ordering::Relaxed);
                    let _ = tx.send(Sample {
                        stream: k,
                        rtt_ns: rtt.as_nanos() as u64,
                    });
                }
            }
        }
    }
}

fn send(s: &mut Stream, now: Instant) -> io::Result<()> {
    s.seq = s.seq.wrapping_add(1);
    let mut pkt = [0u8; 24];
    pkt[0] = if s.v6 { 128 } else { 8 };
    pkt[4..6].copy_from_slice(&s.raw_id.unwrap_or(0).to_be_bytes());
    pkt[6..8].copy_from_slice(&s.seq.to_be_bytes());
    pkt[8..16].copy_from_slice(b"debloat!");
    if !s.v6 && s.raw_id.is_some() {
        let sum = crate::csum::fold(crate::csum::sum(&pkt, 0));
        pkt[2..4].copy_from_slice(&(!sum).to_be_bytes());
    }
    s.sent_at[usize::from(s.seq) % 64] = Some((s.seq, now));
    s.sock.send_to(&pkt, &s.to).map(|_| ())
}

impl Stream {
    /// The round trip of a reply to one of ours (None for anything else).
    fn reply(&mut self, bytes: &[u8], now: Instant) -> Option<Duration> {
        // A raw IPv4 socket hands over the IP header too.
        let icmp = if !self.v6 && self.raw_id.is_some() {
            let ihl = usize::from(bytes.first()? & 0x0f) * 4;
            bytes.get(ihl..)?
        } else {
            bytes
        };
        let echo_reply = if self.v6 { 129 } else { 0 };
        if icmp.len() < 16 || icmp[0] != echo_reply || &icmp[8..16] != b"debloat!" {
            return None;
        }
        if let Some(id) = self.raw_id {
            if u16::from_be_bytes([icmp[4], icmp[5]]) != id {
                return None;
            }
        }
        let seq = u16::from_be_bytes([icmp[6], icmp[7]]);
        let slot = &mut self.sent_at[usize::from(seq) % 64];
        match *slot {
            Some((s, at)) if s == seq => {
                *slot = None;
                Some(now.saturating_duration_since(at))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reflector_lists_parse_and_name_a_bad_address() {
        let v = PingerConfig::parse_reflectors("198.18.2.2, 2001:2::2,198.18.2.2").expect("ok");
        assert_eq!(v.len(), 3);
        let e = PingerConfig::parse_reflectors("198.18.2.2,reflector.example").expect_err("bad");
        assert_eq!(e, ReflectorsError::NotAnAddress("reflector.example".into()));
        assert!(e.to_string().contains("`reflector.example`"), "{e}");
        assert!(PingerConfig::parse_reflectors(" , ").is_err());
    }

    /// Loopback answers every echo: both families, a reflector listed twice, 20 ms apart.
    #[test]
    fn loopback_answers_every_stream_with_round_trips() {
        let cfg = PingerConfig {
            reflectors: PingerConfig::parse_reflectors("127.0.0.1,127.0.0.1,::1").expect("ok"),
            interval: Duration::from_millis(20),
            netns: None,
            device: None,
        };
        let p = match Pinger::spawn(cfg) {
            Ok(p) => p,
            Err(e) => {
                println!("SKIP loopback_answers_every_stream_with_round_trips: {e}");
                return;
            }
        };
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline
            && (0..3).any(|k| got.iter().filter(|s: &&Sample| s.stream == k).count() < 5)
        {
            std::thread::sleep(Duration::from_millis(20));
            got.extend(p.drain());
        }
        for k in 0..3 {
            assert!(
                got.iter().filter(|s| s.stream == k).count() >= 5,
                "stream {k}: {got:?}"
            );
        }
        // A loopback round trip is well under a second even on a loaded machine.
        assert!(got.iter().all(|s| s.rtt_ns < 1_000_000_000), "{got:?}");
        let (sent, received, errors) = p.counts();
        assert!(
            received >= 15 && received <= sent && errors == 0,
            "{sent} {received} {errors}"
        );
    }

    #[test]
    fn a_missing_namespace_is_named() {
        let cfg = PingerConfig {
            reflectors: vec![IpAddr::from([127, 0, 0, 1])],
            interval: DEFAULT_INTERVAL,
            netns: Some("debloat-no-such-namespace".into()),
            device: None,
        };
        let e = Pinger::spawn(cfg).err().expect("no such namespace");
        assert!(
            e.to_string()
                .contains("/run/netns/debloat-no-such-namespace"),
            "{e}"
        );
    }
}
