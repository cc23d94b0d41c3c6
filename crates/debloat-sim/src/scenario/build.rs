//! Building a run: the world with its two links, and each test's flows and probes under flent's
//! names, timings and markings.

use super::*;
use debloat_flent::catalog;

/// flent's probe interval in the simulator (STEP's default), and the VoIP flow's.
const PROBE_INTERVAL_NS: u64 = 200_000_000;
const VOIP_INTERVAL_NS: u64 = 20_000_000;

/// A run's clock: when the load starts (DELAY), how long it runs (LENGTH), when it all ends.
struct Timing {
    delay: u64,
    length: u64,
    end: u64,
}

fn ns(x: f64) -> u64 {
    (x * 1e9) as u64
}

/// Run a test, calling `tap` for every packet as a bottleneck starts to send it.
pub fn simulate_with_tap(
    cfg: &Config,
    tap: Option<crate::world::Tap>,
    progress: impl FnMut(f64),
) -> Run {
    let def = catalog_test(cfg);
    // flent's `ping` has no load and no idle margins: it runs for LENGTH. (`voip` also runs
    // LENGTH from 0 — its total length says so — but its summary keeps counting the first
    // DELAY as idle, as it always has.)
    let delay_s = if cfg.test == Test::Ping {
        0.0
    } else {
        cfg.delay_s
    };
    let timing = Timing {
        delay: ns(delay_s),
        length: ns(cfg.length_s),
        end: ns(cfg.test.total_length(cfg.length_s, delay_s)),
    };
    // With several remote hosts the bottleneck carries the shortest RTT; the others add theirs.
    let hosts = cfg.hosts();
    let base_rtt = hosts.iter().copied().min().unwrap_or(cfg.rtt_ns);
    let mut w = build_world(cfg, timing.end, base_rtt, tap);
    let mut tcp_flows = 0;
    for item in def.iter().flat_map(|d| &d.items) {
        add_item(&mut w, cfg, item, &timing, &hosts, base_rtt, &mut tcp_flows);
    }
    if let Some(wc) = &cfg.wifi {
        place_on_stations(&mut w, wc, !hosts.is_empty());
    }
    w.run(progress);
    let summary = summarise(cfg, &w, timing.delay, timing.length);
    Run { summary, world: w }
}

/// The test's flows and probes from the shared catalog (None for a scenario file's own).
fn catalog_test(cfg: &Config) -> Option<catalog::TestDef> {
    if cfg.test == Test::Custom {
        return None;
    }
    let o = catalog::Options {
        streams: cfg.streams.max(1) as usize,
        hosts: (0..cfg.hosts().len()).map(Config::host_name).collect(),
        ramp: (1, 1),
    };
    let def = catalog::test(cfg.test.name(), &o);
    Some(def.expect("every simulator test is in the catalog with options it accepts"))
}

/// The world: a link each way with the configured disciplines, device and wire (the
/// bottleneck's base RTT split between them), and the Wi-Fi network if there is one; it runs
/// until `end`. Scenario files build theirs here too.
pub(crate) fn build_world(
    cfg: &Config,
    end: u64,
    base_rtt: u64,
    tap: Option<crate::world::Tap>,
) -> World {
    let hasher = FlowHasher::new([cfg.seed, cfg.seed ^ 0x9e37_79b9_7f4a_7c15]);
    let link = |spec: &QdiscSpec, rate, salt: u64, wire: crate::world::Wire| LinkConfig {
        rate_bps: rate,
        delay_ns: base_rtt / 2,
        qdisc: spec.build(hasher, cfg.seed.wrapping_add(salt)),
        device: cfg.device,
        wire: crate::world::Wire {
            seed: cfg.seed.wrapping_mul(31).wrapping_add(salt),
            ..wire
        },
    };
    let mut w = World::new(
        link(&cfg.qdisc_up, cfg.up_bps, 1, cfg.wire),
        link(
            &cfg.qdisc_down,
            cfg.down_bps,
            2,
            cfg.wire_down.unwrap_or(cfg.wire),
        ),
        end,
        ns(cfg.step_s).max(1),
    );
    if let Some(t) = tap {
        w.set_tap(t);
    }
    let a = &cfg.adaptive;
    for (d, m) in [(Dir::Up, &a.modem_up), (Dir::Down, &a.modem_down)] {
        if let Some(m) = m {
            w.set_modem(d, m.build());
        }
    }
    for (d, c) in [(Dir::Up, a.autorate_up), (Dir::Down, a.autorate_down)] {
        if let Some(c) = c {
            w.set_autorate(d, c, 0);
        }
    }
    w.set_tcp_window(cfg.tcp_window);
    w.set_bbr_ack_aggregation(cfg.bbr_ack_aggregation);
    if let Some(h) = &cfg.host_qdisc {
        w.set_host_qdisc(h, [cfg.seed ^ 0x4854, cfg.seed], cfg.seed.wrapping_add(3));
    }
    w.set_classifier(cfg.classify.clone().map(|c| {
        debloat_core::classify::qosify::Classifier::new(
            c,
            debloat_core::classify::qosify::FLOW_SLOTS,
            hasher,
        )
        .sharing_hash()
    }));
    if let Some(wc) = &cfg.wifi {
        w.set_wifi(
            crate::wifi::Wifi::new(wc.clone(), hasher, cfg.seed),
            base_rtt / 2,
        );
    }
    w
}

/// One flow or probe of the catalog's test, placed in the world; a host's extra RTT beyond
/// the bottleneck's goes between the bottleneck and that host.
fn add_item(
    w: &mut World,
    cfg: &Config,
    item: &catalog::Item,
    t: &Timing,
    hosts: &[u64],
    base_rtt: u64,
    tcp_flows: &mut usize,
) {
    let extra = |h: usize| hosts.get(h).map_or(0, |r| r.saturating_sub(base_rtt) / 2);
    match item {
        catalog::Item::Flow(f) => {
            let start = f.start.nanos(t.delay, t.length);
            let stop = start + f.length.nanos(t.delay, t.length);
            let turn = match cfg.cc_turns.len() {
                0 => cfg.cc,
                n => cfg.cc_turns[*tcp_flows % n],
            };
            *tcp_flows += 1;
            let cc = f.cc.and_then(|c| c.parse().ok()).unwrap_or(turn);
            let dir = match f.dir {
                catalog::Dir::Up => Dir::Up,
                catalog::Dir::Down => Dir::Down,
            };
            let i = w.add_flow(&f.name, dir, cc, f.dscp, cfg.ecn, start, stop);
            if let Some(h) = f.host {
                w.set_flow_host(i, 11 + h as u8, extra(h));
            }
        }
        catalog::Item::Probe(p) => {
            let k = match p.kind {
                catalog::ProbeKind::Icmp => {
                    w.add_probe(&p.name, false, p.dscp, 0, PROBE_INTERVAL_NS)
                }
                catalog::ProbeKind::Udp => w.add_probe(&p.name, true, p.dscp, 0, PROBE_INTERVAL_NS),
                catalog::ProbeKind::Voip => {
                    let k = w.add_probe(&p.name, true, p.dscp, 0, VOIP_INTERVAL_NS);
                    w.set_probe_voip(k);
                    k
                }
            };
            if let Some(h) = p.host {
                w.set_probe_host(k, 11 + h as u8, extra(h));
            }
            if p.ecn != 0 {
                w.set_probe_ecn(k, debloat_core::packet::Ecn::from_bits(p.ecn));
            }
        }
    }
}

/// Put flows and probes on Wi-Fi stations: flows by `flow_stations` (default round robin),
/// probes on `ping_station`, sending their requests from it with `station_pings`. The rtt_fair
/// tests keep their hosts (host `h` is station `h % n`).
pub(super) fn place_on_stations(w: &mut World, wc: &crate::wifi::WifiConfig, has_hosts: bool) {
    for k in 0..w.probes.len() {
        w.set_probe_from_remote(k, wc.station_pings);
    }
    if has_hosts {
        return;
    }
    let n = wc.stations.len().max(1);
    for i in 0..w.flows.len() {
        let sta = wc.flow_stations.get(i).copied().unwrap_or(i % n) % n;
        w.set_flow_host(i, 11 + sta as u8, 0);
    }
    for k in 0..w.probes.len() {
        w.set_probe_host(k, 11 + (wc.ping_station % n) as u8, 0);
    }
}
