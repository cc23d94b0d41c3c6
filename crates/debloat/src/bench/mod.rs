//! `debloat bench`: the arguments of the speed measurements in `debloat-bench` — the
//! simulator's speed (`sim`) and the gateway's forwarding rate against the kernel's own
//! (`gateway`) and the shaper-rate controller's cost (`autorate`). For the disciplines' per-packet cost, `cargo bench -p debloat-core --bench qdisc`.

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
    /// What the shaper-rate controller costs: one decision with its round-trip sampler fed
    /// FLOWS busy connections, as a share of one core at 20 decisions a second and in packets'
    /// worth of cake (measured in the same run).
    Autorate(AutorateArgs),
}

/// Arguments of `debloat bench autorate`.
#[derive(clap::Args, Debug)]
struct AutorateArgs {
    /// TCP connections crossing the shaper, each timed every tick.
    #[arg(long, default_value_t = 1000)]
    flows: u64,
    /// Decisions measured.
    #[arg(long, default_value_t = 2000)]
    ticks: u64,
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
    after_help = "Needs root (network namespaces) and two CPUs (or --one-cpu). Examples:\n  debloat bench gateway\n  debloat bench gateway --qdisc \"cake besteffort\" --trial 3\n  the kernel's cake beside the gateway's, in the kernel lab's one-CPU guest:\n  debloat lab bench --qdisc cake"
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
    /// Also measure the kernel's bridge with the same discipline on its ports (`tc qdisc
    /// replace`): the kernel's cost of the discipline beside debloat's (needs the kernel's
    /// module, e.g. inside `debloat lab`).
    #[arg(long)]
    kernel_qdisc: bool,
    /// Generator and forwarder on one CPU (automatic where there is only one, as in the kernel
    /// lab's guest); CPU per packet then includes the generator's share.
    #[arg(long)]
    one_cpu: bool,
    /// The gateway's packet I/O back ends to measure, each with a do-nothing forwarder
    /// (`gateway --passthrough`) as its ceiling: a comma list of packet and af_xdp.
    #[arg(long, value_delimiter = ',', default_value = "packet,af_xdp")]
    io: Vec<String>,
    /// Also measure `gateway --workers N` on each back end: all N on the forwarding core
    /// (the cost of sharding), and on N cores of their own where the machine has them (0: skip).
    #[arg(long, value_name = "N", default_value_t = 2)]
    workers: usize,
    /// Run both forwarders of the same-rate comparison (the do-nothing forwarder and the
    /// gateway, in turns) with `--realtime PRIO`, so that the kernel's NAPI thread on their core
    /// waits for them to sleep rather than preempting them (0: as a user runs them).
    #[arg(long, value_name = "PRIO", default_value_t = 0)]
    same_rate_realtime: u8,
}

/// Run the benchmark.
pub fn run(a: &Args) -> anyhow::Result<()> {
    match &a.what {
        What::Sim(s) => debloat_bench::sim::run(s.length),
        What::Autorate(a) => {
            let r = debloat_bench::autorate::run(a.flows, a.ticks);
            println!(
                "autorate (passive, {} connections): {:.1} µs a decision = {:.3} % of one core at 20 decisions/s (goal ≤ 1 %); {:.0} ns a packet through cake: a decision costs {:.0} packets",
                a.flows,
                r.decision_ns / 1e3,
                r.core_pct,
                r.cake_packet_ns,
                r.decision_ns / r.cake_packet_ns
            );
            Ok(())
        }
        What::Gateway(g) => debloat_bench::gateway::run(&debloat_bench::gateway::Config {
            qdisc: g.qdisc.clone(),
            trial: g.trial,
            pings: g.pings,
            loss: g.loss,
            latency_only: g.latency_only,
            realtime: g.realtime,
            same_rate_realtime: g.same_rate_realtime,
            no_busy_poll: g.no_busy_poll,
            kernel_qdisc: g.kernel_qdisc,
            one_cpu: g.one_cpu,
            exe: std::env::current_exe()?,
            io: g
                .io
                .iter()
                .map(|w| {
                    w.parse::<debloat_gateway::port::IoChoice>()
                        .map(|c| c.to_string())
                        .map_err(|e| anyhow::anyhow!("--io: {e}"))
                })
                .collect::<anyhow::Result<_>>()?,
            workers: g.workers,
        }),
    }
}
