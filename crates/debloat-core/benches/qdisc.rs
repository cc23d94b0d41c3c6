//! Cost of one enqueue + one dequeue, per discipline, with a standing queue spread over N active
//! flows. pfifo is the baseline: report the others as ratios to it from the same run
//! (BENCHMARKS.md). Run: `cargo bench -p debloat-core --bench qdisc`.
//!
//! Two variants for the flow-queueing disciplines: `…/sw_hash` packets arrive without a flow
//! hash, so the discipline hashes the 5-tuple (SipHash-1-3) for every packet; `…/skb_hash`
//! packets carry one, as Linux's `skb->hash` does when the NIC's RSS hash or the sending
//! socket's `sk_txhash` supplies it. CAKE's host modes still hash the addresses either way. The clock advances 1 µs per packet and the
//! standing queue is two packets per flow (at most 4096), so sojourns stay below target and the
//! AQMs run their full checks without dropping.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use debloat_core::classify::circuits::{self, TreeOptions};
use debloat_core::classify::qosify::{parse_uci, Classifier, Direction};
use debloat_core::classify::Classify;
use debloat_core::flow::FlowKey;
use debloat_core::packet::{PacketMeta, Record};
use debloat_core::{Dequeue, FlowHasher, Qdisc, QdiscSpec};
use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};

/// `n` flows. `hosts` = 0: every flow its own source and destination host (many clients, many
/// servers); otherwise the flows share `hosts` destination hosts (CAKE's host fairness then
/// divides each flow's quantum by the flows per host, and DRR does more rounds per packet).
fn flows(n: u32, cached_hash: bool, hosts: u32) -> Vec<PacketMeta> {
    let nic = FlowHasher::new([0x1234, 0x5678]);
    (0..n)
        .map(|i| {
            let src = IpAddr::V4(Ipv4Addr::new(198, 18, (i >> 8) as u8, i as u8));
            let d = if hosts == 0 { i } else { i % hosts };
            let dst = IpAddr::V4(Ipv4Addr::new(198, 19, (d >> 8) as u8, d as u8));
            let mut m = PacketMeta::new(1514, FlowKey::ip(src, dst, (i % 60000) as u16, 443, 17));
            m.dscp = [0u8, 8, 34, 46][(i % 4) as usize];
            if cached_hash {
                m.hash = nic.flow_hash(&m);
            }
            m
        })
        .collect()
}

struct Rig {
    q: Box<dyn Qdisc<Record>>,
    pkts: Vec<PacketMeta>,
    i: usize,
    now: u64,
    /// The marking stage in front, when measured with it.
    marker: Option<Box<dyn Classify>>,
    /// The direction packets take through the stage.
    dir: Direction,
}

/// qosify's shipped configuration and map file, plus a name rule (snooping on, nothing learnt
/// for these addresses, so every packet also misses the learnt-address table's lookup).
fn shipped_marker(share_hash: bool) -> Classifier {
    let uci = "config defaults\n\toption dscp_prio video\n\toption dscp_icmp +besteffort\n\toption dscp_default_udp besteffort\n\toption prio_max_avg_pkt_len 500\nconfig class besteffort\n\toption value CS0\nconfig class bulk\n\toption value LE\nconfig class video\n\toption value AF41\nconfig class voice\n\toption value CS6\n\toption bulk_trigger_pps 100\n\toption bulk_trigger_timeout 5\n\toption dscp_bulk CS0\n";
    let map = "tcp:53 voice\nudp:53 voice\nudp:123 voice\ntcp:22 +video\ntcp:80 +besteffort\ntcp:443 +besteffort\nudp:443 +besteffort\ndns:*.example.com video\n";
    let mut cfg = parse_uci("qosify", uci).expect("uci");
    cfg.add_map("00-defaults.conf", map).expect("map");
    let c = Classifier::new(cfg, 65_536, FlowHasher::new([1, 2]));
    if share_hash {
        c.sharing_hash()
    } else {
        c
    }
}

impl Rig {
    fn new(spec: &str, n: u32, cached_hash: bool, hosts: u32) -> Rig {
        let spec: QdiscSpec = spec.parse().expect("valid spec");
        let mut r = Rig {
            q: spec.build(FlowHasher::new([1, 2]), 3),
            pkts: flows(n, cached_hash, hosts),
            i: 0,
            now: 0,
            marker: None,
            dir: Direction::Up,
        };
        let standing = (2 * n as usize).min(4096);
        for _ in 0..standing {
            r.enqueue();
        }
        for _ in 0..20_000 {
            r.step();
        }
        r
    }

    #[inline]
    fn enqueue(&mut self) {
        let mut m = self.pkts[self.i];
        self.i = (self.i + 1) % self.pkts.len();
        if let Some(c) = self.marker.as_mut() {
            let _ = c.classify(&mut m, self.dir, self.now);
        }
        self.q.enqueue(Record::new(self.i as u64, m), self.now);
    }

    /// Dequeue until the discipline is empty, so that each later step's packet is enqueued
    /// and dequeued alone: the regime of a sender on an idle fast device (the kernel lab's
    /// measurement, `scripts/lab/circuits-cost.sh`).
    fn drain(&mut self) {
        for _ in 0..1_000_000 {
            match self.q.dequeue(self.now) {
                Dequeue::Packet(p) => {
                    black_box(p);
                }
                Dequeue::NotBefore(t) => self.now = t,
                Dequeue::Empty => break,
            }
            while let Some(d) = self.q.take_dropped() {
                black_box(d);
            }
        }
    }

    #[inline]
    fn step(&mut self) {
        self.now += 1_000;
        self.enqueue();
        match self.q.dequeue(self.now) {
            Dequeue::Packet(p) => {
                black_box(p);
            }
            Dequeue::NotBefore(t) => self.now = t,
            Dequeue::Empty => {}
        }
        while let Some(d) = self.q.take_dropped() {
            black_box(d);
        }
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("enqueue_dequeue");
    g.throughput(Throughput::Elements(1));
    let cases: &[(&str, &str, u32)] = &[
        ("pfifo", "pfifo limit 10000", 1024),
        ("codel", "codel limit 10000", 1024),
        ("pie", "pie limit 10000", 1024),
        ("pfifo_fast", "pfifo_fast txqueuelen 10000", 1024),
        ("tbf", "tbf rate 100Gbit burst 1mb limit 100mb", 1024),
        ("fq_codel", "fq_codel", 1),
        ("fq_codel", "fq_codel", 64),
        ("fq_codel", "fq_codel", 1024),
        ("fq_pie", "fq_pie", 1024),
        ("fq", "fq", 1024),
        ("dualpi2", "dualpi2 limit 10000", 1024),
        ("fq_codel", "fq_codel flows 65536", 65536),
        (
            "cake_besteffort_triple",
            "cake bandwidth 100Gbit besteffort triple-isolate",
            1024,
        ),
        (
            "cake_diffserv4_triple",
            "cake bandwidth 100Gbit diffserv4 triple-isolate",
            1024,
        ),
        (
            "cake_besteffort_flows",
            "cake bandwidth 100Gbit besteffort flows",
            1024,
        ),
    ];
    for &(name, spec, n) in cases {
        let fq = !["pfifo", "codel", "pie", "tbf"]
            .iter()
            .any(|x| name.starts_with(x));
        for cached in [false, true] {
            if cached && !fq {
                continue;
            }
            let label = match (fq, cached) {
                (false, _) => format!("{name}/{n}"),
                (true, false) => format!("{name}/sw_hash/{n}"),
                (true, true) => format!("{name}/skb_hash/{n}"),
            };
            let mut rig = Rig::new(spec, n, cached, 0);
            g.bench_function(BenchmarkId::from_parameter(label), |b| {
                b.iter(|| rig.step())
            });
        }
    }
    // Worst case for host fairness: 1024 flows to 8 servers, so each flow's quantum is 1514/128.
    let mut rig = Rig::new(
        "cake bandwidth 100Gbit besteffort triple-isolate",
        1024,
        false,
        8,
    );
    g.bench_function(
        BenchmarkId::from_parameter("cake_besteffort_triple/sw_hash/1024_flows_8_hosts"),
        |b| b.iter(|| rig.step()),
    );
    g.finish();
    // The marking stage's cost: cake diffserv4 alone and behind qosify's shipped rules, back to
    // back (issue 27's goal: at most +15 %). `sw_hash`: frames arrive without a hash, as the
    // gateway's do, and the stage hands the one it computes to cake (same hasher); `skb_hash`:
    // they carry a hash from elsewhere, which the stage cannot use for its own table.
    let mut g = c.benchmark_group("classify");
    g.throughput(Throughput::Elements(1));
    for cached in [false, true] {
        for with in [false, true] {
            let mut rig = Rig::new(
                "cake bandwidth 100Gbit diffserv4 triple-isolate",
                1024,
                cached,
                0,
            );
            if with {
                rig.marker = Some(Box::new(shipped_marker(!cached)));
                for _ in 0..20_000 {
                    rig.step();
                }
            }
            let label = if with {
                "qosify+cake_diffserv4"
            } else {
                "cake_diffserv4"
            };
            let hash = if cached { "skb_hash" } else { "sw_hash" };
            g.bench_function(
                BenchmarkId::from_parameter(format!("{label}/{hash}/1024")),
                |b| b.iter(|| rig.step()),
            );
        }
    }
    g.finish();
}

/// LibreQoS's scale: 50 sites × 10 access points, 10,000 circuits of 1 Gbit/s (so nothing
/// waits for tokens and every packet is scheduled), `cake diffserv4` leaves; circuit i at
/// 198.19.(i / 256).(i % 256), the addresses `flows` sends to.
fn ten_thousand_circuits(sqm: &str) -> (Box<dyn Qdisc<Record>>, Box<dyn Classify>) {
    let mut net = serde_json::Map::new();
    let mut aps = Vec::new();
    for s in 0..50 {
        let mut kids = serde_json::Map::new();
        for a in 0..10 {
            let name = format!("AP_{s}_{a}");
            kids.insert(name.clone(), serde_json::json!({"downloadBandwidthMbps": 100_000, "uploadBandwidthMbps": 100_000}));
            aps.push(name);
        }
        net.insert(format!("Site_{s}"), serde_json::json!({"downloadBandwidthMbps": 100_000, "uploadBandwidthMbps": 100_000, "children": kids}));
    }
    let mut csv = String::from("Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment,sqm\n");
    for i in 0..10_000u32 {
        let ap = &aps[i as usize % aps.len()];
        csv.push_str(&format!(
            "{i},c,{i},d,{ap},,198.19.{}.{},,1,1,1000,1000,,{sqm}\n",
            i >> 8,
            i & 255
        ));
    }
    let o = TreeOptions {
        down_bps: 100_000_000_000,
        up_bps: 100_000_000_000,
        release_idle: None,
    };
    let net = serde_json::Value::Object(net).to_string();
    let (plan, built) = circuits::load(("network.json", &net), ("ShapedDevices.csv", &csv), &o);
    let (t, stage) = built.unwrap_or_else(|| panic!("{:?}", plan.findings));
    let mut spec = t.down;
    spec.release_idle = Some(10_000_000_000); // build only the leaves traffic reaches
    (
        QdiscSpec::Htb(spec).build(FlowHasher::new([1, 2]), 3),
        Box::new(stage),
    )
}

/// One flat cake against the same traffic through 10,000 circuits' HTB tree, each active
/// circuit a cake (issue 43's goal: at most 1.5×). 1024 circuits active (flows to 1024 client
/// addresses: memory), the stage's longest-prefix lookup included.
fn bench_circuits(c: &mut Criterion) {
    // `circuits/`: a standing queue; `circuits_one_at_a_time/`: each packet enqueued into an
    // empty discipline and dequeued at once (the regime Linux is timed in,
    // scripts/lab/circuits-cost.sh).
    for (group, one_at_a_time) in [("circuits", false), ("circuits_one_at_a_time", true)] {
        let mut g = c.benchmark_group(group);
        g.throughput(Throughput::Elements(1));
        let flat = Rig::new(
            "cake bandwidth 100Gbit diffserv4 triple-isolate",
            1024,
            false,
            0,
        );
        // `cake`: LibreQoS's default leaf; `none`: a pfifo per circuit, HTB's and the
        // lookup's own cost.
        let rigs = [
            ("flat_cake_diffserv4/1024", None),
            ("htb_10000_circuits_cake/1024", Some("cake")),
            ("htb_10000_circuits_pfifo/1024", Some("none")),
        ];
        let mut flat = Some(flat);
        for (label, sqm) in rigs {
            let mut rig = match sqm {
                None => flat.take().expect("the flat rig once"),
                Some(sqm) => circuits_rig(sqm),
            };
            if one_at_a_time {
                rig.drain();
            }
            g.bench_function(BenchmarkId::from_parameter(label), |b| {
                b.iter(|| rig.step())
            });
        }
        g.finish();
    }
}

/// A rig sending to 1024 of the 10,000 circuits, warmed up (every active leaf built).
fn circuits_rig(sqm: &str) -> Rig {
    let mut rig = Rig::new("pfifo", 1024, false, 0);
    let (q, stage) = ten_thousand_circuits(sqm);
    rig.q = q;
    rig.marker = Some(stage);
    rig.dir = Direction::Down;
    for _ in 0..(2 * 1024 + 20_000) {
        rig.step();
    }
    rig
}

criterion_group!(benches, bench, bench_circuits);
criterion_main!(benches);
