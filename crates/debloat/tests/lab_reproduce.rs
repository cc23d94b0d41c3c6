//! The reproduction suite's third column: `debloat reproduce PI-55 --kernel` runs PI-55's
//! configurations on the real Linux kernel's qdiscs (the lab's 7.2) (HTB + pfifo or fq_codel) with real
//! TCP in the kernel lab, beside the simulator and debloat's gateway, and judges the kernel's
//! figures against the same bands. Needs `user-mode-linux` and `kmod`; SKIP without them, a
//! failure under CI.

mod common;
use common::{debloat, text};

#[test]
#[ignore = "long tier: scripts/long-tests.sh; dated results in docs/testing.md"]
fn pi_55_on_the_kernels_qdiscs_lands_in_the_same_bands() {
    if let Err(e) = debloat_lab::Lab::find() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have the kernel lab: {e}"
        );
        println!("SKIP pi_55_on_the_kernels_qdiscs_lands_in_the_same_bands: {e}");
        return;
    }
    let o = debloat(&["reproduce", "PI-55", "--kernel", "--json"]);
    let t = text(&o);
    println!("{t}");
    assert!(
        o.status.success(),
        "a kernel or simulator figure is outside its band:\n{t}"
    );
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON rows");
    let rows = rows.as_array().expect("rows");
    let get = |check: &str| {
        rows.iter()
            .find(|r| r["check"] == check)
            .unwrap_or_else(|| panic!("no row {check}: {t}"))
    };
    // Every check of the row has all three columns, and the kernel's are real measurements.
    assert_eq!(rows.len(), 6, "{t}");
    let fifo = get("pfifo 1000: ping median")["kernel"]
        .as_f64()
        .unwrap_or(0.0);
    assert!(
        fifo >= 1500.0,
        "the kernel's 1000-packet FIFO: ping median {fifo} ms"
    );
    let drops = get("fq_codel, no ECN: dropped of offered")["kernel"]
        .as_f64()
        .unwrap_or(0.0);
    assert!(
        (5.0..=12.0).contains(&drops),
        "the kernel's fq_codel dropped {drops} %"
    );
}
