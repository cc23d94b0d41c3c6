//! What an interface asks of AF_XDP, read before any socket is made: whether its MTU fits one
//! UMEM frame, several ([`MAX_SEGS`] at most: multi-buffer frames) or none, whether the kernel
//! has multi-buffer sockets, and how many receive queues it has.

/// Bytes per UMEM frame: a page, enough for a 1500-byte MTU and the kernel's headroom. A larger
/// frame spans several ([`MAX_SEGS`]): AF_XDP's multi-buffer frames.
pub(super) const FRAME: u32 = 4096;
/// UMEM frames one Ethernet frame may span: 4 hold 15,360 bytes (a 9,000-byte jumbo MTU fits);
/// a longer frame (an MTU raised past 15,342 while running) is refused by `QueueSocket::send_batch`.
/// The kernel's own bound is 17 (`MAX_SKB_FRAGS`) on sending; a larger MTU is left to the
/// TPACKET back end, which copes with any.
pub(super) const MAX_SEGS: usize = 4;

/// Whether `ifname`'s sockets take multi-buffer frames: wherever the kernel has them (Linux
/// ≥ 6.6), so that the MTU may be raised while the gateway runs (veth refuses a jumbo MTU under
/// a program not declared for them, and a socket without them drops the larger frames); Err,
/// with the reason, where the MTU is too large for AF_XDP here.
pub(super) fn usable(ifname: &str) -> Result<bool, String> {
    let release = kernel_release();
    let sg = multi_buffer_kernel(&release);
    match fits(ifname, mtu(ifname))? {
        true if !sg => Err(format!(
            "{ifname}'s MTU {} needs multi-buffer AF_XDP frames (XDP_USE_SG, Linux 6.6 or later; this is {release})",
            mtu(ifname)
        )),
        _ => Ok(sg),
    }
}

/// The running kernel's release (`uname -r`), "unknown" where it cannot be read.
fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// Whether a kernel of `release` ("6.18.0-1-amd64") has multi-buffer AF_XDP sockets (6.6).
fn multi_buffer_kernel(release: &str) -> bool {
    let mut v = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (v.next().unwrap_or(0), v.next().unwrap_or(0));
    (major, minor) >= (6, 6)
}

/// Whether frames of an `mtu` (with Ethernet header and one VLAN tag) fit one UMEM frame after
/// the kernel's headroom (false: multi-buffer frames are needed), or [`MAX_SEGS`] (else Err).
fn fits(ifname: &str, mtu: usize) -> Result<bool, String> {
    let room = FRAME as usize - HEADROOM;
    if mtu + 18 > MAX_SEGS * room {
        return Err(format!(
            "{ifname}'s MTU {mtu} needs more than {MAX_SEGS} {FRAME}-byte UMEM frames (at most MTU {})",
            MAX_SEGS * room - 18
        ));
    }
    Ok(mtu + 18 > room)
}

/// What the kernel keeps in front of a frame in a UMEM frame (`XDP_PACKET_HEADROOM`).
const HEADROOM: usize = 256;

/// The interface's MTU (sysfs), 1500 where it cannot be read.
fn mtu(ifname: &str) -> usize {
    std::fs::read_to_string(format!("/sys/class/net/{ifname}/mtu"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1500)
}

/// The interface's receive queues (sysfs), 1 where it cannot be read.
pub(super) fn rx_queues(ifname: &str) -> u32 {
    std::fs::read_dir(format!("/sys/class/net/{ifname}/queues"))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
                .count() as u32
        })
        .unwrap_or(1)
        .max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A UMEM frame holds 4,096 − 256 bytes of headroom = 3,840 bytes of Ethernet frame: MTU
    /// 3,822 plus header and VLAN tag. Past that, frames span UMEM frames, up to four.
    #[test]
    fn an_mtu_fits_one_frame_several_or_none() {
        assert_eq!(fits("lan0", 1500), Ok(false));
        assert_eq!(fits("lan0", 3822), Ok(false));
        assert_eq!(fits("lan0", 3823), Ok(true));
        assert_eq!(fits("lan0", 9000), Ok(true));
        assert_eq!(fits("lan0", 15342), Ok(true));
        let e = fits("lan0", 15343).expect_err("five frames");
        assert!(
            e.contains("MTU 15343") && e.contains("at most MTU 15342"),
            "{e}"
        );
    }

    #[test]
    fn multi_buffer_sockets_from_linux_6_6() {
        assert!(multi_buffer_kernel("6.18.0-1-amd64"));
        assert!(multi_buffer_kernel("6.6.0"));
        assert!(multi_buffer_kernel("7.0.0-rc2"));
        assert!(!multi_buffer_kernel("6.5.13"));
        assert!(!multi_buffer_kernel("5.18.0"));
        assert!(!multi_buffer_kernel("unknown"));
    }
}
