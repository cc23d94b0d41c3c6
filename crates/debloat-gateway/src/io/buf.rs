//! A frame's bytes wherever they are: in the heap (the TPACKET back end copies every frame out
//! of its ring; AF_XDP copies under pressure), or still in the AF_XDP UMEM where the kernel
//! wrote them ([`UmemFrame`]). The data path reads and changes them alike; the port that sends
//! a frame held in its own UMEM hands the kernel the frame itself.

use crate::io::xdp::umem::UmemFrame;
use std::ops::{Deref, DerefMut};

/// A frame's bytes, Ethernet header first, no FCS.
#[derive(Debug)]
pub enum Buf {
    /// Owned by the gateway.
    Heap(Vec<u8>),
    /// Held in an AF_XDP UMEM.
    Umem(UmemFrame),
}

impl Buf {
    /// What the bytes would take in the heap: a held frame is counted as its copy would be, so
    /// that memory limits treat a frame alike on either back end.
    pub fn capacity(&self) -> usize {
        match self {
            Buf::Heap(v) => v.capacity(),
            Buf::Umem(u) => u.bytes().len(),
        }
    }

    /// Whether the bytes are held in a UMEM.
    pub fn is_held(&self) -> bool {
        matches!(self, Buf::Umem(_))
    }

    /// The bytes in the heap (copied out of the UMEM if held there).
    pub fn into_vec(self) -> Vec<u8> {
        match self {
            Buf::Heap(v) => v,
            Buf::Umem(u) => u.bytes().to_vec(),
        }
    }
}

impl Default for Buf {
    fn default() -> Buf {
        Buf::Heap(Vec::new())
    }
}

impl From<Vec<u8>> for Buf {
    fn from(v: Vec<u8>) -> Buf {
        Buf::Heap(v)
    }
}

impl Deref for Buf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Buf::Heap(v) => v,
            Buf::Umem(u) => u.bytes(),
        }
    }
}

impl DerefMut for Buf {
    fn deref_mut(&mut self) -> &mut [u8] {
        match self {
            Buf::Heap(v) => v,
            Buf::Umem(u) => u.bytes_mut(),
        }
    }
}

/// Empty `bufs`, handing the held frames among them back to their UMEMs with one lock per run
/// of frames from the same UMEM (dropping each would take the lock once a frame).
pub fn release_all(bufs: &mut Vec<Buf>) {
    let mut run: Option<(std::sync::Arc<crate::io::xdp::umem::Umem>, Vec<u64>)> = None;
    for b in bufs.drain(..) {
        let Buf::Umem(u) = b else { continue };
        let (umem, addr, _) = u.into_parts();
        match &mut run {
            Some((home, addrs)) if std::sync::Arc::ptr_eq(home, &umem) => addrs.push(addr),
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
        Buf::Heap(self.to_vec())
    }
}

/// Two frames are equal when their bytes are, wherever they are kept.
impl PartialEq for Buf {
    fn eq(&self, other: &Buf) -> bool {
        **self == **other
    }
}

impl Eq for Buf {}

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
        assert_eq!(b.clone().into_vec(), vec![1, 9, 3]);
    }
}
