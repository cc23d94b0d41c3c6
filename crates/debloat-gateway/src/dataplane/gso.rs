//! Super-frames cut back into the packets they stand for (software GSO), as the kernel's
//! `tcp_gso_segment` and `__udp_gso_segment` would cut them before a NIC.
//!
//! A host with segmentation offload on — the default on veths, and what a container or a
//! virtio-net guest on the same machine sends — hands its device one TCP "segment" of up to
//! 64 KB, and the device (a real NIC, or the kernel's GSO on the way to one) cuts it into
//! MTU-sized packets. On a veth nothing cuts it: the gateway's AF_PACKET socket receives the
//! super-frame whole, with a `virtio_net_hdr` in front (`PACKET_VNET_HDR`) that says how to cut
//! it (`gso_type`, `gso_size`). A shaper must see the packets that will be on the wire — CAKE
//! splits super-packets for the same reason — so the gateway cuts them here, before the data
//! path, and every piece is an ordinary frame from then on.
//!
//! As the kernel does: each TCP piece carries `gso_size` bytes of payload (the last the rest),
//! its sequence number advanced by what went before, FIN and PSH only on the last piece and CWR
//! only on the first; UDP pieces (`UDP_L4`, UDP_SEGMENT) each get their own UDP length; IPv4
//! pieces get their own total length and header checksum and consecutive IDs; IPv6 pieces their
//! payload length; every TCP/UDP checksum is computed whole ([`crate::csum`]). Not handled
//! (counted and dropped): UFO (`VIRTIO_NET_HDR_GSO_UDP`, IP fragmentation), IPv6 extension
//! headers, IPv4 options-bearing fragments — none of which Linux emits for TCP or UDP_SEGMENT.

/// `struct virtio_net_hdr` (linux/virtio_net.h): what the kernel says about a frame it hands
/// over with `PACKET_VNET_HDR`. Legacy virtio: fields in the host's byte order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VnetHdr {
    /// `VIRTIO_NET_HDR_F_NEEDS_CSUM` (1): the TCP/UDP checksum is partial.
    pub flags: u8,
    /// `VIRTIO_NET_HDR_GSO_*`: NONE 0, TCPV4 1, UDP 3, TCPV6 4, UDP_L4 5; `ECN` (0x80) or'd in.
    pub gso_type: u8,
    /// Bytes of headers (Ethernet to L4).
    pub hdr_len: u16,
    /// Payload bytes per piece.
    pub gso_size: u16,
    /// Where checksumming starts, from the frame's start.
    pub csum_start: u16,
    /// Where the checksum goes, from `csum_start`.
    pub csum_offset: u16,
}

/// Bytes of a `virtio_net_hdr`.
pub const VNET_HDR_LEN: usize = 10;

const GSO_NONE: u8 = 0;
const GSO_TCPV4: u8 = 1;
const GSO_TCPV6: u8 = 4;
const GSO_UDP_L4: u8 = 5;
const GSO_ECN: u8 = 0x80;

impl VnetHdr {
    /// Read one from the first [`VNET_HDR_LEN`] bytes of `b`.
    pub fn parse(b: &[u8]) -> Option<VnetHdr> {
        let b = b.get(..VNET_HDR_LEN)?;
        let u = |i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
        Some(VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u(2),
            gso_size: u(4),
            csum_start: u(6),
            csum_offset: u(8),
        })
    }

    /// Whether the frame stands for several packets.
    pub fn is_gso(&self) -> bool {
        self.gso_type & !GSO_ECN != GSO_NONE
    }
}

/// Why a super-frame was not cut.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum GsoError {
    /// A kind of segmentation the gateway does not do (UFO, unknown types).
    #[error("segmentation type {0} not supported")]
    Unsupported(u8),
    /// Headers that do not match the type, or no room for a piece.
    #[error("malformed super-frame: {0}")]
    Malformed(&'static str),
}

/// The layout of a super-frame's headers.
struct Layout {
    ip: usize,
    v4: bool,
    l4: usize,
    payload: usize,
    tcp: bool,
}

fn layout(h: &VnetHdr, f: &[u8]) -> Result<Layout, GsoError> {
    let mut ip = 12;
    let ethertype = loop {
        let t = f
            .get(ip..ip + 2)
            .ok_or(GsoError::Malformed("short Ethernet header"))?;
        match u16::from_be_bytes([t[0], t[1]]) {
            0x8100 | 0x88a8 => ip += 4,
            t => break t,
        }
    };
    ip += 2;
    let (v4, proto, l4) = match ethertype {
        0x0800 => {
            let b = f
                .get(ip..ip + 20)
                .ok_or(GsoError::Malformed("short IPv4 header"))?;
            (true, b[9], ip + usize::from(b[0] & 0x0f) * 4)
        }
        0x86dd => (
            false,
            *f.get(ip + 6)
                .ok_or(GsoError::Malformed("short IPv6 header"))?,
            ip + 40,
        ),
        _ => return Err(GsoError::Malformed("not IPv4 or IPv6")),
    };
    let kind = h.gso_type & !GSO_ECN;
    let tcp = match (kind, v4, proto) {
        (GSO_TCPV4, true, 6) | (GSO_TCPV6, false, 6) => true,
        (GSO_UDP_L4, _, 17) => false,
        (GSO_TCPV4 | GSO_TCPV6 | GSO_UDP_L4, _, _) => {
            return Err(GsoError::Malformed(
                "headers do not match the segmentation type",
            ))
        }
        (k, _, _) => return Err(GsoError::Unsupported(k)),
    };
    let l4_len = if tcp {
        usize::from(
            f.get(l4 + 12)
                .ok_or(GsoError::Malformed("short TCP header"))?
                >> 4,
        ) * 4
    } else {
        8
    };
    let payload = l4 + l4_len;
    if payload > f.len() || (tcp && l4_len < 20) {
        return Err(GsoError::Malformed("headers longer than the frame"));
    }
    Ok(Layout {
        ip,
        v4,
        l4,
        payload,
        tcp,
    })
}

/// Cut super-frame `f` into the frames it stands for, appended to `out`. A frame with no
/// segmentation type is appended as it is.
pub fn segment(h: &VnetHdr, f: &[u8], out: &mut Vec<Vec<u8>>) -> Result<(), GsoError> {
    if !h.is_gso() {
        out.push(f.to_vec());
        return Ok(());
    }
    let l = layout(h, f)?;
    let size = usize::from(h.gso_size);
    if size == 0 {
        return Err(GsoError::Malformed("gso_size 0"));
    }
    let data = &f[l.payload..];
    let pieces = data.len().div_ceil(size).max(1);
    for (i, chunk) in data.chunks(size).enumerate() {
        let mut p = Vec::with_capacity(l.payload + chunk.len());
        p.extend_from_slice(&f[..l.payload]);
        p.extend_from_slice(chunk);
        fix_ip(&mut p, &l, i);
        if l.tcp {
            fix_tcp(&mut p[l.l4..], i, pieces, size);
        } else {
            let len = (p.len() - l.l4) as u16;
            p[l.l4 + 4..l.l4 + 6].copy_from_slice(&len.to_be_bytes());
        }
        crate::csum::complete(&mut p);
        out.push(p);
    }
    Ok(())
}

/// A piece's IP header: its length, and for IPv4 the `i`-th ID after the super-frame's and a
/// new header checksum.
fn fix_ip(p: &mut [u8], l: &Layout, i: usize) {
    if l.v4 {
        let total = (p.len() - l.ip) as u16;
        p[l.ip + 2..l.ip + 4].copy_from_slice(&total.to_be_bytes());
        let id = u16::from_be_bytes([p[l.ip + 4], p[l.ip + 5]]).wrapping_add(i as u16);
        p[l.ip + 4..l.ip + 6].copy_from_slice(&id.to_be_bytes());
        p[l.ip + 10..l.ip + 12].copy_from_slice(&[0, 0]);
        let c = ipv4_checksum(&p[l.ip..l.l4]);
        p[l.ip + 10..l.ip + 12].copy_from_slice(&c.to_be_bytes());
    } else {
        let len = (p.len() - l.ip - 40) as u16;
        p[l.ip + 4..l.ip + 6].copy_from_slice(&len.to_be_bytes());
    }
}

/// A TCP piece's header: sequence number advanced by the pieces before it; FIN and PSH only on
/// the last piece, CWR only on the first.
fn fix_tcp(t: &mut [u8], i: usize, pieces: usize, size: usize) {
    let seq = u32::from_be_bytes([t[4], t[5], t[6], t[7]]).wrapping_add((i * size) as u32);
    t[4..8].copy_from_slice(&seq.to_be_bytes());
    const FIN: u8 = 0x01;
    const PSH: u8 = 0x08;
    const CWR: u8 = 0x80;
    if i + 1 < pieces {
        t[13] &= !(FIN | PSH);
    }
    if i > 0 {
        t[13] &= !CWR;
    }
}

fn ipv4_checksum(h: &[u8]) -> u16 {
    let mut acc: u32 = h
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)])))
        .sum();
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use etherparse::{PacketBuilder, SlicedPacket, TransportSlice};

    fn builder(v6: bool) -> etherparse::PacketBuilderStep<etherparse::IpHeaders> {
        let b = PacketBuilder::ethernet2([1; 6], [2; 6]);
        if v6 {
            b.ipv6(
                [0x20, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
                [0x20, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3],
                64,
            )
        } else {
            b.ipv4([198, 18, 1, 2], [198, 18, 2, 2], 64)
        }
    }

    fn data(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 13 + 5) as u8).collect()
    }

    /// A TCP super-frame of `n` payload bytes with FIN, PSH and CWR set, and what the sender
    /// would have sent instead: pieces of `mss` built whole by etherparse.
    fn tcp(v6: bool, n: usize, mss: usize) -> (Vec<u8>, Vec<Vec<u8>>) {
        let d = data(n);
        let mut sup = Vec::new();
        builder(v6)
            .tcp(40000, 5201, 1000, 500)
            .fin()
            .psh()
            .cwr()
            .write(&mut sup, &d)
            .unwrap();
        let mut want = Vec::new();
        let pieces = n.div_ceil(mss);
        for (i, c) in d.chunks(mss).enumerate() {
            let mut b = builder(v6).tcp(40000, 5201, 1000 + (i * mss) as u32, 500);
            if i + 1 == pieces {
                b = b.fin().psh();
            }
            if i == 0 {
                b = b.cwr();
            }
            let mut f = Vec::new();
            b.write(&mut f, c).unwrap();
            if !v6 {
                // etherparse leaves the ID at 0; the kernel counts up from the super-frame's.
                f[14 + 4..14 + 6].copy_from_slice(&(i as u16).to_be_bytes());
                f[14 + 10..14 + 12].copy_from_slice(&[0, 0]);
                let c = ipv4_checksum(&f[14..34]);
                f[14 + 10..14 + 12].copy_from_slice(&c.to_be_bytes());
            }
            want.push(f);
        }
        (sup, want)
    }

    fn hdr(kind: u8, size: u16) -> VnetHdr {
        VnetHdr {
            flags: 1,
            gso_type: kind,
            gso_size: size,
            ..VnetHdr::default()
        }
    }

    #[test]
    fn a_tcp_super_frame_becomes_the_segments_the_sender_meant() {
        for v6 in [false, true] {
            for (n, mss) in [
                (64_000, 1448),
                (2896, 1448),
                (1449, 1448),
                (10, 1448),
                (5000, 536),
            ] {
                let (sup, want) = tcp(v6, n, mss);
                let kind = if v6 { GSO_TCPV6 } else { GSO_TCPV4 } | GSO_ECN;
                let mut out = Vec::new();
                segment(&hdr(kind, mss as u16), &sup, &mut out).unwrap();
                assert_eq!(out.len(), want.len(), "v6 {v6} n {n}");
                for (i, (got, w)) in out.iter().zip(&want).enumerate() {
                    assert_eq!(got, w, "v6 {v6} n {n} piece {i}");
                }
            }
        }
    }

    #[test]
    fn a_udp_segment_super_frame_becomes_datagrams_with_their_own_lengths() {
        for v6 in [false, true] {
            let d = data(3000);
            let mut sup = Vec::new();
            builder(v6).udp(4000, 9).write(&mut sup, &d).unwrap();
            let mut out = Vec::new();
            segment(&hdr(GSO_UDP_L4, 1200), &sup, &mut out).unwrap();
            assert_eq!(out.len(), 3);
            for (i, (got, c)) in out.iter().zip(d.chunks(1200)).enumerate() {
                let mut w = Vec::new();
                builder(v6).udp(4000, 9).write(&mut w, c).unwrap();
                if !v6 {
                    w[18..20].copy_from_slice(&(i as u16).to_be_bytes());
                    w[24..26].copy_from_slice(&[0, 0]);
                    let c = ipv4_checksum(&w[14..34]);
                    w[24..26].copy_from_slice(&c.to_be_bytes());
                }
                assert_eq!(got, &w, "v6 {v6} datagram {i}");
                let s = SlicedPacket::from_ethernet(got).unwrap();
                assert!(matches!(s.transport, Some(TransportSlice::Udp(_))));
            }
        }
    }

    #[test]
    fn frames_that_cannot_be_cut_are_errors_and_plain_frames_pass() {
        let (sup, _) = tcp(false, 3000, 1448);
        let mut out = Vec::new();
        assert_eq!(
            segment(&hdr(3, 1448), &sup, &mut out),
            Err(GsoError::Unsupported(3))
        );
        assert!(matches!(
            segment(&hdr(GSO_TCPV6, 1448), &sup, &mut out),
            Err(GsoError::Malformed(_))
        ));
        assert!(matches!(
            segment(&hdr(GSO_TCPV4, 0), &sup, &mut out),
            Err(GsoError::Malformed(_))
        ));
        assert!(matches!(
            segment(&hdr(GSO_TCPV4, 1448), &sup[..40], &mut out),
            Err(GsoError::Malformed(_))
        ));
        assert!(matches!(
            segment(&hdr(GSO_TCPV4, 1448), &[], &mut out),
            Err(GsoError::Malformed(_))
        ));
        assert!(out.is_empty());
        segment(&VnetHdr::default(), &sup, &mut out).unwrap();
        assert_eq!(out, vec![sup]);
    }

    #[test]
    fn the_header_reads_in_the_hosts_byte_order() {
        let mut b = [0u8; 10];
        b[0] = 1;
        b[1] = GSO_TCPV4 | GSO_ECN;
        b[4..6].copy_from_slice(&1448u16.to_ne_bytes());
        let h = VnetHdr::parse(&b).unwrap();
        assert_eq!((h.flags, h.gso_size, h.is_gso()), (1, 1448, true));
        assert!(VnetHdr::parse(&b[..9]).is_none());
        assert!(!VnetHdr::default().is_gso());
    }
}
