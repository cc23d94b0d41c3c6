//! The CSV trace format: `t_ns,src,dst,sport,dport,proto,len,dscp,ecn`, one packet per row.
//! Addresses are IPv4 or IPv6; proto is tcp, udp, icmp (icmpv6 for IPv6) or a number 0-255;
//! ecn is 0-3; len is the frame length a Linux qdisc sees (Ethernet header included, no FCS).

use crate::error::{bail, ReplayError, Result};
use crate::{Input, Trace};
use debloat_core::classify::LinkType;
use debloat_core::flow::FlowKey;
use debloat_core::packet::{Ecn, PacketMeta, Record};
use std::net::IpAddr;

/// The header every trace starts with.
pub const HEADER: &str = "t_ns,src,dst,sport,dport,proto,len,dscp,ecn";

/// Parse a whole trace; a bad row is an error naming its line and column.
pub fn read_csv(bytes: &[u8]) -> Result<Trace> {
    let mut r = csv::ReaderBuilder::new()
        .has_headers(true)
        .trim(csv::Trim::All)
        .from_reader(bytes);
    let header: Vec<String> = r.headers()?.iter().map(str::to_string).collect();
    if header.join(",") != HEADER {
        bail!(
            "line 1: the header is `{}`; a trace starts with `{HEADER}`",
            header.join(",")
        );
    }
    let mut packets = Vec::new();
    for (i, rec) in r.records().enumerate() {
        let line = i + 2;
        let rec = rec.map_err(|e| ReplayError(format!("line {line}: {e}")))?;
        if rec.len() != 9 {
            bail!("line {line}: {} fields; a row has 9 ({HEADER})", rec.len());
        }
        let input = row(&rec, packets.len() as u64)
            .map_err(|e| ReplayError(format!("line {line}: {e}")))?;
        packets.push(Some(input));
    }
    Ok(Trace {
        packets,
        link: LinkType::Ethernet,
        epoch_ns: 0,
    })
}

fn field<T: std::str::FromStr>(
    rec: &csv::StringRecord,
    i: usize,
    name: &str,
    expect: &str,
) -> Result<T> {
    let v = rec.get(i).unwrap_or("");
    v.parse()
        .map_err(|_| ReplayError(format!("bad {name} `{v}`: expected {expect}")))
}

fn proto(v: &str, v6: bool) -> Result<u8> {
    Ok(match v.to_ascii_lowercase().as_str() {
        "tcp" => 6,
        "udp" => 17,
        "icmp" if v6 => 58,
        "icmp" => 1,
        "icmpv6" | "ipv6-icmp" => 58,
        n => n.parse().map_err(|_| {
            ReplayError(format!(
                "bad proto `{v}`: expected tcp, udp, icmp or a number 0-255"
            ))
        })?,
    })
}

fn row(rec: &csv::StringRecord, id: u64) -> Result<Input> {
    let t_ns: u64 = field(rec, 0, "t_ns", "nanoseconds as a whole number")?;
    let src: IpAddr = field(rec, 1, "src", "an IPv4 or IPv6 address")?;
    let dst: IpAddr = field(rec, 2, "dst", "an IPv4 or IPv6 address")?;
    if src.is_ipv4() != dst.is_ipv4() {
        bail!("src {src} and dst {dst} are of different IP versions");
    }
    let sport: u16 = field(rec, 3, "sport", "a port 0-65535")?;
    let dport: u16 = field(rec, 4, "dport", "a port 0-65535")?;
    let proto = proto(rec.get(5).unwrap_or(""), src.is_ipv6())?;
    let len: u32 = field(rec, 6, "len", "frame bytes, 1 to 65535")?;
    if !(1..=65535).contains(&len) {
        bail!("bad len `{len}`: expected frame bytes, 1 to 65535");
    }
    let dscp: u8 = field(rec, 7, "dscp", "0-63")?;
    if dscp > 63 {
        bail!("bad dscp `{dscp}`: expected 0-63");
    }
    let ecn: u8 = field(rec, 8, "ecn", "0-3 (0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE)")?;
    if ecn > 3 {
        bail!("bad ecn `{ecn}`: expected 0-3 (0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE)");
    }
    let mut m = PacketMeta::new(len, FlowKey::ip(src, dst, sport, dport, proto));
    m.dscp = dscp;
    m.ecn = Ecn::from_bits(ecn);
    Ok(Input {
        t_ns,
        record: Record::new(id, m),
        frame: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_trace() {
        let t = read_csv(b"t_ns,src,dst,sport,dport,proto,len,dscp,ecn\n0,198.18.0.1,198.18.1.1,1,2,udp,1514,46,2\n5,2001:2::1,2001:2::2,3,4,tcp,66,0,0\n").expect("ok");
        assert_eq!(t.packets.len(), 2);
        let p = t.packets[0].as_ref().expect("p");
        assert_eq!(
            (p.record.meta.len, p.record.meta.dscp, p.record.meta.ecn),
            (1514, 46, Ecn::Ect0)
        );
    }

    #[test]
    fn bad_rows_name_their_line_and_field() {
        let e = read_csv(b"t_ns,src,dst,sport,dport,proto,len,dscp,ecn\n0,198.18.0.1,198.18.1.1,1,2,udp,1514,0,0\n1,198.18.0.1,nowhere,1,2,udp,100,0,0\n").err().expect("error").to_string();
        assert!(
            e.contains("line 3") && e.contains("dst") && e.contains("`nowhere`"),
            "{e}"
        );
        let e = read_csv(b"t_ns,src,dst,sport,dport,proto,len,dscp,ecn\n0,198.18.0.1,198.18.1.1,1,2,sctp,100,0,0\n").err().expect("error").to_string();
        assert!(e.contains("line 2") && e.contains("proto `sctp`"), "{e}");
        let e = read_csv(b"time,src\n").err().expect("error").to_string();
        assert!(e.contains("line 1") && e.contains(HEADER), "{e}");
        let e = read_csv(b"t_ns,src,dst,sport,dport,proto,len,dscp,ecn\n0,198.18.0.1,198.18.1.1,1,2,udp,100,0,7\n").err().expect("error").to_string();
        assert!(e.contains("line 2") && e.contains("ecn `7`"), "{e}");
    }
}
