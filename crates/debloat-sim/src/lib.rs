//! # debloat-sim
//!
//! A deterministic discrete-event network in virtual time: a client and a server joined by a
//! bottleneck link each way, any `debloat-core` discipline in front of each, Linux-like TCP
//! (Reno, CUBIC; SACK recovery, RTO, delayed ACKs, ECN) and ping probes, running flent's tests
//! under flent's names. Same configuration and seed, same output, byte for byte.
//!
//! Status (issue 3): the engine, links, TCP and the tests `ping`, `tcp_1up`, `tcp_nup`,
//! `tcp_ndown`, `tcp_bidirectional` exist. Not yet: BBR, HyStart, PRR, TSO/GSO, a device ring with
//! BQL, jitter and random loss, topologies beyond two hosts, the other flent tests.

#![warn(missing_docs)]

pub mod engine;
pub mod flent;
pub mod frame;
pub mod packet;
pub mod scenario;
pub mod scenario_file;
pub mod tcp;
pub mod world;

pub use scenario::{run, simulate, Config, Run, Summary, Test};
