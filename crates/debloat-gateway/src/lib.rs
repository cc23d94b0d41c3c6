//! debloat's gateway: smart queue management in userspace for hosts whose kernel lacks it.
//!
//! ```text
//! lan ─AF_PACKET─► Path (egress):  classify ─► qdisc ─► emulated link ─AF_PACKET─► wan
//! lan ◄─AF_PACKET─ Path (ingress): emulated link ◄─ qdisc ◄─ classify ◄─AF_PACKET─ wan
//! ```
//!
//! [`path::Path`] is sans-IO (frames and `now` in, frames out, "wake me at T"), so it is tested
//! without sockets; [`forward::Gateway`] drives two of them from real interfaces with a
//! monotonic clock and [`control`] serves its Unix socket from a thread of its own; [`testbed`] builds three network namespaces joined by veth pairs with the
//! gateway between them; [`metrics`] serves the numbers to Prometheus. All `unsafe` is in
//! [`sys`].

pub mod autorate;
pub mod control;
pub mod csum;
pub mod forward;
pub mod frame;
pub mod gso;
pub mod import;
pub mod intake;
pub mod loadgen;
pub mod metrics;
pub mod offload;
pub mod path;
pub mod pinger;
pub mod qosify_files;
pub mod reload;
pub mod snapshot;
pub mod sys;
pub mod tcp_seen;
pub mod testbed;

pub use debloat_core::link::netem::{Emulation, Netem};
pub use forward::{Config, Gateway, Snapshot};
