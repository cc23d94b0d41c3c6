//! Segmentation and receive offloads, turned off while the gateway runs.
//!
//! With GRO, LRO, GSO or TSO on, the kernel hands AF_PACKET super-frames of up to 64 KB that
//! no wire carries; a discipline would schedule them as one packet, and they would not fit the
//! receive ring's slots. CAKE splits them (`split-gso`); the gateway instead turns the offloads
//! off on both interfaces at start, as sqm-scripts advises for its shapers, says so, and turns
//! back on at exit what it turned off. Done through `ethtool`, as a person would.

use std::process::{Command, Stdio};

/// The offloads that make super-frames, by ethtool's long and short names.
const OFFLOADS: [(&str, &str); 4] = [
    ("generic-receive-offload", "gro"),
    ("large-receive-offload", "lro"),
    ("generic-segmentation-offload", "gso"),
    ("tcp-segmentation-offload", "tso"),
];

/// What was turned off on one interface, to turn back on.
#[derive(Debug, Default)]
pub struct Changed {
    ifname: String,
    /// ethtool's short names of what was on and is now off.
    pub turned_off: Vec<&'static str>,
}

/// Which of the offloads `ethtool -k` shows on and changeable.
fn on_and_changeable(listing: &str) -> Vec<&'static str> {
    OFFLOADS
        .iter()
        .filter(|(long, _)| {
            listing.lines().any(|l| {
                let l = l.trim();
                l.strip_prefix(long)
                    .and_then(|rest| rest.strip_prefix(':'))
                    .is_some_and(|v| {
                        let v = v.trim();
                        v.starts_with("on") && !v.contains("[fixed]")
                    })
            })
        })
        .map(|(_, short)| *short)
        .collect()
}

/// Why the offloads could not be changed.
#[derive(Debug, thiserror::Error)]
pub enum OffloadError {
    /// `ethtool` could not be started.
    #[error("`ethtool` did not run ({0}); install ethtool")]
    NoEthtool(#[source] std::io::Error),
    /// `ethtool` ran and refused.
    #[error("`ethtool {args}`: {said}")]
    Refused {
        /// Its arguments.
        args: String,
        /// What it printed on stderr.
        said: String,
    },
}

fn ethtool(args: &[&str]) -> Result<std::process::Output, OffloadError> {
    let out = Command::new("ethtool")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(OffloadError::NoEthtool)?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(OffloadError::Refused {
            args: args.join(" "),
            said: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// Turn the offloads off on `ifname`. Err says why it could not (no ethtool, not allowed).
pub fn turn_off(ifname: &str) -> Result<Changed, OffloadError> {
    let out = ethtool(&["-k", ifname])?;
    let on = on_and_changeable(&String::from_utf8_lossy(&out.stdout));
    let changed = Changed {
        ifname: ifname.into(),
        turned_off: on,
    };
    set(ifname, &changed.turned_off, "off")?;
    Ok(changed)
}

fn set(ifname: &str, which: &[&str], to: &str) -> Result<(), OffloadError> {
    if which.is_empty() {
        return Ok(());
    }
    let mut args = vec!["-K", ifname];
    for w in which {
        args.extend([*w, to]);
    }
    ethtool(&args).map(|_| ())
}

impl Changed {
    /// Turn back on what was turned off.
    pub fn restore(&self) -> Result<(), OffloadError> {
        set(&self.ifname, &self.turned_off, "on")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_is_on_and_skips_what_is_fixed() {
        let listing = "Features for eth0:\n\
            rx-checksumming: on\n\
            tcp-segmentation-offload: on\n\
            \ttx-tcp-segmentation: on\n\
            generic-segmentation-offload: off\n\
            generic-receive-offload: on\n\
            large-receive-offload: off [fixed]\n";
        assert_eq!(on_and_changeable(listing), vec!["gro", "tso"]);
        let fixed_on = "large-receive-offload: on [fixed]\ngeneric-receive-offload: off\n";
        assert!(on_and_changeable(fixed_on).is_empty());
    }
}
