//! An AF_XDP socket on one receive queue of an interface: the frames the kernel wrote (its RX
//! ring) and the frames the gateway sends (its TX ring). The UMEM behind it, with the fill
//! and completion rings, is shared ([`super::umem`]): by every worker's socket on the queue,
//! by the interface's other queues, and by the other interface of the path where both are on
//! AF_XDP ([`super::setup`]). Rings and UMEM are set up through xdpilone (pure Rust, no libbpf).
//!
//! N workers have one socket each on a queue: the XDP program picks the socket by the LAN host
//! ([`super::bpf::Steer::ByHost`]), and the kernel gives them one fill ring and one completion
//! ring between them. Those rings and the free frames are therefore behind a mutex
//! ([`super::umem::Pool`]), taken once per batch — when 64 received frames go back to the fill
//! ring, when a socket's cache of frames runs short, once per batch sent — never per frame.
//! Each socket's RX and TX rings are its worker's alone.
//!
//! A received frame is held where it landed ([`Buf::held`]) while the UMEM has frames to spare
//! for the fill ring in its place, and copied into the heap otherwise (copy on pressure,
//! [`super::umem`]). A held frame sent on a socket of the same UMEM goes out as it is: its
//! descriptor on the TX ring, no copy. Any other frame is copied into a free UMEM frame, as
//! the TPACKET back end's `sendmmsg` copies into the kernel's skbs.
#![allow(unsafe_code)]

use super::bpf::XdpMode;
use super::limits::{FRAME, MAX_SEGS};
use super::umem::Umem;
use crate::io::buf::Buf;
use std::io;
use std::sync::Arc;
use xdpilone::xdp::XdpDesc;
use xdpilone::{RingRx, RingTx, User};

/// A descriptor's `options` bit: the frame goes on in the next descriptor.
const XDP_PKT_CONTD: u32 = 1;
/// Descriptors per ring; the UMEM has three times as many frames per queue ([`super::setup`]).
pub(super) const RING: u32 = 2048;

/// How the socket was bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct XdpInfo {
    /// Where the XDP program runs.
    pub mode: XdpMode,
    /// Whether the driver shares the UMEM with the device (zero-copy) or copies into it.
    pub zero_copy: bool,
    /// Whether the device's receive work runs in the gateway's thread (preferred busy
    /// polling, [`super::busy`]).
    pub busy_poll: bool,
    /// The interface's receive queues, each with a socket of every worker's.
    pub queues: u32,
    /// Whether frames may span several UMEM frames (`XDP_USE_SG`, Linux ≥ 6.6; needed for an
    /// MTU over 3,822 bytes).
    pub multi_buffer: bool,
    /// Whether the path's two interfaces share one UMEM, so that a forwarded frame is sent
    /// from where it was received, without a copy.
    pub shared_umem: bool,
}

/// An AF_XDP socket bound to one receive queue of an interface.
pub struct QueueSocket {
    // Field order is drop order: this socket's rings before what it shares.
    rx: RingRx,
    tx: RingTx,
    _user: User,
    umem: Arc<Umem>,
    /// Its queue's fill and completion rings: `umem.pool().devices[dev]`.
    dev: usize,
    /// Frames free to send copies in (UMEM offsets), taken from the pool a batch at a time.
    free_tx: Vec<u64>,
    /// Frames to put on the fill ring: received ones copied out, and spares standing in for
    /// held ones.
    to_fill: Vec<u64>,
    /// Frames taken from the pool (and counted there as held) to stand in for held frames.
    spare: Vec<u64>,
    /// Held frames put on the TX ring since the pool last counted them.
    sent_held: usize,
    /// The first parts of a multi-buffer frame whose last descriptor has not been read yet.
    partial: Vec<u8>,
    /// The descriptors of the frames being sent.
    descs: Vec<XdpDesc>,
    /// How it was bound.
    pub info: XdpInfo,
    /// The interface, when busy polling was asked for.
    busy_if: Option<String>,
    /// Calls of [`QueueSocket::poll_napi`] while the queue's NAPI was unknown.
    napi_checks: u32,
    /// The interface's NAPI knobs while busy polling (restored on drop, after the rings).
    napi: Option<super::busy::NapiDefer>,
}

// SAFETY: the socket's rings belong to it alone (xdpilone's rings are Send); what it shares
// is Sync ([`Umem`]).
unsafe impl Send for QueueSocket {}

impl std::fmt::Debug for QueueSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueSocket")
            .field("info", &self.info)
            .finish()
    }
}

/// `XDP_OPTIONS` (linux/if_xdp.h) and its `XDP_OPTIONS_ZEROCOPY` flag.
const XDP_OPTIONS: libc::c_int = 8;
const XDP_OPTIONS_ZEROCOPY: u32 = 1;

fn zero_copy(fd: i32) -> bool {
    let mut flags: u32 = 0;
    let mut len = 4 as libc::socklen_t;
    // SAFETY: `flags` and `len` are live and of the size passed.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_XDP,
            XDP_OPTIONS,
            (&mut flags as *mut u32).cast(),
            &mut len,
        )
    };
    r == 0 && flags & XDP_OPTIONS_ZEROCOPY != 0
}

impl QueueSocket {
    /// A bound socket's rings mapped, as one worker's socket; `dev` is its queue's index
    /// among the UMEM's fill and completion rings.
    pub(super) fn on(
        user: User,
        umem: Arc<Umem>,
        dev: usize,
        mode: XdpMode,
        multi_buffer: bool,
    ) -> Result<QueueSocket, String> {
        let rx = user
            .map_rx()
            .map_err(|e| format!("mapping the RX ring: {e}"))?;
        let tx = user
            .map_tx()
            .map_err(|e| format!("mapping the TX ring: {e}"))?;
        let info = XdpInfo {
            mode,
            zero_copy: zero_copy(user.as_raw_fd()),
            busy_poll: false,
            queues: 1,
            multi_buffer,
            shared_umem: false,
        };
        Ok(QueueSocket {
            rx,
            tx,
            _user: user,
            umem,
            dev,
            free_tx: Vec::with_capacity(2 * BATCH),
            to_fill: Vec::with_capacity(2 * BATCH),
            spare: Vec::with_capacity(BATCH),
            sent_held: 0,
            partial: Vec::new(),
            descs: Vec::with_capacity(2 * BATCH),
            info,
            busy_if: None,
            napi_checks: 0,
            napi: None,
        })
    }

    /// Whether `other` sends from the same UMEM (a frame held by one goes out on the other
    /// without a copy).
    pub fn shares_umem(&self, other: &QueueSocket) -> bool {
        Arc::ptr_eq(&self.umem, &other.umem)
    }

    /// Ask for preferred busy polling ([`super::busy`]); Err says why the kernel refused, and
    /// the socket goes on as it was. Polling starts once the kernel names the queue's NAPI.
    pub fn prefer_busy_poll(&mut self, ifname: &str) -> io::Result<()> {
        super::busy::prefer_busy_poll(self.fd())?;
        self.busy_if = Some(ifname.to_string());
        Ok(())
    }

    /// With busy polling asked for and the queue's NAPI known, run the device's receive work
    /// for this socket now; false (and nothing done) otherwise. Until the NAPI is known its id
    /// is looked up every 4096th call: Linux ≥ 6.13 gives it at bind time and to zero-copy
    /// sockets only, older kernels from the first frame received.
    pub fn poll_napi(&mut self) -> bool {
        let Some(ifname) = &self.busy_if else {
            return false;
        };
        if !self.info.busy_poll {
            self.napi_checks = self.napi_checks.wrapping_add(1);
            if self.napi_checks % 4096 != 1 || super::busy::napi_id(self.fd()) == 0 {
                return false;
            }
            match super::busy::NapiDefer::apply(ifname) {
                Ok(d) => self.napi = Some(d),
                Err(e) => eprintln!(
                    "gateway: {ifname}: busy-polling without deferring the kernel's own polls ({e})"
                ),
            }
            self.info.busy_poll = true;
        }
        super::busy::poll_napi(self.fd());
        true
    }

    /// The socket's descriptor, to wait on (readable when the RX ring has frames).
    pub fn fd(&self) -> i32 {
        self.rx.as_raw_fd()
    }

    /// Whether a frame waits in the RX ring (read from the ring's memory, no system call).
    pub fn readable(&self) -> bool {
        self.rx.available() > 0
    }

    /// Take the next frame: None when none is waiting. A descriptor pointing outside the UMEM
    /// (a kernel bug) is returned as an empty frame, which the caller counts and drops. A
    /// multi-buffer frame is read descriptor by descriptor into one buffer; should its last
    /// descriptor not be on the ring yet, the parts wait in `partial` for the next call. A
    /// frame in one descriptor is held where it is if a spare frame can take its place on the
    /// fill ring, else copied.
    pub fn recv_frame(&mut self) -> Option<Buf> {
        loop {
            let desc = {
                let mut r = self.rx.receive(1);
                let d = r.read();
                r.release();
                d
            };
            let Some(XdpDesc { addr, len, options }) = desc else {
                self.refill();
                return None;
            };
            let more = options & XDP_PKT_CONTD != 0;
            let whole = !more && self.partial.is_empty();
            if whole && self.umem.area.bytes(addr, len).is_some() {
                if let Some(stand_in) = self.take_spare() {
                    self.to_fill.push(stand_in);
                    if self.to_fill.len() >= BATCH {
                        self.refill();
                    }
                    if let Some(held) = Buf::held(Arc::clone(&self.umem), addr, len) {
                        return Some(held);
                    }
                }
            }
            let frame = match (self.umem.area.bytes(addr, len), more) {
                (None, _) => {
                    self.partial.clear();
                    Some(Buf::default())
                }
                (Some(b), true) => {
                    self.partial.extend_from_slice(b);
                    None
                }
                (Some(b), false) if self.partial.is_empty() => Some(Buf::from(b.to_vec())),
                (Some(b), false) => {
                    self.partial.extend_from_slice(b);
                    Some(Buf::from(std::mem::take(&mut self.partial)))
                }
            };
            self.to_fill.push(addr);
            if self.to_fill.len() >= BATCH {
                self.refill();
            }
            if frame.is_some() {
                return frame;
            }
        }
    }

    /// A frame to stand in on the fill ring for one about to be held: from this socket's
    /// cache, refilled from the pool a batch at a time while fewer than the UMEM's
    /// `held_max` are held. None: copy the frame instead.
    fn take_spare(&mut self) -> Option<u64> {
        if self.spare.is_empty() {
            let mut p = self.umem.pool();
            let room = self.umem.held_max.saturating_sub(p.held);
            let take = room.min(BATCH).min(p.free.len());
            let from = p.free.len() - take;
            self.spare.extend(p.free.drain(from..));
            p.held += take;
        }
        self.spare.pop()
    }

    /// Hand the frames read since the last time back to the fill ring (and wake the driver if
    /// it sleeps for want of them).
    fn refill(&mut self) {
        if self.to_fill.is_empty() {
            return;
        }
        let mut pool = self.umem.pool();
        let device = &mut pool.devices[self.dev];
        let mut f = device.fill(self.to_fill.len() as u32);
        let n = f.insert(self.to_fill.iter().copied()) as usize;
        f.commit();
        drop(f);
        self.to_fill.drain(..n);
        if device.needs_wakeup() {
            device.wake();
        }
    }

    /// Take back the frames the kernel finished sending (any socket's on this queue: the
    /// completion ring is the queue's), count `sent_held` held frames as sent, and take up to
    /// `want` free frames into this socket's cache.
    fn restock(&mut self, want: usize, sent_held: usize) {
        let mut pool = self.umem.pool();
        let p = &mut *pool;
        let mut c = p.devices[self.dev].complete(RING);
        while let Some(addr) = c.read() {
            p.free.push(addr & !u64::from(FRAME - 1));
        }
        c.release();
        p.held = p.held.saturating_sub(sent_held);
        let take = want.min(p.free.len());
        let from = p.free.len() - take;
        self.free_tx.extend(p.free.drain(from..));
    }

    /// Put frames on the TX ring and kick the kernel: returns how many it took (fewer when the
    /// ring or the free frames ran out, or a frame was longer than [`MAX_SEGS`] UMEM frames,
    /// or than one without multi-buffer frames). A frame held in this socket's UMEM goes on
    /// the ring as it is and is taken out of `frames` (left empty there); any other is copied.
    pub fn send_batch(&mut self, frames: &mut [Buf]) -> io::Result<usize> {
        let segs = |f: &Buf| match f.is_held_in(&self.umem) {
            true => 0,
            false => f.len().div_ceil(FRAME as usize).max(1),
        };
        let need: usize = frames.iter().map(segs).sum();
        let short = need.saturating_sub(self.free_tx.len());
        if short > 0 || self.sent_held > 0 {
            // Held frames sent last time are counted as sent now, one lock for both.
            let sent_held = std::mem::take(&mut self.sent_held);
            self.restock(if short > 0 { short.max(BATCH) } else { 0 }, sent_held);
        }
        let most = if self.info.multi_buffer { MAX_SEGS } else { 1 };
        // The ring's room as the kernel's consumer index says now.
        let mut room = (RING - self.tx.pending().min(RING)) as usize;
        let mut sent = 0;
        self.descs.clear();
        for f in frames.iter_mut() {
            if f.is_held_in(&self.umem) {
                if room == 0 {
                    break;
                }
                if let Some((_, addr, len)) = f.take_held() {
                    room -= 1;
                    self.descs.push(XdpDesc {
                        addr,
                        len,
                        options: 0,
                    });
                    sent += 1;
                    self.sent_held += 1;
                    continue;
                }
            }
            let n = f.len().div_ceil(FRAME as usize).max(1);
            if n > most || self.free_tx.len() < n || room < n {
                break;
            }
            room -= n;
            self.copy_in(f);
            sent += 1;
        }
        self.put_on_ring();
        if sent > 0 {
            // In copy mode the kernel sends only when asked (and needs_wakeup is always set).
            self.tx.wake();
        }
        if sent == 0 && !frames.is_empty() {
            return Err(io::Error::from_raw_os_error(libc::ENOBUFS));
        }
        Ok(sent)
    }

    /// Copy `f` into free UMEM frames (as many as it spans; the caller checked there are
    /// enough) and queue its descriptors.
    fn copy_in(&mut self, f: &[u8]) {
        let n = f.len().div_ceil(FRAME as usize).max(1);
        let base = self.umem.area.base.as_ptr();
        for (i, part) in f.chunks(FRAME as usize).enumerate() {
            let Some(addr) = self.free_tx.pop() else {
                break;
            };
            // SAFETY: `addr` is a free frame of this UMEM (on no ring, in no other socket's
            // cache), FRAME bytes long, and `part` fits it (chunks of FRAME).
            unsafe {
                std::ptr::copy_nonoverlapping(part.as_ptr(), base.add(addr as usize), part.len())
            };
            let options = if i + 1 < n { XDP_PKT_CONTD } else { 0 };
            let len = part.len() as u32;
            self.descs.push(XdpDesc { addr, len, options });
        }
    }

    /// Put `descs` on the TX ring. xdpilone reserves from its cached view of the kernel's
    /// consumer index and looks again only when that view shows no room at all, so a
    /// reservation can come back short while the ring has room; the next one then looks again.
    /// The room was counted from the kernel's own index, so every descriptor finds a slot (a
    /// frame's descriptors may be committed in two steps: the kernel waits for the last).
    fn put_on_ring(&mut self) {
        let mut put = 0;
        while put < self.descs.len() {
            let mut w = self.tx.transmit((self.descs.len() - put) as u32);
            let k = w.insert(self.descs[put..].iter().copied()) as usize;
            w.commit();
            if k == 0 {
                // Not reached (the room was counted); the frames' UMEM frames are not lost.
                self.free_tx
                    .extend(self.descs[put..].iter().map(|d| d.addr));
                break;
            }
            put += k;
        }
    }

    /// Where the XDP program runs.
    pub fn mode(&self) -> XdpMode {
        self.info.mode
    }
}

/// Frames handed back to the fill ring, or taken for sending, at a time.
const BATCH: usize = 64;
