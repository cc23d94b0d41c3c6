//! debloat's gateway: smart queue management in userspace for hosts whose kernel lacks it.
//!
//! ```text
//! lan ─AF_PACKET or AF_XDP─► Path (egress):  classify ─► qdisc ─► emulated link ─► wan
//! lan ◄─ Path (ingress): emulated link ◄─ qdisc ◄─ classify ◄─AF_PACKET or AF_XDP─ wan
//! ```
//!
//! The folders are the parts: [`dataplane`] ([`path::Path`] is sans-IO — frames and `now` in,
//! frames out, "wake me at T" — so it is tested without sockets; [`forward::Gateway`] drives two
//! of them from real interfaces with a monotonic clock), [`io`] (the packet I/O back ends behind
//! [`port::Port`]; all `unsafe` is in [`sys`] and `io::xdp`), [`control`] (the Unix socket served from a thread of its own,
//! reloads, Prometheus metrics, the rate controller), [`config`] (sqm-scripts' and qosify's
//! files) and [`tools`] (the namespace testbed, a load generator).

pub mod config;
pub mod control;
pub mod dataplane;
pub mod io;
pub mod tools;

// The modules by their short names (`debloat_gateway::path`, `crate::sys`…), as before the
// folders.
pub use config::{import, qosify_files};
pub use control::{autorate, metrics, pinger, reload, snapshot};
pub use dataplane::{
    circuit_asks, csum, forward, frame, gso, htb_split, path, shards, tcp_seen, worker,
};
pub use io::{intake, offload, port, sys};
pub use tools::{loadgen, testbed};

pub use debloat_core::link::netem::{Emulation, Netem};
pub use forward::{Config, Gateway, Snapshot};
