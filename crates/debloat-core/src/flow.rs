//! Flow keys and the keyed flow hash.
//!
//! Linux hashes the flow dissector's keys (addresses, ports, protocol; for IPv6 with a non-zero
//! flow label, addresses and label) with SipHash under a random per-boot key, after putting the
//! addresses and ports in a canonical order so both directions hash alike. Exact kernel hash
//! values cannot be reproduced, so the key is an input here: the same key gives the same hash
//! on every run, which keeps the simulator deterministic.
//!
//! Deviation: we use SipHash-1-3 (the variant Rust's std uses) rather than the kernel's
//! SipHash-2-4; both are keyed PRFs, the shorter one costs about half as much per packet.

use std::net::IpAddr;

/// The identity of a flow, as the flow dissector extracts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FlowKey {
    /// An IPv4 or IPv6 packet.
    Ip {
        /// Source address.
        src: IpAddr,
        /// Destination address.
        dst: IpAddr,
        /// Source port (0 when the protocol has none).
        sport: u16,
        /// Destination port (0 when the protocol has none).
        dport: u16,
        /// IP protocol number (6 TCP, 17 UDP, 1 ICMP, 58 ICMPv6).
        proto: u8,
        /// IPv6 flow label (0 for IPv4 or unlabelled); when non-zero the dissector stops there,
        /// so the hash covers addresses and label, not ports.
        flow_label: u32,
    },
    /// A non-IP frame (ARP, LLDP …): all frames of one EtherType form one flow.
    NonIp {
        /// The EtherType.
        ethertype: u16,
    },
}

impl FlowKey {
    /// A UDP/TCP-style 5-tuple with no flow label.
    pub fn ip(src: IpAddr, dst: IpAddr, sport: u16, dport: u16, proto: u8) -> FlowKey {
        FlowKey::Ip {
            src,
            dst,
            sport,
            dport,
            proto,
            flow_label: 0,
        }
    }

    /// The same flow seen from the other end (addresses and ports swapped).
    pub fn reversed(&self) -> FlowKey {
        match *self {
            FlowKey::Ip {
                src,
                dst,
                sport,
                dport,
                proto,
                flow_label,
            } => FlowKey::Ip {
                src: dst,
                dst: src,
                sport: dport,
                dport: sport,
                proto,
                flow_label,
            },
            k => k,
        }
    }

    /// True for IPv4 and IPv6 packets.
    pub fn is_ip(&self) -> bool {
        matches!(self, FlowKey::Ip { .. })
    }

    /// Source address, if IP.
    pub fn src(&self) -> Option<IpAddr> {
        match self {
            FlowKey::Ip { src, .. } => Some(*src),
            FlowKey::NonIp { .. } => None,
        }
    }

    /// Destination address, if IP.
    pub fn dst(&self) -> Option<IpAddr> {
        match self {
            FlowKey::Ip { dst, .. } => Some(*dst),
            FlowKey::NonIp { .. } => None,
        }
    }
}

/// Which parts of a key a hash covers (CAKE hashes hosts separately from flows).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HashPart {
    /// The whole flow, direction-symmetric.
    Flow,
    /// Only the source address.
    SrcHost,
    /// Only the destination address.
    DstHost,
}

/// A keyed flow hasher. The same key always gives the same hashes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowHasher {
    key: [u64; 2],
}

impl FlowHasher {
    /// A hasher with the given 128-bit key (the kernel draws its key at boot).
    pub fn new(key: [u64; 2]) -> FlowHasher {
        FlowHasher { key }
    }

    /// The 32-bit hash of part of a key; never 0 (Linux maps 0 to 1 so 0 can mean "none").
    ///
    /// The key is laid out compactly on the stack, as the kernel's `flow_keys` are (13 bytes for
    /// an IPv4 5-tuple, 37 for IPv6), and hashed in one pass.
    pub fn hash(&self, key: &FlowKey, part: HashPart) -> u32 {
        self.hash64(key, part).map_or(0, fold)
    }

    /// The symmetric flow hash's 64 bits before they are folded to 32 ([`FlowHasher::hash`]
    /// of `HashPart::Flow` is their fold): a fingerprint that tells flows apart.
    #[inline]
    pub fn flow_hash64(&self, key: &FlowKey) -> u64 {
        self.hash64(key, HashPart::Flow).unwrap_or(1)
    }

    /// The unfolded hash; None where Linux's CAKE gives a host hash of 0 (non-IP packets).
    fn hash64(&self, key: &FlowKey, part: HashPart) -> Option<u64> {
        // IPv4 keys (a 5-tuple is one word and a tail, a host a tail) are hashed without laying
        // out the buffer; the value is the buffer path's (tests compare them).
        if let FlowKey::Ip {
            src,
            dst,
            sport,
            dport,
            proto,
            ..
        } = *key
        {
            if let (HashPart::Flow, IpAddr::V4(s), IpAddr::V4(d)) = (part, src, dst) {
                let (s, d) = (s.to_bits(), d.to_bits());
                let (a, b, pa, pb) = if (s, sport) > (d, dport) {
                    (d, s, dport, sport)
                } else {
                    (s, d, sport, dport)
                };
                let word = u64::from(a.swap_bytes()) | u64::from(b.swap_bytes()) << 32;
                let tail = u64::from(pa.swap_bytes())
                    | u64::from(pb.swap_bytes()) << 16
                    | u64::from(proto) << 32;
                let mut v = sip13_init(self.key);
                sip13_word(&mut v, word);
                return Some(sip13_last(v, tail, 13));
            }
            let host = match (part, src, dst) {
                (HashPart::SrcHost, IpAddr::V4(a), _) => {
                    Some((u64::from(a.to_bits().swap_bytes()), 4))
                }
                (HashPart::DstHost, _, IpAddr::V4(a)) => {
                    Some((0xd5 | u64::from(a.to_bits().swap_bytes()) << 8, 5))
                }
                _ => None,
            };
            if let Some((tail, n)) = host {
                return Some(sip13_last(sip13_init(self.key), tail, n));
            }
        }
        let mut buf = [0u8; 40];
        let n = match *key {
            FlowKey::Ip {
                src,
                dst,
                sport,
                dport,
                proto,
                flow_label,
            } => match part {
                HashPart::Flow => flow_bytes(&mut buf, src, dst, sport, dport, proto, flow_label),
                HashPart::SrcHost => addr_into(&mut buf, 0, src),
                HashPart::DstHost => {
                    // Tag the destination so a host's src and dst hashes differ.
                    buf[0] = 0xd5;
                    addr_into(&mut buf, 1, dst)
                }
            },
            FlowKey::NonIp { ethertype } => match part {
                HashPart::Flow => {
                    buf[..2].copy_from_slice(&ethertype.to_be_bytes());
                    2
                }
                // Linux's CAKE gives non-IP packets host hash 0.
                HashPart::SrcHost | HashPart::DstHost => return None,
            },
        };
        Some(siphash13(self.key, &buf, n))
    }

    /// The flow hash of a packet: its cached `hash` if set, else the keyed hash of its flow.
    #[inline]
    pub fn flow_hash(&self, meta: &crate::packet::PacketMeta) -> u32 {
        if meta.hash != 0 {
            meta.hash
        } else {
            self.hash(&meta.flow, HashPart::Flow)
        }
    }
}

/// Write an address at `at`; returns the end offset.
fn addr_into(buf: &mut [u8; 40], at: usize, a: IpAddr) -> usize {
    match a {
        IpAddr::V4(v4) => {
            buf[at..at + 4].copy_from_slice(&v4.octets());
            at + 4
        }
        IpAddr::V6(v6) => {
            buf[at..at + 16].copy_from_slice(&v6.octets());
            at + 16
        }
    }
}

/// The canonical (direction-symmetric) flow key, as Linux `__flow_hash_consistentify` orders
/// it: lower (address, port) first. Returns its length.
fn flow_bytes(
    buf: &mut [u8; 40],
    src: IpAddr,
    dst: IpAddr,
    sport: u16,
    dport: u16,
    proto: u8,
    flow_label: u32,
) -> usize {
    let swap = match (src, dst) {
        (IpAddr::V4(a), IpAddr::V4(b)) => (a.to_bits(), sport) > (b.to_bits(), dport),
        (IpAddr::V6(a), IpAddr::V6(b)) => (a.to_bits(), sport) > (b.to_bits(), dport),
        _ => src > dst,
    };
    let (a, b, pa, pb) = if swap {
        (dst, src, dport, sport)
    } else {
        (src, dst, sport, dport)
    };
    let mut n = addr_into(buf, 0, a);
    n = addr_into(buf, n, b);
    if flow_label != 0 && src.is_ipv6() {
        buf[n..n + 4].copy_from_slice(&flow_label.to_be_bytes());
    } else {
        buf[n..n + 2].copy_from_slice(&pa.to_be_bytes());
        buf[n + 2..n + 4].copy_from_slice(&pb.to_be_bytes());
    }
    buf[n + 4] = proto;
    n + 5
}

/// One SipRound.
#[inline(always)]
fn sip_round(v: &mut [u64; 4]) {
    v[0] = v[0].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(13) ^ v[0];
    v[0] = v[0].rotate_left(32);
    v[2] = v[2].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(16) ^ v[2];
    v[0] = v[0].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(21) ^ v[0];
    v[2] = v[2].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(17) ^ v[2];
    v[2] = v[2].rotate_left(32);
}

/// SipHash-1-3 of the first `n` bytes of `buf`, whose bytes from `n` on are zero.
///
/// The same function as the `siphasher` crate's `SipHasher13` (a test compares them on random
/// inputs), written for this one shape of input: whole little-endian words read straight from
/// the fixed buffer, and the zero padding standing in for the streaming hasher's tail buffer.
/// fq_codel hashing every packet in software went from 2.6–2.7× to 2.3–2.4× a pfifo's
/// per-packet time with it and the word-fed IPv4 paths (BENCHMARKS.md).
#[inline]
fn siphash13(key: [u64; 2], buf: &[u8; 40], n: usize) -> u64 {
    let word = |i: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&buf[8 * i..8 * i + 8]);
        u64::from_le_bytes(w)
    };
    let mut v = sip13_init(key);
    let n = n.min(buf.len());
    let whole = n / 8;
    for i in 0..whole {
        sip13_word(&mut v, word(i));
    }
    // The last word: the tail bytes (the zero padding after them reads as zero).
    let tail = if whole < buf.len() / 8 {
        word(whole)
    } else {
        0
    };
    sip13_last(v, tail, n)
}

/// One whole little-endian word of input through SipHash-1-3's compression.
#[inline(always)]
fn sip13_word(v: &mut [u64; 4], m: u64) {
    v[3] ^= m;
    sip_round(v);
    v[0] ^= m;
}

/// SipHash's initial state for `key`.
#[inline(always)]
fn sip13_init(key: [u64; 2]) -> [u64; 4] {
    [
        key[0] ^ 0x736f_6d65_7073_6575,
        key[1] ^ 0x646f_7261_6e64_6f6d,
        key[0] ^ 0x6c79_6765_6e65_7261,
        key[1] ^ 0x7465_6462_7974_6573,
    ]
}

/// SipHash-1-3's last word (the `n % 8` tail bytes, little-endian, and the length `n` in the
/// top byte) and finalisation.
#[inline(always)]
fn sip13_last(mut v: [u64; 4], tail: u64, n: usize) -> u64 {
    let b = tail | ((n as u64) << 56);
    v[3] ^= b;
    sip_round(&mut v);
    v[0] ^= b;
    v[2] ^= 0xff;
    sip_round(&mut v);
    sip_round(&mut v);
    sip_round(&mut v);
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

/// A 64-bit hash folded to 32 bits, never 0 (Linux maps 0 to 1 so 0 can mean "none").
#[inline(always)]
pub fn fold(v: u64) -> u32 {
    match (v ^ (v >> 32)) as u32 {
        0 => 1,
        x => x,
    }
}

/// Linux `reciprocal_scale`: map a 32-bit hash onto `0..n` without a division.
pub fn reciprocal_scale(hash: u32, n: u32) -> u32 {
    ((u64::from(hash) * u64::from(n)) >> 32) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn k(s: u8, d: u8, sp: u16, dp: u16) -> FlowKey {
        FlowKey::ip(
            IpAddr::V4(Ipv4Addr::new(198, 18, 0, s)),
            IpAddr::V4(Ipv4Addr::new(198, 18, 1, d)),
            sp,
            dp,
            6,
        )
    }

    #[test]
    fn flow_hash_is_direction_symmetric() {
        let h = FlowHasher::new([1, 2]);
        let fwd = k(1, 2, 1000, 80);
        let rev = fwd.reversed();
        assert_eq!(h.hash(&fwd, HashPart::Flow), h.hash(&rev, HashPart::Flow));
    }

    #[test]
    fn host_hashes_ignore_ports() {
        let h = FlowHasher::new([3, 4]);
        assert_eq!(
            h.hash(&k(1, 2, 1, 2), HashPart::SrcHost),
            h.hash(&k(1, 9, 7, 8), HashPart::SrcHost)
        );
        assert_ne!(
            h.hash(&k(1, 2, 1, 2), HashPart::Flow),
            h.hash(&k(1, 2, 1, 3), HashPart::Flow)
        );
    }

    #[test]
    fn siphash13_matches_the_siphasher_crate() {
        use siphasher::sip::SipHasher13;
        let mut rng = crate::rng::SplitMix64::new(7);
        for n in 0..=40 {
            for _ in 0..50 {
                let key = [rng.next_u64(), rng.next_u64()];
                let mut buf = [0u8; 40];
                for b in &mut buf[..n] {
                    *b = rng.next_u32() as u8;
                }
                let want = SipHasher13::new_with_keys(key[0], key[1]).hash(&buf[..n]);
                assert_eq!(siphash13(key, &buf, n), want, "{n} bytes");
            }
        }
    }

    #[test]
    fn ipv4_host_hashes_are_siphash_of_the_address_bytes() {
        use siphasher::sip::SipHasher13;
        let fold = |v: u64| (v ^ (v >> 32)) as u32;
        let h = FlowHasher::new([11, 12]);
        for (s, d) in [(1u8, 2u8), (200, 7), (0, 255)] {
            let key = k(s, d, 5, 6);
            let sip = |b: &[u8]| fold(SipHasher13::new_with_keys(11, 12).hash(b));
            assert_eq!(h.hash(&key, HashPart::SrcHost), sip(&[198, 18, 0, s]));
            assert_eq!(h.hash(&key, HashPart::DstHost), sip(&[0xd5, 198, 18, 1, d]));
        }
    }

    #[test]
    fn ipv4_flow_hashes_are_siphash_of_the_canonical_tuple() {
        use siphasher::sip::SipHasher13;
        let fold = |v: u64| (v ^ (v >> 32)) as u32;
        let h = FlowHasher::new([13, 14]);
        let sip = |b: &[u8]| fold(SipHasher13::new_with_keys(13, 14).hash(b));
        // 198.18.0.1:1000 ↔ 198.18.1.2:80, UDP: the lower (address, port) goes first.
        let want = sip(&[198, 18, 0, 1, 198, 18, 1, 2, 0x03, 0xe8, 0, 80, 17]);
        let fwd = FlowKey::ip(
            IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)),
            IpAddr::V4(Ipv4Addr::new(198, 18, 1, 2)),
            1000,
            80,
            17,
        );
        assert_eq!(h.hash(&fwd, HashPart::Flow), want);
        assert_eq!(h.hash(&fwd.reversed(), HashPart::Flow), want);
        // Same address both ways: the lower port goes first.
        let a = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 9));
        let same = FlowKey::ip(a, a, 5000, 53, 6);
        let want = sip(&[198, 18, 0, 9, 198, 18, 0, 9, 0, 53, 0x13, 0x88, 6]);
        assert_eq!(h.hash(&same, HashPart::Flow), want);
        assert_eq!(h.hash(&same.reversed(), HashPart::Flow), want);
    }

    #[test]
    fn key_changes_hash() {
        let f = k(1, 2, 3, 4);
        assert_ne!(
            FlowHasher::new([1, 1]).hash(&f, HashPart::Flow),
            FlowHasher::new([1, 2]).hash(&f, HashPart::Flow)
        );
    }

    #[test]
    fn reciprocal_scale_maps_into_range() {
        assert_eq!(reciprocal_scale(u32::MAX, 1024), 1023);
        assert_eq!(reciprocal_scale(0, 1024), 0);
        assert_eq!(reciprocal_scale(1 << 31, 1024), 512);
    }
}
