//! The gateway's own per-frame work, timed alone: parse, classify, the discipline's enqueue and
//! dequeue and the link stage, on frames already in memory, with no interfaces. Each frame is a
//! fresh copy of one of 64 flows' frames (as a receive ring hands the path a copy) and is taken
//! out at once. `debloat bench gateway` prints it as "debloat's own per-packet work";
//! `examples/path_cost.rs` runs it without root, and under callgrind for an instruction count.

use crate::loadgen::Blast;
use crate::path::Path;
use debloat_core::link::Emulation;
use debloat_core::{FlowHasher, QdiscSpec};
use std::io;
use std::time::{Duration, Instant};

/// A path with `spec` in front of an unlimited link, and the 64 flows' frames of `frame_len`
/// bytes (60..=1514, without the FCS) it is fed.
pub struct PathCost {
    path: Path,
    frames: Vec<Vec<u8>>,
    start: Instant,
}

impl PathCost {
    /// Ready to time `spec` on frames of `frame_len` bytes; an error for a length out of range.
    pub fn new(spec: &QdiscSpec, frame_len: usize) -> io::Result<PathCost> {
        let blast = Blast {
            frame_len,
            flows: 64,
            pps: 0,
            duration: Duration::ZERO,
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0xdb, 0, 0, 0, 9],
            src_ip: [198, 18, 1, 2],
            dst_ip: [198, 18, 2, 2],
            spread_sources: false,
        };
        Ok(PathCost {
            path: Path::new(spec, Emulation::default(), FlowHasher::new([1, 2]), 1),
            frames: blast.frames()?,
            start: Instant::now(),
        })
    }

    /// Feed `n` frames through, each taken out at once; nanoseconds per frame.
    pub fn run(&mut self, n: u64) -> f64 {
        let from = Instant::now();
        let mut out = 0u64;
        let mut now = 0;
        for i in 0..n {
            // The clock once per 64 frames: this times the path, not the clock (which costs a
            // system call where there is no vDSO, as under User-Mode Linux).
            if i % 64 == 0 {
                now = self.start.elapsed().as_nanos() as u64;
            }
            let f = self.frames[(i % 64) as usize].clone();
            self.path.on_frame(f, now);
            self.path.poll(now, &mut |f| out += f.len() as u64);
        }
        std::hint::black_box(out);
        from.elapsed().as_nanos() as f64 / n.max(1) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_frame_fed_leaves_and_a_bad_length_is_refused() {
        let spec: QdiscSpec = "cake besteffort".parse().expect("spec");
        let mut c = PathCost::new(&spec, 60).expect("60 B");
        assert!(c.run(1000) > 0.0);
        assert!(c.path.accounted());
        assert_eq!(c.path.counters().sent, 1000);
        assert!(PathCost::new(&spec, 10).is_err());
    }
}
