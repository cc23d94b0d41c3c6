//! `debloat server` and `debloat test`: latency under load on a real network, flent's tests
//! against a debloat server (or irtt's UDP probes against a stock irtt server).

use anyhow::{bail, Context, Result};
use debloat_probe::catalog::{self, Options};
use debloat_probe::grade::GradeStat;
use debloat_probe::results;
use debloat_probe::run::{self, RunOptions};
use debloat_report::flent_write;
use std::io::IsTerminal;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// Arguments of `debloat server`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Serves TCP flows and responsiveness probes on TCP, and answers irtt clients (stock `irtt client` too) on UDP, both on the same port.\n\nExamples:\n  debloat server\n  debloat server --bind 198.18.0.2:2112 --max-length 120 --hmac sekrit\n  debloat server --https 0.0.0.0:4443 --cert-name 198.18.0.2   (also the IETF responsiveness test)"
)]
pub struct ServerArgs {
    /// Address to listen on (TCP and UDP); irtt's port 2112 by default.
    #[arg(long, default_value = "0.0.0.0:2112")]
    bind: String,
    /// Most TCP connections (flows and probes) at once.
    #[arg(long, default_value_t = 64)]
    max_flows: usize,
    /// Most irtt sessions at once.
    #[arg(long, default_value_t = 64)]
    max_sessions: usize,
    /// Longest flow or irtt session granted, seconds.
    #[arg(long, default_value_t = 600.0)]
    max_length: f64,
    /// Shortest irtt interval granted, milliseconds.
    #[arg(long, default_value_t = 10.0)]
    min_interval: f64,
    /// Shared key: irtt packets must carry HMAC-MD5 with it, TCP requests a MAC.
    #[arg(long)]
    hmac: Option<String>,
    /// Also serve the IETF responsiveness test (HTTP/2 over TLS) here, e.g. 0.0.0.0:4443;
    /// clients: `debloat test responsiveness --config https://HOST:4443/.well-known/nq`.
    #[arg(long, value_name = "ADDR:PORT")]
    https: Option<String>,
    /// Certificate chain (PEM) for --https; without it a self-signed one is made at start.
    #[arg(long, requires = "key", value_name = "FILE")]
    cert: Option<PathBuf>,
    /// Private key (PEM) of --cert.
    #[arg(long, requires = "cert", value_name = "FILE")]
    key: Option<PathBuf>,
    /// More names (DNS or IP) for the self-signed certificate (localhost and the --https
    /// address are always in it).
    #[arg(long = "cert-name", value_name = "NAME")]
    cert_names: Vec<String>,
    /// Where the self-signed certificate is written, for clients' --ca.
    #[arg(long, default_value = "debloat-server-cert.pem", value_name = "FILE")]
    cert_out: PathBuf,
}

/// Arguments of `debloat test`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = format!("Tests (flent's names, and debloat's own last):\n{}\n\nExamples:", debloat_flent::catalog::help_list(debloat_flent::catalog::Driver::Probe)) + "\n  debloat test rrul 198.18.0.2\n  debloat test tcp_nup 198.18.0.2 --streams 8 --cc bbr --length 30\n  debloat test voip 198.18.0.2 --irtt 198.18.0.2:2112\n  debloat test rtt_fair_var_up 198.18.0.2 198.18.0.3\n  debloat test bufferbloat 198.18.0.2 --length 40\n  debloat test responsiveness 198.18.0.2\n  debloat test responsiveness --config https://198.18.0.2:4443/.well-known/nq --ca debloat-server-cert.pem   (the IETF test, HTTP/2 over TLS)\n\nWrites <test>-<time>.flent.gz (opens in flent), <test>-<time>.json and report/index.html to --output. Ctrl-C stops early and still writes what was measured."
)]
pub struct TestArgs {
    /// Test name (flent's, or debloat's own `bufferbloat`, `responsiveness`).
    test: String,
    /// The debloat server(s): HOST or HOST:PORT (port 2112 by default). Several only for
    /// rtt_fair_var_up/_down. Not needed with --config.
    #[arg(required_unless_present = "config")]
    servers: Vec<String>,
    /// responsiveness: run the IETF test (HTTP/2 over TLS) against this config URL, e.g.
    /// https://198.18.0.2:4443/.well-known/nq (any server publishing the draft's config;
    /// `debloat server --https` does). With a debloat server named too, both tests run.
    #[arg(long, value_name = "URL")]
    config: Option<String>,
    /// Trust this certificate (PEM) too, e.g. the one `debloat server --https` wrote.
    #[arg(long, value_name = "FILE")]
    ca: Option<PathBuf>,
    /// LENGTH: how long the load runs, seconds (flent's -l).
    #[arg(short = 'l', long, default_value_t = 60.0)]
    length: f64,
    /// STEP_SIZE: sampling interval, seconds (flent's -s).
    #[arg(short = 's', long, default_value_t = 0.2)]
    step: f64,
    /// DELAY: idle time before and after the load, seconds (flent's -d).
    #[arg(short = 'd', long, default_value_t = 5.0)]
    delay: f64,
    /// Streams for tcp_nup / tcp_ndown, and each direction of bufferbloat (1–256).
    #[arg(long, default_value_t = 4, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=256))]
    streams: usize,
    /// Congestion control of flows whose test does not fix one (default: the sender's).
    #[arg(long)]
    cc: Option<String>,
    /// irtt server for the UDP probes (default: the debloat server's own UDP port).
    #[arg(long)]
    irtt: Option<String>,
    /// Shared key of the server (see `debloat server --hmac`).
    #[arg(long)]
    hmac: Option<String>,
    /// Output directory.
    #[arg(short = 'o', long, default_value = "debloat-results")]
    output: PathBuf,
    /// Title for the data file and report.
    #[arg(short = 't', long, default_value = "")]
    title: String,
    /// Statistic for the bufferbloat grade: mean (DSLReports), median or p95.
    #[arg(long, default_value = "mean")]
    grade_stat: String,
    /// Do not write the HTML report.
    #[arg(long)]
    no_report: bool,
    /// Run the latency probes (irtt, ICMP) under SCHED_FIFO at this priority (1–99; needs root
    /// or CAP_SYS_NICE), so their timers keep time while the load's threads busy the CPUs.
    #[arg(long, value_name = "PRIO", value_parser = clap::value_parser!(u8).range(1..=99))]
    realtime: Option<u8>,
}

fn resolve(s: &str, default_port: u16) -> Result<SocketAddr> {
    let with_port = if s.parse::<std::net::IpAddr>().is_ok() {
        // A bare address (v6 included) gets the default port.
        let ip: std::net::IpAddr = s.parse()?;
        return Ok(SocketAddr::new(ip, default_port));
    } else if s.contains(':') {
        s.to_string()
    } else {
        format!("{s}:{default_port}")
    };
    with_port
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve `{s}`: give HOST, HOST:PORT or an IP address"))?
        .next()
        .with_context(|| format!("`{s}` resolves to no address"))
}

/// Run the server until Ctrl-C.
pub fn server(a: &ServerArgs) -> Result<()> {
    let bind = resolve(&a.bind, 2112)?;
    if a.max_length.is_nan()
        || a.max_length <= 0.0
        || a.min_interval.is_nan()
        || a.min_interval <= 0.0
    {
        bail!("--max-length and --min-interval must be positive");
    }
    let mut cfg = debloat_probe::server::Config {
        bind,
        max_flows: a.max_flows,
        max_length: Duration::from_secs_f64(a.max_length),
        hmac_key: a.hmac.as_ref().map(|k| k.as_bytes().to_vec()),
        ..Default::default()
    };
    cfg.irtt.max_sessions = a.max_sessions;
    cfg.irtt.min_interval = Duration::from_secs_f64(a.min_interval / 1e3);
    let running = debloat_probe::server::start(cfg)
        .with_context(|| format!("cannot listen on {bind} (in use? try --bind ADDR:PORT)"))?;
    println!(
        "debloat server: TCP {} (flows, probes), UDP {} (irtt); Ctrl-C to stop",
        running.tcp, running.udp
    );
    let files = a.cert.as_deref().zip(a.key.as_deref());
    let https = a
        .https
        .as_deref()
        .map(|h| crate::probe_ietf::serve(h, files, &a.cert_names, &a.cert_out))
        .transpose()?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
    }
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let c = &running.counters;
    use std::sync::atomic::Ordering::Relaxed;
    println!(
        "debloat server: {} flows served, {} rejected, {:.1} MB received, {:.1} MB sent",
        c.flows.load(Relaxed),
        c.rejected.load(Relaxed),
        c.bytes_received.load(Relaxed) as f64 / 1e6,
        c.bytes_sent.load(Relaxed) as f64 / 1e6
    );
    if let Some(h) = https {
        let c = &h.counters;
        println!(
            "debloat server: HTTPS {} requests, {:.1} MB received, {:.1} MB sent",
            c.requests.load(Relaxed),
            c.received.load(Relaxed) as f64 / 1e6,
            c.sent.load(Relaxed) as f64 / 1e6
        );
    }
    running.shutdown();
    Ok(())
}

/// Run a test, write its results, print the table, grade and RPM.
pub fn test(a: &TestArgs) -> Result<()> {
    let Some(url) = &a.config else {
        return native(a).map(|_| ());
    };
    if a.test != "responsiveness" {
        bail!(
            "--config is for `debloat test responsiveness` (the IETF test); `{}` does not take it",
            a.test
        );
    }
    let own = if a.servers.is_empty() {
        None
    } else {
        native(a)?
    };
    crate::probe_ietf::test(url, a.ca.as_deref(), a.length, &a.output, own)
}

/// Run debloat's own test against a debloat server; the RPM it measured, if any.
fn native(a: &TestArgs) -> Result<Option<debloat_probe::rpm::Rpm>> {
    let stat: GradeStat = a.grade_stat.parse().map_err(anyhow::Error::msg)?;
    let plan = plan_of(a)?;
    let stop = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGINT, Arc::clone(&stop))?;
    signal_hook::flag::register(signal_hook::consts::SIGTERM, Arc::clone(&stop))?;
    if let Some(p) = a.realtime {
        // Try it on a throwaway thread first, so a missing privilege is an error before the
        // test starts rather than a failed probe after it.
        std::thread::spawn(move || debloat_probe::sys::realtime(p))
            .join()
            .map_err(|_| anyhow::anyhow!("--realtime: the check thread panicked"))?
            .context("--realtime (run as root, or drop the option)")?;
    }
    let ro = RunOptions {
        hmac_key: a.hmac.as_ref().map(|k| k.as_bytes().to_vec()),
        progress: std::io::stderr().is_terminal(),
        realtime: a.realtime,
    };
    eprintln!(
        "debloat test {}: {:.0} s ({} TCP flows, {} UDP probes, {} ICMP series){}",
        plan.name,
        plan.total_s,
        plan.flows.len(),
        plan.udp.len() + usize::from(plan.voip.is_some()),
        plan.icmp.len(),
        if ro.progress {
            "; Ctrl-C stops early"
        } else {
            ""
        }
    );
    let out = run::run(&plan, &ro, &stop);
    if out.interrupted {
        eprintln!(
            "stopped early at {:.1} s; writing what was measured",
            out.elapsed_s
        );
    }
    for e in results::errors(&out) {
        eprintln!("warning: {e}");
    }
    let (ds, path, json_path) = write_results(a, &plan, &out, stat)?;
    let sums = vec![debloat_report::RunSummary::of(&ds)];
    print!("{}", debloat_report::table::text(&sums));
    print_verdicts(&out, stat);
    println!(
        "\ndata: {}\nsummary: {}",
        path.display(),
        json_path.display()
    );
    if !a.no_report {
        let index = debloat_report::write(
            &[ds],
            &a.output.join("report"),
            &format!("debloat test {}", plan.name),
        )
        .with_context(|| "writing the report")?;
        println!("report: {}", index.display());
    }
    if !results::errors(&out).is_empty()
        && out.flows.iter().all(|f| f.samples.len() < 2)
        && !out.flows.is_empty()
    {
        bail!("no flow carried data; see the warnings above");
    }
    Ok(results::rpm_of(&out))
}

/// The test's plan from the command line (servers resolved).
fn plan_of(a: &TestArgs) -> Result<catalog::Plan> {
    let servers = a
        .servers
        .iter()
        .map(|s| Ok((s.clone(), resolve(s, 2112)?)))
        .collect::<Result<Vec<_>>>()?;
    let irtt = a.irtt.as_deref().map(|s| resolve(s, 2112)).transpose()?;
    let opts = Options {
        length_s: a.length,
        step_s: a.step,
        delay_s: a.delay,
        streams: a.streams,
        cc: a.cc.clone(),
        servers,
        irtt,
    };
    catalog::plan(&a.test, &opts).map_err(anyhow::Error::msg)
}

/// The flent data file and the JSON summary in `--output`; the dataset read back from the
/// file, and both paths.
fn write_results(
    a: &TestArgs,
    plan: &catalog::Plan,
    out: &run::Outcome,
    stat: GradeStat,
) -> Result<(
    debloat_report::Dataset,
    std::path::PathBuf,
    std::path::PathBuf,
)> {
    std::fs::create_dir_all(&a.output)
        .with_context(|| format!("cannot create {}", a.output.display()))?;
    let mut file = results::flent_file(out, &a.title);
    let mut summary = results::summary(out, stat);
    summary["probes_realtime_priority"] = serde_json::json!(a.realtime);
    results::attach_verdict(&mut file, &summary);
    let name = flent_write::file_name(&plan.name, out.t0_unix, &a.title);
    let path = a.output.join(&name);
    std::fs::write(&path, flent_write::gzip(&file)?)
        .with_context(|| format!("writing {}", path.display()))?;
    let json_path = a.output.join(name.replace(".flent.gz", ".json"));
    std::fs::write(&json_path, serde_json::to_string_pretty(&summary)?)
        .with_context(|| format!("writing {}", json_path.display()))?;
    let ds = debloat_report::Dataset::from_json(&file, &plan.name).map_err(anyhow::Error::msg)?;
    Ok((ds, path, json_path))
}

/// The bufferbloat grade, the load ramp and the responsiveness, in words.
fn print_verdicts(out: &run::Outcome, stat: GradeStat) {
    match results::grade_of(out, stat) {
        Some(g) if g.phases.len() > 1 => {
            println!(
                "\nbufferbloat grade (DSLReports scale, {:?} latency): {}  (idle {:.1} ms; mean increase of the {} phases +{:.1} ms)",
                g.stat, g.letter, g.idle_ms, g.phases.len(), g.increase_ms
            );
            for p in &g.phases {
                println!(
                    "  {:<9} {:>4.0}–{:<4.0} s   loaded {:.1} ms, +{:.1} ms: {}",
                    p.direction, p.window_s.0, p.window_s.1, p.loaded_ms, p.increase_ms, p.letter
                );
            }
        }
        Some(g) => println!(
            "\nbufferbloat grade (DSLReports scale, {:?} latency): {}  (idle {:.1} ms, under {} load {:.1} ms, +{:.1} ms)",
            g.stat, g.letter, g.idle_ms, g.direction, g.loaded_ms, g.increase_ms
        ),
        None => println!("\nbufferbloat grade: n/a (needs latency probes before and during a load)"),
    }
    if let Some(r) = &out.ramp {
        let steps: Vec<String> = r
            .steps
            .iter()
            .map(|(t, n)| format!("{n} at {t:.0} s"))
            .collect();
        println!(
            "load ramp (draft-09: +1 connection each way per {:.0} s interval until goodput is stable): {}; {}",
            r.interval_s,
            steps.join(", "),
            match (r.saturated_at_s, r.ended_at_s) {
                (Some(t), Some(e)) => format!(
                    "goodput saturated at {t:.0} s; responsiveness stable at {e:.0} s, where the test ended (the draft's end)"
                ),
                (Some(t), None) => format!(
                    "goodput saturated at {t:.0} s; responsiveness not stable by the end"
                ),
                _ => "goodput not saturated by the end".into(),
            }
        );
    }
    match results::rpm_of(out) {
        Some(r) => println!(
            "responsiveness (draft-ietf-ippm-responsiveness-09): {:.0} RPM, {} ({:?} confidence; foreign {:.0}, loaded {:.0}; P90 variant {:.0} RPM)",
            r.rpm, r.class, r.confidence, r.foreign_rpm, r.loaded_rpm, r.p90_rpm
        ),
        None => println!("responsiveness: n/a (needs TCP load and answered probes)"),
    }
}
