//! What `debloat gateway` checks before it forwards: two different ports, neither already
//! forwarded by another gateway (a lock per port, held while this one runs), each up with a
//! carrier (a warning if not), and the control socket every plain run has.
//!
//! The control socket: [`DEFAULT_CONTROL`] unless `--control` (or the file's `control`) names
//! one — the path `gateway stats`, `set` and `reload` ask by default and the systemd unit uses.
//! A second gateway on other ports cannot share it: whoever holds its lock owns it, and the
//! next one takes `/run/debloat/gateway-LAN-WAN.sock`, saying so.

use anyhow::{bail, Result};
use debloat_core::QdiscSpec;
use debloat_gateway::io::sys::claim::{self, Claim, ClaimError};
use std::path::{Path, PathBuf};

/// The control socket of a gateway run without `--control`.
pub const DEFAULT_CONTROL: &str = "/run/debloat/gateway.sock";

/// Where the locks and default sockets live.
const RUN_DIR: &str = "/run/debloat";

/// The locks this gateway holds while it runs, and its control socket.
#[derive(Debug)]
pub struct Held {
    _claims: Vec<Claim>,
    /// The control socket to serve (None if none could be had).
    pub control: Option<PathBuf>,
}

/// `--lan X --wan X` is refused: a gateway forwards between two ports.
pub fn two_ports(lan: &str, wan: &str) -> Result<()> {
    if lan == wan {
        bail!(
            "--lan and --wan are both {lan}: the gateway forwards between two ports, the WAN one facing the modem and the LAN one facing your router or switch; name two different interfaces"
        );
    }
    Ok(())
}

/// Claim both ports (refusing if another gateway has one), warn about a port that is down,
/// and settle the control socket.
pub fn claim_ports(lan: &str, wan: &str, control: Option<&Path>) -> Result<Held> {
    two_ports(lan, wan)?;
    let who = format!(
        "pid {}: debloat gateway --lan {lan} --wan {wan}",
        std::process::id()
    );
    let mut claims = Vec::new();
    for port in [lan, wan] {
        match claim::claim(Path::new(RUN_DIR), port, &who) {
            Ok(c) => claims.push(c),
            Err(e @ ClaimError::Held { .. }) => bail!("{e}"),
            Err(e @ ClaimError::Io { .. }) => eprintln!(
                "warning: {e}; a second gateway on {port} would not be refused (run as root, or give the service a RuntimeDirectory=debloat)"
            ),
        }
        warn_if_down(port);
    }
    let control = match control {
        Some(p) => Some(p.to_path_buf()),
        None => default_control(lan, wan, &who, &mut claims),
    };
    Ok(Held {
        _claims: claims,
        control,
    })
}

/// The default socket if free, else one named after the ports; None (with a warning) if the
/// run directory cannot be written.
fn default_control(lan: &str, wan: &str, who: &str, claims: &mut Vec<Claim>) -> Option<PathBuf> {
    let default = PathBuf::from(DEFAULT_CONTROL);
    let lock = default.with_extension("sock.lock");
    match claim::claim_file(&lock, "the default control socket", who) {
        Ok(c) => {
            claims.push(c);
            Some(default)
        }
        Err(ClaimError::Held { holder, .. }) => {
            let own = Path::new(RUN_DIR).join(format!("gateway-{lan}-{wan}.sock"));
            println!(
                "control socket: {} (the default, {DEFAULT_CONTROL}, is {holder}'s): `debloat gateway stats --control {}`",
                own.display(),
                own.display()
            );
            Some(own)
        }
        Err(e) => {
            eprintln!("warning: no control socket ({e}); give --control PATH for `gateway stats`");
            None
        }
    }
}

/// A port that is down forwards nothing: say so and how to fix it (the gateway still starts,
/// so a cable plugged in later just works).
fn warn_if_down(port: &str) {
    match claim::link_state(port) {
        Ok(s) if !s.up => eprintln!("warning: {port} is down: bring it up with `ip link set {port} up` (no address is needed)"),
        Ok(s) if !s.running => eprintln!("warning: {port} is up but has no carrier (cable unplugged, or the peer is down): nothing crosses until it has"),
        Ok(_) => {}
        Err(e) => eprintln!("warning: could not read the state of {port}: {e}"),
    }
}

/// The words a discipline accepts (so a file from a router keeps parsing) that do nothing in
/// the gateway, each as a warning naming the flag: `--dry-run` and every start say them.
pub fn inert_words(spec: &QdiscSpec, flag: &str) -> Vec<String> {
    let mut out = Vec::new();
    match spec {
        QdiscSpec::Cake(c) => {
            if c.nat {
                out.push(format!("{flag}: cake's `nat` has no effect here: it asks the kernel's conntrack for the addresses behind a NAT, and the gateway forwards at layer 2 with no conntrack; host isolation uses the addresses on the wire (put the gateway on the LAN side of the NAT to see the LAN hosts)"));
            }
            if c.fwmark != 0 {
                out.push(format!("{flag}: cake's `fwmark` has no effect here: frames reaching the gateway carry no firewall mark, so tins come from DSCP alone (mark DSCP with --classify instead)"));
            }
        }
        QdiscSpec::PfifoFast(_) => out.push(format!("{flag}: pfifo_fast keeps one band here: a bridged frame's priority is 0 whatever its TOS (as on a Linux bridge), so its three bands act as one FIFO")),
        QdiscSpec::Fq(f) if f.pacing && f.maxrate == debloat_core::qdisc::fq::spec::NONE => {
            out.push(format!("{flag}: fq paces nothing here: forwarded frames carry no socket and no departure time, so only `maxrate` would pace them; fq still schedules flows (by hash) in turn"))
        }
        QdiscSpec::Tbf(t) => {
            if let Some(child) = &t.child {
                out.extend(inert_words(child, flag));
            }
        }
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_port_twice_is_refused_with_the_reason() {
        let e = two_ports("eth0", "eth0").expect_err("refused");
        assert!(
            e.to_string().contains("--lan and --wan are both eth0"),
            "{e}"
        );
        assert!(two_ports("eth1", "eth0").is_ok());
    }

    #[test]
    fn accepted_but_inert_words_are_each_named() {
        let w = |s: &str| inert_words(&s.parse().expect("spec"), "--egress");
        assert!(w("cake bandwidth 10Mbit").is_empty());
        assert!(w("fq_codel").is_empty());
        let nat = w("cake bandwidth 10Mbit nat fwmark 0xff");
        assert_eq!(nat.len(), 2, "{nat:?}");
        assert!(
            nat[0].starts_with("--egress: cake's `nat` has no effect here"),
            "{nat:?}"
        );
        assert!(nat[1].contains("`fwmark`"), "{nat:?}");
        assert_eq!(w("pfifo_fast").len(), 1);
        assert_eq!(
            w("tbf rate 1Mbit burst 10kb latency 50ms child cake nat").len(),
            1
        );
        // Forwarded frames have no socket and no departure time: fq paces only by maxrate.
        assert!(
            w("fq")[0].contains("fq paces nothing here"),
            "{:?}",
            w("fq")
        );
        assert!(w("fq maxrate 5Mbit").is_empty());
        assert!(w("dualpi2").is_empty());
    }
}
