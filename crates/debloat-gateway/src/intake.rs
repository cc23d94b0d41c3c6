//! What arrives on an interface, made ready for the data path: frames taken from the receive
//! ring (and how long they waited there), TCP/UDP checksums the sender left for a NIC completed
//! ([`crate::csum`]), super-frames from hosts with segmentation offload cut into the packets
//! they stand for ([`crate::gso`]), and what cannot be forwarded counted.

use crate::path::Path;
use crate::sys::{PacketSocket, Received};
use debloat_core::classify::qosify::{Classifier, Direction};
use serde::Serialize;
use std::io;
use std::time::Instant;

/// Largest plain frame accepted: a 9000-byte jumbo frame plus headers. Longer ones that are not
/// super-frames (frames longer than the interface's MTU allows for) are counted as oversized
/// and dropped.
pub const MAX_FRAME: usize = 9022;

/// One direction's intake counters.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Intake {
    /// Frames too big to forward: longer than a jumbo frame and not a super-frame, or a
    /// super-frame that could not be cut (see [`crate::gso`]).
    pub oversized: u64,
    /// How long frames waited in the kernel's receive ring before the gateway took them: a
    /// queue the discipline does not see (a CPU-starved gateway shows it here).
    pub ring_wait: RingWait,
    /// Frames whose TCP/UDP checksum the sender's kernel left for a NIC (checksum offload)
    /// and the gateway completed.
    pub csum_completed: u64,
    /// Such frames it could not complete (not TCP/UDP over IPv4/IPv6, a fragment): forwarded
    /// as they came.
    pub csum_unfinished: u64,
    /// Super-frames (TSO/GSO from the host) cut into packets.
    pub super_frames: u64,
    /// The packets they were cut into (each then counted as received).
    pub super_segments: u64,
    /// Errors the kernel reported on the socket (its interface went down or away).
    pub link_errors: u64,
    /// Times the interface was deleted and made again under its name, and the gateway
    /// opened a socket on the new one.
    pub reopened: u64,
}

/// Time frames spent in the kernel's receive ring, from the ring's own receive stamps.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct RingWait {
    /// Frames measured.
    pub frames: u64,
    /// Their total wait, µs.
    pub total_us: u64,
    /// The longest, µs.
    pub max_us: u64,
}

impl RingWait {
    pub(crate) fn record(&mut self, wait_ns: u64) {
        let us = wait_ns / 1000;
        self.frames += 1;
        self.total_us += us;
        self.max_us = self.max_us.max(us);
    }
    /// The mean wait, µs.
    pub fn mean_us(&self) -> f64 {
        self.total_us as f64 / self.frames.max(1) as f64
    }
}

/// Frames stamped with one clock read (see `receive`).
const CLOCK_EVERY: usize = 16;

/// Read what is waiting (at most a batch, so the other direction is not starved).
pub(crate) fn receive(
    sock: &mut PacketSocket,
    intake: &mut Intake,
    path: &mut Path,
    start: Instant,
    mut marker: Option<(&mut Classifier, Direction)>,
) -> io::Result<()> {
    // The ring's stamps are CLOCK_REALTIME; the wait is read against it once per batch.
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut now = 0;
    for i in 0..256 {
        let Some(got) = sock.recv_frame()? else {
            // Readable with an empty ring: an error is pending (POLLERR); take it, or the
            // socket stays ready and the loop spins.
            if i == 0 && sock.take_error().is_some() {
                intake.link_errors += 1;
            }
            break;
        };
        // The enqueue time, read afresh every CLOCK_EVERY frames rather than for each: the
        // kernel stamps each skb, but a clock read is a system call where there is no vDSO
        // (User-Mode Linux: 24–37 µs, most of a frame's cost there, so a burst of TCP segments
        // kept a ping waiting in the ring for milliseconds). The stamp is early by at most the
        // work on the frames before it in the group (tens of µs on a real host).
        if i % CLOCK_EVERY == 0 {
            now = start.elapsed().as_nanos() as u64;
        }
        intake
            .ring_wait
            .record(wall.saturating_sub(sock.last_stamp_ns()));
        match got {
            Received::Frame(mut f) if f.len() <= MAX_FRAME => {
                if sock.last_csum_not_ready() {
                    if crate::csum::complete(&mut f) {
                        intake.csum_completed += 1;
                    } else {
                        intake.csum_unfinished += 1;
                    }
                }
                let m = marker.as_mut().map(|(c, d)| (&mut **c, *d));
                path.on_frame_marked(f, now, m)
            }
            Received::Super(h, f) => {
                let mut pieces = Vec::new();
                match crate::gso::segment(&h, &f, &mut pieces) {
                    Ok(()) => {
                        intake.super_frames += 1;
                        intake.super_segments += pieces.len() as u64;
                        for p in pieces {
                            let m = marker.as_mut().map(|(c, d)| (&mut **c, *d));
                            path.on_frame_marked(p, now, m);
                        }
                    }
                    Err(_) => intake.oversized += 1,
                }
            }
            _ => intake.oversized += 1,
        }
    }
    Ok(())
}
