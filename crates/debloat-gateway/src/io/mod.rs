//! Packet I/O back ends: how frames get in and out of the interfaces. Two, behind one
//! [`port::Port`]: AF_PACKET with a TPACKET ring ([`sys`]) and AF_XDP ([`xdp`]: an XDP program
//! loaded with raw `bpf(2)` and an AF_XDP socket through xdpilone). All of the crate's `unsafe`
//! is in those two folders. Frames are read in batches by [`intake`], with the interfaces'
//! offloads turned off while the gateway runs ([`offload`]).

pub mod buf;
pub mod intake;
pub mod offload;
pub mod port;
pub mod sys;
pub mod xdp;
