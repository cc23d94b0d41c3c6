//! The memory-mapped TPACKET_V2 receive ring of a [`super::PacketSocket`]: slots the kernel
//! fills and flags, read in place and handed back, with the frame's VLAN tag, receive stamp,
//! checksum state and `virtio_net_hdr` taken from the slot.
#![allow(unsafe_code)]

use super::setsockopt;
use crate::gso::{VnetHdr, VNET_HDR_LEN};
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{fence, Ordering};

/// What a ring slot held.
pub(super) enum Slot {
    Frame(Vec<u8>, Option<VnetHdr>),
    /// Cut short in the slot; the whole frame waits on the socket.
    Copied(usize),
    Oversized(usize),
}

/// A TPACKET_V2 receive ring: `frame_nr` slots of `frame_size` bytes, mapped from the kernel.
#[derive(Debug)]
pub(super) struct RxRing {
    base: *mut u8,
    len: usize,
    frame_size: usize,
    frame_nr: usize,
    /// The next slot to read.
    next: usize,
    /// When the kernel received the frame last taken (its slot's `tp_sec`/`tp_nsec`,
    /// CLOCK_REALTIME), ns.
    pub(super) stamp_ns: u64,
    /// Whether that frame's TCP/UDP checksum was left for a NIC to finish
    /// (`TP_STATUS_CSUMNOTREADY`).
    pub(super) csum_not_ready: bool,
    /// Whether each slot has a `virtio_net_hdr` before its frame.
    vnet: bool,
}

/// `TP_STATUS_CSUMNOTREADY` (linux/if_packet.h): the frame's transport checksum is partial.
const TP_STATUS_CSUMNOTREADY: u32 = 1 << 3;
/// `TP_STATUS_COPY`: the frame did not fit its slot and was queued on the socket whole.
const TP_STATUS_COPY: u32 = 1 << 1;

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

impl RxRing {
    /// Set up a TPACKET_V2 ring on socket `fd` (before it is bound) and map it, with slots
    /// big enough for the interface's MTU plus an Ethernet header and a VLAN tag.
    pub(super) fn new(fd: RawFd, ifname: &str) -> io::Result<RxRing> {
        let mtu: usize = std::fs::read_to_string(format!("/sys/class/net/{ifname}/mtu"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(1500);
        let frame_size = (libc::TPACKET2_HDRLEN + 16 + VNET_HDR_LEN + 18 + mtu)
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
            vnet: true,
        })
    }

    /// Whether the kernel has handed the next slot over (a frame is waiting), read in memory.
    pub(super) fn ready(&self) -> bool {
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
    pub(super) fn take(&mut self) -> Option<Slot> {
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
        let got = if status & TP_STATUS_COPY != 0 {
            Slot::Copied(len)
        } else if snap < len || mac + snap > self.frame_size || snap < 12 || mac < VNET_HDR_LEN {
            Slot::Oversized(len)
        } else {
            // SAFETY: [mac - VNET_HDR_LEN, mac) lies inside the slot (mac is checked above).
            let vnet = self.vnet.then(|| {
                let b = unsafe {
                    std::slice::from_raw_parts(slot.add(mac - VNET_HDR_LEN), VNET_HDR_LEN)
                };
                VnetHdr::parse(b)
            });
            // SAFETY: [mac, mac + snap) lies inside the slot (checked above).
            let data = unsafe { std::slice::from_raw_parts(slot.add(mac), snap) };
            let tagged = status & libc::TP_STATUS_VLAN_VALID != 0;
            // Exactly the frame's length: the data path keeps it as a boxed slice.
            let mut f = Vec::with_capacity(snap + if tagged { 4 } else { 0 });
            if tagged {
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
            Slot::Frame(f, vnet.flatten())
        };
        fence(Ordering::Release);
        // SAFETY: as above; handing the slot back to the kernel.
        unsafe { std::ptr::addr_of_mut!((*hdr).tp_status).write_volatile(libc::TP_STATUS_KERNEL) };
        self.next = (self.next + 1) % self.frame_nr;
        Some(got)
    }
}
