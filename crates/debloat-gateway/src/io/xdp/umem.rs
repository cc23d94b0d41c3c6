//! The UMEM's memory and its frames: which are on a fill ring, which free, and which the data
//! path holds. A frame the kernel received is not copied out: the path holds it where it
//! landed (a held [`crate::io::buf::Buf`]) for as long as a discipline queues it, and a socket on the same UMEM
//! sends it from there ([`super::socket`]); the LAN and WAN interfaces of a path share one
//! UMEM for that ([`super::queues::XdpPair`]).
//!
//! A held frame is off the fill ring, so the receiving socket puts a free frame on the ring in
//! its place; a deep queue could otherwise starve the ring. So at most [`Umem::held_max`]
//! frames are held at a time (a quarter of the UMEM, counted under the pool's lock); beyond
//! that a frame is copied into the heap and its UMEM frame goes straight back to the fill
//! ring, as every frame was before 2026-11-29 (copy on pressure). Linux's veth does the same
//! with its pages: an XDP frame redirected to another device keeps its page until sent.
#![allow(unsafe_code)]

use super::bpf::Redirect;
use std::io;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use xdpilone::DeviceQueue;

/// The UMEM's memory: an anonymous, page-aligned mapping.
pub(crate) struct Area {
    pub(crate) base: NonNull<u8>,
    pub(crate) len: usize,
}

impl Area {
    pub(super) fn new(len: usize) -> io::Result<Area> {
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

    /// The bytes at UMEM offset `addr`, None when outside the UMEM.
    pub(crate) fn bytes(&self, addr: u64, len: u32) -> Option<&[u8]> {
        let (a, l) = (addr as usize, len as usize);
        if a.checked_add(l)? > self.len {
            return None;
        }
        // SAFETY: in bounds (checked); the caller owns the frame at `addr` (handed to it by
        // an RX ring, or held) and the kernel writes it no more until it is on a fill ring.
        Some(unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(a), l) })
    }
}

impl Drop for Area {
    fn drop(&mut self) {
        // SAFETY: `base` and `len` are what mmap returned; the sockets and frames using it
        // are gone (it is the last field of `Umem` to drop, and every socket and held frame
        // keeps the `Umem` alive).
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// One UMEM: its memory, the fill and completion rings of every interface queue bound to it,
/// and the frames no ring holds.
pub struct Umem {
    // Field order is drop order: the rings before the programs, the memory last.
    pub(super) pool: Mutex<Pool>,
    /// The programs of the interfaces bound to it (attached while a socket or held frame
    /// may still need them).
    pub(super) _redirects: Vec<Arc<Redirect>>,
    pub(crate) area: Area,
    /// Frames the data path may hold at a time.
    pub(super) held_max: usize,
}

/// The rings the kernel keeps one of per interface queue, and the frames on no ring.
pub(super) struct Pool {
    /// Each bound interface queue's fill and completion rings.
    pub(super) devices: Vec<DeviceQueue>,
    /// Frames on no ring and in nobody's hands: for sending copies, and to stand in on a fill
    /// ring for a held frame.
    pub(super) free: Vec<u64>,
    /// Frames taken from `free` so that received ones may be held: in a socket's cache, or
    /// held by the data path.
    pub(super) held: usize,
}

// SAFETY: the mapping is only read or written at a frame its reader owns at the time (one on
// its RX ring until it is back on a fill ring, one held, one taken from the free list until
// the completion ring returns it), and the rings behind the mutex are touched under it.
unsafe impl Send for Umem {}
unsafe impl Sync for Umem {}

impl Umem {
    /// The pool, even if a thread panicked holding it (its lists stay consistent: each
    /// change is one push or drain).
    pub(super) fn pool(&self) -> MutexGuard<'_, Pool> {
        self.pool.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Frames the data path held and is done with (dropped, or copied out), back to the
    /// free list.
    pub(crate) fn release(&self, addrs: impl Iterator<Item = u64>) {
        let mut p = self.pool();
        let before = p.free.len();
        p.free.extend(addrs);
        let n = p.free.len() - before;
        p.held = p.held.saturating_sub(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::buf::{release_all, Buf};

    /// A UMEM of `frames` frames with no interface bound: all free.
    fn umem(frames: u32, held_max: usize) -> Arc<Umem> {
        let f = super::super::limits::FRAME;
        Arc::new(Umem {
            pool: Mutex::new(Pool {
                devices: Vec::new(),
                free: (0..frames).map(|i| u64::from(i * f)).collect(),
                held: 0,
            }),
            _redirects: Vec::new(),
            area: Area::new((frames * f) as usize).expect("mmap"),
            held_max,
        })
    }

    /// Free frames and frames counted as held.
    fn counts(u: &Umem) -> (usize, usize) {
        let p = u.pool();
        (p.free.len(), p.held)
    }

    /// Take `n` frames off the free list as a socket does to hold them.
    fn hold(u: &Arc<Umem>, n: usize) -> Vec<Buf> {
        let mut p = u.pool();
        let at = p.free.len() - n;
        let addrs: Vec<u64> = p.free.drain(at..).collect();
        p.held += n;
        drop(p);
        addrs
            .into_iter()
            .map(|a| Buf::held(Arc::clone(u), a, 60).expect("inside"))
            .collect()
    }

    #[test]
    fn a_held_frame_reads_and_writes_the_umem_and_goes_back_when_dropped() {
        let u = umem(8, 4);
        let mut b = hold(&u, 1).pop().expect("one");
        assert_eq!(b.len(), 60);
        b[14] = 0x45;
        assert_eq!(b[14], 0x45);
        assert!(b.is_held());
        assert_eq!(b.capacity(), 60, "counted as its copy would be");
        assert_eq!(
            b.clone().into_vec()[14],
            0x45,
            "a clone is a copy in the heap"
        );
        assert_eq!(counts(&u), (7, 1));
        assert!(b.is_held_in(&u) && !b.is_held_in(&umem(1, 1)));
        drop(b);
        assert_eq!(counts(&u), (8, 0));
        let f = super::super::limits::FRAME;
        assert!(
            Buf::held(Arc::clone(&u), u64::from(8 * f - 10), 11).is_none(),
            "a frame running past the UMEM's end is refused"
        );
    }

    #[test]
    fn a_batch_gives_its_held_frames_back_to_their_umems() {
        let (a, b) = (umem(8, 8), umem(8, 8));
        let mut batch = hold(&a, 3);
        batch.push(Buf::from(vec![1, 2, 3]));
        batch.extend(hold(&b, 2));
        batch.extend(hold(&a, 1));
        release_all(&mut batch);
        assert!(batch.is_empty());
        for u in [&a, &b] {
            assert_eq!(counts(u), (8, 0));
        }
    }

    #[test]
    fn a_frame_sent_as_it_is_is_not_given_back_twice() {
        let u = umem(4, 4);
        let mut f = hold(&u, 1).pop().expect("one");
        let (_, addr, len) = f.take_held().expect("held");
        assert!(f.is_empty() && !f.is_held());
        drop(f);
        assert_eq!(len, 60);
        // On a TX ring now: the completion ring gives it back, not the drop.
        let p = u.pool();
        assert_eq!(p.free.len(), 3);
        assert!(!p.free.contains(&addr));
    }
}
