//! A frame blaster for forwarding benchmarks: UDP/IPv4 frames of one size, spread over many
//! flows, sent out of an AF_PACKET socket in batches (`sendmmsg`) as fast as the kernel takes
//! them or at a set rate. It stands in for a traffic generator (pktgen, TRex) on machines that
//! have none; what arrives at the far side is counted there, from the interface's counters.

use crate::sys::PacketSocket;
use std::fmt::Write as _;
use std::io;
use std::time::{Duration, Instant};

/// What to send.
#[derive(Clone, Debug)]
pub struct Blast {
    /// Ethernet frame length without the 4-byte FCS (60 for "64-byte frames", 1514 for
    /// 1500-byte IP packets).
    pub frame_len: usize,
    /// Distinct flows (UDP source ports), sent round-robin.
    pub flows: u16,
    /// Frames per second; 0 for as fast as the kernel takes them.
    pub pps: u64,
    /// How long.
    pub duration: Duration,
    /// Source and destination MAC addresses.
    pub src_mac: [u8; 6],
    /// The receiver's MAC address.
    pub dst_mac: [u8; 6],
    /// Source and destination IPv4 addresses.
    pub src_ip: [u8; 4],
    /// The receiver's address (UDP port 9, discard).
    pub dst_ip: [u8; 4],
    /// Give every flow a source address of its own too (198.19.0.0/16, within 198.18.0.0/15),
    /// as a flood from many hosts: host-fair disciplines then see as many hosts as flows.
    pub spread_sources: bool,
}

/// What was sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlastReport {
    /// Frames the kernel took.
    pub sent: u64,
    /// Frames it refused (ENOBUFS: the receiving side's backlog was full).
    pub refused: u64,
    /// How long it ran.
    pub elapsed: Duration,
}

/// The smallest frame: Ethernet + IPv4 + UDP headers (42 bytes) padded to Ethernet's 60.
pub const MIN_FRAME: usize = 60;
/// The largest: a 1500-byte IP packet.
pub const MAX_FRAME: usize = 1514;

/// Frames sent per system call.
const BATCH: usize = 32;

impl Blast {
    /// The frames, one per flow: valid UDP/IPv4 with checksums.
    pub fn frames(&self) -> io::Result<Vec<Vec<u8>>> {
        if !(MIN_FRAME..=MAX_FRAME).contains(&self.frame_len) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "frame length {} B: choose {MIN_FRAME} to {MAX_FRAME} (without FCS)",
                    self.frame_len
                ),
            ));
        }
        let payload = vec![0u8; self.frame_len - 42];
        (0..self.flows.max(1))
            .map(|i| {
                let [hi, lo] = i.to_be_bytes();
                let src = if self.spread_sources {
                    [198, 19, hi, lo]
                } else {
                    self.src_ip
                };
                let b = etherparse::PacketBuilder::ethernet2(self.src_mac, self.dst_mac)
                    .ipv4(src, self.dst_ip, 64)
                    .udp(10_000u16.wrapping_add(i), 9);
                let mut f = Vec::with_capacity(self.frame_len);
                b.write(&mut f, &payload)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
                Ok(f)
            })
            .collect()
    }

    /// Send out of `sock` until the duration is over.
    pub fn run(&self, sock: &PacketSocket) -> io::Result<BlastReport> {
        let frames = self.frames()?;
        let start = Instant::now();
        let mut r = BlastReport::default();
        let mut next = 0usize;
        let batch_gap = (self.pps > 0).then(|| Duration::from_secs(BATCH as u64) / self.pps as u32);
        let mut due = start;
        while start.elapsed() < self.duration {
            if let Some(gap) = batch_gap {
                let now = Instant::now();
                if now < due {
                    std::thread::sleep(due - now);
                }
                due += gap;
            }
            let batch: Vec<&[u8]> = (0..BATCH)
                .map(|k| frames[(next + k) % frames.len()].as_slice())
                .collect();
            match sock.send_batch(&batch) {
                Ok(n) => {
                    r.sent += n as u64;
                    next += n;
                    if n < BATCH {
                        // The kernel refused frame n: count it and go past it.
                        r.refused += 1;
                        next += 1;
                    }
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    r.refused += 1;
                    next += 1;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
                Err(e) => return Err(e),
            }
            next %= frames.len();
        }
        r.elapsed = start.elapsed();
        Ok(r)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn blast(len: usize) -> Blast {
        Blast {
            frame_len: len,
            flows: 8,
            pps: 0,
            duration: Duration::from_millis(1),
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src_ip: [198, 18, 1, 2],
            dst_ip: [198, 18, 2, 2],
            spread_sources: false,
        }
    }

    #[test]
    fn frames_have_the_asked_length_and_one_flow_each() {
        for len in [MIN_FRAME, 128, MAX_FRAME] {
            let f = blast(len).frames().unwrap();
            assert_eq!(f.len(), 8);
            let mut ports = std::collections::BTreeSet::new();
            for x in &f {
                assert_eq!(x.len(), len);
                let p = etherparse::SlicedPacket::from_ethernet(x).unwrap();
                let Some(etherparse::TransportSlice::Udp(u)) = p.transport else {
                    panic!("not UDP")
                };
                assert_eq!(u.destination_port(), 9);
                ports.insert(u.source_port());
            }
            assert_eq!(ports.len(), 8);
        }
    }

    #[test]
    fn lengths_outside_ethernet_are_refused_with_the_range() {
        let e = blast(59).frames().unwrap_err().to_string();
        assert!(e.contains("59 B") && e.contains("60 to 1514"), "{e}");
        assert!(blast(1515).frames().is_err());
    }
}

/// A frame or address the load generator cannot make.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LoadgenError {
    /// An odd frame of a kind it does not know.
    #[error("{0}: expected one of {list}", list = ODD_FRAMES.join(", "))]
    UnknownKind(String),
    /// A frame the builder refused.
    #[error("building the frame: {0}")]
    Build(String),
    /// A MAC address that does not parse.
    #[error("MAC address `{mac}`: {why}")]
    Mac {
        /// As given.
        mac: String,
        /// What is wrong.
        why: String,
    },
}

/// The kinds of [`odd_frame`].
pub const ODD_FRAMES: &[&str] = &["garbage", "truncated", "oversized", "vlan", "qinq"];

/// A frame of a kind a forwarder must survive (`testbed send-frames`): `garbage` (an EtherType
/// of IPv4 and 46 bytes of 0xff), `truncated` (an IPv4 header claiming 1500 bytes with 100
/// present), `oversized` (9100 bytes), `vlan` (a UDP datagram behind an 802.1Q tag of VLAN 100)
/// and `qinq` (the same behind an 802.1ad tag of VLAN 200 too). From 02:00:00:00:00:99 to
/// broadcast, 198.18.1.2 → 198.18.2.2.
pub fn odd_frame(kind: &str) -> Result<Vec<u8>, LoadgenError> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x99, 0x08, 0x00]);
    match kind {
        "garbage" => f.extend_from_slice(&[0xff; 46]),
        "truncated" => {
            let mut ip = [0u8; 100];
            ip[..20].copy_from_slice(&[
                0x45, 0, 0x05, 0xdc, 0, 0, 0x40, 0, 64, 17, 0, 0, 198, 18, 1, 2, 198, 18, 2, 2,
            ]);
            f.extend_from_slice(&ip);
        }
        "oversized" => f.resize(9100, 0),
        "vlan" | "qinq" => {
            let b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0x99], [0xff; 6])
                .ipv4([198, 18, 1, 2], [198, 18, 2, 2], 64)
                .udp(4000, 9);
            f.clear();
            b.write(&mut f, b"tagged")
                .map_err(|e| LoadgenError::Build(e.to_string()))?;
            let mut tags = Vec::new();
            if kind == "qinq" {
                tags.extend_from_slice(&[0x88, 0xa8, 0x00, 200]);
            }
            tags.extend_from_slice(&[0x81, 0x00, 0xa0, 100]);
            f.splice(12..12, tags);
        }
        k => return Err(LoadgenError::UnknownKind(k.to_string())),
    }
    Ok(f)
}

/// `aa:bb:cc:dd:ee:ff` → bytes.
pub fn parse_mac(s: &str) -> Result<[u8; 6], LoadgenError> {
    let bad = |why: String| LoadgenError::Mac {
        mac: s.to_string(),
        why,
    };
    let mut mac = [0u8; 6];
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        return Err(bad("expected six hex bytes like 02:00:00:00:00:01".into()));
    }
    for (m, p) in mac.iter_mut().zip(parts) {
        *m = u8::from_str_radix(p, 16).map_err(|_| bad(format!("`{p}` is not a hex byte")))?;
    }
    Ok(mac)
}

/// Bytes as lowercase hex, no separators.
pub fn hex(b: &[u8]) -> String {
    b.iter()
        .fold(String::with_capacity(b.len() * 2), |mut s, x| {
            let _ = write!(s, "{x:02x}");
            s
        })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod odd_tests {
    use super::*;

    #[test]
    fn odd_frames_have_their_sizes_and_tags() {
        assert_eq!(odd_frame("garbage").unwrap().len(), 60);
        assert_eq!(odd_frame("truncated").unwrap().len(), 114);
        assert_eq!(odd_frame("oversized").unwrap().len(), 9100);
        let v = odd_frame("vlan").unwrap();
        assert_eq!(&v[12..16], &[0x81, 0x00, 0xa0, 100]);
        let q = odd_frame("qinq").unwrap();
        assert_eq!(&q[12..20], &[0x88, 0xa8, 0, 200, 0x81, 0, 0xa0, 100]);
        let e = odd_frame("jumbo").unwrap_err();
        assert_eq!(e, LoadgenError::UnknownKind("jumbo".into()));
        assert!(
            e.to_string()
                .contains("garbage, truncated, oversized, vlan, qinq"),
            "{e}"
        );
    }

    #[test]
    fn macs_parse_and_bad_ones_say_why() {
        assert_eq!(
            parse_mac("02:db:00:00:00:09").unwrap(),
            [2, 0xdb, 0, 0, 0, 9]
        );
        assert!(parse_mac("02:db:00")
            .unwrap_err()
            .to_string()
            .contains("six hex bytes"));
        assert!(parse_mac("02:db:00:00:00:zz")
            .unwrap_err()
            .to_string()
            .contains("`zz`"));
        assert_eq!(hex(&[0, 0xab, 0x10]), "00ab10");
    }
}
