//! AF_XDP sockets on one receive queue of an interface, with the UMEM they share: the frames
//! the kernel writes (the fill ring hands it empty frames, each socket's RX ring hands them
//! back full) and the frames the gateway sends (each socket's TX ring, and the completion ring
//! that returns them). Rings and UMEM are set up through xdpilone (pure Rust, no libbpf); the
//! UMEM's memory is an anonymous mapping owned here. An interface with several receive queues
//! has one such set per queue ([`super::queues`]).
//!
//! One worker has one socket on the queue. N workers have one socket each on it, bound with
//! `XDP_SHARED_UMEM`: the XDP program picks the socket by the LAN host
//! ([`super::bpf::Steer::ByHost`]), and the kernel gives such sockets one fill ring and one
//! completion ring between them. Those two rings, and the free send frames, are therefore
//! behind a mutex ([`Pool`]), taken once per batch — when 64 received frames go back to the
//! fill ring, when a socket's own cache of send frames runs short — never per frame. Each
//! socket's RX and TX rings are its worker's alone.
//!
//! Half of the UMEM's frames feed the receive side (always on the fill ring or in a worker's
//! hands for the length of one copy), half are for sending (free, or on a TX ring until the
//! completion ring returns them). Frames are copied out of the UMEM into the data path's own
//! buffers and into it again on the way out, as the TPACKET back end copies them out of its
//! ring and `sendmmsg` into the kernel's skbs: the discipline holds frames for as long as its
//! queues are deep, longer than a receive ring can spare them. (So the two interfaces of a path
//! do not share one UMEM: a forwarded frame is copied anyway.)
#![allow(unsafe_code)]

use super::bpf::{Redirect, XdpMode};
use super::limits::{FRAME, MAX_SEGS};
use std::io;
use std::num::NonZeroU32;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, PoisonError};
use xdpilone::xdp::XdpDesc;
use xdpilone::{DeviceQueue, IfInfo, RingRx, RingTx, Socket, SocketConfig, Umem, UmemConfig, User};

/// `XDP_USE_SG` (linux/if_xdp.h, Linux ≥ 6.6): the socket takes and gives frames that span
/// several UMEM frames, each descriptor but the last marked `XDP_PKT_CONTD`.
const XDP_USE_SG: u16 = 1 << 4;
/// A descriptor's `options` bit: the frame goes on in the next descriptor.
const XDP_PKT_CONTD: u32 = 1;
/// Frames per ring, and per half of the UMEM.
const RING: u32 = 2048;

/// The UMEM's memory: an anonymous, page-aligned mapping.
struct Area {
    base: NonNull<u8>,
    len: usize,
}

impl Area {
    fn new(len: usize) -> io::Result<Area> {
        // SAFETY: a fresh private anonymous mapping; no address is given.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(p.cast()).ok_or_else(|| io::Error::other("mmap gave null"))?;
        Ok(Area { base, len })
    }
}

impl Drop for Area {
    fn drop(&mut self) {
        // SAFETY: `base` and `len` are what mmap returned; the sockets using it are dropped
        // first (field order of `QueueSocket`).
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

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
}

/// What the sockets on one queue share: the fill and completion rings and the free send
/// frames (behind [`Shared::pool`]'s mutex), the program and the memory.
struct Shared {
    // Field order is drop order: the rings before the program, the memory last.
    pool: Mutex<Pool>,
    /// The interface's program (one for all its queues).
    redirect: Arc<Redirect>,
    area: Area,
}

/// The rings the kernel keeps one of per queue, and the send frames no socket holds.
struct Pool {
    device: DeviceQueue,
    free_tx: Vec<u64>,
}

// SAFETY: the mapping is only read or written at a frame its reader owns at the time — one on
// its RX ring until it is back on the fill ring, one taken from the free list until the
// completion ring returns it — and the rings behind the mutex are touched under it.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

/// An AF_XDP socket bound to one receive queue of an interface.
pub struct QueueSocket {
    // Field order is drop order: this socket's rings before what it shares.
    rx: RingRx,
    tx: RingTx,
    _user: User,
    shared: Arc<Shared>,
    /// Frames free to send (UMEM offsets), taken from the pool a batch at a time.
    free_tx: Vec<u64>,
    /// Receive frames handed back since the fill ring was last topped up.
    to_fill: Vec<u64>,
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
// is Sync (above).
unsafe impl Send for QueueSocket {}

impl std::fmt::Debug for QueueSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueSocket")
            .field("info", &self.info)
            .finish()
    }
}

fn errno(what: &str, e: xdpilone::Errno) -> String {
    format!("{what}: {e}")
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
    /// `n` sockets on queue `queue` of `ifname` (`iface`, set to that queue) sharing one UMEM,
    /// one per worker, entered in `redirect`'s map at `queue × n + i` for worker `i`.
    pub(super) fn open_queue(
        iface: &IfInfo,
        ifname: &str,
        n: usize,
        redirect: &Arc<Redirect>,
        multi_buffer: bool,
    ) -> Result<Vec<QueueSocket>, String> {
        let queue = iface.queue_id();
        let area = Area::new((2 * RING * FRAME) as usize).map_err(|e| format!("UMEM: {e}"))?;
        let cfg = UmemConfig {
            fill_size: RING,
            complete_size: RING,
            frame_size: FRAME,
            headroom: 0,
            flags: 0,
        };
        let mem = NonNull::slice_from_raw_parts(area.base, area.len);
        // SAFETY: the area is page aligned, of the length given, and outlives the UMEM and
        // every socket on it (it is the last field of what they share to drop).
        let umem = unsafe { Umem::new(cfg, mem) }.map_err(|e| errno("registering the UMEM", e))?;
        // The first socket is the UMEM's own and keeps the queue's fill and completion rings;
        // the others are bound to it with XDP_SHARED_UMEM.
        let first = Socket::with_shared(iface, &umem).map_err(|e| errno("AF_XDP socket", e))?;
        let mut device = umem
            .fq_cq(&first)
            .map_err(|e| errno("fill and completion rings", e))?;
        let mut users = vec![bind(
            &umem,
            &first,
            ifname,
            queue,
            SocketConfig::XDP_BIND_NEED_WAKEUP | if multi_buffer { XDP_USE_SG } else { 0 },
        )?];
        for _ in 1..n {
            let sock = Socket::new(iface).map_err(|e| errno("AF_XDP socket", e))?;
            // A socket sharing the UMEM takes its flags from the first (the kernel refuses any).
            users.push(bind(&umem, &sock, ifname, queue, 0)?);
        }
        for (i, user) in users.iter().enumerate() {
            redirect
                .add_socket(queue * n as u32 + i as u32, user.as_raw_fd())
                .map_err(|e| format!("adding a socket to the XSKMAP: {e}"))?;
        }
        // The receive half: every frame on the fill ring.
        let mut fill = device.fill(RING);
        fill.insert((0..RING).map(|i| u64::from(i * FRAME)));
        fill.commit();
        drop(fill);
        let mode = redirect.mode;
        let shared = Arc::new(Shared {
            pool: Mutex::new(Pool {
                device,
                free_tx: (RING..2 * RING).map(|i| u64::from(i * FRAME)).collect(),
            }),
            redirect: Arc::clone(redirect),
            area,
        });
        users
            .into_iter()
            .map(|user| QueueSocket::on(user, Arc::clone(&shared), mode, multi_buffer))
            .collect()
    }

    /// A bound socket's rings mapped, as one worker's socket.
    fn on(
        user: User,
        shared: Arc<Shared>,
        mode: XdpMode,
        multi_buffer: bool,
    ) -> Result<QueueSocket, String> {
        let rx = user.map_rx().map_err(|e| errno("mapping the RX ring", e))?;
        let tx = user.map_tx().map_err(|e| errno("mapping the TX ring", e))?;
        let info = XdpInfo {
            mode,
            zero_copy: zero_copy(user.as_raw_fd()),
            busy_poll: false,
            queues: 1,
            multi_buffer,
        };
        Ok(QueueSocket {
            rx,
            tx,
            _user: user,
            shared,
            free_tx: Vec::with_capacity(2 * BATCH),
            to_fill: Vec::with_capacity(BATCH),
            partial: Vec::new(),
            descs: Vec::with_capacity(2 * BATCH),
            info,
            busy_if: None,
            napi_checks: 0,
            napi: None,
        })
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
    /// descriptor not be on the ring yet, the parts wait in `partial` for the next call.
    pub fn recv_frame(&mut self) -> Option<Vec<u8>> {
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
            let frame = match (bytes(&self.shared.area, addr, len), more) {
                (None, _) => {
                    self.partial.clear();
                    Some(Vec::new())
                }
                (Some(b), true) => {
                    self.partial.extend_from_slice(b);
                    None
                }
                (Some(b), false) if self.partial.is_empty() => Some(b.to_vec()),
                (Some(b), false) => {
                    self.partial.extend_from_slice(b);
                    Some(std::mem::take(&mut self.partial))
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

    /// Hand the frames read since the last time back to the fill ring (and wake the driver if
    /// it sleeps for want of them).
    fn refill(&mut self) {
        if self.to_fill.is_empty() {
            return;
        }
        let mut pool = self
            .shared
            .pool
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut f = pool.device.fill(self.to_fill.len() as u32);
        let n = f.insert(self.to_fill.iter().copied()) as usize;
        f.commit();
        drop(f);
        self.to_fill.drain(..n);
        if pool.device.needs_wakeup() {
            pool.device.wake();
        }
    }

    /// Take back the frames the kernel finished sending (any socket's: the completion ring is
    /// the queue's), and take up to `want` free ones into this socket's cache.
    fn restock(&mut self, want: usize) {
        let mut pool = self
            .shared
            .pool
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let Pool { device, free_tx } = &mut *pool;
        let mut c = device.complete(RING);
        while let Some(addr) = c.read() {
            free_tx.push(addr & !u64::from(FRAME - 1));
        }
        c.release();
        let take = want.min(free_tx.len());
        self.free_tx.extend(free_tx.drain(free_tx.len() - take..));
    }

    /// Put frames on the TX ring and kick the kernel: returns how many it took (fewer when the
    /// ring or the free frames ran out, or a frame was longer than [`MAX_SEGS`] UMEM frames,
    /// or than one without multi-buffer frames).
    pub fn send_batch(&mut self, frames: &[&[u8]]) -> io::Result<usize> {
        let segs = |f: &[u8]| f.len().div_ceil(FRAME as usize).max(1);
        let need: usize = frames.iter().map(|f| segs(f)).sum();
        if self.free_tx.len() < need {
            self.restock(need.max(BATCH) - self.free_tx.len());
        }
        let most = if self.info.multi_buffer { MAX_SEGS } else { 1 };
        // The ring's room as the kernel's consumer index says now.
        let mut room = (RING - self.tx.pending().min(RING)) as usize;
        let base = self.shared.area.base.as_ptr();
        let mut sent = 0;
        self.descs.clear();
        for f in frames {
            let n = segs(f);
            if n > most || self.free_tx.len() < n || room < n {
                break;
            }
            room -= n;
            for (i, part) in f.chunks(FRAME as usize).enumerate() {
                let Some(addr) = self.free_tx.pop() else {
                    break;
                };
                // SAFETY: `addr` is a free frame of this UMEM (on no ring, in no other
                // socket's cache), FRAME bytes long, and `part` fits it (chunks of FRAME).
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        part.as_ptr(),
                        base.add(addr as usize),
                        part.len(),
                    )
                };
                let options = if i + 1 < n { XDP_PKT_CONTD } else { 0 };
                let len = part.len() as u32;
                self.descs.push(XdpDesc { addr, len, options });
            }
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
        self.shared.redirect.mode
    }
}

/// The bytes at UMEM offset `addr`, None when outside the UMEM.
fn bytes(area: &Area, addr: u64, len: u32) -> Option<&[u8]> {
    let (a, l) = (addr as usize, len as usize);
    if a.checked_add(l)? > area.len {
        return None;
    }
    // SAFETY: in bounds (checked); the kernel handed this frame to this socket through its RX
    // ring and writes it no more until it is back on the fill ring.
    Some(unsafe { std::slice::from_raw_parts(area.base.as_ptr().add(a), l) })
}

/// Frames handed back to the fill ring, or taken for sending, at a time.
const BATCH: usize = 64;

/// A socket's RX and TX rings, and the socket bound to the queue (with the UMEM's own socket,
/// or sharing its UMEM and rings).
fn bind(umem: &Umem, sock: &Socket, ifname: &str, queue: u32, flags: u16) -> Result<User, String> {
    let rings = SocketConfig {
        rx_size: NonZeroU32::new(RING),
        tx_size: NonZeroU32::new(RING),
        bind_flags: flags,
    };
    let user = umem
        .rx_tx(sock, &rings)
        .map_err(|e| errno("RX and TX rings", e))?;
    umem.bind(&user)
        .map_err(|e| errno(&format!("binding to {ifname} queue {queue}"), e))?;
    Ok(user)
}
