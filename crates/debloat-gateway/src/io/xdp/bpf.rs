//! The XDP program that hands an interface's frames to the gateway's AF_XDP sockets, loaded
//! with the raw `bpf(2)` system call: an `XSKMAP` (receive queue → socket), a six-instruction
//! program, and a BPF link that attaches it to the interface.
//!
//! Why no loader crate: the program is `return bpf_redirect_map(&xsks, ctx->rx_queue_index,
//! XDP_PASS)`, five instructions and a map reference, which needs no compiler, no ELF file and
//! no relocation. aya (the pure-Rust loader) wants a newer Rust than this project builds with
//! (its 0.16 declares 1.98), and libbpf-based crates build C at compile time. So the
//! instructions are written out here, each with its meaning, and loaded by three `bpf(2)`
//! commands. The link (`BPF_LINK_CREATE`, Linux ≥ 5.9) detaches the program when its file
//! descriptor closes: a gateway that exits or crashes leaves no program on the interface.
//!
//! A queue with no socket in the map passes its frames to the kernel (the `XDP_PASS` in the
//! flags of `bpf_redirect_map`, Linux ≥ 5.3).
//!
//! With several workers ([`Steer::ByHost`]) the program picks the socket instead: the hash of
//! the LAN host's address — the IPv4 or IPv6 source on the LAN side, the destination on the WAN
//! side, past one VLAN tag — exactly as the AF_PACKET back end's fanout program does
//! ([`crate::sys::fanout`]), so a host's frames meet the same worker on either back end and in
//! both directions. Anything else (ARP, a second VLAN tag, a frame too short) goes to worker 0.
//! Every worker has a socket on each receive queue (AF_XDP redirects only to a socket on the
//! frame's own queue), and the map holds worker `i`'s socket on queue `q` at `q × n + i`
//! ([`super::queues`]). 41 instructions, each with its meaning below.
#![allow(unsafe_code)]

use crate::sys::{HostIs, GOLDEN};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// `bpf(2)` commands (linux/bpf.h).
const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
/// `prog_flags`: the program copes with multi-buffer frames (Linux ≥ 5.18).
const BPF_F_XDP_HAS_FRAGS: u32 = 1 << 5;
const BPF_LINK_CREATE: libc::c_long = 28;
/// `BPF_MAP_TYPE_XSKMAP`, `BPF_PROG_TYPE_XDP`, attach type `BPF_XDP`.
const MAP_TYPE_XSKMAP: u32 = 17;
const PROG_TYPE_XDP: u32 = 6;
const ATTACH_XDP: u32 = 37;
/// `XDP_FLAGS_SKB_MODE`, `XDP_FLAGS_DRV_MODE` (linux/if_link.h).
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
/// The helper `bpf_redirect_map` and the action `XDP_PASS`.
const HELPER_REDIRECT_MAP: i32 = 51;
const XDP_PASS: i32 = 2;

/// Where XDP runs on an interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum XdpMode {
    /// In the driver, before an skb is made (veth has it, as most NIC drivers do).
    Native,
    /// Generic XDP, after the kernel made an skb: any interface, slower.
    Skb,
}

impl XdpMode {
    /// `native` or `skb`.
    pub fn as_str(self) -> &'static str {
        match self {
            XdpMode::Native => "native",
            XdpMode::Skb => "skb",
        }
    }
}

impl std::fmt::Display for XdpMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One instruction (struct bpf_insn): opcode, dst (low nibble) and src (high nibble)
/// registers, offset, immediate.
#[repr(C)]
#[derive(Clone, Copy)]
struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: dst | (src << 4),
        off,
        imm,
    }
}

/// How the program picks a frame's socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Steer {
    /// By the receive queue (one socket per queue: one worker).
    ByQueue,
    /// By the hash of the LAN host's address, among the `n` sockets on the frame's queue.
    ByHost(HostIs, u32),
}

/// The program, with the map's descriptor in its one `ld_imm64`.
fn program(map_fd: RawFd) -> [Insn; 6] {
    [
        // r2 = *(u32 *)(r1 + 16): ctx->rx_queue_index (struct xdp_md: data, data_end,
        // data_meta, ingress_ifindex, rx_queue_index).
        insn(0x61, 2, 1, 16, 0),
        // r1 = the map (ld_imm64 with src = BPF_PSEUDO_MAP_FD; two slots).
        insn(0x18, 1, 1, 0, map_fd),
        insn(0, 0, 0, 0, 0),
        // r3 = XDP_PASS: what to return when the queue has no socket.
        insn(0xb7, 3, 0, 0, XDP_PASS),
        // r0 = bpf_redirect_map(r1, r2, r3)
        insn(0x85, 0, 0, 0, HELPER_REDIRECT_MAP),
        // return r0
        insn(0x95, 0, 0, 0, 0),
    ]
}

/// An ethertype as a 16-bit load from the frame reads it (host byte order).
const fn ethertype(t: u16) -> i32 {
    u16::from_ne_bytes(t.to_be_bytes()) as i32
}

/// The host-steering program (see the module's documentation): the member is
/// `((be32(address word) * GOLDEN) >> 16) % n`, the fanout program's value taken modulo the
/// group's size, as the kernel takes it; the map's key is that member's socket on the frame's
/// receive queue, `queue × n + member`. Registers: r2 the frame's data (moved past a VLAN
/// tag), r3 its end, r4 bounds checks, r0 the ethertype then the hash, r5 the member.
fn program_by_host(map_fd: RawFd, host: HostIs, n: u32) -> [Insn; 41] {
    let (v4, v6) = crate::sys::fanout_offsets(host);
    let (v4, v6) = (14 + v4 as i16, 14 + v6 as i16);
    let (vlan, qinq) = (ethertype(0x8100), ethertype(0x88a8));
    const TO: u8 = 33; // the redirect, below
    let to = |from: usize, target: u8| target as i16 - from as i16 - 1;
    [
        insn(0x61, 2, 1, 0, 0),                          // 0: r2 = ctx->data
        insn(0x61, 3, 1, 4, 0),                          // 1: r3 = ctx->data_end
        insn(0xb7, 5, 0, 0, 0),                          // 2: r5 = 0 (worker 0 unless hashed)
        insn(0xbf, 4, 2, 0, 0),                          // 3: r4 = r2
        insn(0x07, 4, 0, 0, 14),                         // 4: r4 += 14 (an Ethernet header)
        insn(0x2d, 4, 3, to(5, TO), 0),                  // 5: if r4 > r3: to the redirect
        insn(0x69, 0, 2, 12, 0),                         // 6: r0 = the ethertype
        insn(0x15, 0, 0, to(7, 10), vlan),               // 7: a VLAN tag? to 10
        insn(0x15, 0, 0, to(8, 10), qinq),               // 8: an 802.1ad tag? to 10
        insn(0x05, 0, 0, to(9, 17), 0),                  // 9: to 17
        insn(0x07, 2, 0, 0, 4),                          // 10: r2 += 4 (past the tag)
        insn(0xbf, 4, 2, 0, 0),                          // 11: r4 = r2
        insn(0x07, 4, 0, 0, 14),                         // 12: r4 += 14
        insn(0x2d, 4, 3, to(13, TO), 0),                 // 13: if r4 > r3: to the redirect
        insn(0x69, 0, 2, 12, 0),                         // 14: r0 = the inner ethertype
        insn(0x15, 0, 0, to(15, TO), vlan),              // 15: a second tag: to the redirect
        insn(0x15, 0, 0, to(16, TO), qinq),              // 16: (either kind)
        insn(0x15, 0, 0, to(17, 24), ethertype(0x0800)), // 17: IPv4? to 24
        insn(0x55, 0, 0, to(18, TO), ethertype(0x86dd)), // 18: not IPv6: to the redirect
        insn(0xbf, 4, 2, 0, 0),                          // 19: r4 = r2
        insn(0x07, 4, 0, 0, (v6 + 4) as i32),            // 20: r4 += the word's end
        insn(0x2d, 4, 3, to(21, TO), 0),                 // 21: if r4 > r3: to the redirect
        insn(0x61, 0, 2, v6, 0),                         // 22: r0 = the IPv6 address's last word
        insn(0x05, 0, 0, to(23, 28), 0),                 // 23: to 28
        insn(0xbf, 4, 2, 0, 0),                          // 24: r4 = r2
        insn(0x07, 4, 0, 0, (v4 + 4) as i32),            // 25: r4 += the word's end
        insn(0x2d, 4, 3, to(26, TO), 0),                 // 26: if r4 > r3: to the redirect
        insn(0x61, 0, 2, v4, 0),                         // 27: r0 = the IPv4 address
        insn(0xdc, 0, 0, 0, 32), // 28: r0 = be32(r0), as classic BPF loads it
        insn(0x24, 0, 0, 0, GOLDEN as i32), // 29: w0 *= GOLDEN
        insn(0x74, 0, 0, 0, 16), // 30: w0 >>= 16
        insn(0x94, 0, 0, 0, n.max(1) as i32), // 31: w0 %= n
        insn(0xbf, 5, 0, 0, 0),  // 32: r5 = r0
        insn(0x61, 2, 1, 16, 0), // 33: r2 = ctx->rx_queue_index
        insn(0x27, 2, 0, 0, n.max(1) as i32), // 34: r2 *= n
        insn(0x0f, 2, 5, 0, 0),  // 35: r2 += r5: the map's key, queue × n + worker
        insn(0x18, 1, 1, 0, map_fd), // 36: r1 = the map (ld_imm64, two slots)
        insn(0, 0, 0, 0, 0),     // 37
        insn(0xb7, 3, 0, 0, XDP_PASS), // 38: r3 = XDP_PASS (no socket there)
        insn(0x85, 0, 0, 0, HELPER_REDIRECT_MAP), // 39: r0 = bpf_redirect_map(r1, r2, r3)
        insn(0x95, 0, 0, 0, 0),  // 40: return r0
    ]
}

/// `union bpf_attr`, as much of it as these commands use, zeroed beyond.
#[repr(C, align(8))]
struct Attr([u32; 32]);

fn bpf(cmd: libc::c_long, attr: &mut Attr) -> io::Result<RawFd> {
    // SAFETY: `attr` is a live, zero-padded bpf_attr of the size passed; the pointers inside
    // it (set by the callers) point at live buffers for the duration of the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut Attr,
            std::mem::size_of::<Attr>(),
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r as RawFd)
}

fn owned(fd: RawFd) -> OwnedFd {
    // SAFETY: `fd` was just returned by bpf(2) and is owned by no one else.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

fn put_u64(attr: &mut Attr, at: usize, v: u64) {
    attr.0[at] = v as u32;
    attr.0[at + 1] = (v >> 32) as u32;
}

/// The program attached to one interface, and the map it redirects through.
#[derive(Debug)]
pub struct Redirect {
    map: OwnedFd,
    _prog: OwnedFd,
    _link: OwnedFd,
    /// Where it runs.
    pub mode: XdpMode,
}

impl Redirect {
    /// Load the program steering as `steer` says, with a map of `entries` sockets, and attach
    /// it to interface `ifindex` in the first of `modes` the interface takes (native XDP needs
    /// the driver's support; generic XDP works anywhere).
    pub fn attach(
        ifindex: u32,
        entries: u32,
        steer: Steer,
        modes: &[XdpMode],
        frags: bool,
    ) -> Result<Redirect, String> {
        let map = create_map(entries).map_err(|e| format!("creating the XSKMAP: {e}"))?;
        let prog = match steer {
            Steer::ByQueue => load(&program(map.as_raw_fd()), frags),
            Steer::ByHost(host, n) => load(&program_by_host(map.as_raw_fd(), host, n), frags),
        }?;
        let mut last = String::from("no XDP mode to attach in");
        for &mode in modes {
            let flags = match mode {
                XdpMode::Native => XDP_FLAGS_DRV_MODE,
                XdpMode::Skb => XDP_FLAGS_SKB_MODE,
            };
            let mut a = Attr([0; 32]);
            a.0[0] = prog.as_raw_fd() as u32;
            a.0[1] = ifindex;
            a.0[2] = ATTACH_XDP;
            a.0[3] = flags;
            match bpf(BPF_LINK_CREATE, &mut a) {
                Ok(fd) => {
                    return Ok(Redirect {
                        map,
                        _prog: prog,
                        _link: owned(fd),
                        mode,
                    })
                }
                Err(e) => last = format!("attaching in {mode} mode: {e}"),
            }
        }
        Err(last)
    }

    /// Put the AF_XDP socket `xsk` at entry `key` (the receive queue, or the worker).
    pub fn add_socket(&self, key: u32, xsk: RawFd) -> io::Result<()> {
        let value = xsk as u32;
        let mut a = Attr([0; 32]);
        a.0[0] = self.map.as_raw_fd() as u32;
        put_u64(&mut a, 2, &key as *const u32 as u64);
        put_u64(&mut a, 4, &value as *const u32 as u64);
        bpf(BPF_MAP_UPDATE_ELEM, &mut a).map(|_| ())
    }
}

fn create_map(queues: u32) -> io::Result<OwnedFd> {
    let mut a = Attr([0; 32]);
    a.0[0] = MAP_TYPE_XSKMAP;
    a.0[1] = 4; // key: the queue's index
    a.0[2] = 4; // value: the socket's descriptor
    a.0[3] = queues.max(1);
    bpf(BPF_MAP_CREATE, &mut a).map(owned)
}

/// Load an XDP program; `frags` declares that it handles frames in several buffers
/// (`BPF_F_XDP_HAS_FRAGS`): the program reads only the first buffer's headers, and without the
/// flag veth's native XDP refuses an MTU over about 3.5 KB and the kernel drops larger frames.
fn load(insns: &[Insn], frags: bool) -> Result<OwnedFd, String> {
    let license = c"Dual MIT/GPL";
    let mut log = vec![0u8; 16384];
    let mut a = Attr([0; 32]);
    a.0[0] = PROG_TYPE_XDP;
    a.0[1] = insns.len() as u32;
    put_u64(&mut a, 2, insns.as_ptr() as u64);
    put_u64(&mut a, 4, license.as_ptr() as u64);
    a.0[6] = 1; // log_level
    a.0[7] = log.len() as u32;
    put_u64(&mut a, 8, log.as_mut_ptr() as u64);
    // kern_version [10], prog_flags [11], prog_name [12..16], prog_ifindex [16]
    if frags {
        a.0[11] = BPF_F_XDP_HAS_FRAGS;
    }
    a.0[12..16].copy_from_slice(&name_words(b"debloat_xsk"));
    a.0[17] = ATTACH_XDP; // expected_attach_type
    bpf(BPF_PROG_LOAD, &mut a).map(owned).map_err(|e| {
        let text = String::from_utf8_lossy(&log);
        format!(
            "loading the XDP program: {e} (verifier: {})",
            text.trim_end_matches('\0').trim()
        )
    })
}

/// A program name (at most 15 bytes and a NUL) as the attribute's four words.
fn name_words(name: &[u8]) -> [u32; 4] {
    let mut b = [0u8; 16];
    b[..name.len().min(15)].copy_from_slice(&name[..name.len().min(15)]);
    std::array::from_fn(|i| {
        u32::from_ne_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The instructions are what the comments say: eight bytes each, registers packed low
    /// nibble dst, high nibble src, and the map's descriptor in the ld_imm64.
    #[test]
    fn the_program_is_six_eight_byte_instructions() {
        assert_eq!(std::mem::size_of::<Insn>(), 8);
        let p = program(7);
        assert_eq!((p[0].code, p[0].regs, p[0].off), (0x61, 0x12, 16));
        assert_eq!((p[1].code, p[1].regs, p[1].imm), (0x18, 0x11, 7));
        assert_eq!((p[4].code, p[4].imm), (0x85, 51));
        assert_eq!(p[5].code, 0x95);
    }

    /// Every jump of the host-steering program lands where its comment says, and the loads
    /// read the fanout program's words.
    #[test]
    fn the_host_program_jumps_where_it_says() {
        let p = program_by_host(7, HostIs::Source, 4);
        let to = |i: usize| (i as i16 + 1 + p[i].off) as usize;
        for (at, target) in [
            (5, 33),
            (7, 10),
            (8, 10),
            (9, 17),
            (13, 33),
            (15, 33),
            (16, 33),
        ] {
            assert_eq!(to(at), target, "instruction {at}");
        }
        for (at, target) in [(17, 24), (18, 33), (21, 33), (23, 28), (26, 33)] {
            assert_eq!(to(at), target, "instruction {at}");
        }
        assert_eq!((p[22].off, p[27].off), (14 + 20, 14 + 12));
        assert_eq!((p[20].imm, p[25].imm), (38, 30));
        assert_eq!((p[31].code, p[31].imm), (0x94, 4));
        assert_eq!((p[33].code, p[33].off), (0x61, 16), "rx_queue_index");
        assert_eq!((p[34].code, p[34].imm), (0x27, 4), "× the workers");
        assert_eq!((p[35].code, p[35].regs), (0x0f, 0x52), "+ the worker");
        assert_eq!((p[36].code, p[36].imm), (0x18, 7));
        let d = program_by_host(7, HostIs::Destination, 2);
        assert_eq!((d[22].off, d[27].off), (14 + 36, 14 + 16));
        // The ethertypes as a 16-bit load reads them from the frame.
        assert_eq!(p[17].imm, i32::from(u16::from_ne_bytes([0x08, 0x00])));
        assert_eq!(p[18].imm, i32::from(u16::from_ne_bytes([0x86, 0xdd])));
    }

    /// The program's arithmetic, done here on an address word, is the fanout program's.
    #[test]
    fn the_host_hash_is_the_fanouts() {
        for (ip, n) in [
            ([198, 18, 1, 2], 2u32),
            ([198, 18, 1, 4], 2),
            ([10, 0, 0, 9], 8),
        ] {
            let word = u32::from_be_bytes(ip);
            let ours = ((word.wrapping_mul(GOLDEN)) >> 16) % n;
            assert_eq!(ours as usize, crate::sys::shard_of(word, n as usize));
        }
    }

    #[test]
    fn names_are_cut_to_fifteen_bytes_and_a_nul() {
        let w = name_words(b"a_name_longer_than_sixteen");
        let bytes: Vec<u8> = w.iter().flat_map(|x| x.to_ne_bytes()).collect();
        assert_eq!(&bytes[..15], b"a_name_longer_t");
        assert_eq!(bytes[15], 0);
    }
}
