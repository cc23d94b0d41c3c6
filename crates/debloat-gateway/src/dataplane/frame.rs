//! A received Ethernet frame as a core packet: its bytes and the metadata the classifier read
//! from them. A discipline's CE mark (or cake's wash) changes the metadata; [`Frame::finish`]
//! writes that back into the IP header, fixing IPv4's checksum, just before the frame is sent.

use crate::io::buf::Buf;
use debloat_core::classify::{classify, rewrite_ds_field, ClassifyError, LinkType};
use debloat_core::packet::{Ecn, Packet, PacketMeta, TcpInfo};

/// One frame in flight through the gateway.
#[derive(Debug, Clone)]
pub struct Frame {
    meta: PacketMeta,
    /// The frame's bytes, Ethernet header first, no FCS: in the heap, or held in the AF_XDP
    /// UMEM it was received into ([`Buf`]).
    pub data: Buf,
    dscp_in: u8,
    ecn_in: Ecn,
}

impl Frame {
    /// Classify a frame; an error means it is malformed and must be counted and dropped: too
    /// short for Ethernet, an IP header that does not parse, or an IP packet longer than the
    /// frame that carries it (truncated).
    pub fn parse(data: impl Into<Buf>) -> Result<Frame, ClassifyError> {
        let data = data.into();
        let mut meta = classify(&data, data.len() as u32, LinkType::Ethernet)?;
        // What this frame really costs: its buffer plus the Frame around it (memory limits
        // count this, as Linux counts skb->truesize). A frame held in a UMEM counts as its
        // copy in the heap would, so that limits act alike on both back ends.
        meta.truesize = (data.capacity() + std::mem::size_of::<Frame>()) as u32;
        if meta.flow.is_ip() {
            check_ip_length(&data, usize::from(meta.network_offset))?;
        }
        Ok(Frame {
            dscp_in: meta.dscp,
            ecn_in: meta.ecn,
            meta,
            data,
        })
    }

    /// Write what the discipline changed (ECN CE mark, DSCP wash) into the header.
    pub fn finish(&mut self) {
        if self.meta.dscp != self.dscp_in || self.meta.ecn != self.ecn_in {
            let off = usize::from(self.meta.network_offset);
            let _ = rewrite_ds_field(&mut self.data, off, self.meta.dscp, self.meta.ecn);
            self.dscp_in = self.meta.dscp;
            self.ecn_in = self.meta.ecn;
        }
    }
}

/// The classifier accepts captures cut short by a snap length; a gateway must not forward a
/// packet whose IP length runs past the end of its frame.
fn check_ip_length(data: &[u8], off: usize) -> Result<(), ClassifyError> {
    let ip = data.get(off..).unwrap_or_default();
    let (need, what) = match ip.first().map(|b| b >> 4) {
        Some(4) if ip.len() >= 4 => (usize::from(u16::from_be_bytes([ip[2], ip[3]])), "IPv4"),
        Some(6) if ip.len() >= 6 => (40 + usize::from(u16::from_be_bytes([ip[4], ip[5]])), "IPv6"),
        _ => return Err(ClassifyError("IP header cut short".into())),
    };
    if ip.len() < need {
        return Err(ClassifyError(format!(
            "truncated {what} packet: {} of {need} bytes",
            ip.len()
        )));
    }
    Ok(())
}

impl Packet for Frame {
    fn meta(&self) -> &PacketMeta {
        &self.meta
    }
    fn meta_mut(&mut self) -> &mut PacketMeta {
        &mut self.meta
    }
    fn write_back(&mut self) {
        self.finish();
    }
    fn bytes_mut(&mut self) -> Option<&mut [u8]> {
        Some(&mut self.data)
    }
    fn frame(&self) -> Option<(&[u8], debloat_core::classify::LinkType)> {
        Some((&self.data, debloat_core::classify::LinkType::Ethernet))
    }
    /// Read from the TCP header each time, as Linux's `cake_get_tcphdr` reads a queued skb's.
    fn tcp(&self) -> Option<TcpInfo> {
        debloat_core::classify::tcp_info(&self.data, LinkType::Ethernet)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{PacketBuilder, SlicedPacket};

    fn tcp_frame(ecn: u8) -> Vec<u8> {
        let b = PacketBuilder::ethernet2([1; 6], [2; 6])
            .ipv4([198, 18, 1, 2], [198, 18, 2, 2], 64)
            .tcp(40000, 5201, 1, 65535);
        let mut buf = Vec::new();
        b.write(&mut buf, &[0u8; 100]).expect("write");
        buf[15] = ecn;
        // Fix the IPv4 checksum after setting the ECN bits.
        let mut h = etherparse::Ipv4Header::from_slice(&buf[14..])
            .expect("ipv4")
            .0;
        h.header_checksum = h.calc_header_checksum();
        buf[14..34].copy_from_slice(&h.to_bytes());
        buf
    }

    #[test]
    fn a_ce_mark_is_written_with_a_valid_checksum() {
        let mut f = Frame::parse(tcp_frame(1)).expect("valid");
        assert!(f.set_ce());
        f.finish();
        let s = SlicedPacket::from_ethernet(&f.data).expect("parses");
        let Some(etherparse::NetSlice::Ipv4(v4)) = s.net else {
            panic!("ipv4")
        };
        let h = v4.header().to_header();
        assert_eq!(h.ecn.value(), 3);
        assert_eq!(h.header_checksum, h.calc_header_checksum());
    }

    #[test]
    fn a_frame_reads_its_tcp_details_from_its_header_and_stays_128_bytes() {
        // The TCP frame carries 100 bytes of payload, without the ACK flag.
        let f = Frame::parse(tcp_frame(0)).expect("valid");
        let t = f.tcp().expect("tcp");
        assert_eq!(
            (t.ack_seq, t.payload_len, t.flags & TcpInfo::ACK),
            (0, 100, 0)
        );
        let udp = Frame::parse(udp_frame()).expect("valid");
        assert_eq!(udp.tcp(), None);
        // Moved between the stages by a few vector loads and stores, not a call to memcpy
        // (PacketMeta's docs).
        assert_eq!(std::mem::size_of::<Frame>(), 128);
    }

    fn udp_frame() -> Vec<u8> {
        let b = PacketBuilder::ethernet2([1; 6], [2; 6])
            .ipv4([198, 18, 1, 2], [198, 18, 2, 2], 64)
            .udp(40000, 5201);
        let mut buf = Vec::new();
        b.write(&mut buf, &[0u8; 20]).expect("write");
        buf
    }

    #[test]
    fn a_truncated_ip_packet_is_malformed() {
        let mut f = tcp_frame(0);
        f.truncate(60);
        let e = Frame::parse(f).expect_err("truncated");
        assert!(e.0.contains("truncated IPv4"), "{}", e.0);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(Frame::parse(vec![0xff; 5]).is_err());
        // An ARP frame is not IP: it passes as a non-IP flow.
        let mut arp = vec![0xff; 12];
        arp.extend_from_slice(&[0x08, 0x06]);
        arp.extend_from_slice(&[0; 28]);
        let f = Frame::parse(arp).expect("non-IP frames pass");
        assert!(!f.meta().flow.is_ip());
    }
}
