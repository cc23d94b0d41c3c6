//! What reading a frame's TCP details costs, the way CAKE's ACK filter asks for them of every
//! packet queued in an ACK's flow (`Packet::tcp` on a gateway frame): `tcp_info`, which reads
//! the TCP header alone, against the whole classification that gave them before
//! (`classify_tcp`), in the same run. Frames: a pure ACK with timestamps and one SACK block,
//! over IPv4 and over IPv6.
//!
//! ```sh
//! cargo run --release -p debloat-gateway --example tcp_info_cost -- 2000000
//! valgrind --tool=callgrind target/release/examples/tcp_info_cost 100000
//! ```

use debloat_core::classify::{classify_tcp, tcp_info, LinkType};
use etherparse::{PacketBuilder, TcpOptionElement};
use std::hint::black_box;
use std::time::Instant;

/// A pure ACK (timestamps, one SACK block) over IPv4 and over IPv6, as Ethernet frames.
fn acks() -> Result<Vec<Vec<u8>>, String> {
    let opts = [
        TcpOptionElement::Noop,
        TcpOptionElement::Noop,
        TcpOptionElement::Timestamp(1000, 2000),
        TcpOptionElement::SelectiveAcknowledgement((5000, 6000), [None, None, None]),
    ];
    let v6a = [0x20, 0x01, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    let v6b = [0x20, 0x01, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
    let mut out = Vec::new();
    for v6 in [false, true] {
        let eth = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
        let ip = if v6 {
            eth.ipv6(v6a, v6b, 64)
        } else {
            eth.ipv4([198, 18, 1, 2], [198, 18, 2, 2], 64)
        };
        let tcp = ip
            .tcp(40000, 5201, 77, 65535)
            .ack(123_456)
            .options(&opts)
            .map_err(|e| e.to_string())?;
        let mut f = Vec::new();
        tcp.write(&mut f, &[]).map_err(|e| e.to_string())?;
        out.push(f);
    }
    Ok(out)
}

/// ns per call of `read` over `n` calls, alternating the frames.
fn time(frames: &[Vec<u8>], n: u64, read: &dyn Fn(&[u8]) -> Option<u32>) -> f64 {
    let from = Instant::now();
    let mut sum = 0u64;
    for i in 0..n {
        let f = &frames[(i % frames.len() as u64) as usize];
        sum += u64::from(read(black_box(f)).unwrap_or(0));
    }
    black_box(sum);
    from.elapsed().as_nanos() as f64 / n.max(1) as f64
}

fn main() {
    let n: u64 = match std::env::args().nth(1).map(|a| a.parse()) {
        None => 1_000_000,
        Some(Ok(n)) => n,
        Some(Err(e)) => {
            eprintln!("error: the number of reads: {e} (usage: tcp_info_cost [READS])");
            std::process::exit(2);
        }
    };
    let frames = match acks() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: building the frames: {e}");
            std::process::exit(1);
        }
    };
    let whole = |f: &[u8]| {
        let (_, t) = classify_tcp(f, f.len() as u32, LinkType::Ethernet).ok()?;
        t.map(|t| t.ack_seq)
    };
    let alone = |f: &[u8]| tcp_info(f, LinkType::Ethernet).map(|t| t.ack_seq);
    for round in 1..=3 {
        let (a, b) = (time(&frames, n, &whole), time(&frames, n, &alone));
        println!(
            "round {round}: whole classification {a:.1} ns, the TCP header alone {b:.1} ns ({:.2}×)",
            b / a
        );
    }
}
