//! The common frame read without building etherparse's whole view of it: Ethernet (untagged or
//! one 802.1Q tag), then IPv4 without fragmentation or IPv6 without extension headers, then a
//! complete TCP or UDP header. That is almost every frame a gateway forwards, and for it the
//! general path spends most of its time moving etherparse's `LaxSlicedPacket` (a struct of
//! several hundred bytes) between calls: 95 of the 306 ns a 64-byte frame cost through
//! parse, classify and cake (`perf` on `debloat bench gateway`'s in-process loop, issue 42).
//!
//! Anything else — ARP, stacked tags, IPv4 options are fine but fragments are not, IPv6
//! extension headers, ICMP, a header cut short, lengths that disagree — returns `None`, and
//! [`super::classify`] takes etherparse's path. The two must agree on every frame the fast
//! path takes; `tests::agrees_with_etherparse_*` checks that on built frames, every truncation
//! and single-byte change of their headers, and the `classify_fast` fuzz target on any bytes.

use super::{parse_options, IpFields, LinkType};
use crate::flow::FlowKey;
use crate::packet::{PacketMeta, TcpInfo};
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const TCP_PROTO: u8 = 6;
const UDP: u8 = 17;

fn be16(d: &[u8], o: usize) -> u16 {
    u16::from_be_bytes([d[o], d[o + 1]])
}

fn be32(d: &[u8], o: usize) -> u32 {
    u32::from_be_bytes([d[o], d[o + 1], d[o + 2], d[o + 3]])
}

fn addr<const N: usize>(d: &[u8], o: usize) -> [u8; N] {
    let mut a = [0; N];
    a.copy_from_slice(&d[o..o + N]);
    a
}

/// The network header's offset: after Ethernet and at most one 802.1Q tag, if it carries
/// IPv4 or IPv6.
fn network_offset(d: &[u8], link: LinkType) -> Option<usize> {
    if link == LinkType::RawIp {
        return Some(0);
    }
    let (ethertype, o) = match be16(d.get(..14)?, 12) {
        0x8100 => (be16(d.get(..18)?, 16), 18),
        t => (t, 14),
    };
    matches!(ethertype, 0x0800 | 0x86dd).then_some(o)
}

/// IPv4 (not a fragment) or IPv6 (TCP or UDP right after the fixed header): its fields, and
/// where its payload starts.
fn ip(d: &[u8], o: usize) -> Option<(IpFields, usize)> {
    match d.get(o)? >> 4 {
        4 => {
            let h = d.get(o..o + 20)?;
            let hl = usize::from(h[0] & 0x0f) * 4;
            let total = usize::from(be16(h, 2));
            if hl < 20 || d.len() < o + hl || total < hl || be16(h, 6) & 0x3fff != 0 {
                return None;
            }
            let fields = IpFields {
                src: IpAddr::V4(Ipv4Addr::from(addr::<4>(h, 12))),
                dst: IpAddr::V4(Ipv4Addr::from(addr::<4>(h, 16))),
                proto: h[9],
                label: 0,
                tos: h[1],
                offset: o,
                payload: total - hl,
            };
            Some((fields, o + hl))
        }
        6 => {
            let h = d.get(o..o + 40)?;
            let payload = usize::from(be16(h, 4));
            if payload == 0 || !matches!(h[6], TCP_PROTO | UDP) {
                return None;
            }
            let fields = IpFields {
                src: IpAddr::V6(Ipv6Addr::from(addr::<16>(h, 8))),
                dst: IpAddr::V6(Ipv6Addr::from(addr::<16>(h, 24))),
                proto: h[6],
                label: be32(h, 0) & 0x000f_ffff,
                tos: ((h[0] & 0x0f) << 4) | (h[1] >> 4),
                offset: o,
                payload,
            };
            Some((fields, o + 40))
        }
        _ => None,
    }
}

/// Classify `data` if it is the common case, with its TCP details when `TCP` asks for them;
/// `None` sends it down etherparse's path.
pub(super) fn classify<const TCP: bool>(
    data: &[u8],
    wire_len: u32,
    link: LinkType,
) -> Option<(PacketMeta, Option<TcpInfo>)> {
    let (ip, t) = ip(data, network_offset(data, link)?)?;
    // The transport header must lie within both the bytes present and the IP length.
    let avail = ip.payload.min(data.len() - t);
    let mut meta = PacketMeta::new(
        wire_len.max(data.len() as u32),
        FlowKey::NonIp { ethertype: 0 },
    );
    let mut tcp = None;
    let (sport, dport) = match ip.proto {
        TCP_PROTO => {
            let (ports, info) = tcp_header::<TCP>(data, t, avail, ip.payload)?;
            tcp = info;
            ports
        }
        UDP => {
            // etherparse's lax UDP reading has its own rules for a length field that
            // disagrees with the IP length; such frames take its path.
            if avail < 8 || !(8..=avail).contains(&usize::from(be16(data, t + 4))) {
                return None;
            }
            (be16(data, t), be16(data, t + 2))
        }
        _ => return None,
    };
    ip.fill(&mut meta, sport, dport);
    Some((meta, tcp))
}

/// The TCP header at `t`, whole within both the bytes present and the IP length (`avail`
/// bytes from `t`; `ip_payload` is the IP length's): its ports, and its details when `TCP`
/// asks. `None` sends the frame down etherparse's path.
fn tcp_header<const TCP: bool>(
    data: &[u8],
    t: usize,
    avail: usize,
    ip_payload: usize,
) -> Option<((u16, u16), Option<TcpInfo>)> {
    let doff = usize::from(*data.get(t + 12)? >> 4) * 4;
    if doff < 20 || doff > avail {
        return None;
    }
    let info = TCP.then(|| {
        let mut info = TcpInfo {
            flags: (u16::from(data[t + 12] & 0x0f) << 8) | u16::from(data[t + 13]),
            ack_seq: be32(data, t + 8),
            payload_len: ip_payload.saturating_sub(doff) as u32,
            options_droppable: true,
            ..TcpInfo::default()
        };
        parse_options(&data[t + 20..t + doff], &mut info);
        info
    });
    Some(((be16(data, t), be16(data, t + 2)), info))
}

/// The TCP details alone, as [`super::tcp_info`] gives them, for the common frame: what CAKE's
/// ACK filter asks of each packet queued in an ACK's flow, as Linux's `cake_get_tcphdr` reads
/// the queued skbs' headers. No metadata is built. `Some(None)`: IP carrying something else
/// than TCP (whatever else the frame holds, it has no TCP details); `None`: not the common
/// frame, for etherparse's path.
pub(super) fn tcp_info(data: &[u8], link: LinkType) -> Option<Option<TcpInfo>> {
    let (ip, t) = ip(data, network_offset(data, link)?)?;
    if ip.proto != TCP_PROTO {
        return Some(None);
    }
    let avail = ip.payload.min(data.len() - t);
    tcp_header::<true>(data, t, avail, ip.payload).map(|(_, info)| info)
}

#[cfg(test)]
mod tests {
    use super::super::classify_general;
    use super::*;
    use etherparse::{PacketBuilder, TcpOptionElement};

    const V6A: [u8; 16] = [0x20, 0x01, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    const V6B: [u8; 16] = [0x20, 0x01, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

    /// Frames of every shape the fast path takes, and some it must refuse.
    fn frames() -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let opts = [
            TcpOptionElement::Noop,
            TcpOptionElement::Timestamp(5, 6),
            TcpOptionElement::SelectiveAcknowledgement((1, 2), [Some((3, 4)), None, None]),
        ];
        for payload in [0usize, 1, 100] {
            let body = vec![7u8; payload];
            let v4 = || {
                PacketBuilder::ethernet2([1; 6], [2; 6]).ipv4([198, 18, 0, 1], [198, 18, 1, 1], 64)
            };
            let v6 = || PacketBuilder::ethernet2([1; 6], [2; 6]).ipv6(V6A, V6B, 64);
            let vlan = || {
                PacketBuilder::ethernet2([1; 6], [2; 6])
                    .single_vlan(etherparse::VlanId::try_new(7).expect("vlan id"))
            };
            let mut push = |w: &dyn Fn(&mut Vec<u8>)| {
                let mut b = Vec::new();
                w(&mut b);
                out.push(b);
            };
            push(&|b| v4().udp(53, 4000).write(b, &body).expect("udp4"));
            push(&|b| v6().udp(53, 4000).write(b, &body).expect("udp6"));
            push(&|b| v4().tcp(1, 2, 3, 4).ack(5).write(b, &body).expect("tcp4"));
            push(&|b| v6().tcp(1, 2, 3, 4).syn().write(b, &body).expect("tcp6"));
            push(&|b| {
                v4().tcp(1, 2, 3, 4)
                    .ack(9)
                    .options(&opts)
                    .expect("options")
                    .write(b, &body)
                    .expect("tcp4 options")
            });
            push(&|b| {
                vlan()
                    .ipv4([198, 18, 0, 1], [198, 18, 1, 1], 64)
                    .udp(1, 2)
                    .write(b, &body)
                    .expect("vlan udp")
            });
            push(&|b| {
                vlan()
                    .ipv6(V6A, V6B, 64)
                    .tcp(1, 2, 3, 4)
                    .write(b, &body)
                    .expect("vlan tcp6")
            });
            push(&|b| {
                v4().icmpv4_echo_request(1, 2)
                    .write(b, &body)
                    .expect("icmp")
            });
        }
        out
    }

    /// The answer `classify` gives (fast path first) is etherparse's answer, and so are the
    /// TCP details read alone.
    fn check(frame: &[u8], wire_len: u32, link: LinkType) {
        let details = classify_general(frame, frame.len() as u32, link)
            .ok()
            .and_then(|(_, t)| t);
        assert_eq!(
            super::super::tcp_info(frame, link),
            details,
            "frame {frame:02x?}"
        );
        if let Some(fast) = classify::<true>(frame, wire_len, link) {
            let general = classify_general(frame, wire_len, link);
            assert_eq!(Ok(fast), general, "frame {frame:02x?}");
            let without = classify::<false>(frame, wire_len, link);
            assert_eq!(without, Some((fast.0, None)), "frame {frame:02x?}");
        }
    }

    #[test]
    fn takes_the_common_frames() {
        let f = frames();
        let taken = f
            .iter()
            .filter(|b| classify::<true>(b, b.len() as u32, LinkType::Ethernet).is_some())
            .count();
        // Everything but the ICMP frames.
        assert_eq!(taken, f.len() - 3, "frames taken by the fast path");
    }

    #[test]
    fn agrees_with_etherparse_on_whole_and_cut_frames() {
        for f in frames() {
            for cut in 0..=f.len() {
                check(&f[..cut], f.len() as u32, LinkType::Ethernet);
            }
            check(&f[14..], f.len() as u32 - 14, LinkType::RawIp);
            // Ethernet padding after the IP packet.
            let mut padded = f.clone();
            padded.extend_from_slice(&[0; 20]);
            check(&padded, padded.len() as u32, LinkType::Ethernet);
        }
    }

    #[test]
    fn agrees_with_etherparse_on_every_changed_header_byte() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for f in frames() {
            for at in 12..f.len().min(14 + 4 + 40 + 60) {
                for v in [0u8, 0xff, f[at] ^ 1, f[at] ^ 0x80, f[at] ^ 0x0f] {
                    let mut g = f.clone();
                    g[at] = v;
                    check(&g, g.len() as u32, LinkType::Ethernet);
                }
                // And two changes at once, one of them random.
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let mut g = f.clone();
                g[at] = seed as u8;
                let other = 12 + (seed >> 8) as usize % (g.len() - 12);
                g[other] = (seed >> 16) as u8;
                check(&g, g.len() as u32, LinkType::Ethernet);
            }
        }
    }
}
