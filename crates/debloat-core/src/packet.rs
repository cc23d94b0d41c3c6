//! Packets as the queue disciplines see them.
//!
//! Disciplines are generic over the packet type so that each driver stores what it needs: the
//! simulator keeps small [`Record`]s, the gateway keeps whole frames. Every packet exposes a
//! [`PacketMeta`] with the fields Linux's qdiscs read from an `sk_buff`: the length
//! (`qdisc_pkt_len`: the L2 frame including the Ethernet header, no FCS), the flow key, DSCP,
//! ECN codepoint, enqueue timestamp, truesize and GSO segment count.

use crate::flow::FlowKey;

/// Time in nanoseconds since an arbitrary epoch chosen by the driver. Never goes backwards.
pub type Nanos = u64;

/// The two-bit ECN field of the IP header (RFC 3168).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum Ecn {
    /// 00: not ECN-capable transport.
    #[default]
    NotEct,
    /// 01: ECT(1).
    Ect1,
    /// 10: ECT(0).
    Ect0,
    /// 11: congestion experienced.
    Ce,
}

impl Ecn {
    /// From the two low bits of the traffic class / TOS byte.
    pub fn from_bits(bits: u8) -> Ecn {
        match bits & 3 {
            0 => Ecn::NotEct,
            1 => Ecn::Ect1,
            2 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }

    /// The codepoint as its two-bit value (3 = CE).
    pub fn bits(self) -> u8 {
        match self {
            Ecn::NotEct => 0,
            Ecn::Ect1 => 1,
            Ecn::Ect0 => 2,
            Ecn::Ce => 3,
        }
    }
}

/// What CAKE's ACK filter needs to know about a TCP segment (sch_cake.c `cake_ack_filter`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpInfo {
    /// The 12 flag bits of the TCP header: reserved nibble in bits 8..12, CWR..FIN in bits 0..8.
    pub flags: u16,
    /// Acknowledgement number.
    pub ack_seq: u32,
    /// Bytes of TCP payload (0 for a pure ACK).
    pub payload_len: u32,
    /// True when every option is one CAKE may drop past: NOP/EOL, MD5SIG, SACK (length 2 mod 8)
    /// or a well-formed TIMESTAMP. Any other option makes the segment non-droppable.
    pub options_droppable: bool,
    /// TSval and TSecr when a timestamp option is present.
    pub timestamp: Option<(u32, u32)>,
    /// Number of valid SACK blocks in `sack`.
    pub sack_len: u8,
    /// SACK blocks as (start, end) sequence numbers.
    pub sack: [(u32, u32); 4],
}

impl TcpInfo {
    /// FIN flag bit.
    pub const FIN: u16 = 0x01;
    /// SYN flag bit.
    pub const SYN: u16 = 0x02;
    /// RST flag bit.
    pub const RST: u16 = 0x04;
    /// PSH flag bit.
    pub const PSH: u16 = 0x08;
    /// ACK flag bit.
    pub const ACK: u16 = 0x10;
    /// URG flag bit.
    pub const URG: u16 = 0x20;
    /// ECE flag bit.
    pub const ECE: u16 = 0x40;
    /// CWR flag bit.
    pub const CWR: u16 = 0x80;

    /// A pure ACK with no options, as used by tests and synthetic traffic.
    pub fn pure_ack(ack_seq: u32) -> TcpInfo {
        TcpInfo {
            flags: Self::ACK,
            ack_seq,
            payload_len: 0,
            options_droppable: true,
            ..TcpInfo::default()
        }
    }
}

/// Per-packet metadata read and written by the disciplines.
///
/// The TCP details CAKE's ACK filter reads are not here: a packet gives them on demand
/// ([`Packet::tcp`]), from its bytes where it has them, as Linux's `cake_ack_filter` reads the
/// TCP headers of the queued skbs. That keeps this record at 96 bytes, and a gateway frame
/// (this, its buffer and two bytes) at 128, which the compiler moves between the stages with
/// a few vector loads and stores instead of a call to `memcpy` (issue 42).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketMeta {
    /// Length in bytes as a Linux qdisc counts it: the whole L2 frame, Ethernet header included.
    pub len: u32,
    /// Bytes of L2 header before the network header (14 on Ethernet). CAKE strips it when an
    /// overhead keyword is given.
    pub network_offset: u16,
    /// Flow identity used for hashing and host isolation.
    pub flow: FlowKey,
    /// Pre-computed flow hash (Linux `skb->hash`), 0 when not computed. Locally generated TCP
    /// carries the socket's `sk_txhash`; a qdisc that needs a hash computes one when this is 0.
    pub hash: u32,
    /// DiffServ codepoint (upper six bits of TOS / traffic class).
    pub dscp: u8,
    /// ECN codepoint; disciplines set it to CE when they mark.
    pub ecn: Ecn,
    /// Firewall mark (`skb->mark`), used by CAKE's `fwmark` tin override.
    pub mark: u32,
    /// Linux's `skb->priority`, which picks `pfifo_fast`'s band: a host's own packets carry
    /// their socket's (from `IP_TOS`: [`crate::qdisc::pfifo_fast::tos_priority`]), a routed
    /// packet gets the same from its TOS in `ip_forward`; 0 for a bridged frame or one that
    /// crossed a veth (`dev_forward_skb` clears it), as the gateway's are.
    pub priority: u32,
    /// When the packet entered the discipline; written by `enqueue`.
    pub enqueue_ns: Nanos,
    /// Memory the packet costs (Linux `skb->truesize`); memory limits count this, not `len`.
    pub truesize: u32,
    /// Number of segments in a GSO super-packet (1 for a normal packet).
    pub gso_segs: u16,
    /// Payload bytes per GSO segment (0 for a normal packet).
    pub gso_size: u16,
    /// Header bytes (L2 + L3 + L4) repeated in every GSO segment.
    pub hdr_len: u16,
    /// The earliest departure time a local sender stamped on the packet (Linux's `skb->tstamp`
    /// under the EDT model TCP has used since 4.20: the socket's pacing turned into a time),
    /// 0 when unset. `fq` holds a packet until then; forwarding clears it, as `ip_forward` does.
    pub tstamp: Nanos,
    /// The sending socket (`skb->sk`) for a host's own packets, 0 for a forwarded frame or one
    /// with no connected socket; `fq` keys a socket's packets as one flow, others by hash.
    pub socket: u32,
}

impl PacketMeta {
    /// Metadata for a packet of `len` bytes in `flow`, with Ethernet framing assumed
    /// (`network_offset` 14) and the default truesize model.
    pub fn new(len: u32, flow: FlowKey) -> PacketMeta {
        PacketMeta {
            len,
            network_offset: 14,
            flow,
            hash: 0,
            dscp: 0,
            ecn: Ecn::NotEct,
            mark: 0,
            priority: 0,
            enqueue_ns: 0,
            truesize: default_truesize(len),
            gso_segs: 1,
            gso_size: 0,
            hdr_len: 0,
            tstamp: 0,
            socket: 0,
        }
    }
}

/// The truesize model: Linux allocates the data rounded to a cache line after `NET_SKB_PAD`
/// (64 B) of headroom, plus `skb_shared_info` (320 B) and the `sk_buff` itself (256 B).
/// Real drivers vary (page fragments of 2 KiB or 4 KiB are common); callers with better
/// knowledge set [`PacketMeta::truesize`] themselves.
pub fn default_truesize(len: u32) -> u32 {
    let data = (len.saturating_add(64)).div_ceil(64) * 64;
    data.saturating_add(320 + 256)
}

/// How the capture frames its packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkType {
    /// Ethernet II (pcap LINKTYPE_ETHERNET).
    Ethernet,
    /// Raw IPv4/IPv6 (pcap LINKTYPE_RAW).
    RawIp,
}

/// A packet a discipline can hold.
pub trait Packet {
    /// Read-only metadata.
    fn meta(&self) -> &PacketMeta;
    /// Mutable metadata (disciplines write the enqueue time).
    fn meta_mut(&mut self) -> &mut PacketMeta;

    /// Set the ECN field to CE, as Linux `INET_ECN_set_ce`: succeeds for ECT(0), ECT(1) and CE
    /// IP packets (CE stays CE), fails for Not-ECT and non-IP. A failed mark means "drop".
    fn set_ce(&mut self) -> bool {
        let m = self.meta_mut();
        if !m.flow.is_ip() || m.ecn == Ecn::NotEct {
            return false;
        }
        m.ecn = Ecn::Ce;
        true
    }

    /// Clear the DSCP, keeping ECN (CAKE's `wash`).
    fn wash(&mut self) {
        self.meta_mut().dscp = 0;
    }

    /// Write what a discipline changed in the metadata (a CE mark, a washed DSCP) into the
    /// packet's bytes, just before it goes onto the wire. Packets without bytes have nothing
    /// to do.
    fn write_back(&mut self) {}

    /// The packet's bytes as they arrived and how they are framed, for a classify stage that
    /// reads them ([`crate::classify::Classify::snoop`]); `None` for a packet that has only
    /// metadata.
    fn frame(&self) -> Option<(&[u8], LinkType)> {
        None
    }

    /// The packet's bytes, for a link that corrupts one bit (netem's `corrupt`); `None` for a
    /// packet that has only metadata.
    fn bytes_mut(&mut self) -> Option<&mut [u8]> {
        None
    }

    /// The TCP details CAKE's ACK filter compares (flags, ACK number, payload length,
    /// options), `None` for anything not TCP or a packet that does not know them. A packet
    /// with bytes reads them from its headers each time it is asked
    /// ([`crate::classify::tcp_info`]), as Linux's `cake_get_tcphdr` does; the rest keep them
    /// beside their metadata.
    fn tcp(&self) -> Option<TcpInfo> {
        None
    }

    /// Split the first segment off a GSO super-packet, shrinking `self` to the rest.
    /// Returns `None` when the packet is a single segment or cannot be split.
    fn split_first_segment(&mut self) -> Option<Self>
    where
        Self: Sized,
    {
        None
    }
}

/// The packet record used by `debloat replay` and the tests: metadata, the TCP details it has
/// no bytes to read them from, and an id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    /// Caller's identifier (e.g. row number of a trace).
    pub id: u64,
    /// Metadata.
    pub meta: PacketMeta,
    /// TCP details for the ACK filter; `None` for non-TCP or when unknown.
    pub tcp: Option<TcpInfo>,
}

impl Record {
    /// A record with id and metadata, no TCP details.
    pub fn new(id: u64, meta: PacketMeta) -> Record {
        Record {
            id,
            meta,
            tcp: None,
        }
    }

    /// The same record carrying these TCP details.
    pub fn with_tcp(self, tcp: Option<TcpInfo>) -> Record {
        Record { tcp, ..self }
    }
}

impl Packet for Record {
    fn meta(&self) -> &PacketMeta {
        &self.meta
    }
    fn meta_mut(&mut self) -> &mut PacketMeta {
        &mut self.meta
    }
    fn tcp(&self) -> Option<TcpInfo> {
        self.tcp
    }
    fn split_first_segment(&mut self) -> Option<Record> {
        let m = &mut self.meta;
        if m.gso_segs <= 1 || m.gso_size == 0 {
            return None;
        }
        let seg_len = u32::from(m.hdr_len) + u32::from(m.gso_size);
        if m.len <= seg_len {
            m.gso_segs = 1;
            return None;
        }
        let mut first = *self;
        first.meta.len = seg_len;
        first.meta.gso_segs = 1;
        first.meta.gso_size = 0;
        first.meta.truesize = default_truesize(seg_len);
        let m = &mut self.meta;
        m.len -= u32::from(m.gso_size);
        m.gso_segs -= 1;
        m.truesize = m
            .truesize
            .saturating_sub(u32::from(m.gso_size))
            .max(default_truesize(m.len));
        if m.gso_segs == 1 {
            m.gso_size = 0;
        }
        Some(first)
    }
}
