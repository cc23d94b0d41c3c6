//! A frame's bytes wherever they are: in the heap (the TPACKET back end copies every frame out
//! of its ring; AF_XDP copies under pressure), or still in the AF_XDP UMEM where the kernel
//! wrote them (a held frame). The data path reads and changes them alike; the port that sends
//! a frame held in its own UMEM hands the kernel the frame itself.
//!
//! A `Buf` is a pointer and a length, whichever kind it is, and an owner: none for the heap
//! (the bytes are a boxed slice of exactly the frame's length), or the UMEM the frame is held
//! in. Reading or writing the bytes is the same two fields for both kinds, with no check of
//! where they are kept: the parser, the classifier and cake read a frame's bytes several times,
//! and an enum of the two kinds, checked at each access, cost the gateway with cake about 50
//! instructions a 60-byte frame more (callgrind, 2026-11-29, docs/gateway-speed.md).
#![allow(unsafe_code)]

use crate::io::xdp::umem::Umem;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::Arc;

/// A frame's bytes, Ethernet header first, no FCS.
pub struct Buf {
    /// The first byte: of a boxed slice of `len` bytes (`home` None), or of a UMEM frame.
    ptr: NonNull<u8>,
    len: usize,
    /// The UMEM holding the frame; None: the bytes are in the heap.
    home: Option<Arc<Umem>>,
}

// SAFETY: a `Buf` owns its bytes alone (a boxed slice, or a UMEM frame no ring and no other
// `Buf` has: see `Buf::held`), so moving it to another thread or reading it from several is
// as safe as for a `Box<[u8]>`; the `Umem` it keeps alive is `Send + Sync`.
unsafe impl Send for Buf {}
unsafe impl Sync for Buf {}

impl Buf {
    /// The frame at `addr` of `umem`, `len` bytes, held where it is: None if it does not lie
    /// inside the UMEM. The caller hands over its ownership of that frame (taken off an RX
    /// ring, on no ring and in no other `Buf` until this one is sent or dropped); dropping the
    /// `Buf` gives it back to the UMEM's free list.
    pub(crate) fn held(umem: Arc<Umem>, addr: u64, len: u32) -> Option<Buf> {
        let bytes = umem.area.bytes(addr, len)?;
        let ptr = NonNull::from(bytes).cast::<u8>();
        Some(Buf {
            ptr,
            len: bytes.len(),
            home: Some(umem),
        })
    }

    /// What the bytes would take in the heap: a held frame is counted as its copy would be, so
    /// that memory limits treat a frame alike on either back end.
    pub fn capacity(&self) -> usize {
        self.len
    }

    /// Whether the bytes are held in a UMEM.
    pub fn is_held(&self) -> bool {
        self.home.is_some()
    }

    /// Whether the bytes are held in `umem`.
    pub(crate) fn is_held_in(&self, umem: &Arc<Umem>) -> bool {
        self.home.as_ref().is_some_and(|h| Arc::ptr_eq(h, umem))
    }

    /// Take a held frame out: its UMEM, offset and length, no longer given back when this
    /// `Buf` is dropped (the caller sends it, or releases it with others); `self` is left
    /// empty. None (and `self` unchanged) for bytes in the heap.
    pub(crate) fn take_held(&mut self) -> Option<(Arc<Umem>, u64, u32)> {
        let umem = self.home.take()?;
        let addr = self.ptr.as_ptr() as usize - umem.area.base.as_ptr() as usize;
        let len = self.len as u32;
        self.ptr = NonNull::dangling();
        self.len = 0;
        Some((umem, addr as u64, len))
    }

    /// The bytes in the heap (copied out of the UMEM if held there).
    pub fn into_vec(self) -> Vec<u8> {
        if self.is_held() {
            return self.to_vec();
        }
        let me = std::mem::ManuallyDrop::new(self);
        // SAFETY: a heap `Buf`'s `ptr` and `len` are those of the boxed slice it was made
        // from (`From<Vec<u8>>`); `me` is not used or dropped again.
        unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(me.ptr.as_ptr(), me.len)) }
            .into_vec()
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        match self.take_held() {
            Some((umem, addr, _)) => umem.release(std::iter::once(addr)),
            // SAFETY: as in `into_vec`: the boxed slice this heap `Buf` was made from.
            None => drop(unsafe {
                Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                    self.ptr.as_ptr(),
                    self.len,
                ))
            }),
        }
    }
}

impl Default for Buf {
    fn default() -> Buf {
        Buf::from(Vec::new())
    }
}

/// The bytes of `v`, moved (its spare capacity given back: make it no longer than the frame).
impl From<Vec<u8>> for Buf {
    fn from(v: Vec<u8>) -> Buf {
        let b: Box<[u8]> = v.into_boxed_slice();
        let len = b.len();
        // A boxed slice's pointer is never null (dangling but aligned when empty).
        let ptr = NonNull::from(Box::leak(b)).cast::<u8>();
        Buf {
            ptr,
            len,
            home: None,
        }
    }
}

impl Deref for Buf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr` and `len` describe bytes this `Buf` owns (a boxed slice, or a held
        // UMEM frame checked inside the UMEM in `held`) for as long as it lives.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for Buf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`; `&mut self` makes the borrow unique, and no ring or other
        // `Buf` refers to the bytes while this one holds them.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

/// Empty `bufs`, handing the held frames among them back to their UMEMs with one lock per run
/// of frames from the same UMEM (dropping each would take the lock once a frame).
pub fn release_all(bufs: &mut Vec<Buf>) {
    let mut run: Option<(Arc<Umem>, Vec<u64>)> = None;
    for mut b in bufs.drain(..) {
        let Some((umem, addr, _)) = b.take_held() else {
            continue;
        };
        match &mut run {
            Some((home, addrs)) if Arc::ptr_eq(home, &umem) => addrs.push(addr),
            _ => {
                if let Some((home, addrs)) = run.take() {
                    home.release(addrs.into_iter());
                }
                run = Some((umem, vec![addr]));
            }
        }
    }
    if let Some((home, addrs)) = run {
        home.release(addrs.into_iter());
    }
}

/// A copy is in the heap: a netem duplicate must not share the original's UMEM frame.
impl Clone for Buf {
    fn clone(&self) -> Buf {
        Buf::from(self.to_vec())
    }
}

/// Two frames are equal when their bytes are, wherever they are kept.
impl PartialEq for Buf {
    fn eq(&self, other: &Buf) -> bool {
        **self == **other
    }
}

impl Eq for Buf {}

impl std::fmt::Debug for Buf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.home {
            Some(u) => write!(
                f,
                "Buf({} bytes held in a UMEM at {:#x})",
                self.len,
                self.ptr.as_ptr() as usize - u.area.base.as_ptr() as usize
            ),
            None => write!(f, "Buf({} bytes in the heap)", self.len),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buf_is_no_bigger_than_a_vec() {
        assert_eq!(std::mem::size_of::<Buf>(), std::mem::size_of::<Vec<u8>>());
    }

    #[test]
    fn a_heap_buf_reads_and_changes_as_its_vec() {
        let mut b = Buf::from(vec![1, 2, 3]);
        b[1] = 9;
        assert_eq!(&*b, &[1, 9, 3]);
        assert_eq!(b.capacity(), 3);
        assert!(!b.is_held());
        assert!(b.take_held().is_none(), "nothing held");
        assert_eq!(&*b, &[1, 9, 3], "and nothing taken");
        assert_eq!(b.clone().into_vec(), vec![1, 9, 3]);
        assert_eq!(b.into_vec(), vec![1, 9, 3]);
    }

    #[test]
    fn spare_capacity_is_given_back_and_an_empty_buf_is_empty() {
        let mut v = Vec::with_capacity(100);
        v.extend_from_slice(&[7; 10]);
        let b = Buf::from(v);
        assert_eq!((b.len(), b.capacity()), (10, 10));
        let e = Buf::default();
        assert!(e.is_empty() && !e.is_held());
        assert_eq!(e.into_vec(), Vec::<u8>::new());
    }
}
