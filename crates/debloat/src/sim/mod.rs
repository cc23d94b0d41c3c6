//! `debloat sim`: run one of flent's tests in the simulator and print, and optionally write,
//! the results (a flent data file and `summary.json`).

use anyhow::{bail, Context, Result};
use debloat_core::units::{parse_size, parse_time};
use debloat_core::QdiscSpec;
use debloat_sim::scenario::{Config, Test};
use debloat_sim::tcp::cc::Algorithm;
use std::io::IsTerminal;
use std::path::PathBuf;

pub(crate) mod circuits;
mod offline;
mod print;
mod wifi;
pub(crate) use print::headline;
use print::print_table;
use wifi::wifi_config;

/// Arguments of `debloat sim`.
#[derive(clap::Args, Debug, Clone)]
#[command(
    after_help = format!("Tests (flent's names):\n{}\n\n", debloat_flent::catalog::help_list(debloat_flent::catalog::Driver::Simulator)) + "Examples:\n  debloat sim tcp_nup --link 20Mbit/20Mbit --rtt 48ms --qdisc \"pfifo limit 1000\" --streams 2\n  debloat sim tcp_nup --link 500kbit/5500kbit --rtt 300us --qdisc \"fq_codel\" --ecn --output results/\n  debloat sim tcp_1up --qdisc-up \"cake bandwidth 19Mbit\" --qdisc-down \"fq_codel\"\n  debloat sim rrul --link 110Mbit/10Mbit --sweep \"qdisc=pfifo limit 1000;codel;fq_codel\" --sweep \"rtt=12ms;48ms\"\n  debloat sim rrul --config /etc/debloat/gateway.toml    (the gateway's setup offline: --config, --sqm, --qosify, --egress/--ingress, --emulate-*; up is egress)\n  debloat sim --network contrib/libreqos/network.json --devices contrib/libreqos/ShapedDevices.csv --load contrib/libreqos/evening.toml    (LibreQoS's circuits under a load profile; docs/circuits.md)"
)]
pub struct Args {
    /// flent test (the list is below).
    #[arg(required_unless_present_any = ["scenario", "network"])]
    pub(crate) test: Option<String>,
    /// Run a scenario from a TOML file instead (topology and any mix of flows; see docs/sim.md).
    #[arg(long, conflicts_with = "test")]
    pub(crate) scenario: Option<PathBuf>,
    /// Bottleneck rates DOWN/UP, e.g. 20Mbit/2Mbit (one value: both directions). Either side
    /// may be `trace:FILE`: a capacity trace (mahimahi's format, or `seconds,rate` lines) with
    /// a modem's FIFO (--trace-buffer) behind the discipline, e.g.
    /// trace:data/link-traces/Verizon-LTE-short.down.mahi/10Mbit.
    #[arg(long, default_value = "20Mbit/20Mbit")]
    pub(crate) link: String,
    /// The modem's FIFO on a `trace:` link: N packets, or bytes such as 150kb.
    #[arg(long, default_value = "1000")]
    pub(crate) trace_buffer: String,
    /// Control the down discipline's shaper rate (it must be cake) between these rates:
    /// min=RATE,base=RATE,max=RATE (docs/autorate.md).
    #[arg(long, value_name = "min=…,base=…,max=…")]
    pub(crate) autorate_down: Option<String>,
    /// The same for the up discipline.
    #[arg(long, value_name = "min=…,base=…,max=…")]
    pub(crate) autorate_up: Option<String>,
    /// The controller: passive (debloat's: the TCP flows' own round trips, no reflectors) or
    /// cake-autorate (its published algorithm, with 6 reflector pings every 300 ms).
    #[arg(long, default_value = "passive")]
    pub(crate) autorate_mode: String,
    /// Base round-trip time, split evenly between the directions.
    #[arg(long, default_value = "48ms")]
    pub(crate) rtt: String,
    /// Discipline in front of the bottleneck in both directions (tc syntax).
    #[arg(
        long,
        default_value = "pfifo limit 1000",
        conflicts_with_all = ["config", "sqm", "qosify", "egress", "ingress"]
    )]
    pub(crate) qdisc: String,
    /// Discipline for the up direction only (overrides --qdisc there; the gateway's --egress).
    #[arg(long, conflicts_with = "egress")]
    pub(crate) qdisc_up: Option<String>,
    /// Discipline for the down direction only (overrides --qdisc there; the gateway's --ingress).
    #[arg(long, conflicts_with = "ingress")]
    pub(crate) qdisc_down: Option<String>,
    /// Load duration, s (flent's -l).
    #[arg(long, default_value_t = 60.0)]
    pub(crate) length: f64,
    /// Idle time before and after the load, s (flent's -d).
    #[arg(long, default_value_t = 5.0)]
    delay: f64,
    /// Sampling step, s (flent's -s).
    #[arg(long, default_value_t = 0.2)]
    step: f64,
    /// Streams for tcp_nup / tcp_ndown (1–1024).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub(crate) streams: u32,
    /// Congestion control of the flows: cubic, reno, bbr, westwood or prague (L4S: ECT(1),
    /// Accurate ECN); or a comma list the TCP flows take in turn, in the test's order (`--cc
    /// bbr,cubic`). The square-wave tests and l4s_mixed set their own.
    #[arg(long, default_value = "cubic")]
    pub(crate) cc: String,
    /// Make the TCP flows ECN-capable.
    #[arg(long)]
    pub(crate) ecn: bool,
    /// A discipline on the hosts themselves, before their NICs, e.g. `fq`: with fq the TCP
    /// senders pace through it (departure times, TCP Small Queues) as Linux hosts with sch_fq
    /// do. Default: none (packets go straight to the bottleneck; only BBR paces, by itself).
    #[arg(long, value_name = "SPEC")]
    pub(crate) host_qdisc: Option<String>,
    /// Cap every TCP flow's window at this much payload, as a receive window or send buffer
    /// would (tc size units: 3mb = 3 MiB). Default: no cap, only cwnd. Linux 4.x advertised at
    /// most 3mb (tcp_rmem max 6 MiB, half of it); 6.18's send buffer holds at most 4mb.
    #[arg(long, value_name = "SIZE")]
    pub(crate) tcp_window: Option<String>,
    /// BBR as first released (2016), without the ACK-aggregation head-room Linux added to its
    /// window in 5.1: what the published 2016 BBR runs used. Default: BBR as Linux has it now.
    #[arg(long)]
    pub(crate) bbr_2016: bool,
    /// Mark DSCP with qosify's rules (its UCI file or one map file) before the discipline,
    /// both directions (up is egress), as `gateway --classify` does.
    #[arg(long, value_name = "FILE")]
    pub(crate) classify: Option<std::path::PathBuf>,
    /// Seed (same seed, same output).
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Directory for the flent data file and summary.json.
    #[arg(long)]
    pub(crate) output: Option<PathBuf>,
    /// Title recorded in the flent file and its name.
    #[arg(long, default_value = "")]
    pub(crate) title: String,
    /// Base RTT of each remote host for rtt_fair_var_up/down (and rtt_fair_up's four), e.g.
    /// 10ms,50ms,100ms; default: one host (four for rtt_fair_up; with --wifi, one per station)
    /// at --rtt. With --wifi the hosts are the stations (host i on station i).
    #[arg(long, value_delimiter = ',')]
    rtts: Vec<String>,
    /// Random loss on both bottleneck wires, e.g. 0.5% (netem's `loss`).
    #[arg(long)]
    loss: Option<String>,
    /// Extra delay of 0 to this much on each packet, without reordering (e.g. 2ms; netem's
    /// `delay J/2 J/2`).
    #[arg(long)]
    jitter: Option<String>,
    /// netem's words for both bottleneck wires, after the transmitter and on top of the base
    /// RTT, as the gateway's --emulate-* take them (e.g. "delay 5ms 1ms distribution normal
    /// loss gemodel 1% 10% reorder 1%", "slot 2ms 6ms packets 16"); the rate is --link's.
    #[arg(long, value_name = "NETEM WORDS")]
    impair: Option<String>,
    /// Link-layer framing the wires pay for in transmission time, in cake's overhead words
    /// (e.g. "pppoe-vcmux" for ADSL's ATM cells, "ethernet", "docsis", "overhead 18 ptm").
    #[arg(long)]
    framing: Option<String>,
    /// TX ring descriptors of the bottleneck devices (0 = the qdisc feeds the wire directly).
    #[arg(long, default_value_t = 0)]
    ring: usize,
    /// Limit the TX ring with BQL (Linux's dynamic queue limits).
    #[arg(long, requires = "ring")]
    bql: bool,
    /// TX completion interrupts every this long (e.g. 1ms; default: as each packet finishes).
    #[arg(long)]
    irq_coalesce: Option<String>,
    /// Capture both bottleneck directions to DIR/bottleneck-up.pcap and bottleneck-down.pcap
    /// (headers only: the first 128 bytes of each frame, with its full length recorded).
    #[arg(long)]
    pcap: Option<PathBuf>,
    /// The gateway's words for the link, run offline (`offline.rs`; up is egress).
    #[command(flatten)]
    pub(crate) gateway: crate::gateway_setup::LinkWords,
    /// LibreQoS's files and a load profile (`circuits.rs`).
    #[command(flatten)]
    pub(crate) circuits: circuits::CircuitSimArgs,
    /// Run the test once per value: KEY=V1;V2;… with KEY one of qdisc, qdisc-up, qdisc-down,
    /// link, rtt, cc, streams, ecn, tcp-window (a size, or none) (repeat for several keys:
    /// every combination runs). Prints one
    /// row per run and writes a report comparing them (to --output, default debloat-sweep/).
    #[arg(long, value_name = "KEY=V1;V2;…")]
    pub sweep: Vec<String>,
    /// Run seeds --seed … --seed + N − 1 and show each number as the mean ± the half-width of
    /// its 95 % confidence interval (Student's t); summary.json then carries every seed's value
    /// and the interval, and the report draws the spread. With --sweep: every combination.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub seeds: u64,
    /// Wi-Fi instead of wired links: an AP (flent's host behind it, --rtt away) and stations;
    /// `up` is AP → station. The AP's queueing: legacy (--qdisc over a deep firmware queue),
    /// fq_codel (an fq_codel qdisc over it) or airtime (mac80211 FQ-CoDel per station, airtime
    /// DRR and AQL).
    #[arg(long, value_name = "legacy|fq_codel|airtime")]
    pub(crate) wifi: Option<String>,
    /// Station PHY rates: Mbit/s (6, 54: legacy; 6.5, 65: HT20 MCS), mcsN[/40][/sgi] or
    /// vhtMxS[/40|/80][/sgi], e.g. 6.5,65,65,65.
    #[arg(long, value_delimiter = ',', default_value = "65", requires = "wifi")]
    pub(crate) stations: Vec<String>,
    /// Frame error rate per station (one value for all, or one per station), e.g. 10%.
    #[arg(long, value_delimiter = ',', requires = "wifi")]
    fer: Vec<String>,
    /// Airtime weight per station (airtime queueing), e.g. 512,256.
    #[arg(long, value_delimiter = ',', requires = "wifi")]
    weights: Vec<u32>,
    /// Driver model: ath10k (1024-frame firmware queue, AQL) or ath9k (123 frames under a
    /// qdisc; aggregates built straight from the MAC queues with airtime; 2 ready in hardware).
    #[arg(long, default_value = "ath10k", requires = "wifi")]
    driver: String,
    /// Rate control: fixed (each station at its rate, as `iw … set bitrates` fixes it) or
    /// minstrel (the rate is minstrel_ht's best; its retry chain ends at a one-stream rate, by
    /// which ath9k sizes aggregates: shorter aggregates for 2+-stream rates).
    #[arg(
        long,
        default_value = "fixed",
        value_name = "fixed|minstrel",
        requires = "wifi"
    )]
    rate_control: String,
    /// Turn AQL off (airtime queueing): the firmware queue fills to its frame limit.
    #[arg(long, requires = "wifi")]
    no_aql: bool,
    /// Turn WMM off (hostapd's wmm_enabled=0): every packet best effort, whatever its DSCP.
    /// By default DSCPs map to the four access categories (CS1 background, CS5 video, EF voice).
    #[arg(long, requires = "wifi")]
    no_wmm: bool,
    /// Station of each flow in the order the test adds them, e.g. 1 (default: round robin).
    #[arg(long, value_delimiter = ',', requires = "wifi")]
    flow_stations: Vec<usize>,
    /// Station the latency probes go to.
    #[arg(long, default_value_t = 0, requires = "wifi")]
    ping_station: usize,
    /// The ping station sends the echo requests and the wired host answers (`ping` run on the
    /// station), instead of the wired host pinging it: the request then contends for the
    /// channel first and the reply waits in the AP's queues.
    #[arg(long, requires = "wifi")]
    station_pings: bool,
}

type PcapOut = pcap_file::pcap::PcapWriter<std::io::BufWriter<std::fs::File>>;

fn pcap_writers(dir: &std::path::Path) -> Result<[PcapOut; 2]> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let open = |name: &str| -> Result<PcapOut> {
        let path = dir.join(name);
        let f =
            std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        let header = pcap_file::pcap::PcapHeader {
            datalink: pcap_file::DataLink::ETHERNET,
            ts_resolution: pcap_file::TsResolution::NanoSecond,
            endianness: pcap_file::Endianness::Little,
            // Frames are cut to 128 bytes; the header allows the full length because pcap-file's
            // reader refuses records whose original length exceeds the header's snaplen.
            snaplen: 65535,
            ..pcap_file::pcap::PcapHeader::default()
        };
        Ok(pcap_file::pcap::PcapWriter::with_header(
            std::io::BufWriter::new(f),
            header,
        )?)
    };
    Ok([open("bottleneck-up.pcap")?, open("bottleneck-down.pcap")?])
}

fn spec(s: &str, what: &str) -> Result<QdiscSpec> {
    crate::rates::check_spec(what, s)?;
    s.parse().with_context(|| format!("{what} \"{s}\""))
}

/// One direction's discipline: its own flag's, else `--qdisc`'s.
fn direction_spec(own: Option<&str>, flag: &str, both: &str) -> Result<QdiscSpec> {
    match own {
        Some(q) => spec(q, flag),
        None => spec(both, "--qdisc"),
    }
}

/// Build the simulator configuration from the command line.
pub fn config(a: &Args) -> Result<Config> {
    let test: Test = a
        .test
        .as_deref()
        .unwrap_or_default()
        .parse()
        .map_err(anyhow::Error::msg)?;
    let (down, up) = split_link(&a.link);
    crate::rates::check_link(down, up)?;
    let buffer = crate::link_trace::limit(&a.trace_buffer).context("--trace-buffer")?;
    let side = |s: &str| {
        crate::link_trace::link_side(s, buffer).with_context(|| format!("--link {}", a.link))
    };
    let ((down_bps, modem_down), (up_bps, modem_up)) = (side(down)?, side(up)?);
    if down_bps == 0 || up_bps == 0 {
        bail!("--link rates must be above 0, e.g. 20Mbit/2Mbit");
    }
    let rtt_ns = parse_time(&a.rtt).with_context(|| format!("--rtt {}", a.rtt))?;
    if !(a.length > 0.0 && a.step > 0.0 && a.delay >= 0.0) || a.length / a.step > 1e7 {
        bail!("--length and --step must be positive (and length/step at most 10^7); --delay at least 0");
    }
    let mut cfg = Config {
        test,
        down_bps,
        up_bps,
        rtt_ns,
        qdisc_up: direction_spec(a.qdisc_up.as_deref(), "--qdisc-up", &a.qdisc)?,
        qdisc_down: direction_spec(a.qdisc_down.as_deref(), "--qdisc-down", &a.qdisc)?,
        length_s: a.length,
        delay_s: a.delay,
        step_s: a.step,
        streams: a.streams,
        cc: cc_turns(&a.cc)?[0],
        cc_turns: Some(cc_turns(&a.cc)?)
            .filter(|v| v.len() > 1)
            .unwrap_or_default(),
        ecn: a.ecn,
        host_qdisc: a
            .host_qdisc
            .as_deref()
            .map(|q| spec(q, "--host-qdisc"))
            .transpose()?,
        seed: a.seed,
        tcp_window: tcp_window(a)?,
        bbr_ack_aggregation: !a.bbr_2016,
        classify: crate::classify::load(a.classify.as_deref())?,
        host_rtts_ns: a
            .rtts
            .iter()
            .map(|t| parse_time(t).with_context(|| format!("--rtts {t}")))
            .collect::<Result<Vec<_>>>()?,
        adaptive: debloat_sim::scenario::Adaptive {
            modem_up,
            modem_down,
            autorate_up: autorate(a, a.autorate_up.as_deref(), "--autorate-up")?,
            autorate_down: autorate(a, a.autorate_down.as_deref(), "--autorate-down")?,
        },
        wire: wire(a)?,
        wire_down: None,
        wifi: match &a.wifi {
            Some(k) => Some(wifi_config(a, k)?),
            None => None,
        },
        device: debloat_sim::world::DeviceConfig {
            ring: a.ring,
            bql: a.bql.then(debloat_core::device::dql::Config::default),
            coalesce_ns: match &a.irq_coalesce {
                Some(t) => parse_time(t).with_context(|| format!("--irq-coalesce {t}"))?,
                None => 0,
            },
        },
    };
    let explicit = [a.qdisc_up.is_some(), a.qdisc_down.is_some()];
    offline::apply(&a.gateway, a, &mut cfg, explicit)?;
    Ok(cfg)
}

/// `--link DOWN/UP` (one value: both). A `trace:` side's file name may hold slashes: the
/// split is at the first `/` that starts a rate or another `trace:`.
fn split_link(link: &str) -> (&str, &str) {
    let starts_side =
        |rest: &str| rest.starts_with("trace:") || rest.starts_with(|c: char| c.is_ascii_digit());
    let split = link
        .match_indices('/')
        .map(|(i, _)| i)
        .find(|&i| !link.starts_with("trace:") || starts_side(&link[i + 1..]));
    match split {
        Some(i) => (&link[..i], &link[i + 1..]),
        None => (link, link),
    }
}

/// `--autorate-up/down` with `--autorate-mode`.
fn autorate(
    a: &Args,
    words: Option<&str>,
    what: &str,
) -> Result<Option<debloat_sim::world::AutorateConfig>> {
    let Some(words) = words else { return Ok(None) };
    autorate_with(&a.autorate_mode, words, what).map(Some)
}

/// A controller of `mode` within the bounds `words` give.
fn autorate_with(
    mode: &str,
    words: &str,
    what: &str,
) -> Result<debloat_sim::world::AutorateConfig> {
    use debloat_core::autorate::{Bounds, Mode};
    let bounds = Bounds::parse(words)
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("{what} {words}"))?;
    let mode: Mode = mode
        .parse()
        .map_err(anyhow::Error::msg)
        .context("--autorate-mode")?;
    Ok(debloat_sim::world::AutorateConfig::new(mode, bounds))
}

/// `--tcp-window`: at least one segment.
fn tcp_window(a: &Args) -> Result<Option<u64>> {
    let Some(w) = &a.tcp_window else {
        return Ok(None);
    };
    let b = parse_size(w).with_context(|| format!("--tcp-window {w}"))?;
    if b < u64::from(debloat_sim::packet::MSS) {
        bail!("--tcp-window {w}: at least one segment (1448 bytes), e.g. 3mb");
    }
    Ok(Some(b))
}

/// The wire from `--framing`, `--loss`, `--jitter` and `--impair` (checked where scenario files
/// are checked too).
fn wire(a: &Args) -> Result<debloat_sim::wire::Wire> {
    let loss_pct = match &a.loss {
        Some(l) => Some(
            l.trim_end_matches('%')
                .parse()
                .map_err(|_| anyhow::anyhow!("--loss {l}: expected a percentage such as 0.5%"))?,
        ),
        None => None,
    };
    debloat_sim::wire::WireWords {
        framing: a.framing.as_deref(),
        loss_pct,
        jitter: a.jitter.as_deref(),
        impair: a.impair.as_deref(),
    }
    .build(0, |f| format!("--{f}"))
    .map_err(anyhow::Error::msg)
}

/// Run `--scenario FILE`: its configuration and the run (nothing printed).
pub(crate) fn scenario(
    a: &Args,
    path: &std::path::Path,
) -> Result<(Config, debloat_sim::scenario::Run)> {
    if a.gateway.any() {
        anyhow::bail!("--config, --sqm, --qosify, --egress, --ingress and --emulate-* do not apply to --scenario: describe the disciplines and links in the scenario file");
    }
    if a.classify.is_some() {
        anyhow::bail!("--classify does not apply to --scenario: put `classify = \"FILE\"` at the top of the scenario file");
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    crate::rates::check_scenario(&path.display().to_string(), &text)?;
    // A file a scenario names: as given when it exists, else beside the scenario file.
    let base = path.parent().unwrap_or(std::path::Path::new("."));
    let at = |f: &str| match std::path::Path::new(f) {
        p if p.exists() => p.to_path_buf(),
        _ => base.join(f),
    };
    let load = |f: &str| crate::link_trace::load(&at(f)).map_err(|e| format!("{e:#}"));
    let rules = |f: &str| debloat_gateway::qosify_files::load(&at(f)).map_err(|e| e.to_string());
    let files = debloat_sim::scenario_file::Files {
        trace: &load,
        classify: &rules,
    };
    debloat_sim::scenario_file::run_with(&text, &files, |_| {}).map_err(anyhow::Error::msg)
}

fn run_scenario(a: &Args, path: &std::path::Path) -> Result<()> {
    let (cfg, r) = scenario(a, path)?;
    println!("scenario {}", path.display());
    print_table(&cfg, &r.summary);
    if let Some(dir) = &a.output {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        std::fs::write(
            dir.join("summary.json"),
            serde_json::to_string_pretty(&r.summary)?,
        )?;
        println!("\nwrote summary.json in {} (a scenario is not one of flent's tests, so no flent data file)", dir.display());
    }
    Ok(())
}

/// Run the command.
pub fn run(a: &Args) -> Result<()> {
    if let Some(path) = &a.scenario {
        return run_scenario(a, path);
    }
    if a.circuits.network.is_some() {
        return circuits::run(&a.circuits, a.output.as_deref());
    }
    if !a.sweep.is_empty() {
        return crate::sweep::run(a);
    }
    if a.seeds > 1 {
        if a.pcap.is_some() {
            bail!("--pcap captures one run: drop --seeds, or pick the seed with --seed");
        }
        return crate::seeds::run(a);
    }
    let cfg = config(a)?;
    let tty = std::io::stderr().is_terminal();
    let started = std::time::Instant::now();
    let mut last = 0.0;
    let tap: Option<debloat_sim::world::Tap> = match &a.pcap {
        Some(dir) => {
            let mut w = pcap_writers(dir)?;
            let epoch = debloat_sim::flent::DEFAULT_EPOCH * 1_000_000_000;
            Some(Box::new(move |d, t, p| {
                let i = usize::from(d == debloat_sim::world::Dir::Down);
                let f = debloat_sim::frame::frame(p, 128);
                let ts = std::time::Duration::from_nanos(epoch + t);
                // The simulator charges every pure ACK 66 bytes; one carrying SACK blocks is
                // written with its options, so its recorded length is the frame's.
                let len = p.meta.len.max(f.len() as u32);
                if let Err(e) = w[i].write_packet(&pcap_file::pcap::PcapPacket::new(ts, len, &f)) {
                    eprintln!("warning: pcap write failed: {e}");
                }
            }))
        }
        None => None,
    };
    let r = debloat_sim::scenario::simulate_with_tap(&cfg, tap, |f| {
        if tty && started.elapsed().as_secs_f64() > 1.0 && f - last >= 0.05 {
            last = f;
            eprint!("\r  simulating {}: {:3.0}%", cfg.test.name(), f * 100.0);
        }
    });
    if tty && last > 0.0 {
        eprintln!(
            "\r  simulating {}: done in {:.1} s",
            cfg.test.name(),
            started.elapsed().as_secs_f64()
        );
    }
    print_table(&cfg, &r.summary);
    if let Some(dir) = &a.output {
        let flent = debloat_sim::flent::data_file(
            &r.world,
            &cfg,
            debloat_sim::flent::DEFAULT_EPOCH,
            &a.title,
        );
        let (name, json) = write_output(dir, &cfg, &r.summary, &flent, &a.title)?;
        println!(
            "\nwrote {name}, {json} and summary.json (the latest run's) in {}",
            dir.display()
        );
    }
    if let Some(dir) = &a.pcap {
        println!(
            "captured the bottleneck in {}/bottleneck-up.pcap and bottleneck-down.pcap",
            dir.display()
        );
    }
    Ok(())
}

/// Write one run into `dir` as `sim --output` does: its flent data file (under a name no other
/// file there has), the summary beside it, and `summary.json` (the latest run's). Returns the
/// two names.
pub(crate) fn write_output(
    dir: &std::path::Path,
    cfg: &Config,
    summary: &debloat_sim::Summary,
    flent: &serde_json::Value,
    title: &str,
) -> Result<(String, String)> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let epoch = debloat_sim::flent::DEFAULT_EPOCH;
    let name = free_name(dir, &debloat_sim::flent::file_name(cfg.test, epoch, title));
    std::fs::write(dir.join(&name), debloat_sim::flent::gzip(flent)?)
        .with_context(|| format!("writing {}", dir.join(&name).display()))?;
    let text = serde_json::to_string_pretty(summary)?;
    let json = name.replace(".flent.gz", ".json");
    std::fs::write(dir.join(&json), &text)?;
    std::fs::write(dir.join("summary.json"), text)?;
    Ok((name, json))
}

/// `name` if no file in `dir` has it, else the first free `STEM-2.flent.gz`, `STEM-3…`: the
/// simulator's runs all carry the same fixed start time (so that they are reproducible byte
/// for byte), and a second run into one folder must not overwrite the first.
pub(crate) fn free_name(dir: &std::path::Path, name: &str) -> String {
    if !dir.join(name).exists() {
        return name.to_string();
    }
    let stem = name.trim_end_matches(".flent.gz");
    (2..)
        .map(|n| format!("{stem}-{n}.flent.gz"))
        .find(|n| !dir.join(n).exists())
        .unwrap_or_else(|| name.to_string())
}

/// `--cc`: one congestion control, or a comma list for the flows to take in turn.
fn cc_turns(words: &str) -> Result<Vec<Algorithm>> {
    words
        .split(',')
        .map(|w| {
            w.trim()
                .parse::<Algorithm>()
                .map_err(|e| anyhow::anyhow!("--cc {words}: {e}"))
        })
        .collect()
}
