//! # debloat-flent
//!
//! flent's test catalog, in a home of its own: for each test flent defines (`rrul`, `tcp_nup`,
//! `rtt_fair_var_up`, `voip`, …) and the few debloat adds, which flows and probes run, in which
//! direction, with which DSCP, when they start and stop (in flent's units of `DELAY` and
//! `LENGTH`), and the series names flent writes. The simulator ([`catalog::Driver::Simulator`])
//! and the probe ([`catalog::Driver::Probe`]) both build their runs from it, and the reports
//! read the files they write, so a test is defined once.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod catalog;
