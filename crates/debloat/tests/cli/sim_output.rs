//! What `debloat sim` writes besides flent files: captures as pcap (opened in tshark where it
//! is installed), Wi-Fi stations, a slow trace's counts, and a closed pipe. Part of
//! `tests/cli.rs` (one test binary).

use super::common::{self, debloat, read_flent, text};
use super::sim::flent;
use pcap_file::pcap::PcapReader;
use std::process::Command;

/// Losses make the receiver send ACKs with SACK blocks, longer than the 66 bytes the simulator
/// charges an ACK: every one of them is still in the capture (they were once refused by the
/// pcap writer as longer than their recorded length).
#[test]
fn sim_captures_acks_with_sack_blocks() {
    let dir = tempfile::tempdir().expect("tmp");
    let d = dir.path().to_str().unwrap_or("");
    let o = debloat(&[
        "sim",
        "tcp_nup",
        "--streams",
        "2",
        "--length",
        "5",
        "--qdisc",
        "pfifo limit 10",
        "--pcap",
        d,
        "--output",
        d,
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!text(&o).contains("pcap write failed"), "{}", text(&o));
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("summary.json")).expect("summary"),
    )
    .expect("json");
    let mut r = PcapReader::new(
        std::fs::File::open(dir.path().join("bottleneck-down.pcap")).expect("open"),
    )
    .expect("pcap");
    let (mut n, mut sack) = (0u64, 0u64);
    while let Some(p) = r.next_packet() {
        let p = p.expect("record");
        n += 1;
        sack += u64::from(p.data.len() > 66);
    }
    assert_eq!(Some(n), summary["queues"][1]["sent_pkts"].as_u64());
    assert!(sack > 10, "{sack} ACKs with SACK blocks");
}

#[test]
fn sim_captures_the_bottleneck_as_pcap() {
    let dir = tempfile::tempdir().expect("tmp");
    let d = dir.path().to_str().unwrap_or("");
    let o = debloat(&[
        "sim", "tcp_1up", "--length", "3", "--qdisc", "fq_codel", "--ecn", "--pcap", d, "--output",
        d,
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("summary.json")).expect("summary"),
    )
    .expect("json");
    for (i, name) in ["bottleneck-up.pcap", "bottleneck-down.pcap"]
        .iter()
        .enumerate()
    {
        let mut r = PcapReader::new(std::fs::File::open(dir.path().join(name)).expect("open"))
            .expect("pcap");
        let (mut n, mut last, mut ce) = (0u64, 0u128, 0u64);
        while let Some(p) = r.next_packet() {
            let p = p.expect("record");
            let t = p.timestamp.as_nanos();
            assert!(t >= last, "timestamps go forward");
            last = t;
            let m = debloat_core::classify::classify(
                &p.data,
                p.orig_len,
                debloat_core::classify::LinkType::Ethernet,
            )
            .expect("frames parse");
            ce += u64::from(m.ecn == debloat_core::packet::Ecn::Ce);
            n += 1;
        }
        assert_eq!(
            Some(n),
            summary["queues"][i]["sent_pkts"].as_u64(),
            "{name}: one record per packet sent"
        );
        if i == 0 {
            assert_eq!(
                Some(ce),
                summary["queues"][0]["marked"].as_u64(),
                "CE marks visible in the capture"
            );
        }
    }
    if Command::new("tshark")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        // The protocol hierarchy of the whole capture: Ethernet, IPv4, TCP and ICMP, no errors.
        let out = Command::new("tshark")
            .args([
                "-r",
                dir.path().join("bottleneck-up.pcap").to_str().unwrap_or(""),
                "-q",
                "-z",
                "io,phs",
            ])
            .output()
            .expect("tshark runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "tshark: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        for proto in ["eth", "ip", "tcp", "icmp"] {
            assert!(
                stdout
                    .lines()
                    .any(|l| l.trim_start().starts_with(&format!("{proto} "))),
                "{proto} missing:\n{stdout}"
            );
        }
    } else {
        println!("SKIP: tshark is not installed; the tshark-reads-the-capture check did not run (apt-get install tshark)");
    }
}

#[test]
fn wifi_sim_reports_stations_and_names_bad_rates() {
    // A short Wi-Fi run: two stations at different rates under airtime fairness; the station
    // table shows both, their airtime shares are about equal and the PHY rates are the ones given.
    let dir = tempfile::tempdir().expect("tempdir");
    let o = debloat(&[
        "sim",
        "tcp_nup",
        "--streams",
        "2",
        "--wifi",
        "airtime",
        "--driver",
        "ath9k",
        "--stations",
        "6.5,65",
        "--length",
        "10",
        "--output",
        dir.path().to_str().expect("utf-8 path"),
    ]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("Jain's index over airtime"), "{t}");
    let j: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("summary.json")).expect("summary.json"),
    )
    .expect("json");
    let st = j["wifi"]["stations"].as_array().expect("stations");
    assert_eq!(st.len(), 2);
    assert_eq!(st[0]["phy_mbps"].as_f64(), Some(6.5));
    assert_eq!(st[1]["phy_mbps"].as_f64(), Some(65.0));
    for s in st {
        let share = s["airtime_share"].as_f64().expect("share");
        assert!((share - 0.5).abs() < 0.05, "airtime share {share}: {t}");
    }
    // The fast station moves several times the slow one's data in the same airtime.
    let tp = |i: usize| st[i]["throughput_mbps"].as_f64().expect("throughput");
    assert!(tp(1) > 5.0 * tp(0), "{} vs {}", tp(1), tp(0));

    // The flent file carries the same station table in its metadata, flent still opens it, and
    // the HTML report draws it.
    let file = dir.path().join("tcp_nup-2026-01-01T000000.000000.flent.gz");
    let v = read_flent(&file);
    let meta_st = v["metadata"]["DEBLOAT_WIFI"]["stations"]
        .as_array()
        .expect("DEBLOAT_WIFI stations in the flent metadata");
    assert_eq!(meta_st.len(), 2);
    assert_eq!(meta_st[1]["throughput_mbps"], st[1]["throughput_mbps"]);
    if let Some(csv) = flent(&file, "csv", "the flent-opens-a-Wi-Fi-file check") {
        assert!(csv.lines().count() > 10, "{csv}");
    }
    let report = dir.path().join("report");
    let o = debloat(&[
        "report",
        file.to_str().expect("utf-8 path"),
        "--output",
        report.to_str().expect("utf-8 path"),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let page = std::fs::read_to_string(report.join("index.html")).expect("index.html");
    assert!(page.contains("Wi-Fi stations"), "no station section");
    for s in st {
        let host = s["host"].as_str().expect("host");
        let pct = format!(
            "{:.1} %",
            s["airtime_share"].as_f64().expect("share") * 100.0
        );
        assert!(
            page.contains(&format!("<td>{host}</td>")) && page.contains(&pct),
            "station {host} with airtime {pct} not in the report"
        );
    }
    assert!(page.contains("Jain's fairness index over airtime"));

    let o = debloat(&["sim", "tcp_nup", "--wifi", "airtime", "--stations", "6.5,7"]);
    assert!(!o.status.success());
    let t = text(&o);
    assert!(t.contains("'7'") && t.contains("mcsN"), "{t}");
    let o = debloat(&[
        "sim",
        "tcp_nup",
        "--wifi",
        "airtime",
        "--rate-control",
        "auto",
    ]);
    assert!(!o.status.success());
    let t = text(&o);
    assert!(t.contains("auto") && t.contains("fixed or minstrel"), "{t}");
    let o = debloat(&["sim", "tcp_nup", "--wifi", "wmm"]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("legacy, fq_codel or airtime"),
        "{}",
        text(&o)
    );
    let o = debloat(&[
        "sim",
        "tcp_nup",
        "--wifi",
        "airtime",
        "--stations",
        "65",
        "--ping-station",
        "3",
    ]);
    assert!(!o.status.success());
    assert!(text(&o).contains("there are 1 stations"), "{}", text(&o));
}

/// `debloat spec … | head -1`: the reader gone, the command ends by SIGPIPE as `tc` would,
/// not with a panic about a failed print. The pipe's read end is closed before debloat
/// starts, so its first write fails every time.
#[test]
fn a_closed_pipe_ends_a_report_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let o = Command::new(env!("CARGO_BIN_EXE_debloat"))
        .args(["spec", "cake bandwidth 20Mbit diffserv4"])
        .stdout(writer)
        .output()
        .expect("debloat runs");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("panicked"), "{err}");
    const SIGPIPE: i32 = 13;
    assert_eq!(o.status.signal(), Some(SIGPIPE), "{:?}: {err}", o.status);
}

/// A slow trace with outages (40 opportunities of 1500 bytes in its first second, then none
/// until 6 s, repeating: 80 kbit/s on average) behind a 5-packet modem FIFO under four
/// downloads: the modem drops more than it admits, and what `sim` prints and writes for it adds
/// up — offered = admitted + dropped, admitted = departed + queued — where its "sent" column
/// once printed `admitted - dropped` and underflowed (18446744073709551598 on this trace).
#[test]
fn a_slow_trace_links_modem_counts_add_up_in_what_sim_prints() {
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = dir.path().join("slow.mahi");
    let mut ms: String = (1..=40).map(|i| format!("{}\n", i * 25)).collect();
    ms.push_str("6000\n");
    std::fs::write(&trace, ms).expect("write trace");
    let link = format!("trace:{}/1Mbit", trace.display());
    let out = dir.path().join("out");
    let o = debloat(&[
        "sim",
        "tcp_ndown",
        "--streams",
        "4",
        "--link",
        &link,
        "--trace-buffer",
        "5",
        "--length",
        "20",
        "--output",
        out.to_str().expect("utf-8 path"),
    ]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let v = common::summary_json(&out);
    let q = v["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .find(|q| !q["modem"].is_null())
        .expect("the down link's modem");
    let n = |x: &serde_json::Value| x.as_u64().expect("a count");
    let m = &q["modem"];
    let (admitted, dropped) = (n(&m["admitted"]), n(&m["dropped"]));
    assert!(dropped > admitted, "the FIFO overflows: {m}");
    assert_eq!(
        admitted + dropped,
        n(&q["sent_pkts"]) - n(&q["lost_on_wire"]),
        "{q}"
    );
    assert_eq!(n(&m["departed"]) + n(&m["queued"]), admitted, "{m}");
    let line = t
        .lines()
        .find(|l| l.trim_start().starts_with("modem down"))
        .unwrap_or_else(|| panic!("a modem line in\n{t}"));
    let sent: u64 = line
        .split_whitespace()
        .find_map(|w| w.parse().ok())
        .expect("the sent column");
    assert_eq!(sent, n(&m["departed"]), "{line}");
}
