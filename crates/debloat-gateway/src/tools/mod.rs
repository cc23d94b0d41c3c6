//! Test tools: the testbed (three network namespaces joined by veth pairs, the gateway between
//! them: [`testbed`]), a UDP load generator ([`loadgen`]), the path's own per-frame work timed alone
//! ([`path_cost`]) and a witness of the host stalling
//! the machine while a test measures ([`host_stalls`]).

pub mod host_stalls;
pub mod loadgen;
pub mod path_cost;
pub mod testbed;
