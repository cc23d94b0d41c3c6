//! The control plane: the Unix socket that answers `gateway stats/set/reload` ([`socket`]),
//! the snapshot it serves ([`snapshot`]), reloading a configuration without a drop
//! ([`reload`]), Prometheus metrics ([`metrics`]), and the shaper-rate controller with its
//! reflector pings ([`autorate`], [`pinger`]).

pub mod autorate;
pub mod error;
pub mod metrics;
pub mod pinger;
pub mod reload;
pub mod snapshot;
pub mod socket;

pub use error::ChangeError;
pub use socket::{ask, ControlServer, Request};
