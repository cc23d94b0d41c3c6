//! A link whose capacity follows a trace, behind a discipline: the modem's FIFO fills and
//! drops when the discipline does not shape below the trace, every packet is accounted for,
//! and a shaper below the trace keeps the modem empty.

mod common;

use common::{qdisc, run_path, Source};
use debloat_core::link::{Modem, Trace};
use debloat_core::qdisc::fifo::Limit;
use proptest::prelude::*;
use std::sync::Arc;

fn modem(text: &str, limit: Limit) -> Modem {
    Modem::new(Arc::new(Trace::parse(text).expect("trace")), limit)
}

#[test]
fn an_unshaped_queue_forms_in_the_modem_and_overflows_there() {
    // 12 Mbit/s (one opportunity per ms) under 20 Mbit/s of full-size UDP for 2 s.
    let src = [Source::udp("a", 1, 2, 1, 1514, 20_000_000)];
    let (res, path) = run_path(
        qdisc("pfifo limit 1000"),
        Some(modem("1\n", Limit::Packets(50))),
        &src,
        2_000_000_000,
    );
    let m = path.link().modem().expect("modem").counters();
    // Delivered: one packet per opportunity while the load lasts (1 to 1999 ms), then the 50
    // the full FIFO held.
    assert_eq!(res.delivered, 1999 + 50);
    assert_eq!(m.max_packets, 50);
    assert_eq!(res.qdisc_dropped, 0);
    assert_eq!(m.dropped + m.admitted, res.sent);
    assert!(path.accounted());
    // Packets wait up to 50 opportunities in the modem: the last ones arrive ≈ 50 ms late.
    assert!(res.max_delay_ns >= 49_000_000, "{}", res.max_delay_ns);
}

#[test]
fn a_shaper_below_the_trace_keeps_the_modem_empty() {
    let src = [Source::udp("a", 1, 2, 1, 1514, 20_000_000)];
    let (res, path) = run_path(
        qdisc("cake bandwidth 10mbit besteffort"),
        Some(modem("1\n", Limit::Packets(50))),
        &src,
        2_000_000_000,
    );
    let m = path.link().modem().expect("modem").counters();
    assert_eq!(m.dropped, 0);
    assert!(m.max_packets <= 2, "{}", m.max_packets);
    assert!(res.qdisc_dropped > 0);
    assert!(path.accounted());
    assert!(res.max_delay_ns < 3_000_000, "{}", res.max_delay_ns);
}

proptest! {
    /// Whatever the trace, FIFO and load: offered = admitted + dropped, admitted = departed +
    /// still inside, and nothing departs before it was admitted (the counters a user reads never
    /// underflow). A slow trace under a heavy load is where `admitted - dropped` once printed
    /// 18446744073709544255 as the modem's "sent".
    #[test]
    fn a_trace_links_counters_add_up(
        gaps in proptest::collection::vec(1u32..60, 1..8),
        limit in 1u32..60,
        rate_bps in 1_000_000u64..40_000_000,
        secs in 1u64..4,
    ) {
        // A mahimahi trace: one opportunity per line, at non-decreasing milliseconds.
        let text: String = gaps
            .iter()
            .scan(0u32, |t, g| {
                *t += g;
                Some(format!("{t}\n"))
            })
            .collect();
        let src = [Source::udp("a", 1, 2, 1, 1514, rate_bps)];
        let dur = secs * 1_000_000_000;
        let (res, path) = run_path(qdisc("pfifo limit 1000"), Some(modem(&text, Limit::Packets(limit))), &src, dur);
        let m = path.link().modem().expect("modem");
        let c = m.counters();
        prop_assert_eq!(c.admitted + c.dropped, res.sent);
        for now in [0, dur / 2, dur] {
            let (inside, _) = m.occupancy(now);
            prop_assert!(inside as u64 <= c.admitted, "{} inside, {} admitted", inside, c.admitted);
        }
        // The run drains the link: everything admitted departed, and the wire delivered it.
        prop_assert_eq!(m.departed(u64::MAX), c.admitted);
        prop_assert_eq!(res.delivered, c.admitted);
        prop_assert!(path.accounted());
    }
}
