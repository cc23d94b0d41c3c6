//! Runs over a capacity trace: the time-series plot stacks latency below capacity, shaper rate
//! and throughput on one time axis, and shades the seconds the link was starved (capacity under
//! 10 % of its median), where no shaper can hold the delay.

use debloat_report::flent::Dataset;
use debloat_report::plot::{render_all, starved_spans};
use serde_json::json;

fn run(capacity: bool) -> Dataset {
    let x: Vec<f64> = (0..10).map(f64::from).collect();
    let mut results = json!({
        "TCP download sum": [5.0, 5.0, 5.0, 0.4, 0.2, 5.0, 5.0, 0.1, 5.0, 5.0],
        "Ping (ms) ICMP": [20.0, 22.0, 25.0, 300.0, 900.0, 60.0, 25.0, 400.0, 30.0, 22.0],
    });
    if capacity {
        results["Capacity down"] = json!([10.0, 10.0, 9.0, 0.5, 0.2, 10.0, 11.0, 0.1, 10.0, 10.0]);
    }
    let v = json!({
        "version": 4,
        "metadata": {"NAME": "tcp_ndown", "TITLE": "t", "LENGTH": 10, "STEP_SIZE": 1.0, "TOTAL_LENGTH": 10},
        "x_values": x,
        "results": results,
        "raw_values": {},
    });
    Dataset::from_json(&v, "run").expect("dataset")
}

#[test]
fn starved_seconds_are_found_and_the_plot_stacks_latency_below() {
    let d = run(true);
    assert_eq!(starved_spans(&d), vec![(3.0, 5.0), (7.0, 8.0)]);
    assert!(starved_spans(&run(false)).is_empty());
    let dir = tempfile::tempdir().expect("tmp");
    let plots = render_all(&[d], dir.path()).expect("plots");
    let ts = plots
        .iter()
        .find(|p| p.name == "timeseries")
        .expect("timeseries");
    assert!(
        ts.caption.contains("latency (log scale) below"),
        "{}",
        ts.caption
    );
    assert!(ts.caption.contains("shaded"), "{}", ts.caption);
    // Two shaded spans on each of the two panels.
    assert_eq!(
        ts.svg.matches("opacity=\"0.18\" fill=\"#C87878\"").count(),
        4,
        "shading"
    );
    let plain = render_all(&[run(false)], dir.path()).expect("plots");
    let ts = plain
        .iter()
        .find(|p| p.name == "timeseries")
        .expect("timeseries");
    assert!(ts.caption.contains("(left)"), "{}", ts.caption);
    assert_eq!(
        ts.svg.matches("opacity=\"0.18\" fill=\"#C87878\"").count(),
        0
    );
}
