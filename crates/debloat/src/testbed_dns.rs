//! `debloat testbed dns-serve` and `dns-ask`: a tiny authoritative DNS server for the server
//! namespace and a stub query for the client's, so a name's answer crosses the gateway (where
//! `--classify` learns it from `dns:` rules) without a resolver installed.

use anyhow::{bail, Context, Result};
use simple_dns::rdata::{RData, A};
use simple_dns::{Name, Packet, PacketFlag, Question, ResourceRecord, CLASS, QTYPE, RCODE, TYPE};
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

/// Arguments of `testbed dns-serve`.
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Address to answer on.
    #[arg(long, default_value = "198.18.2.2:53")]
    listen: SocketAddr,
    /// NAME=IPV4 answers (repeatable); other names get NXDOMAIN.
    #[arg(long, required = true, value_name = "NAME=IPV4")]
    answer: Vec<String>,
    /// The answers' TTL, seconds.
    #[arg(long, default_value_t = 300)]
    ttl: u32,
    /// Stop after this many seconds.
    #[arg(long, default_value_t = 60.0)]
    seconds: f64,
}

/// Arguments of `testbed dns-ask`.
#[derive(clap::Args, Debug)]
pub struct AskArgs {
    /// The server.
    #[arg(long, default_value = "198.18.2.2:53")]
    server: SocketAddr,
    /// The name to look up (type A).
    name: String,
}

fn answers(list: &[String]) -> Result<BTreeMap<String, Ipv4Addr>> {
    list.iter()
        .map(|a| {
            let (n, ip) = a
                .split_once('=')
                .with_context(|| format!("--answer `{a}`: expected NAME=IPV4"))?;
            let ip = ip
                .parse()
                .with_context(|| format!("--answer `{a}`: `{ip}` is not an IPv4 address"))?;
            Ok((n.trim_end_matches('.').to_ascii_lowercase(), ip))
        })
        .collect()
}

/// The reply to one query: its A record when the name is known, else NXDOMAIN.
fn reply(query: &[u8], known: &BTreeMap<String, Ipv4Addr>, ttl: u32) -> Option<Vec<u8>> {
    let q = Packet::parse(query).ok()?;
    if q.has_flags(PacketFlag::RESPONSE) || q.questions.len() != 1 {
        return None;
    }
    let question = &q.questions[0];
    let mut r = Packet::new_reply(q.id());
    r.questions.push(question.clone());
    let name = question.qname.to_string().to_ascii_lowercase();
    match known.get(&name) {
        Some(ip) if question.qtype == QTYPE::TYPE(TYPE::A) => {
            let a = RData::A(A::from(*ip));
            r.answers.push(ResourceRecord::new(
                question.qname.clone(),
                CLASS::IN,
                ttl,
                a,
            ));
        }
        Some(_) => {}
        None => *r.rcode_mut() = RCODE::NameError,
    }
    r.build_bytes_vec_compressed().ok()
}

/// Answer queries until the time is up; prints how many were answered.
pub fn serve(a: &ServeArgs) -> Result<()> {
    let known = answers(&a.answer)?;
    let sock = UdpSocket::bind(a.listen).with_context(|| format!("binding {}", a.listen))?;
    sock.set_read_timeout(Some(Duration::from_millis(100)))?;
    let end = Instant::now() + Duration::from_secs_f64(a.seconds.max(0.0));
    let (mut buf, mut n) = ([0u8; 1500], 0u64);
    while Instant::now() < end {
        let Ok((len, from)) = sock.recv_from(&mut buf) else {
            continue;
        };
        if let Some(r) = reply(&buf[..len], &known, a.ttl) {
            sock.send_to(&r, from)?;
            n += 1;
        }
    }
    println!("dns-serve: answered {n} queries");
    Ok(())
}

/// Ask once (retrying twice) and print the A records.
pub fn ask(a: &AskArgs) -> Result<()> {
    let bind: SocketAddr = if a.server.is_ipv4() {
        "0.0.0.0:0"
    } else {
        "[::]:0"
    }
    .parse()?;
    let sock = UdpSocket::bind(bind)?;
    sock.set_read_timeout(Some(Duration::from_secs(1)))?;
    let id = (std::process::id() & 0xffff) as u16;
    let mut q = Packet::new_query(id);
    q.set_flags(PacketFlag::RECURSION_DESIRED);
    let name = Name::new(&a.name).with_context(|| format!("`{}` is not a DNS name", a.name))?;
    q.questions
        .push(Question::new(name, TYPE::A.into(), CLASS::IN.into(), false));
    let bytes = q.build_bytes_vec()?;
    let mut buf = [0u8; 1500];
    for _ in 0..3 {
        sock.send_to(&bytes, a.server)?;
        let Ok((len, _)) = sock.recv_from(&mut buf) else {
            continue;
        };
        let r = Packet::parse(&buf[..len]).context("a malformed answer")?;
        if r.id() != id {
            continue;
        }
        let addrs: Vec<String> = r
            .answers
            .iter()
            .filter_map(|rr| match &rr.rdata {
                RData::A(x) => Some(Ipv4Addr::from(x.address).to_string()),
                _ => None,
            })
            .collect();
        if addrs.is_empty() {
            bail!("{}: no address ({:?})", a.name, r.rcode());
        }
        println!("{}", addrs.join(" "));
        return Ok(());
    }
    bail!("no answer from {} after 3 tries", a.server)
}
