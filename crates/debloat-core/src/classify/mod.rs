//! From frame bytes to [`PacketMeta`]: the flow dissector's job. Parses Ethernet (with VLAN
//! tags), ARP, IPv4, IPv6 (with extension headers), TCP, UDP and ICMP with `etherparse`, and
//! reads the TCP details CAKE's ACK filter needs. Frames cut short by a capture's snaplen still
//! classify: lengths come from the IP header, not from the bytes present. A frame whose network
//! header does not parse is an error the caller counts and drops; it never panics. The common
//! frame — TCP or UDP over IPv4 or IPv6 — is read by a direct path (`fast.rs`) held to
//! etherparse's answers by tests and a fuzz target.

pub mod circuits;
mod fast;
pub mod qosify;
pub mod stage;

pub use stage::{Admit, Classify};

use crate::flow::FlowKey;
use crate::packet::{Ecn, PacketMeta, TcpInfo};
use core::net::IpAddr;
use etherparse::{LaxNetSlice, LaxSlicedPacket, TransportSlice};
use thiserror::Error;

/// A frame that could not be classified.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("malformed frame: {0}")]
pub struct ClassifyError(pub String);

pub use crate::packet::LinkType;

/// Classify one frame. `wire_len` is the length on the wire (may exceed `data.len()` when a
/// capture truncated it); it becomes [`PacketMeta::len`]. The TCP details are not read here:
/// [`classify_tcp`] reads them too, [`tcp_info`] alone.
///
/// The common frame (TCP or UDP over IPv4 or IPv6, untagged or one VLAN tag) is read directly
/// (`fast.rs`, about a third of the time); every other one by etherparse.
pub fn classify(data: &[u8], wire_len: u32, link: LinkType) -> Result<PacketMeta, ClassifyError> {
    match fast::classify::<false>(data, wire_len, link) {
        Some((meta, _)) => Ok(meta),
        None => classify_general(data, wire_len, link).map(|(meta, _)| meta),
    }
}

/// [`classify`], and the TCP details CAKE's ACK filter reads (`None` for anything not TCP).
pub fn classify_tcp(
    data: &[u8],
    wire_len: u32,
    link: LinkType,
) -> Result<(PacketMeta, Option<TcpInfo>), ClassifyError> {
    match fast::classify::<true>(data, wire_len, link) {
        Some(both) => Ok(both),
        None => classify_general(data, wire_len, link),
    }
}

/// The TCP details of a frame (what [`crate::packet::Packet::tcp`] gives for a packet with
/// bytes); `None` for a frame that is not TCP or does not parse. The payload length comes from
/// the IP header, so a frame cut short by a capture gives the same as the whole one.
pub fn tcp_info(data: &[u8], link: LinkType) -> Option<TcpInfo> {
    match fast::tcp_info(data, link) {
        Some(details) => details,
        None => classify_general(data, data.len() as u32, link).ok()?.1,
    }
}

/// [`classify_tcp`] through etherparse's lax slicing, for any frame. Public so that the
/// `classify_fast` fuzz target can hold the two paths to the same answer.
#[doc(hidden)]
pub fn classify_general(
    data: &[u8],
    wire_len: u32,
    link: LinkType,
) -> Result<(PacketMeta, Option<TcpInfo>), ClassifyError> {
    let parsed = match link {
        LinkType::Ethernet => {
            LaxSlicedPacket::from_ethernet(data).map_err(|e| ClassifyError(e.to_string()))?
        }
        LinkType::RawIp => {
            LaxSlicedPacket::from_ip(data).map_err(|e| ClassifyError(e.to_string()))?
        }
    };
    let mut meta = PacketMeta::new(
        wire_len.max(data.len() as u32),
        FlowKey::NonIp { ethertype: 0 },
    );
    let ip = match network(&parsed, data.as_ptr() as usize)? {
        Net::Ip(ip) => ip,
        Net::Other { ethertype } => {
            meta.flow = FlowKey::NonIp { ethertype };
            return Ok((meta, None));
        }
    };
    let (mut sport, mut dport, mut tcp) = (0, 0, None);
    match &parsed.transport {
        Some(TransportSlice::Tcp(t)) => {
            sport = t.source_port();
            dport = t.destination_port();
            let mut info = tcp_details(t);
            info.payload_len = ip.payload.saturating_sub(usize::from(t.data_offset()) * 4) as u32;
            tcp = Some(info);
        }
        Some(TransportSlice::Udp(u)) => {
            sport = u.source_port();
            dport = u.destination_port();
        }
        _ => {}
    }
    ip.fill(&mut meta, sport, dport);
    Ok((meta, tcp))
}

/// What the IP header says.
struct IpFields {
    src: IpAddr,
    dst: IpAddr,
    proto: u8,
    /// IPv6 flow label (0 for IPv4).
    label: u32,
    /// The TOS / traffic class byte: DSCP and ECN.
    tos: u8,
    /// Offset of the IP header in the frame.
    offset: usize,
    /// Bytes after the IP headers, as the header declares them (not as captured).
    payload: usize,
}

impl IpFields {
    /// The network header's offset, DSCP, ECN and the flow key (with the transport's ports)
    /// into `meta`.
    fn fill(self, meta: &mut PacketMeta, sport: u16, dport: u16) {
        meta.network_offset = self.offset as u16;
        meta.dscp = self.tos >> 2;
        meta.ecn = Ecn::from_bits(self.tos);
        meta.flow = FlowKey::Ip {
            src: self.src,
            dst: self.dst,
            sport,
            dport,
            proto: self.proto,
            flow_label: self.label,
        };
    }
}

/// The network layer: IP fields, or the EtherType of anything else (ARP is 0x0806).
enum Net {
    Ip(IpFields),
    Other { ethertype: u16 },
}

/// Read the network layer of a parsed frame that starts at address `start`.
fn network(parsed: &LaxSlicedPacket, start: usize) -> Result<Net, ClassifyError> {
    match &parsed.net {
        Some(LaxNetSlice::Ipv4(v4)) => {
            let h = v4.header();
            Ok(Net::Ip(IpFields {
                src: h.source_addr().into(),
                dst: h.destination_addr().into(),
                proto: v4.payload().ip_number.0,
                label: 0,
                tos: (h.dcp().value() << 2) | h.ecn().value(),
                offset: h.slice().as_ptr() as usize - start,
                payload: usize::from(h.total_len()).saturating_sub(usize::from(h.ihl()) * 4),
            }))
        }
        Some(LaxNetSlice::Ipv6(v6)) => {
            let h = v6.header();
            let offset = h.slice().as_ptr() as usize - start;
            let exts = (v6.payload().payload.as_ptr() as usize).saturating_sub(offset + start + 40);
            Ok(Net::Ip(IpFields {
                src: h.source_addr().into(),
                dst: h.destination_addr().into(),
                proto: v6.payload().ip_number.0,
                label: h.flow_label().value(),
                tos: h.traffic_class(),
                offset,
                payload: usize::from(h.payload_length()).saturating_sub(exts),
            }))
        }
        Some(LaxNetSlice::Arp(_)) => Ok(Net::Other { ethertype: 0x0806 }),
        None => {
            if let Some((e, _)) = &parsed.stop_err {
                return Err(ClassifyError(e.to_string()));
            }
            match &parsed.link {
                Some(etherparse::LinkSlice::Ethernet2(e)) => Ok(Net::Other {
                    ethertype: e.ether_type().0,
                }),
                _ => Err(ClassifyError("no network layer".into())),
            }
        }
    }
}

fn tcp_details(t: &etherparse::TcpSlice<'_>) -> TcpInfo {
    let s = t.slice();
    let flags = (u16::from(s[12] & 0x0f) << 8) | u16::from(s[13]);
    let mut info = TcpInfo {
        flags,
        ack_seq: t.acknowledgment_number(),
        payload_len: t.payload().len() as u32,
        options_droppable: true,
        ..TcpInfo::default()
    };
    parse_options(t.options(), &mut info);
    info
}

/// Walk TCP options as `cake_tcph_may_drop` does, recording timestamps and SACK blocks.
fn parse_options(opts: &[u8], info: &mut TcpInfo) {
    let mut i = 0;
    while i < opts.len() {
        let kind = opts[i];
        match kind {
            0 => break,
            1 => {
                i += 1;
                continue;
            }
            _ => {}
        }
        let Some(&size) = opts.get(i + 1) else { break };
        let size = usize::from(size);
        if size < 2 || i + size > opts.len() {
            break;
        }
        let body = &opts[i + 2..i + size];
        match kind {
            19 => {}
            5 => {
                if size % 8 != 2 {
                    info.options_droppable = false;
                }
                let n = (body.len() / 8).min(4);
                for b in 0..n {
                    let w = |o: usize| {
                        u32::from_be_bytes([body[o], body[o + 1], body[o + 2], body[o + 3]])
                    };
                    info.sack[b] = (w(b * 8), w(b * 8 + 4));
                }
                info.sack_len = n as u8;
            }
            8 => {
                if size != 10 {
                    info.options_droppable = false;
                } else {
                    let w = |o: usize| {
                        u32::from_be_bytes([body[o], body[o + 1], body[o + 2], body[o + 3]])
                    };
                    info.timestamp = Some((w(0), w(4)));
                }
            }
            _ => info.options_droppable = false,
        }
        i += size;
    }
}

/// Write `dscp` and `ecn` into the IP header of a frame whose network header starts at
/// `network_offset` (what a discipline did to the packet: CE marks, CAKE's wash). IPv4's header
/// checksum is updated incrementally (RFC 1624); IPv6 has none. Returns false (frame unchanged)
/// when there is no IPv4/IPv6 header at that offset.
pub fn rewrite_ds_field(frame: &mut [u8], network_offset: usize, dscp: u8, ecn: Ecn) -> bool {
    let tos = ((dscp & 0x3f) << 2) | ecn.bits();
    let Some(&first) = frame.get(network_offset) else {
        return false;
    };
    match first >> 4 {
        4 if frame.len() >= network_offset + 20 => {
            let old = u16::from_be_bytes([frame[network_offset], frame[network_offset + 1]]);
            frame[network_offset + 1] = tos;
            let new = u16::from_be_bytes([frame[network_offset], frame[network_offset + 1]]);
            let c = network_offset + 10;
            let hc = u16::from_be_bytes([frame[c], frame[c + 1]]);
            // HC' = ~(~HC + ~m + m')
            let mut sum = u32::from(!hc) + u32::from(!old) + u32::from(new);
            while sum > 0xffff {
                sum = (sum & 0xffff) + (sum >> 16);
            }
            frame[c..c + 2].copy_from_slice(&(!(sum as u16)).to_be_bytes());
            true
        }
        6 if frame.len() >= network_offset + 40 => {
            let o = network_offset;
            frame[o] = (frame[o] & 0xf0) | (tos >> 4);
            frame[o + 1] = (frame[o + 1] & 0x0f) | ((tos & 0x0f) << 4);
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;

    #[test]
    fn ce_rewrite_keeps_the_ipv4_checksum_valid() {
        let b = PacketBuilder::ethernet2([1; 6], [2; 6])
            .ipv4([198, 18, 0, 1], [198, 18, 1, 1], 64)
            .udp(1, 2);
        let mut buf = Vec::new();
        b.write(&mut buf, &[0u8; 100]).expect("write");
        buf[15] = (10 << 2) | 2;
        // Recompute the checksum so the starting frame is valid.
        let h = etherparse::Ipv4HeaderSlice::from_slice(&buf[14..])
            .expect("ip")
            .to_header();
        let ck = h.calc_header_checksum();
        buf[24..26].copy_from_slice(&ck.to_be_bytes());
        assert!(rewrite_ds_field(&mut buf, 14, 10, Ecn::Ce));
        let h = etherparse::Ipv4HeaderSlice::from_slice(&buf[14..])
            .expect("ip")
            .to_header();
        assert_eq!(
            h.header_checksum,
            h.calc_header_checksum(),
            "checksum still valid"
        );
        let m = classify(&buf, buf.len() as u32, LinkType::Ethernet).expect("parses");
        assert_eq!((m.dscp, m.ecn), (10, Ecn::Ce));
    }

    #[test]
    fn ce_rewrite_on_ipv6() {
        let b = PacketBuilder::ethernet2([1; 6], [2; 6])
            .ipv6(
                [0x20, 0x01, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
                [0x20, 0x01, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
                64,
            )
            .udp(1, 2);
        let mut buf = Vec::new();
        b.write(&mut buf, &[0u8; 10]).expect("write");
        assert!(rewrite_ds_field(&mut buf, 14, 46, Ecn::Ce));
        let m = classify(&buf, buf.len() as u32, LinkType::Ethernet).expect("parses");
        assert_eq!((m.dscp, m.ecn), (46, Ecn::Ce));
    }

    #[test]
    fn classifies_an_ecn_tcp_ack_with_timestamps() {
        let b = PacketBuilder::ethernet2([1; 6], [2; 6])
            .ipv4([198, 18, 0, 1], [198, 18, 1, 1], 64)
            .tcp(40000, 80, 1, 65535)
            .ack(777)
            .options(&[etherparse::TcpOptionElement::Timestamp(5, 6)])
            .expect("options fit");
        let mut buf = Vec::new();
        b.write(&mut buf, &[]).expect("write");
        buf[15] = (46 << 2) | 2; // DSCP EF, ECT(0)
        let (m, t) = classify_tcp(&buf, buf.len() as u32, LinkType::Ethernet).expect("parses");
        assert_eq!((m.dscp, m.ecn, m.network_offset), (46, Ecn::Ect0, 14));
        assert_eq!(classify(&buf, buf.len() as u32, LinkType::Ethernet), Ok(m));
        assert_eq!(tcp_info(&buf, LinkType::Ethernet), t);
        let t = t.expect("tcp");
        assert_eq!(
            (t.ack_seq, t.payload_len, t.timestamp, t.options_droppable),
            (777, 0, Some((5, 6)), true)
        );
        assert!(matches!(
            m.flow,
            FlowKey::Ip {
                sport: 40000,
                dport: 80,
                proto: 6,
                ..
            }
        ));
    }

    #[test]
    fn a_frame_cut_short_by_snaplen_still_classifies_from_the_ip_lengths() {
        let b = PacketBuilder::ethernet2([1; 6], [2; 6])
            .ipv4([198, 18, 0, 1], [198, 18, 1, 1], 64)
            .tcp(1, 2, 3, 4)
            .ack(5);
        let mut buf = Vec::new();
        b.write(&mut buf, &[0u8; 1448]).expect("write");
        let (m, t) = classify_tcp(&buf[..96], 1514, LinkType::Ethernet).expect("parses");
        assert_eq!(m.len, 1514);
        assert_eq!(tcp_info(&buf[..96], LinkType::Ethernet), t);
        assert_eq!(
            t.map(|t| t.payload_len),
            Some(1448),
            "payload from the IP total length"
        );
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(classify(&[0x00, 0x01], 2, LinkType::Ethernet).is_err());
        let mut bad_ip = vec![0u8; 34];
        bad_ip[12] = 0x08; // IPv4 ethertype, then a zero (invalid) IP header
        assert!(classify(&bad_ip, 34, LinkType::Ethernet).is_err());
    }

    #[test]
    fn arp_is_its_own_non_ip_flow() {
        let mut f = vec![0u8; 42];
        f[12] = 0x08;
        f[13] = 0x06;
        f[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
        let m = classify(&f, 42, LinkType::Ethernet).expect("arp parses");
        assert_eq!(m.flow, FlowKey::NonIp { ethertype: 0x0806 });
    }
}
