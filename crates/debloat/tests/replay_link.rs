//! `debloat replay --link`: a trace through a discipline and a link in the gateway's emulation
//! words — a capacity trace with the modem's FIFO behind the discipline, and netem's delay —
//! with the far end's arrival and the modem's losses in the fates file.

mod common;
use common::{debloat, text};
use std::path::Path;

/// 2000 packets of 1514 B at 20 Mbit/s (every 605.6 µs): 1.21 s of traffic.
fn overload(dir: &Path) -> std::path::PathBuf {
    let mut s = String::from("t_ns,src,dst,sport,dport,proto,len,dscp,ecn\n");
    for i in 0..2000u64 {
        s += &format!(
            "{},198.18.0.1,198.18.1.1,5000,5001,udp,1514,0,0\n",
            i * 605_600
        );
    }
    let p = dir.join("trace.csv");
    std::fs::write(&p, s).expect("write trace");
    p
}

fn rows(p: &Path) -> Vec<Vec<String>> {
    let (h, rows) = common::fates(p);
    assert_eq!(
        h,
        "id,t_enq_ns,fate,reason,t_deq_ns,sojourn_ns,ecn_out,t_arrive_ns"
    );
    rows
}

fn num(r: &[String], i: usize) -> u64 {
    r[i].parse()
        .unwrap_or_else(|_| panic!("column {i} of {r:?}"))
}

#[test]
fn a_capacity_trace_behind_the_discipline_paces_arrivals_and_its_fifo_drops() {
    let dir = tempfile::tempdir().expect("tmp");
    let trace = overload(dir.path());
    // 10 Mbit/s for the first half second, then 2 Mbit/s.
    let steps = dir.path().join("steps.csv");
    std::fs::write(&steps, "seconds,rate\n0,10mbit\n0.5,2mbit\n").expect("steps");
    let out = dir.path().join("fates.csv");
    let words = format!("rate trace {} buffer 50 delay 10ms", steps.display());
    let o = debloat(&[
        "replay",
        "--qdisc",
        "pfifo limit 1000",
        "--link",
        &words,
        "--input",
        &trace.to_string_lossy(),
        "--output",
        &out.to_string_lossy(),
    ]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let r = rows(&out);
    assert_eq!(r.len(), 2000, "one row per input packet");
    let count = |f: &str| r.iter().filter(|x| x[2] == f).count();
    let (sent, dropped, lost) = (count("sent"), count("dropped"), count("lost"));
    assert_eq!(sent + dropped + lost, 2000, "every packet has one fate");
    // The discipline hands frames on at once (no shaper, a fast interface): the queue forms in
    // the modem, whose full FIFO loses what the trace cannot carry.
    assert_eq!(dropped, 0, "pfifo 1000 never fills");
    assert!(
        lost > 1000,
        "the modem lost {lost} of 2000 (offered 20 Mbit/s, carried 10 then 2)"
    );
    assert!(r.iter().filter(|x| x[2] == "lost").all(|x| x[3] == "modem"));
    // Arrivals follow the trace: bytes per window within a packet of the capacity, and the
    // saturated modem uses ≥ 90 % of it. Every arrival is ≥ 10 ms (the delay) after sending.
    let mut arrivals: Vec<u64> = Vec::new();
    for x in r.iter().filter(|x| x[2] == "sent") {
        let (deq, arr) = (num(x, 4), num(x, 7));
        assert!(
            arr >= deq + 10_000_000,
            "arrival {arr} ns vs sent {deq} ns + 10 ms"
        );
        arrivals.push(arr - 10_000_000);
    }
    let bits_in = |from: u64, to: u64| {
        arrivals.iter().filter(|&&a| a >= from && a < to).count() as f64 * 1514.0 * 8.0
    };
    let fast = bits_in(100_000_000, 500_000_000) / 0.4;
    let slow = bits_in(600_000_000, 1_200_000_000) / 0.6;
    assert!(
        (9.0e6..=10.2e6).contains(&fast),
        "first half second: {fast:.0} bit/s of 10 Mbit/s"
    );
    assert!(
        (1.8e6..=2.1e6).contains(&slow),
        "then: {slow:.0} bit/s of 2 Mbit/s"
    );
    // The modem's 50 packets at 2 Mbit/s: ≈ 300 ms of queue; the summary says so.
    let worst = r
        .iter()
        .filter(|x| x[2] == "sent")
        .map(|x| num(x, 7) - num(x, 1))
        .max();
    assert!(
        worst.is_some_and(|w| (250_000_000..=340_000_000).contains(&w)),
        "{worst:?}"
    );
    assert!(
        t.contains("capacity-trace link")
            && t.contains(&format!(
                "lost after the discipline (modem FIFO full or the wire's loss): {lost}"
            )),
        "{t}"
    );
    assert!(t.contains("one-way delay to the far end p50"), "{t}");

    // cake shaping below the trace keeps the queue in the discipline while the link is at
    // 10 Mbit/s: nothing lost in the modem in the first half second.
    let o = debloat(&[
        "replay",
        "--qdisc",
        "cake bandwidth 8mbit besteffort",
        "--link",
        &words,
        "--input",
        &trace.to_string_lossy(),
        "--output",
        &out.to_string_lossy(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let r = rows(&out);
    let early_lost = r
        .iter()
        .filter(|x| x[2] == "lost" && num(x, 4) < 450_000_000)
        .count();
    assert_eq!(early_lost, 0, "cake at 8 Mbit/s below a 10 Mbit/s link");
    assert!(
        r.iter().filter(|x| x[2] == "dropped").count() > 0,
        "cake drops instead"
    );
}

#[test]
fn bad_link_words_and_traces_name_what_is_wrong() {
    let dir = tempfile::tempdir().expect("tmp");
    let trace = overload(dir.path());
    let out = dir.path().join("fates.csv");
    let bad = dir.path().join("bad.csv");
    std::fs::write(&bad, "0,10mbit\n0.5,fast\n").expect("bad");
    let run = |words: &str| {
        let o = debloat(&[
            "replay",
            "--qdisc",
            "fq_codel",
            "--link",
            words,
            "--input",
            &trace.to_string_lossy(),
            "--output",
            &out.to_string_lossy(),
        ]);
        assert!(!o.status.success(), "{words}");
        text(&o)
    };
    let t = run(&format!("rate trace {}", bad.display()));
    assert!(t.contains("line 2") && t.contains("fast"), "{t}");
    let t = run("rate trace");
    assert!(t.contains("needs a file"), "{t}");
    let t = run("rate 10mbit delay soon");
    assert!(t.contains("soon"), "{t}");
    let o = debloat(&[
        "replay",
        "--qdisc",
        "fq_codel",
        "--rate",
        "10mbit",
        "--link",
        "delay 5ms",
        "--input",
        &trace.to_string_lossy(),
        "--output",
        &out.to_string_lossy(),
    ]);
    assert!(
        !o.status.success() && text(&o).contains("cannot be used with"),
        "{}",
        text(&o)
    );
}
