//! Sharding an interface's frames over several AF_PACKET sockets, one per worker: a fanout group
//! (`PACKET_FANOUT`) whose classic-BPF program picks the member for each frame by the hash of
//! its LAN host's address — the IPv4 or IPv6 source on the LAN side, the destination on the WAN
//! side — so that all of a host's flows, both ways, meet one worker and one discipline (what
//! CAKE's `dual-srchost`/`dual-dsthost`/`triple-isolate` need to be fair between hosts).
//! Frames that are neither IPv4 nor IPv6 (ARP, a QinQ inner tag) go to the first worker.
#![allow(unsafe_code)]

use super::PacketSocket;
use std::io;
use std::os::fd::AsRawFd;

/// `PACKET_FANOUT`, `PACKET_FANOUT_DATA`, `PACKET_FANOUT_CBPF` (linux/if_packet.h).
const PACKET_FANOUT: libc::c_int = 18;
const PACKET_FANOUT_DATA: libc::c_int = 22;
const PACKET_FANOUT_CBPF: u32 = 6;

/// The multiplier of the hash (Knuth's multiplicative hashing: 2^32 / φ).
pub const GOLDEN: u32 = 0x9E37_79B1;

/// Which address names the LAN host on an interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostIs {
    /// The LAN side: frames come from the hosts.
    Source,
    /// The WAN side: frames go to the hosts.
    Destination,
}

/// Byte offsets of the address's last 32-bit word from the network header: the kernel runs a
/// fanout program before it hands the frame to a socket, while the skb's data still starts
/// past the Ethernet header (and a VLAN tag, which it took out): (IPv4, IPv6).
pub fn offsets(host: HostIs) -> (u32, u32) {
    match host {
        // IPv4 source at 12, IPv6 source's last word at 8 + 12.
        HostIs::Source => (12, 20),
        // IPv4 destination at 16, IPv6 destination's last word at 24 + 12.
        HostIs::Destination => (16, 36),
    }
}

/// Classic BPF's ancillary load of the frame's protocol (`SKF_AD_OFF + SKF_AD_PROTOCOL`): the
/// ethertype, whatever header the data starts at.
const LOAD_PROTOCOL: u32 = 0xFFFF_F000;

/// The member a host's address word picks among `n` (what the program returns, taken modulo
/// the group's size by the kernel): for tests and for saying which worker serves a host.
pub fn shard_of(address_word: u32, n: usize) -> usize {
    (address_word.wrapping_mul(GOLDEN) >> 16) as usize % n.max(1)
}

/// The worker of an IPv4 or IPv6 host among `n`.
pub fn shard_of_ip(ip: std::net::IpAddr, n: usize) -> usize {
    let word = match ip {
        std::net::IpAddr::V4(a) => u32::from_be_bytes(a.octets()),
        std::net::IpAddr::V6(a) => {
            let o = a.octets();
            u32::from_be_bytes([o[12], o[13], o[14], o[15]])
        }
    };
    shard_of(word, n)
}

/// One classic-BPF instruction (struct sock_filter).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct Filter {
    code: u16,
    jt: u8,
    jf: u8,
    k: u32,
}

const fn op(code: u16, jt: u8, jf: u8, k: u32) -> Filter {
    Filter { code, jt, jf, k }
}

/// The program: the host's address word, hashed; 0 for anything else.
fn program(host: HostIs) -> [Filter; 10] {
    let (v4, v6) = offsets(host);
    [
        op(0x28, 0, 0, LOAD_PROTOCOL), // 0: A = the ethertype (ldh proto)
        op(0x15, 3, 0, 0x86dd),        // 1: IPv6? to 5
        op(0x15, 0, 6, 0x0800),        // 2: IPv4? else to 9
        op(0x20, 0, 0, v4),            // 3: A = the IPv4 address (ld [v4])
        op(0x05, 0, 0, 1),             // 4: to 6
        op(0x20, 0, 0, v6),            // 5: A = the IPv6 address's last word
        op(0x24, 0, 0, GOLDEN),        // 6: A *= GOLDEN
        op(0x74, 0, 0, 16),            // 7: A >>= 16
        op(0x16, 0, 0, 0),             // 8: return A
        op(0x06, 0, 0, 0),             // 9: return 0
    ]
}

/// struct sock_fprog.
#[repr(C)]
struct Prog {
    len: u16,
    filter: *const Filter,
}

impl PacketSocket {
    /// Join fanout group `group` (one per interface and gateway), the members picked by the
    /// LAN host's address. Every member must join with the same group and program; members
    /// are numbered in the order they joined.
    pub fn join_fanout(&self, group: u16, host: HostIs) -> io::Result<()> {
        let arg = u32::from(group) | (PACKET_FANOUT_CBPF << 16);
        super::setsockopt(self.fd.as_raw_fd(), libc::SOL_PACKET, PACKET_FANOUT, &arg)?;
        let insns = program(host);
        let prog = Prog {
            len: insns.len() as u16,
            filter: insns.as_ptr(),
        };
        // SAFETY: `prog` points at `insns`, both live for the call; the kernel copies them.
        super::setsockopt(
            self.fd.as_raw_fd(),
            libc::SOL_PACKET,
            PACKET_FANOUT_DATA,
            &prog,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The program's jumps land where its comments say.
    #[test]
    fn the_program_jumps_where_it_says() {
        let p = program(HostIs::Source);
        let to = |i: usize, off: u8| i + 1 + usize::from(off);
        assert_eq!(to(1, p[1].jt), 5);
        assert_eq!(to(2, p[2].jf), 9);
        assert_eq!(to(4, p[4].k as u8), 6);
        assert_eq!((p[3].k, p[5].k), (12, 20));
        assert_eq!(
            (
                program(HostIs::Destination)[3].k,
                program(HostIs::Destination)[5].k
            ),
            (16, 36)
        );
    }

    /// Consecutive hosts of a subnet spread over the workers rather than piling on one.
    #[test]
    fn consecutive_hosts_spread_over_the_workers() {
        for n in [2, 3, 4, 8] {
            let mut per = vec![0; n];
            for last in 1..=254u8 {
                let ip = std::net::Ipv4Addr::new(198, 18, 1, last);
                per[shard_of_ip(ip.into(), n)] += 1;
            }
            let (lo, hi) = (per.iter().min().copied(), per.iter().max().copied());
            let even = 254 / n;
            assert!(
                lo.unwrap_or(0) * 10 >= even * 7 && hi.unwrap_or(0) * 10 <= even * 13,
                "{n} workers: {per:?}"
            );
        }
    }
}
