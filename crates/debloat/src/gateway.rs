//! `debloat gateway` (forward between two interfaces through core disciplines, with an
//! emulated link) and `debloat gateway stats` (ask a running gateway for its numbers).

use anyhow::{bail, Context, Result};
use debloat_core::classify::circuits::Minors;
use debloat_core::link::ModemSpec;
use debloat_core::QdiscSpec;
use debloat_gateway::control::ask;
use debloat_gateway::pinger::PingerConfig;
use debloat_gateway::{Config, Emulation, Gateway};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Arguments of `debloat gateway`.
#[derive(clap::Args, Debug)]
#[command(
    args_conflicts_with_subcommands = true,
    after_help = "Examples:\n  debloat gateway --lan eth1 --wan eth0 --egress \"cake bandwidth 19Mbit\" --ingress \"cake bandwidth 95Mbit ingress\"\n  debloat gateway --lan lan0 --wan wan0 --egress fq_codel --emulate-egress \"rate 10Mbit delay 10ms\" --control /run/debloat/gw.sock\n  debloat gateway --lan lan0 --wan wan0 --egress \"cake bandwidth 10Mbit\" --emulate-egress \"rate 10Mbit delay 20ms 2ms distribution normal loss gemodel 1% 20%\"\n  debloat gateway --lan lan0 --wan wan0 --ingress \"cake bandwidth 4Mbit\" --emulate-ingress \"rate trace data/link-traces/Verizon-LTE-short.down.mahi buffer 200 delay 20ms\"\n  debloat gateway --lan lan0 --wan wan0 --metrics 9464    (Prometheus: curl 127.0.0.1:9464/metrics)\n  debloat gateway stats --control /run/debloat/gw.sock --json\n\nEmulated links take netem's words: rate RATE [PACKETOVERHEAD [CELLSIZE [CELLOVERHEAD]]],\ndelay TIME [JITTER [CORR]] [distribution uniform|normal|pareto|paretonormal], loss [random] P [CORR],\nloss state P13 [P31 [P32 [P23 [P14]]]], loss gemodel P [R [1-H [1-K]]], duplicate P [CORR],\ncorrupt P [CORR], reorder P [CORR] [gap N], ecn, limit PACKETS, seed N, slot MIN [MAX] |\nslot distribution NAME DELAY JITTER [packets N] [bytes N]; and buffer PACKETS (a modem's FIFO,\ndebloat's word); rate trace FILE [buffer PACKETS|SIZE] (capacity from a mahimahi trace or\n`seconds,rate` lines, drained from a modem's FIFO, default 1000 packets; docs/link-traces.md). Unlike netem, jitter never reorders and there is no default limit.\n\n--realtime 50 (with --cpu) runs the forwarding loop under SCHED_FIFO, which cuts the millisecond wake-up tail.\n--busy-poll (with --cpu) never sleeps: lowest latency, one core always busy.\n\nGRO, LRO, GSO and TSO are turned off on both interfaces while the gateway runs (ethtool; turned\nback on at exit; --keep-offloads leaves them): super-frames larger than the MTU are counted as\noversized and dropped."
)]
pub struct Args {
    #[command(subcommand)]
    sub: Option<Sub>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(clap::Subcommand, Debug)]
enum Sub {
    /// Print a running gateway's statistics, as `tc -s qdisc show` would.
    Stats(StatsArgs),
    /// Change a running gateway without dropping what is queued: a shaper's rate
    /// (`--egress "bandwidth 8Mbit"`) or an emulated link (`--emulate-egress "rate 8Mbit"`).
    Set(SetArgs),
    /// Re-read the configuration (the files named at start: --config, --sqm, --qosify,
    /// --classify) and apply it without dropping a queued packet, as SIGHUP does: a changed
    /// discipline is replaced and what it held moves into the new one.
    Reload(ReloadArgs),
}

/// Arguments of `debloat gateway reload`.
#[derive(clap::Args, Debug)]
pub struct ReloadArgs {
    /// The gateway's control socket.
    #[arg(long, default_value = crate::gateway_ports::DEFAULT_CONTROL)]
    control: PathBuf,
}

/// Arguments of `debloat gateway set`.
#[derive(clap::Args, Debug)]
pub struct SetArgs {
    /// The gateway's control socket.
    #[arg(long, default_value = crate::gateway_ports::DEFAULT_CONTROL)]
    control: PathBuf,
    /// New shaper rate for LAN → WAN: "bandwidth 8Mbit" or "unlimited".
    #[arg(long)]
    egress: Option<String>,
    /// New shaper rate for WAN → LAN.
    #[arg(long)]
    ingress: Option<String>,
    /// New emulated link LAN → WAN (netem's words).
    #[arg(long)]
    emulate_egress: Option<String>,
    /// New emulated link WAN → LAN.
    #[arg(long)]
    emulate_ingress: Option<String>,
}

/// Arguments of `debloat gateway stats`.
#[derive(clap::Args, Debug)]
pub struct StatsArgs {
    /// The gateway's control socket.
    #[arg(long, default_value = crate::gateway_ports::DEFAULT_CONTROL)]
    control: PathBuf,
    /// JSON instead of text.
    #[arg(long)]
    json: bool,
    /// One subscriber's numbers (a Circuit ID of ShapedDevices.csv): its class and its leaf's
    /// statistics (CAKE's tins and delays), upload and download.
    #[arg(long, value_name = "ID")]
    circuit: Option<String>,
}

/// Arguments of the forwarder.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct RunArgs {
    /// The words that describe the shaped link (`sim` takes them too).
    #[command(flatten)]
    pub(crate) link: crate::gateway_setup::LinkWords,
    /// LibreQoS's files: the disciplines become HTB trees of circuits.
    #[command(flatten)]
    pub(crate) circuits: crate::circuits::CircuitArgs,
    /// Print the whole setup (as flags and as TOML) and every warning, then exit.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// LAN-side interface (the clients).
    #[arg(long)]
    pub(crate) lan: Option<String>,
    /// WAN-side interface (the uplink).
    #[arg(long)]
    pub(crate) wan: Option<String>,
    /// Set the LAN → WAN cake's rate from what the link delivers (debloat's passive controller:
    /// TCP round trips beyond the shaper, no reflectors): min=RATE,base=RATE,max=RATE.
    #[arg(long, value_name = "min=…,base=…,max=…")]
    pub(crate) autorate_egress: Option<String>,
    /// The same for the WAN → LAN cake.
    #[arg(long, value_name = "min=…,base=…,max=…")]
    pub(crate) autorate_ingress: Option<String>,
    /// The controller: passive (debloat's; default) or cake-autorate (its published
    /// algorithm, driven by round trips to --reflectors).
    #[arg(long, value_name = "passive|cake-autorate")]
    pub(crate) autorate_mode: Option<String>,
    /// cake-autorate mode's reflectors: addresses to ping, one stream each (list one twice for
    /// two streams). cake-autorate itself pings 6 public resolvers; choose ones you may ping.
    #[arg(long, value_name = "IP,IP,…")]
    pub(crate) reflectors: Option<String>,
    /// Each reflector's ping interval (cake-autorate's default: 300ms).
    #[arg(long, value_name = "TIME")]
    pub(crate) reflector_interval: Option<String>,
    /// Ping from this network namespace (`ip netns` name or path) on the LAN side, so the pings
    /// cross the shaper and the link as a router's own do; default: the gateway host's stack.
    #[arg(long, value_name = "NAME")]
    pub(crate) ping_netns: Option<String>,
    /// Bind the reflector pings to this interface.
    #[arg(long, value_name = "IF")]
    pub(crate) ping_device: Option<String>,
    /// Unix socket for `debloat gateway stats`, `set` and `reload` (mode 0600). Default
    /// /run/debloat/gateway.sock; if another gateway has that, /run/debloat/gateway-LAN-WAN.sock.
    #[arg(long)]
    pub(crate) control: Option<PathBuf>,
    /// Serve Prometheus metrics at http://ADDR/metrics; a bare port binds 127.0.0.1:PORT.
    #[arg(long, value_name = "PORT|ADDR:PORT")]
    pub(crate) metrics: Option<String>,
    /// Serve the live view at http://ADDR/ (rates against the shaper, per-tin throughput and
    /// delays, drops and marks, every second; its numbers as JSON at /api/snapshot, and
    /// /metrics too); a bare port binds 127.0.0.1:PORT.
    #[arg(long, value_name = "PORT|ADDR:PORT")]
    pub(crate) http: Option<String>,
    /// Seed of the flow hash and the emulation's randomness (default 1).
    #[arg(long)]
    pub(crate) seed: Option<u64>,
    /// Run on this CPU only (keep the forwarding loop on one core, away from other work).
    #[arg(long)]
    pub(crate) cpu: Option<usize>,
    /// Run the forwarding loop under SCHED_FIFO at this priority (1–99), as `chrt -f` would:
    /// a frame's wake-up then never waits behind ordinary tasks (cuts the idle latency's
    /// millisecond tail; docs/gateway-speed.md). Threads serving stats and metrics stay ordinary.
    #[arg(long, value_name = "PRIO", value_parser = clap::value_parser!(u8).range(1..=99))]
    pub(crate) realtime: Option<u8>,
    /// Never sleep: watch the receive rings in a tight loop instead of waiting in `ppoll`.
    /// Takes the process's wake-up out of every frame's path (lower, steadier latency; see the
    /// docs/gateway-speed.md) and keeps one core 100 % busy even when idle. Use with --cpu.
    #[arg(long)]
    pub(crate) busy_poll: bool,
    /// Packet I/O: `af_xdp` (an XDP program hands each frame to an AF_XDP socket: native XDP
    /// where the driver has it, generic XDP elsewhere, copy mode unless the device offers
    /// zero-copy), `packet` (AF_PACKET with a TPACKET ring), `auto` (AF_XDP where native XDP
    /// attaches, else packet, saying why: with generic XDP, AF_XDP measured slower than
    /// packet), or `af_xdp_generic` (AF_XDP on generic XDP even where native XDP exists, to
    /// measure). Default packet, or $DEBLOAT_IO.
    #[arg(long, env = "DEBLOAT_IO", value_name = "af_xdp|packet|auto")]
    pub(crate) io: Option<String>,
    /// Forward every frame untouched: no discipline, classifier or emulated link. The ceiling
    /// of the I/O back end, for `debloat bench gateway`; not a shaper.
    #[arg(long)]
    pub(crate) passthrough: bool,
    /// Forwarding threads, each with a shard of the hosts: the kernel hands each worker all
    /// frames of its hosts (by the LAN host's address, both ways), a shaper's rate is split
    /// between the workers by demand every 0.5 ms (a rate controller, on the first worker,
    /// sets the total), an htb tree's class by class. On AF_PACKET a fanout group's program picks the worker; on AF_XDP the
    /// XDP program does, the workers' sockets sharing the queue's UMEM.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub(crate) workers: Option<u16>,
    /// Pin the workers to these CPUs, one each (`--cores 2,3`: two workers); sets --workers.
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        conflicts_with = "cpu"
    )]
    pub(crate) cores: Option<Vec<usize>>,
    /// Mark DSCP with qosify's rules before the disciplines: qosify's UCI file
    /// (/etc/config/qosify, with the map files its `list defaults` names) or one map file
    /// (`tcp:22 +video`, `udp:53 voice`, `198.18.0.0/15 bulk` …, read with qosify's shipped
    /// classes). Replies take the class of their flow.
    #[arg(long, value_name = "FILE")]
    pub(crate) classify: Option<PathBuf>,
    /// Leave GRO/LRO/GSO/TSO as they are on the two interfaces (by default they are turned off
    /// while the gateway runs, so the kernel does not merge frames on receive, and turned back
    /// on at exit). Super-frames are cut into packets either way.
    #[arg(long)]
    pub(crate) keep_offloads: bool,
}

/// Run the command.
pub fn run(a: &Args) -> Result<()> {
    match &a.sub {
        Some(Sub::Stats(s)) => stats(s),
        Some(Sub::Set(s)) => set(s),
        Some(Sub::Reload(r)) => {
            let reply = ask(&r.control, "reload")?;
            print!("{reply}");
            if reply.starts_with("error: ") {
                bail!("the gateway kept its configuration");
            }
            Ok(())
        }
        None => forward(&a.run),
    }
}

/// `--autorate-egress/ingress`: the controller `--autorate-mode` names, within these bounds.
fn autorate(
    a: &RunArgs,
    words: Option<&str>,
    what: &str,
) -> Result<Option<debloat_gateway::autorate::AutorateConfig>> {
    let Some(w) = words else { return Ok(None) };
    for part in w.split(',') {
        if let Some((k, v)) = part.trim().split_once('=') {
            crate::rates::check_rate(&format!("{what} {k}"), v)?;
        }
    }
    let bounds = debloat_core::autorate::Bounds::parse(w)
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("{what} {w}"))?;
    let mode = match a.autorate_mode.as_deref() {
        None => debloat_core::autorate::Mode::Passive,
        Some(m) => m
            .parse()
            .map_err(anyhow::Error::msg)
            .context("--autorate-mode")?,
    };
    Ok(Some(debloat_gateway::autorate::AutorateConfig {
        mode,
        bounds,
    }))
}

/// `--reflectors` and the pings' interval, namespace and interface.
fn reflectors(a: &RunArgs) -> Result<Option<PingerConfig>> {
    let Some(list) = &a.reflectors else {
        if a.autorate_mode.as_deref() == Some("cake-autorate") {
            bail!("--autorate-mode cake-autorate pings reflectors: give --reflectors IP[,IP…] (addresses you may ping, e.g. your ISP's resolvers)");
        }
        return Ok(None);
    };
    if a.autorate_mode.as_deref() != Some("cake-autorate") {
        bail!("--reflectors {list}: only --autorate-mode cake-autorate pings reflectors (the passive mode needs none)");
    }
    let interval = match &a.reflector_interval {
        None => debloat_gateway::pinger::DEFAULT_INTERVAL,
        Some(t) => {
            let ns = debloat_core::units::parse_time(t)
                .map_err(anyhow::Error::msg)
                .with_context(|| format!("--reflector-interval {t}"))?;
            if ns == 0 {
                bail!("--reflector-interval {t}: must be above 0 (cake-autorate's default: 300ms)");
            }
            std::time::Duration::from_nanos(ns)
        }
    };
    Ok(Some(PingerConfig {
        reflectors: PingerConfig::parse_reflectors(list)
            .map_err(anyhow::Error::msg)
            .context("--reflectors")?,
        interval,
        netns: a.ping_netns.clone(),
        device: a.ping_device.clone(),
    }))
}

/// The gateway's configuration from the command line.
fn config(a: &RunArgs, lan: &str, wan: &str) -> Result<Config> {
    let spec = |s: &str, what: &str| -> Result<QdiscSpec> {
        s.parse().with_context(|| format!("{what} \"{s}\""))
    };
    let emu = |s: &str, what: &str| -> Result<(Emulation, Option<ModemSpec>)> {
        let (rest, modem) =
            crate::link_trace::emulation_words(s).with_context(|| format!("{what} \"{s}\""))?;
        let e = rest.parse().with_context(|| format!("{what} \"{s}\""))?;
        Ok((e, modem))
    };
    let or_none = |s: &Option<String>| s.clone().unwrap_or_default();
    let (emulate_egress, modem_egress) = emu(&or_none(&a.link.emulate_egress), "--emulate-egress")?;
    let (emulate_ingress, modem_ingress) =
        emu(&or_none(&a.link.emulate_ingress), "--emulate-ingress")?;
    let fq = |s: &Option<String>| s.clone().unwrap_or_else(|| "fq_codel".into());
    Ok(Config {
        lan: lan.to_string(),
        wan: wan.to_string(),
        egress: spec(&fq(&a.link.egress), "--egress")?,
        ingress: spec(&fq(&a.link.ingress), "--ingress")?,
        emulate_egress,
        emulate_ingress,
        modem_egress,
        modem_ingress,
        autorate_egress: autorate(a, a.autorate_egress.as_deref(), "--autorate-egress")?,
        autorate_ingress: autorate(a, a.autorate_ingress.as_deref(), "--autorate-ingress")?,
        reflectors: reflectors(a)?,
        seed: a.seed.unwrap_or(1),
        control: a.control.clone(),
        metrics: a
            .metrics
            .as_deref()
            .map(|s| metrics_addr(s, "--metrics"))
            .transpose()?,
        http: a
            .http
            .as_deref()
            .map(|s| metrics_addr(s, "--http"))
            .transpose()?,
        busy_poll: a.busy_poll,
        io: match a.io.as_deref() {
            None => debloat_gateway::port::IoChoice::default(),
            Some(w) => w
                .parse()
                .map_err(|e: String| anyhow::anyhow!("--io: {e}"))?,
        },
        classify: crate::classify::load(a.classify.as_deref())?,
        circuits: None,
        circuit_metrics: a.circuits.circuit_metrics,
        passthrough: a.passthrough,
        workers: crate::gateway_workers::count(a)?,
        cores: a.cores.clone(),
    })
}

/// Turn back on what the gateway turned off.
fn restore(changed: &[debloat_gateway::offload::Changed]) {
    for c in changed {
        if let Err(e) = c.restore() {
            eprintln!("warning: turning the offloads back on: {e}");
        }
    }
}

/// One gateway, or the first of `--workers N` with the others already running.
fn open(
    cfg: &Config,
    stop: &Arc<AtomicBool>,
    realtime: Option<u8>,
) -> std::io::Result<(Gateway, debloat_gateway::worker::Others)> {
    if cfg.workers > 1 {
        debloat_gateway::worker::open_workers(cfg, stop, realtime)
    } else {
        Gateway::open(cfg.clone()).map(|g| (g, Vec::new()))
    }
}

/// `--network`/`--devices`: LibreQoS's trees as the disciplines, its circuits as the stage.
/// `keep` holds the running tree's minors (None at start) and is given the new tree's.
fn with_circuits(a: &RunArgs, cfg: &mut Config, keep: &mut Option<Minors>) -> Result<()> {
    let Some(l) = crate::circuits::load_keeping(&a.circuits, keep.as_ref())? else {
        return Ok(());
    };
    if a.link.egress.is_some() || a.link.ingress.is_some() || a.classify.is_some() {
        bail!("--network/--devices make the disciplines and the classify stage: leave out --egress, --ingress and --classify");
    }
    println!(
        "{} circuits under {} nodes: egress and ingress are HTB trees of {} classes, each circuit's queues built on its first packet",
        l.plan.circuits.len(),
        l.plan.nodes.len(),
        l.tree.up.classes.len()
    );
    cfg.egress = debloat_core::QdiscSpec::Htb(l.tree.up);
    cfg.ingress = debloat_core::QdiscSpec::Htb(l.tree.down);
    cfg.circuits = Some(Arc::new(l.stage));
    *keep = Some(l.tree.minors);
    Ok(())
}

/// What is checked before anything is opened, `--dry-run` or not: every rate said in words
/// (or refused), the setup built with placeholder ports, the inert words named, two ports.
fn preflight(a: &RunArgs, warnings: &mut Vec<String>) -> Result<Config> {
    for (flag, words) in [
        ("--egress", &a.link.egress),
        ("--ingress", &a.link.ingress),
        ("--emulate-egress", &a.link.emulate_egress),
        ("--emulate-ingress", &a.link.emulate_ingress),
    ] {
        if let Some(w) = words {
            crate::rates::check_spec(flag, w)?;
        }
    }
    let named = config(a, "LAN", "WAN")?;
    warnings.extend(crate::gateway_ports::inert_words(&named.egress, "--egress"));
    warnings.extend(crate::gateway_ports::inert_words(
        &named.ingress,
        "--ingress",
    ));
    if let (Some(lan), Some(wan)) = (&a.lan, &a.wan) {
        crate::gateway_ports::two_ports(lan, wan)?;
    }
    Ok(named)
}

fn forward(cli: &RunArgs) -> Result<()> {
    if cli.circuits.check {
        return crate::circuits::check(&cli.circuits);
    }
    let (a, mut warnings) = crate::gateway_setup::resolve(cli)?;
    let a = &a;
    let mut named = preflight(a, &mut warnings)?;
    let mut minors = None;
    with_circuits(a, &mut named, &mut minors)?;
    if a.dry_run {
        return dry_run(a, &named, &warnings);
    }
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    let (Some(lan), Some(wan)) = (&a.lan, &a.wan) else {
        bail!("give both --lan IF and --wan IF (see `debloat gateway --help`)");
    };
    let mut cfg = named;
    cfg.lan.clone_from(lan);
    cfg.wan.clone_from(wan);
    let held = crate::gateway_ports::claim_ports(lan, wan, a.control.as_deref())?;
    cfg.control.clone_from(&held.control);
    if a.busy_poll && a.realtime.is_some() {
        bail!("--busy-poll with --realtime would spin at real-time priority and starve the kernel's own packet processing (ksoftirqd) on that CPU: use one or the other");
    }
    if let Some(cpu) = a.cpu {
        debloat_gateway::sys::pin_to_cpu(cpu)?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
    }
    let changed = if a.keep_offloads {
        Vec::new()
    } else {
        offloads_off(&[lan, wan])
    };
    let opened = open(&cfg, &stop, a.realtime);
    if opened.is_err() {
        restore(&changed);
    }
    let (mut gw, others) = opened.with_context(|| {
        format!("opening {lan} and {wan} (needs root or CAP_NET_RAW, and both interfaces up)")
    })?;
    println!(
        "forwarding {lan} ⇄ {wan}: egress qdisc {} over link {}; ingress qdisc {} over link {}",
        cfg.egress, cfg.emulate_egress, cfg.ingress, cfg.emulate_ingress
    );
    crate::gateway_workers::say(&cfg);
    print_classify(cfg.classify.as_ref());
    started(&mut gw, cli, minors)?;
    // After opening: the control and metrics threads started there stay ordinary.
    if let Some(prio) = a.realtime {
        if let Err(e) = debloat_gateway::sys::realtime(prio) {
            restore(&changed);
            return Err(e).context("--realtime");
        }
    }
    let res = gw.run(&stop);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in others {
        let _ = t.join();
    }
    restore(&changed);
    res?;
    drop(held);
    let snap = gw.snapshot();
    println!("stopped after {:.1} s; final statistics:\n", snap.uptime_s);
    print!("{}", snap.to_text());
    Ok(())
}

/// `--dry-run`: what would run, and every warning.
fn dry_run(a: &RunArgs, named: &Config, warnings: &[String]) -> Result<()> {
    if a.circuits.network.is_some() {
        // The trees run to megabytes of words: they are the files', said above in a line.
        println!("--network/--devices: the disciplines are the files' trees (--check says more); a gateway.toml does not hold them yet: give both flags");
        for w in warnings {
            println!("warning: {w}");
        }
        return Ok(());
    }
    let (e, i) = (named.egress.to_string(), named.ingress.to_string());
    crate::gateway_setup::print(a, &e, &i, warnings)
}

/// Once forwarding: how to reload (SIGHUP and `gateway reload` re-read what `cli` named; the
/// circuits keep their `minors`), and where the metrics and the live view are.
fn started(gw: &mut Gateway, cli: &RunArgs, mut minors: Option<Minors>) -> Result<()> {
    let again = cli.clone();
    gw.set_reloader(Box::new(move || {
        let (a, warnings) = crate::gateway_setup::resolve(&again).map_err(|e| format!("{e:#}"))?;
        for w in warnings {
            eprintln!("warning: {w}");
        }
        let (Some(l), Some(w)) = (&a.lan, &a.wan) else {
            return Err("the configuration no longer names --lan and --wan".into());
        };
        let mut cfg = config(&a, l, w).map_err(|e| format!("{e:#}"))?;
        // LibreQoS's files, read again: refused whole (the running tree kept) when they have
        // an error.
        with_circuits(&a, &mut cfg, &mut minors).map_err(|e| format!("{e:#}"))?;
        Ok(cfg)
    }));
    signal_hook::flag::register(signal_hook::consts::SIGHUP, gw.reload_flag())?;
    if let Some(addr) = gw.metrics_addr() {
        println!("Prometheus metrics at http://{addr}/metrics");
    }
    if let Some(addr) = gw.http_addr() {
        println!("live view at http://{addr}/");
    }
    Ok(())
}

/// Say what the marking stage will do, if it runs.
fn print_classify(c: Option<&debloat_core::classify::qosify::Config>) {
    if let Some(c) = c {
        let classes: Vec<&str> = c.classes.iter().map(|k| k.name.as_str()).collect();
        println!(
            "marking DSCP with qosify's rules: {} rules, classes {}",
            c.rules.len(),
            classes.join(", ")
        );
    }
}

/// Turn GRO/GSO/TSO off on the interfaces while forwarding, saying what changed; what could
/// not be checked is a warning with the command to do it by hand.
fn offloads_off(ifaces: &[&String]) -> Vec<debloat_gateway::offload::Changed> {
    let mut changed = Vec::new();
    for ifname in ifaces {
        match debloat_gateway::offload::turn_off(ifname) {
            Ok(c) if c.turned_off.is_empty() => {}
            Ok(c) => {
                println!(
                    "offloads turned off on {ifname} while forwarding: {} (turned back on at exit)",
                    c.turned_off.join(", ")
                );
                changed.push(c);
            }
            Err(e) => eprintln!(
                "warning: could not check the offloads of {ifname}: {e}. GRO/GSO super-frames will be counted as oversized and dropped; turn them off with `ethtool -K {ifname} gro off gso off tso off`"
            ),
        }
    }
    changed
}

/// `--metrics 9464` → 127.0.0.1:9464 (loopback unless told otherwise); `--metrics ADDR:PORT`.
fn metrics_addr(s: &str, flag: &str) -> Result<std::net::SocketAddr> {
    if let Ok(port) = s.parse::<u16>() {
        return Ok(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    }
    s.parse().map_err(|_| {
        anyhow::anyhow!(
            "{flag} \"{s}\": expected a port (9464, bound to 127.0.0.1) or an address:port (198.18.0.1:9464, [::1]:9464)"
        )
    })
}

fn stats(a: &StatsArgs) -> Result<()> {
    let Some(id) = &a.circuit else {
        print!("{}", ask(&a.control, if a.json { "json" } else { "text" })?);
        return Ok(());
    };
    let verb = if a.json { "circuit-json" } else { "circuit" };
    let reply = ask(&a.control, &format!("{verb} {id}"))?;
    if let Some(e) = reply.strip_prefix("error: ") {
        bail!("--circuit {id}: {}", e.trim());
    }
    print!("{reply}");
    Ok(())
}

fn set(a: &SetArgs) -> Result<()> {
    let mut any = false;
    for (what, v) in [
        ("egress", &a.egress),
        ("ingress", &a.ingress),
        ("emulate-egress", &a.emulate_egress),
        ("emulate-ingress", &a.emulate_ingress),
    ] {
        let Some(v) = v else { continue };
        crate::rates::check_spec(&format!("--{what}"), v)?;
        any = true;
        let reply = ask(&a.control, &format!("set {what} {v}"))?;
        print!("{reply}");
        if let Some(e) = reply.strip_prefix("error: ") {
            bail!("--{what} \"{v}\": {}", e.trim());
        }
    }
    if !any {
        bail!("nothing to change: give --egress, --ingress, --emulate-egress or --emulate-ingress");
    }
    Ok(())
}
