//! Unit tests of `dns`.

#![allow(clippy::unwrap_used)]

use super::super::{parse_uci, Classifier, Direction};
use super::*;
use crate::flow::{FlowHasher, FlowKey};
use crate::packet::PacketMeta;
use simple_dns::rdata::{A, AAAA, CNAME};
use simple_dns::{Name, Question, ResourceRecord, CLASS, TYPE};

const UCI: &str = "config defaults\n\toption dscp_default_tcp CS0\n";

fn stage(map: &str) -> Classifier {
    let mut c = parse_uci("qosify", UCI).unwrap();
    c.add_map("map", map).unwrap();
    Classifier::new(c, 1024, FlowHasher::new([3, 4]))
}

/// A response for `q` with `answers` (name, TTL, data).
fn response(q: &str, answers: Vec<(&str, u32, RData<'static>)>, rcode: RCODE) -> Vec<u8> {
    let mut p = Packet::new_reply(7);
    *p.rcode_mut() = rcode;
    p.questions.push(Question::new(
        Name::new_unchecked(q).into_owned(),
        TYPE::A.into(),
        CLASS::IN.into(),
        false,
    ));
    for (n, ttl, d) in answers {
        p.answers.push(ResourceRecord::new(
            Name::new_unchecked(n).into_owned(),
            CLASS::IN,
            ttl,
            d,
        ));
    }
    p.build_bytes_vec_compressed().unwrap()
}

fn a(ip: &str) -> RData<'static> {
    let v4: core::net::Ipv4Addr = ip.parse().unwrap();
    RData::A(A {
        address: v4.to_bits(),
    })
}

fn cname(n: &'static str) -> RData<'static> {
    RData::CNAME(CNAME(Name::new_unchecked(n)))
}

/// The DSCP a TCP packet to `dst` leaves with at `now_s`.
fn dscp_to(c: &mut Classifier, dst: &str, now_s: u64) -> u8 {
    let k = FlowKey::ip(
        "198.18.1.2".parse().unwrap(),
        dst.parse().unwrap(),
        40000,
        443,
        6,
    );
    let mut m = PacketMeta::new(1500, k);
    c.mark(&mut m, Direction::Up, now_s * SEC);
    m.dscp
}

fn feed(c: &mut Classifier, msg: &[u8], now_s: u64) {
    c.dns.snoop(msg, now_s * SEC);
}

#[test]
fn globs_read_as_fnmatch_does() {
    let g = |p: &str, n: &str| glob(p.as_bytes(), n.as_bytes());
    assert!(g("*.youtube.com", "www.youtube.com"));
    assert!(g("*.youtube.com", "a.b.youtube.com"));
    assert!(!g("*.youtube.com", "youtube.com"));
    assert!(!g("*.youtube.com", "www.youtube.com.evil"));
    assert!(g("r?.example.net", "r1.example.net"));
    assert!(!g("r?.example.net", "r12.example.net"));
    assert!(g("r[0-9].example.net", "r7.example.net"));
    assert!(!g("r[!0-9].example.net", "r7.example.net"));
    assert!(g("a\\*b", "a*b"));
    assert!(!g("a\\*b", "axb"));
    assert!(g("*", ""));
}

#[test]
fn an_answer_teaches_the_address_of_a_named_host() {
    let mut c = stage("dns:*.youtube.com CS1\n");
    assert_eq!(dscp_to(&mut c, "198.18.9.9", 0), 0);
    feed(
        &mut c,
        &response(
            "www.YouTube.com",
            vec![("www.youtube.com", 300, a("198.18.9.9"))],
            RCODE::NoError,
        ),
        1,
    );
    assert_eq!(dscp_to(&mut c, "198.18.9.9", 2), 8);
    assert_eq!(dscp_to(&mut c, "198.18.9.10", 2), 0);
    let k = c.counters();
    assert_eq!((k.dns.answers, k.dns.addresses, k.dns.held), (1, 1, 1));
    assert_eq!(k.rules, vec![1]);
}

#[test]
fn cname_rules_match_the_chain_and_only_the_chain() {
    let mut c = stage("dns_c:*.googlevideo.com AF41\ndns_c:video.example CS1\n");
    let msg = response(
        "video.example",
        vec![
            ("video.example", 60, cname("r3.googlevideo.com")),
            ("r3.googlevideo.com", 60, a("198.18.9.1")),
        ],
        RCODE::NoError,
    );
    feed(&mut c, &msg, 0);
    // `dns_c:video.example` names the question, which CNAME rules do not match.
    assert_eq!(dscp_to(&mut c, "198.18.9.1", 1), 34);
    assert_eq!(c.counters().dns.cnames, 1);
    // The CNAME target is remembered: a later question for it alone takes its decision.
    feed(
        &mut c,
        &response(
            "r3.googlevideo.com",
            vec![("r3.googlevideo.com", 60, a("198.18.9.2"))],
            RCODE::NoError,
        ),
        2,
    );
    assert_eq!(dscp_to(&mut c, "198.18.9.2", 3), 34);
}

#[test]
fn the_earliest_matching_rule_wins() {
    let mut c = stage("dns:*.example.com CS1\ndns:/^www\\.EXAMPLE\\.(com|net)$ EF\n");
    feed(
        &mut c,
        &response(
            "www.example.com",
            vec![("www.example.com", 60, a("198.18.9.3"))],
            RCODE::NoError,
        ),
        0,
    );
    feed(
        &mut c,
        &response(
            "www.example.net",
            vec![("www.example.net", 60, a("198.18.9.4"))],
            RCODE::NoError,
        ),
        0,
    );
    assert_eq!(dscp_to(&mut c, "198.18.9.3", 1), 8);
    assert_eq!(dscp_to(&mut c, "198.18.9.4", 1), 46);
}

#[test]
fn addresses_expire_with_the_ttl_unless_used() {
    let mut c = stage("dns:*.example.com CS1\n");
    let msg = response(
        "a.example.com",
        vec![
            ("a.example.com", 10, a("198.18.9.5")),
            ("a.example.com", 10, a("198.18.9.6")),
        ],
        RCODE::NoError,
    );
    feed(&mut c, &msg, 0);
    assert_eq!(dscp_to(&mut c, "198.18.9.5", 5), 8); // used before its TTL ran out
    assert_eq!(dscp_to(&mut c, "198.18.9.6", 11), 0); // unused: gone at 10 s
    assert_eq!(dscp_to(&mut c, "198.18.9.5", 11), 8); // used: kept 300 s more
    assert_eq!(dscp_to(&mut c, "198.18.9.5", 305), 8); // used again in that time
    assert_eq!(dscp_to(&mut c, "198.18.9.5", 700), 0); // renewed at 310, unused by 610
    let k = c.counters().dns;
    assert_eq!((k.expired, k.kept_active, k.held), (2, 2, 0));
    // TTL 0: qosify's `timeout`.
    let mut c = Classifier::new(
        {
            let mut cfg = parse_uci("q", "config defaults\n\toption timeout 20\n").unwrap();
            cfg.add_map("m", "dns:*.example.com CS1\n").unwrap();
            cfg
        },
        64,
        FlowHasher::new([1, 2]),
    );
    feed(
        &mut c,
        &response(
            "b.example.com",
            vec![("b.example.com", 0, a("198.18.9.7"))],
            RCODE::NoError,
        ),
        0,
    );
    assert_eq!(dscp_to(&mut c, "198.18.9.7", 19), 8);
    c.dns.addrs.values_mut().for_each(|e| e.seen = false);
    assert_eq!(dscp_to(&mut c, "198.18.9.7", 21), 0);
}

#[test]
fn queries_errors_and_garbage_teach_nothing() {
    let mut c = stage("dns:*.example.com CS1\n");
    feed(
        &mut c,
        &response(
            "c.example.com",
            vec![("c.example.com", 60, a("198.18.9.8"))],
            RCODE::NameError,
        ),
        0,
    );
    let mut q = Packet::new_query(1);
    q.questions.push(Question::new(
        Name::new_unchecked("c.example.com"),
        TYPE::A.into(),
        CLASS::IN.into(),
        false,
    ));
    feed(&mut c, &q.build_bytes_vec().unwrap(), 0);
    for junk in [&[][..], &[0xff; 5][..], &[0x80; 64][..]] {
        feed(&mut c, junk, 0);
    }
    assert_eq!(dscp_to(&mut c, "198.18.9.8", 1), 0);
    let k = c.counters().dns;
    assert_eq!((k.answers, k.skipped, k.malformed), (0, 2, 3));
}

#[test]
fn aaaa_records_and_tcp_streams() {
    let mut c = stage("dns:v6.example.com EF\n");
    let v6: core::net::Ipv6Addr = "2001:2::99".parse().unwrap();
    let msg = response(
        "v6.example.com",
        vec![(
            "v6.example.com",
            60,
            RData::AAAA(AAAA {
                address: v6.to_bits(),
            }),
        )],
        RCODE::NoError,
    );
    let mut stream = (msg.len() as u16).to_be_bytes().to_vec();
    stream.extend_from_slice(&msg);
    stream.extend_from_slice(&[0, 200, 1]); // a second message cut short: ignored
    let mut n = 0;
    messages(&stream, true, |m| {
        n += 1;
        c.dns.snoop(m, 0)
    });
    assert_eq!(n, 1);
    let k = FlowKey::ip("2001:2::1".parse().unwrap(), IpAddr::V6(v6), 1, 443, 6);
    let mut m = PacketMeta::new(100, k);
    c.mark(&mut m, Direction::Up, SEC);
    assert_eq!(m.dscp, 46);
}

#[test]
fn a_full_table_evicts_the_soonest_to_expire() {
    let mut c = stage("dns:*.example.com CS1\n");
    for i in 0..=ADDRESS_SLOTS as u32 {
        let ip = core::net::Ipv4Addr::from_bits(0xC612_0000 + i); // 198.18.0.0/15
        c.dns.learn(IpAddr::V4(ip), 100 + (i % 7), Some(0), 0);
    }
    let k = c.counters().dns;
    assert_eq!((k.held, k.evictions), (ADDRESS_SLOTS as u64, 1));
}
