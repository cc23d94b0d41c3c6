//! The AF_XDP back end: an XDP program redirects each frame an interface receives to an
//! AF_XDP socket ([`bpf`]), whose rings the gateway reads and writes in memory ([`socket`]).
pub mod bpf;
pub mod socket;

pub use bpf::XdpMode;
pub use socket::{XdpInfo, XdpSocket};
