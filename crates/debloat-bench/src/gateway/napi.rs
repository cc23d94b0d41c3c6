//! The forwarding core's share of the kernel's receive work: sysfs writes in the bed's gateway
//! namespace, and threaded NAPI pinned to the forwarding core for the AF_XDP rows.

use super::*;

/// Write `value` to /sys/class/net/`path` inside namespace `ns`.
pub(super) fn write_sysfs(ns: &str, path: &str, value: &str) -> Result<()> {
    let cmd = format!("echo {value} > /sys/class/net/{path}");
    sh(&["ip", "netns", "exec", ns, "sh", "-c", &cmd])
        .with_context(|| format!("writing {value} to /sys/class/net/{path}"))?;
    Ok(())
}

/// With XDP on a veth, the frames' receive work (the program, the copy into the UMEM) runs in
/// the veth's NAPI poll, which the sender's CPU schedules on itself: RPS, which steers the
/// skbs of the TPACKET path, comes too late for it. Threaded NAPI (Linux ≥ 5.12) moves that
/// poll into a kernel thread per queue, pinned here to the forwarding core, so that core does
/// all of the forwarding on both back ends. Turned off again for the other forwarders.
pub(super) fn threaded_napi(rig: &Rig, on: bool) -> Result<()> {
    let [_, g, _] = testbed::namespaces(&rig.prefix);
    for dev in ["lan0", "wan0"] {
        let path = format!("{dev}/threaded");
        if on {
            write_sysfs(&g, &path, "1")?;
        } else {
            // A veth without XDP has no NAPI of its own, and refuses the write (EIO): nothing
            // to turn off then.
            let _ = write_sysfs(&g, &path, "0");
        }
    }
    if !on {
        return Ok(());
    }
    let cpu = rig.cpus.fwd.to_string();
    let mut pinned = 0;
    for e in std::fs::read_dir("/proc")?.flatten() {
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        if comm.starts_with("napi/lan0") || comm.starts_with("napi/wan0") {
            let pid = e.file_name().to_string_lossy().into_owned();
            sh(&["taskset", "-pc", &cpu, &pid])?;
            pinned += 1;
        }
    }
    if pinned == 0 {
        bail!("threaded NAPI made no napi/lan0 or napi/wan0 thread to pin");
    }
    Ok(())
}
