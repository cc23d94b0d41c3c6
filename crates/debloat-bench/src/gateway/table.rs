//! The benchmark's tables: throughput per forwarder and frame size (with CPU per packet and the
//! gateway's own per-packet cost), and idle latency percentiles per forwarder.

use super::*;

pub(super) fn print_table(
    a: &Config,
    rows: &[(String, bool, Vec<Throughput>)],
    lat: &[Latency],
    path_ns: f64,
) {
    if !rows.is_empty() {
        print_throughput(a, rows, path_ns);
    }
    print_latency(a, lat);
    println!(
        "\nIssue 5's targets: ≥ 300 kpps at 64 B and ≥ 1.5 Gbit/s at 1500 B on one core; the discipline's share < 10 %; ≤ 50 µs p99 added at idle."
    );
}

/// `rows`: name, whether the forwarder spins (its core is always busy, so CPU per packet says
/// nothing), and the result at 64 and 1500 bytes.
pub(super) fn print_throughput(a: &Config, rows: &[(String, bool, Vec<Throughput>)], path_ns: f64) {
    println!(
        "\nForwarding between two veth pairs on one core (CPU {FWD_CPU}; the generator on CPU {GEN_CPU}), throughput at ≤ {} % loss:\n",
        a.loss
    );
    println!(
        "{:<34} {:>14} {:>12} {:>14} {:>10} {:>12}",
        "", "64 B: kpps", "µs CPU/pkt", "1500 B: kpps", "Gbit/s", "µs CPU/pkt"
    );
    for (name, spins, r) in rows {
        let mark = |t: &Throughput| if t.generator_bound { "≥" } else { "" };
        let cpu = |t: &Throughput| {
            if *spins {
                "(spins)".to_string()
            } else {
                format!("{:.2}", t.at.cpu_us)
            }
        };
        println!(
            "{:<34} {:>14} {:>12} {:>14} {:>10.2} {:>12}",
            name,
            format!("{}{:.1}", mark(&r[0]), r[0].at.delivered_pps / 1e3),
            cpu(&r[0]),
            format!("{}{:.1}", mark(&r[1]), r[1].at.delivered_pps / 1e3),
            r[1].at.delivered_pps * 1500.0 * 8.0 / 1e9,
            cpu(&r[1]),
        );
    }
    if let [(_, _, k), (_, _, g), ..] = rows {
        println!(
            "{:<34} {:>14.2} {:>12.2} {:>14.2} {:>10} {:>12.2}",
            "gateway / kernel",
            g[0].at.delivered_pps / k[0].at.delivered_pps,
            g[0].at.cpu_us / k[0].at.cpu_us,
            g[1].at.delivered_pps / k[1].at.delivered_pps,
            "",
            g[1].at.cpu_us / k[1].at.cpu_us,
        );
        if let Some((_, _, b)) = rows.get(2) {
            println!(
                "{:<34} {:>14.2} {:>12} {:>14.2}",
                "busy-polling gateway / kernel",
                b[0].at.delivered_pps / k[0].at.delivered_pps,
                "",
                b[1].at.delivered_pps / k[1].at.delivered_pps,
            );
        }
        println!(
            "\n(≥: the generator could not offer more; Gbit/s counts the 1500-byte IP packets; a busy-polling gateway keeps its core 100 % busy, so its CPU per packet is not measured)"
        );
        println!(
            "\ndebloat's own per-packet work (parse, classify, {} enqueue + dequeue), timed in this process: {:.0} ns = {:.1} % of the gateway's CPU per 64 B packet",
            a.qdisc,
            path_ns,
            path_ns / (g[0].at.cpu_us * 1e3) * 100.0
        );
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
            "{:<34} p50 {p50:>5.0} µs, p99 {p99:>5.0} µs, p99.9 {p999:>5.0} µs{added}",
            v.name
        );
    }
}
