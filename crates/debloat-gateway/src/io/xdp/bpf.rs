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
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// `bpf(2)` commands (linux/bpf.h).
const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
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
    /// Load the program with a map of `queues` entries and attach it to interface `ifindex`,
    /// natively if the driver allows, else as generic XDP (unless `native_only`).
    pub fn attach(ifindex: u32, queues: u32) -> Result<Redirect, String> {
        let map = create_map(queues).map_err(|e| format!("creating the XSKMAP: {e}"))?;
        let prog = load(map.as_raw_fd())?;
        let mut last = String::new();
        for (mode, flags) in [
            (XdpMode::Native, XDP_FLAGS_DRV_MODE),
            (XdpMode::Skb, XDP_FLAGS_SKB_MODE),
        ] {
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

    /// Send receive queue `queue`'s frames to the AF_XDP socket `xsk`.
    pub fn add_socket(&self, queue: u32, xsk: RawFd) -> io::Result<()> {
        let key = queue;
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

fn load(map_fd: RawFd) -> Result<OwnedFd, String> {
    let insns = program(map_fd);
    let license = c"Dual MIT/GPL";
    let mut log = vec![0u8; 4096];
    let mut a = Attr([0; 32]);
    a.0[0] = PROG_TYPE_XDP;
    a.0[1] = insns.len() as u32;
    put_u64(&mut a, 2, insns.as_ptr() as u64);
    put_u64(&mut a, 4, license.as_ptr() as u64);
    a.0[6] = 1; // log_level
    a.0[7] = log.len() as u32;
    put_u64(&mut a, 8, log.as_mut_ptr() as u64);
    // kern_version [10], prog_flags [11], prog_name [12..16], prog_ifindex [16]
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

    #[test]
    fn names_are_cut_to_fifteen_bytes_and_a_nul() {
        let w = name_words(b"a_name_longer_than_sixteen");
        let bytes: Vec<u8> = w.iter().flat_map(|x| x.to_ne_bytes()).collect();
        assert_eq!(&bytes[..15], b"a_name_longer_t");
        assert_eq!(bytes[15], 0);
    }
}
