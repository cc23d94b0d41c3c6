//! CoDel conformance (docs/algorithms.md §1): when it first drops, how drops are spaced, the byte
//! floor, ECN, and the re-entry rule — all with Linux's numbers.

use debloat_core::packet::{Ecn, Record};
use debloat_core::qdisc::codel::Codel;
use debloat_core::qdisc::spec::CodelSpec;
use debloat_core::testutil::{ect, pkt};
use debloat_core::{Dequeue, Qdisc};

const MS: u64 = 1_000_000;

fn codel(ecn: bool) -> Codel<Record> {
    let mut s = CodelSpec::default();
    s.knobs.ecn = ecn;
    Codel::new(&s)
}

/// Fill with `fill` packets at `from`, then every `step` until `until` one packet arrives and one
/// dequeue runs, so the queue stands at ~`fill` packets (sojourn ≈ fill × step). Returns the
/// times (ns) of drops or marks, and the queue.
fn drive(
    mut q: Codel<Record>,
    fill: u64,
    ecn: bool,
    from: u64,
    step: u64,
    until: u64,
) -> (Vec<u64>, Codel<Record>) {
    let mk = |i: u64| if ecn { ect(pkt(i, 1514)) } else { pkt(i, 1514) };
    for i in 0..fill {
        q.enqueue(mk(i), from);
    }
    let mut out = vec![];
    let mut t = from;
    let mut id = fill;
    while t <= until {
        q.enqueue(mk(id), t);
        id += 1;
        let got = q.dequeue(t);
        while q.take_dropped().is_some() {
            out.push(t);
        }
        if let Dequeue::Packet(p) = got {
            if p.meta.ecn == Ecn::Ce {
                out.push(t);
            }
        }
        t += step;
    }
    (out, q)
}

fn signals(q: Codel<Record>, ecn: bool, until: u64) -> (Vec<u64>, Codel<Record>) {
    drive(q, 100, ecn, 0, 100_000, until)
}

#[test]
fn first_drop_comes_one_interval_after_sojourn_first_exceeds_target() {
    // The 100 packets filled at t=0 leave with sojourn = now, so the sojourn first reaches the
    // 5 ms target at the dequeue at 5 ms and stays above it. The first drop is the first dequeue
    // strictly after first_above_time = 5 ms + MS2TIME(100) (99.9997 ms), in 1.024 µs units.
    let (drops, _) = signals(codel(false), false, 200 * MS);
    let first = *drops.first().expect("a drop");
    assert_eq!(first, 105 * MS, "first drop at {} ms", first as f64 / 1e6);
}

#[test]
fn later_drops_follow_linux_newton_schedule_not_exact_sqrt() {
    // docs/algorithms.md §1.3: cumulative drop times after entering dropping, Linux's Newton step.
    let linux = [
        0.0, 100.0, 150.0, 206.25, 255.0, 299.2, 339.6, 377.1, 412.3, 445.4,
    ];
    let exact = [
        0.0, 100.0, 170.7, 228.5, 278.5, 323.2, 364.0, 401.8, 437.1, 470.5,
    ];
    let step = 100_000; // dequeue every 0.1 ms; the schedule is read off that grid
    let (drops, _) = drive(codel(false), 100, false, 0, step, 700 * MS);
    assert!(drops.len() >= linux.len(), "only {} drops", drops.len());
    for i in 0..linux.len() {
        let rel = (drops[i] - drops[0]) as f64 / 1e6;
        assert!(
            (rel - linux[i]).abs() <= 0.15,
            "drop {i}: {rel} ms vs Linux {}",
            linux[i]
        );
        if i >= 2 {
            assert!(
                (rel - exact[i]).abs() > 5.0,
                "drop {i} follows the exact-sqrt schedule"
            );
        }
    }
}

#[test]
fn ecn_capable_packets_are_marked_on_the_same_schedule_and_never_dropped() {
    let (marks, q) = signals(codel(true), true, 500 * MS);
    let (drops, _) = signals(codel(false), false, 500 * MS);
    assert!(drops.len() >= 8);
    assert_eq!(marks.len(), drops.len());
    assert_eq!(marks[0], drops[0]);
    let s = q.stats();
    assert_eq!(s.drops, 0);
    let debloat_core::qdisc::stats::Xstats::Codel { ecn_mark, .. } = s.xstats else {
        panic!("codel stats")
    };
    assert_eq!(ecn_mark as usize, marks.len());
}

#[test]
fn no_drop_while_remaining_backlog_is_at_most_one_mtu() {
    // Two 1000 B packets that wait 500 ms: after the first leaves, 1000 B ≤ 1514 B remain.
    let mut q = codel(false);
    q.enqueue(pkt(1, 1000), 0);
    q.enqueue(pkt(2, 1000), 0);
    for t in [500 * MS, 600 * MS] {
        assert!(matches!(q.dequeue(t), Dequeue::Packet(_)));
    }
    assert!(q.take_dropped().is_none());
    assert_eq!(q.vars().first_above_time, 0);
}

#[test]
fn tail_drops_at_limit_and_counts_drop_overlimit() {
    let s = CodelSpec {
        limit: 3,
        ..CodelSpec::default()
    };
    let mut q: Codel<Record> = Codel::new(&s);
    for i in 0..5 {
        q.enqueue(pkt(i, 100), 0);
    }
    let d: Vec<u64> = std::iter::from_fn(|| q.take_dropped())
        .map(|d| d.packet.id)
        .collect();
    assert_eq!(d, vec![3, 4]);
    let debloat_core::qdisc::stats::Xstats::Codel { drop_overlimit, .. } = q.stats().xstats else {
        panic!()
    };
    assert_eq!(drop_overlimit, 2);
}

/// Run an episode until count ≥ 6, drain, pause `gap`, then build a queue again; return the
/// count after re-entering the dropping state and the count/lastcount before.
fn reentry(gap: u64) -> (u32, u32, u32) {
    let (_, mut q) = signals(codel(false), false, 420 * MS);
    let (count, last) = (q.vars().count, q.vars().lastcount);
    assert!(count >= 6, "count {count}");
    let t_drain = 420 * MS;
    while q.qlen() > 0 {
        let _ = q.dequeue(t_drain);
    }
    while q.take_dropped().is_some() {}
    assert!(
        !q.vars().dropping,
        "draining below one MTU leaves the dropping state"
    );
    let t0 = t_drain + gap;
    let (again, q) = drive(q, 100, false, t0, 100_000, t0 + 200 * MS);
    assert!(!again.is_empty(), "a new episode starts");
    let _ = again;
    (q.vars().lastcount, count, last)
}

#[test]
fn reentry_within_16_intervals_resumes_at_count_minus_lastcount() {
    let (c, before, last) = reentry(50 * MS);
    // lastcount is set to the count chosen on re-entry.
    assert_eq!(c, before - last, "count := count - lastcount");
    assert!(c > 1);
}

#[test]
fn reentry_after_16_intervals_starts_again_at_one() {
    let (c, _, _) = reentry(2_000 * MS);
    assert_eq!(c, 1);
}

#[test]
fn ce_threshold_marks_even_with_ecn_off() {
    let mut s = CodelSpec::default();
    s.knobs.ce_threshold_ns = Some(MS);
    let mut q: Codel<Record> = Codel::new(&s);
    q.enqueue(ect(pkt(1, 100)), 0);
    q.enqueue(ect(pkt(2, 100)), 0);
    let a = q.dequeue(500_000).packet().expect("pkt");
    let b = q.dequeue(2 * MS).packet().expect("pkt");
    assert_eq!((a.meta.ecn, b.meta.ecn), (Ecn::Ect0, Ecn::Ce));
}

#[test]
fn stats_show_drop_next_relative_to_now_while_dropping() {
    let (_, q) = signals(codel(false), false, 120 * MS);
    assert!(q.vars().dropping);
    let debloat_core::qdisc::stats::Xstats::Codel {
        drop_next_us,
        count,
        ..
    } = q.stats().xstats
    else {
        panic!()
    };
    // Entered dropping at 105 ms (count 1): next drop at 205 ms, i.e. ~85 ms after 120 ms.
    assert_eq!(count, 1);
    assert!(
        (84_000..=86_000).contains(&drop_next_us),
        "drop_next {drop_next_us} us"
    );
    assert!(
        q.stats().to_tc_string().contains("dropping drop_next 8"),
        "{}",
        q.stats().to_tc_string()
    );
}
