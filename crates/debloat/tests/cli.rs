//! The `debloat` command line, run as a user would: replay on CSV and pcap traces, its errors,
//! `spec` and `sim`. The demo and reports are in `tests/report.rs`.

mod common;
use common::{debloat, text};

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter};
use pcap_file::{DataLink, Endianness, TsResolution};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn read_fates(p: &Path) -> Vec<Vec<String>> {
    let (h, rows) = common::fates(p);
    assert_eq!(
        h,
        "id,t_enq_ns,fate,reason,t_deq_ns,sojourn_ns,ecn_out,t_arrive_ns"
    );
    rows
}

/// 2000 packets of 1514 B at 20 Mbit/s (every 605.6 µs) into a 10 Mbit/s link, plus 20 pings.
/// Returns the trace's path and the ids (row positions) of the pings.
fn overload_trace(dir: &Path) -> (std::path::PathBuf, Vec<usize>) {
    let mut s = String::from("t_ns,src,dst,sport,dport,proto,len,dscp,ecn\n");
    let (mut id, mut pings) = (0usize, vec![]);
    for i in 0..2000u64 {
        s += &format!(
            "{},198.18.0.1,198.18.1.1,5000,5001,udp,1514,0,{}\n",
            i * 605_600,
            if i % 2 == 0 { 2 } else { 0 }
        );
        id += 1;
        if i % 100 == 50 {
            s += &format!(
                "{},198.18.0.2,198.18.1.2,0,0,icmp,98,0,0\n",
                i * 605_600 + 1
            );
            pings.push(id);
            id += 1;
        }
    }
    let p = dir.join("trace.csv");
    std::fs::write(&p, s).expect("write trace");
    (p, pings)
}

#[test]
fn replay_csv_through_pfifo_and_fq_codel() {
    let dir = tempfile::tempdir().expect("tmp");
    let (trace, pings) = overload_trace(dir.path());
    let out = dir.path().join("fates.csv");
    let o = debloat(&[
        "replay",
        "--qdisc",
        "pfifo limit 100",
        "--rate",
        "10Mbit",
        "--input",
        trace.to_str().unwrap_or(""),
        "--output",
        out.to_str().unwrap_or(""),
        "--stats",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let rows = read_fates(&out);
    assert_eq!(rows.len(), 2020, "one row per input packet");
    let sent = rows.iter().filter(|r| r[2] == "sent").count();
    let dropped = rows.iter().filter(|r| r[2] == "dropped").count();
    assert_eq!(sent + dropped, 2020);
    assert!(rows
        .iter()
        .filter(|r| r[2] == "dropped")
        .all(|r| r[3] == "overlimit"));
    // Half the offered load fits: about 1000 of 2000 bulk packets are sent.
    assert!((950..=1150).contains(&sent), "sent {sent}");
    let t = text(&o);
    assert!(
        t.contains("qdisc pfifo") && t.contains("Sent ") && t.contains("dropped"),
        "{t}"
    );
    for w in rows.windows(2) {
        assert!(
            w[0][0].parse::<u64>().unwrap_or(0) < w[1][0].parse::<u64>().unwrap_or(0),
            "input order"
        );
    }

    let o = debloat(&[
        "replay",
        "--qdisc",
        "fq_codel",
        "--rate",
        "10Mbit",
        "--input",
        trace.to_str().unwrap_or(""),
        "--output",
        out.to_str().unwrap_or(""),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let rows = read_fates(&out);
    let marked = rows.iter().filter(|r| r[6] == "3").count();
    assert!(marked > 0, "ECT packets get CE marks under fq_codel");
    // Pings are sparse: sent, after at most one 1514 B packet time at 10 Mbit/s (1.2112 ms).
    assert_eq!(pings.len(), 20);
    for &i in &pings {
        assert_eq!(rows[i][2], "sent", "ping {i}");
        let soj: u64 = rows[i][5].parse().expect("sojourn");
        assert!(soj <= 1_211_200, "ping {i} waited {soj} ns");
    }
    let bulk_soj: u64 = rows[1500][5].parse().unwrap_or(0);
    assert!(bulk_soj > 5_000_000, "bulk packets do queue: {bulk_soj} ns");
}

#[test]
fn replay_pcap_in_and_out() {
    let dir = tempfile::tempdir().expect("tmp");
    let input = dir.path().join("in.pcap");
    let header = PcapHeader {
        datalink: DataLink::ETHERNET,
        ts_resolution: TsResolution::NanoSecond,
        endianness: Endianness::Little,
        ..PcapHeader::default()
    };
    let mut w = PcapWriter::with_header(std::fs::File::create(&input).expect("create"), header)
        .expect("pcap");
    for i in 0..50u64 {
        let b = etherparse::PacketBuilder::ethernet2([2; 6], [4; 6])
            .ipv4([198, 18, 0, 1], [198, 18, 1, 1], 64)
            .udp(1000, 2000);
        let mut f = Vec::new();
        b.write(&mut f, &[0u8; 1472]).expect("frame");
        f[15] = 2; // ECT(0)
        let ck = etherparse::Ipv4HeaderSlice::from_slice(&f[14..])
            .expect("ip")
            .to_header()
            .calc_header_checksum();
        f[24..26].copy_from_slice(&ck.to_be_bytes());
        w.write_packet(&PcapPacket::new(
            Duration::from_micros(1_000_000 + i * 100),
            f.len() as u32,
            &f,
        ))
        .expect("write");
    }
    // Packet 51: garbage claiming to be IPv4.
    let mut bad = vec![0u8; 40];
    bad[12] = 0x08;
    w.write_packet(&PcapPacket::new(Duration::from_micros(1_006_000), 40, &bad))
        .expect("write");
    drop(w);
    let fates = dir.path().join("fates.csv");
    let sent = dir.path().join("sent.pcap");
    let o = debloat(&[
        "replay",
        "--qdisc",
        "cake bandwidth 10Mbit besteffort",
        "--input",
        input.to_str().unwrap_or(""),
        "--output",
        fates.to_str().unwrap_or(""),
        "--pcap-out",
        sent.to_str().unwrap_or(""),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("packet 51: malformed frame"),
        "{}",
        text(&o)
    );
    let rows = read_fates(&fates);
    assert_eq!(rows.len(), 51);
    assert_eq!(
        (rows[50][2].as_str(), rows[50][3].as_str()),
        ("dropped", "malformed")
    );
    // The delivered pcap reads back: frames spaced by 1514 B at 10 Mbit/s, valid IP checksums.
    let mut r = PcapReader::new(std::fs::File::open(&sent).expect("open")).expect("pcap");
    let mut ts = vec![];
    while let Some(p) = r.next_packet() {
        let p = p.expect("packet");
        let ip = etherparse::Ipv4HeaderSlice::from_slice(&p.data[14..])
            .expect("ip")
            .to_header();
        assert_eq!(ip.header_checksum, ip.calc_header_checksum());
        ts.push(p.timestamp.as_nanos() as u64);
    }
    let sent_rows = rows.iter().filter(|r| r[2] == "sent").count();
    assert_eq!(ts.len(), sent_rows);
    assert!(ts.len() >= 40, "{} sent", ts.len());
    let gaps: Vec<u64> = ts.windows(2).map(|w| w[1] - w[0]).collect();
    let spaced = gaps.iter().filter(|g| g.abs_diff(1_211_200) <= 2).count();
    assert!(spaced >= gaps.len() - 2, "gaps {gaps:?}");
}

#[test]
fn replay_reads_captures_cut_short_by_snaplen() {
    // As `tcpdump -s 96` writes them: 96 bytes kept of each 1514-byte frame.
    let dir = tempfile::tempdir().expect("tmp");
    let input = dir.path().join("short.pcap");
    let header = PcapHeader {
        datalink: DataLink::ETHERNET,
        snaplen: 96,
        endianness: Endianness::Big,
        ..PcapHeader::default()
    };
    let mut raw = Vec::new();
    {
        let mut w = PcapWriter::with_header(
            &mut raw,
            PcapHeader {
                snaplen: 65535,
                ..header
            },
        )
        .expect("pcap");
        for i in 0..10u64 {
            let b = etherparse::PacketBuilder::ethernet2([2; 6], [4; 6])
                .ipv4([198, 18, 0, 1], [198, 18, 1, 1], 64)
                .udp(1000, 2000);
            let mut f = Vec::new();
            b.write(&mut f, &[0u8; 1472]).expect("frame");
            f.truncate(96);
            w.write_packet(&PcapPacket::new(Duration::from_micros(i * 100), 1514, &f))
                .expect("write");
        }
    }
    raw[16..20].copy_from_slice(&96u32.to_be_bytes()); // the snaplen tcpdump would have written
    std::fs::write(&input, &raw).expect("write");
    let out = dir.path().join("f.csv");
    let o = debloat(&[
        "replay",
        "--qdisc",
        "fq_codel",
        "--rate",
        "10Mbit",
        "--input",
        input.to_str().unwrap_or(""),
        "--output",
        out.to_str().unwrap_or(""),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let rows = read_fates(&out);
    assert_eq!(rows.len(), 10);
    assert!(rows.iter().all(|r| r[2] == "sent"), "{rows:?}");
    assert!(
        text(&o).contains("15.14 kB") || text(&o).contains("0.02 MB"),
        "lengths come from the wire length: {}",
        text(&o)
    );
}

#[test]
fn malformed_rows_are_errors_naming_the_line() {
    let dir = tempfile::tempdir().expect("tmp");
    let p = dir.path().join("bad.csv");
    std::fs::write(&p, "t_ns,src,dst,sport,dport,proto,len,dscp,ecn\n0,198.18.0.1,198.18.1.1,1,2,udp,100,0,0\n10,198.18.0.1,198.18.1.1,1,2,udp,-5,0,0\n").expect("write");
    let out = dir.path().join("f.csv");
    let o = debloat(&[
        "replay",
        "--qdisc",
        "pfifo",
        "--input",
        p.to_str().unwrap_or(""),
        "--output",
        out.to_str().unwrap_or(""),
    ]);
    assert!(!o.status.success());
    let t = text(&o);
    assert!(
        t.contains("line 3") && t.contains("len") && t.contains("`-5`"),
        "{t}"
    );
}

#[test]
fn bad_specs_and_rates_say_how_to_fix_them() {
    let o = debloat(&[
        "replay",
        "--qdisc",
        "cake bandwith 10Mbit",
        "--input",
        "x",
        "--output",
        "y",
    ]);
    assert!(!o.status.success());
    let t = text(&o);
    assert!(
        t.contains("`bandwith`") && t.contains("bandwidth RATE"),
        "{t}"
    );
    let o = debloat(&[
        "replay", "--qdisc", "pfifo", "--rate", "10Mbits", "--input", "x", "--output", "y",
    ]);
    assert!(!o.status.success());
    assert!(text(&o).contains("Mbit"), "{}", text(&o));
}

/// Spinning at real-time priority would starve the kernel's packet processing on that core:
/// the gateway refuses the pair before touching any interface, and says why.
#[test]
fn busy_poll_and_realtime_together_are_refused() {
    let o = debloat(&[
        "gateway",
        "--lan",
        "nosuch0",
        "--wan",
        "nosuch1",
        "--busy-poll",
        "--realtime",
        "50",
    ]);
    assert!(!o.status.success());
    let t = text(&o);
    assert!(
        t.contains("--busy-poll") && t.contains("ksoftirqd") && t.contains("one or the other"),
        "{t}"
    );
    let o = debloat(&["testbed", "up", "--busy-poll", "--realtime", "50"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("cannot be used with"), "{}", text(&o));
}

/// `--io` and `--workers`/`--cores` words are checked before any interface is touched: an
/// unknown back end names the valid ones; a worker count that disagrees with the CPU list,
/// and several workers on AF_XDP or with an htb tree (whose rates they cannot split yet), are
/// refused with the reason.
#[test]
fn io_and_worker_words_are_checked_with_the_choices_named() {
    let gw = |more: &[&str]| {
        let mut a = vec!["gateway", "--lan", "nosuch0", "--wan", "nosuch1"];
        a.extend_from_slice(more);
        let o = debloat(&a);
        assert!(!o.status.success(), "{more:?} started");
        text(&o)
    };
    let t = gw(&["--io", "dpdk"]);
    assert!(t.contains("af_xdp, packet, auto or af_xdp_generic"), "{t}");
    let t = gw(&["--workers", "2", "--cores", "0,1,2"]);
    assert!(t.contains("--workers 2 with --cores naming 3 CPUs"), "{t}");
    let t = gw(&["--workers", "0"]);
    assert!(t.contains("--workers"), "{t}");
    // Several workers run on AF_XDP too: the interface is what is missing here.
    let t = gw(&["--workers", "2", "--io", "af_xdp"]);
    assert!(
        t.contains("--io af_xdp on nosuch0: interface nosuch0"),
        "{t}"
    );
    // An htb tree's classes are split between the workers: the interface is what is missing.
    let htb = "htb default 10 class 1:1 rate 10Mbit class 1:10 parent 1:1 rate 5Mbit";
    let t = gw(&["--workers", "2", "--egress", htb]);
    assert!(t.contains("nosuch0"), "{t}");
    assert!(!t.contains("htb"), "{t}");
    let lq = concat!(env!("CARGO_MANIFEST_DIR"), "/../../contrib/libreqos/");
    let (n, d) = (
        format!("{lq}network.json"),
        format!("{lq}ShapedDevices.csv"),
    );
    // So are LibreQoS's circuits (an htb tree each way): the interface is what is missing.
    let t = gw(&["--workers", "2", "--network", &n, "--devices", &d]);
    assert!(
        t.contains("nosuch0") && !t.contains("--workers 2 with"),
        "{t}"
    );
}

#[test]
fn spec_prints_derived_parameters_as_tc_would() {
    let o = debloat(&["spec", "cake bandwidth 20Mbit diffserv3"]);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("qdisc cake") && t.contains("bandwidth 20Mbit diffserv3 triple-isolate"),
        "{t}"
    );
    assert!(
        t.contains("Bulk") && t.contains("Best Effort") && t.contains("Voice"),
        "{t}"
    );
    assert!(
        t.contains("1250Kbit") && t.contains("5Mbit") && t.contains("memory used: 0b of 4Mb"),
        "{t}"
    );
    let o = debloat(&["spec", "fq_codel", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["kind"], "fq_codel");
    assert_eq!(v["xstats"]["new_flows_len"], 0);
}

/// flent's output for `flent -i FILE -f FORMAT`, or None — with a SKIP line saying what did not
/// run — where flent is not installed (CI installs it).
fn flent(file: &Path, format: &str, what: &str) -> Option<String> {
    if !Command::new("flent")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        println!("SKIP: flent is not installed; {what} did not run (apt-get install flent)");
        return None;
    }
    let out = Command::new("flent")
        .args(["-i", file.to_str().unwrap_or(""), "-f", format])
        .output()
        .expect("flent runs");
    assert!(
        out.status.success(),
        "flent -f {format}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn read_flent(p: &Path) -> serde_json::Value {
    let f = std::fs::File::open(p).expect("open");
    let mut s = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(f), &mut s).expect("gzip");
    serde_json::from_str(&s).expect("json")
}

#[test]
fn sim_writes_a_flent_file_and_a_summary() {
    let dir = tempfile::tempdir().expect("tmp");
    let o = debloat(&[
        "sim",
        "tcp_nup",
        "--link",
        "20Mbit/20Mbit",
        "--rtt",
        "48ms",
        "--qdisc",
        "cake bandwidth 20Mbit",
        "--streams",
        "2",
        "--length",
        "10",
        "--output",
        dir.path().to_str().unwrap_or(""),
        "--title",
        "cake test",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("TCP upload::1")
            && t.contains("Ping (ms) ICMP")
            && t.contains("Mbit/s")
            && t.contains("ms"),
        "{t}"
    );
    let name = "tcp_nup-2026-01-01T000000.000000.cake_test.flent.gz";
    let v = read_flent(&dir.path().join(name));
    assert_eq!(v["version"], 4);
    assert_eq!(v["metadata"]["NAME"], "tcp_nup");
    assert_eq!(v["metadata"]["T0"], "2026-01-01T00:00:00.000000Z");
    assert_eq!(v["metadata"]["TEST_PARAMETERS"]["upload_streams"], "2");
    let n = v["x_values"].as_array().map(|a| a.len()).unwrap_or(0);
    assert_eq!(n, 101, "20 s at 0.2 s steps");
    for s in ["TCP upload::1", "TCP upload::2", "Ping (ms) ICMP"] {
        assert_eq!(v["results"][s].as_array().map(|a| a.len()), Some(n), "{s}");
        assert!(
            !v["raw_values"][s]
                .as_array()
                .map(|a| a.is_empty())
                .unwrap_or(true),
            "{s} has raw samples"
        );
    }
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("summary.json")).expect("summary"),
    )
    .expect("json");
    assert_eq!(summary["flows"].as_array().map(|a| a.len()), Some(2));
    assert_eq!(summary["queues"][0]["where"], "bottleneck up");
    let p50 = summary["pings"][0]["latency_ms"]["p50"]
        .as_f64()
        .unwrap_or(0.0);
    assert!(
        p50 > 48.0 && p50 < 52.0,
        "cake keeps the ping near the 48 ms base: {p50}"
    );
    let tp = summary["flows"][0]["throughput_mbps"]
        .as_f64()
        .unwrap_or(0.0);
    assert!(tp > 5.0, "throughput {tp}");

    // The real flent opens it.
    if let Some(csv) = flent(
        &dir.path().join(name),
        "csv",
        "the flent-loads-the-file check",
    ) {
        let rows = csv
            .lines()
            .filter(|l| l.chars().next().is_some_and(|c| c.is_ascii_digit()))
            .count();
        assert_eq!(rows, n, "flent -f csv prints one row per x value:\n{csv}");
        assert!(
            csv.lines().any(|l| l.starts_with("tcp_nup,")
                && l.contains("TCP upload::1")
                && l.contains("Ping (ms) ICMP")),
            "{csv}"
        );
    }
    if let Some(sum) = flent(&dir.path().join(name), "summary", "the flent summary check") {
        assert!(sum.contains("Ping (ms) ICMP"), "{sum}");
    }
}

#[test]
fn sim_rrul_file_has_flents_series_names() {
    let dir = tempfile::tempdir().expect("tmp");
    let o = debloat(&[
        "sim",
        "rrul",
        "--link",
        "20Mbit/2Mbit",
        "--rtt",
        "20ms",
        "--qdisc",
        "fq_codel",
        "--length",
        "5",
        "--output",
        dir.path().to_str().unwrap_or(""),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let name = "rrul-2026-01-01T000000.000000.flent.gz";
    let v = read_flent(&dir.path().join(name));
    for s in [
        "TCP upload BE",
        "TCP upload BK",
        "TCP upload CS5",
        "TCP upload EF",
        "TCP download BE",
        "TCP download BK",
        "TCP download CS5",
        "TCP download EF",
        "Ping (ms) UDP EF",
        "Ping (ms) UDP BK",
        "Ping (ms) UDP BE",
        "Ping (ms) ICMP",
    ] {
        assert!(v["results"][s].is_array(), "missing series {s}");
    }
    if let Some(out) = flent(
        &dir.path().join(name),
        "summary",
        "the flent-opens-rrul check",
    ) {
        assert!(
            out.contains("TCP totals") && out.contains("Ping (ms) UDP EF"),
            "{out}"
        );
    }
}

#[test]
fn sim_rtt_fair_up_names_its_four_hosts_as_flent_does() {
    let dir = tempfile::tempdir().expect("tmp");
    let o = debloat(&[
        "sim",
        "rtt_fair_up",
        "--link",
        "5500kbit/500kbit",
        "--rtt",
        "300us",
        "--qdisc",
        "fq_codel",
        "--length",
        "5",
        "--output",
        dir.path().to_str().unwrap_or(""),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let v = read_flent(
        &dir.path()
            .join("rtt_fair_up-2026-01-01T000000.000000.flent.gz"),
    );
    assert_eq!(v["metadata"]["HOSTS"].as_array().map(|a| a.len()), Some(4));
    for i in 1..=4 {
        let h = format!("198.18.2.{}", 10 + i);
        for s in [
            format!("TCP upload BE{i} {h}"),
            format!("Ping (ms) ICMP{i} {h}"),
        ] {
            assert!(v["results"][&s].is_array(), "missing {s}");
        }
    }
}

#[test]
fn sim_voip_writes_flents_voip_series() {
    let dir = tempfile::tempdir().expect("tmp");
    let o = debloat(&[
        "sim",
        "voip",
        "--link",
        "1Mbit/1Mbit",
        "--rtt",
        "50ms",
        "--qdisc",
        "fq_codel",
        "--length",
        "4",
        "--output",
        dir.path().to_str().unwrap_or(""),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let v = read_flent(&dir.path().join("voip-2026-01-01T000000.000000.flent.gz"));
    for s in ["VoIP::rtt", "VoIP::delay", "VoIP::jitter", "VoIP::loss"] {
        assert!(v["results"][s].is_array(), "missing {s}");
    }
    let raw = v["raw_values"]["VoIP"]
        .as_array()
        .map(|a| a.len())
        .unwrap_or(0);
    assert_eq!(
        raw, 201,
        "every 20 ms from 0 to 4 s inclusive: 201 packets, all answered"
    );
    let delay = v["metadata"]["SERIES_META"]["VoIP"]["OWD_UP_MEAN"]
        .as_f64()
        .unwrap_or(0.0);
    assert!(
        (25.0..27.0).contains(&delay),
        "one-way delay ≈ half the RTT + serialisation: {delay}"
    );
    if let Some(out) = flent(
        &dir.path().join("voip-2026-01-01T000000.000000.flent.gz"),
        "summary",
        "the flent-opens-voip check",
    ) {
        assert!(
            out.contains("VoIP::delay") && out.contains("VoIP::loss"),
            "{out}"
        );
    }
}

#[test]
fn sim_runs_a_toml_scenario() {
    let dir = tempfile::tempdir().expect("tmp");
    let sc = dir.path().join("s.toml");
    std::fs::write(&sc, "name = \"t\"\nlength = 10\n[link]\ndown = \"20Mbit\"\nup = \"2Mbit\"\nrtt = \"20ms\"\nqdisc = \"fq_codel\"\n[[flow]]\nname = \"up\"\nkind = \"tcp\"\n[[flow]]\nname = \"down\"\nkind = \"tcp\"\ndirection = \"down\"\ncc = \"bbr\"\n[[flow]]\nname = \"ping\"\nkind = \"ping\"\n").expect("write");
    let o = debloat(&[
        "sim",
        "--scenario",
        sc.to_str().unwrap_or(""),
        "--output",
        dir.path().to_str().unwrap_or(""),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("up") && t.contains("down") && t.contains("ping: under load"),
        "{t}"
    );
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("summary.json")).expect("summary"),
    )
    .expect("json");
    assert_eq!(summary["flows"].as_array().map(|a| a.len()), Some(2));
    assert_eq!(summary["flows"][1]["cc"], "bbr");
    std::fs::write(&sc, "length = 10\n[link]\ndown = \"20Mbit\"\n").expect("write");
    let o = debloat(&["sim", "--scenario", sc.to_str().unwrap_or("")]);
    assert!(
        !o.status.success() && text(&o).contains("missing field"),
        "{}",
        text(&o)
    );
}

/// A misspelt word is reported against the flag the user typed, with the nearest valid word.
#[test]
fn sim_names_the_flag_typed_and_the_word_meant() {
    let o = debloat(&["sim", "rrul", "--qdisc", "cake bandwith 20Mbit"]);
    let t = text(&o);
    assert!(!o.status.success());
    assert!(t.contains("--qdisc \"cake bandwith 20Mbit\""), "{t}");
    assert!(!t.contains("--qdisc-up"), "{t}");
    assert!(t.contains("did you mean `bandwidth`?"), "{t}");
    let o = debloat(&["sim", "rrul", "--qdisc-down", "fq_codle"]);
    let t = text(&o);
    assert!(
        t.contains("--qdisc-down") && t.contains("`fq_codel`"),
        "{t}"
    );
    let o = debloat(&["sim", "rrul", "--impair", "delay 5ms jiter 1ms"]);
    let t = text(&o);
    assert!(t.contains("--impair") && t.contains("`jitter`"), "{t}");
    let o = debloat(&["sim", "rrul", "--impair", "rate 5mbit"]);
    let t = text(&o);
    assert!(!o.status.success() && t.contains("--link"), "{t}");
    let o = debloat(&["sim", "rrul", "--loss", "120%"]);
    assert!(
        !o.status.success() && text(&o).contains("between 0 and 100"),
        "{}",
        text(&o)
    );
}

/// `--impair` takes netem's words: a 10 ms delay on each wire adds 20 ms to the idle RTT.
#[test]
fn sim_impair_adds_netems_delay_to_both_wires() {
    let run = |extra: &[&str]| {
        let mut args = vec!["sim", "ping", "--length", "5", "--rtt", "20ms"];
        args.extend_from_slice(extra);
        let o = debloat(&args);
        assert!(o.status.success(), "{}", text(&o));
        text(&o)
    };
    let p50 = |t: &str| -> f64 {
        let i = t.find("p50 ").expect("a p50");
        t[i + 4..]
            .split_whitespace()
            .next()
            .and_then(|v| v.parse().ok())
            .expect("a number")
    };
    let (plain, delayed) = (p50(&run(&[])), p50(&run(&["--impair", "delay 10ms"])));
    assert!(
        (delayed - plain - 20.0).abs() < 0.5,
        "{plain} ms → {delayed} ms"
    );
}

#[test]
fn sim_says_which_tests_exist() {
    // One catalog: a name neither knows is refused with the same list the probe gives, and a
    // test that needs a real network says so and how to run it there.
    let o = debloat(&["sim", "tcp_9up"]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("unknown test `tcp_9up`") && text(&o).contains("tcp_nup"),
        "{}",
        text(&o)
    );
    let probe = debloat(&["test", "tcp_9up", "198.18.0.1"]);
    let line = |t: String| {
        t.lines()
            .find(|l| l.contains("unknown test"))
            .map(|l| l[l.find("unknown test").unwrap_or(0)..].to_string())
    };
    assert_eq!(line(text(&o)), line(text(&probe)), "same words in both");
    let o = debloat(&["sim", "responsiveness"]);
    assert!(
        !o.status.success() && text(&o).contains("debloat test responsiveness SERVER"),
        "{}",
        text(&o)
    );
    let o = debloat(&["sim", "tcp_1down", "--length", "2"]);
    assert!(
        o.status.success() && text(&o).contains("TCP download"),
        "{}",
        text(&o)
    );
    let o = debloat(&["sim", "tcp_nup", "--cc", "vegas"]);
    assert!(
        !o.status.success() && text(&o).contains("cubic"),
        "{}",
        text(&o)
    );
    let o = debloat(&["sim", "tcp_nup", "--link", "fast"]);
    assert!(
        !o.status.success() && text(&o).contains("Mbit"),
        "{}",
        text(&o)
    );
}

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
