//! Which User-Mode Linux kernel the lab boots, and getting it.
//!
//! Debian stable's `user-mode-linux` (6.1 in bookworm, 6.12 in trixie) aborts at its first
//! `exec` on hosts whose CPU has AVX-512 and AMX (Intel Xeon): UML hands the host a fixed-size
//! buffer for the FPU state (`PTRACE_SETREGSET`, `NT_X86_XSTATE`) and the host refuses it
//! (`ptrace set fp regs failed, errno = 14`) because that CPU's XSAVE area is larger. Debian
//! unstable's package (Linux 7.2) boots on those hosts and on AMD EPYC alike, so it is the lab's
//! kernel everywhere: one ground truth, the newest that boots (docs/kernel-lab.md).
//!
//! Unstable's binary needs a newer glibc than the host's, so the lab fetches both packages with
//! the host's own apt (a private sources list for the `sid` suite on the host's own Debian
//! mirror: the system's sources stay as they are), unpacks them into a cache directory with
//! `dpkg-deb -x`, and points the kernel at the unpacked C library with `patchelf` (running it
//! through the loader instead puts UML at another address, where it computes its memory wrongly).
//!
//! Unstable moves. [`PINNED`] is the package version the docs' tables were measured on; the lab
//! asks for it first and, when the archive no longer serves it, takes what it serves and says
//! so on standard error with both versions. Every result records the kernel release it ran on.
//!
//! The cache must be visible inside the guest (its root is the host's filesystem, with scratch
//! tmpfs over `/tmp`, `/run`, `/var/tmp` and `/root`): `/var/cache/debloat/uml` by default,
//! `DEBLOAT_LAB_CACHE` to choose another.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::LabError;

/// The `user-mode-linux` package version the docs' kernel tables were measured on.
pub const PINNED: &str = "7.2um1";

/// A kernel the lab can boot: the binary, its module tree, and its release (`uname -r`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kernel {
    /// The `linux.uml` binary.
    pub binary: PathBuf,
    /// The directory holding `<release>/kernel/...` modules.
    pub modules: PathBuf,
    /// The kernel release, e.g. `7.2.7`.
    pub release: String,
    /// The Debian package version it came from, e.g. `7.2um1` (empty for a system install
    /// whose version was not asked).
    pub package: String,
}

/// Where prepared kernels are kept.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("DEBLOAT_LAB_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/debloat/uml"))
}

/// The kernel to boot: `DEBLOAT_UML` (a `linux.uml` whose modules are in
/// `/usr/lib/uml/modules` or beside it) if set; else unstable's, prepared in the cache (fetched
/// now if it is not there yet); else the system's `/usr/bin/linux.uml`, with the reason the
/// newer one could not be had printed once.
pub fn find() -> Result<Kernel, LabError> {
    if let Some(p) = std::env::var_os("DEBLOAT_UML") {
        return system(Path::new(&p));
    }
    let cache = cache_dir();
    if let Some(k) = prepared(&cache) {
        return Ok(k);
    }
    // Tests run in parallel: one fetches, the others wait for it and find its kernel.
    let _lock = lock(&cache);
    if let Some(k) = prepared(&cache) {
        return Ok(k);
    }
    match fetch(&cache) {
        Ok(k) => Ok(k),
        Err(e) => {
            let fallback = system(Path::new("/usr/bin/linux.uml"));
            if let Ok(k) = &fallback {
                eprintln!(
                    "kernel lab: unstable's User-Mode Linux could not be prepared ({e}); using the system's, Linux {} (it does not boot on hosts with AVX-512/AMX)",
                    k.release
                );
            }
            fallback.map_err(|_| e)
        }
    }
}

/// An exclusive lock on the cache, held while the returned file lives (None where the cache
/// cannot be created: the fetch then fails with the reason).
fn lock(cache: &Path) -> Option<std::fs::File> {
    std::fs::create_dir_all(cache).ok()?;
    let f = std::fs::File::create(cache.join(".lock")).ok()?;
    f.lock().ok()?;
    Some(f)
}

/// A kernel installed the Debian way: `linux.uml` with its modules under
/// `/usr/lib/uml/modules/<release>` (or `../lib/uml/modules` beside the binary).
fn system(binary: &Path) -> Result<Kernel, LabError> {
    let install = "run `debloat lab spec fq_codel` as root with apt-get reachable (it fetches unstable's kernel), or apt-get install user-mode-linux";
    if !binary.exists() {
        return Err(LabError::Missing {
            what: "User-Mode Linux (linux.uml)",
            fix: install,
        });
    }
    let beside = binary
        .parent()
        .and_then(Path::parent)
        .map(|p| p.join("lib/uml/modules"));
    let modules = [beside, Some(PathBuf::from("/usr/lib/uml/modules"))]
        .into_iter()
        .flatten()
        .find(|p| p.is_dir())
        .ok_or(LabError::Missing {
            what: "the UML kernel's modules (lib/uml/modules)",
            fix: install,
        })?;
    let release = only_release(&modules).ok_or(LabError::Missing {
        what: "one kernel release in the UML module directory",
        fix: install,
    })?;
    Ok(Kernel {
        binary: binary.to_path_buf(),
        modules,
        release,
        package: String::new(),
    })
}

/// The one release directory under a module tree.
fn only_release(modules: &Path) -> Option<String> {
    let mut names: Vec<String> = std::fs::read_dir(modules)
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names.pop()
}

/// A kernel prepared earlier: the pinned package if it is there, else the newest prepared.
fn prepared(cache: &Path) -> Option<Kernel> {
    let mut versions: Vec<String> = std::fs::read_dir(cache)
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("ready").exists())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    versions.sort();
    let pick = versions
        .iter()
        .find(|v| *v == PINNED)
        .or(versions.last())?
        .clone();
    let root = cache.join(&pick);
    let modules = root.join("usr/lib/uml/modules");
    Some(Kernel {
        binary: root.join("usr/bin/linux.uml"),
        release: only_release(&modules)?,
        modules,
        package: pick,
    })
}

/// Fetch unstable's `user-mode-linux` and `libc6`, unpack them into `cache/<version>` and point
/// the kernel at the unpacked C library.
pub fn fetch(cache: &Path) -> Result<Kernel, LabError> {
    let work = cache.join("apt");
    for d in ["lists/partial", "archives/partial", "debs"] {
        std::fs::create_dir_all(work.join(d))?;
    }
    let sources = work.join("sources.list");
    std::fs::write(&sources, sid_sources()?)?;
    let apt = AptDirs {
        sources,
        lists: work.join("lists"),
    };
    eprintln!("kernel lab: fetching Debian unstable's user-mode-linux (≈40 MB, once) …");
    run(apt.cmd("apt-get").arg("update").arg("-qq"))?;
    let served = apt.candidate("user-mode-linux")?;
    let version = if apt.serves("user-mode-linux", PINNED)? {
        PINNED.to_string()
    } else {
        eprintln!(
            "kernel lab: Debian unstable no longer serves user-mode-linux {PINNED} (the docs' tables were measured on it); using {served}: results record the kernel they ran on"
        );
        served
    };
    let debs = work.join("debs");
    for f in std::fs::read_dir(&debs)? {
        std::fs::remove_file(f?.path())?;
    }
    run(apt.cmd("apt-get").current_dir(&debs).args([
        "download",
        "-qq",
        &format!("user-mode-linux={version}"),
        "libc6",
    ]))?;
    let root = cache.join(&version);
    let _ = std::fs::remove_dir_all(&root);
    for f in std::fs::read_dir(&debs)? {
        run(Command::new("dpkg-deb").arg("-x").arg(f?.path()).arg(&root))?;
    }
    patch(&root)?;
    std::fs::write(root.join("ready"), format!("{version}\n"))?;
    prepared(cache).ok_or(LabError::Missing {
        what: "a kernel in the unpacked package",
        fix: "remove the cache directory (DEBLOAT_LAB_CACHE or /var/cache/debloat/uml) and try again",
    })
}

/// Point the binary at the unpacked loader and C library.
fn patch(root: &Path) -> Result<(), LabError> {
    if which("patchelf").is_none() {
        let _ = run(Command::new("apt-get").args(["install", "-y", "-qq", "patchelf"]));
    }
    if which("patchelf").is_none() {
        return Err(LabError::Missing {
            what: "patchelf",
            fix: "apt-get install patchelf",
        });
    }
    let lib = root.join("usr/lib/x86_64-linux-gnu");
    run(Command::new("patchelf")
        .arg("--set-interpreter")
        .arg(lib.join("ld-linux-x86-64.so.2"))
        .arg("--set-rpath")
        .arg(&lib)
        .arg(root.join("usr/bin/linux.uml")))
}

/// The host's own Debian mirror (from its apt sources) with the suite `sid`.
fn sid_sources() -> Result<String, LabError> {
    let mut text = std::fs::read_to_string("/etc/apt/sources.list").unwrap_or_default();
    if let Ok(dir) = std::fs::read_dir("/etc/apt/sources.list.d") {
        for e in dir.flatten() {
            if e.path()
                .extension()
                .is_some_and(|x| x == "sources" || x == "list")
            {
                text.push_str(&std::fs::read_to_string(e.path()).unwrap_or_default());
                text.push('\n');
            }
        }
    }
    let mirror = debian_mirror(&text).ok_or(LabError::Missing {
        what: "a Debian mirror in the host's apt sources",
        fix: "add the Debian archive to /etc/apt/sources.list, or set DEBLOAT_UML to a linux.uml",
    })?;
    Ok(format!(
        "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] {mirror} sid main\n"
    ))
}

/// The first archive URI in apt sources (one-line or deb822) that serves Debian's main suites
/// (not `-security`, not a third party's).
pub fn debian_mirror(sources: &str) -> Option<String> {
    sources
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .flat_map(|l| l.split_whitespace())
        .map(|w| w.trim_start_matches("URIs:"))
        .filter(|w| w.starts_with("http://") || w.starts_with("https://"))
        .find(|w| w.trim_end_matches('/').ends_with("/debian"))
        .map(|w| w.trim_end_matches('/').to_string())
}

/// apt pointed at the lab's private sources and lists.
struct AptDirs {
    sources: PathBuf,
    lists: PathBuf,
}

impl AptDirs {
    fn cmd(&self, tool: &str) -> Command {
        let mut c = Command::new(tool);
        c.arg("-o")
            .arg(format!("Dir::Etc::sourcelist={}", self.sources.display()))
            .args(["-o", "Dir::Etc::sourceparts=-"])
            .arg("-o")
            .arg(format!("Dir::State::Lists={}", self.lists.display()))
            .args(["-o", "APT::Get::List-Cleanup=0"])
            .args(["-o", "APT::Sandbox::User=root"]);
        c
    }

    /// The version apt would take.
    fn candidate(&self, pkg: &str) -> Result<String, LabError> {
        let out = output(self.cmd("apt-cache").args(["policy", pkg]))?;
        out.lines()
            .find_map(|l| l.trim().strip_prefix("Candidate: "))
            .filter(|v| *v != "(none)")
            .map(str::to_string)
            .ok_or(LabError::Missing {
                what: "user-mode-linux in Debian unstable's package list",
                fix: "check that apt reaches the Debian archive, or set DEBLOAT_UML to a linux.uml",
            })
    }

    /// Whether the archive serves `pkg` at `version`.
    fn serves(&self, pkg: &str, version: &str) -> Result<bool, LabError> {
        let out = output(self.cmd("apt-cache").args(["madison", pkg]))?;
        Ok(out
            .lines()
            .any(|l| l.split('|').nth(1).map(str::trim) == Some(version)))
    }
}

fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(tool))
            .find(|f| f.exists())
    })
}

fn run(c: &mut Command) -> Result<(), LabError> {
    output(c).map(|_| ())
}

fn output(c: &mut Command) -> Result<String, LabError> {
    let what = format!("{c:?}");
    let o = c.output()?;
    if !o.status.success() {
        return Err(LabError::Step {
            what,
            stderr: String::from_utf8_lossy(&o.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mirror_comes_from_deb822_and_one_line_sources() {
        let deb822 = "Types: deb\n# http://old/debian\nURIs: http://mirror.example/debian\nSuites: bookworm\n\nTypes: deb\nURIs: http://mirror.example/debian-security\n";
        assert_eq!(
            debian_mirror(deb822).as_deref(),
            Some("http://mirror.example/debian")
        );
        let line = "deb https://third.example/apt stable main\ndeb [arch=amd64] https://m.example/debian/ bookworm main\n";
        assert_eq!(
            debian_mirror(line).as_deref(),
            Some("https://m.example/debian")
        );
        assert_eq!(debian_mirror("deb https://third.example/apt x main"), None);
    }

    #[test]
    fn the_pinned_kernel_is_preferred_and_otherwise_the_newest() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        for (v, rel) in [
            ("6.12um1", "6.12.1"),
            ("7.3um1", "7.3.1"),
            (PINNED, "7.2.7"),
        ] {
            std::fs::create_dir_all(dir.path().join(v).join("usr/lib/uml/modules").join(rel))
                .expect("mkdir");
            std::fs::write(dir.path().join(v).join("ready"), v).expect("write");
        }
        let k = prepared(dir.path()).expect("a kernel");
        assert_eq!((k.package.as_str(), k.release.as_str()), (PINNED, "7.2.7"));
        std::fs::remove_file(dir.path().join(PINNED).join("ready")).expect("rm");
        let k = prepared(dir.path()).expect("a kernel");
        assert_eq!(
            (k.package.as_str(), k.release.as_str()),
            ("7.3um1", "7.3.1")
        );
    }
}
