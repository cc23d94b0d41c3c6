//! The benchmark's tables: throughput per forwarder and frame size (with CPU per packet and the
//! gateway's own per-packet cost), and idle latency percentiles per forwarder.

use super::*;

pub(super) fn print_table(
    a: &Config,
    generator_us: Option<[f64; 2]>,
    rows: &[Row],
    lat: &[Latency],
    path_ns: f64,
) {
    if !rows.is_empty() {
        print_throughput(a, generator_us, rows, path_ns);
    }
    print_latency(a, lat);
    println!(
        "\nIssue 5's targets: ≥ 300 kpps at 64 B and ≥ 1.5 Gbit/s at 1500 B on one core; the discipline's share < 10 %; ≤ 50 µs p99 added at idle."
    );
}

/// Each forwarder's throughput and CPU per packet at 64 and 1500 bytes, then each gateway's
/// against each kernel forwarder.
fn print_throughput(a: &Config, generator_us: Option<[f64; 2]>, rows: &[Row], path_ns: f64) {
    let bed = match generator_us {
        Some([g64, g1500]) => format!(
            "the generator's too; CPU per packet is the core's busy time less the generator's own, measured alone: {g64:.2} µs at 64 B, {g1500:.2} µs at 1500 B"
        ),
        None => {
            let c = Cpus::of(false);
            format!("CPU {}; the generator on CPU {}", c.fwd, c.gen)
        }
    };
    println!(
        "\nForwarding between two veth pairs on one core ({bed}), throughput at ≤ {} % loss:\n",
        a.loss
    );
    // The names' column: as wide as the longest (a workers row is longer than the others).
    let w = rows
        .iter()
        .map(|r| r.name.chars().count())
        .max()
        .unwrap_or(0)
        .max(44);
    println!(
        "{:<w$} {:>14} {:>12} {:>14} {:>10} {:>12}",
        "", "64 B: kpps", "µs CPU/pkt", "1500 B: kpps", "Gbit/s", "µs CPU/pkt"
    );
    let cpu = |row: &Row, t: &Throughput| {
        if row.spins {
            "(spins)".to_string()
        } else {
            format!("{:.2}", t.at.cpu_us)
        }
    };
    for row in rows {
        let r = &row.r;
        let mark = |t: &Throughput| if t.generator_bound { "≥" } else { "" };
        println!(
            "{:<w$} {:>14} {:>12} {:>14} {:>10.2} {:>12}",
            row.name,
            format!("{}{:.1}", mark(&r[0]), r[0].at.delivered_pps / 1e3),
            cpu(row, &r[0]),
            format!("{}{:.1}", mark(&r[1]), r[1].at.delivered_pps / 1e3),
            r[1].at.delivered_pps * 1500.0 * 8.0 / 1e9,
            cpu(row, &r[1]),
        );
    }
    print_ratios(rows);
    println!(
        "\n(≥: the generator could not offer more; Gbit/s counts the 1500-byte IP packets; a busy-polling gateway keeps its core 100 % busy, so its CPU per packet is not measured)"
    );
    for g in rows
        .iter()
        .filter(|r| r.fwd == Forwarder::Gateway && !r.spins && !r.passthrough)
    {
        println!(
            "\ndebloat's own per-packet work (parse, classify, {} enqueue + dequeue), timed in this process: {:.0} ns = {:.1} % of the CPU per 64 B packet of \"{}\"",
            a.qdisc,
            path_ns,
            path_ns / (g.r[0].at.cpu_us * 1e3) * 100.0,
            g.name
        );
    }
    print_work_share(rows);
}

/// On each back end, what the gateway's work adds to the do-nothing forwarder: its CPU per
/// packet over the ceiling's, and its throughput as a share of the ceiling's.
fn print_work_share(rows: &[Row]) {
    for (nothing, g) in ceilings(rows) {
        for (i, size) in ["64 B", "1500 B"].iter().enumerate() {
            let (c, n) = (g.r[i].at.cpu_us, nothing.r[i].at.cpu_us);
            println!(
                "on {}, {size}: the gateway's work costs {:+.2} µs CPU/packet = {:+.1} % of the do-nothing forwarder's {n:.2} µs; throughput {}× the do-nothing forwarder's",
                g.io,
                c - n,
                (c - n) / n.max(1e-9) * 100.0,
                throughput_ratio(&g.r[i], &nothing.r[i])
            );
        }
    }
}

/// One throughput over another; where the generator bound one of them the ratio is a bound
/// (≥ or ≤), and where it bound both there is none ("—": compare CPU per packet instead).
fn throughput_ratio(g: &Throughput, k: &Throughput) -> String {
    let x = g.at.delivered_pps / k.at.delivered_pps;
    match (g.generator_bound, k.generator_bound) {
        (false, false) => format!("{x:.2}"),
        (true, false) => format!("≥{x:.2}"),
        (false, true) => format!("≤{x:.2}"),
        (true, true) => "—".to_string(),
    }
}

/// Throughput (and CPU per packet) of each gateway row over each kernel row.
fn print_ratios(rows: &[Row]) {
    let kernels = rows.iter().filter(|r| r.fwd != Forwarder::Gateway);
    for k in kernels {
        for g in rows.iter().filter(|r| r.fwd == Forwarder::Gateway) {
            let what = match (g.passthrough, g.spins) {
                (true, _) => "do-nothing",
                (false, true) => "busy-polling gateway",
                (false, false) if g.name.contains(" workers on ") => "gateway's workers",
                (false, false) => "gateway",
            };
            let name = format!("{what}, {} / {}", g.io, k.name);
            let cpu_ratio = |i: usize| {
                if g.spins || k.r[i].at.cpu_us < 0.05 {
                    // A figure at the resolution of the busy time (a short trial on a shared
                    // core can leave nothing once the generator's share is out) has no ratio.
                    String::from("—")
                } else {
                    format!("{:.2}", g.r[i].at.cpu_us / k.r[i].at.cpu_us)
                }
            };
            println!(
                "{:<44} {:>14} {:>12} {:>14} {:>10} {:>12}",
                name,
                throughput_ratio(&g.r[0], &k.r[0]),
                cpu_ratio(0),
                throughput_ratio(&g.r[1], &k.r[1]),
                "",
                cpu_ratio(1),
            );
        }
    }
}

pub(super) fn print_latency(a: &Config, lat: &[Latency]) {
    let ps = |v: &[f64]| [50.0, 99.0, 99.9].map(|p| pct(v, p));
    println!(
        "\nIdle round trip (ping, {} at 5 ms; both directions through the forwarder):",
        a.pings
    );
    for v in lat {
        let [p50, p99, p999] = ps(&v.rtts);
        let added = v
            .baseline
            .and_then(|b| lat.get(b))
            .map_or(String::new(), |b| {
                let [b50, b99, b999] = ps(&b.rtts);
                format!(
                    "; added to the {}: p50 {:.0} µs, p99 {:.0} µs, p99.9 {:.0} µs",
                    b.name,
                    p50 - b50,
                    p99 - b99,
                    p999 - b999
                )
            });
        println!(
            "{:<44} p50 {p50:>5.0} µs, p99 {p99:>5.0} µs, p99.9 {p999:>5.0} µs{added}",
            v.name
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(pps: f64, generator_bound: bool) -> Throughput {
        Throughput {
            at: Trial {
                offered_pps: pps,
                delivered_pps: pps,
                loss: 0.0,
                cpu_us: 1.0,
                gen_us: 1.0,
            },
            generator_bound,
        }
    }

    #[test]
    fn a_ratio_against_a_generator_bound_figure_is_a_bound() {
        assert_eq!(
            throughput_ratio(&at(50.0, false), &at(100.0, false)),
            "0.50"
        );
        // The kernel could have done more than the generator offered: the gateway's share is
        // at most this.
        assert_eq!(
            throughput_ratio(&at(50.0, false), &at(100.0, true)),
            "≤0.50"
        );
        assert_eq!(
            throughput_ratio(&at(150.0, true), &at(100.0, false)),
            "≥1.50"
        );
        assert_eq!(throughput_ratio(&at(50.0, true), &at(100.0, true)), "—");
    }

    #[test]
    fn one_cpu_puts_generator_and_forwarder_together() {
        assert!(Cpus::of(true).shared());
        let apart = Cpus::of(false);
        assert!(!apart.shared());
        assert_eq!((apart.gen, apart.fwd), (0, 1));
    }
}
