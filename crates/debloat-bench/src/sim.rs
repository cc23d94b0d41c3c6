//! `debloat bench sim`: how fast the simulator runs — bottleneck packets simulated (packets
//! leaving the bottleneck link, both directions) per wall-clock second.

use anyhow::Result;
use debloat_sim::scenario::{Config, Test};
use debloat_sim::tcp::cc::Algorithm;

/// Run the benchmark with `length` simulated seconds of load per scenario, printing a line per
/// scenario.
pub fn run(length: f64) -> Result<()> {
    let mut rates = Vec::new();
    for (label, test, streams, wifi) in [
        ("4 CUBIC uploads (tcp_nup)", Test::TcpNUp, 4, false),
        ("rrul (4 up + 4 down, 4 probes)", Test::Rrul, 0, false),
        (
            "Wi-Fi: 4 stations (6.5, 65, 65, 65 Mbit/s), airtime + AQL, rtt_fair_up",
            Test::RttFairUp,
            0,
            true,
        ),
    ] {
        let cfg = Config {
            test,
            down_bps: 100_000_000,
            up_bps: 100_000_000,
            rtt_ns: 20_000_000,
            qdisc_up: "fq_codel".parse()?,
            qdisc_down: "fq_codel".parse()?,
            length_s: length,
            delay_s: 5.0,
            step_s: 0.2,
            streams,
            cc: Algorithm::Cubic,
            cc_turns: Vec::new(),
            ecn: false,
            host_qdisc: None,
            seed: 1,
            device: Default::default(),
            wire: Default::default(),
            wire_down: None,
            tcp_window: None,
            bbr_ack_aggregation: true,
            host_rtts_ns: Vec::new(),
            adaptive: Default::default(),
            classify: None,
            wifi: wifi.then(|| {
                let r = |m| debloat_core::airtime::PhyRate::ht(m);
                debloat_sim::wifi::WifiConfig::new(
                    &[r(0), r(7), r(7), r(7)],
                    debloat_sim::wifi::ApQueueing::Airtime,
                )
            }),
        };
        let t = std::time::Instant::now();
        let s = debloat_sim::run(&cfg, |_| {});
        let wall = t.elapsed().as_secs_f64();
        let pkts: u64 = s.queues.iter().map(|q| q.sent_pkts).sum();
        let where_ = if wifi {
            "over the air"
        } else {
            "through fq_codel at 100 Mbit/s both ways"
        };
        println!(
            "{label} {where_}, 20 ms, {} s of load (+10 s idle):\n  {pkts} bottleneck packets (both directions) in {wall:.2} s wall = {:.0} packets per wall-clock second ({:.0}x real time)",
            length,
            pkts as f64 / wall,
            (length + 10.0) / wall
        );
        rates.push(pkts as f64 / wall);
    }
    if let [_, rrul, wifi] = rates[..] {
        println!(
            "Wi-Fi costs {:.2}x the wired rrul's wall time per simulated packet (issue 7 asks for at most 2x)",
            rrul / wifi
        );
    }
    Ok(())
}
