//! The live view (issue 46), rendered by headless Chromium against a loaded testbed (root; SKIP
//! elsewhere, failure under CI): `testbed up --http PORT` serves the page from the gateway's
//! namespace; two CUBIC uploads fill cake's 9 Mbit/s; after six seconds Chromium loads the page
//! there and the DOM it built shows the upload's rate near the shaper's, the Best Effort tin
//! carrying it with an average delay near cake's 5 ms target, drawn lines, and no script
//! error; a screenshot is taken and must be a real PNG.

mod common;
use common::bed::*;
use common::stalls::judge_timing;
use common::text;
use debloat_gateway::tools::host_stalls::Watch;
use std::time::Duration;

/// The number in the element with this id (`<span id="egress-rate">8.97</span>`).
fn number_in(dom: &str, id: &str) -> f64 {
    dom.split(&format!("id=\"{id}\">"))
        .nth(1)
        .and_then(|s| s.split('<').next())
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no number in #{id}"))
}

/// The cells of the tin row `name` in a direction's table.
fn tin_cells(dom: &str, name: &str) -> Vec<String> {
    let row = dom
        .split(&format!("data-tin=\"{name}\">"))
        .nth(1)
        .and_then(|s| s.split("</tr>").next())
        .unwrap_or_else(|| panic!("no row for tin {name}"));
    row.split("<td>")
        .skip(1)
        .map(|c| c.split("</td>").next().unwrap_or("").to_string())
        .collect()
}

#[test]
fn the_live_page_shows_rates_and_tin_delays_of_a_loaded_gateway() {
    let Some(_one) = guard() else { return };
    let bed = up_extra(
        "lv",
        "10Mbit",
        "20ms",
        "cake bandwidth 9Mbit diffserv4",
        "fq_codel",
        &["--http", "9471"],
    );
    let watch = Watch::start();
    let sink = spawn_sink(&bed, 5201, 14, &[]);
    std::thread::sleep(Duration::from_millis(300));
    let mut send = tcp_send(
        &ns(&bed, "client"),
        "198.18.2.2:5201",
        12,
        "cubic",
        &["--streams", "2"],
    );
    let sender = std::thread::spawn(move || send.output().expect("sender"));
    std::thread::sleep(Duration::from_secs(6));
    let dir = tempfile::tempdir().expect("tmp");
    let gw = ns(&bed, "gw");
    let url = "http://127.0.0.1:9471/";
    let Some(dom) = common::chromium(
        Some(&gw),
        &["--virtual-time-budget=3000", "--dump-dom", url],
        &dir.path().join("p1"),
    ) else {
        let _ = sender.join();
        let _ = sink.wait_with_output();
        return;
    };
    let png = dir.path().join("live.png");
    let shot = common::chromium(
        Some(&gw),
        &[
            "--virtual-time-budget=3000",
            "--window-size=1200,1000",
            &format!("--screenshot={}", png.display()),
            url,
        ],
        &dir.path().join("p2"),
    )
    .expect("chromium ran once");
    let _ = sender.join();
    let _ = sink.wait_with_output();
    let host = watch.stop();
    println!("meanwhile {host}");
    let err = String::from_utf8_lossy(&dom.stderr);
    assert!(
        !err.contains("Uncaught") && !err.contains(":CONSOLE"),
        "script errors: {err}"
    );
    let dom = String::from_utf8_lossy(&dom.stdout).into_owned();
    let rate = number_in(&dom, "egress-rate");
    let shaper = number_in(&dom, "egress-shaper");
    println!("live view: egress {rate} Mbit/s of {shaper} shaped");
    assert_eq!(shaper, 9.0, "cake's bandwidth");
    // Rates and delays are the host's to decide when it steals the CPU (common::stalls); what
    // the page shows and that it updated are judged whatever it did.
    judge_timing(
        (0.8 * shaper..=1.05 * shaper).contains(&rate),
        &host,
        &format!("egress {rate} Mbit/s"),
    );
    let be = tin_cells(&dom, "Best Effort");
    println!("Best Effort tin: {be:?}");
    let (tin_rate, avg, peak, target): (f64, f64, f64, f64) = (
        be[1].parse().expect("rate"),
        be[2].parse().expect("avg"),
        be[3].parse().expect("peak"),
        be[4].parse().expect("target"),
    );
    judge_timing(
        tin_rate > 0.8 * shaper,
        &host,
        &format!("the Best Effort tin carries the uploads: {be:?}"),
    );
    assert_eq!(target, 5.0, "cake's target: {be:?}");
    assert!(avg > 0.0 && peak >= avg, "tin delays: {be:?}");
    judge_timing(avg < 3.0 * target, &host, &format!("tin delays: {be:?}"));
    assert_eq!(tin_cells(&dom, "Bulk")[1], "0.00", "nothing in Bulk");
    assert!(dom.contains("id=\"status\">updated "), "the page updated");
    let drawn = dom
        .split("<polyline")
        .skip(1)
        .filter(|p| {
            p.split("points=\"")
                .nth(1)
                .is_some_and(|s| s.split('"').next().unwrap_or("").split(' ').count() >= 3)
        })
        .count();
    assert!(
        drawn >= 3,
        "rate, shaper and delay lines with points: {drawn}"
    );
    assert!(shot.status.success(), "{}", text(&shot));
    let bytes = std::fs::read(&png).expect("screenshot");
    assert!(
        bytes.starts_with(b"\x89PNG") && bytes.len() > 20_000,
        "{} bytes",
        bytes.len()
    );
}
