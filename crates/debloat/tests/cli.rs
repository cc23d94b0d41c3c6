//! The `debloat` command line, run as a user would: replay on CSV and pcap traces, its errors,
//! `spec`; `sim` in `cli/sim.rs` and `cli/sim_output.rs`. The demo and reports are in `tests/report.rs`.

mod common;
#[path = "cli/sim.rs"]
mod sim;
#[path = "cli/sim_output.rs"]
mod sim_output;
use common::{debloat, text};

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter};
use pcap_file::{DataLink, Endianness, TsResolution};
use std::path::Path;
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
/// the gateway refuses the pair before touching any interface, and says why. Its ports are
/// named apart from the next test's: a gateway claims its ports (a lock each) before it checks
/// the rest, and the two tests run at once (CI saw the other one refused as "already forwarded").
#[test]
fn busy_poll_and_realtime_together_are_refused() {
    let o = debloat(&[
        "gateway",
        "--lan",
        "nosuch2",
        "--wan",
        "nosuch3",
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
