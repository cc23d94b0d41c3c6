//! One worker's AF_XDP sockets on an interface: one on each of its receive queues.
//!
//! A NIC spreads what it receives over its queues (RSS), and a veth made with several queues
//! receives each frame on the queue its sender transmitted on. The XDP program runs on every
//! queue and redirects to a socket on that same queue — AF_XDP allows no other — so a worker
//! needs a socket on each queue to see all of its hosts' frames. The map's entry for a frame is
//! `queue × workers + worker` ([`super::bpf`]): with one worker, the queue itself.
//!
//! Each queue has its own fill and completion rings ([`super::setup`]): queues are served by
//! different kernel contexts, and a ring the kernel fills from two of them would need a lock
//! the kernel does not take. All of them share one UMEM: the interface's, or the path's when
//! both interfaces are opened together ([`XdpSocket::open_pair`]), so that a frame received on
//! one is sent on the other from where it landed. The worker reads its sockets in turn, at most a batch
//! from one before the next, and sends on one of them (queue `worker mod queues`), which spreads
//! the workers' sending over the queues. It waits on all of them through one epoll descriptor,
//! so the forwarding loop still waits on one descriptor per interface.
#![allow(unsafe_code)]

use super::bpf::{Redirect, Steer, XdpMode};
use super::limits::{rx_queues, usable};
use super::setup::Setup;
use super::socket::{QueueSocket, XdpInfo};
use crate::io::buf::Buf;
use crate::sys::HostIs;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use xdpilone::IfInfo;

/// Frames read from one queue before the next one's turn.
const TURN: u32 = 64;

/// A worker's sockets on every receive queue of one interface.
pub struct XdpSocket {
    queues: Vec<QueueSocket>,
    /// Whose turn it is to be read.
    turns: Turns,
    /// The queue this worker sends on.
    sending: usize,
    /// Readable when any queue's socket is (several queues only).
    epoll: Option<OwnedFd>,
}

impl std::fmt::Debug for XdpSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpSocket")
            .field("queues", &self.queues.len())
            .field("info", &self.info())
            .finish()
    }
}

impl XdpSocket {
    /// Attach the redirecting program to `ifname` and bind a socket to each of its receive
    /// queues. Err says why not, in words (the caller falls back to the TPACKET back end and
    /// says so). `modes`: where the program may run, in the order tried.
    pub fn open(ifname: &str, modes: &[XdpMode]) -> Result<XdpSocket, String> {
        let mut v = open_on(&[(ifname, Steer::ByQueue)], 1, modes)?;
        v.pop()
            .and_then(|mut s| s.pop())
            .ok_or_else(|| "no socket".to_string())
    }

    /// The LAN's and the WAN's sockets on one UMEM, for `n` workers (`n` = 1: steered by
    /// queue; more: by the host, the LAN's source and the WAN's destination address), so that
    /// a frame received on one is sent on the other without a copy. The `i`-th pair is
    /// worker `i`'s.
    pub fn open_pair(
        lan: &str,
        wan: &str,
        n: usize,
        modes: &[XdpMode],
    ) -> Result<Vec<(XdpSocket, XdpSocket)>, String> {
        let n = n.max(1);
        let steer = |host| match n {
            1 => Steer::ByQueue,
            _ => Steer::ByHost(host, n as u32),
        };
        let sides = [
            (lan, steer(HostIs::Source)),
            (wan, steer(HostIs::Destination)),
        ];
        let mut by_side = open_on(&sides, n, modes)?.into_iter();
        let (Some(l), Some(w)) = (by_side.next(), by_side.next()) else {
            return Err("no sockets".into());
        };
        Ok(l.into_iter()
            .zip(w)
            .map(|(mut l, mut w)| {
                let shared = l.shares_umem(&w);
                l.set_shared(shared);
                w.set_shared(shared);
                (l, w)
            })
            .collect())
    }

    /// `n` workers' sockets on every receive queue of `ifname`, and the program that hands
    /// each worker its LAN hosts' frames (`host`: which address names the host on this side).
    /// The `i`-th is worker `i`'s.
    pub fn open_shared(
        ifname: &str,
        n: usize,
        host: HostIs,
        modes: &[XdpMode],
    ) -> Result<Vec<XdpSocket>, String> {
        let n = n.max(1);
        let mut v = open_on(&[(ifname, Steer::ByHost(host, n as u32))], n, modes)?;
        v.pop().ok_or_else(|| "no sockets".to_string())
    }

    /// Whether this worker's sockets and `other`'s are on one UMEM.
    pub fn shares_umem(&self, other: &XdpSocket) -> bool {
        self.queues[0].shares_umem(&other.queues[0])
    }

    /// Say in [`XdpSocket::info`] whether the other interface shares this one's UMEM.
    pub fn set_shared(&mut self, shared: bool) {
        for q in &mut self.queues {
            q.info.shared_umem = shared;
        }
    }

    fn new(queues: Vec<QueueSocket>, worker: usize) -> Result<XdpSocket, String> {
        let epoll = if queues.len() > 1 {
            Some(epoll_of(&queues).map_err(|e| format!("epoll over the queues' sockets: {e}"))?)
        } else {
            None
        };
        Ok(XdpSocket {
            sending: worker % queues.len().max(1),
            queues,
            turns: Turns::default(),
            epoll,
        })
    }

    /// How the sockets were bound (alike on every queue), and how many queues there are.
    pub fn info(&self) -> XdpInfo {
        let mut info = self.queues[0].info;
        info.queues = self.queues.len() as u32;
        info.busy_poll = self.queues.iter().all(|q| q.info.busy_poll);
        info
    }

    /// Where the XDP program runs.
    pub fn mode(&self) -> XdpMode {
        self.queues[0].mode()
    }

    /// Ask for preferred busy polling on every queue's socket ([`super::busy`]).
    pub fn prefer_busy_poll(&mut self, ifname: &str) -> io::Result<()> {
        self.queues
            .iter_mut()
            .try_for_each(|q| q.prefer_busy_poll(ifname))
    }

    /// Run the receive work of every queue whose NAPI this thread polls; false if none.
    pub fn poll_napi(&mut self) -> bool {
        self.queues
            .iter_mut()
            .fold(false, |any, q| q.poll_napi() | any)
    }

    /// The descriptor to wait on: the socket's, or with several queues an epoll descriptor
    /// that is readable when any of theirs is.
    pub fn fd(&self) -> i32 {
        match &self.epoll {
            Some(e) => e.as_raw_fd(),
            None => self.queues[0].fd(),
        }
    }

    /// Whether a frame waits on any queue (read from the rings' memory, no system call).
    pub fn readable(&self) -> bool {
        self.queues.iter().any(QueueSocket::readable)
    }

    /// The next frame, taking the queues in turn (at most [`TURN`] from one while others
    /// wait); None when every queue is empty.
    pub fn recv_frame(&mut self) -> Option<Buf> {
        let q = &mut self.queues;
        self.turns.next(q.len(), |i| q[i].recv_frame())
    }

    /// Put frames on this worker's sending queue's TX ring ([`QueueSocket::send_batch`]).
    pub fn send_batch(&mut self, frames: &mut [Buf]) -> io::Result<usize> {
        self.queues[self.sending].send_batch(frames)
    }
}

/// The queue being read, and the frames taken from it this turn.
#[derive(Debug, Default)]
struct Turns {
    reading: usize,
    taken: u32,
}

impl Turns {
    /// The next frame from `n` queues, `recv(i)` reading queue `i`: the queue whose turn it
    /// is, until it is empty or has given [`TURN`] frames, then the next; None when all are
    /// empty. One queue is simply read.
    fn next<T>(&mut self, n: usize, mut recv: impl FnMut(usize) -> Option<T>) -> Option<T> {
        if n == 1 {
            return recv(0);
        }
        // One more look than there are queues: the queue being read may be passed over
        // because its turn is up, and is then looked at again last.
        for _ in 0..=n {
            if self.taken < TURN {
                if let Some(f) = recv(self.reading) {
                    self.taken += 1;
                    return Some(f);
                }
            }
            self.reading = (self.reading + 1) % n;
            self.taken = 0;
        }
        None
    }
}

/// The program on each interface of `sides` (with how it steers), and `n` workers' sockets on
/// each of their receive queues, all on one UMEM; grouped by interface, then by worker.
fn open_on(
    sides: &[(&str, Steer)],
    n: usize,
    modes: &[XdpMode],
) -> Result<Vec<Vec<XdpSocket>>, String> {
    let mut attached = Vec::new();
    for &(ifname, steer) in sides {
        let multi_buffer = usable(ifname)?;
        let name = CString::new(ifname).map_err(|_| format!("bad interface name {ifname:?}"))?;
        let mut iface = IfInfo::invalid();
        iface
            .from_name(&name)
            .map_err(|e| format!("interface {ifname}: {e}"))?;
        let queues = rx_queues(ifname);
        let redirect = Arc::new(Redirect::attach(
            iface.ifindex(),
            queues * n as u32,
            steer,
            modes,
            multi_buffer,
        )?);
        attached.push((ifname, iface, queues, redirect, multi_buffer));
    }
    let total: u32 = attached.iter().map(|a| a.2).sum();
    let mut setup = Setup::new(total as usize)?;
    // Each side's sockets' indices among the setup's, by worker.
    let mut placed: Vec<Vec<Vec<usize>>> = Vec::new();
    for (ifname, iface, queues, redirect, multi_buffer) in &mut attached {
        let mut by_worker: Vec<Vec<usize>> = (0..n).map(|_| Vec::new()).collect();
        for q in 0..*queues {
            iface.set_queue(q);
            let ids = setup.add_queue(iface, ifname, n, redirect, *multi_buffer)?;
            for (w, id) in ids.into_iter().enumerate() {
                by_worker[w].push(id);
            }
        }
        placed.push(by_worker);
    }
    let mut sockets: Vec<Option<QueueSocket>> = setup.finish()?.into_iter().map(Some).collect();
    placed
        .into_iter()
        .map(|by_worker| {
            by_worker
                .into_iter()
                .enumerate()
                .map(|(w, ids)| {
                    let q = ids.iter().filter_map(|&i| sockets[i].take()).collect();
                    XdpSocket::new(q, w)
                })
                .collect()
        })
        .collect()
}

/// An epoll descriptor watching every queue's socket for frames to read.
fn epoll_of(queues: &[QueueSocket]) -> io::Result<OwnedFd> {
    // SAFETY: no pointer is passed.
    let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned and is owned by no one else.
    let epoll = unsafe { OwnedFd::from_raw_fd(fd) };
    for q in queues {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: q.fd() as u64,
        };
        // SAFETY: `ev` is live for the call; both descriptors are open.
        if unsafe { libc::epoll_ctl(fd, libc::EPOLL_CTL_ADD, q.fd(), &mut ev) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(epoll)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `frames[i]` frames waiting on queue `i`; the queues each read returns, in order.
    fn read_all(frames: &[usize], limit: usize) -> Vec<usize> {
        let mut left = frames.to_vec();
        let mut t = Turns::default();
        let mut got = Vec::new();
        while got.len() < limit {
            let Some(q) = t.next(left.len(), |i| {
                (left[i] > 0).then(|| {
                    left[i] -= 1;
                    i
                })
            }) else {
                break;
            };
            got.push(q);
        }
        got
    }

    #[test]
    fn a_busy_queue_gives_way_to_another_after_its_turn() {
        let got = read_all(&[1000, 1000], 256);
        let runs: Vec<(usize, usize)> = got
            .chunk_by(|a, b| a == b)
            .map(|c| (c[0], c.len()))
            .collect();
        assert_eq!(runs, [(0, 64), (1, 64), (0, 64), (1, 64)]);
    }

    #[test]
    fn an_empty_queue_costs_the_other_nothing() {
        // Every frame of the busy queue comes without a None between (a None ends the
        // gateway's batch).
        assert_eq!(read_all(&[0, 300], 1000), vec![1; 300]);
        assert_eq!(read_all(&[300, 0, 0], 1000), vec![0; 300]);
        assert_eq!(read_all(&[300], 1000), vec![0; 300]);
    }

    #[test]
    fn every_frame_is_read_once() {
        let got = read_all(&[5, 130, 0, 70], 1000);
        for (q, n) in [(0, 5), (1, 130), (2, 0), (3, 70)] {
            assert_eq!(got.iter().filter(|&&x| x == q).count(), n, "queue {q}");
        }
    }
}
