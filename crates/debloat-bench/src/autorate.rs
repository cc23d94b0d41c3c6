//! What a shaper-rate controller costs: the passive controller with its round-trip sampler fed
//! a busy link's traffic — `flows` TCP connections, each sending a pair of segments and getting
//! their ACK back every tick — and deciding 20 times a second. The baseline, measured in the
//! same run, is cake's enqueue and dequeue of one packet: a decision's cost is stated both as a
//! share of one core at 20 decisions a second and as packets' worth of cake.

use debloat_core::autorate::sampler::Sampler;
use debloat_core::autorate::{Bounds, Mode, Tick};
use debloat_core::packet::{PacketMeta, Record};
use debloat_core::testutil::udp_flow;
use debloat_core::{Dequeue, FlowHasher, Qdisc, QdiscSpec};
use std::time::Instant;

/// The measurement.
#[derive(Debug, Clone, Copy)]
pub struct Result {
    /// One tick of the sampler and the controller (the traffic's samples included), ns.
    pub decision_ns: f64,
    /// One packet through cake (enqueue + dequeue), ns.
    pub cake_packet_ns: f64,
    /// Share of one core at 20 decisions a second, percent.
    pub core_pct: f64,
}

const MS: u64 = 1_000_000;

/// Measure with `flows` connections for `ticks` decisions.
pub fn run(flows: u64, ticks: u64) -> Result {
    let mut s = Sampler::default();
    let b = Bounds::parse("min=1mbit,base=10mbit,max=100mbit").expect("built-in bounds");
    let mut c = Mode::Passive.build(b, None);
    let start = Instant::now();
    for t in 1..=ticks {
        let now = t * 50 * MS;
        for f in 0..flows {
            let ts = t * 2;
            s.on_data(f, ts, now);
            s.on_data(f, ts + 1, now + MS);
            s.on_ack(f, ts + 1, t * 2896, now + 20 * MS);
        }
        let (min_rtt_ns, acked_bytes) = s.take(now + 50 * MS);
        c.on_tick(
            now + 50 * MS,
            &Tick {
                interval_ns: 50 * MS,
                sent_bytes: 62_500,
                acked_bytes,
                min_rtt_ns,
                backlog_bytes: 1514,
            },
        );
    }
    let decision_ns = start.elapsed().as_nanos() as f64 / ticks as f64;
    std::hint::black_box(c.rate_bps());
    let cake_packet_ns = cake_cost(200_000);
    Result {
        decision_ns,
        cake_packet_ns,
        core_pct: decision_ns * 20.0 / 1e9 * 100.0,
    }
}

fn cake_cost(packets: u64) -> f64 {
    let spec: QdiscSpec = "cake bandwidth 1gbit".parse().expect("built-in spec");
    let mut q = spec.build::<Record>(FlowHasher::new([3, 4]), 1);
    let start = Instant::now();
    for i in 0..packets {
        let now = i * 12_000;
        q.enqueue(
            Record::new(i, PacketMeta::new(1514, udp_flow(1, 2, (i % 64) as u16))),
            now,
        );
        if let Dequeue::Packet(p) = q.dequeue(now) {
            std::hint::black_box(p);
        }
        while q.take_dropped().is_some() {}
    }
    start.elapsed().as_nanos() as f64 / packets as f64
}
