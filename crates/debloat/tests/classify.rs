//! The marking stage offline: `debloat replay --classify` runs qosify's rules before the
//! discipline, so a map file can be tried on a trace before it goes on a gateway. Every packet
//! of the trace arrives with DSCP 0, as a home network's do.

mod common;
use common::{debloat, text};
use std::path::Path;

/// One second of three flows, all DSCP 0: DNS (udp:53, 100-byte packets, 50 a second), a bulk
/// download-like TCP flow to port 443 (1514 B, 600 a second), and a UDP flow of small packets
/// to port 7000 (60 B, 50 a second) — all from 198.18.1.2.
fn trace(dir: &Path) -> std::path::PathBuf {
    let mut s = String::from("t_ns,src,dst,sport,dport,proto,len,dscp,ecn\n");
    for i in 0..600u64 {
        let t = i * 1_666_666;
        s += &format!("{t},198.18.1.2,198.18.2.2,40000,443,tcp,1514,0,0\n");
        if i % 12 == 0 {
            s += &format!("{},198.18.1.2,198.18.2.2,40001,53,udp,100,0,0\n", t + 1);
            s += &format!("{},198.18.1.2,198.18.2.2,40002,7000,udp,60,0,0\n", t + 2);
        }
    }
    let p = dir.join("trace.csv");
    std::fs::write(&p, s).expect("trace");
    p
}

fn rows(p: &Path) -> Vec<Vec<String>> {
    let (h, rows) = common::fates(p);
    assert!(h.ends_with(",dscp_out"), "{h}");
    rows
}

#[test]
fn replay_marks_by_qosifys_rules_and_cake_sorts_the_tins() {
    let dir = tempfile::tempdir().expect("tmp");
    let t = trace(dir.path());
    let map = dir.path().join("00-defaults.conf");
    std::fs::write(&map, "udp:53 voice\ntcp:443 +bulk\n").expect("map");
    let out = dir.path().join("fates.csv");
    let stats = dir.path().join("stats.json");
    let s = |p: &Path| p.to_string_lossy().into_owned();
    let o = debloat(&[
        "replay",
        "--qdisc",
        "cake bandwidth 20Mbit diffserv4",
        "--classify",
        &s(&map),
        "--input",
        &s(&t),
        "--output",
        &s(&out),
        "--stats-json",
        &s(&stats),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let r = rows(&out);
    // Columns: id,t_enq_ns,fate,reason,t_deq_ns,sojourn_ns,ecn_out,t_arrive_ns,dscp_out; every row in input
    // order: tcp, then (every 12th) dns and the small UDP flow.
    let dscp = |i: usize| r[i][8].parse::<u8>().ok();
    assert_eq!(dscp(0), Some(1), "tcp:443 +bulk → LE on a DSCP-0 packet");
    assert_eq!(dscp(1), Some(48), "udp:53 voice → CS6");
    assert_eq!(
        dscp(2),
        Some(34),
        "a small-packet UDP flow → video (the defaults' dscp_prio)"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).expect("stats")).expect("json");
    let tins: Vec<u64> = v["xstats"]["tins"]
        .as_array()
        .expect("tins")
        .iter()
        .map(|t| t["sent_packets"].as_u64().unwrap_or(0))
        .collect();
    // diffserv4, in tc's order Bulk, Best Effort, Video, Voice.
    assert_eq!(tins, vec![600, 0, 50, 50], "{}", text(&o));
    assert!(
        text(&o).contains("by class: besteffort 0, bulk 600, video 50, voice 50"),
        "{}",
        text(&o)
    );
}

#[test]
fn a_bad_map_line_is_named_with_its_token_and_choices() {
    let dir = tempfile::tempdir().expect("tmp");
    let t = trace(dir.path());
    let map = dir.path().join("m.conf");
    std::fs::write(&map, "udp:53 voice\ntcp:443 bluk\n").expect("map");
    let out = dir.path().join("fates.csv");
    let o = debloat(&[
        "replay",
        "--qdisc",
        "fq_codel",
        "--classify",
        &map.to_string_lossy(),
        "--input",
        &t.to_string_lossy(),
        "--output",
        &out.to_string_lossy(),
    ]);
    assert!(!o.status.success());
    let e = text(&o);
    assert!(e.contains("m.conf:2: `bluk`"), "{e}");
    assert!(e.contains("besteffort, bulk, video, voice"), "{e}");
}

/// A DNS response from 198.18.2.53 naming `host` (through `alias`'s CNAME when given) at `addr`.
fn dns_answer(host: &str, alias: Option<&str>, addr: [u8; 4]) -> Vec<u8> {
    use simple_dns::rdata::{RData, A, CNAME};
    use simple_dns::{Name, Packet, Question, ResourceRecord, CLASS, TYPE};
    let mut p = Packet::new_reply(9);
    let q = Name::new_unchecked(host);
    p.questions.push(Question::new(
        q.clone(),
        TYPE::A.into(),
        CLASS::IN.into(),
        false,
    ));
    let mut owner = q;
    if let Some(a) = alias {
        let target = Name::new_unchecked(a);
        p.answers.push(ResourceRecord::new(
            owner,
            CLASS::IN,
            60,
            RData::CNAME(CNAME(target.clone())),
        ));
        owner = target;
    }
    let a = RData::A(A {
        address: u32::from_be_bytes(addr),
    });
    p.answers.push(ResourceRecord::new(owner, CLASS::IN, 60, a));
    let msg = p.build_bytes_vec_compressed().expect("dns");
    let b = etherparse::PacketBuilder::ethernet2([4; 6], [2; 6])
        .ipv4([198, 18, 2, 53], [198, 18, 1, 2], 64)
        .udp(53, 40053);
    let mut f = Vec::new();
    b.write(&mut f, &msg).expect("frame");
    f
}

fn tcp_to(addr: [u8; 4]) -> Vec<u8> {
    let b = etherparse::PacketBuilder::ethernet2([2; 6], [4; 6])
        .ipv4([198, 18, 1, 2], addr, 64)
        .tcp(40000, 443, 1, 65535);
    let mut f = Vec::new();
    b.write(&mut f, &[0u8; 1000]).expect("frame");
    f
}

#[test]
fn replay_learns_names_from_the_dns_answers_in_a_capture() {
    use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
    let dir = tempfile::tempdir().expect("tmp");
    let input = dir.path().join("in.pcap");
    let mut w = PcapWriter::with_header(
        std::fs::File::create(&input).expect("create"),
        PcapHeader::default(),
    )
    .expect("pcap");
    let frames = [
        tcp_to([198, 18, 7, 7]), // before any answer: CS0
        dns_answer("Video.Example.com", None, [198, 18, 7, 7]), // dns:*.example.com video
        tcp_to([198, 18, 7, 7]), // AF41
        dns_answer("www.site.test", Some("edge.cdn.test"), [198, 18, 7, 8]), // dns_c: → bulk
        tcp_to([198, 18, 7, 8]), // LE
        tcp_to([198, 18, 7, 9]), // never named: CS0
    ];
    for (i, f) in frames.iter().enumerate() {
        let t = std::time::Duration::from_millis(1 + i as u64);
        w.write_packet(&PcapPacket::new(t, f.len() as u32, f))
            .expect("write");
    }
    drop(w);
    let map = dir.path().join("names.conf");
    std::fs::write(&map, "dns:*.example.com video\ndns_c:*.cdn.test bulk\n").expect("map");
    let out = dir.path().join("fates.csv");
    let s = |p: &Path| p.to_string_lossy().into_owned();
    let o = debloat(&[
        "replay",
        "--qdisc",
        "cake bandwidth 20Mbit diffserv4",
        "--classify",
        &s(&map),
        "--input",
        &s(&input),
        "--output",
        &s(&out),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let r = rows(&out);
    let dscp: Vec<&str> = [0, 2, 4, 5].iter().map(|&i| r[i][8].as_str()).collect();
    assert_eq!(dscp, vec!["0", "34", "1", "0"], "{}", text(&o));
    assert!(
        text(&o).contains("dns: 2 answers read, 2 addresses learnt, 1 CNAME targets"),
        "{}",
        text(&o)
    );
}

/// Two uploads through cake diffserv4, one marked CS1 by its sender: held to the Bulk tin's
/// share, until `classify = FILE` (a file beside the scenario) re-marks everything CS0.
#[test]
fn a_scenario_names_its_rules_file() {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(dir.path().join("wash.conf"), "198.18.0.0/15 besteffort\n").expect("map");
    let scenario = |rules: &str| {
        format!(
            "{rules}length = 12\n[link]\ndown = \"10Mbit\"\nup = \"10Mbit\"\nrtt = \"20ms\"\nqdisc_up = \"cake bandwidth 10Mbit diffserv4\"\n\n[[flow]]\nname = \"be\"\nkind = \"tcp\"\ndirection = \"up\"\nstart = 1\n\n[[flow]]\nname = \"cs1\"\nkind = \"tcp\"\ndirection = \"up\"\ndscp = 8\nstart = 1\n"
        )
    };
    let share = |name: &str, rules: &str| -> f64 {
        let f = dir.path().join(format!("{name}.toml"));
        std::fs::write(&f, scenario(rules)).expect("scenario");
        let out = dir.path().join(name);
        let o = debloat(&[
            "sim",
            "--scenario",
            &f.to_string_lossy(),
            "--output",
            &out.to_string_lossy(),
        ]);
        assert!(o.status.success(), "{}", text(&o));
        let v: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(out.join("summary.json")).expect("summary"),
        )
        .expect("json");
        let mbps = |n: &str| {
            v["flows"]
                .as_array()
                .expect("flows")
                .iter()
                .find(|x| x["name"] == n)
                .expect(n)["throughput_mbps"]
                .as_f64()
                .expect("number")
        };
        mbps("cs1") / (mbps("cs1") + mbps("be"))
    };
    let (marked, washed) = (
        share("marked", ""),
        share("washed", "classify = \"wash.conf\"\n"),
    );
    println!("CS1 upload's share: {marked:.3} as marked, {washed:.3} with classify");
    assert!(marked < 0.15, "{marked}");
    assert!((0.40..0.60).contains(&washed), "{washed}");
    let f = dir.path().join("bad.toml");
    std::fs::write(&f, scenario("classify = \"missing.conf\"\n")).expect("scenario");
    let o = debloat(&["sim", "--scenario", &f.to_string_lossy()]);
    assert!(
        !o.status.success() && text(&o).contains("classify: ") && text(&o).contains("missing.conf"),
        "{}",
        text(&o)
    );
}
