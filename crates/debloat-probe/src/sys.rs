//! The one system call no safe crate wraps: `getsockopt(TCP_INFO)`, for the kernel's smoothed
//! RTT of a load connection (RPM's loaded responsiveness where a request cannot be multiplexed
//! onto the flow; draft-ietf-ippm-responsiveness-09 allows the TCP stack's estimate) and its
//! retransmission count. Unsafe is confined to this function.
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

#[cfg(test)]
mod tests {
    use super::*;

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
