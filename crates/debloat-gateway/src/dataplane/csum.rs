//! Finishing the TCP and UDP checksums the kernel left for a NIC to fill in.
//!
//! A frame sent with checksum offload on (the default on veths, and what a virtio-net guest or a
//! container on the same host sends) carries only the pseudo-header's sum in its TCP or UDP
//! checksum field (`CHECKSUM_PARTIAL`); the device that sends it on a wire computes the rest.
//! An AF_PACKET socket receives such frames as they are, marked `TP_STATUS_CSUMNOTREADY`, and a
//! forwarder that sends them on unchanged delivers segments every receiver drops. The gateway
//! computes the whole checksum for those frames (RFC 1071's ones' complement sum over the
//! pseudo-header and the segment) before they enter the data path.
//!
//! Handled: Ethernet with up to two VLAN tags, IPv4 (not fragments) and IPv6 with TCP or UDP
//! directly after the fixed header. Anything else is left as it is and reported as not done.

/// Where the IP header starts: after the Ethernet header and any 802.1Q / 802.1ad tags.
fn network_offset(f: &[u8]) -> Option<(usize, u16)> {
    let mut off = 12;
    loop {
        let ty = u16::from_be_bytes([*f.get(off)?, *f.get(off + 1)?]);
        match ty {
            0x8100 | 0x88a8 => off += 4,
            _ => return Some((off + 2, ty)),
        }
    }
}

/// The ones' complement sum of `b` (16-bit big-endian words, an odd last byte padded), not yet
/// folded.
pub(crate) fn sum(b: &[u8], mut acc: u64) -> u64 {
    let mut words = b.chunks_exact(2);
    for w in &mut words {
        acc += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        acc += u64::from(*last) << 8;
    }
    acc
}

pub(crate) fn fold(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// Compute and write the TCP or UDP checksum of an Ethernet frame from scratch. Returns whether
/// it did (false: not IPv4/IPv6 with TCP/UDP, a fragment, or cut short).
pub fn complete(f: &mut [u8]) -> bool {
    let Some((ip, ethertype)) = network_offset(f) else {
        return false;
    };
    let (l4, proto, pseudo) = match ethertype {
        0x0800 => {
            let Some(h) = f.get(ip..ip + 20) else {
                return false;
            };
            let ihl = usize::from(h[0] & 0x0f) * 4;
            let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
            let frag = u16::from_be_bytes([h[6], h[7]]) & 0x3fff;
            if h[0] >> 4 != 4 || ihl < 20 || frag != 0 || total < ihl || ip + total > f.len() {
                return false;
            }
            let len = total - ihl;
            let pseudo = sum(&h[12..20], u64::from(h[9]) + len as u64);
            (ip + ihl..ip + total, h[9], pseudo)
        }
        0x86dd => {
            let Some(h) = f.get(ip..ip + 40) else {
                return false;
            };
            let len = usize::from(u16::from_be_bytes([h[4], h[5]]));
            if h[0] >> 4 != 6 || ip + 40 + len > f.len() {
                return false;
            }
            let pseudo = sum(&h[8..40], u64::from(h[6]) + len as u64);
            (ip + 40..ip + 40 + len, h[6], pseudo)
        }
        _ => return false,
    };
    let at = match proto {
        6 if l4.len() >= 20 => l4.start + 16,
        17 if l4.len() >= 8 => l4.start + 6,
        _ => return false,
    };
    f[at] = 0;
    f[at + 1] = 0;
    let mut c = !fold(sum(&f[l4], pseudo));
    if proto == 17 && c == 0 {
        c = 0xffff; // UDP: zero means "no checksum"
    }
    f[at..at + 2].copy_from_slice(&c.to_be_bytes());
    true
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use etherparse::{PacketBuilder, SlicedPacket, TransportSlice};

    /// A frame as etherparse builds it (checksums right), and the same with its L4 checksum
    /// replaced by what the kernel leaves under CHECKSUM_PARTIAL (the pseudo-header's sum).
    fn frames(v6: bool, udp: bool, payload: usize) -> (Vec<u8>, Vec<u8>) {
        let b = PacketBuilder::ethernet2([1; 6], [2; 6]);
        let b = if v6 {
            let mut s = [0u8; 16];
            s[..4].copy_from_slice(&[0x20, 0x01, 0, 0x02]);
            let mut d = s;
            s[15] = 2;
            d[15] = 3;
            b.ipv6(s, d, 64)
        } else {
            b.ipv4([198, 18, 1, 2], [198, 18, 2, 2], 64)
        };
        let data: Vec<u8> = (0..payload).map(|i| (i * 7) as u8).collect();
        let mut good = Vec::new();
        if udp {
            b.udp(4000, 9).write(&mut good, &data).unwrap();
        } else {
            b.tcp(40000, 5201, 7, 65535)
                .write(&mut good, &data)
                .unwrap();
        }
        let mut partial = good.clone();
        let (ip, _) = network_offset(&partial).unwrap();
        let at = ip + if v6 { 40 } else { 20 } + if udp { 6 } else { 16 };
        partial[at..at + 2].copy_from_slice(&[0x12, 0x34]);
        (good, partial)
    }

    #[test]
    fn a_partial_checksum_is_completed_to_the_right_one() {
        for v6 in [false, true] {
            for udp in [false, true] {
                for payload in [0, 1, 100, 1001, 1400] {
                    let (good, mut partial) = frames(v6, udp, payload);
                    assert_ne!(good, partial);
                    assert!(complete(&mut partial), "v6 {v6} udp {udp} {payload}");
                    assert_eq!(good, partial, "v6 {v6} udp {udp} payload {payload}");
                }
            }
        }
    }

    #[test]
    fn tagged_frames_are_completed_and_others_left_alone() {
        let (good, mut partial) = frames(false, false, 300);
        let tag = [0x81, 0x00, 0x00, 100];
        let (mut g, mut p) = (good.clone(), partial.clone());
        g.splice(12..12, tag);
        p.splice(12..12, tag);
        assert!(complete(&mut p));
        assert_eq!(g, p);
        let s = SlicedPacket::from_ethernet(&p).unwrap();
        assert!(matches!(s.transport, Some(TransportSlice::Tcp(_))));
        // A fragment, ARP, and a frame cut short: untouched.
        partial[14 + 6] = 0x20; // more fragments
        let before = partial.clone();
        assert!(!complete(&mut partial));
        assert_eq!(before, partial);
        let mut arp = vec![0xff; 42];
        arp[12] = 0x08;
        arp[13] = 0x06;
        assert!(!complete(&mut arp));
        let mut short = good[..40].to_vec();
        assert!(!complete(&mut short));
        assert!(!complete(&mut []));
    }
}
