//! The Wi-Fi rows of docs/experiments.md Part A: ATH10K-6M, NETDEV-PING, ATF-ATH9K, MCS-FLAT, AQL.
//! Each runs the simulator's Wi-Fi model (`crate::wifi`) with 30 s of load (the published runs
//! are 30 s) and the wired host 1 ms of RTT away from the AP.

use super::{config, ping_p50, total, Band, Check, Outcome, MS};
use crate::scenario::{Config, Summary, Test};
use crate::wifi::{ApQueueing, WifiConfig};
use debloat_core::airtime::PhyRate;

fn rate(s: &str) -> PhyRate {
    s.parse()
        .unwrap_or_else(|e| panic!("built-in rate \"{s}\": {e}"))
}

fn wifi_run(seed: u64, test: Test, streams: u32, wc: WifiConfig) -> Summary {
    let mut c: Config = config(seed, test, 0, 0, MS, "pfifo limit 1000");
    c.down_bps = 1;
    c.up_bps = 1;
    c.length_s = 30.0;
    c.streams = streams;
    c.wifi = Some(wc);
    crate::scenario::run(&c, |_| {})
}

fn wifi(rates: &[&str], q: ApQueueing) -> WifiConfig {
    WifiConfig::new(&rates.iter().map(|r| rate(r)).collect::<Vec<_>>(), q)
}

/// ath10k at legacy 6 Mbit/s (no aggregation), one station, rtt_fair_up's 4 flows: stock
/// queueing (pfifo 1000 over a 1024-frame firmware queue) against mac80211 FQ + airtime + AQL.
pub fn ath10k_6m(seed: u64) -> Outcome {
    let mut o = Outcome::new("ATH10K-6M");
    let legacy = wifi_run(seed, Test::RttFairUp, 4, wifi(&["6"], ApQueueing::Legacy));
    let air = wifi_run(seed, Test::RttFairUp, 4, wifi(&["6"], ApQueueing::Airtime));
    let (l, a) = (ping_p50(&legacy), ping_p50(&air));
    o.checks.push(Check::new(
        "legacy: ping median",
        l,
        "ms",
        "1 521–2 135 ms",
        Band::AtLeast { min: 1000.0 },
    ));
    o.checks.push(Check::new(
        "airtime + AQL: ping median",
        a,
        "ms",
        "20.3–21.3 ms",
        Band::AtMost { max: 50.0 },
    ));
    o.checks.push(Check::new(
        "airtime + AQL: goodput",
        total(&air),
        "Mbit/s",
        "4.42–4.54 Mbit/s",
        Band::AtLeast { min: 4.0 },
    ));
    o.checks.push(Check::new(
        "legacy / airtime ping median (issue 7: ≥ 10×)",
        l / a,
        "×",
        "≈100×",
        Band::AtLeast { min: 10.0 },
    ));
    o.notes.push(format!(
        "legacy goodput {:.2} Mbit/s (the published 5.9–6.2 counts data parked in the queues)",
        total(&legacy)
    ));
    o
}

/// ath9k AP, a near station at the top HT20 rate (MCS 15, short GI) pinging a LAN host while a
/// far one downloads (AP → far station): default qdisc, fq_codel qdisc, airtime. The near
/// station sends the requests, as in the demo, so each request contends with the saturated AP
/// and each reply queues at the AP. The far station's rate is not in the transcript; MCS 12
/// (78 Mbit/s) is the rate at which the default qdisc's full queue (pfifo 1000 + 123 driver
/// frames) drains in the published ≈134 ms.
///
/// The airtime row's band is ≤ 20 ms and below the fq_codel row's median in the same run: the
/// published claim is that the MAC's queues beat the qdisc; no figure was given. The structure
/// gives ≈15 ms: the reply waits at the AP for the rest of the far station's 4 ms aggregate on
/// the air (median 3.0 ms left) and for the one ath9k keeps ready behind it
/// (ATH_AGGR_MIN_QDEPTH 2, median 7.7 ms); the request first waits for the AP's aggregate and
/// then contends with the saturated AP (median 4.4 ms); plus ≈1 ms of wire (measured 2026-11-24
/// from each ping's air times). Dave Täht's ath9k runs with this structure report about 15 ms.
pub fn netdev_ping(seed: u64) -> Outcome {
    let mut o = Outcome::new("NETDEV-PING");
    let run_with = |q, minstrel: bool| {
        let mut wc = wifi(&["mcs15/sgi", "mcs12"], q).ath9k();
        if minstrel {
            wc = wc.minstrel();
        }
        wc.flow_stations = vec![1];
        wc.ping_station = 0;
        // Station A runs `ping` (to a LAN host): the request contends for the channel, the
        // reply waits in the AP's queues.
        wc.station_pings = true;
        ping_p50(&wifi_run(seed, Test::TcpNUp, 1, wc))
    };
    let run = |q| run_with(q, false);
    o.checks.push(Check::new(
        "default qdisc (pfifo 1000 over 123 driver frames): near station's ping median",
        run(ApQueueing::Legacy),
        "ms",
        "134 ms",
        Band::AtLeast { min: 80.0 },
    ));
    let fq = run(ApQueueing::FqCodel);
    o.checks.push(Check::new(
        "fq_codel qdisc: ping median",
        fq,
        "ms",
        "18.4 ms",
        Band::Within {
            min: 10.0,
            max: 40.0,
        },
    ));
    let air = run(ApQueueing::Airtime);
    o.checks.push(Check::new(
        "airtime: ping median",
        air,
        "ms",
        "— (not in the transcript)",
        Band::AtMost { max: 20.0 },
    ));
    o.checks.push(Check::new(
        "airtime − fq_codel qdisc: ping median",
        air - fq,
        "ms",
        "MAC queues beat the qdisc",
        Band::Below { max: 0.0 },
    ));
    // The same runs with minstrel_ht's retry chains (`--rate-control minstrel`): ath9k then
    // sizes each aggregate at the chain's one-stream end, so both waits shrink. That brings
    // the airtime row inside its band but takes the fq_codel row below its published 18.4 ms,
    // so it is shown, not used: the model with fixed rates matches both published rows
    // (default qdisc 146 ms against 134, fq_codel 17.8 ms against 18.4).
    o.notes.push(format!(
        "with minstrel_ht retry chains (aggregates sized at the one-stream rate, MCS 12 → 4): \
         default qdisc {:.0} ms, fq_codel {:.1} ms, airtime {:.1} ms",
        run_with(ApQueueing::Legacy, true),
        run_with(ApQueueing::FqCodel, true),
        run_with(ApQueueing::Airtime, true)
    ));
    o
}

/// ath9k AP → 3 stations (2 at HT20 MCS 15, 1 at MCS 0), one TCP download each (AP → station):
/// legacy (pfifo over the driver queue) vs the airtime scheduler.
pub fn atf_ath9k(seed: u64) -> Outcome {
    let mut o = Outcome::new("ATF-ATH9K");
    let rates = ["mcs15", "mcs15", "mcs0"];
    let ath9k = |rates: &[&str], q| {
        wifi_run(
            seed,
            Test::TcpNUp,
            rates.len() as u32,
            wifi(rates, q).ath9k(),
        )
    };
    let (legacy, air) = (
        ath9k(&rates, ApQueueing::Legacy),
        ath9k(&rates, ApQueueing::Airtime),
    );
    let jain = air
        .wifi
        .as_ref()
        .and_then(|w| w.airtime_jain)
        .unwrap_or(f64::NAN);
    o.checks.push(Check::new(
        "airtime: Jain's index over station airtime",
        jain,
        "",
        "≈1 (\"near-perfect\")",
        Band::AtLeast { min: 0.95 },
    ));
    o.checks.push(Check::new(
        "airtime / legacy total throughput",
        total(&air) / total(&legacy),
        "×",
        "1.25× (41.58 → 52.07 Mbit/s)",
        Band::AtLeast { min: 1.2 },
    ));
    let per = |s: &Summary| {
        s.wifi.as_ref().map_or(String::new(), |w| {
            w.stations
                .iter()
                .map(|x| format!("{:.2}", x.throughput_mbps))
                .collect::<Vec<_>>()
                .join("/")
        })
    };
    o.notes.push(format!(
        "per station (fast/fast/slow) Mbit/s: legacy {}, airtime {} (published 19.17/19.83/2.58 → 25.09/25.21/1.77); legacy airtime Jain {:.3}",
        per(&legacy),
        per(&air),
        legacy.wifi.as_ref().and_then(|w| w.airtime_jain).unwrap_or(f64::NAN)
    ));
    // The commit's "before" was probably ath9k already on mac80211's TXQs (the commit
    // schedules stations as it dequeues from them) with stations served round robin: the same
    // structure with the airtime fairness off. In the model each turn is one aggregate of at
    // most 4 ms whatever the rate, so round robin per aggregate is already close to
    // airtime-fair and shows no gain: a note, since the Part A row compares with the legacy
    // structure.
    let mut rr = wifi(&rates, ApQueueing::Airtime).ath9k();
    rr.fairness = false;
    let rr = wifi_run(seed, Test::TcpNUp, 3, rr);
    o.notes.push(format!(
        "TXQs served round robin (probably the commit's \"before\"): {} Mbit/s, total {:.2}; airtime / round robin {:.2}× (published 1.25×: each turn is one ≤ 4 ms aggregate, so round robin is nearly airtime-fair here)",
        per(&rr),
        total(&rr),
        total(&air) / total(&rr)
    ));
    // The commit's 30-station variant, as a note: its fast stations' rates are not published
    // (17.76 Mbit/s after the change suggests far below MCS 15), so there is no band to hold.
    let mut many = vec!["mcs15"; 29];
    many.push("1");
    let (legacy, air) = (
        ath9k(&many, ApQueueing::Legacy),
        ath9k(&many, ApQueueing::Airtime),
    );
    o.notes.push(format!(
        "30 stations (29 × MCS 15, 1 × 1 Mbit/s): legacy {:.1} → airtime {:.1} Mbit/s ({:.1}×; published 2.14 → 17.76 Mbit/s, 8.3×, fast stations' rates not stated)",
        total(&legacy),
        total(&air),
        total(&air) / total(&legacy)
    ));
    o
}

/// ath9k AP with the airtime queueing → 2 stations at a fixed HT20 MCS, rtt_fair_up (2 flows per
/// station), at MCS 0, 7 and 15 (the ends and the middle of the published sweep).
pub fn mcs_flat(seed: u64) -> Outcome {
    let mut o = Outcome::new("MCS-FLAT");
    for mcs in [0u8, 7, 15] {
        let r = PhyRate::ht(mcs);
        let s = wifi_run(
            seed,
            Test::RttFairUp,
            4,
            WifiConfig::new(&[r, r], ApQueueing::Airtime).ath9k(),
        );
        let medians: Vec<f64> = s
            .pings
            .iter()
            .filter_map(|p| p.latency_ms.as_ref().map(|l| l.p50))
            .collect();
        let med = if medians.is_empty() {
            f64::NAN
        } else {
            medians.iter().sum::<f64>() / medians.len() as f64
        };
        o.checks.push(Check::new(
            format!("MCS {mcs}: ping median (mean over the 4 pings)"),
            med,
            "ms",
            "16–24 ms",
            Band::Within {
                min: 10.0,
                max: 40.0,
            },
        ));
        o.checks.push(Check::new(
            format!("MCS {mcs}: goodput / PHY rate"),
            total(&s) * 1e6 / r.bps() as f64,
            "",
            "0.70–0.80",
            Band::Within {
                min: 0.6,
                max: 0.85,
            },
        ));
    }
    o
}

/// ath10k firmware queue at HT20 MCS 7, one station, rtt_fair_up: mac80211 FQ with AQL off
/// (the firmware takes up to 1024 frames) against AQL on.
pub fn aql(seed: u64) -> Outcome {
    let mut o = Outcome::new("AQL");
    let mut off = wifi(&["mcs7"], ApQueueing::Airtime);
    off.aql.enabled = false;
    let deep = wifi_run(seed, Test::RttFairUp, 4, off);
    let on = wifi_run(
        seed,
        Test::RttFairUp,
        4,
        wifi(&["mcs7"], ApQueueing::Airtime),
    );
    o.checks.push(Check::new(
        "firmware-deep / AQL ping median",
        ping_p50(&deep) / ping_p50(&on),
        "×",
        "240 → 24 ms (mt76), 4 s → 60 ms (ath10k)",
        Band::AtLeast { min: 5.0 },
    ));
    let pend = |s: &Summary| {
        s.wifi
            .as_ref()
            .and_then(|w| w.stations.first())
            .map_or(f64::NAN, |x| x.max_aql_pending_ms)
    };
    o.notes.push(format!(
        "ping median {:.1} → {:.1} ms; largest estimated airtime in the firmware {:.1} → {:.1} ms; goodput {:.1} → {:.1} Mbit/s",
        ping_p50(&deep),
        ping_p50(&on),
        pend(&deep),
        pend(&on),
        total(&deep),
        total(&on)
    ));
    o
}
