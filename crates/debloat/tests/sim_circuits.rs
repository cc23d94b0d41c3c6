//! `debloat sim --network … --devices … --load …`: LibreQoS's files in the simulator, as an
//! operator runs them (the files in contrib/libreqos), and what a bad profile or file says.

mod common;
use common::{debloat, text};

const LQ: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../contrib/libreqos");

fn run(profile: &str, extra: &[&str]) -> std::process::Output {
    let (n, d) = (
        format!("{LQ}/network.json"),
        format!("{LQ}/ShapedDevices.csv"),
    );
    let mut all = vec!["sim", "--network", &n, "--devices", &d, "--load", profile];
    all.extend_from_slice(extra);
    debloat(&all)
}

#[test]
fn the_evening_profile_runs_and_writes_per_circuit_files() {
    let dir = tempfile::tempdir().expect("tmp");
    let out_dir = dir.path().display().to_string();
    let o = run(&format!("{LQ}/evening.toml"), &["--output", &out_dir]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.starts_with("40 circuits, 27 active, 60 s simulated"),
        "{out}"
    );
    // The APs' classes carry their ceilings (200 and 100 Mbit/s), the tower the sum.
    let node = |name: &str| -> Vec<f64> {
        out.lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect()
    };
    let (north, south) = (node("AP_North"), node("AP_South"));
    assert!((195.0..=200.5).contains(&north[3]), "AP_North {north:?}");
    assert!((97.0..=100.5).contains(&south[3]), "AP_South {south:?}");
    let csv = std::fs::read_to_string(dir.path().join("circuits.csv")).expect("circuits.csv");
    let rows: Vec<&str> = csv.lines().collect();
    assert_eq!(rows.len(), 41, "a header and 40 circuits");
    assert!(rows[0].starts_with("id,name,parent,address,active,down_mbps,up_mbps,down_class_mbps"));
    // Circuit 0030 uploads (its own group): its upload goodput is in the file.
    let c30: Vec<&str> = rows
        .iter()
        .find(|r| r.starts_with("0030,"))
        .expect("0030")
        .split(',')
        .collect();
    let up: f64 = c30[6].parse().expect("up_mbps");
    assert!(
        up > 10.0 && up <= 25.0 * 0.96,
        "0030 uploads {up} Mbit/s (max 25)"
    );
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("summary.json")).expect("json"),
    )
    .expect("parses");
    assert_eq!(json["circuits"].as_array().map(Vec::len), Some(40));
    assert_eq!(json["nodes"].as_array().map(Vec::len), Some(3));
}

#[test]
fn a_bad_profile_names_its_key() {
    let dir = tempfile::tempdir().expect("tmp");
    let p = dir.path().join("bad.toml");
    std::fs::write(
        &p,
        "length = 10\nrtt = \"20ms\"\n[[group]]\nnode = \"AP_East\"\n",
    )
    .expect("write");
    let o = run(&p.display().to_string(), &[]);
    assert!(!o.status.success());
    let t = text(&o);
    assert!(
        t.contains(
            "group 1: node \"AP_East\": not in network.json; nodes: Tower_1, AP_North, AP_South"
        ),
        "{t}"
    );
    let o = debloat(&["sim", "--network", "x.json"]);
    assert!(
        !o.status.success() && text(&o).contains("--devices"),
        "{}",
        text(&o)
    );
}
