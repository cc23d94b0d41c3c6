//! One interface's packet I/O, on the back end chosen for it: `packet` (AF_PACKET with a
//! TPACKET ring, [`crate::sys`]) or `af_xdp` (an XDP program and an AF_XDP socket,
//! [`crate::io::xdp`]). `auto` takes AF_XDP where it attaches and TPACKET where it does not,
//! and says why once. What the rest of the gateway sees is the same: frames in, frames out,
//! a descriptor to wait on.

use crate::io::buf::Buf;
use crate::io::xdp::{XdpInfo, XdpMode, XdpSocket};
use crate::sys::{PacketSocket, Received};
use serde::Serialize;
use std::io;
use std::os::fd::{AsRawFd, RawFd};

/// Which back end to use (`--io`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IoChoice {
    /// AF_XDP where the program attaches, else the TPACKET ring (the reason said once).
    Auto,
    /// AF_XDP or nothing: the gateway does not start if it cannot attach (native XDP where
    /// the driver has it, generic XDP elsewhere).
    AfXdp,
    /// AF_XDP with the program attached as generic XDP even where the driver has native XDP
    /// (`xdpgeneric` in `ip link`'s words): for measuring what `auto` chooses between.
    AfXdpGeneric,
    /// AF_PACKET with a TPACKET ring (what the gateway always had).
    #[default]
    Packet,
}

impl std::str::FromStr for IoChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<IoChoice, String> {
        match s {
            "auto" => Ok(IoChoice::Auto),
            "af_xdp" | "af-xdp" | "xdp" => Ok(IoChoice::AfXdp),
            "af_xdp_generic" | "af_xdp_skb" | "xdpgeneric" => Ok(IoChoice::AfXdpGeneric),
            "packet" | "af_packet" | "tpacket" => Ok(IoChoice::Packet),
            _ => Err(format!(
                "unknown I/O back end `{s}`: choose af_xdp, packet, auto or af_xdp_generic"
            )),
        }
    }
}

impl std::fmt::Display for IoChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            IoChoice::Auto => "auto",
            IoChoice::AfXdp => "af_xdp",
            IoChoice::AfXdpGeneric => "af_xdp_generic",
            IoChoice::Packet => "packet",
        })
    }
}

impl IoChoice {
    /// Where the XDP program may run, in the order tried. `auto` takes native XDP only: with
    /// generic XDP, AF_XDP measured slower than TPACKET on the same veths (BENCHMARKS.md,
    /// "Generic XDP"), so where the driver has no native XDP, `auto` uses TPACKET and says so.
    pub fn xdp_modes(self) -> &'static [XdpMode] {
        match self {
            IoChoice::Auto => &[XdpMode::Native],
            IoChoice::AfXdp => &[XdpMode::Native, XdpMode::Skb],
            IoChoice::AfXdpGeneric => &[XdpMode::Skb],
            IoChoice::Packet => &[],
        }
    }
}

/// Why `auto` left an interface on TPACKET, in words: where native XDP did not attach, that
/// generic XDP was not tried, and why.
pub fn auto_reason(why: String) -> String {
    if why.starts_with("attaching in native mode") {
        format!("{why}: no native XDP here, and auto does not take generic XDP, which measured slower than TPACKET (--io af_xdp would take it)")
    } else {
        why
    }
}

/// What an interface runs on, for `gateway stats`, JSON and Prometheus.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Backend {
    /// `af_xdp` or `packet`.
    pub io: &'static str,
    /// For AF_XDP: where XDP runs and whether it is zero-copy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub xdp: Option<XdpInfo>,
    /// Why AF_XDP was not used, when it was asked for (`auto`) and could not be.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.xdp {
            Some(x) => write!(
                f,
                "af_xdp ({} XDP, {}{}{}{}{})",
                x.mode,
                if x.zero_copy {
                    "zero-copy"
                } else {
                    "copy mode"
                },
                if x.queues > 1 {
                    format!(", {} receive queues", x.queues)
                } else {
                    String::new()
                },
                if x.busy_poll {
                    ", NAPI busy-polled"
                } else {
                    ""
                },
                if x.multi_buffer {
                    ", multi-buffer frames"
                } else {
                    ""
                },
                if x.shared_umem {
                    ", UMEM shared with the other side"
                } else {
                    ""
                }
            ),
            None => match &self.fallback {
                Some(why) => write!(f, "packet (AF_XDP not used: {why})"),
                None => f.write_str("packet"),
            },
        }
    }
}

/// An interface's frames in and out.
#[derive(Debug)]
pub enum Port {
    /// AF_PACKET with a TPACKET receive ring.
    Packet(PacketSocket),
    /// An AF_XDP socket (boxed: its rings are large).
    Xdp(Box<XdpSocket>, String, u32),
}

impl Port {
    /// Open `ifname` on the chosen back end; with `auto`, the reason AF_XDP was not used is in
    /// [`Port::backend`]'s `fallback`. `busy_poll`: an AF_XDP socket also runs its device's
    /// receive work in the gateway's thread (where the kernel refuses, said once on stderr).
    pub fn open(
        ifname: &str,
        choice: IoChoice,
        busy_poll: bool,
    ) -> io::Result<(Port, Option<String>)> {
        let xdp = |name: &str| {
            let s = XdpSocket::open(name, choice.xdp_modes())?;
            Port::xdp(s, name, busy_poll)
        };
        match choice {
            IoChoice::Packet => Ok((Port::Packet(PacketSocket::open(ifname)?), None)),
            IoChoice::AfXdp | IoChoice::AfXdpGeneric => xdp(ifname)
                .map(|p| (p, None))
                .map_err(|why| io::Error::other(format!("--io {choice} on {ifname}: {why}"))),
            IoChoice::Auto => match xdp(ifname) {
                Ok(p) => Ok((p, None)),
                Err(why) => Ok((
                    Port::Packet(PacketSocket::open(ifname)?),
                    Some(auto_reason(why)),
                )),
            },
        }
    }

    /// Open both interfaces of a path: on AF_XDP together, one UMEM for both, so that a
    /// forwarded frame is sent from where it was received ([`XdpSocket::open_pair`]); where
    /// that cannot be (TPACKET asked for, or either interface refuses AF_XDP), each on its own
    /// as [`Port::open`] opens it, which says why.
    pub fn open_pair(
        lan: &str,
        wan: &str,
        choice: IoChoice,
        busy_poll: bool,
    ) -> io::Result<[(Port, Option<String>); 2]> {
        if choice != IoChoice::Packet {
            if let Ok(mut v) = XdpSocket::open_pair(lan, wan, 1, choice.xdp_modes()) {
                if let Some((l, w)) = v.pop() {
                    let l = Port::xdp(l, lan, busy_poll).map_err(io::Error::other)?;
                    let w = Port::xdp(w, wan, busy_poll).map_err(io::Error::other)?;
                    return Ok([(l, None), (w, None)]);
                }
            }
        }
        Ok([
            Port::open(lan, choice, busy_poll)?,
            Port::open(wan, choice, busy_poll)?,
        ])
    }

    /// A port on an AF_XDP socket already bound to `name` (one of several workers' sockets);
    /// `busy_poll` as in [`Port::open`].
    pub fn xdp(mut s: XdpSocket, name: &str, busy_poll: bool) -> Result<Port, String> {
        let ifindex = crate::sys::ifindex_of(name).ok_or(format!("no interface {name}"))?;
        if busy_poll {
            if let Err(e) = s.prefer_busy_poll(name) {
                eprintln!(
                    "gateway: {name}: the AF_XDP socket cannot busy-poll its NAPI ({e}); \
                     the kernel's softirq or NAPI thread delivers its frames"
                );
            }
        }
        Ok(Port::Xdp(Box::new(s), name.to_string(), ifindex))
    }

    /// Whether both ports are AF_XDP sockets on one UMEM.
    pub fn shares_umem(&self, other: &Port) -> bool {
        match (self, other) {
            (Port::Xdp(a, ..), Port::Xdp(b, ..)) => a.shares_umem(b),
            _ => false,
        }
    }

    /// Say in the statistics whether the port shares its UMEM with the other side.
    pub fn mark_shared_umem(&mut self, shared: bool) {
        if let Port::Xdp(s, ..) = self {
            s.set_shared(shared);
        }
    }

    /// The back end, for the statistics.
    pub fn backend(&self, fallback: Option<&String>) -> Backend {
        match self {
            Port::Packet(_) => Backend {
                io: "packet",
                xdp: None,
                fallback: fallback.cloned(),
            },
            Port::Xdp(s, ..) => Backend {
                io: "af_xdp",
                xdp: Some(s.info()),
                fallback: None,
            },
        }
    }

    /// The interface's index when the port was opened.
    pub fn ifindex(&self) -> u32 {
        match self {
            Port::Packet(s) => s.ifindex,
            Port::Xdp(_, _, i) => *i,
        }
    }

    /// Take the next frame: Ok(None) when none is waiting.
    pub fn recv_frame(&mut self) -> io::Result<Option<Received>> {
        match self {
            Port::Packet(s) => s.recv_frame(),
            Port::Xdp(s, ..) => Ok(s.recv_frame().map(|f| {
                if f.is_empty() {
                    Received::Oversized(0)
                } else {
                    Received::Frame(f)
                }
            })),
        }
    }

    /// When the kernel received the last frame (CLOCK_REALTIME, ns), where the back end says
    /// (AF_XDP's descriptors carry no stamp).
    pub fn last_stamp_ns(&self) -> Option<u64> {
        match self {
            Port::Packet(s) => Some(s.last_stamp_ns()),
            Port::Xdp(..) => None,
        }
    }

    /// Whether the last frame's TCP/UDP checksum was left for a NIC (AF_PACKET says; an
    /// XDP frame comes from a wire or from a veth whose peer has checksum offload off, see
    /// docs/gateway.md).
    pub fn last_csum_not_ready(&self) -> bool {
        match self {
            Port::Packet(s) => s.last_csum_not_ready(),
            Port::Xdp(..) => false,
        }
    }

    /// Run the device's receive work for an AF_XDP socket that busy-polls (a system call);
    /// false where there is none to run here (see [`XdpSocket::poll_napi`]).
    pub fn poll_napi(&mut self) -> bool {
        match self {
            Port::Xdp(s, ..) => s.poll_napi(),
            Port::Packet(_) => false,
        }
    }

    /// Whether a frame is waiting (read from the ring's memory, no system call).
    pub fn readable(&self) -> bool {
        match self {
            Port::Packet(s) => s.readable(),
            Port::Xdp(s, ..) => s.readable(),
        }
    }

    /// The error the kernel left on the socket, if any (cleared by reading it).
    pub fn take_error(&self) -> Option<io::Error> {
        match self {
            Port::Packet(s) => s.take_error(),
            Port::Xdp(..) => None,
        }
    }

    /// Send frames; returns how many the kernel took, from the first (see
    /// [`PacketSocket::send_batch`]). AF_XDP sends a frame held in its own UMEM as it is,
    /// leaving it empty in `frames` ([`XdpSocket::send_batch`]).
    pub fn send_batch(&mut self, frames: &mut [Buf]) -> io::Result<usize> {
        match self {
            Port::Packet(s) => {
                let slices: Vec<&[u8]> = frames.iter().map(|f| &**f).collect();
                s.send_batch(&slices)
            }
            Port::Xdp(s, ..) => s.send_batch(frames),
        }
    }
}

impl AsRawFd for Port {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Port::Packet(s) => s.as_raw_fd(),
            Port::Xdp(s, ..) => s.fd(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_words_parse_and_print_back() {
        for w in ["auto", "af_xdp", "packet", "af_xdp_generic"] {
            assert_eq!(w.parse::<IoChoice>().map(|c| c.to_string()), Ok(w.into()));
        }
        let e = "dpdk".parse::<IoChoice>().expect_err("not a back end");
        assert!(e.contains("af_xdp, packet, auto or af_xdp_generic"), "{e}");
    }

    /// `auto` tries native XDP only and says why it left an interface without it; `af_xdp`
    /// takes generic XDP where native is missing; `af_xdp_generic` takes only generic.
    #[test]
    fn auto_takes_native_xdp_only_and_says_why() {
        assert_eq!(IoChoice::Auto.xdp_modes(), [XdpMode::Native]);
        assert_eq!(IoChoice::AfXdp.xdp_modes(), [XdpMode::Native, XdpMode::Skb]);
        assert_eq!(IoChoice::AfXdpGeneric.xdp_modes(), [XdpMode::Skb]);
        assert!(IoChoice::Packet.xdp_modes().is_empty());
        let why = auto_reason("attaching in native mode: Operation not supported".into());
        assert!(
            why.contains("no native XDP here") && why.contains("--io af_xdp"),
            "{why}"
        );
        let mtu = auto_reason("lan0's MTU 9000 does not fit".into());
        assert_eq!(mtu, "lan0's MTU 9000 does not fit");
    }
}
