//! Hitless reload on real traffic (root: the testbed; SKIP elsewhere, failure under CI): eight
//! CUBIC uploads through fq_codel, then `debloat gateway reload` after the configuration file
//! says `cake bandwidth 19Mbit diffserv4`. The frames fq_codel held move into cake; none is
//! dropped by the change, every frame stays accounted for, and forwarding stops for at most
//! 5 ms: the file is read on a thread of its own, the loop does nothing else while it applies
//! it, and it reports how long each took (monotonic clock). The longest gap the server saw
//! (kernel receive stamps) across the reload is printed beside one without a reload: on this
//! 2-core machine the receiving side's softirq scheduling alone leaves gaps of 15–23 ms in
//! some 3-second windows (measured with no reload at all), so that end-to-end figure cannot
//! tell the gateway's stall apart and is not asserted. A bad file is then refused and the
//! setup kept.

mod common;
use common::bed::*;
use common::stalls::judge_timing;
use common::text;
use debloat_gateway::testbed;
use debloat_gateway::tools::host_stalls::Watch;
use std::process::{Command, Stdio};
use std::time::Duration;

const EXE: &str = env!("CARGO_BIN_EXE_debloat");

fn reload(bed: &Bed) -> std::process::Output {
    Command::new(EXE)
        .args(["gateway", "reload", "--control"])
        .arg(testbed::control_socket(&bed.prefix))
        .output()
        .expect("reload")
}

#[test]
fn reload_from_fq_codel_to_cake_under_load_moves_every_frame() {
    let Some(_one) = guard() else { return };
    let dir = tempfile::tempdir().expect("tmp");
    let toml = dir.path().join("gateway.toml");
    std::fs::write(&toml, "egress = \"fq_codel\"\ningress = \"fq_codel\"\n").expect("toml");
    let t = toml.to_string_lossy().into_owned();
    let bed = up_extra(
        "w",
        "20Mbit",
        "20ms",
        "fq_codel",
        "fq_codel",
        &["--config", &t],
    );
    let watch = Watch::start();
    let sink = spawn_sink(&bed, 5201, 17, &[]);
    std::thread::sleep(Duration::from_millis(300));
    let mut send = tcp_send(
        &ns(&bed, "client"),
        "198.18.2.2:5201",
        13,
        "cubic",
        &["--streams", "8"],
    );
    let sender = std::thread::spawn(move || send.output().expect("sender"));
    std::thread::sleep(Duration::from_secs(2));
    let capture = || {
        testbed::in_ns(
            &ns(&bed, "server"),
            &[
                EXE,
                "testbed",
                "capture",
                "--iface",
                "eth0",
                "--seconds",
                "3",
                "--gaps",
            ],
        )
        .stdout(Stdio::piped())
        .spawn()
        .expect("capture")
    };
    let quiet = capture().wait_with_output().expect("capture ends");
    let capture = capture();
    std::thread::sleep(Duration::from_millis(1500));
    let before = gateway_stats(&bed);
    std::fs::write(
        &toml,
        "egress = \"cake bandwidth 19Mbit diffserv4\"\ningress = \"fq_codel\"\n",
    )
    .expect("toml");
    let o = reload(&bed);
    let reply = text(&o);
    println!("reload: {}", reply.trim());
    assert!(o.status.success(), "{reply}");
    let moved: u64 = reply
        .split(" queued frames moved")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count of moved frames: {reply}"));
    assert!(
        reply.contains(", 0 refused by the new discipline"),
        "{reply}"
    );
    assert!(
        moved >= 1,
        "fq_codel held nothing under eight uploads? {reply}"
    );
    let gaps = capture.wait_with_output().expect("capture ends");
    println!(
        "server side, 3 s without a reload: {}; 3 s across it: {}",
        String::from_utf8_lossy(&quiet.stdout).trim(),
        String::from_utf8_lossy(&gaps.stdout).trim()
    );
    let ms = |what: &str| -> f64 {
        reply
            .split(&format!("{what} in "))
            .nth(1)
            .and_then(|s| s.split(' ').next()?.parse().ok())
            .unwrap_or_else(|| panic!("no `{what}` time: {reply}"))
    };
    // The file is read on a thread of its own; the loop stops only to apply it.
    assert!(ms("read") >= 0.0);
    let stall = ms("applied");
    assert!(
        stall <= 5.0,
        "forwarding stopped for {stall:.2} ms while reloading"
    );
    // A file that does not parse is refused; cake keeps running.
    std::fs::write(&toml, "egress = \"cake bandwith 1Mbit\"\n").expect("toml");
    let o = reload(&bed);
    assert!(
        !o.status.success() && text(&o).contains("bandwith"),
        "{}",
        text(&o)
    );
    let sent = sender.join().expect("sender");
    assert!(sent.status.success(), "{}", text(&sent));
    let mbps = sink_mbps(sink);
    let host = watch.stop();
    let after = gateway_stats(&bed);
    let e = &after["egress"];
    println!(
        "egress before: {} dropped of {} received; after: {} dropped of {} received; goodput {mbps:.2} Mbit/s",
        before["egress"]["frames"]["qdisc_dropped"], before["egress"]["frames"]["received"],
        e["frames"]["qdisc_dropped"], e["frames"]["received"]
    );
    assert!(
        e["qdisc"]
            .as_str()
            .unwrap_or("")
            .starts_with("cake bandwidth 19Mbit diffserv4"),
        "{e}"
    );
    assert!(accounted(&before["egress"]) && accounted(e), "{e}");
    assert!(accounted(&after["ingress"]), "{}", after["ingress"]);
    // A rate is the host's to decide when it steals the CPU (common::stalls); the accounting
    // above is judged whatever it did.
    println!("meanwhile {host}");
    judge_timing(mbps > 17.0, &host, &format!("goodput {mbps:.2} Mbit/s"));
    // A runtime `gateway set` that the file does not give is not undone without a word: the
    // reload says it replaced it; one the file gives too is said to be kept (issue 46).
    std::fs::write(
        &toml,
        "egress = \"cake bandwidth 19Mbit diffserv4\"\ningress = \"fq_codel\"\n",
    )
    .expect("toml");
    let set = |rate: &str| {
        let o = Command::new(EXE)
            .args(["gateway", "set", "--control"])
            .arg(testbed::control_socket(&bed.prefix))
            .args(["--egress", &format!("bandwidth {rate}")])
            .output()
            .expect("set");
        assert!(o.status.success(), "{}", text(&o));
    };
    set("15Mbit");
    let r = text(&reload(&bed));
    assert!(
        r.contains("runtime changes replaced by the file (write them into it to keep them): `egress bandwidth 15Mbit`"),
        "{r}"
    );
    set("19Mbit");
    let r = text(&reload(&bed));
    assert!(
        r.contains(
            "nothing changed; runtime changes the file also gives, kept: `egress bandwidth 19Mbit`"
        ),
        "{r}"
    );
}
