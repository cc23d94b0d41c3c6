//! The AF_XDP back end: an XDP program redirects each frame an interface receives to an
//! AF_XDP socket ([`bpf`]), whose rings the gateway reads and writes in memory ([`socket`]), one
//! socket per worker on each of the interface's receive queues ([`queues`]); with
//! `--busy-poll`, the device's receive work runs in the gateway's thread ([`busy`]). What an
//! interface asks of it (MTU, multi-buffer frames, queues) is read first ([`limits`]). The
//! sockets of a path's two interfaces share one UMEM ([`setup`]), in which received frames are
//! held until sent ([`umem`]).
pub mod bpf;
pub mod busy;
pub mod limits;
pub mod queues;
pub(crate) mod setup;
pub mod socket;
pub mod umem;

pub use bpf::XdpMode;
pub use queues::XdpSocket;
pub use socket::XdpInfo;
