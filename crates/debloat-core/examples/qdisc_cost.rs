//! Drive one discipline for N enqueue+dequeue pairs over 1024 active flows, for measuring its
//! per-packet cost in instructions (stable on a noisy machine) with valgrind:
//!
//! ```sh
//! cargo build --release -p debloat-core --example qdisc_cost
//! scripts/instructions-per-packet.sh "fq_codel"
//! ```
//!
//! Usage: `qdisc_cost "<spec>" <pairs> [standing packets, default 2048]`. Packets carry a cached
//! flow hash (as Linux's `skb->hash` from the NIC or socket); each flow is its own host pair.

use debloat_core::flow::FlowKey;
use debloat_core::packet::{PacketMeta, Record};
use debloat_core::{Dequeue, FlowHasher, Qdisc, QdiscSpec};
use std::net::{IpAddr, Ipv4Addr};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: qdisc_cost \"<spec>\" <pairs> [standing]");
        std::process::exit(2);
    }
    let spec: QdiscSpec = match args[1].parse() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    let pairs: usize = args[2].parse().unwrap_or(100_000);
    let standing: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(2048);
    let nic = FlowHasher::new([9, 9]);
    let flows: Vec<PacketMeta> = (0..1024u32)
        .map(|i| {
            let src = IpAddr::V4(Ipv4Addr::new(198, 18, (i >> 8) as u8, i as u8));
            let dst = IpAddr::V4(Ipv4Addr::new(198, 19, (i >> 8) as u8, i as u8));
            let mut m = PacketMeta::new(1514, FlowKey::ip(src, dst, i as u16, 443, 17));
            m.hash = nic.flow_hash(&m);
            m
        })
        .collect();
    let mut q = spec.build::<Record>(FlowHasher::new([1, 2]), 3);
    let (mut now, mut i, mut sent) = (0u64, 0usize, 0u64);
    for _ in 0..standing {
        q.enqueue(Record::new(0, flows[i % 1024]), now);
        i += 1;
    }
    for _ in 0..pairs {
        now += 1000;
        q.enqueue(Record::new(0, flows[i % 1024]), now);
        i += 1;
        if let Dequeue::Packet(p) = q.dequeue(now) {
            sent += u64::from(p.meta.len);
        }
        while q.take_dropped().is_some() {}
    }
    println!("{sent} bytes sent");
}
