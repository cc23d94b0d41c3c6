//! The two system calls no safe crate wraps: `getsockopt(TCP_INFO)`, for the kernel's smoothed
//! RTT of a load connection (RPM's loaded responsiveness where a request cannot be multiplexed
//! onto the flow; draft-ietf-ippm-responsiveness-09 allows the TCP stack's estimate) and its
//! retransmission count; and `sched_setscheduler`, for `debloat test --realtime` (the gateway
//! has its own copy for `gateway --realtime`: the two crates share no I/O code). Unsafe is
//! confined to these functions.
#![allow(unsafe_code)]

use std::os::fd::AsRawFd;

/// What TCP_INFO tells about a connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpInfo {
    /// Smoothed RTT, µs.
    pub rtt_us: u32,
    /// Segments retransmitted over the connection's life.
    pub total_retrans: u32,
}

/// TCP_INFO of a connected socket.
pub fn tcp_info(sock: &impl AsRawFd) -> std::io::Result<TcpInfo> {
    // SAFETY: tcp_info is plain old data (all integers), so the zeroed value is valid; the
    // kernel writes at most `len` bytes into it and reports how many in `len`.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: the pointers are to live locals of the sizes given.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(TcpInfo {
        rtt_us: info.tcpi_rtt,
        total_retrans: info.tcpi_total_retrans,
    })
}

/// Run the calling thread under SCHED_FIFO at `priority` (1–99), so a probe's send (and the
/// reply's receive stamp) is not queued behind the load's threads on the same CPU. The
/// kernel's RT throttling (`kernel.sched_rt_runtime_us`, 95 % by default) still leaves the CPU
/// to others now and then.
pub fn realtime(priority: u8) -> std::io::Result<()> {
    if !(1..=99).contains(&priority) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("realtime priority {priority}: expected 1–99"),
        ));
    }
    let param = libc::sched_param {
        sched_priority: i32::from(priority),
    };
    // SAFETY: `param` is a valid sched_param; pid 0 is the calling thread.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        let e = std::io::Error::last_os_error();
        return Err(std::io::Error::new(
            e.kind(),
            format!("SCHED_FIFO priority {priority}: {e} (needs root or CAP_SYS_NICE)"),
        ));
    }
    Ok(())
}

/// The calling thread's scheduling policy (`SCHED_FIFO`, `SCHED_OTHER` …).
pub fn policy() -> i32 {
    // SAFETY: no pointers; pid 0 is the calling thread.
    unsafe { libc::sched_getscheduler(0) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn realtime_is_per_thread_and_range_checked() {
        assert!(realtime(0).is_err() && realtime(100).is_err());
        let r = std::thread::spawn(|| realtime(10).map(|()| policy())).join();
        match r {
            Ok(Ok(p)) => assert_eq!(p, libc::SCHED_FIFO),
            // Without CAP_SYS_NICE the error says what is needed.
            Ok(Err(e)) => assert!(e.to_string().contains("CAP_SYS_NICE"), "{e}"),
            Err(_) => panic!("thread panicked"),
        }
        // The thread that asked was changed, not this one.
        assert_eq!(policy(), libc::SCHED_OTHER);
    }

    #[test]
    fn loopback_connection_has_a_small_rtt() -> std::io::Result<()> {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        let c = std::net::TcpStream::connect(l.local_addr()?)?;
        let _s = l.accept()?;
        let i = tcp_info(&c)?;
        // Loopback: the initial estimate is below 10 ms on any machine.
        assert!(i.rtt_us < 10_000, "{i:?}");
        assert_eq!(i.total_retrans, 0);
        Ok(())
    }
}
