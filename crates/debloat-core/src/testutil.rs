//! Small constructors shared by unit tests, integration tests and benchmarks (not public API).

use crate::flow::FlowKey;
use crate::packet::{Ecn, PacketMeta, Record, TcpInfo};
use std::net::{IpAddr, Ipv4Addr};

/// Address 198.18.`net`.`host` (RFC 2544 benchmarking range).
pub fn addr(net: u8, host: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(198, 18, net, host))
}

/// A UDP flow from host `src` (198.18.0.src) to host `dst` (198.18.1.dst), source port `port`.
pub fn udp_flow(src: u8, dst: u8, port: u16) -> FlowKey {
    FlowKey::ip(addr(0, src), addr(1, dst), port, 5001, 17)
}

/// A packet of `len` bytes with id `id`, all in one UDP flow.
pub fn pkt(id: u64, len: u32) -> Record {
    Record::new(id, PacketMeta::new(len, udp_flow(1, 1, 1000)))
}

/// A packet of `len` bytes in `flow`.
pub fn pkt_in(id: u64, len: u32, flow: FlowKey) -> Record {
    Record::new(id, PacketMeta::new(len, flow))
}

/// The same packet, ECN-capable (ECT(0)).
pub fn ect(mut r: Record) -> Record {
    r.meta.ecn = Ecn::Ect0;
    r
}

/// A 66-byte pure TCP ACK with acknowledgement number `ack_seq` on one fixed connection.
pub fn ack(id: u64, ack_seq: u32) -> Record {
    let flow = FlowKey::ip(addr(0, 1), addr(1, 1), 40000, 80, 6);
    Record::new(id, PacketMeta::new(66, flow)).with_tcp(Some(TcpInfo::pure_ack(ack_seq)))
}
