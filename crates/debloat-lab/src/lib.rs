//! The kernel lab: a real Linux kernel's qdiscs (cake, fq_codel, codel, netem, pie, htb …) run
//! beside debloat's, on this machine, as an ordinary process.
//!
//! User-Mode Linux (`linux.uml`: Debian unstable's, Linux 7.2, fetched and prepared by
//! [`kernel`]; see there why not stable's) boots with the host's filesystem as its root,
//! read-only, in about two seconds, with one virtual CPU. The guest's PID 1 is
//! `init.sh` (compiled in): it mounts `/proc`, `/sys` and scratch tmpfs, gives the kernel a
//! `modprobe` that finds the guest's modules (the host may have no `/lib/modules`), runs the
//! payload script from a host directory mounted at `/run/out`, and writes its output and exit
//! status there. debloat's own binary, `ip`, `tc`, `ping`, `iperf3` run inside as on the host.
//!
//! What it cannot give: BQL (no UML NIC driver uses it), several CPUs, and the host's kernel
//! version (7.2 inside, not the host's): every result says which kernel it used.

pub mod kernel;
pub mod rows;
pub mod side;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const INIT: &str = include_str!("init.sh");

/// Why the lab cannot run, or a run failed.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// A piece is missing; the message says how to install it.
    #[error("the kernel lab needs {what}: {fix}")]
    Missing {
        /// What is missing.
        what: &'static str,
        /// How to get it.
        fix: &'static str,
    },
    /// The host side failed (temporary files, starting the kernel).
    #[error("kernel lab: {0}")]
    Io(#[from] std::io::Error),
    /// The guest did not finish in time (it was killed).
    #[error("kernel lab: the guest ran over {0:?} and was stopped")]
    Timeout(Duration),
    /// A step of preparing the kernel failed (a command and what it printed).
    #[error("kernel lab: {what} failed: {stderr}")]
    Step {
        /// The command.
        what: String,
        /// Its standard error.
        stderr: String,
    },
    /// The guest ended without writing the payload's exit status (it did not boot).
    #[error("kernel lab: the guest did not run the payload; console:\n{0}")]
    NoBoot(String),
}

/// A found User-Mode Linux kernel and the tools its guest needs.
#[derive(Clone, Debug)]
pub struct Lab {
    kernel: kernel::Kernel,
    modprobe: PathBuf,
    /// Guest memory, MiB.
    pub mem_mb: u32,
    /// How long a run may take.
    pub timeout: Duration,
}

/// What a payload printed and its exit status.
#[derive(Clone, Debug)]
pub struct Output {
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
    /// Its exit status.
    pub status: i32,
    /// Boot to power-off, wall clock.
    pub elapsed: Duration,
}

fn first_existing(paths: &[&str]) -> Option<PathBuf> {
    paths.iter().map(PathBuf::from).find(|p| p.exists())
}

impl Lab {
    /// Find (or fetch and prepare, see [`kernel::find`]) the kernel, its modules and
    /// `modprobe`.
    pub fn find() -> Result<Lab, LabError> {
        let modprobe =
            first_existing(&["/usr/sbin/modprobe", "/sbin/modprobe"]).ok_or(LabError::Missing {
                what: "modprobe",
                fix: "apt-get install kmod",
            })?;
        let kernel = kernel::find()?;
        Ok(Lab {
            kernel,
            modprobe,
            mem_mb: 512,
            timeout: Duration::from_secs(300),
        })
    }

    /// The kernel this lab boots.
    pub fn kernel(&self) -> &kernel::Kernel {
        &self.kernel
    }

    /// "Linux 7.2.7 (User-Mode Linux, Debian package 7.2um1)": what a result names.
    pub fn describe(&self) -> String {
        let k = &self.kernel;
        match k.package.as_str() {
            "" => format!(
                "Linux {} (User-Mode Linux, {})",
                k.release,
                k.binary.display()
            ),
            p => format!("Linux {} (User-Mode Linux, Debian package {p})", k.release),
        }
    }

    /// Boot the guest, run `script` (POSIX sh) in it as root, and return what it printed.
    /// Files the script writes in its working directory (`/run/out`) are in `keep` afterwards
    /// when given.
    pub fn run(&self, script: &str, keep: Option<&Path>) -> Result<Output, LabError> {
        self.run_with(script, keep, None)
    }

    /// [`Lab::run`] with a binary the script can run as `$DEBLOAT`: `exe` is linked (or copied)
    /// into the run's directory first, because the guest mounts scratch space over `/tmp`,
    /// `/run`, `/var/tmp` and `/root`, and a binary built under one of them (a CI checkout in
    /// /tmp, say) would not be there.
    pub fn run_with_binary(
        &self,
        script: &str,
        keep: Option<&Path>,
        exe: &Path,
    ) -> Result<Output, LabError> {
        self.run_with(script, keep, Some(exe))
    }

    fn run_with(
        &self,
        script: &str,
        keep: Option<&Path>,
        exe: Option<&Path>,
    ) -> Result<Output, LabError> {
        let dir = tempfile::tempdir()?;
        let out = dir.path().join("out");
        std::fs::create_dir(&out)?;
        let script = match exe {
            Some(exe) => {
                let inside = out.join("debloat");
                if std::fs::hard_link(exe, &inside).is_err() {
                    std::fs::copy(exe, &inside)?;
                }
                format!("export DEBLOAT=/run/out/debloat\n{script}")
            }
            None => script.to_string(),
        };
        let script = script.as_str();
        let init = dir.path().join("init.sh");
        std::fs::write(&init, INIT)?;
        std::fs::write(out.join("payload.sh"), script)?;
        set_executable(&init)?;
        let started = Instant::now();
        let mut child = Command::new(&self.kernel.binary)
            .arg(format!("mem={}M", self.mem_mb))
            .args(["root=/dev/root", "rootfstype=hostfs", "rootflags=/", "ro"])
            .arg(format!("init={}", init.display()))
            .arg(format!("lab_out={}", out.display()))
            .arg(format!("lab_modprobe={}", self.modprobe.display()))
            .arg(format!("lab_modules={}", self.kernel.modules.display()))
            .args(["con0=fd:0,fd:1", "con=null", "quiet"])
            .env("TMPDIR", dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let console = wait(&mut child, self.timeout)?;
        let status = std::fs::read_to_string(out.join("rc"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .ok_or(LabError::NoBoot(console))?;
        let read = |f: &str| std::fs::read_to_string(out.join(f)).unwrap_or_default();
        let o = Output {
            stdout: read("stdout"),
            stderr: read("stderr"),
            status,
            elapsed: started.elapsed(),
        };
        if let Some(k) = keep {
            let _ = std::fs::remove_file(out.join("debloat"));
            copy_dir(&out, k)?;
        }
        Ok(o)
    }
}

fn set_executable(p: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755))
}

/// Wait for the kernel to power off; kill it after `limit`. Returns its console output.
fn wait(child: &mut std::process::Child, limit: Duration) -> Result<String, LabError> {
    let started = Instant::now();
    loop {
        if child.try_wait()?.is_some() {
            break;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Err(LabError::Timeout(limit));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut console = String::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = std::io::Read::read_to_string(&mut o, &mut console);
    }
    Ok(console)
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        if e.file_type()?.is_file() {
            std::fs::copy(e.path(), to.join(e.file_name()))?;
        }
    }
    Ok(())
}

/// A shell word quoted for `sh`.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The script that shows each spec as the kernel's tc does: one veth pair (MTU 1500), each
/// spec added fresh on `v0`, `tc -s qdisc show` after a `=== SPEC` line. An `htb` spec is
/// built with tc's commands for its tree ([`debloat_core::qdisc::htb::show::tc_commands`]) and
/// shown with its classes (`tc -s class show`).
pub fn tc_show_script(specs: &[String]) -> String {
    let mut s = String::from("ip link add v0 type veth peer name v1\n");
    for spec in specs {
        let build = match spec.parse::<debloat_core::QdiscSpec>() {
            Ok(debloat_core::QdiscSpec::Htb(h)) => {
                let mut cmds: Vec<String> = debloat_core::qdisc::htb::show::tc_commands(&h, "v0")
                    .into_iter()
                    .map(|c| format!("tc {c}"))
                    .collect();
                cmds.push("tc -s qdisc show dev v0".into());
                cmds.push("tc -s class show dev v0".into());
                cmds.join(" && ")
            }
            _ => format!("tc qdisc add dev v0 root {spec} && tc -s qdisc show dev v0"),
        };
        s.push_str(&format!(
            "echo {}\ntc qdisc del dev v0 root 2>/dev/null\n{build}\n",
            quote(&format!("=== {spec}"))
        ));
    }
    s
}

/// Split the output of [`tc_show_script`] into (spec, tc's text) with the kernel's handle
/// (`8001:` …) written as `1:`, as `debloat spec` prints it, and a tree's blocks in
/// [`canonical_order`].
pub fn split_tc_show(stdout: &str) -> Vec<(String, String)> {
    stdout
        .split("=== ")
        .skip(1)
        .map(|blk| {
            let (spec, text) = blk.split_once('\n').unwrap_or((blk, ""));
            (spec.to_string(), canonical_order(&normalise_handle(text)))
        })
        .collect()
}

/// `qdisc cake 8003: root` → `qdisc cake 1: root` (a leaf's own handle stays).
fn normalise_handle(text: &str) -> String {
    text.lines()
        .map(|l| match l.strip_prefix("qdisc ") {
            Some(rest) => {
                let mut w = rest.splitn(3, ' ');
                match (w.next(), w.next(), w.next()) {
                    (Some(kind), Some(h), Some(tail))
                        if h.ends_with(':') && tail.starts_with("root") =>
                    {
                        format!("qdisc {kind} 1: {tail}")
                    }
                    _ => l.to_string(),
                }
            }
            None => l.to_string(),
        })
        .map(|l| l + "\n")
        .collect()
}

/// A tree's text in one order whatever order the kernel's hashes list it in: the root
/// qdisc, the other qdiscs by handle, then the classes by classid. Each block is a `qdisc` or
/// `class` line and the lines under it.
pub fn canonical_order(text: &str) -> String {
    let mut blocks: Vec<(u8, u32, String)> = Vec::new();
    for line in text.split_inclusive('\n') {
        let head = line.starts_with("qdisc ") || line.starts_with("class ");
        match blocks.last_mut() {
            Some(b) if !head => b.2.push_str(line),
            _ => {
                let mut w = line.split_whitespace();
                let (what, _kind, id) = (w.next(), w.next(), w.next().unwrap_or(""));
                let rank = match (what, line.contains(" root ")) {
                    (Some("qdisc"), true) => 0,
                    (Some("qdisc"), false) => 1,
                    _ => 2,
                };
                blocks.push((rank, handle_number(id), line.to_string()));
            }
        }
    }
    blocks.sort_by_key(|b| (b.0, b.1));
    blocks.into_iter().map(|b| b.2).collect()
}

/// `1:1a` → 0x1001a, `10:` → 0x100000, for ordering.
fn handle_number(id: &str) -> u32 {
    let (maj, min) = id.split_once(':').unwrap_or((id, ""));
    let maj = u32::from_str_radix(maj, 16).unwrap_or(0);
    let min = u32::from_str_radix(min, 16).unwrap_or(0);
    (maj << 16) | min
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tc_output_splits_per_spec_with_handles_normalised() {
        let out = "=== cake\nqdisc cake 8001: root refcnt 2 bandwidth unlimited \n Sent 0 bytes\n=== pfifo limit 5\nqdisc pfifo 8002: root refcnt 2 limit 5p\n";
        let v = split_tc_show(out);
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].0, "cake");
        assert_eq!(
            v[0].1,
            "qdisc cake 1: root refcnt 2 bandwidth unlimited \n Sent 0 bytes\n"
        );
        assert_eq!(v[1].1, "qdisc pfifo 1: root refcnt 2 limit 5p\n");
    }

    /// The kernel lists an htb's classes in its hash's order; both sides are put in classid
    /// order, leaves' qdiscs keep their handles.
    #[test]
    fn a_tree_is_put_in_classid_order() {
        let out = "=== htb\nqdisc htb 1: root refcnt 2 r2q 10\n Sent 0\nqdisc pfifo 11: parent 1:11 limit 5p\n Sent 1\nqdisc fq_codel 10: parent 1:10 x\nclass htb 1:11 parent 1:1 a\n tokens: 1\n\nclass htb 1:1 root b\n tokens: 2\n\n";
        let v = split_tc_show(out);
        assert_eq!(
            v[0].1,
            "qdisc htb 1: root refcnt 2 r2q 10\n Sent 0\nqdisc fq_codel 10: parent 1:10 x\nqdisc pfifo 11: parent 1:11 limit 5p\n Sent 1\nclass htb 1:1 root b\n tokens: 2\n\nclass htb 1:11 parent 1:1 a\n tokens: 1\n\n"
        );
    }

    #[test]
    fn quoting_survives_quotes() {
        assert_eq!(quote("a'b"), r"'a'\''b'");
    }
}
