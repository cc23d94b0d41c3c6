//! The link-level experiments: RRUL-110-10 (§3.3), ACK-FILTER (§3.4) and BQL (§3.10).

use super::{config, parse, ping_p50, total, Band, Check, Outcome, MBIT, MS};
use crate::scenario::{self, Summary, Test};
use crate::world::{DeviceConfig, Dir};

/// Goodput of the flows going one way, Mbit/s.
fn sum_dir(s: &Summary, d: Dir) -> f64 {
    s.flows
        .iter()
        .filter(|f| f.direction == d)
        .map(|f| f.throughput_mbps)
        .sum()
}

/// RRUL-110-10: rrul on a cable-like 110/10 Mbit/s link at base RTT 48 ms. The shaper of
/// sqm-scripts is the link itself here: each qdisc sits in front of a link of exactly that rate
/// (cake shapes to the same rate). Induced delay = ICMP ping median − 48 ms.
pub fn rrul_110_10(seed: u64) -> Outcome {
    let run = |up: &str, down: &str| {
        let mut c = config(seed, Test::Rrul, 110 * MBIT, 10 * MBIT, 48 * MS, up);
        c.qdisc_down = parse(down);
        scenario::run(&c, |_| {})
    };
    let mut o = Outcome::new("RRUL-110-10");
    for (name, up, down, published, band) in [
        (
            "cake",
            "cake bandwidth 10Mbit",
            "cake bandwidth 110Mbit",
            "49.1 − 48 ≈ 1 ms",
            Band::AtMost { max: 3.0 },
        ),
        (
            "fq_codel",
            "fq_codel",
            "fq_codel",
            "50.0 − 48 ≈ 2 ms",
            Band::AtMost { max: 5.0 },
        ),
        (
            "codel (single queue)",
            "codel",
            "codel",
            "77.2 − 48 ≈ 29 ms",
            Band::AtLeast { min: 15.0 },
        ),
    ] {
        let s = run(up, down);
        o.checks.push(Check::new(
            format!("{name}: ICMP induced delay"),
            ping_p50(&s) - 48.0,
            "ms",
            published,
            band,
        ));
        o.notes.push(format!(
            "{name}: upload {:.1} Mbit/s, download {:.1} Mbit/s (published cake 6.9/102.0, \
             fq_codel 7.3/101.6, codel 7.9/90.5; netperf's sums, sender side)",
            sum_dir(&s, Dir::Up),
            sum_dir(&s, Dir::Down)
        ));
    }
    o
}

/// ACK-FILTER: rrul_be on a 1 Gbit/s down / 20 Mbit/s up link, 100 ms, cake on both
/// directions; the uplink's cake with and without `ack-filter`. Download goodput over the test.
///
/// The flows' windows are capped at 3 MiB, as the 2017 stack's were: Linux 4.x's tcp_rmem max
/// of 6 MiB with tcp_adv_win_scale 1 advertises at most half of it (6.18's 32 MiB would not cap
/// here; its send buffer of at most 4 MiB would: a 4 MiB cap gives 1.48–1.66× over seeds 1–3,
/// 3 MiB 1.52–1.61×). What the cap shows: without the filter
/// the downloads' ACKs queue in the uplink's cake (COBALT cannot shorten a queue of ACKs by
/// dropping them: the receivers keep sending as many), so the downloads' RTT samples average
/// 156–160 ms against 104 ms with the filter, and a window-limited flow runs at window / RTT.
/// Without the cap the model's CUBIC grows cwnd past that delay and the unfiltered download
/// reaches ≈640 Mbit/s (published 410), where the filter adds only ≈10 %.
pub fn ack_filter(seed: u64) -> Outcome {
    let run = |up: &str| {
        let mut c = config(seed, Test::RrulBe, 1000 * MBIT, 20 * MBIT, 100 * MS, up);
        c.qdisc_down = parse("cake bandwidth 1Gbit");
        c.tcp_window = Some(ACK_FILTER_WINDOW);
        scenario::run(&c, |_| {})
    };
    let mut o = Outcome::new("ACK-FILTER");
    let plain = run("cake bandwidth 20Mbit");
    let filtered = run("cake bandwidth 20Mbit ack-filter");
    let (d0, d1) = (sum_dir(&plain, Dir::Down), sum_dir(&filtered, Dir::Down));
    o.checks.push(Check::new(
        "download with ack-filter / without",
        d1 / d0,
        "×",
        "779 / 410 = 1.9",
        Band::AtLeast { min: 1.5 },
    ));
    o.notes.push(format!(
        "download {d0:.0} → {d1:.0} Mbit/s (published 410 → 779); upload {:.1} → {:.1} Mbit/s \
         (published 7.7 → 11.4); ping median {:.1} → {:.1} ms (published 100.1 → 100.3); \
         windows capped at 3 MiB as Linux 4.x's were",
        sum_dir(&plain, Dir::Up),
        sum_dir(&filtered, Dir::Up),
        ping_p50(&plain),
        ping_p50(&filtered)
    ));
    o
}

/// Linux 4.x's largest advertised receive window: tcp_rmem[2] = 6 MiB, tcp_adv_win_scale 1.
const ACK_FILTER_WINDOW: u64 = 3 << 20;

/// BQL: a 100 Mbit/s device with a 256-descriptor TX ring and completion interrupts every
/// 1 ms (NAPI-like batching), 20 TCP uploads and a ping, base RTT 1 ms. The qdisc is fq_codel,
/// which serves the sparse ping first as the stmmac test's high-priority band did, so what the
/// ping waits for is the ring. Induced delay = ping median − 1 ms.
pub fn bql(seed: u64) -> Outcome {
    let run = |bql: bool| {
        let mut c = config(seed, Test::TcpNUp, 100 * MBIT, 100 * MBIT, MS, "fq_codel");
        c.streams = 20;
        c.length_s = 30.0;
        c.device = DeviceConfig {
            ring: 256,
            bql: bql.then(Default::default),
            coalesce_ns: MS,
        };
        scenario::simulate(&c, |_| {})
    };
    let mut o = Outcome::new("BQL");
    let ring = run(false);
    let limited = run(true);
    o.checks.push(Check::new(
        "without BQL: ping induced delay",
        ping_p50(&ring.summary) - 1.0,
        "ms",
        "≈12 ms",
        Band::AtLeast { min: 10.0 },
    ));
    o.checks.push(Check::new(
        "with BQL: ping induced delay",
        ping_p50(&limited.summary) - 1.0,
        "ms",
        "≈1 ms",
        Band::AtMost { max: 3.0 },
    ));
    o.notes.push(format!(
        "goodput {:.1} Mbit/s without BQL, {:.1} with; BQL limit settled at {} bytes \
         (best practice: ≈3 KB at 100 Mbit/s is enough; with 1 ms completions the estimator wants \
         about one interval's worth, 12.5 KB)",
        total(&ring.summary),
        total(&limited.summary),
        limited
            .world
            .bql_limit(Dir::Up)
            .map_or("-".into(), |l| l.to_string())
    ));
    o
}
