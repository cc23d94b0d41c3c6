//! flent's RTT-fairness tests over Wi-Fi with 1, 2 and 4 stations (issue 7's scenarios): the
//! var tests put one flow and one ping on each station, each behind its own base RTT;
//! `rtt_fair_up` spreads its four over the stations.
//!
//! * `rtt_fair_up` and `rtt_fair_var_up` (AP → stations): mac80211's airtime queueing gives
//!   every station an equal share of airtime and keeps every station's latency near its base RTT, where the
//!   stock firmware queue lets a slow station's pings wait seconds.
//! * `rtt_fair_var_down` (stations → AP): the stations' own stock queues decide; the AP's
//!   queueing structure makes no difference to the uploads (the MCS-FLAT sta → AP point).
//! * `rrul` over one station: its four markings land in four access categories — EF (voice)
//!   is served first, background last — and with WMM off they share one.

use debloat_core::airtime::PhyRate;
use debloat_sim::scenario::{Config, Summary, Test};
use debloat_sim::tcp::cc::Algorithm;
use debloat_sim::wifi::{ApQueueing, WifiConfig};

const MS: u64 = 1_000_000;

/// The three networks: rates and each station's base RTT (ms).
const NETS: [(&[&str], &[u64]); 3] = [
    (&["mcs7"], &[10]),
    (&["mcs7", "mcs0"], &[10, 40]),
    (&["mcs7", "mcs7", "mcs7", "mcs0"], &[10, 20, 40, 80]),
];

/// `test` for 20 s over this network, the wired host 10 ms from the AP.
fn run_on(test: Test, wc: WifiConfig, rtts: &[u64]) -> Summary {
    let c = Config {
        test,
        down_bps: 1,
        up_bps: 1,
        rtt_ns: 10 * MS,
        qdisc_up: "pfifo limit 1000".parse().expect("spec"),
        qdisc_down: "pfifo limit 1000".parse().expect("spec"),
        length_s: 20.0,
        delay_s: 5.0,
        step_s: 0.2,
        streams: 1,
        cc: Algorithm::Cubic,
        cc_turns: Vec::new(),
        ecn: false,
        host_qdisc: None,
        seed: 1,
        device: Default::default(),
        wire: Default::default(),
        wire_down: None,
        tcp_window: None,
        bbr_ack_aggregation: true,
        host_rtts_ns: rtts.iter().map(|r| r * MS).collect(),
        adaptive: Default::default(),
        classify: None,
        wifi: Some(wc),
    };
    debloat_sim::scenario::run(&c, |_| {})
}

fn run(test: Test, rates: &[&str], rtts: &[u64], q: ApQueueing) -> Summary {
    let rates: Vec<PhyRate> = rates.iter().map(|r| r.parse().expect("rate")).collect();
    run_on(test, WifiConfig::new(&rates, q), rtts)
}

/// Per station: (goodput Mbit/s, airtime share, ping median ms).
fn stations(s: &Summary) -> Vec<(f64, f64, f64)> {
    s.wifi
        .as_ref()
        .expect("a Wi-Fi summary")
        .stations
        .iter()
        .map(|st| {
            (
                st.throughput_mbps,
                st.airtime_share,
                st.latency_ms.as_ref().map_or(f64::NAN, |l| l.p50),
            )
        })
        .collect()
}

/// The slowest (last) station's ping median under the stock firmware queue (`legacy`) against
/// airtime + AQL (`air`): at least 10× lower with airtime when it shares the air, 3× when alone.
fn slow_station_gain(n: usize, legacy: &[(f64, f64, f64)], air: &[(f64, f64, f64)]) {
    let slow = n - 1;
    let ratio = legacy[slow].2 / air[slow].2;
    let want = if n == 1 { 3.0 } else { 10.0 };
    assert!(
        ratio >= want,
        "{n} stations: legacy/airtime ping median at the slow station {:.1}/{:.1} ms = {ratio:.1}×, want ≥ {want}×",
        legacy[slow].2,
        air[slow].2
    );
}

#[test]
fn rtt_fair_var_up_airtime_is_fair_and_low_latency_on_1_2_and_4_stations() {
    for (rates, rtts) in NETS {
        let n = rates.len();
        let air = run(Test::RttFairVarUp, rates, rtts, ApQueueing::Airtime);
        let legacy = run(Test::RttFairVarUp, rates, rtts, ApQueueing::Legacy);
        assert_eq!(air.flows.len(), n, "one flow per station");
        assert_eq!(air.pings.len(), n, "one ping per station");
        let a = stations(&air);
        let l = stations(&legacy);
        let w = air.wifi.as_ref().expect("wifi");
        assert!(
            w.airtime_jain.expect("airtime used") >= 0.95,
            "{n} stations: airtime Jain {:?}",
            w.airtime_jain
        );
        for (i, &(goodput, share, p50)) in a.iter().enumerate() {
            let base = rtts[i] as f64;
            assert!(goodput > 0.5, "{n} stations, station {i}: {goodput} Mbit/s");
            assert!(
                (share - 1.0 / n as f64).abs() <= 0.2 / n as f64,
                "{n} stations, station {i}: airtime share {share:.3}"
            );
            // CoDel's 20 ms target plus AQL's few ms over the base RTT.
            assert!(
                p50 - base <= 50.0,
                "{n} stations, station {i}: ping median {p50:.1} ms over a {base} ms base"
            );
        }
        slow_station_gain(n, &l, &a);
    }
}

#[test]
fn rtt_fair_var_down_uploads_are_set_by_the_stations_queues_not_the_aps() {
    for (rates, rtts) in NETS {
        let n = rates.len();
        let air = run(Test::RttFairVarDown, rates, rtts, ApQueueing::Airtime);
        let legacy = run(Test::RttFairVarDown, rates, rtts, ApQueueing::Legacy);
        assert_eq!(air.flows.len(), n, "one upload per station");
        assert!(air.flows.iter().all(|f| f.name.starts_with("TCP download")));
        let a = stations(&air);
        let l = stations(&legacy);
        for i in 0..n {
            let base = rtts[i] as f64;
            assert!(a[i].0 > 0.5, "{n} stations, station {i}: {} Mbit/s", a[i].0);
            // The AP carries only ACKs and ping replies that way: its structure changes little.
            assert!(
                (a[i].0 - l[i].0).abs() <= 0.1 * l[i].0,
                "{n} stations, station {i}: goodput {} (airtime AP) vs {} (legacy AP)",
                a[i].0,
                l[i].0
            );
            // A stock client's pfifo 1000 fills: tens to thousands of ms above the base RTT.
            assert!(
                a[i].2 - base >= 50.0,
                "{n} stations, station {i}: ping median {:.1} ms over a {base} ms base",
                a[i].2
            );
        }
    }
}

/// Values by series name.
type Named = Vec<(String, f64)>;

/// rrul over one station (MCS 7, 10 ms): (ping median by name, goodput by flow name).
fn rrul(q: ApQueueing, wmm: bool) -> (Named, Named) {
    let rate: PhyRate = "mcs7".parse().expect("rate");
    let mut wc = WifiConfig::new(&[rate], q);
    wc.wmm = wmm;
    let s = run_on(Test::Rrul, wc, &[]);
    let pings = s
        .pings
        .iter()
        .map(|p| {
            (
                p.name.clone(),
                p.latency_ms.as_ref().map_or(f64::NAN, |l| l.p50),
            )
        })
        .collect();
    let flows = s
        .flows
        .iter()
        .map(|f| (f.name.clone(), f.throughput_mbps))
        .collect();
    (pings, flows)
}

fn get(v: &[(String, f64)], suffix: &str) -> f64 {
    v.iter()
        .find(|(n, _)| n.ends_with(suffix))
        .map(|x| x.1)
        .unwrap_or_else(|| panic!("no series ending in {suffix}: {v:?}"))
}

#[test]
fn rrul_over_wifi_sorts_its_markings_into_access_categories() {
    for q in [ApQueueing::Legacy, ApQueueing::Airtime] {
        let (pings, flows) = rrul(q, true);
        let (ef, be, bk) = (
            get(&pings, "UDP EF"),
            get(&pings, "UDP BE"),
            get(&pings, "UDP BK"),
        );
        // EF rides voice: its own queues and the shortest AIFS and CW.
        assert!(ef * 4.0 < be, "{q:?}: EF ping {ef:.0} ms vs BE {be:.0} ms");
        // Background waits longest.
        assert!(bk >= be, "{q:?}: BK ping {bk:.0} ms vs BE {be:.0} ms");
        let class =
            |c: &str| get(&flows, &format!("upload {c}")) + get(&flows, &format!("download {c}"));
        assert!(
            class("EF") + class("CS5") > 10.0 * (class("BE") + class("BK")),
            "{q:?}: voice+video {:.1} vs best effort+background {:.1} Mbit/s",
            class("EF") + class("CS5"),
            class("BE") + class("BK")
        );

        // WMM off: one category, every marking shares it.
        let (pings, flows) = rrul(q, false);
        let (ef, be, bk) = (
            get(&pings, "UDP EF"),
            get(&pings, "UDP BE"),
            get(&pings, "UDP BK"),
        );
        for (name, v) in [("EF", ef), ("BK", bk)] {
            assert!(
                (v / be - 1.0).abs() < 0.1,
                "{q:?} without WMM: {name} ping {v:.0} ms vs BE {be:.0} ms"
            );
        }
        let mean = flows.iter().map(|f| f.1).sum::<f64>() / flows.len() as f64;
        for (name, tp) in &flows {
            assert!(
                *tp > 0.25 * mean,
                "{q:?} without WMM: {name} {tp:.2} Mbit/s, mean {mean:.2}"
            );
        }
    }
}

#[test]
fn rtt_fair_up_airtime_is_fair_and_low_latency_on_1_2_and_4_stations() {
    // flent's four flows and pings, spread round robin over the stations, all 10 ms away.
    for (rates, _) in NETS {
        let n = rates.len();
        let air = run(Test::RttFairUp, rates, &[], ApQueueing::Airtime);
        let legacy = run(Test::RttFairUp, rates, &[], ApQueueing::Legacy);
        assert_eq!(air.flows.len(), 4);
        let a = stations(&air);
        let l = stations(&legacy);
        let jain = air.wifi.as_ref().and_then(|w| w.airtime_jain);
        assert!(
            jain.expect("airtime used") >= 0.95,
            "{n} stations: airtime Jain {jain:?}"
        );
        for (i, &(goodput, share, p50)) in a.iter().enumerate() {
            assert!(goodput > 0.5, "{n} stations, station {i}: {goodput} Mbit/s");
            assert!(
                (share - 1.0 / n as f64).abs() <= 0.2 / n as f64,
                "{n} stations, station {i}: airtime share {share:.3}"
            );
            assert!(
                p50 - 10.0 <= 50.0,
                "{n} stations, station {i}: ping median {p50:.1} ms over a 10 ms base"
            );
        }
        slow_station_gain(n, &l, &a);
    }
}
