//! Binding AF_XDP sockets to one UMEM: every worker's socket on every receive queue of one
//! interface, or of both interfaces of a path ([`super::queues::XdpSocket::open_pair`]), so
//! that a frame received on one is sent on the other without a copy.
//!
//! The kernel's rules (`xsk_bind`, net/xdp/xsk.c): the first socket registers the UMEM and
//! owns the fill and completion rings of its interface queue; a socket on another interface or
//! queue is bound with `XDP_SHARED_UMEM` to the UMEM's socket and brings its own fill and
//! completion rings (Linux ≥ 5.10); a socket on a queue that already has them shares them,
//! bound to that queue's first socket. Only the first may ask for flags (need-wakeup,
//! multi-buffer frames); the others inherit them (multi-buffer frames since Linux 6.6.10 and
//! 6.7: before, a socket sharing a UMEM took no frame longer than one UMEM frame).
//!
//! Each queue brings [`FRAMES_PER_QUEUE`] frames: one ring's worth on its fill ring, one for
//! sending copies, one that received frames may be held in ([`super::umem`]).
#![allow(unsafe_code)]

use super::bpf::{Redirect, XdpMode};
use super::limits::FRAME;
use super::socket::{QueueSocket, RING};
use super::umem::{Area, Pool, Umem};
use std::num::NonZeroU32;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};
use xdpilone::{DeviceQueue, IfInfo, Socket, SocketConfig, UmemConfig, User};

/// `XDP_USE_SG` (linux/if_xdp.h, Linux ≥ 6.6): the socket takes and gives frames that span
/// several UMEM frames, each descriptor but the last marked `XDP_PKT_CONTD`.
const XDP_USE_SG: u16 = 1 << 4;
/// UMEM frames per interface queue bound: the fill ring's, the sending copies', the held.
const FRAMES_PER_QUEUE: u32 = 3 * RING;

fn errno(what: &str, e: xdpilone::Errno) -> String {
    format!("{what}: {e}")
}

/// A UMEM being set up, and the sockets bound to it so far.
pub(super) struct Setup {
    xsk: xdpilone::Umem,
    area: Area,
    queues: usize,
    devices: Vec<DeviceQueue>,
    redirects: Vec<Arc<Redirect>>,
    /// Each socket: its rings, its queue's index in `devices`, how it was bound.
    users: Vec<(User, usize, XdpMode, bool)>,
}

impl Setup {
    /// A UMEM for `queues` interface queues.
    pub(super) fn new(queues: usize) -> Result<Setup, String> {
        let frames = FRAMES_PER_QUEUE as usize * queues.max(1);
        if frames * FRAME as usize > u32::MAX as usize {
            // One mapping of at most 4 GiB (170 queues' worth), offsets within 32 bits.
            return Err(format!(
                "{queues} receive queues are too many for one UMEM (at most 170)"
            ));
        }
        let area = Area::new(frames * FRAME as usize).map_err(|e| format!("UMEM: {e}"))?;
        let cfg = UmemConfig {
            fill_size: RING,
            complete_size: RING,
            frame_size: FRAME,
            headroom: 0,
            flags: 0,
        };
        let mem = NonNull::slice_from_raw_parts(area.base, area.len);
        // SAFETY: the area is page aligned, of the length given, and outlives the UMEM and
        // every socket on it (it is the last field of `Umem` to drop, and the sockets and
        // held frames keep the `Umem` alive).
        let xsk = unsafe { xdpilone::Umem::new(cfg, mem) }
            .map_err(|e| errno("registering the UMEM", e))?;
        Ok(Setup {
            xsk,
            area,
            queues: queues.max(1),
            devices: Vec::new(),
            redirects: Vec::new(),
            users: Vec::new(),
        })
    }

    /// Bind `n` sockets, one per worker, to queue `iface.queue_id()` of `ifname`, entered in
    /// `redirect`'s map at `queue × n + i` for worker `i`; returns their indices among the
    /// setup's sockets.
    pub(super) fn add_queue(
        &mut self,
        iface: &IfInfo,
        ifname: &str,
        n: usize,
        redirect: &Arc<Redirect>,
        multi_buffer: bool,
    ) -> Result<Vec<usize>, String> {
        if self.devices.len() >= self.queues {
            return Err(format!("the UMEM was made for {} queues", self.queues));
        }
        let queue = iface.queue_id();
        let owns_umem = self.devices.is_empty();
        let first = match owns_umem {
            true => Socket::with_shared(iface, &self.xsk),
            false => Socket::new(iface),
        }
        .map_err(|e| errno("AF_XDP socket", e))?;
        let device = self
            .xsk
            .fq_cq(&first)
            .map_err(|e| errno("fill and completion rings", e))?;
        let flags = match owns_umem {
            true => SocketConfig::XDP_BIND_NEED_WAKEUP | if multi_buffer { XDP_USE_SG } else { 0 },
            // A socket sharing the UMEM takes its flags from the first (the kernel refuses any).
            false => 0,
        };
        let bound = |user: &User| match owns_umem {
            true => self.xsk.bind(user),
            false => device.bind(user),
        };
        let place = |what| format!("binding {what} to {ifname} queue {queue}");
        let user = rings(&self.xsk, &first, flags)?;
        self.xsk
            .bind(&user)
            .map_err(|e| errno(&place("a socket"), e))?;
        let mut users = vec![user];
        for _ in 1..n {
            let sock = Socket::new(iface).map_err(|e| errno("AF_XDP socket", e))?;
            let user = rings(&self.xsk, &sock, 0)?;
            bound(&user).map_err(|e| errno(&place("a worker's socket"), e))?;
            users.push(user);
        }
        for (i, user) in users.iter().enumerate() {
            redirect
                .add_socket(queue * n as u32 + i as u32, user.as_raw_fd())
                .map_err(|e| format!("adding a socket to the XSKMAP: {e}"))?;
        }
        if !self.redirects.iter().any(|r| Arc::ptr_eq(r, redirect)) {
            self.redirects.push(Arc::clone(redirect));
        }
        let dev = self.devices.len();
        self.devices.push(device);
        let start = self.users.len();
        let mode = redirect.mode;
        self.users
            .extend(users.into_iter().map(|u| (u, dev, mode, multi_buffer)));
        Ok((start..self.users.len()).collect())
    }

    /// Every queue's fill ring filled, and the sockets, in the order they were bound.
    pub(super) fn finish(self) -> Result<Vec<QueueSocket>, String> {
        let Setup {
            area,
            mut devices,
            redirects,
            users,
            queues,
            ..
        } = self;
        let frames = FRAMES_PER_QUEUE * queues as u32;
        for (d, device) in devices.iter_mut().enumerate() {
            let first = d as u32 * RING;
            let mut fill = device.fill(RING);
            fill.insert((first..first + RING).map(|i| u64::from(i * FRAME)));
            fill.commit();
        }
        let on_rings = devices.len() as u32 * RING;
        let umem = Arc::new(Umem {
            pool: Mutex::new(Pool {
                devices,
                free: (on_rings..frames).map(|i| u64::from(i * FRAME)).collect(),
                held: 0,
            }),
            _redirects: redirects,
            area,
            held_max: (RING * queues as u32) as usize,
        });
        users
            .into_iter()
            .map(|(user, dev, mode, mb)| QueueSocket::on(user, Arc::clone(&umem), dev, mode, mb))
            .collect()
    }
}

/// A socket's RX and TX rings.
fn rings(umem: &xdpilone::Umem, sock: &Socket, flags: u16) -> Result<User, String> {
    let cfg = SocketConfig {
        rx_size: NonZeroU32::new(RING),
        tx_size: NonZeroU32::new(RING),
        bind_flags: flags,
    };
    umem.rx_tx(sock, &cfg)
        .map_err(|e| errno("RX and TX rings", e))
}
