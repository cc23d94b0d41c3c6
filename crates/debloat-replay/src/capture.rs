//! pcap in and out. Reading uses the capture's timestamps (relative to its first packet) and
//! classifies each frame; a frame that does not parse is reported by packet number, counted as
//! dropped ("malformed") and the replay goes on. Writing puts each delivered packet at the time
//! it started to send, with the DSCP/ECN it left with; for a CSV trace the frames are
//! synthesised (Ethernet + IP + UDP/TCP/ICMP, padded to the trace's length).

use crate::error::{bail, Context, Result};
use crate::{Input, Trace};
use debloat_core::classify::{classify_tcp, rewrite_ds_field, LinkType};
use debloat_core::flow::FlowKey;
use debloat_core::Record;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter};
use pcap_file::{DataLink, Endianness, TsResolution};
use std::time::Duration;

/// Classic pcap magic numbers (µs and ns, either byte order).
pub fn is_pcap(b: &[u8]) -> bool {
    b.len() >= 4
        && matches!(
            b[..4],
            [0xd4, 0xc3, 0xb2, 0xa1]
                | [0xa1, 0xb2, 0xc3, 0xd4]
                | [0x4d, 0x3c, 0xb2, 0xa1]
                | [0xa1, 0xb2, 0x3c, 0x4d]
        )
}

/// pcapng section header block.
pub fn is_pcapng(b: &[u8]) -> bool {
    b.len() >= 4 && b[..4] == [0x0a, 0x0d, 0x0d, 0x0a]
}

/// Raise the header's snaplen so that records cut short by the capture (`tcpdump -s 128`) still
/// parse: pcap-file refuses a record whose original length exceeds the header's snaplen.
fn lift_snaplen(bytes: &[u8]) -> Vec<u8> {
    let mut b = bytes.to_vec();
    if b.len() >= 24 {
        let big = matches!(b[..4], [0xa1, 0xb2, 0xc3, 0xd4] | [0xa1, 0xb2, 0x3c, 0x4d]);
        let v: u32 = 262_144;
        b[16..20].copy_from_slice(&if big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        });
    }
    b
}

/// Read a pcap capture.
pub fn read(bytes: &[u8]) -> Result<Trace> {
    let bytes = lift_snaplen(bytes);
    let mut r = PcapReader::new(&bytes[..]).context("bad pcap header")?;
    let link = match r.header().datalink {
        DataLink::ETHERNET => LinkType::Ethernet,
        DataLink::RAW | DataLink::IPV4 | DataLink::IPV6 => LinkType::RawIp,
        other => bail!(
            "link type {other:?} is not supported: debloat replays Ethernet or raw IP captures"
        ),
    };
    let mut packets = Vec::new();
    let mut epoch: Option<u64> = None;
    let mut n = 0usize;
    while let Some(p) = r.next_packet() {
        n += 1;
        let p = p.with_context(|| format!("packet {n}: truncated or corrupt record"))?;
        let ts = p.timestamp.as_nanos() as u64;
        let t0 = *epoch.get_or_insert(ts);
        let id = packets.len() as u64;
        match classify_tcp(&p.data, p.orig_len, link) {
            Ok((mut meta, tcp)) => {
                if link == LinkType::RawIp {
                    meta.network_offset = 0;
                }
                packets.push(Some(Input {
                    t_ns: ts.saturating_sub(t0),
                    record: Record::new(id, meta).with_tcp(tcp),
                    frame: Some(p.data.into_owned()),
                }));
            }
            Err(e) => {
                eprintln!("warning: packet {n}: {e}; counted as dropped (reason `malformed`)");
                packets.push(None);
            }
        }
    }
    Ok(Trace {
        packets,
        link,
        epoch_ns: epoch.unwrap_or(0),
    })
}

/// Write delivered packets in the order they were sent.
pub fn write_delivered(
    path: &std::path::Path,
    trace: &Trace,
    delivered: &[(u64, Record)],
) -> Result<()> {
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let header = PcapHeader {
        datalink: if trace.link == LinkType::RawIp {
            DataLink::RAW
        } else {
            DataLink::ETHERNET
        },
        ts_resolution: TsResolution::NanoSecond,
        endianness: Endianness::Little,
        snaplen: 65535,
        ..PcapHeader::default()
    };
    let mut w = PcapWriter::with_header(std::io::BufWriter::new(file), header)?;
    for (start, rec) in delivered {
        let input = trace.packets.get(rec.id as usize).and_then(|p| p.as_ref());
        let mut frame = match input.and_then(|i| i.frame.clone()) {
            Some(f) => f,
            None => synthesize(rec)?,
        };
        let off = usize::from(rec.meta.network_offset);
        let _ = rewrite_ds_field(&mut frame, off, rec.meta.dscp, rec.meta.ecn);
        let ts = Duration::from_nanos(trace.epoch_ns + start);
        w.write_packet(&PcapPacket::new(
            ts,
            rec.meta.len.max(frame.len() as u32),
            &frame,
        ))?;
    }
    Ok(())
}

/// Build a frame of exactly `meta.len` bytes (or the smallest valid one) for a CSV packet.
fn synthesize(rec: &Record) -> Result<Vec<u8>> {
    let m = &rec.meta;
    let FlowKey::Ip {
        src,
        dst,
        sport,
        dport,
        proto,
        ..
    } = m.flow
    else {
        bail!("packet {} is not IP", rec.id)
    };
    let eth = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
    let ip = match (src, dst) {
        (std::net::IpAddr::V4(s), std::net::IpAddr::V4(d)) => eth.ipv4(s.octets(), d.octets(), 64),
        (std::net::IpAddr::V6(s), std::net::IpAddr::V6(d)) => eth.ipv6(s.octets(), d.octets(), 64),
        _ => bail!("packet {}: mixed IP versions", rec.id),
    };
    let mut buf = Vec::with_capacity(m.len as usize);
    let hdr = |fixed: usize| (m.len as usize).saturating_sub(fixed);
    let l3 = if src.is_ipv4() { 14 + 20 } else { 14 + 40 };
    match proto {
        6 => {
            let b = ip.tcp(sport, dport, 1, 65535).ack(1);
            b.write(&mut buf, &vec![0u8; hdr(l3 + 20)])?;
        }
        17 => ip
            .udp(sport, dport)
            .write(&mut buf, &vec![0u8; hdr(l3 + 8)])?,
        1 => ip
            .icmpv4_echo_request(1, 1)
            .write(&mut buf, &vec![0u8; hdr(l3 + 8)])?,
        58 => ip
            .icmpv6_echo_request(1, 1)
            .write(&mut buf, &vec![0u8; hdr(l3 + 8)])?,
        n => ip.write(&mut buf, etherparse::IpNumber(n), &vec![0u8; hdr(l3)])?,
    }
    Ok(buf)
}
