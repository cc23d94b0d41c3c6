//! Property tests: for every discipline, under random traffic, random specs and random clocks,
//! every packet is exactly one of sent, dropped or queued — in packets and in bytes — and nothing
//! panics.

use debloat_core::flow::FlowKey;
use debloat_core::packet::{Ecn, PacketMeta, Record, TcpInfo};
use debloat_core::testutil::addr;
use debloat_core::{Dequeue, FlowHasher, Qdisc, QdiscSpec};
use proptest::prelude::*;
use std::collections::BTreeSet;

#[derive(Clone, Debug)]
enum Op {
    Enqueue {
        len: u32,
        flow: u8,
        host: u8,
        ecn: u8,
        dscp: u8,
        ack: Option<u16>,
    },
    Dequeue,
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (40u32..9000, 0u8..40, 0u8..6, 0u8..4, 0u8..64, proptest::option::of(0u16..50))
            .prop_map(|(len, flow, host, ecn, dscp, ack)| Op::Enqueue { len, flow, host, ecn, dscp, ack }),
        4 => Just(Op::Dequeue),
        2 => prop_oneof![0u64..10_000, 0u64..5_000_000, 0u64..2_000_000_000].prop_map(Op::Advance),
    ]
}

fn spec() -> impl Strategy<Value = String> {
    let time = prop_oneof![Just("1ms"), Just("5ms"), Just("20ms"), Just("100ms")];
    let rate = prop_oneof![
        Just("100kbit"),
        Just("1Mbit"),
        Just("20Mbit"),
        Just("1Gbit")
    ];
    prop_oneof![
        (1u32..50).prop_map(|l| format!("pfifo limit {l}")),
        (100u32..50_000).prop_map(|l| format!("bfifo limit {l}")),
        (1u32..20).prop_map(|l| format!("pfifo_fast txqueuelen {l}")),
        (1u32..60, 1u32..64, 1u32..3000, 0u32..100, any::<bool>()).prop_map(|(l, f, q, p, e)| {
            format!(
                "fq_pie limit {l} flows {f} quantum {q} ecn_prob {} {} tupdate 1ms",
                p.min(99),
                if e { "ecn" } else { "" }
            )
        }),
        (
            rate.clone(),
            1600u32..20_000,
            2000u32..60_000,
            prop_oneof![
                Just(""),
                Just("peakrate 2Gbit mtu 1600"),
                Just("child fq_codel limit 20")
            ]
        )
            .prop_map(|(r, b, l, x)| format!("tbf rate {r} burst {b} limit {l} {x}")),
        (1u32..50, time.clone(), any::<bool>()).prop_map(|(l, t, e)| format!(
            "codel limit {l} target {t} {}",
            if e { "ecn" } else { "noecn" }
        )),
        (
            1u32..60,
            1u32..64,
            0u32..3000,
            1u32..70,
            any::<bool>(),
            1u32..200_000
        )
            .prop_map(|(l, f, q, b, e, m)| {
                format!(
                    "fq_codel limit {l} flows {f} quantum {q} drop_batch {b} {} memory_limit {m}",
                    if e { "ecn" } else { "noecn" }
                )
            }),
        (
            prop_oneof![
                rate.clone().prop_map(|r| format!("bandwidth {r}")),
                Just("unlimited".to_string())
            ],
            prop_oneof![
                Just("besteffort"),
                Just("diffserv3"),
                Just("diffserv4"),
                Just("diffserv8"),
                Just("precedence")
            ],
            prop_oneof![
                Just("flowblind"),
                Just("srchost"),
                Just("dsthost"),
                Just("hosts"),
                Just("flows"),
                Just("dual-srchost"),
                Just("dual-dsthost"),
                Just("triple-isolate")
            ],
            prop_oneof![Just(""), Just("ack-filter"), Just("ack-filter-aggressive")],
            prop_oneof![
                Just(""),
                Just("ethernet"),
                Just("pppoe-vcmux"),
                Just("docsis"),
                Just("overhead -20 mpu 64")
            ],
            prop_oneof![Just(""), Just("ingress"), Just("wash")],
            4_000u32..200_000,
        )
            .prop_map(|(bw, ds, fm, af, oh, x, m)| format!(
                "cake {bw} {ds} {fm} {af} {oh} {x} memlimit {m}"
            )),
        (
            (1u32..60, 1u32..20, 1u32..5000, 1u32..20_000, 2u32..64),
            prop_oneof![Just(""), Just("maxrate 1Mbit"), Just("maxrate 50Mbit low_rate_threshold 2Mbit")],
            prop_oneof![Just("horizon 5ms horizon_cap"), Just("horizon 20ms"), Just("")],
            prop_oneof![Just(""), Just("ce_threshold 1ms"), Just("nopacing")],
            prop_oneof![Just(""), Just("priomap 2 2 1 1 0 0 0 0 1 1 1 1 2 2 2 2 weights 16384 50000 16384")],
        )
            .prop_map(|((l, fl, q, iq, b), r, h, c, p)| format!(
                "fq limit {l} flow_limit {fl} quantum {q} initial_quantum {iq} buckets {b} {r} {h} {c} {p}"
            )),
        (
            (1u32..60, 1u32..6, 0u32..101),
            prop_oneof![Just("1ms"), Just("16ms")],
            prop_oneof![Just("step_thresh 1ms"), Just("step_thresh 3p min_qlen_step 2")],
            prop_oneof![Just(""), Just("overflow"), Just("drop_enqueue"), Just("any_ect"), Just("no_split_gso")],
            prop_oneof![Just(""), Just("memlimit 20000"), Just("max_rtt 20ms")],
        )
            .prop_map(|((l, k, c), u, st, x, m)| format!(
                "dualpi2 limit {l} coupling_factor {k} classic_protection {c} tupdate {u} {st} {x} {m}"
            )),
        (
            (1u32..100, 1u32..50, 1u32..50, 0u8..8),
            prop_oneof![Just("pfifo limit 20"), Just("fq_codel limit 30"), Just("cake bandwidth 5Mbit"), Just("bfifo limit 6000")],
            prop_oneof![Just(""), Just("default 20"), Just("default 1"), Just("default 20 release_idle 1ms")],
        )
            .prop_map(|((root, a, b, pr), leaf, def)| format!(
                "htb {def} direct_qlen 10 class 1:1 rate {root}Mbit \
                 class 1:10 parent 1:1 rate {a}Mbit ceil {root}Mbit prio {pr} match src 198.18.0.1 match dscp 46 qdisc {leaf} \
                 class 1:20 parent 1:1 rate {b}00kbit ceil {root}Mbit qdisc {leaf} \
                 class 1:30 rate 1Mbit ceil 2Mbit match src 198.18.0.2 qdisc pfifo limit 5"
            )),
        (time.clone(), 1u32..50, any::<bool>())
            .prop_map(|(t, l, e)| format!("deadline {t} limit {l} {}", if e { "ecn" } else { "" })),
        (
            1u32..50,
            time,
            prop_oneof![Just("1ms"), Just("15ms"), Just("30ms")],
            0u32..33,
            0u32..33,
            any::<[bool; 3]>()
        )
            .prop_map(|(l, t, u, a, b, [e, by, dq])| format!(
                "pie limit {l} target {t} tupdate {u} alpha {a} beta {b} {} {} {}",
                if e { "ecn" } else { "noecn" },
                if by { "bytemode" } else { "" },
                if dq { "dq_rate_estimator" } else { "" }
            )),
    ]
}

fn packet(id: u64, len: u32, flow: u8, host: u8, ecn: u8, dscp: u8, ack: Option<u16>) -> Record {
    let proto = if ack.is_some() { 6 } else { 17 };
    let key = FlowKey::ip(
        addr(0, host),
        addr(1, flow % 7),
        1000 + u16::from(flow),
        80,
        proto,
    );
    let mut m = PacketMeta::new(len, key);
    m.ecn = Ecn::from_bits(ecn);
    m.dscp = dscp;
    m.priority = u32::from(dscp); // every pfifo_fast band
    Record::new(id, m).with_tcp(ack.map(|a| TcpInfo::pure_ack(u32::from(a) * 1000)))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn every_packet_is_sent_dropped_or_queued(spec in spec(), ops in proptest::collection::vec(op(), 1..400), key in any::<[u64; 2]>()) {
        let parsed: QdiscSpec = spec.parse().map_err(|e| TestCaseError::fail(format!("{spec}: {e}")))?;
        let mut q = parsed.build::<Record>(FlowHasher::new(key), key[0]);
        let (mut now, mut id) = (0u64, 0u64);
        let (mut in_pkts, mut in_bytes, mut out_pkts, mut out_bytes) = (0u64, 0u64, 0u64, 0u64);
        let mut seen = BTreeSet::new();
        let account = |p: &Record, seen: &mut BTreeSet<u64>, out_pkts: &mut u64, out_bytes: &mut u64| -> Result<(), TestCaseError> {
            prop_assert!(seen.insert(p.id), "packet {} came out twice", p.id);
            *out_pkts += 1;
            *out_bytes += u64::from(p.meta.len);
            Ok(())
        };
        for op in ops {
            match op {
                Op::Enqueue { len, flow, host, ecn, dscp, ack } => {
                    let mut p = packet(id, len, flow, host, ecn, dscp, ack);
                    if flow % 3 == 0 {
                        // A host's own socket, stamped up to 63 ms ahead (fq's pacing and horizon).
                        p.meta.socket = u32::from(flow) + 1;
                        p.meta.tstamp = now + u64::from(dscp) * 1_000_000;
                    }
                    id += 1;
                    in_pkts += 1;
                    in_bytes += u64::from(len);
                    q.enqueue(p, now);
                }
                Op::Dequeue => {
                    match q.dequeue(now) {
                        Dequeue::Packet(p) => account(&p, &mut seen, &mut out_pkts, &mut out_bytes)?,
                        Dequeue::NotBefore(t) => prop_assert!(t > now, "NotBefore({t}) at {now}"),
                        Dequeue::Empty => prop_assert_eq!(q.qlen(), 0, "Empty with packets queued"),
                    }
                }
                Op::Advance(d) => now += d,
            }
            while let Some(d) = q.take_dropped() {
                account(&d.packet, &mut seen, &mut out_pkts, &mut out_bytes)?;
            }
            prop_assert_eq!(in_pkts, out_pkts + q.qlen() as u64, "packets, spec {}", spec);
            prop_assert_eq!(in_bytes, out_bytes + q.backlog(), "bytes, spec {}", spec);
            let st = q.stats();
            prop_assert_eq!((st.qlen, st.backlog), (q.qlen() as u64, q.backlog()));
        }
        // Everything left drains (shaped disciplines release by the time they name).
        let mut guard = 0;
        while q.qlen() > 0 {
            match q.dequeue(now) {
                Dequeue::Packet(p) => account(&p, &mut seen, &mut out_pkts, &mut out_bytes)?,
                Dequeue::NotBefore(t) => now = t,
                Dequeue::Empty => prop_assert_eq!(q.qlen(), 0, "Empty with packets still queued"),
            }
            while let Some(d) = q.take_dropped() {
                account(&d.packet, &mut seen, &mut out_pkts, &mut out_bytes)?;
            }
            guard += 1;
            prop_assert!(guard < 100_000, "drain does not finish");
        }
        prop_assert_eq!((in_pkts, in_bytes), (out_pkts, out_bytes));
    }
}

/// One operation on mac80211's TXQs: enqueue or dequeue on a tin (tins 0..6, of which 6 is out
/// of range and must be dropped as overlimit), or let time pass.
#[derive(Clone, Debug)]
enum TxqOp {
    Enqueue {
        tin: u8,
        len: u32,
        flow: u8,
        ecn: u8,
    },
    Dequeue {
        tin: u8,
    },
    Advance(u64),
}

fn txq_op() -> impl Strategy<Value = TxqOp> {
    prop_oneof![
        5 => (0u8..7, 40u32..3000, 0u8..40, 0u8..4)
            .prop_map(|(tin, len, flow, ecn)| TxqOp::Enqueue { tin, len, flow, ecn }),
        4 => (0u8..7).prop_map(|tin| TxqOp::Dequeue { tin }),
        2 => prop_oneof![0u64..10_000, 0u64..50_000_000, 0u64..2_000_000_000].prop_map(TxqOp::Advance),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// mac80211's per-station TXQs (`airtime::MacFq`, not a `Qdisc`: a driver picks the tin)
    /// under the same rule: every packet is exactly one of dequeued, dropped or queued, the
    /// tins add up to the total, and everything left drains.
    #[test]
    fn every_packet_through_the_txqs_is_sent_dropped_or_queued(
        ops in proptest::collection::vec(txq_op(), 1..400),
        limit in 1u32..300,
        memory in 2_000u64..2_000_000,
        key in any::<[u64; 2]>(),
    ) {
        use debloat_core::airtime::txq::{MacFq, MacFqConfig};
        let cfg = MacFqConfig { limit, memory_limit: memory, ..MacFqConfig::default() };
        let mut q = MacFq::<Record>::new(6, cfg, FlowHasher::new(key));
        let (mut now, mut id, mut in_pkts, mut out_pkts) = (0u64, 0u64, 0u64, 0u64);
        let mut seen = BTreeSet::new();
        let mut out = |p: &Record, seen: &mut BTreeSet<u64>| -> Result<(), TestCaseError> {
            prop_assert!(seen.insert(p.id), "packet {} came out twice", p.id);
            out_pkts += 1;
            Ok(())
        };
        for op in ops {
            match op {
                TxqOp::Enqueue { tin, len, flow, ecn } => {
                    q.enqueue(usize::from(tin), packet(id, len, flow, 0, ecn, 0, None), now);
                    id += 1;
                    in_pkts += 1;
                }
                TxqOp::Dequeue { tin } => {
                    if let Some(p) = q.dequeue(usize::from(tin), now) {
                        out(&p, &mut seen)?;
                    }
                }
                TxqOp::Advance(d) => now += d,
            }
            while let Some(d) = q.take_dropped() {
                out(&d.packet, &mut seen)?;
            }
            let tins: usize = (0..6).map(|t| q.tin_len(t)).sum();
            prop_assert_eq!(tins, q.qlen());
        }
        for tin in 0..6 {
            while q.tin_len(tin) > 0 {
                if let Some(p) = q.dequeue(tin, now) {
                    out(&p, &mut seen)?;
                }
                while let Some(d) = q.take_dropped() {
                    out(&d.packet, &mut seen)?;
                }
            }
        }
        prop_assert_eq!(q.qlen(), 0);
        prop_assert_eq!(in_pkts, out_pkts);
    }
}
