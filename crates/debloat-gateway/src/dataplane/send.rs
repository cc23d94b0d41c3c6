//! Frames out: what a path made due, or what a do-nothing forwarder read, handed to the other
//! interface's port in batches, the frames the kernel refused counted. A frame held in an
//! AF_XDP UMEM that the port shares goes out as it is; the rest are copied by the port
//! ([`crate::port::Port::send_batch`]); held frames left in a batch go back to their UMEM
//! together ([`crate::io::buf::release_all`]).

use crate::io::buf::Buf;
use crate::path::Path;
use crate::port::Port;
use std::io;

/// Frames handed to the kernel per `sendmmsg`.
pub(crate) const SEND_BATCH: usize = 64;

/// What `path` made due by `now`, out on `out` in batches; returns the frames the kernel
/// refused.
pub(crate) fn send_due(path: &mut Path, out: &mut Port, now: u64, batch: &mut Vec<Buf>) -> u64 {
    let mut errors = 0;
    path.poll(now, &mut |f| {
        batch.push(f);
        if batch.len() == SEND_BATCH {
            errors += send_all(out, batch);
        }
    });
    errors + send_all(out, batch)
}

/// The do-nothing forwarder: what waits on `from` (a batch at most) straight to `to`, counted
/// in `intake.passed`. Returns the frames the kernel refused.
pub(crate) fn pass_through(
    from: &mut Port,
    to: &mut Port,
    intake: &mut crate::intake::Intake,
) -> io::Result<u64> {
    let mut batch = Vec::with_capacity(SEND_BATCH);
    let mut errors = 0;
    for _ in 0..256 {
        match from.recv_frame()? {
            Some(crate::sys::Received::Frame(f)) => {
                intake.count_umem(from, &f);
                batch.push(f)
            }
            Some(_) => intake.oversized += 1,
            None => break,
        }
        if batch.len() == SEND_BATCH {
            intake.passed += batch.len() as u64;
            errors += send_all(to, &mut batch);
        }
    }
    intake.passed += batch.len() as u64;
    Ok(errors + send_all(to, &mut batch))
}

/// Send the batch (emptying it); returns how many frames the kernel refused.
fn send_all(out: &mut Port, batch: &mut Vec<Buf>) -> u64 {
    let (mut errors, mut from, mut retried) = (0, 0, false);
    while from < batch.len() {
        let left = batch.len() - from;
        match out.send_batch(&mut batch[from..]) {
            // sendmmsg stops at the first frame it refuses: count it, go on after it.
            Ok(n) if n < left => {
                errors += 1;
                from += n + 1;
            }
            Ok(n) => from += n,
            // An error the kernel left on the socket when its interface went down (or was
            // down when the socket was bound) fails the next send once, even after the
            // interface came back: try that frame again before counting it.
            Err(e) if e.raw_os_error() == Some(libc::ENETDOWN) && !retried => retried = true,
            Err(_) => {
                errors += 1;
                from += 1;
            }
        }
    }
    crate::io::buf::release_all(batch);
    errors
}
