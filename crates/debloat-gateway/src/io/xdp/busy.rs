//! Preferred busy polling for an AF_XDP socket (Linux ≥ 5.11): the device's receive work runs
//! in the gateway's own thread, when it asks, instead of in a softirq or a NAPI kernel thread.
//!
//! In copy mode (veth, and any driver without zero-copy) a frame reaches the socket's RX ring
//! only when the device's NAPI poll runs the XDP program and copies the frame into the UMEM.
//! Without busy polling that poll is scheduled by whoever queued the frame: a softirq on the
//! sender's CPU, or a NAPI thread where NAPI is threaded. A gateway spinning on the rings then
//! waits for another thread to be scheduled, and a spinning thread on the same core is what
//! keeps it from running (55–271 µs p99 idle latency measured in `debloat bench gateway`
//! before this module, issue 42).
//!
//! With `SO_PREFER_BUSY_POLL`, `SO_BUSY_POLL` and `SO_BUSY_POLL_BUDGET` set on the socket, a
//! non-blocking `recvfrom` runs the NAPI poll of the socket's queue in the caller's context
//! ([`poll_napi`]), once the kernel has told the socket which NAPI that is ([`napi_id`]).
//! `napi_defer_hard_irqs` and `gro_flush_timeout` on the interface ([`NapiDefer`]) then keep
//! the poll with the busy poller between calls: after a busy poll the kernel arms a timer
//! instead of handing the poll back to the softirq or thread, which takes it back only if the
//! gateway stops asking for `gro_flush_timeout`. Both are the kernel's documented setting for
//! this mode (Documentation/networking/napi.rst, "preferred busy polling"); they are set only
//! once the NAPI is known (deferring the kernel's polls with nobody polling would hold frames
//! for the timer) and restored when the socket closes.
//!
//! Where it does not work (measured on Linux 6.18, issue 42): the kernel learns an AF_XDP
//! socket's NAPI at bind time, and only for a zero-copy socket ("xsk: Bring back busy polling
//! support", Linux 6.13; before, from the first frame received). A copy-mode socket — every
//! veth — keeps NAPI id 0 (`SO_INCOMING_NAPI_ID` after thousands of frames), so `recvfrom`
//! polls nothing. The gateway then spins on the rings, yielding, and the kernel's own NAPI
//! delivers: in the sender's softirq by default, or in a NAPI thread where NAPI is threaded.
#![allow(unsafe_code)]

use std::io;

/// `SO_BUSY_POLL`: how long one busy poll may spin for frames (µs). Non-blocking calls run
/// the poll once whatever this is; it only has to be non-zero.
const BUSY_POLL_US: libc::c_int = 20;
/// `SO_BUSY_POLL_BUDGET`: frames one poll may take (the kernel's NAPI weight).
const BUSY_POLL_BUDGET: libc::c_int = 64;
/// `napi_defer_hard_irqs`: polls without frames before the kernel takes the poll back.
const DEFER_HARD_IRQS: &str = "2";
/// `gro_flush_timeout` (ns): the watchdog after which the kernel's own NAPI runs again when
/// the busy poller stopped asking.
const GRO_FLUSH_TIMEOUT_NS: &str = "200000";

fn setsockopt_int(fd: i32, opt: libc::c_int, val: libc::c_int, name: &str) -> io::Result<()> {
    // SAFETY: `val` is live and of the size passed.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            opt,
            (&val as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("{name}: {e}")));
    }
    Ok(())
}

/// Ask the kernel to busy-poll the socket's queue when the socket is read.
pub fn prefer_busy_poll(fd: i32) -> io::Result<()> {
    setsockopt_int(fd, libc::SO_PREFER_BUSY_POLL, 1, "SO_PREFER_BUSY_POLL")?;
    setsockopt_int(fd, libc::SO_BUSY_POLL, BUSY_POLL_US, "SO_BUSY_POLL")?;
    setsockopt_int(
        fd,
        libc::SO_BUSY_POLL_BUDGET,
        BUSY_POLL_BUDGET,
        "SO_BUSY_POLL_BUDGET",
    )
}

/// Run the socket's queue's NAPI poll here, now (a non-blocking `recvfrom` of nothing: the
/// frames land in the RX ring, not in a buffer).
pub fn poll_napi(fd: i32) {
    // SAFETY: no buffer is passed; the call only drives the kernel's receive work.
    unsafe {
        libc::recvfrom(
            fd,
            std::ptr::null_mut(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
}

/// The NAPI id the kernel learnt for the socket (0 before its first frame, or where the
/// device's queue has none: then busy polling does nothing).
pub fn napi_id(fd: i32) -> u32 {
    let mut id: u32 = 0;
    let mut len = 4 as libc::socklen_t;
    // SAFETY: `id` and `len` are live and of the size passed.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_INCOMING_NAPI_ID,
            (&mut id as *mut u32).cast(),
            &mut len,
        )
    };
    if r == 0 {
        id
    } else {
        0
    }
}

/// An interface's `napi_defer_hard_irqs` and `gro_flush_timeout` set for busy polling, and
/// put back as they were on drop.
#[derive(Debug)]
pub struct NapiDefer {
    ifname: String,
    old: [String; 2],
}

const KNOBS: [&str; 2] = ["napi_defer_hard_irqs", "gro_flush_timeout"];

fn knob(ifname: &str, name: &str) -> String {
    format!("/sys/class/net/{ifname}/{name}")
}

impl NapiDefer {
    /// Set the two knobs on `ifname` (sysfs of the current network namespace).
    pub fn apply(ifname: &str) -> io::Result<NapiDefer> {
        let read = |n: &str| std::fs::read_to_string(knob(ifname, n)).map(|s| s.trim().to_string());
        let old = [read(KNOBS[0])?, read(KNOBS[1])?];
        let set = NapiDefer {
            ifname: ifname.to_string(),
            old,
        };
        for (n, v) in KNOBS.iter().zip([DEFER_HARD_IRQS, GRO_FLUSH_TIMEOUT_NS]) {
            std::fs::write(knob(ifname, n), v)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", knob(ifname, n))))?;
        }
        Ok(set)
    }
}

impl Drop for NapiDefer {
    fn drop(&mut self) {
        for (n, v) in KNOBS.iter().zip(&self.old) {
            let _ = std::fs::write(knob(&self.ifname, n), v);
        }
    }
}
