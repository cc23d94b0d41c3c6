//! Real frames for simulated packets, for pcap capture: Ethernet + IPv4 + TCP (sequence numbers
//! in bytes, ACK, SACK and timestamp options, ECE/CWR) or UDP or ICMP echo, with the packet's
//! DSCP and ECN in the IP header and a valid header checksum. Payload bytes are zeros.

use crate::packet::{Body, SimPacket, MSS};
use debloat_core::classify::rewrite_ds_field;
use debloat_core::flow::FlowKey;
use etherparse::{PacketBuilder, TcpOptionElement};
use std::net::IpAddr;

const ISN: u32 = 1;

fn v4(a: IpAddr) -> [u8; 4] {
    match a {
        IpAddr::V4(x) => x.octets(),
        IpAddr::V6(_) => [0; 4],
    }
}

fn bytes(seg: u64) -> u32 {
    ISN.wrapping_add((seg as u32).wrapping_mul(MSS))
}

/// The frame for `p`, cut to at most `snaplen` bytes (its full length is `p.meta.len`).
pub fn frame(p: &SimPacket, snaplen: usize) -> Vec<u8> {
    let FlowKey::Ip {
        src,
        dst,
        sport,
        dport,
        ..
    } = p.meta.flow
    else {
        return Vec::new();
    };
    let ip =
        PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]).ipv4(v4(src), v4(dst), 64);
    let len = p.meta.len as usize;
    let mut buf = Vec::with_capacity(len);
    let pad = |hdr: usize| vec![0u8; len.saturating_sub(hdr)];
    let ok = match p.body {
        Body::Data {
            seq, cwr, sent_at, ..
        } => {
            let mut b = ip.tcp(sport, dport, bytes(seq), 65535).ack(ISN).psh();
            if cwr {
                b = b.cwr();
            }
            let ts = [
                TcpOptionElement::Noop,
                TcpOptionElement::Noop,
                TcpOptionElement::Timestamp((sent_at / 1_000_000) as u32, 0),
            ];
            match b.options(&ts) {
                Ok(b) => b.write(&mut buf, &pad(14 + 20 + 32)).is_ok(),
                Err(_) => false,
            }
        }
        Body::Ack { .. } => ack(ip, sport, dport, &p.body, &mut buf),
        Body::Ping { seq, reply, .. } => {
            let payload = pad(14 + 20 + 8);
            if matches!(p.meta.flow, FlowKey::Ip { proto: 17, .. }) {
                ip.udp(sport, dport).write(&mut buf, &payload).is_ok()
            } else if reply {
                let b = ip.icmpv4_echo_reply(1, seq as u16);
                b.write(&mut buf, &payload).is_ok()
            } else {
                let b = ip.icmpv4_echo_request(1, seq as u16);
                b.write(&mut buf, &payload).is_ok()
            }
        }
    };
    if !ok {
        return Vec::new();
    }
    rewrite_ds_field(&mut buf, 14, p.meta.dscp, p.meta.ecn);
    buf.truncate(snaplen);
    buf
}

/// A pure ACK with its timestamp echo and SACK blocks (the simulator charges it 66 bytes; the
/// options make the frame longer when there are SACK blocks).
fn ack(
    ip: etherparse::PacketBuilderStep<etherparse::IpHeaders>,
    sport: u16,
    dport: u16,
    body: &Body,
    buf: &mut Vec<u8>,
) -> bool {
    let Body::Ack {
        ack,
        sack,
        sack_len,
        ece,
        echo,
        ..
    } = *body
    else {
        return false;
    };
    let mut b = ip.tcp(sport, dport, ISN, 65535).ack(bytes(ack));
    if ece {
        b = b.ece();
    }
    let mut opts = vec![
        TcpOptionElement::Noop,
        TcpOptionElement::Noop,
        TcpOptionElement::Timestamp(0, (echo / 1_000_000) as u32),
    ];
    if sack_len > 0 {
        let blk = |i: usize| (bytes(sack[i].0), bytes(sack[i].1));
        let rest = [1, 2].map(|i| (i < usize::from(sack_len)).then(|| blk(i)));
        opts.push(TcpOptionElement::Noop);
        opts.push(TcpOptionElement::Noop);
        opts.push(TcpOptionElement::SelectiveAcknowledgement(
            blk(0),
            [rest[0], rest[1], None],
        ));
    }
    match b.options(&opts) {
        Ok(b) => b.write(buf, &[]).is_ok(),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use debloat_core::classify::{classify_tcp, LinkType};
    use debloat_core::packet::{Ecn, PacketMeta};

    #[test]
    fn data_and_ack_frames_parse_back() {
        let key = FlowKey::ip(
            "198.18.1.2".parse().expect("ip"),
            "198.18.2.2".parse().expect("ip"),
            40000,
            12865,
            6,
        );
        let mut m = PacketMeta::new(crate::packet::DATA_FRAME, key);
        m.ecn = Ecn::Ce;
        m.dscp = 46;
        let d = SimPacket {
            meta: m,
            body: Body::Data {
                flow: 0,
                seq: 3,
                cwr: true,
                sent_at: 5_000_000,
            },
        };
        let f = frame(&d, 65535);
        assert_eq!(f.len(), crate::packet::DATA_FRAME as usize);
        let (got, tcp) = classify_tcp(&f, f.len() as u32, LinkType::Ethernet).expect("parses");
        assert_eq!(
            (got.dscp, got.ecn, tcp.map(|t| t.payload_len)),
            (46, Ecn::Ce, Some(MSS))
        );
        let a = SimPacket {
            meta: PacketMeta::new(crate::packet::ACK_FRAME, key),
            body: Body::Ack {
                flow: 0,
                ack: 2,
                sack: [(3, 4), (0, 0), (0, 0)],
                sack_len: 1,
                ece: true,
                echo: 5_000_000,
                ce: 0,
            },
        };
        let f = frame(&a, 65535);
        let t = classify_tcp(&f, f.len() as u32, LinkType::Ethernet)
            .expect("parses")
            .1
            .expect("tcp");
        assert_eq!(t.ack_seq, bytes(2));
        assert_eq!((t.sack_len, t.sack[0]), (1, (bytes(3), bytes(4))));
        assert!(t.flags & debloat_core::packet::TcpInfo::ECE != 0);
        assert_eq!(frame(&a, 40).len(), 40, "snaplen");
    }
}
