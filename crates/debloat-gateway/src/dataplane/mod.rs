//! The data plane: a direction's [`path::Path`] (frames parsed into the core's packets, the
//! classify stage, the discipline and the emulated link of the core's `DataPath`), what it
//! needs from frames on the way (GSO segmentation, checksums, the TCP handshake log), and the
//! forwarding loop that drives two paths from real interfaces ([`forward::Gateway`]).

pub mod circuit_asks;
mod circuits;
pub mod csum;
pub mod forward;
pub mod frame;
pub mod gso;
pub mod htb_split;
pub mod path;
mod send;
pub mod shards;
pub mod tcp_seen;
pub mod worker;
