//! LibreQoS's files in the gateway: `scripts/libreqos-gen.py`'s 10,000 circuits (50 sites × 10
//! access points) build in a few dozen MiB with every queue idle and under 1 GiB with 2,000
//! circuits active both ways (their CAKE leaves built, one tin each); bad files are refused
//! whole, every mistake named by file and line, and nothing starts.

mod common;
use common::{debloat, text};
use std::process::Command;

/// The generator's files for this many circuits, in a temporary directory.
fn generated(circuits: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    let script = format!(
        "{}/../../scripts/libreqos-gen.py",
        env!("CARGO_MANIFEST_DIR")
    );
    let o = Command::new("python3")
        .args([
            script.as_str(),
            &dir.path().to_string_lossy(),
            "--circuits",
            &circuits.to_string(),
        ])
        .output()
        .expect("python3 runs (the generator is a Python script)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    dir
}

/// A number after `before` in `t` (`grew 29.9 MiB` → 29.9).
fn after(t: &str, before: &str) -> f64 {
    let at = t
        .find(before)
        .unwrap_or_else(|| panic!("no `{before}` in:\n{t}"))
        + before.len();
    t[at..]
        .split_whitespace()
        .next()
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("no number after `{before}` in:\n{t}"))
}

#[test]
fn ten_thousand_circuits_fit_in_the_memory_asked_for() {
    let dir = generated(10_000);
    let p = |f: &str| dir.path().join(f).to_string_lossy().into_owned();
    let o = debloat(&[
        "gateway",
        "--network",
        &p("network.json"),
        "--devices",
        &p("ShapedDevices.csv"),
        "--check",
    ]);
    let t = text(&o);
    println!("{t}");
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains("550 nodes, 10000 circuits, 10000 devices: 10552 classes each way; 0 warnings"),
        "{t}"
    );
    let idle = after(&t, "resident memory grew");
    assert!(idle <= 256.0, "10,000 idle circuits: {idle} MiB");
    let all = after(&t, "MiB more;");
    assert!(
        all <= 1024.0,
        "2,000 circuits active both ways: {all} MiB in all"
    );
}

#[test]
fn bad_files_are_refused_whole_with_file_and_line() {
    let dir = generated(30);
    let n = dir
        .path()
        .join("network.json")
        .to_string_lossy()
        .into_owned();
    let good = dir
        .path()
        .join("ShapedDevices.csv")
        .to_string_lossy()
        .into_owned();
    let o = debloat(&["gateway", "--network", &n, "--devices", &good, "--dry-run"]);
    let t = text(&o);
    assert!(
        o.status.success()
            && t.contains(
                "30 circuits under 550 nodes: egress and ingress are HTB trees of 582 classes"
            ),
        "{t}"
    );
    let devices = dir.path().join("ShapedDevices.csv");
    let mut rows = std::fs::read_to_string(&devices).expect("read");
    rows.push_str("31,x,31,d,AP_99,,100.64.0.1,,1,1,25,5,\n");
    std::fs::write(&devices, rows).expect("write");
    let (n, d) = (
        dir.path().join("network.json"),
        devices.to_string_lossy().into_owned(),
    );
    let o = debloat(&[
        "gateway",
        "--network",
        &n.to_string_lossy(),
        "--devices",
        &d,
        "--check",
    ]);
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(
        t.contains(&format!(
            "{d}:32: error: Parent Node \"AP_99\" is not a node of network.json"
        )),
        "{t}"
    );
    assert!(
        t.contains(&format!("{d}:32: error: 100.64.0.1/32 is also on line 3")),
        "{t}"
    );
    assert!(t.contains("refused: 2 errors (nothing was changed"), "{t}");
    // The same files given to a gateway: refused before any port is touched.
    let o = debloat(&[
        "gateway",
        "--lan",
        "nosuch0",
        "--wan",
        "nosuch1",
        "--network",
        &n.to_string_lossy(),
        "--devices",
        &d,
    ]);
    assert!(
        !o.status.success() && text(&o).contains("refused"),
        "{}",
        text(&o)
    );
}
