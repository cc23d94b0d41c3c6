//! `debloat lab`: the real Linux kernel's qdiscs, here, under User-Mode Linux (`debloat-lab`).

use anyhow::{anyhow, bail, Context, Result};
use debloat_lab::{side, Lab};
use std::path::PathBuf;

/// Arguments of `debloat lab`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  debloat lab spec \"cake bandwidth 20Mbit diffserv4\" \"fq_codel limit 1001 noecn\"\n  debloat lab run script.sh --keep results/\n  debloat lab bench --qdisc cake\n\nNeeds kmod and, once, apt-get reaching the Debian archive: the first run fetches Debian\nunstable's User-Mode Linux (Linux 7.2, the newest that boots on AVX-512/AMX hosts too) into\n/var/cache/debloat/uml (DEBLOAT_LAB_CACHE; DEBLOAT_UML names another linux.uml). No KVM. The\nguest has the host's filesystem read-only, one CPU, no BQL; every result names its kernel."
)]
pub struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(clap::Subcommand, Debug)]
enum What {
    /// Show each spec as the kernel's `tc -s qdisc show` prints it (on a veth, MTU 1500) beside
    /// `debloat spec`, and say where they differ; exit 2 if any does.
    Spec {
        /// tc specs, e.g. "cake bandwidth 20Mbit diffserv4".
        #[arg(required = true)]
        specs: Vec<String>,
    },
    /// Boot the kernel, run a shell script in it as root (its working directory is a host
    /// directory; `$DEBLOAT` is this binary), print what it printed and exit with its status.
    Run {
        /// The script (POSIX sh); `-` reads it from standard input.
        script: PathBuf,
        /// Copy the files the script wrote in its working directory here.
        #[arg(long)]
        keep: Option<PathBuf>,
        /// Guest memory, MiB.
        #[arg(long, default_value_t = 512)]
        mem: u32,
    },
    /// The same uploads through the kernel's discipline and through `debloat gateway` with
    /// the same spec, in one guest; compare latency, goodput, drops, marks and tins within
    /// stated tolerances (exit 2 where they differ).
    Compare(Box<CompareArgs>),
    /// Forwarding cost in one guest: the kernel's bridge, the bridge with the kernel's
    /// discipline, and `debloat gateway` with the same spec, by `bench gateway`'s rate search
    /// with generator and forwarder sharing the guest's one CPU (a bed biased against a
    /// userspace forwarder: see BENCHMARKS.md and scripts/lab/qemu-bench.sh).
    Bench {
        /// The discipline, tc's words, on both sides (unshaped unless it says otherwise).
        #[arg(long, default_value = "cake")]
        qdisc: String,
        /// Seconds per trial.
        #[arg(long, default_value_t = 2.0)]
        trial: f64,
        /// Pings for the idle latency.
        #[arg(long, default_value_t = 500)]
        pings: u32,
    },
    /// Inside the lab: run a side-by-side plan (JSON) and print the result as JSON (what
    /// `compare` runs in the guest).
    Side {
        /// The plan, as `compare` writes it.
        plan: PathBuf,
    },
}

/// Arguments of `lab compare`.
#[derive(clap::Args, Debug)]
pub struct CompareArgs {
    /// The discipline up (client → server), tc's words; under HTB at --rate unless it shapes.
    up: String,
    /// The discipline down (the ACKs' way); default: the same as up (with cake's bandwidth
    /// and diffserv words kept, so give it when the rates differ).
    #[arg(long)]
    down: Option<String>,
    /// The link's rate, UP/DOWN or one for both.
    #[arg(long, default_value = "10Mbit/2Mbit")]
    rate: String,
    /// The gateway's emulated link at another rate than --rate, UP/DOWN or one for both (the
    /// kernel's run keeps --rate): e.g. the rate the kernel's HTB was measured to deliver, to
    /// tell a shaper's shortfall from the discipline's behaviour.
    #[arg(long, value_name = "RATE")]
    gateway_rate: Option<String>,
    /// The gateway's discipline up instead of UP (the kernel's run keeps UP), e.g. PIE with
    /// the update interval the lab's kernel was measured to run: to tell a kernel's timing
    /// from the discipline's law. --gateway-down likewise (default: the same as this).
    #[arg(long, value_name = "SPEC")]
    gateway_up: Option<String>,
    /// The gateway's discipline down instead of --down (with --gateway-up).
    #[arg(long, value_name = "SPEC", requires = "gateway_up")]
    gateway_down: Option<String>,
    /// The kernel's run forwards through a pass-through `debloat gateway` (pfifo, no emulated
    /// link) instead of a bridge, the kernel's disciplines on its veths: the kernel's qdiscs
    /// with the userspace forwarder's timing, to tell the forwarder's effect from debloat's
    /// disciplines'.
    #[arg(long)]
    kernel_via_gateway: bool,
    /// Run the kernel's side first, the gateway's second (default: the other way round): to
    /// see whether the order of the runs moves a figure. Needs --no-match-rtt.
    #[arg(long, requires = "no_match_rtt")]
    kernel_first: bool,
    /// Base delay netem adds on the client's egress (both runs; on the server's with
    /// --host-qdisc).
    #[arg(long, default_value = "10ms")]
    delay: String,
    /// A qdisc on the client hosts' own egress (both runs), e.g. `fq`: sch_fq paces each
    /// socket, as Linux hosts did for 2016's BBR. The base delay moves to the server's egress.
    #[arg(long, value_name = "QDISC", conflicts_with_all = ["upstream_rate", "kernel_via_gateway"])]
    host_qdisc: Option<String>,
    /// Bulk uploads per host, comma-separated: `4` one host, `1,4` two hosts.
    #[arg(long, default_value = "4")]
    hosts: String,
    /// TOS byte of each host's uploads, comma-separated like --hosts (e.g. `0x20,0`).
    #[arg(long)]
    tos: Option<String>,
    /// netem's words for the up link instead of UP and --rate (e.g. "delay 20ms 5ms rate
    /// 10Mbit loss 1%"): the kernel's netem on the bridge against the gateway's
    /// --emulate-egress with the same words and `buffer 1000` (netem's own queue and limit).
    #[arg(long, value_name = "WORDS")]
    netem: Option<String>,
    /// A rate for the client's egress netem (both runs): a bottleneck in front of the
    /// discipline, as a router's ingress sits behind a modem — what `cake autorate-ingress`
    /// estimates (e.g. 8Mbit).
    #[arg(long, value_name = "RATE")]
    upstream_rate: Option<String>,
    /// Host i uploads to a server address of its own (198.18.2.(2 + i)), as to different
    /// Internet hosts: what cake's dsthost and triple-isolate tell apart.
    #[arg(long)]
    server_per_host: bool,
    /// Bulk downloads from the server to the first host, beside the uploads (their data
    /// crosses the down spec, their ACKs the up one).
    #[arg(long, default_value_t = 0)]
    downloads: u32,
    /// TOS byte of each download, comma-separated (missing: 0), e.g. `0,0x20,0xa0,0xb8` as
    /// rrul marks its four.
    #[arg(long)]
    download_tos: Option<String>,
    /// Cap the client's TCP receive buffer (net.ipv4.tcp_rmem's max, bytes), and so the
    /// downloads' windows at half of it (e.g. 262144).
    #[arg(long, value_name = "BYTES")]
    client_rmem_max: Option<u32>,
    /// Let the client's TCP negotiate ECN (net.ipv4.tcp_ecn=1).
    #[arg(long)]
    ecn: bool,
    /// Congestion control of the uploads: one for all, or one per host (`bbr,cubic`).
    #[arg(long, default_value = "cubic")]
    cc: String,
    /// Second of the load at which each host starts, comma-separated like --hosts (e.g.
    /// `0,3,9,15`, flent's tcp_4up_squarewave); every host's goodput counts from --omit.
    #[arg(long)]
    starts: Option<String>,
    /// Seconds of load per run.
    #[arg(long, default_value_t = 20)]
    seconds: u32,
    /// Seconds at the start left out of goodput and latency.
    #[arg(long, default_value_t = 5)]
    omit: u32,
    /// Do not add delay to the kernel's run to match the gateway's idle round trip (under
    /// UML the userspace forwarder adds 1–2 ms; TCP's drop rate follows the round trip).
    #[arg(long)]
    no_match_rtt: bool,
    /// Also write both runs' figures here (JSON; the last attempt's).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Run the comparison up to this many times while the figures differ *and* the host took
    /// the machine's CPU away meanwhile (20 ms or more stolen or paused: such a run measures
    /// the host, not the discipline). A comparison the host left alone is never repeated.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=5))]
    attempts: u32,
}

/// Run the command.
pub fn run(a: &Args) -> Result<()> {
    if let What::Side { plan } = &a.what {
        return side(plan);
    }
    let mut lab = Lab::find()?;
    eprintln!("kernel lab: {}", lab.describe());
    match &a.what {
        What::Spec { specs } => spec(&lab, specs),
        What::Compare(c) => compare(&lab, c),
        What::Side { plan } => side(plan),
        What::Bench {
            qdisc,
            trial,
            pings,
        } => bench(&mut lab, qdisc, *trial, *pings),
        What::Run { script, keep, mem } => {
            lab.mem_mb = *mem;
            let text = if script.as_os_str() == "-" {
                std::io::read_to_string(std::io::stdin())?
            } else {
                std::fs::read_to_string(script)
                    .with_context(|| format!("reading {}", script.display()))?
            };
            // The script finds this very binary as $DEBLOAT (linked into the run's directory).
            let exe = std::env::current_exe().context("finding debloat's own path")?;
            eprintln!("booting the kernel lab (≈2 s) …");
            let o = lab.run_with_binary(&text, keep.as_deref(), &exe)?;
            pass_on(&o)
        }
    }
}

/// `bench gateway` inside the guest, with the kernel's discipline beside the gateway's.
fn bench(lab: &mut Lab, qdisc: &str, trial: f64, pings: u32) -> Result<()> {
    qdisc
        .parse::<debloat_core::QdiscSpec>()
        .map_err(|e| anyhow!("--qdisc \"{qdisc}\": {e}"))?;
    if qdisc.contains('\'') {
        bail!("--qdisc \"{qdisc}\": a spec has no quotes");
    }
    // `--io packet`: Debian's User-Mode Linux is built without AF_XDP sockets
    // (CONFIG_XDP_SOCKETS unset), so the bench's AF_XDP rows cannot run in the guest.
    let script = format!(
        "\"$DEBLOAT\" bench gateway --one-cpu --kernel-qdisc --no-busy-poll --io packet --realtime 0 --qdisc '{qdisc}' --trial {trial} --pings {pings}\n"
    );
    lab.timeout = std::time::Duration::from_secs(1200);
    let exe = std::env::current_exe().context("finding debloat's own path")?;
    eprintln!("booting the kernel lab; three forwarders' rate searches and idle pings take 2–4 minutes, printed at the end …");
    let o = lab.run_with_binary(&script, None, &exe)?;
    pass_on(&o)
}

/// Print what the guest's script printed and end with its exit status.
fn pass_on(o: &debloat_lab::Output) -> Result<()> {
    print!("{}", o.stdout);
    eprint!("{}", o.stderr);
    eprintln!(
        "lab: exit {} after {:.1} s",
        o.status,
        o.elapsed.as_secs_f64()
    );
    if o.status != 0 {
        std::process::exit(o.status.clamp(1, 255));
    }
    Ok(())
}

fn spec(lab: &Lab, specs: &[String]) -> Result<()> {
    // Check every spec here first: a typo is named before the kernel boots.
    let ours: Vec<String> = specs
        .iter()
        .map(|s| {
            let q: debloat_core::QdiscSpec = s.parse().map_err(|e| anyhow!("\"{s}\": {e}"))?;
            let q = q.build::<debloat_core::Record>(debloat_core::FlowHasher::default(), 0);
            Ok(debloat_core::qdisc::stats::tc_show(q.as_ref()))
        })
        .collect::<Result<_>>()?;
    eprintln!("booting the kernel lab (≈2 s) …");
    let o = lab.run(&debloat_lab::tc_show_script(specs), None)?;
    let theirs = debloat_lab::split_tc_show(&o.stdout);
    let mut differ = Vec::new();
    for (spec, ours) in specs.iter().zip(&ours) {
        let Some((_, tc)) = theirs.iter().find(|(s, _)| s == spec) else {
            differ.push(spec.clone());
            println!("=== {spec}\nthe kernel's tc refused it:\n{}", o.stderr);
            continue;
        };
        if tc == ours {
            println!("=== {spec}: same text\n{tc}");
        } else {
            differ.push(spec.clone());
            println!(
                "=== {spec}: DIFFERENT\n--- tc -s qdisc show ({})\n{tc}+++ debloat spec\n{ours}",
                lab.describe()
            );
        }
    }
    if !differ.is_empty() {
        bail!(
            "tc and debloat print differently for: {}",
            differ.join("; ")
        );
    }
    println!(
        "{} specs: debloat prints what the kernel's tc prints ({})",
        specs.len(),
        lab.describe()
    );
    Ok(())
}

/// `--cc`: one name, or one per host.
fn per_host_cc(cc: &str, hosts: usize) -> Result<String> {
    let n = cc.split(',').count();
    if n != 1 && n != hosts {
        bail!("--cc {cc}: give one congestion control, or one per host ({hosts})");
    }
    if cc.split(',').any(|x| x.trim().is_empty()) {
        bail!("--cc {cc}: an empty name (e.g. --cc bbr,cubic)");
    }
    Ok(cc.to_string())
}

/// `--starts`: one second per host, each before the load ends.
fn per_host_starts(starts: Option<&str>, hosts: usize, seconds: u32) -> Result<Vec<u32>> {
    let Some(t) = starts else {
        return Ok(Vec::new());
    };
    let v = t
        .split(',')
        .map(|x| match x.trim().parse::<u32>() {
            Ok(s) if s < seconds => Ok(s),
            _ => Err(anyhow!(
                "--starts {t}: `{x}` is not a whole second before the load ends ({seconds} s)"
            )),
        })
        .collect::<Result<Vec<u32>>>()?;
    if v.len() != hosts {
        bail!("--starts {t}: give one start per host ({hosts})");
    }
    Ok(v)
}

/// A comma-separated list of TOS bytes (`0x20,0`); None: empty.
fn tos_list(flag: &str, list: Option<&str>) -> Result<Vec<u8>> {
    let Some(t) = list else {
        return Ok(Vec::new());
    };
    t.split(',')
        .map(|x| {
            let x = x.trim();
            let v = match x.strip_prefix("0x") {
                Some(h) => u8::from_str_radix(h, 16),
                None => x.parse(),
            };
            v.map_err(|_| anyhow!("{flag} {t}: `{x}` is not a TOS byte (0–255 or 0x00–0xff)"))
        })
        .collect()
}

/// `--downloads N` with `--download-tos LIST`: one TOS byte per download (missing: 0).
fn downloads(n: u32, list: Option<&str>) -> Result<Vec<u8>> {
    if n > 16 {
        bail!("--downloads {n}: give 0 to 16");
    }
    let mut tos = tos_list("--download-tos", list)?;
    if tos.len() > n as usize {
        bail!(
            "--download-tos {}: {} bytes for --downloads {n}",
            list.unwrap_or(""),
            tos.len()
        );
    }
    tos.resize(n as usize, 0);
    Ok(tos)
}

/// `--rate`'s words, UP/DOWN or one for both, as bit/s.
fn rates(flag: &str, words: &str) -> Result<(u64, u64)> {
    let (up, down) = words.split_once('/').unwrap_or((words, words));
    let rate =
        |s: &str| debloat_core::units::parse_rate(s).map_err(|e| anyhow!("{flag} {words}: {e}"));
    Ok((rate(up)?, rate(down)?))
}

fn plan_of(c: &CompareArgs) -> Result<side::Plan> {
    let (up_bps, down_bps) = rates("--rate", &c.rate)?;
    let hosts = c
        .hosts
        .split(',')
        .map(|h| {
            h.trim()
                .parse::<u32>()
                .map_err(|_| anyhow!("--hosts {}: `{h}` is not a number of uploads", c.hosts))
        })
        .collect::<Result<Vec<u32>>>()?;
    if hosts.is_empty() || hosts.len() > 8 {
        bail!("--hosts {}: give 1 to 8 hosts", c.hosts);
    }
    let plan = side::Plan {
        up: c.up.clone(),
        down: c.down.clone().unwrap_or_else(|| c.up.clone()),
        up_bps,
        down_bps,
        delay: c.delay.clone(),
        cc: per_host_cc(&c.cc, hosts.len())?,
        starts: per_host_starts(c.starts.as_deref(), hosts.len(), c.seconds)?,
        hosts,
        seconds: c.seconds,
        omit: c.omit.min(c.seconds.saturating_sub(1)),
        match_rtt: !c.no_match_rtt,
        upstream_rate: c.upstream_rate.clone(),
        server_per_host: c.server_per_host,
        downloads: downloads(c.downloads, c.download_tos.as_deref())?,
        client_rmem_max: c.client_rmem_max,
        tos: tos_list("--tos", c.tos.as_deref())?,
        ecn: c.ecn,
        netem: c.netem.clone(),
        gateway_bps: match &c.gateway_rate {
            Some(w) => Some(rates("--gateway-rate", w)?),
            None => None,
        },
        gateway_specs: c.gateway_up.clone().map(|u| {
            let d = c.gateway_down.clone().unwrap_or_else(|| u.clone());
            (u, d)
        }),
        kernel_via_gateway: c.kernel_via_gateway,
        kernel_first: c.kernel_first,
        host_qdisc: c.host_qdisc.clone(),
    };
    for s in [&plan.up, &plan.down]
        .into_iter()
        .chain(plan.gateway_specs.iter().flat_map(|(u, d)| [u, d]))
    {
        side::shapes(s).map_err(anyhow::Error::msg)?;
    }
    if let Some(w) = &plan.netem {
        w.parse::<debloat_gateway::Emulation>()
            .map_err(|e| anyhow!("--netem \"{w}\": {e}"))?;
    }
    debloat_core::units::parse_time(&c.delay).map_err(|e| anyhow!("--delay {}: {e}", c.delay))?;
    Ok(plan)
}

fn compare(lab: &Lab, c: &CompareArgs) -> Result<()> {
    let plan = plan_of(c)?;
    let exe = std::env::current_exe().context("finding debloat's own path")?;
    let order = if plan.kernel_first {
        "the kernel's, then debloat's gateway"
    } else {
        "debloat's gateway, then the kernel's"
    };
    eprintln!(
        "booting the kernel lab; two runs of {} s each ({order}) …",
        plan.seconds
    );
    for attempt in 1..=c.attempts {
        let s = side::in_lab(lab, &plan, &exe).map_err(anyhow::Error::msg)?;
        if let Some(p) = &c.json {
            std::fs::write(p, serde_json::to_string_pretty(&s)?)
                .with_context(|| format!("writing {}", p.display()))?;
        }
        let checks = side::compare::checks(&s);
        print!("{}", side::compare::table(&s, &checks));
        let names = |f: &dyn Fn(&side::compare::Check) -> bool| {
            let v: Vec<&str> = checks
                .iter()
                .filter(|c| f(c))
                .map(|c| c.what.as_str())
                .collect();
            v.join("; ")
        };
        let (bad, unjudged) = (names(&|c| c.fails()), names(&|c| !c.ok && !c.judged));
        if bad.is_empty() && unjudged.is_empty() {
            return Ok(());
        }
        if !bad.is_empty() {
            eprintln!("the kernel and debloat differ beyond the tolerance in: {bad}");
        }
        if !unjudged.is_empty() {
            eprintln!("not judged, since the host stole the guest's CPU: {unjudged}");
        }
        match &s.stalls() {
            Some(h) if h.voids() && attempt < c.attempts => eprintln!(
                "{h}: the run measured the host as much as the discipline; again (attempt {} of {}) …",
                attempt + 1,
                c.attempts
            ),
            _ if bad.is_empty() => return Ok(()),
            _ => break,
        }
    }
    std::process::exit(2);
}

fn side(plan: &std::path::Path) -> Result<()> {
    let text =
        std::fs::read_to_string(plan).with_context(|| format!("reading {}", plan.display()))?;
    let plan: side::Plan =
        serde_json::from_str(&text).with_context(|| format!("{}", plan.display()))?;
    let exe = std::env::current_exe().context("finding debloat's own path")?;
    let prefix = format!("ls{}", std::process::id() % 100_000);
    let s = side::run(&plan, &exe, &prefix).map_err(|e| anyhow!("{}", e.0))?;
    println!("{}", serde_json::to_string(&s)?);
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn downloads_take_their_marks_or_best_effort() {
        assert_eq!(downloads(4, Some("0,0x20")).unwrap(), [0, 0x20, 0, 0]);
        assert_eq!(downloads(2, None).unwrap(), [0, 0]);
        assert!(downloads(0, None).unwrap().is_empty());
        let e = downloads(1, Some("0,0x20")).unwrap_err().to_string();
        assert!(e.contains("2 bytes for --downloads 1"), "{e}");
        let e = downloads(2, Some("0,0xzz")).unwrap_err().to_string();
        assert!(e.contains("`0xzz` is not a TOS byte"), "{e}");
        assert!(downloads(17, None).is_err());
    }

    #[test]
    fn per_host_cc_and_starts_name_the_bad_token() {
        assert_eq!(per_host_cc("bbr,cubic", 2).unwrap(), "bbr,cubic");
        assert_eq!(per_host_cc("bbr", 4).unwrap(), "bbr");
        let e = per_host_cc("bbr,cubic", 3).unwrap_err().to_string();
        assert!(e.contains("one per host (3)"), "{e}");
        assert!(per_host_cc("bbr,", 2).is_err());
        assert_eq!(
            per_host_starts(Some("0,3,9,15"), 4, 60).unwrap(),
            [0, 3, 9, 15]
        );
        assert!(per_host_starts(None, 4, 60).unwrap().is_empty());
        let e = per_host_starts(Some("0,x"), 2, 60).unwrap_err().to_string();
        assert!(e.contains("`x`"), "{e}");
        let e = per_host_starts(Some("0,60"), 2, 60)
            .unwrap_err()
            .to_string();
        assert!(e.contains("before the load ends (60 s)"), "{e}");
        let e = per_host_starts(Some("0"), 2, 60).unwrap_err().to_string();
        assert!(e.contains("one start per host (2)"), "{e}");
    }

    #[test]
    fn rates_take_up_slash_down_or_one_and_name_the_flag() {
        assert_eq!(rates("--rate", "20Mbit").unwrap(), (20_000_000, 20_000_000));
        assert_eq!(
            rates("--gateway-rate", "19600kbit/500kbit").unwrap(),
            (19_600_000, 500_000)
        );
        let e = rates("--gateway-rate", "20Mbit/fast")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--gateway-rate 20Mbit/fast:"), "{e}");
    }
}
