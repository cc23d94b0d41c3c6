//! The irtt server side (docs/measurement.md §4.1), wire-compatible with stock `irtt client`.
//!
//! [`Sessions`] is the protocol state with no socket: one datagram and the current clocks in,
//! at most one reply out, or a [`Reject`] that says why nothing was sent. [`serve`] runs it on
//! a UDP socket. The protections irtt's server has are here too:
//! - a reply goes only to the address the request came from, and only for a session that
//!   address opened (a token seen from another address is rejected), so nobody can make the
//!   server send to a third host;
//! - a reply is never longer than its request (no amplification);
//! - the server caps concurrent sessions, the duration, the packet length, and raises the
//!   interval to its minimum; it refuses fills other than `rand` and echoing the client's bytes;
//! - with a key, every packet must carry a valid HMAC-MD5;
//! - idle sessions expire (irtt's default timeout, 60 s) and sessions end at their duration.

use irtt_proto::{
    decode_request, encode_echo_reply, encode_open_reply, DecodedRequestKind, EchoReply, OpenReply,
    Params, TimestampFields, FLAG_CLOSE, FLAG_OPEN, FLAG_REPLY, PROTOCOL_VERSION,
};
use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// What the server allows a client.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Most sessions open at once; an open beyond it is refused.
    pub max_sessions: usize,
    /// Longest test granted (a client asking for more gets this).
    pub max_duration: Duration,
    /// Shortest interval granted (a client asking for less gets this).
    pub min_interval: Duration,
    /// Longest packet granted, bytes.
    pub max_length: usize,
    /// A session with no packet for this long is dropped.
    pub idle_timeout: Duration,
    /// HMAC-MD5 key every packet must be signed with, if any.
    pub hmac_key: Option<Vec<u8>>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_sessions: 64,
            max_duration: Duration::from_secs(600),
            min_interval: Duration::from_millis(10),
            max_length: 1472,
            idle_timeout: Duration::from_secs(60),
            hmac_key: None,
        }
    }
}

/// What to send back for a datagram (always to its source address).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// A session was opened: the open reply with its token.
    Opened(Vec<u8>),
    /// The no-test open (`irtt client -n`) was answered.
    NoTest(Vec<u8>),
    /// An echo reply.
    Echo(Vec<u8>),
    /// The open was refused (open|reply|close), with the reason to log.
    Refused(Vec<u8>, String),
    /// A session was closed; nothing is sent.
    Closed,
}

/// Why a datagram got no reply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Reject {
    /// Not an irtt request at all (bad magic, flags, truncated).
    #[error("malformed packet: {0}")]
    Malformed(String),
    /// HMAC missing, unexpected or wrong.
    #[error("unauthenticated: {0}")]
    Unauthenticated(String),
    /// The open asked for something this server cannot speak.
    #[error("open refused: {0}")]
    Refused(String),
    /// Echo or close for a token this server does not know (or from another address).
    #[error("unknown session token {0:#x} from this address")]
    UnknownSession(u64),
    /// Echo shorter than the negotiated layout.
    #[error("echo of {got} bytes, the session's packets are {want} bytes")]
    WrongLength {
        /// Received length.
        got: usize,
        /// Negotiated length.
        want: usize,
    },
}

struct Session {
    peer: SocketAddr,
    params: Params,
    started: Instant,
    last_seen: Instant,
    received: u32,
    window: u64,
    highest: Option<u32>,
}

impl Session {
    /// Count `sequence` in the receive window: bit 0 = the highest seqno seen, bit i =
    /// highest − i arrived (irtt's 64-bit window).
    fn arrived(&mut self, sequence: u32) {
        match self.highest {
            None => self.window = 1,
            Some(h) if sequence > h => {
                let shift = sequence - h;
                self.window = if shift >= 64 {
                    1
                } else {
                    (self.window << shift) | 1
                };
            }
            Some(h) => {
                let back = h - sequence;
                if back < 64 {
                    self.window |= 1 << back;
                }
            }
        }
        self.highest = Some(self.highest.map_or(sequence, |h| h.max(sequence)));
    }
}

/// The sessions of one server, keyed by token.
pub struct Sessions {
    limits: Limits,
    sessions: HashMap<u64, Session>,
    epoch: Instant,
}

/// Counters for what the server did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ServerStats {
    /// Sessions opened.
    pub opened: u64,
    /// Echo replies sent.
    pub echoed: u64,
    /// Datagrams rejected (logged with their reason).
    pub rejected: u64,
}

fn random_token() -> u64 {
    let mut b = [0u8; 8];
    loop {
        if getrandom::fill(&mut b).is_err() {
            // No OS randomness: fall back on the clock, still unpredictable enough to be non-zero.
            let t = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1);
            b = t.to_le_bytes();
        }
        let t = u64::from_le_bytes(b);
        if t != 0 {
            return t;
        }
    }
}

/// Nanoseconds since the Unix epoch, as irtt's wall-clock stamps.
pub fn wall_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

impl Sessions {
    /// A server with these limits.
    pub fn new(limits: Limits) -> Sessions {
        Sessions {
            limits,
            sessions: HashMap::new(),
            epoch: Instant::now(),
        }
    }

    /// Sessions open now.
    pub fn open(&self) -> usize {
        self.sessions.len()
    }

    /// Drop sessions idle past the timeout or past their duration (plus the timeout, so the
    /// last replies and the close still find them).
    pub fn expire(&mut self, now: Instant) {
        let idle = self.limits.idle_timeout;
        self.sessions.retain(|_, s| {
            let dur = Duration::from_nanos(s.params.duration_ns.max(0) as u64);
            now.duration_since(s.last_seen) < idle && now.duration_since(s.started) < dur + idle
        });
    }

    fn check_hmac(&self, packet: &[u8], hmac_present: bool) -> Result<(), Reject> {
        match (&self.limits.hmac_key, hmac_present) {
            (Some(key), true) => irtt_proto::verify_packet_hmac(key, packet)
                .map_err(|e| Reject::Unauthenticated(e.to_string())),
            (Some(_), false) => Err(Reject::Unauthenticated(
                "no HMAC, and this server requires one (irtt client --hmac=KEY)".into(),
            )),
            (None, true) => Err(Reject::Unauthenticated(
                "packet has an HMAC but this server has no key (debloat server --hmac KEY)".into(),
            )),
            (None, false) => Ok(()),
        }
    }

    /// The parameters this server grants for a request: what irtt's server does with its
    /// `-d`, `-i`, `-l` and fill restrictions.
    fn grant(&self, asked: &Params) -> Result<Params, String> {
        if asked.protocol_version != PROTOCOL_VERSION {
            return Err(format!(
                "protocol version {} (this server speaks {PROTOCOL_VERSION})",
                asked.protocol_version
            ));
        }
        let mut p = asked.clone();
        let max_d = self.limits.max_duration.as_nanos() as i64;
        if p.duration_ns <= 0 || p.duration_ns > max_d {
            p.duration_ns = max_d;
        }
        p.interval_ns = p
            .interval_ns
            .max(self.limits.min_interval.as_nanos() as i64);
        // A packet is at least the header the negotiated fields need; beyond that, capped.
        p.length = p.length.min(self.limits.max_length as i64).max(0);
        if let Some(fill) = &p.server_fill {
            if fill.value != "rand" {
                p.server_fill = None;
            }
        }
        Ok(p)
    }

    /// Handle one datagram from `from` at `now`; the reply to send back to `from`, if any.
    pub fn handle(
        &mut self,
        now: Instant,
        from: SocketAddr,
        packet: &[u8],
    ) -> Result<Reply, Reject> {
        let req = decode_request(packet).map_err(|e| Reject::Malformed(e.to_string()))?;
        self.check_hmac(packet, req.hmac_present)?;
        let key = self.limits.hmac_key.clone();
        let key = key.as_deref();
        match req.kind {
            DecodedRequestKind::Open { no_test, params } => {
                self.open_session(now, from, no_test, params, key)
            }
            DecodedRequestKind::Close { token } => match self.sessions.get(&token) {
                Some(s) if s.peer == from => {
                    self.sessions.remove(&token);
                    Ok(Reply::Closed)
                }
                _ => Err(Reject::UnknownSession(token)),
            },
            DecodedRequestKind::Echo {
                token,
                sequence,
                tail,
            } => self.echo(now, from, packet, (token, sequence, tail), key),
        }
    }

    /// An open request: grant what the limits allow and start a session (or, for irtt's
    /// `-n`, answer and keep nothing; at the session limit, refuse so the client stops).
    fn open_session(
        &mut self,
        now: Instant,
        from: SocketAddr,
        no_test: bool,
        params: &[u8],
        key: Option<&[u8]>,
    ) -> Result<Reply, Reject> {
        let asked = Params::decode(params)
            .map_err(|e| Reject::Malformed(format!("open parameters: {e}")))?;
        let granted = self.grant(&asked).map_err(Reject::Refused)?;
        let malformed = |e: irtt_proto::ProtoError| Reject::Malformed(e.to_string());
        if no_test {
            // irtt's `-n`: the server answers open|reply|close and keeps nothing.
            let reply = OpenReply {
                flags: FLAG_OPEN | FLAG_REPLY | FLAG_CLOSE,
                token: 0,
                params: granted,
            };
            return encode_open_reply(&reply, key)
                .map(Reply::NoTest)
                .map_err(malformed);
        }
        if self.sessions.len() >= self.limits.max_sessions {
            self.expire(now);
        }
        if self.sessions.len() >= self.limits.max_sessions {
            // Tell the client (open|reply|close), so it stops retrying, and log why.
            let reply = OpenReply {
                flags: FLAG_OPEN | FLAG_REPLY | FLAG_CLOSE,
                token: 0,
                params: granted,
            };
            let why = format!(
                "{} sessions already open (server limit --max-sessions)",
                self.sessions.len()
            );
            return encode_open_reply(&reply, key)
                .map(|b| Reply::Refused(b, why))
                .map_err(malformed);
        }
        let token = random_token();
        let reply = OpenReply {
            flags: FLAG_OPEN | FLAG_REPLY,
            token,
            params: granted.clone(),
        };
        let bytes = encode_open_reply(&reply, key).map_err(malformed)?;
        self.sessions.insert(
            token,
            Session {
                peer: from,
                params: granted,
                started: now,
                last_seen: now,
                received: 0,
                window: 0,
                highest: None,
            },
        );
        Ok(Reply::Opened(bytes))
    }

    /// An echo request of a session: count it in the window and answer with the timestamps
    /// and statistics the session negotiated, never larger than the request.
    fn echo(
        &mut self,
        now: Instant,
        from: SocketAddr,
        packet: &[u8],
        (token, sequence, tail): (u64, u32, &[u8]),
        key: Option<&[u8]>,
    ) -> Result<Reply, Reject> {
        let epoch = self.epoch;
        let s = match self.sessions.get_mut(&token) {
            Some(s) if s.peer == from => s,
            _ => return Err(Reject::UnknownSession(token)),
        };
        let want = irtt_proto::echo_packet_len(key.is_some(), &s.params)
            .map_err(|e| Reject::Malformed(e.to_string()))?;
        if packet.len() != want {
            return Err(Reject::WrongLength {
                got: packet.len(),
                want,
            });
        }
        s.last_seen = now;
        let recv_mono = now.duration_since(epoch).as_nanos() as i64;
        let recv_wall = wall_ns();
        s.received = s.received.wrapping_add(1);
        s.arrived(sequence);
        let layout = irtt_proto::PacketLayout::echo(key.is_some(), &s.params);
        let payload_len = want.saturating_sub(layout.header_len());
        let payload = match &s.params.server_fill {
            Some(_) => {
                let mut b = vec![0u8; payload_len];
                let _ = getrandom::fill(&mut b);
                b
            }
            // No server fill: echo the client's own bytes (irtt's `none`), which are at
            // most as long as the request, so no amplification.
            None => {
                let off = layout.header_len().saturating_sub(
                    irtt_proto::PacketLayout::echo(key.is_some(), &Params::default()).header_len(),
                );
                tail.get(off..).unwrap_or(&[]).to_vec()
            }
        };
        let send_mono = Instant::now().duration_since(epoch).as_nanos() as i64;
        let send_wall = wall_ns();
        let lay = layout;
        let ts = TimestampFields {
            recv_wall: lay.recv_wall.then_some(recv_wall),
            recv_mono: lay.recv_mono.then_some(recv_mono),
            midpoint_wall: lay.midpoint_wall.then_some((recv_wall + send_wall) / 2),
            midpoint_mono: lay.midpoint_mono.then_some((recv_mono + send_mono) / 2),
            send_wall: lay.send_wall.then_some(send_wall),
            send_mono: lay.send_mono.then_some(send_mono),
        };
        let reply = EchoReply {
            flags: FLAG_REPLY,
            token,
            sequence,
            recv_count: lay.recv_count.then_some(s.received),
            recv_window: lay.recv_window.then_some(s.window),
            timestamps: ts,
            payload: payload.into_iter().take(payload_len).collect(),
        };
        encode_echo_reply(&reply, &s.params, key)
            .map(Reply::Echo)
            .map_err(|e| Reject::Malformed(e.to_string()))
    }
}

/// Answer irtt clients on `socket` until `stop` is set; rejects are logged to stderr with
/// their reason (at most 20 a second, the rest counted). Returns the counters.
pub fn serve(
    socket: &UdpSocket,
    limits: Limits,
    stop: &AtomicBool,
) -> std::io::Result<ServerStats> {
    socket.set_read_timeout(Some(Duration::from_millis(200)))?;
    let mut sessions = Sessions::new(limits);
    let mut stats = ServerStats::default();
    let mut buf = vec![0u8; 65_536];
    let mut log_window = (Instant::now(), 0u32);
    let mut last_expire = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let (n, from) = match socket.recv_from(&mut buf) {
            Ok(x) => x,
            Err(e) if crate::timed_out(&e) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let now = Instant::now();
        if now.duration_since(last_expire) > Duration::from_secs(1) {
            sessions.expire(now);
            last_expire = now;
        }
        let outcome = sessions.handle(now, from, &buf[..n]);
        let (bytes, why) = match outcome {
            Ok(Reply::Closed) => (None, None),
            Ok(Reply::Opened(b)) => {
                stats.opened += 1;
                (Some(b), None)
            }
            Ok(Reply::Echo(b)) => {
                stats.echoed += 1;
                (Some(b), None)
            }
            Ok(Reply::NoTest(b)) => (Some(b), None),
            Ok(Reply::Refused(b, why)) => (Some(b), Some(Reject::Refused(why))),
            Err(why) => (None, Some(why)),
        };
        if let Some(b) = bytes {
            // Replies go to the request's own source address, never elsewhere.
            if let Err(e) = socket.send_to(&b, from) {
                eprintln!("debloat server: udp reply to {from}: {e}");
            }
        }
        if let Some(why) = why {
            {
                stats.rejected += 1;
                if now.duration_since(log_window.0) > Duration::from_secs(1) {
                    log_window = (now, 0);
                }
                log_window.1 += 1;
                if log_window.1 <= 20 {
                    eprintln!("debloat server: udp {from}: rejected: {why}");
                }
            }
        }
    }
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use irtt_proto::{encode_request, RequestToEncode};

    fn params() -> Params {
        Params {
            protocol_version: PROTOCOL_VERSION,
            duration_ns: 1_000_000_000,
            interval_ns: 10_000_000,
            received_stats: irtt_proto::ReceivedStats::Both,
            stamp_at: irtt_proto::StampAt::Both,
            clock: irtt_proto::Clock::Both,
            ..Params::default()
        }
    }

    fn open(s: &mut Sessions, from: SocketAddr, key: Option<&[u8]>) -> Result<Reply, Reject> {
        let p = params();
        let pkt = encode_request(
            RequestToEncode::Open {
                params: &p,
                no_test: false,
            },
            key,
        )
        .expect("encode");
        s.handle(Instant::now(), from, &pkt)
    }

    #[test]
    fn a_session_answers_only_the_address_that_opened_it_and_never_grows_a_reply() {
        let mut s = Sessions::new(Limits::default());
        let a: SocketAddr = "198.18.0.1:4000".parse().expect("addr");
        let b: SocketAddr = "198.18.0.9:4000".parse().expect("addr");
        let Ok(Reply::Opened(r)) = open(&mut s, a, None) else {
            panic!("open refused")
        };
        let reply = irtt_proto::decode_open_reply(&r, None).expect("open reply");
        let echo = encode_request(
            RequestToEncode::Echo {
                token: reply.token,
                sequence: 0,
                params: &reply.params,
                payload: &[],
            },
            None,
        )
        .expect("echo");
        // The same token from another address (a spoofed source) gets nothing.
        assert_eq!(
            s.handle(Instant::now(), b, &echo),
            Err(Reject::UnknownSession(reply.token))
        );
        let Ok(Reply::Echo(out)) = s.handle(Instant::now(), a, &echo) else {
            panic!("no echo")
        };
        assert!(
            out.len() <= echo.len(),
            "reply {} > request {}",
            out.len(),
            echo.len()
        );
        // A truncated echo is rejected, not answered.
        assert!(matches!(
            s.handle(Instant::now(), a, &echo[..echo.len() - 1]),
            Err(Reject::WrongLength { .. }) | Err(Reject::Malformed(_))
        ));
    }

    #[test]
    fn keys_and_limits_are_enforced() {
        let a: SocketAddr = "198.18.0.1:4000".parse().expect("addr");
        let mut keyed = Sessions::new(Limits {
            hmac_key: Some(b"k".to_vec()),
            ..Limits::default()
        });
        assert!(matches!(
            open(&mut keyed, a, None),
            Err(Reject::Unauthenticated(_))
        ));
        assert!(matches!(
            open(&mut keyed, a, Some(b"wrong")),
            Err(Reject::Unauthenticated(_))
        ));
        assert!(matches!(
            open(&mut keyed, a, Some(b"k")),
            Ok(Reply::Opened(_))
        ));
        let mut one = Sessions::new(Limits {
            max_sessions: 1,
            ..Limits::default()
        });
        assert!(matches!(open(&mut one, a, None), Ok(Reply::Opened(_))));
        assert!(matches!(open(&mut one, a, None), Ok(Reply::Refused(_, _))));
        assert!(matches!(
            one.handle(Instant::now(), a, b"\x00\x01"),
            Err(Reject::Malformed(_))
        ));
        // Interval raised to the server's minimum, duration cut to its maximum.
        let mut p = params();
        p.interval_ns = 1;
        p.duration_ns = i64::MAX;
        let g = Sessions::new(Limits::default()).grant(&p).expect("grant");
        assert_eq!(g.interval_ns, 10_000_000);
        assert_eq!(g.duration_ns, 600_000_000_000);
    }
}
