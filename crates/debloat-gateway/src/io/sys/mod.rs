//! The `unsafe` of AF_PACKET sockets, their memory-mapped receive rings, and `ppoll`, through
//! libc (the AF_XDP back end has its own, in `io/xdp/`).
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
//! Receiving sockets ask for a `virtio_net_hdr` before every frame (`PACKET_VNET_HDR`): it says
//! whether the frame is a super-frame (a host's TSO/GSO segment, up to 64 KB, that no device
//! cut up) and how to cut it ([`crate::gso`]). A super-frame is longer than a ring slot; with
//! `PACKET_COPY_THRESH` the kernel also queues such a frame whole on the socket, flags the slot
//! `TP_STATUS_COPY`, and [`PacketSocket::recv_frame`] reads the copy with `recv`. A socket with
//! the header must also put one before every frame it sends: an empty one.
//!
//! Sockets are non-blocking; [`wait`] sleeps until one is readable or a deadline with
//! nanosecond resolution passes.
#![allow(unsafe_code)]

use crate::gso::{VnetHdr, VNET_HDR_LEN};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

pub mod claim;
mod fanout;
mod ring;
pub use fanout::{offsets as fanout_offsets, shard_of, shard_of_ip, HostIs, GOLDEN};
use ring::{RxRing, Slot};

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
    /// The interface's index when the socket was bound: a different index under the same name
    /// later means the interface was deleted and made again (see [`ifindex_of`]).
    pub ifindex: u32,
    /// Frames in and out carry a `virtio_net_hdr` (receiving sockets).
    vnet: bool,
}

/// What [`PacketSocket::recv_frame`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Received {
    /// A whole frame (its VLAN tag, if it had one, back in place).
    Frame(crate::io::buf::Buf),
    /// A super-frame (a host's segmentation offload) whole, with the header that says how to
    /// cut it ([`crate::gso::segment`]).
    Super(VnetHdr, Vec<u8>),
    /// A frame longer than a ring slot that could not be read whole, with its length. Not
    /// forwarded.
    Oversized(usize),
}

/// `VIRTIO_NET_HDR_F_NEEDS_CSUM` (linux/virtio_net.h): the checksum is partial.
const VIRTIO_NET_HDR_F_NEEDS_CSUM: u8 = 1;
/// `PACKET_VNET_HDR`, `PACKET_COPY_THRESH` (linux/if_packet.h).
const PACKET_VNET_HDR: libc::c_int = 15;
const PACKET_COPY_THRESH: libc::c_int = 7;
/// The longest super-frame read whole (a 64 KB GSO segment and headers; BIG TCP's larger
/// ones are counted as oversized).
const MAX_SUPER: usize = 65536 + 256;
/// An empty `virtio_net_hdr`, sent before every frame on a socket that has them.
const EMPTY_VNET: [u8; VNET_HDR_LEN] = [0; VNET_HDR_LEN];

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

/// A receiving socket's options before its ring (the kernel refuses the header once a ring
/// exists), then the ring.
fn receive_ring(fd: RawFd, ifname: &str) -> io::Result<RxRing> {
    setsockopt(fd, libc::SOL_PACKET, PACKET_VNET_HDR, &1i32)?;
    setsockopt(fd, libc::SOL_PACKET, PACKET_COPY_THRESH, &1i32)?;
    // Room for a few super-frames' copies.
    buffer(fd, libc::SO_RCVBUFFORCE, libc::SO_RCVBUF)?;
    RxRing::new(fd, ifname)
}

/// Every frame on the interface (promiscuous), none of those sent through it.
fn promiscuous(fd: RawFd, ifindex: u32) -> io::Result<()> {
    // SAFETY: packet_mreq is plain old data.
    let mut mreq: libc::packet_mreq = unsafe { std::mem::zeroed() };
    mreq.mr_ifindex = ifindex as i32;
    mreq.mr_type = libc::PACKET_MR_PROMISC as u16;
    setsockopt(fd, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mreq)?;
    setsockopt(fd, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, &1i32)
}

/// An 8 MiB socket buffer: `force` needs CAP_NET_ADMIN; without it, `plain` (capped by the
/// system's maximum).
fn buffer(fd: RawFd, force: libc::c_int, plain: libc::c_int) -> io::Result<()> {
    let size = 8i32 << 20;
    if setsockopt(fd, libc::SOL_SOCKET, force, &size).is_err() {
        setsockopt(fd, libc::SOL_SOCKET, plain, &size)?;
    }
    Ok(())
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
            Some(receive_ring(fd.as_raw_fd(), ifname)?)
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
            promiscuous(fd.as_raw_fd(), ifindex)?;
        }
        // Room for bursts of sends.
        buffer(fd.as_raw_fd(), libc::SO_SNDBUFFORCE, libc::SO_SNDBUF)?;
        Ok(PacketSocket {
            fd,
            ifindex,
            vnet: ring.is_some(),
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
        Ok(match r.take() {
            None => None,
            Some(Slot::Frame(f, Some(h))) if h.is_gso() => Some(Received::Super(h, f)),
            Some(Slot::Frame(f, _)) => Some(Received::Frame(f.into())),
            Some(Slot::Oversized(n)) => Some(Received::Oversized(n)),
            Some(Slot::Copied(n)) => Some(self.recv_copy(n)),
        })
    }

    /// The whole frame the kernel queued on the socket for a slot flagged `TP_STATUS_COPY`: a
    /// super-frame, or a plain frame longer than the slot (the MTU grew since the ring was made).
    fn recv_copy(&mut self, len: usize) -> Received {
        let mut buf = vec![0u8; VNET_HDR_LEN + MAX_SUPER];
        // SAFETY: `buf` is valid for writes of its length.
        let n = unsafe {
            libc::recv(
                self.fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_TRUNC,
            )
        };
        if n < 0 || n as usize > buf.len() || (n as usize) < VNET_HDR_LEN + 14 {
            return Received::Oversized(len);
        }
        let Some(h) = VnetHdr::parse(&buf) else {
            return Received::Oversized(len);
        };
        buf.truncate(n as usize);
        buf.drain(..VNET_HDR_LEN);
        if h.is_gso() {
            return Received::Super(h, buf);
        }
        if let Some(r) = self.ring.as_mut() {
            r.csum_not_ready = h.flags & VIRTIO_NET_HDR_F_NEEDS_CSUM != 0;
        }
        Received::Frame(buf.into())
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

    /// The error the kernel set on the socket (`SO_ERROR`, e.g. ENETDOWN when its interface
    /// went down or away), cleared by reading it. A socket with an error pending polls as
    /// ready (POLLERR) until then, so the loop takes it when the ring had nothing.
    pub fn take_error(&self) -> Option<io::Error> {
        let mut err: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `err` and `len` are live and of the sizes passed.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_ERROR,
                (&mut err as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        (r == 0 && err != 0).then(|| io::Error::from_raw_os_error(err))
    }

    /// Send one whole frame.
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        match self.send_batch(&[frame])? {
            1 => Ok(()),
            _ => Err(io::Error::other("the kernel took no frame")),
        }
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
        // Per frame: its empty virtio_net_hdr (on a socket that has them), then the frame.
        let per = if self.vnet { 2 } else { 1 };
        let mut iov: Vec<libc::iovec> = Vec::with_capacity(per * frames.len());
        for f in frames {
            if self.vnet {
                iov.push(libc::iovec {
                    iov_base: EMPTY_VNET.as_ptr() as *mut libc::c_void,
                    iov_len: EMPTY_VNET.len(),
                });
            }
            iov.push(libc::iovec {
                iov_base: f.as_ptr() as *mut libc::c_void,
                iov_len: f.len(),
            });
        }
        let mut msgs: Vec<libc::mmsghdr> = iov
            .chunks_exact_mut(per)
            .map(|v| {
                // SAFETY: msghdr is plain old data; zeroed is a valid value.
                let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
                h.msg_iov = v.as_mut_ptr();
                h.msg_iovlen = per;
                libc::mmsghdr {
                    msg_hdr: h,
                    msg_len: 0,
                }
            })
            .collect();
        // SAFETY: `msgs` holds `msgs.len()` headers, each pointing to `per` live iovecs (the
        // constant header, a live frame); the kernel only reads them.
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

/// A socket that turns readable whenever an interface appears, goes or changes (rtnetlink's
/// link group), so the forwarding loop notices an interface made again at once.
#[derive(Debug)]
pub struct LinkEvents {
    fd: OwnedFd,
}

impl LinkEvents {
    /// Join the link group (any process may).
    pub fn open() -> io::Result<LinkEvents> {
        // SAFETY: plain socket(2); the result is checked before use.
        let raw = check(unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                libc::NETLINK_ROUTE,
            )
        })?;
        // SAFETY: `raw` is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: sockaddr_nl is plain old data; zeroed is a valid value.
        let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        sa.nl_family = libc::AF_NETLINK as u16;
        sa.nl_groups = libc::RTMGRP_LINK as u32;
        // SAFETY: `sa` is a valid sockaddr_nl of the size passed.
        check(unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sa as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        })?;
        Ok(LinkEvents { fd })
    }

    /// Read and drop what is waiting (the loop only needs to know that something changed).
    pub fn drain(&self) {
        let mut buf = [0u8; 8192];
        loop {
            // SAFETY: `buf` is valid for writes of its length.
            let n = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            // Nothing left, or an overrun (ENOBUFS): either way, the caller looks again.
            if n <= 0 {
                return;
            }
        }
    }
}

impl AsRawFd for LinkEvents {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// The index of interface `name` now (None if there is none by that name).
pub fn ifindex_of(name: &str) -> Option<u32> {
    let c = CString::new(name).ok()?;
    // SAFETY: `c` is a valid C string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    (i != 0).then_some(i)
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

/// Move the calling thread (only it) into the network namespace `ns` is a file of
/// (`/run/netns/NAME`).
pub fn enter_netns(ns: &std::fs::File) -> io::Result<()> {
    // SAFETY: setns on an open descriptor; it changes the calling thread's namespace only.
    if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
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
