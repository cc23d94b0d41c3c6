//! `debloat soak --minutes N`: the testbed under churn for a long time, watched. Long TCP
//! flows both ways, short connections starting 20 times a second, UDP from new source ports
//! every second (`testbed churn`), and the shaper's rate changed every 20 s, while a ping runs
//! throughout; every 10 s the gateway's resident memory, open files, threads and forwarding
//! rate and the pings' delays go into `soak.csv` (plot: `soak.png`, `soak.svg`). At the end,
//! `soak.json` says whether the gateway held: memory flat after the first sixth, no ping over
//! 1 s and some answered in every interval, every frame accounted for, nothing left open.

use crate::soak_check::{self, Sample, Verdict};
use anyhow::{bail, Context, Result};
use debloat_core::units::{parse_rate, parse_time};
use debloat_gateway::testbed;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Arguments of `debloat soak`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples (root):\n  debloat soak --minutes 60 --output soak-60\n  debloat soak --minutes 3 --egress fq_codel --ingress fq_codel --rate-changes \"\"\n\nExit status 0 when every check passed, 1 when one failed (soak.json says which), 2 on errors."
)]
pub struct Args {
    /// How long, minutes.
    #[arg(long, default_value_t = 60.0)]
    minutes: f64,
    /// Folder for soak.csv, soak.json, soak.png and soak.svg.
    #[arg(long, default_value = "soak")]
    output: PathBuf,
    /// The emulated link's rate (both ways).
    #[arg(long, default_value = "20Mbit")]
    rate: String,
    /// The emulated link's base round trip.
    #[arg(long, default_value = "20ms")]
    rtt: String,
    /// Discipline client → server.
    #[arg(long, default_value = "cake bandwidth 19Mbit")]
    egress: String,
    /// Discipline server → client.
    #[arg(long, default_value = "cake bandwidth 19Mbit")]
    ingress: String,
    /// Shaper rates to cycle through, both ways (`gateway set`); "" for none.
    #[arg(long, default_value = "19Mbit,12Mbit")]
    rate_changes: String,
    /// How often the shaper's rate changes.
    #[arg(long, default_value = "20s")]
    rate_change_every: String,
    /// How often to sample.
    #[arg(long, default_value = "10s")]
    interval: String,
    /// Short TCP connections started per second.
    #[arg(long, default_value_t = 20.0)]
    flows_per_second: f64,
    /// UDP from changing source ports, all together.
    #[arg(long, default_value = "2Mbit")]
    udp_rate: String,
    /// New UDP source ports every second.
    #[arg(long, default_value_t = 10)]
    udp_flows: u32,
    /// Memory may grow at most this many MiB after the first sixth of the run.
    #[arg(long, default_value_t = 1.0)]
    max_rss_growth_mib: f64,
    /// Namespace prefix.
    #[arg(long, default_value = "soak")]
    prefix: String,
}

/// Removes the testbed and stops the load when dropped (also on an error).
struct Running {
    prefix: String,
    children: Vec<(&'static str, Child)>,
}

impl Drop for Running {
    fn drop(&mut self) {
        for (_, c) in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = testbed::down(&self.prefix);
    }
}

/// What the ping in the client namespace has answered since the last sample.
#[derive(Default)]
struct Pings {
    window: Vec<f64>,
    all: Vec<f64>,
    highest_seq: u64,
}

/// Run the command.
pub fn run(a: &Args) -> Result<()> {
    let plan = Plan::from_args(a)?;
    testbed::available().map_err(|w| anyhow::anyhow!("soak needs the testbed: {w}"))?;
    std::fs::create_dir_all(&a.output)
        .with_context(|| format!("--output {}", a.output.display()))?;
    // Ctrl-C or SIGTERM ends the run early: the load stops and the testbed is removed.
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
    }
    let mut run = start(a, &plan)?;
    let pings = watch_pings(&mut run)?;
    let pid = testbed::gateway_pid(&a.prefix).context("the gateway did not start")?;
    let samples = sample_until_end(a, &plan, pid, &pings, &stop)?;
    if stop.load(Ordering::Relaxed) {
        drop(run);
        write_csv(&a.output, &samples)?;
        bail!(
            "interrupted after {:.1} min: testbed removed; the samples so far are in {}",
            samples.last().map_or(0.0, |s| s.t_s / 60.0),
            a.output.join("soak.csv").display()
        );
    }
    let ends = finish(&mut run, &a.prefix)?;
    let all = std::mem::take(&mut pings.lock().map_err(|_| anyhow::anyhow!("ping"))?.all);
    let v = soak_check::judge(&samples, &all, &ends, &plan.limits());
    write_results(&a.output, &samples, &v)?;
    print!("{}", v.text());
    println!("results: {}", a.output.display());
    if !v.pass {
        std::process::exit(1);
    }
    Ok(())
}

/// The parsed arguments.
struct Plan {
    total: Duration,
    interval: Duration,
    change_every: Duration,
    rates: Vec<String>,
    max_growth: u64,
}

impl Plan {
    fn from_args(a: &Args) -> Result<Plan> {
        if !(a.minutes > 0.0 && a.minutes <= 7.0 * 24.0 * 60.0) {
            bail!("--minutes {}: give 0.1 to 10080 (a week)", a.minutes);
        }
        let time = |s: &str, what: &str| -> Result<Duration> {
            let ns = parse_time(s).with_context(|| format!("{what} {s}"))?;
            if ns < 1_000_000_000 {
                bail!("{what} {s}: at least 1s");
            }
            Ok(Duration::from_nanos(ns))
        };
        let rates: Vec<String> = a
            .rate_changes
            .split(',')
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .map(|r| {
                parse_rate(r)
                    .map(|_| r.to_string())
                    .with_context(|| format!("--rate-changes \"{}\": `{r}`", a.rate_changes))
            })
            .collect::<Result<_>>()?;
        Ok(Plan {
            total: Duration::from_secs_f64(a.minutes * 60.0),
            interval: time(&a.interval, "--interval")?,
            change_every: time(&a.rate_change_every, "--rate-change-every")?,
            rates,
            max_growth: (a.max_rss_growth_mib * 1048576.0) as u64,
        })
    }

    fn limits(&self) -> soak_check::Limits {
        soak_check::Limits {
            settle_s: self.total.as_secs_f64() / 6.0,
            max_rss_growth: self.max_growth,
            max_ping_ms: 1000.0,
        }
    }
}

fn exe() -> Result<String> {
    Ok(std::env::current_exe()?.to_string_lossy().into_owned())
}

/// The testbed, the servers and the load.
fn start(a: &Args, plan: &Plan) -> Result<Running> {
    let me = exe()?;
    let o = Command::new(&me)
        .args(["testbed", "up", "--rate", &a.rate, "--rtt", &a.rtt])
        .args(["--egress", &a.egress, "--ingress", &a.ingress])
        .args(["--prefix", &a.prefix])
        .output()?;
    if !o.status.success() {
        bail!("testbed up: {}", String::from_utf8_lossy(&o.stderr).trim());
    }
    let mut run = Running {
        prefix: a.prefix.clone(),
        children: Vec::new(),
    };
    let [c, _, s] = testbed::namespaces(&a.prefix);
    let secs = format!("{:.1}", plan.total.as_secs_f64());
    let serve_secs = format!("{:.1}", plan.total.as_secs_f64() + 8.0);
    let tool = |ns: &str, args: &[&str]| -> Result<Child> {
        let mut all = vec![me.as_str(), "testbed"];
        all.extend_from_slice(args);
        Ok(testbed::in_ns(ns, &all)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?)
    };
    let sink = ["tcp-sink", "--seconds", &serve_secs, "--listen"];
    run.children.push((
        "upload sink",
        tool(&s, &[&sink[..], &["0.0.0.0:5201"]].concat())?,
    ));
    run.children.push((
        "download sink",
        tool(&c, &[&sink[..], &["0.0.0.0:5202"]].concat())?,
    ));
    run.children.push((
        "churn server",
        tool(&s, &["churn-serve", "--seconds", &serve_secs])?,
    ));
    std::thread::sleep(Duration::from_millis(300));
    let send = ["tcp-send", "--streams", "2", "--seconds", &secs, "--to"];
    let (to_server, to_client) = (
        format!("{}:5201", testbed::SERVER_V4),
        format!("{}:5202", testbed::CLIENT_V4),
    );
    let up = [&send[..], &[to_server.as_str()]].concat();
    let down = [&send[..], &[to_client.as_str()]].concat();
    run.children.push(("uploads", tool(&c, &up)?));
    run.children.push(("downloads", tool(&s, &down)?));
    let fps = a.flows_per_second.to_string();
    let udp_flows = a.udp_flows.to_string();
    let churn = ["churn", "--seconds", &secs, "--flows-per-second", &fps];
    let more = ["--udp-rate", &a.udp_rate, "--udp-flows", &udp_flows];
    run.children
        .push(("churn", tool(&c, &[&churn[..], &more[..]].concat())?));
    Ok(run)
}

/// A ping every 0.2 s from the client, its replies collected by a thread.
fn watch_pings(run: &mut Running) -> Result<Arc<Mutex<Pings>>> {
    let [c, _, _] = testbed::namespaces(&run.prefix);
    let mut child = testbed::in_ns(&c, &["ping", "-n", "-i", "0.2", testbed::SERVER_V4])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("ping")?;
    let out = child.stdout.take().context("ping's output")?;
    run.children.push(("ping", child));
    let pings = Arc::new(Mutex::new(Pings::default()));
    let p = Arc::clone(&pings);
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if let (Some(seq), Some(ms)) = (field(&line, "icmp_seq="), field(&line, "time=")) {
                if let Ok(mut p) = p.lock() {
                    p.highest_seq = p.highest_seq.max(seq as u64);
                    p.window.push(ms);
                    p.all.push(ms);
                }
            }
        }
    });
    Ok(pings)
}

fn field(line: &str, key: &str) -> Option<f64> {
    line.split(key)
        .nth(1)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Sample every interval and change the shaper's rate every `change_every` until the end.
fn sample_until_end(
    a: &Args,
    plan: &Plan,
    pid: u32,
    pings: &Mutex<Pings>,
    stop: &AtomicBool,
) -> Result<Vec<Sample>> {
    let control = testbed::control_socket(&a.prefix);
    let t0 = Instant::now();
    let (mut next_sample, mut next_change) = (t0 + plan.interval, t0 + plan.change_every);
    let mut prev = (t0, sent_bytes(&stats(&control)?));
    let (mut samples, mut turn) = (Vec::new(), 0usize);
    while t0.elapsed() < plan.total && !stop.load(Ordering::Relaxed) {
        let wake = next_sample.min(next_change).min(t0 + plan.total);
        // In steps, so that a signal is seen within a tenth of a second.
        let nap = wake.saturating_duration_since(Instant::now());
        std::thread::sleep(nap.min(Duration::from_millis(100)));
        if Instant::now() < wake {
            continue;
        }
        if Instant::now() >= next_change && !plan.rates.is_empty() {
            turn += 1;
            let r = &plan.rates[turn % plan.rates.len()];
            for dir in ["egress", "ingress"] {
                let reply =
                    debloat_gateway::control::ask(&control, &format!("set {dir} bandwidth {r}"))?;
                if reply.starts_with("error") {
                    bail!("set {dir} bandwidth {r}: {reply}");
                }
            }
            next_change += plan.change_every;
        }
        if Instant::now() >= next_sample {
            let now = Instant::now();
            let bytes = sent_bytes(&stats(&control)?);
            let secs = (now - prev.0).as_secs_f64();
            let window =
                std::mem::take(&mut pings.lock().map_err(|_| anyhow::anyhow!("ping"))?.window);
            let s = Sample::read(
                pid,
                (now - t0).as_secs_f64(),
                &window,
                [0, 1].map(|i| (bytes[i].saturating_sub(prev.1[i])) as f64 * 8.0 / secs / 1e6),
            );
            eprintln!("{}", s.progress(plan.total.as_secs_f64()));
            samples.push(s);
            prev = (now, bytes);
            next_sample += plan.interval;
        }
    }
    Ok(samples)
}

/// The gateway's `stats --json`.
fn stats(control: &Path) -> Result<serde_json::Value> {
    let j = debloat_gateway::control::ask(control, "json")?;
    serde_json::from_str(&j).with_context(|| format!("the gateway's stats: {j}"))
}

/// Bytes each direction's discipline has sent (egress, ingress).
fn sent_bytes(j: &serde_json::Value) -> [u64; 2] {
    ["egress", "ingress"].map(|d| j[d]["stats"]["bytes"].as_u64().unwrap_or(0))
}

/// Wait for the load to end and its queues to drain; the tools' reports and the final stats.
fn finish(run: &mut Running, prefix: &str) -> Result<soak_check::Ends> {
    let mut reports = serde_json::Map::new();
    let ping = run.children.iter().position(|(n, _)| *n == "ping");
    if let Some(i) = ping {
        let (_, mut c) = run.children.remove(i);
        let _ = c.kill();
        let _ = c.wait();
    }
    for (name, c) in run.children.drain(..) {
        let o = c.wait_with_output()?;
        let text = String::from_utf8_lossy(&o.stdout).trim().to_string();
        if !o.status.success() {
            bail!(
                "{name} failed: {} {text}",
                String::from_utf8_lossy(&o.stderr).trim()
            );
        }
        let v = serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text));
        reports.insert(name.to_string(), v);
    }
    std::thread::sleep(Duration::from_secs(1));
    let stats = stats(&testbed::control_socket(prefix))?;
    Ok(soak_check::Ends {
        stats,
        tools: reports.into(),
    })
}

fn write_csv(dir: &Path, samples: &[Sample]) -> Result<()> {
    let mut w = csv::Writer::from_path(dir.join("soak.csv"))?;
    for s in samples {
        w.serialize(s)?;
    }
    w.flush()?;
    Ok(())
}

fn write_results(dir: &Path, samples: &[Sample], v: &Verdict) -> Result<()> {
    write_csv(dir, samples)?;
    let mut f = std::fs::File::create(dir.join("soak.json"))?;
    writeln!(f, "{}", serde_json::to_string_pretty(v)?)?;
    soak_check::plot(samples, dir).map_err(anyhow::Error::msg)?;
    Ok(())
}
