//! Speed measurements that are commands, not tests (`debloat bench`): how fast the simulator
//! runs ([`sim`]: bottleneck packets per wall-clock second) and how fast the gateway forwards
//! beside the kernel's own bridge in the same run ([`gateway`]: RFC 2544 throughput, CPU per
//! packet, idle latency added), and what a shaper-rate controller costs ([`autorate`]). They print their progress and tables on stdout. For the
//! disciplines' per-packet cost, `cargo bench -p debloat-core --bench qdisc`.

pub mod autorate;
pub mod gateway;
pub mod sim;
