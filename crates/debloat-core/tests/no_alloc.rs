//! No heap allocation per packet in steady state: after a warm-up that sizes every queue, a
//! counting allocator sees zero allocations over 200,000 enqueue+dequeue pairs.
//! Only allocations made on the test's own thread are counted: the test harness's threads
//! (output capture, the slow-test timer) may allocate at any moment and are not the qdisc's.

#![allow(unsafe_code)] // a counting global allocator needs `unsafe impl GlobalAlloc`; the library itself forbids unsafe.

use debloat_core::classify::LinkType;
use debloat_core::packet::{PacketMeta, Record};
use debloat_core::testutil::udp_flow;
use debloat_core::{Dequeue, FlowHasher, Qdisc, QdiscSpec};
use std::alloc::{GlobalAlloc, Layout, System};

struct Counting;

thread_local! {
    /// Set on the thread whose allocations are counted (const-initialised: no allocation).
    static COUNTED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Allocations made on this thread while counted (per thread: the tests run in parallel).
    static ALLOCS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn allocs() -> u64 {
    ALLOCS.with(std::cell::Cell::get)
}

fn count() {
    if COUNTED.try_with(std::cell::Cell::get).unwrap_or(false) {
        let _ = ALLOCS.try_with(|n| n.set(n.get() + 1));
    }
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        count();
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static A: Counting = Counting;

fn cycle(q: &mut dyn Qdisc<Record>, flows: &[PacketMeta], rounds: usize, now: &mut u64) {
    for r in 0..rounds {
        let m = flows[r % flows.len()];
        q.enqueue(Record::new(r as u64, m), *now);
        *now += 1_000;
        if let Dequeue::NotBefore(t) = q.dequeue(*now) {
            *now = t;
            let _ = q.dequeue(*now);
        }
        while q.take_dropped().is_some() {}
    }
}

#[test]
fn steady_state_enqueue_dequeue_does_not_allocate() {
    let specs = [
        "pfifo",
        "codel",
        "fq_codel",
        "cake bandwidth 1Gbit besteffort flows",
        "cake bandwidth 1Gbit diffserv4 triple-isolate",
        "cake unlimited diffserv3 ack-filter",
        "deadline 5ms",
        "pie",
        "pie ecn bytemode dq_rate_estimator",
        "pfifo_fast",
        "fq_pie",
        "fq",
        "fq maxrate 100Mbit",
        "dualpi2",
        "dualpi2 any_ect drop_enqueue",
        "tbf rate 1Gbit burst 100kb latency 50ms",
        "htb default 20 class 1:1 rate 1Gbit \
         class 1:10 parent 1:1 rate 100Mbit ceil 1Gbit match src 198.18.0.7 qdisc fq_codel \
         class 1:20 parent 1:1 rate 500Mbit ceil 1Gbit qdisc cake besteffort",
    ];
    COUNTED.with(|c| c.set(true));
    let flows: Vec<PacketMeta> = (0..1024u32)
        .map(|i| PacketMeta::new(1514, udp_flow((i % 50) as u8, (i % 13) as u8, i as u16)))
        .collect();
    for s in specs {
        let spec: QdiscSpec = s.parse().expect("valid");
        let mut q = spec.build::<Record>(FlowHasher::new([1, 2]), 3);
        let mut now = 0;
        // Warm-up: a standing queue of ~200 packets across all flows, then steady cycling.
        for i in 0..200u64 {
            q.enqueue(Record::new(i, flows[i as usize % flows.len()]), now);
        }
        cycle(q.as_mut(), &flows, 50_000, &mut now);
        let before = allocs();
        cycle(q.as_mut(), &flows, 200_000, &mut now);
        let n = allocs() - before;
        assert_eq!(n, 0, "{s}: {n} allocations in steady state");
    }
}

/// mac80211's TXQs (`airtime::MacFq`, driven per station) allocate nothing in steady state either.
#[test]
fn steady_state_txqs_do_not_allocate() {
    use debloat_core::airtime::txq::{MacFq, MacFqConfig};
    COUNTED.with(|c| c.set(true));
    let flows: Vec<PacketMeta> = (0..1024u32)
        .map(|i| PacketMeta::new(1514, udp_flow((i % 50) as u8, (i % 13) as u8, i as u16)))
        .collect();
    let mut q = MacFq::<Record>::new(8, MacFqConfig::default(), FlowHasher::new([1, 2]));
    let mut now = 0u64;
    let run = |q: &mut MacFq<Record>, rounds: usize, now: &mut u64| {
        for r in 0..rounds {
            q.enqueue(r % 8, Record::new(r as u64, flows[r % flows.len()]), *now);
            *now += 1_000;
            let _ = q.dequeue((r + 3) % 8, *now);
            while q.take_dropped().is_some() {}
        }
    };
    for i in 0..200u64 {
        q.enqueue(
            i as usize % 8,
            Record::new(i, flows[i as usize % flows.len()]),
            now,
        );
    }
    run(&mut q, 50_000, &mut now);
    let before = allocs();
    run(&mut q, 200_000, &mut now);
    let n = allocs() - before;
    assert_eq!(n, 0, "MacFq: {n} allocations in steady state");
}

/// The marking stage (qosify's rules with bulk and priority detection, both directions)
/// allocates nothing per packet either.
#[test]
fn the_marking_stage_does_not_allocate() {
    use debloat_core::classify::qosify::{parse_uci, Classifier, Direction};
    COUNTED.with(|c| c.set(true));
    let uci = "config defaults\n\toption dscp_prio video\n\toption dscp_default_udp besteffort\n\toption prio_max_avg_pkt_len 500\n\toption bulk_trigger_pps 50\n\toption dscp_bulk bulk\nconfig class besteffort\n\toption value CS0\nconfig class bulk\n\toption value LE\nconfig class video\n\toption value AF41\nconfig class voice\n\toption value CS6\n\toption bulk_trigger_pps 100\n\toption dscp_bulk CS0\n";
    let mut cfg = parse_uci("q", uci).expect("uci");
    cfg.add_map(
        "m",
        "udp:53 voice\ntcp:22 +video\n198.18.0.0/24 bulk\ndns:*.example.com video\n",
    )
    .expect("map");
    let mut c = Classifier::new(cfg, 4096, FlowHasher::new([1, 2]));
    // Names learnt from DNS answers for half the destinations (before counting: an answer is
    // parsed with allocations; the packets that then hit learnt addresses must not allocate).
    for d in 0..7u8 {
        let dst = udp_flow(0, d, 1);
        let debloat_core::flow::FlowKey::Ip {
            dst: std::net::IpAddr::V4(a),
            ..
        } = dst
        else {
            unreachable!("udp_flow is IPv4")
        };
        let f = dns_frame(&format!("h{d}.example.com"), a.octets());
        let meta = debloat_core::classify::classify(&f, f.len() as u32, LinkType::Ethernet)
            .expect("frame");
        c.snoop(&f, LinkType::Ethernet, &meta.flow, 0);
    }
    assert_eq!(c.counters().dns.held, 7);
    let flows: Vec<PacketMeta> = (0..1024u32)
        .map(|i| {
            PacketMeta::new(
                60 + (i % 1400),
                udp_flow((i % 50) as u8, (i % 13) as u8, i as u16),
            )
        })
        .collect();
    let mut now = 0u64;
    let mut run = |c: &mut Classifier, rounds: usize| {
        for r in 0..rounds {
            let mut m = flows[r % flows.len()];
            let dir = if r % 3 == 0 {
                Direction::Down
            } else {
                Direction::Up
            };
            if dir == Direction::Down {
                m.flow = m.flow.reversed();
            }
            c.mark(&mut m, dir, now);
            now += 100_000;
        }
    };
    run(&mut c, 50_000);
    let before = allocs();
    run(&mut c, 200_000);
    let n = allocs() - before;
    assert_eq!(n, 0, "the marking stage: {n} allocations in steady state");
    assert!(c.counters().rules[3] > 0, "learnt addresses were used");
}

/// An Ethernet frame from 198.18.2.53:53 answering `host` with `addr`.
fn dns_frame(host: &str, addr: [u8; 4]) -> Vec<u8> {
    use simple_dns::rdata::{RData, A};
    use simple_dns::{Name, Packet, Question, ResourceRecord, CLASS, TYPE};
    let mut p = Packet::new_reply(1);
    let n = Name::new_unchecked(host);
    p.questions.push(Question::new(
        n.clone(),
        TYPE::A.into(),
        CLASS::IN.into(),
        false,
    ));
    let a = RData::A(A {
        address: u32::from_be_bytes(addr),
    });
    p.answers.push(ResourceRecord::new(n, CLASS::IN, 3600, a));
    let msg = p.build_bytes_vec().expect("dns");
    let mut f = Vec::new();
    etherparse::PacketBuilder::ethernet2([4; 6], [2; 6])
        .ipv4([198, 18, 2, 53], [198, 18, 1, 2], 64)
        .udp(53, 40053)
        .write(&mut f, &msg)
        .expect("frame");
    f
}
