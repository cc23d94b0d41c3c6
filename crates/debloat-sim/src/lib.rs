//! # debloat-sim
//!
//! A deterministic discrete-event network in virtual time: a client and a server joined by a
//! bottleneck link each way, any `debloat-core` discipline in front of each, Linux-like TCP
//! (Reno, CUBIC; SACK recovery, RTO, delayed ACKs, ECN) and ping probes, running flent's tests
//! under flent's names. Same configuration and seed, same output, byte for byte.
//!
//! Status (issue 3): flent's ping, tcp_1up, tcp_nup, tcp_ndown, tcp_bidirectional, rrul,
//! rrul_be, tcp_4up_squarewave, tcp_2up_square, rtt_fair_up, rtt_fair_var_up/down and voip; TOML
//! scenarios with UDP floods; Reno, CUBIC (HyStart), Westwood+ and BBR v1; a TX-ring/BQL device;
//! the core's link model for the wire (framing, netem's impairments); Wi-Fi (`wifi`: shared airtime, A-MPDU, legacy / fq_codel /
//! mac80211 airtime queueing with AQL); flent data files and pcap; an optional fixed window
//! cap per flow (receive window or send buffer). Not modelled: PRR, RACK/TLP, TSO/GSO and TSQ,
//! receive-window autotuning.

#![warn(missing_docs)]

pub mod adaptive;
pub mod circuits;
pub mod engine;
pub mod flent;
pub mod frame;
pub mod packet;
pub mod repeat;
pub mod reproduce;
pub mod scenario;
pub mod scenario_file;
pub mod tcp;
pub mod wifi;
pub mod wire;
pub mod world;

pub use scenario::{run, simulate, Config, Run, Summary, Test};
