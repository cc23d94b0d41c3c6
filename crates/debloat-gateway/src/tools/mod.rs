//! Test tools: the testbed (three network namespaces joined by veth pairs, the gateway between
//! them: [`testbed`]) and a UDP load generator ([`loadgen`]).

pub mod loadgen;
pub mod testbed;
