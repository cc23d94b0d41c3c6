//! DNS snooping for qosify's name rules: the answers that cross the gateway teach it which
//! addresses belong to which names, so `dns:*.youtube.com besteffort` marks the packets to the
//! addresses a client just looked up.
//!
//! As qosify's `dns.c` does: a message counts when it is a response with opcode QUERY, rcode
//! NOERROR and exactly one question. The question's name is matched against `dns:` patterns
//! (and a short-lived cache of CNAME targets seen earlier); each CNAME in the answer section is
//! matched against `dns:` and `dns_c:` patterns and remembered for a few seconds; each A/AAAA
//! record then gives its address the decision found so far. Among patterns that match, the
//! earliest rule in the files wins (qosify's sequence numbers). A learnt address is kept for the
//! record's TTL (qosify's `timeout`, 3600 s, when the TTL is 0); when it expires and packets used
//! it since, it is kept for `active_timeout` (300 s) more, as qosify's garbage collector does.
//! Patterns are globs as `fnmatch(3)` reads them, or, after a `/`, case-insensitive regular
//! expressions; names are compared in lower case.
//!
//! Where debloat differs: answers over TCP are read too (qosify reads UDP only), when a segment
//! holds whole length-prefixed messages; the address and CNAME tables are bounded, and a full
//! table evicts the entry closest to expiry (counted). Parsing an answer allocates (answers are
//! rare); looking up a data packet's address does not. The tables are ordered maps (not hashed)
//! so that runs repeat exactly.

pub use super::config::compile_regex;
use super::config::{Match, Rule};
use crate::packet::Nanos;
use core::net::IpAddr;
use simple_dns::rdata::RData;
use simple_dns::{Packet, PacketFlag, OPCODE, RCODE};
use std::collections::BTreeMap;

const SEC: Nanos = 1_000_000_000;
/// qosify's default `timeout` for entries without a TTL (seconds).
pub const DEFAULT_TIMEOUT_S: u32 = 3600;
/// qosify's default active timeout (seconds).
pub const DEFAULT_ACTIVE_TIMEOUT_S: u32 = 300;
/// How long a CNAME target keeps its decision (qosify ages its cache out after 5–6 s).
const CNAME_AGE: Nanos = 6 * SEC;
/// Addresses the table holds.
pub const ADDRESS_SLOTS: usize = 65_536;
/// CNAME targets the cache holds.
pub const CNAME_SLOTS: usize = 4_096;

/// `fnmatch(pattern, name, 0)`: `*`, `?`, `[…]` (with `!`/`^` and ranges) and `\` escapes.
pub fn glob(pattern: &[u8], name: &[u8]) -> bool {
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        let step = match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, n));
                p += 1;
                continue;
            }
            Some(b'?') => Some(1),
            Some(b'[') => bracket(&pattern[p..], name[n]),
            Some(b'\\') if p + 1 < pattern.len() => (pattern[p + 1] == name[n]).then_some(2),
            Some(&c) => (c == name[n]).then_some(1),
            None => None,
        };
        match (step, star) {
            (Some(k), _) => {
                p += k;
                n += 1;
            }
            (None, Some((sp, sn))) => {
                p = sp + 1;
                n = sn + 1;
                star = Some((sp, sn + 1));
            }
            (None, None) => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// A bracket expression at the start of `pat` against `c`: the pattern bytes it spans when it
/// matches. An unclosed `[` matches itself.
fn bracket(pat: &[u8], c: u8) -> Option<usize> {
    let mut i = 1;
    let negate = matches!(pat.get(i), Some(b'!' | b'^'));
    i += usize::from(negate);
    let mut hit = false;
    let mut first = true;
    while let Some(&b) = pat.get(i) {
        if b == b']' && !first {
            return (hit != negate).then_some(i + 1);
        }
        first = false;
        if pat.get(i + 1) == Some(&b'-') && pat.get(i + 2).is_some_and(|&e| e != b']') {
            hit |= (b..=pat[i + 2]).contains(&c);
            i += 3;
        } else {
            hit |= b == c;
            i += 1;
        }
    }
    (c == b'[').then_some(1)
}

enum Pattern {
    Glob(Vec<u8>),
    Regex(regex::Regex),
}

struct NameRule {
    rule: usize,
    pattern: Pattern,
    cname_only: bool,
}

/// A learnt address.
#[derive(Clone, Copy, Debug)]
struct Entry {
    rule: usize,
    expires: Nanos,
    seen: bool,
}

/// What snooping counted.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct DnsCounters {
    /// Responses read (NOERROR, one question).
    pub answers: u64,
    /// DNS messages skipped: queries, errors, other opcodes, several questions.
    pub skipped: u64,
    /// Messages that did not parse.
    pub malformed: u64,
    /// Addresses learnt (or renewed) from A/AAAA records.
    pub addresses: u64,
    /// CNAME targets remembered.
    pub cnames: u64,
    /// Learnt addresses that expired.
    pub expired: u64,
    /// Expired addresses kept because packets used them (`active_timeout`).
    pub kept_active: u64,
    /// Entries evicted from a full table.
    pub evictions: u64,
    /// Addresses held now.
    pub held: u64,
}

/// The snooper and the addresses it learnt.
pub struct Dns {
    names: Vec<NameRule>,
    addrs: BTreeMap<IpAddr, Entry>,
    cnames: BTreeMap<String, (usize, Nanos)>,
    ttl0: Nanos,
    active: Nanos,
    counters: DnsCounters,
}

impl core::fmt::Debug for Dns {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Dns")
            .field("patterns", &self.names.len())
            .field("held", &self.addrs.len())
            .finish()
    }
}

impl Dns {
    /// The snooper for `rules`' `dns:`/`dns_c:` patterns (patterns were checked when read).
    pub fn new(rules: &[Rule], timeout_s: Option<u32>, active_s: Option<u32>) -> Dns {
        let names: Vec<NameRule> = rules
            .iter()
            .enumerate()
            .filter_map(|(i, r)| {
                let (p, cname_only) = match &r.matches {
                    Match::Dns(p) => (p, false),
                    Match::DnsCname(p) => (p, true),
                    _ => return None,
                };
                let pattern = match p.strip_prefix('/') {
                    Some(re) => Pattern::Regex(compile_regex(re).ok()?),
                    None => Pattern::Glob(p.as_bytes().to_vec()),
                };
                Some(NameRule {
                    rule: i,
                    pattern,
                    cname_only,
                })
            })
            .collect();
        Dns {
            names,
            addrs: BTreeMap::new(),
            cnames: BTreeMap::new(),
            ttl0: Nanos::from(timeout_s.unwrap_or(DEFAULT_TIMEOUT_S)) * SEC,
            active: Nanos::from(active_s.unwrap_or(DEFAULT_ACTIVE_TIMEOUT_S).max(1)) * SEC,
            counters: DnsCounters::default(),
        }
    }

    /// Whether any rule names a DNS pattern.
    pub fn active(&self) -> bool {
        !self.names.is_empty()
    }

    /// The counters.
    pub fn counters(&self) -> DnsCounters {
        DnsCounters {
            held: self.addrs.len() as u64,
            ..self.counters.clone()
        }
    }

    /// The rule that decides packets to or from `addr` at `now`, if a DNS answer taught one.
    pub fn lookup(&mut self, addr: IpAddr, now: Nanos) -> Option<usize> {
        if self.addrs.is_empty() {
            return None;
        }
        let e = self.addrs.get_mut(&addr)?;
        // qosify's collector, run lazily: at each expiry an entry used since is renewed for
        // `active_timeout`, one that was not is dropped.
        while now >= e.expires {
            if !e.seen {
                self.addrs.remove(&addr);
                self.counters.expired += 1;
                return None;
            }
            e.expires += self.active;
            e.seen = false;
            self.counters.kept_active += 1;
        }
        e.seen = true;
        Some(e.rule)
    }

    /// The earliest rule whose pattern matches `name` (`cname`: an answer's CNAME target).
    fn best(&self, name: &str, cname: bool, mut best: Option<usize>) -> Option<usize> {
        for n in &self.names {
            if best.is_some_and(|b| b <= n.rule) {
                break;
            }
            if n.cname_only && !cname {
                continue;
            }
            let hit = match &n.pattern {
                Pattern::Glob(g) => glob(g, name.as_bytes()),
                Pattern::Regex(r) => r.is_match(name),
            };
            if hit {
                best = Some(n.rule);
                break;
            }
        }
        best
    }

    /// Read one DNS message (the payload of a UDP datagram, or one message of a TCP stream
    /// without its length prefix) seen at `now`.
    pub fn snoop(&mut self, msg: &[u8], now: Nanos) {
        let Ok(p) = Packet::parse(msg) else {
            self.counters.malformed += 1;
            return;
        };
        if !p.has_flags(PacketFlag::RESPONSE)
            || p.opcode() != OPCODE::StandardQuery
            || p.rcode() != RCODE::NoError
            || p.questions.len() != 1
        {
            self.counters.skipped += 1;
            return;
        }
        self.counters.answers += 1;
        let qname = p.questions[0].qname.to_string().to_ascii_lowercase();
        let mut best = match self.cnames.get(&qname) {
            Some(&(rule, at)) if now.saturating_sub(at) < CNAME_AGE => Some(rule),
            _ => None,
        };
        best = self.best(&qname, false, best);
        for rr in &p.answers {
            match &rr.rdata {
                RData::CNAME(target) => {
                    let t = target.0.to_string().to_ascii_lowercase();
                    best = self.best(&t, true, best);
                    if let Some(rule) = best {
                        self.remember_cname(t, rule, now);
                    }
                }
                RData::A(a) => self.learn(IpAddr::from(a.address.to_be_bytes()), rr.ttl, best, now),
                RData::AAAA(a) => {
                    self.learn(IpAddr::from(a.address.to_be_bytes()), rr.ttl, best, now)
                }
                _ => {}
            }
        }
    }

    fn remember_cname(&mut self, name: String, rule: usize, now: Nanos) {
        if self.cnames.len() >= CNAME_SLOTS && !self.cnames.contains_key(&name) {
            self.cnames
                .retain(|_, (_, at)| now.saturating_sub(*at) < CNAME_AGE);
            if self.cnames.len() >= CNAME_SLOTS {
                let oldest = self.cnames.iter().min_by_key(|(_, (_, at))| *at);
                if let Some(k) = oldest.map(|(k, _)| k.clone()) {
                    self.cnames.remove(&k);
                    self.counters.evictions += 1;
                }
            }
        }
        self.counters.cnames += 1;
        self.cnames.insert(name, (rule, now));
    }

    fn learn(&mut self, addr: IpAddr, ttl: u32, rule: Option<usize>, now: Nanos) {
        let Some(rule) = rule else { return };
        if self.addrs.len() >= ADDRESS_SLOTS && !self.addrs.contains_key(&addr) {
            let before = self.addrs.len();
            self.addrs.retain(|_, e| now < e.expires || e.seen);
            self.counters.expired += (before - self.addrs.len()) as u64;
            if self.addrs.len() >= ADDRESS_SLOTS {
                let soonest = self.addrs.iter().min_by_key(|(_, e)| e.expires);
                if let Some(k) = soonest.map(|(k, _)| *k) {
                    self.addrs.remove(&k);
                    self.counters.evictions += 1;
                }
            }
        }
        let life = if ttl == 0 {
            self.ttl0
        } else {
            Nanos::from(ttl) * SEC
        };
        self.counters.addresses += 1;
        self.addrs.insert(
            addr,
            Entry {
                rule,
                expires: now + life,
                seen: false,
            },
        );
    }
}

/// The DNS messages in a transport payload from port 53: a UDP datagram is one message; a TCP
/// segment holds messages each behind a 2-byte length (a message split across segments is not
/// reassembled and yields nothing).
pub fn messages(payload: &[u8], tcp: bool, mut each: impl FnMut(&[u8])) {
    if !tcp {
        if !payload.is_empty() {
            each(payload);
        }
        return;
    }
    let mut rest = payload;
    while rest.len() >= 2 {
        let len = usize::from(u16::from_be_bytes([rest[0], rest[1]]));
        let Some(msg) = rest.get(2..2 + len) else {
            return;
        };
        each(msg);
        rest = &rest[2 + len..];
    }
}

/// The transport payload of a frame sent from port 53 (UDP or TCP), and whether it is TCP.
pub fn port_53_payload(frame: &[u8], link: crate::classify::LinkType) -> Option<(&[u8], bool)> {
    use etherparse::{LaxSlicedPacket, TransportSlice};
    let parsed = match link {
        crate::classify::LinkType::Ethernet => LaxSlicedPacket::from_ethernet(frame).ok()?,
        crate::classify::LinkType::RawIp => LaxSlicedPacket::from_ip(frame).ok()?,
    };
    match parsed.transport? {
        TransportSlice::Udp(u) if u.source_port() == 53 => Some((u.payload(), false)),
        TransportSlice::Tcp(t) if t.source_port() == 53 => Some((t.payload(), true)),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
