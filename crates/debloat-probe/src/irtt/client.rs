//! The irtt client side (docs/measurement.md §4.1–4.2), wire-compatible with stock `irtt server`.
//!
//! [`run`] opens a session (retrying after 1, 2, 4, 8 s as irtt does, or the caller's
//! timeouts), sends isochronous echo requests on a fixed grid with a hybrid timer (sleep, then
//! spin the last 200 µs), collects the replies on a second thread, waits for late replies
//! (3 × the largest RTT seen, at most 4 s) and closes. [`Probe::stats`] computes irtt's
//! statistics from the round trips.
//!
//! One-way delays subtract clocks of two hosts: they are right only as far as the clocks agree
//! (NTP: milliseconds; the same host: exact). RTT and the IPDVs do not depend on that.

use irtt_proto::{
    decode_echo_reply, decode_open_reply, encode_request, Clock, Params, ReceivedStats,
    RequestToEncode, ServerFill, StampAt, FLAG_CLOSE, PROTOCOL_VERSION,
};
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::server::wall_ns;

/// What to ask the server for.
#[derive(Debug, Clone)]
pub struct Config {
    /// The irtt server.
    pub server: SocketAddr,
    /// Send interval.
    pub interval: Duration,
    /// How long to send for.
    pub duration: Duration,
    /// Packet length in bytes (0 = the smallest the fields allow; irtt's default).
    pub length: usize,
    /// IP TOS byte (DSCP << 2), on every packet.
    pub tos: u8,
    /// HMAC-MD5 key, if the server wants one.
    pub hmac_key: Option<Vec<u8>>,
    /// Ask the server to fill its payload with random bytes (`--sfill=rand`).
    pub server_fill_rand: bool,
    /// Open retries: wait this long for each attempt in turn.
    pub open_timeouts: Vec<Duration>,
    /// Run the sending and receiving threads under SCHED_FIFO at this priority.
    pub realtime: Option<u8>,
}

impl Config {
    /// irtt's defaults for everything but the server, interval and duration.
    pub fn new(server: SocketAddr, interval: Duration, duration: Duration) -> Config {
        Config {
            server,
            interval,
            duration,
            length: 0,
            tos: 0,
            hmac_key: None,
            server_fill_rand: false,
            open_timeouts: [1, 2, 4, 8].map(Duration::from_secs).to_vec(),
            realtime: None,
        }
    }
}

/// Errors before any probe was sent.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Socket trouble.
    #[error("irtt {0}: {1}")]
    Io(SocketAddr, std::io::Error),
    /// No answer to the open request.
    #[error("irtt server {0} did not answer (is `debloat server` or `irtt server` running there, UDP port open?)")]
    NoAnswer(SocketAddr),
    /// The server refused or answered garbage.
    #[error("irtt server {0}: {1}")]
    Refused(SocketAddr, String),
}

/// One packet's fate.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct RoundTrip {
    /// Sequence number.
    pub seq: u32,
    /// Client send, ns since the probe's start (monotonic).
    pub send_mono: i64,
    /// Client send, wall clock ns.
    pub send_wall: i64,
    /// Scheduled send time, ns since start (for the timer error).
    pub scheduled: i64,
    /// Client receive, ns since start; None if lost.
    pub recv_mono: Option<i64>,
    /// Client receive, wall clock ns.
    pub recv_wall: Option<i64>,
    /// Server receive / send stamps (wall, monotonic), when granted.
    pub srv_recv_wall: Option<i64>,
    /// Server send, wall clock.
    pub srv_send_wall: Option<i64>,
    /// Server receive, its monotonic clock.
    pub srv_recv_mono: Option<i64>,
    /// Server send, its monotonic clock.
    pub srv_send_mono: Option<i64>,
    /// The server's received count in the reply.
    pub srv_count: Option<u32>,
    /// The server's received window in the reply.
    pub srv_window: Option<u64>,
}

impl RoundTrip {
    /// Round-trip time in ns, less the server's processing time when it is known and smaller.
    pub fn rtt_ns(&self) -> Option<i64> {
        let raw = self.recv_mono? - self.send_mono;
        match (self.srv_recv_mono, self.srv_send_mono) {
            (Some(a), Some(b)) if b >= a && b - a < raw => Some(raw - (b - a)),
            _ => Some(raw),
        }
    }
    /// One-way delay up (server receive − client send, wall clocks): needs synchronised clocks.
    pub fn send_delay_ns(&self) -> Option<i64> {
        self.recv_mono?;
        Some(self.srv_recv_wall? - self.send_wall)
    }
    /// One-way delay down (client receive − server send, wall clocks): same caveat.
    pub fn receive_delay_ns(&self) -> Option<i64> {
        Some(self.recv_wall? - self.srv_send_wall?)
    }
}

/// A finished (or stopped) probe: the granted parameters and every packet sent.
#[derive(Debug, Clone)]
pub struct Probe {
    /// What the server granted.
    pub params: Params,
    /// Every packet sent, in sequence order.
    pub trips: Vec<RoundTrip>,
    /// Wall-clock ns at the probe's monotonic zero.
    pub wall_at_start: i64,
    /// Packets received twice.
    pub duplicates: u64,
    /// Slots skipped because the sender was more than half an interval late.
    pub timer_misses: u64,
}

/// Shared progress: the last RTT seen, µs (0 = none yet).
#[derive(Debug, Default)]
pub struct Live {
    /// Most recent RTT in µs.
    pub last_rtt_us: AtomicU64,
}

fn request_params(c: &Config) -> Params {
    Params {
        protocol_version: PROTOCOL_VERSION,
        duration_ns: c.duration.as_nanos() as i64,
        interval_ns: c.interval.as_nanos() as i64,
        length: c.length as i64,
        received_stats: ReceivedStats::Both,
        stamp_at: StampAt::Both,
        clock: Clock::Both,
        dscp: i64::from(c.tos),
        server_fill: c.server_fill_rand.then(|| ServerFill {
            value: "rand".into(),
        }),
    }
}

/// Sleep until `target` (an instant), sleeping to 200 µs before it and spinning the rest.
fn sleep_until(target: Instant) {
    let now = Instant::now();
    if target > now + Duration::from_micros(200) {
        std::thread::sleep(target - now - Duration::from_micros(200));
    }
    while Instant::now() < target {
        std::hint::spin_loop();
    }
}

/// Open a session: the granted parameters and the token.
fn open(sock: &UdpSocket, c: &Config) -> Result<(Params, u64), ClientError> {
    let io = |e| ClientError::Io(c.server, e);
    let asked = request_params(c);
    let key = c.hmac_key.as_deref();
    let pkt = encode_request(
        RequestToEncode::Open {
            params: &asked,
            no_test: false,
        },
        key,
    )
    .map_err(|e| ClientError::Refused(c.server, e.to_string()))?;
    let mut buf = [0u8; 2048];
    for &t in &c.open_timeouts {
        sock.send(&pkt).map_err(io)?;
        sock.set_read_timeout(Some(t)).map_err(io)?;
        match sock.recv(&mut buf) {
            Ok(n) => {
                return match decode_open_reply(&buf[..n], key) {
                    Ok(r) if r.flags & FLAG_CLOSE != 0 => Err(ClientError::Refused(
                        c.server,
                        "the server refused the session (limits reached or parameters not allowed; see its log)".into(),
                    )),
                    Ok(r) => Ok((r.params, r.token)),
                    Err(e) => Err(ClientError::Refused(
                        c.server,
                        format!("bad open reply: {e} (wrong --hmac key?)"),
                    )),
                }
            }
            Err(e) if crate::timed_out(&e) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                // ICMP port unreachable: nobody listens there.
                return Err(ClientError::NoAnswer(c.server));
            }
            Err(e) => return Err(io(e)),
        }
    }
    Err(ClientError::NoAnswer(c.server))
}

/// Make the UDP socket for a probe: connected to the server, TOS set.
fn socket(c: &Config) -> Result<UdpSocket, ClientError> {
    let io = |e| ClientError::Io(c.server, e);
    let domain = socket2::Domain::for_address(c.server);
    let s = socket2::Socket::new(domain, socket2::Type::DGRAM, Some(socket2::Protocol::UDP))
        .map_err(io)?;
    if c.tos != 0 {
        if c.server.is_ipv4() {
            s.set_tos_v4(u32::from(c.tos)).map_err(io)?;
        } else {
            s.set_tclass_v6(u32::from(c.tos)).map_err(io)?;
        }
    }
    s.connect(&c.server.into()).map_err(io)?;
    Ok(s.into())
}

/// What the sending and the receiving thread of one probe share.
#[derive(Default)]
struct Shared {
    /// One entry per request sent, indexed by sequence number.
    trips: Mutex<Vec<RoundTrip>>,
    /// Set when the receiver should stop.
    done: AtomicBool,
    /// Replies for a sequence number already answered.
    dups: AtomicU64,
    /// Largest RTT seen, ns (sizes the wait for late replies).
    max_rtt: AtomicU64,
    /// Latest RTT, µs (0: none yet), for the progress line.
    live_rtt: AtomicU64,
}

impl Shared {
    fn trips(&self) -> std::sync::MutexGuard<'_, Vec<RoundTrip>> {
        self.trips.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What the receiver needs to recognise this probe's replies.
struct Session {
    params: Params,
    token: u64,
    key: Option<Vec<u8>>,
    start: Instant,
}

/// Run one probe to the end of its duration or until `stop` is set.
pub fn run(c: &Config, stop: &AtomicBool, live: &Live) -> Result<Probe, ClientError> {
    if let Some(p) = c.realtime {
        crate::sys::realtime(p).map_err(|e| ClientError::Io(c.server, e))?;
    }
    let sock = socket(c)?;
    let (params, token) = open(&sock, c)?;
    let io = |e| ClientError::Io(c.server, e);
    sock.set_read_timeout(Some(Duration::from_millis(50)))
        .map_err(io)?;
    let wall_at_start = wall_ns();
    let session = Arc::new(Session {
        params,
        token,
        key: c.hmac_key.clone(),
        start: Instant::now(),
    });
    let shared = Arc::new(Shared::default());
    let rx = sock.try_clone().map_err(io)?;
    let receiver = {
        let (sh, se, realtime) = (shared.clone(), session.clone(), c.realtime);
        std::thread::spawn(move || receive(&rx, &sh, &se, realtime))
    };
    let sent = send_all(&sock, c, &shared, &session, stop, live);
    // Wait for late replies: 3 × the largest RTT seen, at most 4 s (irtt's --wait).
    let wait = Duration::from_nanos(3 * shared.max_rtt.load(Ordering::Relaxed))
        .clamp(Duration::from_millis(50), Duration::from_secs(4));
    let until = Instant::now() + wait;
    while sent.is_ok() && Instant::now() < until && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(10));
    }
    shared.done.store(true, Ordering::Relaxed);
    let _ = receiver.join();
    let misses = sent?;
    if let Ok(pkt) = encode_request(RequestToEncode::Close { token }, c.hmac_key.as_deref()) {
        let _ = sock.send(&pkt);
    }
    let trips = std::mem::take(&mut *shared.trips());
    Ok(Probe {
        params: session.params.clone(),
        trips,
        wall_at_start,
        duplicates: shared.dups.load(Ordering::Relaxed),
        timer_misses: misses,
    })
}

/// Send the requests on irtt's schedule until the duration ends or `stop` is set; returns how
/// many slots were skipped for being over half an interval late.
fn send_all(
    sock: &UdpSocket,
    c: &Config,
    sh: &Shared,
    se: &Session,
    stop: &AtomicBool,
    live: &Live,
) -> Result<u64, ClientError> {
    let interval = Duration::from_nanos(se.params.interval_ns.max(1) as u64);
    let duration = Duration::from_nanos(se.params.duration_ns.max(0) as u64);
    let (mut misses, mut slot, mut seq) = (0u64, 0u32, 0u32);
    loop {
        let scheduled = interval * slot;
        if scheduled >= duration || stop.load(Ordering::Relaxed) {
            return Ok(misses);
        }
        sleep_until(se.start + scheduled);
        let pkt = encode_request(
            RequestToEncode::Echo {
                token: se.token,
                sequence: seq,
                params: &se.params,
                payload: &[],
            },
            c.hmac_key.as_deref(),
        )
        .map_err(|e| ClientError::Refused(c.server, e.to_string()))?;
        sh.trips().push(RoundTrip {
            seq,
            send_mono: se.start.elapsed().as_nanos() as i64,
            send_wall: wall_ns(),
            scheduled: scheduled.as_nanos() as i64,
            ..RoundTrip::default()
        });
        // A send error (e.g. ICMP unreachable reported on a later send) is a lost packet.
        let _ = sock.send(&pkt);
        live.last_rtt_us
            .store(sh.live_rtt.load(Ordering::Relaxed), Ordering::Relaxed);
        seq += 1;
        slot += 1;
        // irtt: if already more than half an interval late for the next slot, skip it.
        let elapsed = se.start.elapsed();
        while interval * slot + interval / 2 < elapsed {
            slot += 1;
            misses += 1;
        }
    }
}

/// The receiving thread: match each reply to its request, count duplicates, keep the RTTs.
fn receive(rx: &UdpSocket, sh: &Shared, se: &Session, realtime: Option<u8>) {
    if let Some(p) = realtime {
        // The sender already proved the privilege; a failure here only costs accuracy.
        let _ = crate::sys::realtime(p);
    }
    let mut buf = vec![0u8; 65_536];
    while !sh.done.load(Ordering::Relaxed) {
        let Ok(n) = rx.recv(&mut buf) else { continue };
        let now = Instant::now();
        let Ok(r) = decode_echo_reply(&buf[..n], &se.params, se.key.as_deref()) else {
            continue;
        };
        if r.token != se.token {
            continue;
        }
        let mut t = sh.trips();
        let Some(rt) = t.get_mut(r.sequence as usize) else {
            continue;
        };
        if rt.recv_mono.is_some() {
            sh.dups.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        rt.recv_mono = Some(now.duration_since(se.start).as_nanos() as i64);
        rt.recv_wall = Some(wall_ns());
        rt.srv_recv_wall = r.timestamps.recv_wall.or(r.timestamps.midpoint_wall);
        rt.srv_send_wall = r.timestamps.send_wall.or(r.timestamps.midpoint_wall);
        rt.srv_recv_mono = r.timestamps.recv_mono;
        rt.srv_send_mono = r.timestamps.send_mono;
        rt.srv_count = r.recv_count;
        rt.srv_window = r.recv_window;
        if let Some(rtt) = rt.rtt_ns() {
            let us = (rtt.max(0) / 1000) as u64;
            sh.live_rtt.store(us.max(1), Ordering::Relaxed);
            sh.max_rtt.fetch_max(rtt.max(0) as u64, Ordering::Relaxed);
        }
    }
}

/// A summary of one duration statistic, in ns.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct DurStats {
    /// Samples.
    pub n: usize,
    /// Smallest.
    pub min: f64,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub median: f64,
    /// Largest.
    pub max: f64,
    /// Standard deviation.
    pub stddev: f64,
}

impl DurStats {
    /// Statistics of these samples (ns).
    pub fn of(v: &[f64]) -> DurStats {
        if v.is_empty() {
            return DurStats::default();
        }
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        let n = s.len();
        let mean = s.iter().sum::<f64>() / n as f64;
        let var = s.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        let median = if n % 2 == 1 {
            s[n / 2]
        } else {
            (s[n / 2 - 1] + s[n / 2]) / 2.0
        };
        DurStats {
            n,
            min: s[0],
            mean,
            median,
            max: s[n - 1],
            stddev: var.sqrt(),
        }
    }
}

/// irtt's statistics of a probe (docs/measurement.md §4.2); durations in ns.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Stats {
    /// Packets sent.
    pub sent: usize,
    /// Replies received.
    pub received: usize,
    /// Packets the server says it received (its last count), if it sent counts.
    pub server_received: Option<u32>,
    /// Round-trip time.
    pub rtt: DurStats,
    /// One-way delay up (clock caveat).
    pub send_delay: DurStats,
    /// One-way delay down (clock caveat).
    pub receive_delay: DurStats,
    /// |RTT(n) − RTT(n−1)| for consecutive packets both received.
    pub ipdv_rtt: DurStats,
    /// |Δ send delay| between consecutive packets (offset cancels).
    pub ipdv_send: DurStats,
    /// |Δ receive delay|.
    pub ipdv_receive: DurStats,
    /// |actual send − scheduled send|.
    pub timer_error: DurStats,
    /// Mean timer error as a percentage of the interval.
    pub timer_err_percent: f64,
    /// Slots skipped.
    pub timer_misses: u64,
    /// (sent − received) / sent.
    pub packet_loss_percent: f64,
    /// (sent − server received) / sent.
    pub upstream_loss_percent: Option<f64>,
    /// (server received − received) / server received.
    pub downstream_loss_percent: Option<f64>,
    /// Duplicate replies.
    pub duplicates: u64,
}

impl Probe {
    /// irtt's statistics.
    pub fn stats(&self) -> Stats {
        let got: Vec<&RoundTrip> = self
            .trips
            .iter()
            .filter(|t| t.recv_mono.is_some())
            .collect();
        let f = |g: &dyn Fn(&RoundTrip) -> Option<i64>| -> Vec<f64> {
            got.iter().filter_map(|t| g(t)).map(|x| x as f64).collect()
        };
        let ipdv = |g: &dyn Fn(&RoundTrip) -> Option<i64>| -> Vec<f64> {
            self.trips
                .windows(2)
                .filter_map(|w| Some((g(&w[1])? - g(&w[0])?).abs() as f64))
                .collect()
        };
        let sent = self.trips.len();
        let received = got.len();
        let server_received = self.trips.iter().rev().find_map(|t| t.srv_count);
        let timer: Vec<f64> = self
            .trips
            .iter()
            .map(|t| (t.send_mono - t.scheduled).abs() as f64)
            .collect();
        let timer_error = DurStats::of(&timer);
        let interval = self.params.interval_ns.max(1) as f64;
        let pct = |a: f64, b: f64| if b > 0.0 { 100.0 * a / b } else { 0.0 };
        Stats {
            sent,
            received,
            server_received,
            rtt: DurStats::of(&f(&|t| t.rtt_ns())),
            send_delay: DurStats::of(&f(&|t| t.send_delay_ns())),
            receive_delay: DurStats::of(&f(&|t| t.receive_delay_ns())),
            ipdv_rtt: DurStats::of(&ipdv(&|t| t.rtt_ns())),
            ipdv_send: DurStats::of(&ipdv(&|t| {
                t.recv_mono?;
                Some(t.srv_recv_mono? - t.send_mono)
            })),
            ipdv_receive: DurStats::of(&ipdv(&|t| Some(t.recv_mono? - t.srv_send_mono?))),
            timer_err_percent: pct(timer_error.mean, interval),
            timer_error,
            timer_misses: self.timer_misses,
            packet_loss_percent: pct((sent - received) as f64, sent as f64),
            upstream_loss_percent: server_received
                .map(|s| pct(sent.saturating_sub(s as usize) as f64, sent as f64)),
            downstream_loss_percent: server_received
                .map(|s| pct((s as usize).saturating_sub(received) as f64, f64::from(s))),
            duplicates: self.duplicates,
        }
    }

    /// Was this lost packet lost on the way up (the server never saw it), on the way down (a
    /// later reply's window shows the server got it), or unknown?
    pub fn lost_direction(&self, seq: u32) -> &'static str {
        for t in self.trips.iter().skip(seq as usize + 1) {
            let (Some(w), true) = (t.srv_window, t.recv_mono.is_some()) else {
                continue;
            };
            let back = t.seq - seq;
            if back >= 64 {
                break;
            }
            return if w & (1 << back) != 0 {
                "true_down"
            } else {
                "true_up"
            };
        }
        "true"
    }
}
