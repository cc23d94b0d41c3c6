//! The only `unsafe` in debloat: AF_PACKET sockets, their memory-mapped receive rings, and
//! `ppoll`, through libc.
//!
//! A [`PacketSocket`] is bound to one interface, sees every frame that arrives on it
//! (promiscuous; frames this process sends are not looped back: `PACKET_IGNORE_OUTGOING`), and
//! sends whole Ethernet frames out of it, several per system call (`sendmmsg`). Frames arrive
//! in a memory-mapped ring (`PACKET_RX_RING`, TPACKET_V2): the kernel writes each frame into a
//! slot and flags it, the gateway reads the flag, copies the frame out and hands the slot
//! back, with no system call per frame. TPACKET_V2 rather than V3: V3 hands frames over a
//! block at a time, when the block fills or a timer of at least 1 ms fires, which would add
//! that millisecond to every frame of a quiet link; V2's per-frame slots wake the reader for
//! each frame. The kernel takes a VLAN tag out of the frame before AF_PACKET sees it; the ring
//! reports it beside the frame and [`PacketSocket::recv_frame`] puts it back.
//!
//! Sockets are non-blocking; [`wait`] sleeps until one is readable or a deadline with
//! nanosecond resolution passes.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, Ordering};

/// `PACKET_IGNORE_OUTGOING` (linux/if_packet.h, Linux 4.20).
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;

/// An AF_PACKET raw socket bound to one interface.
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
    /// The receive ring, when the socket receives.
    ring: Option<RxRing>,
    /// The interface's name.
    pub ifname: String,
}

/// What [`PacketSocket::recv_frame`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Received {
    /// A whole frame (its VLAN tag, if it had one, back in place).
    Frame(Vec<u8>),
    /// A frame longer than a ring slot, with its length: a GSO/GRO super-frame or a jumbo
    /// frame above the interface's MTU. Not forwarded.
    Oversized(usize),
}

/// A TPACKET_V2 receive ring: `frame_nr` slots of `frame_size` bytes, mapped from the kernel.
#[derive(Debug)]
struct RxRing {
    base: *mut u8,
    len: usize,
    frame_size: usize,
    frame_nr: usize,
    /// The next slot to read.
    next: usize,
    /// When the kernel received the frame last taken (its slot's `tp_sec`/`tp_nsec`,
    /// CLOCK_REALTIME), ns.
    stamp_ns: u64,
    /// Whether that frame's TCP/UDP checksum was left for a NIC to finish
    /// (`TP_STATUS_CSUMNOTREADY`).
    csum_not_ready: bool,
}

/// `TP_STATUS_CSUMNOTREADY` (linux/if_packet.h): the frame's transport checksum is partial.
const TP_STATUS_CSUMNOTREADY: u32 = 1 << 3;

// SAFETY: the mapping belongs to this ring alone (it is unmapped on drop), and the kernel's
// side of it is synchronised through each slot's status word.
unsafe impl Send for RxRing {}

impl Drop for RxRing {
    fn drop(&mut self) {
        // SAFETY: `base` and `len` are exactly what mmap returned.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// Bytes of ring per socket.
const RING_BYTES: usize = 16 << 20;
/// Each block of the ring: a power of two, a multiple of every slot size used.
const RING_BLOCK: usize = 1 << 17;

fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn setsockopt<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: `v` points to a live T of the size passed.
    check(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (v as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

impl PacketSocket {
    /// Open a socket on `ifname` that receives every frame (promiscuous, into a ring) and
    /// sends (needs CAP_NET_RAW).
    pub fn open(ifname: &str) -> io::Result<PacketSocket> {
        Self::open_as(ifname, true)
    }

    /// Open a socket on `ifname` that only sends.
    pub fn open_sender(ifname: &str) -> io::Result<PacketSocket> {
        Self::open_as(ifname, false)
    }

    fn open_as(ifname: &str, receive: bool) -> io::Result<PacketSocket> {
        let name = CString::new(ifname)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name has a NUL"))?;
        // SAFETY: `name` is a valid C string.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if ifindex == 0 {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no interface `{ifname}` here (see `ip link`)"),
            ));
        }
        // Protocol 0 receives nothing: a sender's socket queues no copies of the traffic.
        let proto = if receive {
            (libc::ETH_P_ALL as u16).to_be()
        } else {
            0
        };
        // SAFETY: plain socket(2); the result is checked before use.
        let raw = check(unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                libc::c_int::from(proto),
            )
        })?;
        // SAFETY: `raw` is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let ring = if receive {
            Some(RxRing::new(fd.as_raw_fd(), ifname)?)
        } else {
            None
        };
        // SAFETY: sockaddr_ll is plain old data; zeroed is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto;
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: `sll` is a valid sockaddr_ll of the size passed.
        check(unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        })?;
        if receive {
            // SAFETY: packet_mreq is plain old data.
            let mut mreq: libc::packet_mreq = unsafe { std::mem::zeroed() };
            mreq.mr_ifindex = ifindex as i32;
            mreq.mr_type = libc::PACKET_MR_PROMISC as u16;
            setsockopt(
                fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_ADD_MEMBERSHIP,
                &mreq,
            )?;
            setsockopt(
                fd.as_raw_fd(),
                libc::SOL_PACKET,
                PACKET_IGNORE_OUTGOING,
                &1i32,
            )?;
        }
        // Room for bursts of sends (FORCE needs CAP_NET_ADMIN; fall back).
        let size = 8i32 << 20;
        if setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUFFORCE,
            &size,
        )
        .is_err()
        {
            setsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_SNDBUF, &size)?;
        }
        Ok(PacketSocket {
            fd,
            ring,
            ifname: ifname.into(),
        })
    }

    /// Take the next frame out of the receive ring: Ok(None) when none is waiting.
    pub fn recv_frame(&mut self) -> io::Result<Option<Received>> {
        let Some(r) = self.ring.as_mut() else {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "this socket only sends",
            ));
        };
        Ok(r.take())
    }

    /// When the kernel received the frame `recv_frame` last returned: ns since the Unix epoch
    /// (CLOCK_REALTIME, as the ring's slots carry it); 0 before any.
    pub fn last_stamp_ns(&self) -> u64 {
        self.ring.as_ref().map_or(0, |r| r.stamp_ns)
    }

    /// Whether the frame `recv_frame` last returned has a TCP/UDP checksum the sender's kernel
    /// left for a NIC to finish (checksum offload; see [`crate::csum`]).
    pub fn last_csum_not_ready(&self) -> bool {
        self.ring.as_ref().is_some_and(|r| r.csum_not_ready)
    }

    /// Whether a frame is waiting in the receive ring, read from the ring's memory without a
    /// system call (false for a socket that only sends).
    pub fn readable(&self) -> bool {
        self.ring.as_ref().is_some_and(RxRing::ready)
    }

    /// Send one whole frame.
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        // SAFETY: `frame` is valid for `frame.len()` bytes.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl RxRing {
    /// Set up a TPACKET_V2 ring on socket `fd` (before it is bound) and map it, with slots
    /// big enough for the interface's MTU plus an Ethernet header and a VLAN tag.
    fn new(fd: RawFd, ifname: &str) -> io::Result<RxRing> {
        let mtu: usize = std::fs::read_to_string(format!("/sys/class/net/{ifname}/mtu"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(1500);
        let frame_size = (libc::TPACKET2_HDRLEN + 16 + 18 + mtu)
            .next_power_of_two()
            .clamp(2048, RING_BLOCK);
        let block_nr = RING_BYTES / RING_BLOCK;
        let frame_nr = block_nr * (RING_BLOCK / frame_size);
        let version = libc::tpacket_versions::TPACKET_V2 as libc::c_int;
        setsockopt(fd, libc::SOL_PACKET, libc::PACKET_VERSION, &version)?;
        let req = libc::tpacket_req {
            tp_block_size: RING_BLOCK as libc::c_uint,
            tp_block_nr: block_nr as libc::c_uint,
            tp_frame_size: frame_size as libc::c_uint,
            tp_frame_nr: frame_nr as libc::c_uint,
        };
        setsockopt(fd, libc::SOL_PACKET, libc::PACKET_RX_RING, &req)?;
        let len = block_nr * RING_BLOCK;
        // SAFETY: mapping the ring the kernel just allocated for `fd`, of exactly its size.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(RxRing {
            base: base.cast(),
            len,
            frame_size,
            frame_nr,
            next: 0,
            stamp_ns: 0,
            csum_not_ready: false,
        })
    }

    /// Whether the kernel has handed the next slot over (a frame is waiting), read in memory.
    fn ready(&self) -> bool {
        // SAFETY: as in `take`: slot `next` lies inside the mapping, its status word is read
        // volatile because the kernel writes it.
        let status = unsafe {
            let hdr = self
                .base
                .add(self.next * self.frame_size)
                .cast::<libc::tpacket2_hdr>();
            std::ptr::addr_of!((*hdr).tp_status).read_volatile()
        };
        status & libc::TP_STATUS_USER != 0
    }

    /// The next frame, if the kernel has handed its slot over; the slot goes back at once.
    fn take(&mut self) -> Option<Received> {
        // SAFETY: slot `next` lies inside the mapping (next < frame_nr, and frame_nr slots of
        // frame_size bytes fill the mapping's blocks end to end).
        let slot = unsafe { self.base.add(self.next * self.frame_size) };
        let hdr = slot.cast::<libc::tpacket2_hdr>();
        // SAFETY: `hdr` points to the slot's header, which the kernel also writes: read the
        // status word volatile, then fence before reading what it guards.
        let status = unsafe { std::ptr::addr_of!((*hdr).tp_status).read_volatile() };
        if status & libc::TP_STATUS_USER == 0 {
            return None;
        }
        fence(Ordering::Acquire);
        // SAFETY: the slot is ours until its status is set back to TP_STATUS_KERNEL.
        let h = unsafe { hdr.read() };
        self.stamp_ns = u64::from(h.tp_sec) * 1_000_000_000 + u64::from(h.tp_nsec);
        self.csum_not_ready = status & TP_STATUS_CSUMNOTREADY != 0;
        let (len, snap, mac) = (
            h.tp_len as usize,
            h.tp_snaplen as usize,
            usize::from(h.tp_mac),
        );
        let got = if snap < len || mac + snap > self.frame_size || snap < 12 {
            Received::Oversized(len)
        } else {
            // SAFETY: [mac, mac + snap) lies inside the slot (checked above).
            let data = unsafe { std::slice::from_raw_parts(slot.add(mac), snap) };
            let mut f = Vec::with_capacity(snap + 4);
            if status & libc::TP_STATUS_VLAN_VALID != 0 {
                let tpid = if status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
                    h.tp_vlan_tpid
                } else {
                    0x8100
                };
                f.extend_from_slice(&data[..12]);
                f.extend_from_slice(&tpid.to_be_bytes());
                f.extend_from_slice(&h.tp_vlan_tci.to_be_bytes());
                f.extend_from_slice(&data[12..]);
            } else {
                f.extend_from_slice(data);
            }
            Received::Frame(f)
        };
        fence(Ordering::Release);
        // SAFETY: as above; handing the slot back to the kernel.
        unsafe { std::ptr::addr_of_mut!((*hdr).tp_status).write_volatile(libc::TP_STATUS_KERNEL) };
        self.next = (self.next + 1) % self.frame_nr;
        Some(got)
    }
}

impl PacketSocket {
    /// Send several whole frames with one system call (`sendmmsg`). Returns how many the
    /// kernel took: fewer than `frames.len()` when it refused one (its error is in `Err` only
    /// when it refused the first).
    pub fn send_batch(&self, frames: &[&[u8]]) -> io::Result<usize> {
        if frames.is_empty() {
            return Ok(0);
        }
        let mut iov: Vec<libc::iovec> = frames
            .iter()
            .map(|f| libc::iovec {
                iov_base: f.as_ptr() as *mut libc::c_void,
                iov_len: f.len(),
            })
            .collect();
        let mut msgs: Vec<libc::mmsghdr> = iov
            .iter_mut()
            .map(|v| {
                // SAFETY: msghdr is plain old data; zeroed is a valid value.
                let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
                h.msg_iov = v;
                h.msg_iovlen = 1;
                libc::mmsghdr {
                    msg_hdr: h,
                    msg_len: 0,
                }
            })
            .collect();
        // SAFETY: `msgs` holds `msgs.len()` headers, each pointing to one live iovec of a
        // live frame; the kernel only reads the frames.
        let n = unsafe {
            libc::sendmmsg(
                self.fd.as_raw_fd(),
                msgs.as_mut_ptr(),
                msgs.len() as libc::c_uint,
                0,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }
}

/// Run the calling thread on one CPU only (`sched_setaffinity`).
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain old data; CPU_SET writes inside it (cpu checked below).
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if cpu >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("no CPU {cpu} here"),
        ));
    }
    // SAFETY: `cpu` is within the set's bits (checked above).
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size passed; 0 is the calling thread.
    check(unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) })
        .map(|_| ())
        .map_err(|e| io::Error::new(e.kind(), format!("pinning to CPU {cpu}: {e}")))
}

/// Run the calling thread under SCHED_FIFO at `priority` (1–99), so that a frame's wake-up
/// is not queued behind ordinary tasks on the same CPU. The kernel's RT throttling
/// (`kernel.sched_rt_runtime_us`, 95 % by default) still leaves the CPU to others now and then.
pub fn realtime(priority: u8) -> io::Result<()> {
    if !(1..=99).contains(&priority) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("realtime priority {priority}: expected 1–99"),
        ));
    }
    let param = libc::sched_param {
        sched_priority: i32::from(priority),
    };
    // SAFETY: `param` is a valid sched_param; 0 is the calling thread.
    check(unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) })
        .map(|_| ())
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("SCHED_FIFO priority {priority}: {e} (needs root or CAP_SYS_NICE)"),
            )
        })
}

/// Run the calling thread under SCHED_IDLE: it gets the CPU only when nothing else wants it.
pub fn idle_priority() -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid sched_param; 0 is the calling thread.
    check(unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) }).map(|_| ())
}

impl AsRawFd for PacketSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Wait until one of `fds` is readable or `timeout_ns` passes (None: no deadline). Returns
/// which are readable.
pub fn wait<const N: usize>(fds: [RawFd; N], timeout_ns: Option<u64>) -> io::Result<[bool; N]> {
    let mut p = fds.map(|fd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    });
    let ts = timeout_ns.map(|ns| libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    });
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `p` holds N pollfds; `tsp` is null or points to a live timespec.
    let r = unsafe { libc::ppoll(p.as_mut_ptr(), N as libc::nfds_t, tsp, std::ptr::null()) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok([false; N]);
        }
        return Err(e);
    }
    Ok(p.map(|x| x.revents & (libc::POLLIN | libc::POLLERR) != 0))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn realtime_refuses_priorities_outside_1_to_99() {
        for p in [0, 100, 255] {
            let e = realtime(p).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
            assert!(e.to_string().contains("expected 1–99"), "{e}");
        }
    }

    /// On a thread of its own, so the test runner's threads keep their policy.
    #[test]
    fn realtime_puts_the_calling_thread_under_sched_fifo() {
        let got = std::thread::spawn(|| {
            let r = realtime(10);
            // SAFETY: plain syscall on the calling thread.
            let policy = unsafe { libc::sched_getscheduler(0) };
            (r, policy)
        })
        .join()
        .unwrap();
        match got {
            (Ok(()), policy) => assert_eq!(policy, libc::SCHED_FIFO),
            (Err(e), policy) if e.kind() == io::ErrorKind::PermissionDenied => {
                assert_eq!(policy, libc::SCHED_OTHER, "policy changed though refused");
                println!(
                    "SKIP: not allowed to use SCHED_FIFO here (needs root or CAP_SYS_NICE): {e}"
                );
            }
            (Err(e), _) => panic!("realtime(10): {e}"),
        }
    }
}
