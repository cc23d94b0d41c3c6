//! `debloat bench`: the arguments of the speed measurements in `debloat-bench` — the
//! simulator's speed (`sim`) and the gateway's forwarding rate against the kernel's own
//! (`gateway`). For the disciplines' per-packet cost, `cargo bench -p debloat-core --bench qdisc`.

/// Arguments of `debloat bench`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(clap::Subcommand, Debug)]
enum What {
    /// How fast the simulator runs: bottleneck packets per wall-clock second.
    Sim(SimArgs),
    /// Forwarding through the gateway against the kernel's bridge, between two veth pairs
    /// (root): kpps at 64 B, Gbit/s at 1500 B, CPU per packet, idle latency added.
    Gateway(GatewayArgs),
}

/// Arguments of `debloat bench sim`.
#[derive(clap::Args, Debug)]
struct SimArgs {
    /// Simulated seconds of load.
    #[arg(long, default_value_t = 60.0)]
    length: f64,
}

/// Arguments of `debloat bench gateway`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Needs root (network namespaces) and two CPUs. Example:\n  debloat bench gateway\n  debloat bench gateway --qdisc \"cake besteffort\" --trial 3"
)]
struct GatewayArgs {
    /// The gateway's discipline, both directions (unshaped unless it says otherwise).
    #[arg(long, default_value = "fq_codel")]
    qdisc: String,
    /// Seconds per trial (the search runs about 8 trials per forwarder and frame size).
    #[arg(long, default_value_t = 1.5)]
    trial: f64,
    /// Pings for the idle latency (5 ms apart).
    #[arg(long, default_value_t = 1000)]
    pings: u32,
    /// Loss allowed at the reported throughput, in percent.
    #[arg(long, default_value_t = 0.1)]
    loss: f64,
    /// Measure only the idle latency (skip the throughput search).
    #[arg(long)]
    latency_only: bool,
    /// Also measure the idle latency with `gateway --realtime PRIO` (0: skip).
    #[arg(long, value_name = "PRIO", default_value_t = 50)]
    realtime: u8,
    /// Skip the runs of `gateway --busy-poll` (throughput and idle latency).
    #[arg(long)]
    no_busy_poll: bool,
}

/// Run the benchmark.
pub fn run(a: &Args) -> anyhow::Result<()> {
    match &a.what {
        What::Sim(s) => debloat_bench::sim::run(s.length),
        What::Gateway(g) => debloat_bench::gateway::run(&debloat_bench::gateway::Config {
            qdisc: g.qdisc.clone(),
            trial: g.trial,
            pings: g.pings,
            loss: g.loss,
            latency_only: g.latency_only,
            realtime: g.realtime,
            no_busy_poll: g.no_busy_poll,
            exe: std::env::current_exe()?,
        }),
    }
}
