//! One gateway per port: an advisory lock per interface, and the interface's state.
//!
//! Two gateways on the same port both see every frame (AF_PACKET is promiscuous) and both send
//! it on: each frame crosses twice (pings come back duplicated). The kernel does not stop that,
//! so each gateway holds an exclusive `flock(2)` on a file named after the port —
//! `/run/debloat/port-NETNS-IFNAME.lock`, NETNS the inode of the network namespace, so equal
//! names in two namespaces (the testbed's) are two ports — and writes into it who holds it.
//! The lock goes with the process however it ends (even `kill -9`); the file stays, harmless.
#![allow(unsafe_code)]

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The held lock of one port; released when dropped (or when the process ends).
#[derive(Debug)]
pub struct Claim {
    _file: File,
    /// The lock file.
    pub path: PathBuf,
}

/// Why a port could not be claimed.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    /// Another process holds the port.
    #[error("{ifname} is already forwarded by another gateway ({holder}; lock {path}): stop that one first, or choose another port")]
    Held {
        /// The port.
        ifname: String,
        /// What the holder wrote: its pid and command line.
        holder: String,
        /// The lock file.
        path: PathBuf,
    },
    /// The lock file could not be made (no /run/debloat, or no right to write there).
    #[error("could not lock {ifname} at {path}: {source}")]
    Io {
        /// The port.
        ifname: String,
        /// The lock file.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
}

/// The lock file of `ifname` in this network namespace, under `dir`.
pub fn lock_path(dir: &Path, ifname: &str) -> PathBuf {
    let netns = std::fs::metadata("/proc/self/ns/net").map_or(0, |m| m.ino());
    dir.join(format!("port-{netns}-{ifname}.lock"))
}

/// Take `ifname` for this process, saying `who` (e.g. "pid 42: lan eth1 wan eth0") to a
/// second gateway that tries.
pub fn claim(dir: &Path, ifname: &str, who: &str) -> Result<Claim, ClaimError> {
    claim_file(&lock_path(dir, ifname), ifname, who)
}

/// Take the lock file `path` (of `what`: a port, or the default control socket's name).
pub fn claim_file(path: &Path, what: &str, who: &str) -> Result<Claim, ClaimError> {
    let path = path.to_path_buf();
    let ifname = what;
    let io_err = |source| ClaimError::Io {
        ifname: ifname.into(),
        path: path.clone(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io_err)?;
    }
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(io_err)?;
    // SAFETY: flock on a file descriptor this function owns.
    let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if r != 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim();
            return Err(ClaimError::Held {
                ifname: ifname.into(),
                holder: if holder.is_empty() {
                    "a process that has not said who it is yet".into()
                } else {
                    holder.into()
                },
                path,
            });
        }
        return Err(io_err(e));
    }
    let said = file
        .set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| file.write_all(format!("{who}\n").as_bytes()));
    said.map_err(io_err)?;
    Ok(Claim { _file: file, path })
}

/// An interface's administrative and operational state (`IFF_UP`, `IFF_RUNNING`: carrier).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkState {
    /// `ip link set IF up` was done.
    pub up: bool,
    /// It has a carrier (a cable, a peer that is up).
    pub running: bool,
}

/// The state of `ifname` now (SIOCGIFFLAGS).
pub fn link_state(ifname: &str) -> io::Result<LinkState> {
    if ifname.len() >= libc::IFNAMSIZ {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "interface name {ifname:?} is longer than the kernel's {} bytes",
                libc::IFNAMSIZ - 1
            ),
        ));
    }
    // SAFETY: a datagram socket only to ask the kernel; closed by OwnedFd.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just returned by socket(2) and is owned here alone.
    let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    // SAFETY: ifreq is plain old data.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(ifname.bytes()) {
        *d = s as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS reads the name and writes ifru_flags inside `req`.
    if unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel filled the flags member of the union.
    let flags = i32::from(unsafe { req.ifr_ifru.ifru_flags });
    Ok(LinkState {
        up: flags & libc::IFF_UP != 0,
        running: flags & libc::IFF_RUNNING != 0,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The second claim of a port fails and names the first holder; once the first is
    /// dropped, the port can be claimed again. (flock locks belong to open files, so two
    /// claims in one process conflict as two processes' would.)
    #[test]
    fn a_second_claim_is_refused_naming_the_first_until_it_is_released() {
        let dir = std::env::temp_dir().join(format!("dbl-claim-{}", std::process::id()));
        let first = claim(&dir, "lan0", "pid 1: lan lan0 wan wan0").unwrap();
        let err = claim(&dir, "lan0", "pid 2").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("lan0 is already forwarded"), "{text}");
        assert!(text.contains("pid 1: lan lan0 wan wan0"), "{text}");
        assert!(claim(&dir, "wan0", "pid 2").is_ok(), "another port is free");
        drop(first);
        let again = claim(&dir, "lan0", "pid 3").unwrap();
        let said = std::fs::read_to_string(&again.path).unwrap();
        assert_eq!(said, "pid 3\n", "the new holder replaces the old words");
        drop(again);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn loopback_is_up_and_a_missing_interface_is_an_error() {
        let lo = link_state("lo").unwrap();
        assert!(lo.up, "{lo:?}");
        assert!(link_state("no-such-if0").is_err());
        assert!(link_state("a-name-much-too-long-for-linux").is_err());
    }
}
