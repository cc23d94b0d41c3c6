//! The gateway's own per-frame work, alone: parse, classify, the discipline's enqueue and
//! dequeue and the link stage, on frames already in memory — the loop `debloat bench gateway`
//! times as "debloat's own per-packet work", without the interfaces, root or a load generator.
//! Each round feeds `FRAMES` frames of 64 flows (a copy of each, as a receive ring's is) and
//! takes each out at once, then prints nanoseconds per frame. Runs under `valgrind
//! --tool=callgrind` for an instruction count that does not depend on the machine's load.
//!
//! ```sh
//! cargo run --release -p debloat-gateway --example path_cost -- "cake besteffort" 60 2000000
//! ```
//! Arguments: the discipline (tc's words, default `cake besteffort`), the frame's length in
//! bytes without the FCS (60..=1514, default 60), frames a round (default 2,000,000).

use debloat_core::FlowHasher;
use debloat_gateway::dataplane::frame::Frame;
use debloat_gateway::dataplane::path::Path;
use debloat_gateway::Emulation;
use std::time::{Duration, Instant};

const ROUNDS: u64 = 3;

fn main() {
    if let Err(e) = run() {
        eprintln!("path_cost: {e}\nusage: path_cost [QDISC] [FRAME_BYTES 60..=1514] [FRAMES]");
        std::process::exit(2);
    }
}

fn run() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let qdisc = args.next().unwrap_or_else(|| "cake besteffort".into());
    let number = |s: Option<String>, default: u64, what: &str| match s {
        None => Ok(default),
        Some(s) => s.parse::<u64>().map_err(|e| format!("{what} {s:?}: {e}")),
    };
    let len = number(args.next(), 60, "frame length")? as usize;
    let n = number(args.next(), 2_000_000, "frames")?;
    if !(60..=1514).contains(&len) {
        return Err(format!("frame length {len}: must be 60..=1514 bytes"));
    }
    let spec: debloat_core::QdiscSpec = qdisc.parse().map_err(|e| format!("{e}"))?;
    let blast = debloat_gateway::loadgen::Blast {
        frame_len: len,
        flows: 64,
        pps: 0,
        duration: Duration::ZERO,
        src_mac: [2, 0, 0, 0, 0, 1],
        dst_mac: [2, 0xdb, 0, 0, 0, 9],
        src_ip: [198, 18, 1, 2],
        dst_ip: [198, 18, 2, 2],
        spread_sources: false,
    };
    let frames = blast.frames().map_err(|e| format!("{e}"))?;
    println!(
        "{qdisc}, {len}-byte frames; a frame in flight is {} bytes",
        std::mem::size_of::<Frame>()
    );
    let mut path = Path::new(&spec, Emulation::default(), FlowHasher::new([1, 2]), 1);
    let start = Instant::now();
    for round in 0..ROUNDS {
        let from = Instant::now();
        let mut out = 0u64;
        let mut now = 0;
        for i in 0..n {
            // The clock once per 64 frames, as the bench's loop reads it.
            if i % 64 == 0 {
                now = start.elapsed().as_nanos() as u64;
            }
            path.on_frame(frames[(i % 64) as usize].clone(), now);
            path.poll(now, &mut |f| out += f.len() as u64);
        }
        std::hint::black_box(out);
        let ns = from.elapsed().as_nanos() as f64 / n as f64;
        println!("round {}: {ns:.1} ns/frame", round + 1);
    }
    Ok(())
}
