//! What arrives on an interface, made ready for the data path: frames taken from the receive
//! ring (and how long they waited there), TCP/UDP checksums the sender left for a NIC completed
//! ([`crate::csum`]), super-frames from hosts with segmentation offload cut into the packets
//! they stand for ([`crate::gso`]), and what cannot be forwarded counted.

use crate::path::Path;
use crate::port::Port;
use crate::sys::Received;
use debloat_core::classify::Classify;
use debloat_core::Direction;
use serde::Serialize;
use std::io;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

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
    /// queue the discipline does not see (a CPU-starved gateway shows it here). TPACKET only:
    /// AF_XDP's descriptors carry no receive stamp.
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
    /// Frames forwarded untouched by a `--passthrough` gateway (no discipline counted them).
    pub passed: u64,
    /// AF_XDP: frames held in the UMEM they were received into until sent or dropped (no copy).
    pub umem_held: u64,
    /// AF_XDP: frames copied into the heap: the UMEM had no frame to spare for the fill ring
    /// (copy on pressure: the discipline holds as many as it may), or a frame spanned several
    /// UMEM frames.
    pub umem_copied: u64,
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

impl Intake {
    /// Count whether an AF_XDP frame was held in its UMEM or copied.
    pub(crate) fn count_umem(&mut self, port: &Port, f: &crate::io::buf::Buf) {
        match (port, f.is_held()) {
            (_, true) => self.umem_held += 1,
            (Port::Xdp(..), false) => self.umem_copied += 1,
            (Port::Packet(_), false) => {}
        }
    }
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

/// The gateway's time: nanoseconds since it started (monotonic, what the data path runs on),
/// and the wall clock the receive ring stamps frames with, derived from it so that a frame's
/// ring wait costs no clock read of its own. The wall clock's offset is read again by
/// [`Clock::resync`] (the forwarding loop does it four times a second), so an NTP step
/// skews the ring-wait statistic for at most that long.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    start: Instant,
    wall_at_start_ns: u64,
}

impl Clock {
    /// Time starts now.
    pub fn new() -> Clock {
        let mut c = Clock {
            start: Instant::now(),
            wall_at_start_ns: 0,
        };
        c.resync();
        c
    }

    /// Nanoseconds since the start (one clock read).
    pub fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// Seconds since the start.
    pub fn uptime_s(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    /// Read the wall clock's offset from the monotonic one again.
    pub fn resync(&mut self) {
        self.wall_at_start_ns = wall_clock_ns().saturating_sub(self.now());
    }

    /// The wall clock, ns since the epoch, at `now` (ns since the start).
    fn wall(&self, now: u64) -> u64 {
        self.wall_at_start_ns + now
    }
}

/// The wall clock (CLOCK_REALTIME, what the receive ring stamps with), ns since the epoch.
fn wall_clock_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

/// Read what is waiting (at most a batch, so the other direction is not starved).
pub(crate) fn receive(
    sock: &mut Port,
    intake: &mut Intake,
    path: &mut Path,
    clock: &Clock,
    mut marker: Option<(&mut dyn Classify, Direction)>,
) -> io::Result<()> {
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
        // work on the frames before it in the group (tens of µs on a real host). An empty
        // ring reads no clock. The ring's stamps are CLOCK_REALTIME: the wait is measured
        // against the same read, through the clock's wall offset.
        if i % CLOCK_EVERY == 0 {
            now = clock.now();
        }
        if let Some(stamp) = sock.last_stamp_ns() {
            intake
                .ring_wait
                .record(clock.wall(now).saturating_sub(stamp));
        }
        if let Received::Frame(f) = &got {
            intake.count_umem(sock, f);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The wall clock derived from the monotonic one reads what the wall clock reads, and a
    /// ring stamp taken just before is measured as a short wait, not as a wall-against-
    /// monotonic difference. The slack (50 ms) is for a preemption between the two reads
    /// `resync` makes, on a loaded machine; a wrong offset would be off by decades.
    #[test]
    fn the_derived_wall_clock_matches_the_real_one() {
        let c = Clock::new();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let before = wall_clock_ns();
        let derived = c.wall(c.now());
        let after = wall_clock_ns();
        assert!(
            derived + 50_000_000 >= before && derived <= after + 50_000_000,
            "derived {derived} outside [{before}, {after}] ± 50 ms"
        );
        let mut w = RingWait::default();
        let stamp = wall_clock_ns();
        w.record(c.wall(c.now()).saturating_sub(stamp));
        assert!(w.max_us < 50_000, "a fresh frame waited {} µs", w.max_us);
    }
}
