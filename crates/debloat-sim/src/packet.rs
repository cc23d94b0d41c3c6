//! What travels through the simulated network: core [`PacketMeta`] (what the disciplines see)
//! plus the transport contents the endpoints need.

use debloat_core::packet::{Nanos, Packet, PacketMeta, TcpInfo};

/// TCP payload per full segment (MSS 1448 with timestamps, as Linux on Ethernet).
pub const MSS: u32 = 1448;
/// Frame bytes of a full data segment: payload + TCP 32 (with timestamps) + IPv4 20 + Ethernet 14.
pub const DATA_FRAME: u32 = MSS + 66;
/// Frame bytes of a pure ACK.
pub const ACK_FRAME: u32 = 66;
/// Frame bytes of a flent ICMP ping (56 data bytes + ICMP 8 + IPv4 20 + Ethernet 14).
pub const PING_FRAME: u32 = 98;
/// Frame bytes of a UDP latency probe (irtt's smallest packet: 60 bytes of payload + UDP 8 +
/// IPv4 20 + Ethernet 14).
pub const UDP_PROBE_FRAME: u32 = 102;
/// Frame bytes of flent's VoIP flow (irtt `-l 172`: 172 bytes of UDP payload + 8 + 20 + 14).
pub const VOIP_FRAME: u32 = 214;

/// Transport contents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body {
    /// A TCP data segment; sequence numbers count whole segments.
    Data {
        /// Connection index.
        flow: u32,
        /// Segment number.
        seq: u64,
        /// CWR flag (the sender reacted to ECE).
        cwr: bool,
        /// When the sender sent it (echoed back like a TCP timestamp).
        sent_at: Nanos,
    },
    /// A TCP acknowledgement.
    Ack {
        /// Connection index.
        flow: u32,
        /// Next segment expected.
        ack: u64,
        /// SACK blocks [start, end) in segments, most recent first.
        sack: [(u64, u64); 3],
        /// Valid blocks in `sack`.
        sack_len: u8,
        /// ECN-Echo.
        ece: bool,
        /// Timestamp echo of the segment that triggered this ACK.
        echo: Nanos,
        /// CE-marked segments received so far (Accurate ECN's counter).
        ce: u32,
    },
    /// A latency probe's request or reply (ICMP echo, or UDP as irtt sends it).
    Ping {
        /// Which probe.
        probe: u16,
        /// Sequence number.
        seq: u32,
        /// When the request was sent.
        sent_at: Nanos,
        /// A reply (else a request).
        reply: bool,
        /// When the server received the request (in replies; for one-way delays).
        server_at: Nanos,
    },
}

/// A packet in the simulation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimPacket {
    /// What the disciplines see.
    pub meta: PacketMeta,
    /// What the endpoints see.
    pub body: Body,
}

impl Packet for SimPacket {
    fn meta(&self) -> &PacketMeta {
        &self.meta
    }
    fn meta_mut(&mut self) -> &mut PacketMeta {
        &mut self.meta
    }
    /// What CAKE's ACK filter would read in the headers: an ACK's number, SACK blocks and
    /// ECE flag (sequence numbers count segments); a data segment's MSS of payload.
    fn tcp(&self) -> Option<TcpInfo> {
        match self.body {
            Body::Ack {
                ack,
                sack,
                sack_len,
                ece,
                ..
            } => {
                let mut tcp = TcpInfo::pure_ack(ack as u32);
                tcp.sack_len = sack_len;
                for (k, b) in sack.iter().enumerate() {
                    tcp.sack[k] = (b.0 as u32, b.1 as u32);
                }
                if ece {
                    tcp.flags |= TcpInfo::ECE;
                }
                Some(tcp)
            }
            Body::Data { .. } => {
                let mut tcp = TcpInfo::pure_ack(0);
                tcp.payload_len = MSS;
                tcp.flags |= TcpInfo::PSH;
                Some(tcp)
            }
            Body::Ping { .. } => None,
        }
    }
}
