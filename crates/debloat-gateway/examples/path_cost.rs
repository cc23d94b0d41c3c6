//! The gateway's own per-frame work, alone ([`debloat_gateway::tools::path_cost`]): parse,
//! classify, the discipline's enqueue and dequeue and the link stage, on frames already in
//! memory — the loop `debloat bench gateway` times as "debloat's own per-packet work", without
//! the interfaces, root or a load generator. Prints nanoseconds per frame for each of three
//! rounds. Under `valgrind --tool=callgrind` it gives an instruction count that does not depend
//! on the machine's load.
//!
//! ```sh
//! cargo run --release -p debloat-gateway --example path_cost -- "cake besteffort" 60 2000000
//! ```
//! Arguments: the discipline (tc's words, default `cake besteffort`), the frame's length in
//! bytes without the FCS (60..=1514, default 60), frames a round (default 2,000,000).

use debloat_gateway::dataplane::frame::Frame;
use debloat_gateway::tools::path_cost::PathCost;

const ROUNDS: u32 = 3;

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
    let spec: debloat_core::QdiscSpec = qdisc.parse().map_err(|e| format!("{e}"))?;
    let mut cost = PathCost::new(&spec, len).map_err(|e| format!("frame length {len}: {e}"))?;
    println!(
        "{qdisc}, {len}-byte frames; a frame in flight is {} bytes",
        std::mem::size_of::<Frame>()
    );
    for round in 1..=ROUNDS {
        println!("round {round}: {:.1} ns/frame", cost.run(n));
    }
    Ok(())
}
