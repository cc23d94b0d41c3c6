//! The path's behaviour: replacing a discipline, loss at the link's entry.

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod replace_tests {
    use super::super::*;
    use crate::testutil::{addr, pkt_in};
    use crate::QdiscSpec;
    use crate::{FlowHasher, Record};

    /// Every pair of disciplines: what one holds moves into the other, each flow's packets in
    /// order, and the path's accounting stays exact.
    #[test]
    fn a_replaced_discipline_hands_over_every_packet_in_flow_order() {
        let specs = [
            "pfifo limit 1000",
            "bfifo limit 2000000",
            "codel",
            "fq_codel",
            "cake bandwidth 10Mbit diffserv4",
            "cake bandwidth 5Mbit besteffort flows",
            "deadline 2s",
        ];
        for from in specs {
            for to in specs {
                let build = |s: &str| -> Box<dyn Qdisc<Record>> {
                    s.parse::<QdiscSpec>()
                        .unwrap()
                        .build(FlowHasher::new([1, 2]), 3)
                };
                let emu: Emulation = "rate 1Mbit".parse().unwrap();
                let mut p = DataPath::new(build(from), emu, 0, 1);
                let mut sent = Vec::new();
                let mut rec = |e: Event<'_, Record>| {
                    if let Event::Delivered { packet, .. } = e {
                        sent.push(packet);
                    }
                };
                // 4 flows × 50 packets, all at t = 0: the 1 Mbit/s link holds them queued.
                for i in 0..200u64 {
                    let f =
                        crate::flow::FlowKey::ip(addr(0, (i % 4) as u8), addr(1, 1), 1000, 80, 17);
                    let mut r = pkt_in(i, 1000, f);
                    r.meta.dscp = [0, 8, 34, 46][(i % 4) as usize];
                    p.arrive(r, 0, &mut rec);
                }
                let queued = p.qdisc().qlen();
                let (_old, moved, refused) = p.replace_qdisc(build(to), 1_000_000, &mut rec);
                assert_eq!(moved as usize, queued, "{from} → {to}");
                assert_eq!(refused, 0, "{from} → {to}");
                assert_eq!(p.counters().qdisc_dropped, 0, "{from} → {to}");
                assert!(p.accounted(), "{from} → {to}");
                p.finish(&mut rec);
                assert!(p.accounted(), "{from} → {to}");
                // Afterwards the new discipline's AQM may drop some: sent or dropped, never lost.
                let dropped = p.counters().qdisc_dropped as usize;
                assert_eq!(sent.len() + dropped, 200, "{from} → {to}");
                for flow in 0..4u64 {
                    let ids: Vec<u64> = sent
                        .iter()
                        .map(|r| r.id)
                        .filter(|id| id % 4 == flow)
                        .collect();
                    assert!(
                        ids.windows(2).all(|w| w[0] < w[1]),
                        "{from} → {to}: flow {flow} {ids:?}"
                    );
                }
            }
        }
    }

    /// The old discipline's own drops while the path runs up to the change (CoDel's, at
    /// dequeue) are not refusals by the new one; a smaller limit's are.
    #[test]
    fn only_the_new_disciplines_drops_count_as_refused() {
        for (from, to, expect_refused) in [
            ("codel", "pfifo limit 1000", None),
            ("fq_codel", "cake bandwidth 10Mbit", None),
            ("fq_codel", "pfifo limit 10", Some(10)),
        ] {
            let build = |s: &str| -> Box<dyn Qdisc<Record>> {
                s.parse::<QdiscSpec>()
                    .unwrap()
                    .build(FlowHasher::new([1, 2]), 3)
            };
            let mut p = DataPath::new(build(from), "rate 1Mbit".parse().unwrap(), 0, 1);
            let mut ignore = |_: Event<'_, Record>| {};
            let f = crate::flow::FlowKey::ip(addr(0, 1), addr(1, 1), 1000, 80, 17);
            // One flow, 200 × 1000 bytes at t = 0: 8 ms each on the wire, so by 600 ms the
            // head has waited far past CoDel's target for more than an interval.
            for i in 0..200u64 {
                p.arrive(pkt_in(i, 1000, f), 0, &mut ignore);
            }
            let (_old, moved, refused) = p.replace_qdisc(build(to), 600_000_000, &mut ignore);
            let aqm = p.counters().qdisc_dropped - refused;
            assert!(aqm > 0, "{from}: CoDel dropped nothing before the change");
            let want = expect_refused.map_or(0, |keep| moved - keep);
            assert_eq!(
                refused, want,
                "{from} → {to}: {moved} moved, {aqm} AQM drops"
            );
            assert!(p.accounted(), "{from} → {to}");
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod loss_tests {
    use super::super::*;
    use crate::testutil::pkt;
    use crate::{FlowHasher, QdiscSpec, Record};

    fn path(words: &str) -> DataPath<Record, Box<dyn Qdisc<Record>>> {
        let q = "pfifo limit 1000".parse::<QdiscSpec>().unwrap();
        DataPath::new(
            q.build(FlowHasher::new([1, 2]), 3),
            words.parse().unwrap(),
            0,
            7,
        )
    }

    /// Without a buffer the loss model stands between the discipline and the transmitter: a
    /// lost packet leaves the queue and costs the link no time (netem loses at enqueue).
    #[test]
    fn a_lost_packet_leaves_the_queue_without_taking_link_time() {
        let mut p = path("rate 8Mbit loss 30%");
        let (mut last_end, mut sent, mut lost) = (0, 0u64, 0u64);
        let mut rec = |e: Event<'_, Record>| match e {
            Event::Sent { end, .. } => (last_end, sent) = (end, sent + 1),
            Event::Dropped {
                reason: PathDrop::Lost,
                ..
            } => lost += 1,
            _ => {}
        };
        for i in 0..1000 {
            p.arrive(pkt(i, 1000), 0, &mut rec);
        }
        p.finish(&mut rec);
        assert!(p.accounted());
        assert_eq!(sent + lost, 1000);
        assert_eq!(lost, p.wire_counters().lost);
        assert!((250..350).contains(&lost), "{lost}");
        // 1000 bytes at 8 Mbit/s: 1 ms each, for the survivors only.
        assert_eq!(last_end, sent * 1_000_000);
    }

    /// With a buffer (netem's own queue) the loss model meets a packet at the buffer's entry,
    /// before its tail drop, as netem draws loss before it looks at its `limit`.
    #[test]
    fn with_a_buffer_loss_comes_before_the_tail_drop() {
        let mut p = path("rate 8Mbit loss 100% buffer 5");
        let mut rec = |_: Event<'_, Record>| {};
        for i in 0..100 {
            p.arrive(pkt(i, 1000), 0, &mut rec);
        }
        p.finish(&mut rec);
        let (c, w) = (p.counters(), p.wire_counters());
        assert_eq!((w.lost, c.buffer_dropped, w.delivered), (100, 0, 0));
        assert!(p.accounted());
        let mut p = path("rate 8Mbit buffer 5");
        for i in 0..100 {
            p.arrive(pkt(i, 1000), 0, &mut rec);
        }
        p.finish(&mut rec);
        assert_eq!(
            p.counters().buffer_dropped,
            94,
            "one on the link, five in the buffer"
        );
    }
}
