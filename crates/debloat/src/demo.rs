//! `debloat demo`: the bufferbloat problem and its cure in one table.
//!
//! A 20 Mbit/s bottleneck (a cable-modem upstream shaped by the ISP) carries: host A with one
//! bulk upload, host B with four, both in bursts (2 s at full speed, 1 s idle, like the square
//! wave of flent's `tcp_2up_square`); a VoIP call (EF, 172 B every 20 ms); and a ping every
//! 100 ms. The same traffic, same seed, goes through pfifo (1000 packets, the Linux default),
//! fq_codel, and cake shaped at 19 Mbit/s, and the table compares delay and shares.
//!
//! The traffic is open loop: senders do not slow down when packets are dropped, so the bulk
//! numbers show each discipline's worst case. Real TCP arrives with the simulator (`debloat sim`).

use crate::summary::{mbps, ms, percentile};
use anyhow::Result;
use debloat_core::bottleneck::{Bottleneck, Event};
use debloat_core::flow::FlowKey;
use debloat_core::packet::{Ecn, PacketMeta, Record};
use debloat_core::{FlowHasher, QdiscSpec};
use std::net::{IpAddr, Ipv4Addr};

/// Arguments of `debloat demo`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Simulated seconds of traffic.
    #[arg(long, default_value_t = 30)]
    seconds: u64,
    /// Seed for the flow-hash key and the disciplines' randomness.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

const LINK_BPS: u64 = 20_000_000;
const SEC: u64 = 1_000_000_000;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    BulkA,
    BulkB,
    Voip,
    Ping,
}

struct Src {
    kind: Kind,
    flow: FlowKey,
    len: u32,
    interval_ns: u64,
    dscp: u8,
    bursty: bool,
}

fn ip(net: u8, host: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(198, 18, net, host))
}

fn sources() -> Vec<Src> {
    let bulk = |kind, host: u8, port: u16| Src {
        kind,
        flow: FlowKey::ip(ip(1, host), ip(2, 10 + port as u8), 40000 + port, 443, 6),
        len: 1514,
        // Each bulk flow offers 12 Mbit/s in its bursts: 60 Mbit/s in all, three times the link.
        interval_ns: 1514 * 8 * SEC / 12_000_000,
        dscp: 0,
        bursty: true,
    };
    let mut v = vec![bulk(Kind::BulkA, 2, 1)];
    for p in 2..=5 {
        v.push(bulk(Kind::BulkB, 3, p));
    }
    v.push(Src {
        kind: Kind::Voip,
        flow: FlowKey::ip(ip(1, 4), ip(2, 50), 5060, 5060, 17),
        len: 172,
        interval_ns: 20_000_000,
        dscp: 46,
        bursty: false,
    });
    v.push(Src {
        kind: Kind::Ping,
        flow: FlowKey::ip(ip(1, 4), ip(2, 51), 0, 0, 1),
        len: 98,
        interval_ns: 100_000_000,
        dscp: 0,
        bursty: false,
    });
    v
}

/// Per-configuration results.
struct Outcome {
    name: String,
    delivered: [u64; 4],
    drops: u64,
    sojourn: [Vec<u64>; 4],
}

fn on(t: u64) -> bool {
    t % (3 * SEC) < 2 * SEC
}

fn simulate(spec: &QdiscSpec, name: &str, secs: u64, seed: u64) -> Outcome {
    let q = spec.build::<Record>(FlowHasher::new([seed, !seed]), seed);
    let mut link = Bottleneck::new(q, Some(LINK_BPS));
    let srcs = sources();
    let kinds: Vec<Kind> = srcs.iter().map(|s| s.kind).collect();
    let mut res = Outcome {
        name: name.into(),
        delivered: [0; 4],
        drops: 0,
        sojourn: Default::default(),
    };
    let slot = |k: Kind| k as usize;
    let warmup = SEC;
    let end = secs * SEC;
    // Stagger the sources so they do not fire in lockstep.
    let mut next: Vec<u64> = (0..srcs.len() as u64).map(|i| i * 997_000).collect();
    let mut id = 0u64;
    {
        let mut out = |e: Event<Record>| match e {
            Event::Sent { packet, start, .. } => {
                let k = kinds[(packet.id >> 40) as usize];
                if start >= warmup {
                    res.delivered[slot(k)] += u64::from(packet.meta.len);
                    res.sojourn[slot(k)].push(start - packet.meta.enqueue_ns);
                }
            }
            Event::Dropped { .. } => res.drops += 1,
        };
        while let Some((i, &t)) = next.iter().enumerate().min_by_key(|x| (*x.1, x.0)) {
            if t >= end {
                break;
            }
            let s = &srcs[i];
            next[i] = t + s.interval_ns;
            if s.bursty && !on(t) {
                continue;
            }
            let mut m = PacketMeta::new(s.len, s.flow);
            m.dscp = s.dscp;
            m.ecn = Ecn::NotEct;
            link.arrive(Record::new(((i as u64) << 40) | id, m), t, &mut out);
            id += 1;
        }
        link.advance_to(end, &mut out);
    }
    for v in res.sojourn.iter_mut() {
        v.sort_unstable();
    }
    res
}

/// Run the demo and print the comparison.
pub fn run(a: &Args) -> Result<()> {
    let secs = a.seconds.max(3);
    let configs = [
        ("pfifo (Linux default)", "pfifo limit 1000"),
        ("fq_codel", "fq_codel"),
        (
            "cake 19Mbit",
            "cake bandwidth 19Mbit diffserv3 triple-isolate",
        ),
    ];
    println!("debloat demo: {secs} s of synthetic overload on a 20 Mbit/s bottleneck");
    println!("  host A: 1 bulk upload, host B: 4 bulk uploads (12 Mbit/s each, 2 s on / 1 s off)");
    println!("  a VoIP call (EF, 172 B every 20 ms) and a ping every 100 ms share the link\n");
    let mut rows = Vec::new();
    for (name, s) in configs {
        let spec: QdiscSpec = s.parse()?;
        rows.push(simulate(&spec, name, secs, a.seed));
    }
    let dur = (secs - 1) * SEC;
    println!(
        "{:<22} {:>10} {:>9} {:>9} {:>11} {:>11} {:>11} {:>11} {:>8}",
        "qdisc",
        "total",
        "host A",
        "host B",
        "ping p50",
        "ping p99",
        "VoIP p99",
        "bulk p99",
        "drops"
    );
    println!(
        "{:<22} {:>10} {:>9} {:>9} {:>11} {:>11} {:>11} {:>11} {:>8}",
        "", "Mbit/s", "Mbit/s", "Mbit/s", "ms", "ms", "ms", "ms", "pkts"
    );
    for r in &rows {
        let total: u64 = r.delivered.iter().sum();
        let p = |k: Kind, q: f64| {
            percentile(&r.sojourn[k as usize], q)
                .map(ms)
                .unwrap_or_else(|| "-".into())
        };
        let mut bulk: Vec<u64> = r.sojourn[Kind::BulkA as usize]
            .iter()
            .chain(&r.sojourn[Kind::BulkB as usize])
            .copied()
            .collect();
        bulk.sort_unstable();
        println!(
            "{:<22} {:>10.2} {:>9.2} {:>9.2} {:>11} {:>11} {:>11} {:>11} {:>8}",
            r.name,
            mbps(total, dur),
            mbps(r.delivered[Kind::BulkA as usize], dur),
            mbps(r.delivered[Kind::BulkB as usize], dur),
            p(Kind::Ping, 50.0),
            p(Kind::Ping, 99.0),
            p(Kind::Voip, 99.0),
            percentile(&bulk, 99.0)
                .map(ms)
                .unwrap_or_else(|| "-".into()),
            r.drops
        );
    }
    println!("\nDelays are time spent queued at the bottleneck. pfifo lets the bulk uploads fill its 1000");
    println!("packets of buffer, and every ping and voice packet waits behind them. fq_codel and cake serve");
    println!(
        "sparse flows first, so ping and VoIP wait about one packet time however full the link is;"
    );
    println!(
        "cake also shares the link by host (A gets as much as B, though B runs four uploads)."
    );
    println!("These uploads never slow down when dropped (open loop), so their own queues stay long under");
    println!("every discipline: AQM needs senders that respond. TCP arrives with the simulator.");
    Ok(())
}
