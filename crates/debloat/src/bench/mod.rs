//! `debloat bench`: speed measurements that are commands, not tests — the simulator's speed
//! (`sim`) and the gateway's forwarding rate against the kernel's own (`gateway`). For the
//! disciplines' per-packet cost, `cargo bench -p debloat-core --bench qdisc`.

mod gateway;
mod sim;

/// Arguments of `debloat bench`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(clap::Subcommand, Debug)]
enum What {
    /// How fast the simulator runs: bottleneck packets per wall-clock second.
    Sim(sim::Args),
    /// Forwarding through the gateway against the kernel's bridge, between two veth pairs
    /// (root): kpps at 64 B, Gbit/s at 1500 B, CPU per packet, idle latency added.
    Gateway(gateway::Args),
}

/// Run the benchmark.
pub fn run(a: &Args) -> anyhow::Result<()> {
    match &a.what {
        What::Sim(s) => sim::run(s),
        What::Gateway(g) => gateway::run(g),
    }
}
