//! `debloat testbed up|down`: client, gateway and server network namespaces with the gateway
//! emulating the bottleneck; and two small traffic tools to run inside them (`tcp-sink`,
//! `tcp-send`: bulk TCP with a chosen congestion control, counting what was received).

use anyhow::{bail, Context, Result};
use debloat_core::units::{fmt_rate, fmt_time, parse_rate, parse_time};
use debloat_gateway::loadgen;
use debloat_gateway::testbed::{self, Setup};
use debloat_probe::bulk;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Arguments of `debloat testbed`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Subcommand, Debug)]
enum Cmd {
    /// Build the namespaces and start the gateway (replacing a testbed with the same prefix).
    #[command(
        after_help = "Examples:\n  debloat testbed up --rate 10Mbit --rtt 20ms --egress \"cake bandwidth 10Mbit\"\n  debloat testbed up --rate 20Mbit/2Mbit --rtt 48ms --egress \"pfifo limit 1000\" --ingress fq_codel\n  debloat testbed up --rtt 40ms --impair \"jitter 5ms distribution normal loss gemodel 1% 30%\" --metrics 9464\n  ip netns exec dbl-client ping 198.18.2.2\n  ip netns exec dbl-gw curl -s 127.0.0.1:9464/metrics\n  debloat gateway stats --control /run/debloat/dbl.sock"
    )]
    Up(Box<UpArgs>),
    /// Stop the gateway and remove the namespaces.
    Down(DownArgs),
    /// Accept TCP connections and count the bytes received (run it in the server namespace).
    TcpSink(SinkArgs),
    /// Bulk TCP uploads to a sink for a while; prints goodput as the sink counted it.
    TcpSend(SendArgs),
    /// Answer DNS queries for a few names (run it in the server namespace), so an answer
    /// crosses the gateway.
    DnsServe(crate::testbed_dns::ServeArgs),
    /// Look a name up (type A) and print its addresses.
    DnsAsk(crate::testbed_dns::AskArgs),
    /// Short TCP connections and UDP from new source ports every second, to a `churn-serve`
    /// (run it in the client namespace): the gateway's flow tables turn over.
    Churn(crate::testbed_churn::ChurnArgs),
    /// Take `churn` (run it in the server namespace): TCP and UDP on one port, counted.
    ChurnServe(crate::testbed_churn::ServeArgs),
    /// Send malformed frames out of an interface (for testing the gateway's input checks).
    #[command(hide = true)]
    SendFrames(FramesArgs),
    /// Send UDP frames out of an interface as fast as it takes them (for `debloat bench gateway`).
    #[command(hide = true)]
    Blast(BlastArgs),
    /// Print the frames arriving on an interface, in hex (for testing what the gateway forwards).
    #[command(hide = true)]
    Capture(CaptureArgs),
}

/// Arguments of `testbed capture`.
#[derive(clap::Args, Debug)]
pub struct CaptureArgs {
    /// Interface to listen on.
    #[arg(long)]
    iface: String,
    /// Seconds.
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Print only the frame count and the longest gap between two frames, from the kernel's
    /// receive stamps (a stall in forwarding shows as a gap).
    #[arg(long)]
    gaps: bool,
}

/// Arguments of `testbed blast`.
#[derive(clap::Args, Debug)]
pub struct BlastArgs {
    /// Interface to send from.
    #[arg(long)]
    iface: String,
    /// The receiver's MAC address (aa:bb:cc:dd:ee:ff).
    #[arg(long)]
    dst_mac: String,
    /// Source and destination IPv4 addresses.
    #[arg(long, default_value = testbed::CLIENT_V4)]
    src_ip: std::net::Ipv4Addr,
    /// The receiver's IPv4 address (UDP port 9).
    #[arg(long, default_value = testbed::SERVER_V4)]
    dst_ip: std::net::Ipv4Addr,
    /// Frame length without FCS, 60 to 1514 bytes.
    #[arg(long, default_value_t = 60)]
    size: usize,
    /// Distinct flows.
    #[arg(long, default_value_t = 64)]
    flows: u16,
    /// Frames per second (0: as fast as possible).
    #[arg(long, default_value_t = 0)]
    pps: u64,
    /// Seconds.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Run on this CPU only.
    #[arg(long)]
    cpu: Option<usize>,
    /// A source address per flow too (198.19.0.0/16): a flood from as many hosts as flows.
    #[arg(long)]
    spread_sources: bool,
}

/// Arguments of `testbed send-frames`.
#[derive(clap::Args, Debug)]
pub struct FramesArgs {
    /// Interface to send from.
    #[arg(long)]
    iface: String,
    /// garbage (an IPv4 ethertype with no IPv4 header), truncated (an IPv4 header claiming
    /// more bytes than the frame has), oversized (9100 bytes; the MTU must allow it), or the
    /// well-formed vlan (802.1Q, VLAN 100, priority 5) and qinq (802.1ad 200 outside 802.1Q
    /// 100) UDP frames.
    #[arg(long)]
    kind: String,
    /// How many.
    #[arg(long, default_value_t = 100)]
    count: u32,
}

/// Arguments of `testbed up`.
#[derive(clap::Args, Debug)]
pub struct UpArgs {
    /// Emulated bottleneck rate, both directions or DOWN/UP; a side may be `trace:FILE`, a
    /// capacity trace with a modem FIFO of --trace-buffer behind the discipline.
    #[arg(long, default_value = "10Mbit")]
    rate: String,
    /// The modem's FIFO on a `trace:` side: N packets, or bytes such as 150kb.
    #[arg(long, default_value = "200")]
    trace_buffer: String,
    /// Run the gateway's shaper-rate controller on the egress cake (`gateway --autorate-egress`).
    #[arg(long, value_name = "min=…,base=…,max=…")]
    autorate_egress: Option<String>,
    /// The same on the ingress cake.
    #[arg(long, value_name = "min=…,base=…,max=…")]
    autorate_ingress: Option<String>,
    /// The controller (`gateway --autorate-mode`): passive or cake-autorate.
    #[arg(long, value_name = "passive|cake-autorate")]
    autorate_mode: Option<String>,
    /// cake-autorate's reflectors (`gateway --reflectors`), pinged from the client's namespace
    /// (`--ping-netns PREFIX-client`) so the pings cross the shaper and the emulated link.
    #[arg(long, value_name = "IP,IP,…")]
    reflectors: Option<String>,
    /// Emulated base round-trip time (half each way).
    #[arg(long, default_value = "20ms")]
    rtt: String,
    /// Discipline for client → server traffic, in front of the link.
    #[arg(long, default_value = "fq_codel")]
    egress: String,
    /// Discipline for server → client traffic.
    #[arg(long, default_value = "fq_codel")]
    ingress: String,
    /// More of netem's words for the emulated link, both directions (after rate and delay):
    /// "loss 1%", "jitter 2ms distribution normal", "loss gemodel 1% 20% reorder 5%".
    #[arg(long, default_value = "")]
    impair: String,
    /// Serve the gateway's Prometheus metrics on this port of 127.0.0.1 inside the gateway's
    /// namespace (ip netns exec PREFIX-gw curl 127.0.0.1:PORT/metrics).
    #[arg(long)]
    metrics: Option<u16>,
    /// Serve the gateway's live view on this port, in its namespace (`gateway --http`):
    /// `ip netns exec dbl-gw curl 127.0.0.1:PORT/`.
    #[arg(long)]
    http: Option<u16>,
    /// Pin the gateway's forwarding loop to this CPU (`gateway --cpu`).
    #[arg(long)]
    cpu: Option<usize>,
    /// Run the gateway's forwarding loop under SCHED_FIFO at this priority (`gateway
    /// --realtime`; 1–99): cuts the idle latency's wake-up tail.
    #[arg(long, value_name = "PRIO", value_parser = clap::value_parser!(u8).range(1..=99))]
    realtime: Option<u8>,
    /// Let the gateway spin instead of sleeping (`gateway --busy-poll`; one core always busy).
    #[arg(long, conflicts_with = "realtime")]
    busy_poll: bool,
    /// The gateway's packet I/O (`gateway --io`): af_xdp, packet, auto or af_xdp_generic.
    #[arg(long, value_name = "af_xdp|packet|auto|af_xdp_generic")]
    io: Option<String>,
    /// Forwarding threads, each with a shard of the hosts (`gateway --workers`).
    #[arg(long, value_name = "N")]
    workers: Option<u16>,
    /// Transmit and receive queues of each veth pair, as a multi-queue NIC has (a frame
    /// arrives on the queue its sender sent it on; the AF_XDP back end serves every queue).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    queues: u32,
    /// The gateway reads its disciplines (and whatever else it names) from this TOML file
    /// (`gateway --config`; --egress/--ingress are then not passed), so `debloat gateway
    /// reload` can change them.
    #[arg(long, value_name = "FILE")]
    config: Option<std::path::PathBuf>,
    /// Mark DSCP by qosify's files before the disciplines (`gateway --classify`).
    #[arg(long, value_name = "FILE")]
    classify: Option<std::path::PathBuf>,
    /// LibreQoS's network.json (`gateway --network`, with --devices): the disciplines are its
    /// circuit trees (--egress/--ingress are then not passed).
    #[arg(
        long,
        value_name = "FILE",
        requires = "devices",
        conflicts_with = "config"
    )]
    network: Option<std::path::PathBuf>,
    /// LibreQoS's ShapedDevices.csv (`gateway --devices`).
    #[arg(long, value_name = "FILE", requires = "network")]
    devices: Option<std::path::PathBuf>,
    /// Namespace name prefix: PREFIX-client, PREFIX-gw, PREFIX-server.
    #[arg(long, default_value = "dbl")]
    prefix: String,
}

/// Arguments of `testbed down`.
#[derive(clap::Args, Debug)]
pub struct DownArgs {
    /// Namespace name prefix.
    #[arg(long, default_value = "dbl")]
    prefix: String,
}

/// Arguments of `testbed tcp-sink`.
#[derive(clap::Args, Debug)]
pub struct SinkArgs {
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0:5201")]
    listen: SocketAddr,
    /// Stop after this many seconds.
    #[arg(long, default_value_t = 60.0)]
    seconds: f64,
    /// Also print each connection's goodput every this many seconds (0: only the totals).
    #[arg(long, default_value_t = 0.0)]
    interval: f64,
    /// Leave each connection's first this many seconds (from its first byte) out of its total,
    /// to skip past slow start and the first loss epochs, as iperf3's --omit does.
    #[arg(long, default_value_t = 0.0)]
    omit: f64,
}

/// Arguments of `testbed tcp-send`.
#[derive(clap::Args, Debug)]
pub struct SendArgs {
    /// The sink.
    #[arg(long)]
    to: SocketAddr,
    /// Parallel connections.
    #[arg(long, default_value_t = 1)]
    streams: u32,
    /// Seconds to send.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Congestion control (TCP_CONGESTION), e.g. cubic or bbr.
    #[arg(long, default_value = "cubic")]
    cc: String,
    /// Send from this local address (e.g. a second host address in the client namespace).
    #[arg(long)]
    bind: Option<std::net::IpAddr>,
    /// TOS byte of every segment, e.g. 0x20 for DSCP CS1 (CAKE's Bulk tin), 0xb8 for EF.
    #[arg(long, default_value = "0", value_parser = parse_tos)]
    tos: u8,
}

fn parse_tos(s: &str) -> Result<u8, String> {
    let v = match s.strip_prefix("0x") {
        Some(h) => u8::from_str_radix(h, 16),
        None => s.parse(),
    };
    v.map_err(|_| format!("`{s}`: a TOS byte, 0–255 or 0x00–0xff"))
}

/// Run the command.
pub fn run(a: &Args) -> Result<()> {
    match &a.cmd {
        Cmd::Up(u) => up(u),
        Cmd::Down(d) => {
            testbed::down(&d.prefix)?;
            println!("testbed {} removed", d.prefix);
            Ok(())
        }
        Cmd::TcpSink(s) => sink(s),
        Cmd::TcpSend(s) => send(s),
        Cmd::DnsServe(a) => crate::testbed_dns::serve(a),
        Cmd::DnsAsk(a) => crate::testbed_dns::ask(a),
        Cmd::Churn(a) => crate::testbed_churn::churn(a),
        Cmd::ChurnServe(a) => crate::testbed_churn::serve(a),
        Cmd::SendFrames(f) => send_frames(f),
        Cmd::Blast(b) => blast(b),
        Cmd::Capture(c) => capture(c),
    }
}

/// `--rate DOWN/UP` (or one for both) in netem's words: `rate R`, or a trace with its modem
/// (`rate trace FILE buffer N`, the file made absolute: the gateway runs elsewhere).
fn link_rates(u: &UpArgs) -> Result<(String, String)> {
    let (down, upr) = match u.rate.split_once('/') {
        Some((d, up)) => (d, up),
        None => (u.rate.as_str(), u.rate.as_str()),
    };
    let rate = |s: &str| -> Result<String> {
        match s.strip_prefix("trace:") {
            Some(f) => {
                let path =
                    std::fs::canonicalize(f).with_context(|| format!("--rate {}: {f}", u.rate))?;
                Ok(format!(
                    "rate trace {} buffer {}",
                    path.display(),
                    u.trace_buffer
                ))
            }
            None => {
                crate::rates::check_rate("--rate", s)?;
                Ok(format!(
                    "rate {}",
                    fmt_rate(parse_rate(s).with_context(|| format!("--rate {}", u.rate))?)
                ))
            }
        }
    };
    Ok((rate(down)?, rate(upr)?))
}

/// The gateway flags `testbed up` passes on as they are.
fn extra_gateway_args(u: &UpArgs) -> Result<Vec<String>> {
    let mut gateway_args = Vec::new();
    for (flag, v) in [
        ("--autorate-egress", &u.autorate_egress),
        ("--autorate-ingress", &u.autorate_ingress),
        ("--autorate-mode", &u.autorate_mode),
        ("--reflectors", &u.reflectors),
    ] {
        if let Some(v) = v {
            gateway_args.extend([flag.to_string(), v.clone()]);
        }
    }
    if u.reflectors.is_some() {
        let [client, _, _] = testbed::namespaces(&u.prefix);
        gateway_args.extend(["--ping-netns".into(), client]);
    }
    if let Some(port) = u.metrics {
        gateway_args.extend(["--metrics".into(), port.to_string()]);
    }
    if let Some(port) = u.http {
        gateway_args.extend(["--http".into(), port.to_string()]);
    }
    if let Some(cpu) = u.cpu {
        gateway_args.extend(["--cpu".into(), cpu.to_string()]);
    }
    if let Some(prio) = u.realtime {
        gateway_args.extend(["--realtime".into(), prio.to_string()]);
    }
    if u.busy_poll {
        gateway_args.push("--busy-poll".into());
    }
    if let Some(io) = &u.io {
        gateway_args.extend(["--io".into(), io.clone()]);
    }
    if let Some(n) = u.workers {
        gateway_args.extend(["--workers".into(), n.to_string()]);
    }
    if let Some(f) = &u.classify {
        let f = std::fs::canonicalize(f).with_context(|| format!("--classify {}", f.display()))?;
        gateway_args.extend(["--classify".into(), f.to_string_lossy().into_owned()]);
    }
    Ok(gateway_args)
}

fn up(u: &UpArgs) -> Result<()> {
    if let Err(why) = testbed::available() {
        bail!("cannot build a testbed here: {why}");
    }
    let (down_bps, up_bps) = link_rates(u)?;
    let rtt = parse_time(&u.rtt).with_context(|| format!("--rtt {}", u.rtt))?;
    for (s, what) in [(&u.egress, "--egress"), (&u.ingress, "--ingress")] {
        s.parse::<debloat_core::QdiscSpec>()
            .with_context(|| format!("{what} \"{s}\""))?;
    }
    let link = |rate: &str| {
        format!("{rate} delay {} {}", fmt_time(rtt / 2), u.impair)
            .trim_end()
            .to_string()
    };
    for l in [link(&up_bps), link(&down_bps)] {
        let (rest, _) = crate::link_trace::emulation_words(&l)?;
        rest.parse::<debloat_gateway::Emulation>()
            .with_context(|| format!("--impair \"{}\"", u.impair))?;
    }
    let file = |f: &std::path::Path, what: &str| -> Result<String> {
        let f = std::fs::canonicalize(f).with_context(|| format!("{what} {}", f.display()))?;
        Ok(f.to_string_lossy().into_owned())
    };
    let mut gateway_args: Vec<String> = match (&u.config, &u.network, &u.devices) {
        (Some(f), _, _) => vec!["--config".into(), file(f, "--config")?],
        (None, Some(n), Some(d)) => vec![
            "--network".into(),
            file(n, "--network")?,
            "--devices".into(),
            file(d, "--devices")?,
        ],
        _ => vec![
            "--egress".into(),
            u.egress.clone(),
            "--ingress".into(),
            u.ingress.clone(),
        ],
    };
    gateway_args.extend([
        "--emulate-egress".into(),
        link(&up_bps),
        "--emulate-ingress".into(),
        link(&down_bps),
    ]);
    gateway_args.extend(extra_gateway_args(u)?);
    if crate::rates::slow_allowed() {
        gateway_args.push("--allow-slow-rate".into());
    }
    let setup = Setup {
        prefix: u.prefix.clone(),
        exe: std::env::current_exe()?,
        gateway_args,
    };
    testbed::build_namespaces_with_queues(&u.prefix, u.queues)?;
    if let Err(e) = testbed::start_gateway(&setup) {
        let _ = testbed::down(&u.prefix);
        return Err(e.into());
    }
    let [c, g, s] = testbed::namespaces(&u.prefix);
    println!(
        "testbed {p} up: {c} ({}, {}) ⇄ {g} ⇄ {s} ({}, {})\n  client → server: {} then {}\n  server → client: {} then {}\n  stats: debloat gateway stats --control {}\n  log:   {}\n  e.g.   ip netns exec {c} ping {}",
        testbed::CLIENT_V4,
        testbed::CLIENT_V6,
        testbed::SERVER_V4,
        testbed::SERVER_V6,
        u.egress,
        link(&up_bps),
        u.ingress,
        link(&down_bps),
        testbed::control_socket(&u.prefix).display(),
        testbed::log_file(&u.prefix).display(),
        testbed::SERVER_V4,
        p = u.prefix
    );
    Ok(())
}

fn sink(a: &SinkArgs) -> Result<()> {
    let cfg = bulk::SinkConfig {
        listen: a.listen,
        duration: Duration::from_secs_f64(a.seconds),
        omit: Duration::from_secs_f64(a.omit),
        interval: (a.interval > 0.0).then(|| Duration::from_secs_f64(a.interval)),
    };
    let mut reported: Vec<u64> = Vec::new();
    let conns = bulk::sink(&cfg, |at, conns| {
        let t = at.as_secs_f64();
        reported.resize(conns.len(), 0);
        let rates: Vec<String> = conns
            .iter()
            .zip(reported.iter_mut())
            .enumerate()
            .map(|(i, (c, r))| {
                let mbps = (c.bytes - *r) as f64 * 8.0 / a.interval / 1e6;
                *r = c.bytes;
                format!("#{} {mbps:.2}", i + 1)
            })
            .collect();
        println!(
            "interval {:.1}-{t:.1} s (Mbit/s): {}",
            t - a.interval,
            rates.join(" ")
        );
    })?;
    let omitted = if a.omit > 0.0 {
        format!(" (first {} s omitted)", a.omit)
    } else {
        String::new()
    };
    for (i, c) in conns.iter().enumerate() {
        let (bps, span) = c.goodput_bps(cfg.omit);
        println!(
            "connection {} received {} bytes in {:.3} s{omitted}: {:.3} Mbit/s",
            i + 1,
            c.counted,
            span.as_secs_f64(),
            bps / 1e6
        );
    }
    Ok(())
}

fn send(a: &SendArgs) -> Result<()> {
    let total = bulk::send(&bulk::SendConfig {
        to: a.to,
        streams: a.streams,
        duration: Duration::from_secs_f64(a.seconds),
        cc: a.cc.clone(),
        bind: a.bind,
        tos: a.tos,
    })
    .with_context(|| format!("tcp-send --to {} --cc {}", a.to, a.cc))?;
    println!(
        "sent {total} bytes on {} connection(s) with {} in {} s",
        a.streams, a.cc, a.seconds
    );
    Ok(())
}

fn send_frames(a: &FramesArgs) -> Result<()> {
    let f = loadgen::odd_frame(&a.kind).map_err(|e| anyhow::anyhow!("--kind {e}"))?;
    let s = debloat_gateway::sys::PacketSocket::open_sender(&a.iface)?;
    let mut sent = 0;
    for _ in 0..a.count {
        if s.send(&f).is_ok() {
            sent += 1;
        }
    }
    println!("sent {sent} {} frames of {} bytes", a.kind, f.len());
    println!("frame: {}", loadgen::hex(&f));
    Ok(())
}

/// Print every frame that arrives on an interface for a while, one hex line each.
fn capture(a: &CaptureArgs) -> Result<()> {
    let mut s = debloat_gateway::sys::PacketSocket::open(&a.iface)?;
    let end = Instant::now() + Duration::from_secs_f64(a.seconds);
    let (mut frames, mut last, mut gap) = (0u64, 0u64, 0u64);
    while Instant::now() < end {
        match s.recv_frame()? {
            Some(debloat_gateway::sys::Received::Frame(_)) if a.gaps => {
                let t = s.last_stamp_ns();
                if last > 0 {
                    gap = gap.max(t.saturating_sub(last));
                }
                (frames, last) = (frames + 1, t);
            }
            Some(debloat_gateway::sys::Received::Frame(f)) => println!("{}", loadgen::hex(&f)),
            Some(debloat_gateway::sys::Received::Oversized(n)) => println!("oversized {n}"),
            Some(debloat_gateway::sys::Received::Super(h, f)) => {
                println!("super-frame {} bytes, gso_size {}", f.len(), h.gso_size)
            }
            None => {
                let left = end.saturating_duration_since(Instant::now());
                debloat_gateway::sys::wait(
                    [std::os::fd::AsRawFd::as_raw_fd(&s)],
                    Some(left.as_nanos() as u64),
                )?;
            }
        }
    }
    if a.gaps {
        println!("frames {frames} longest gap {} us", gap / 1000);
    }
    Ok(())
}

fn blast(a: &BlastArgs) -> Result<()> {
    if let Some(cpu) = a.cpu {
        debloat_gateway::sys::pin_to_cpu(cpu)?;
    }
    let src = std::fs::read_to_string(format!("/sys/class/net/{}/address", a.iface))
        .with_context(|| format!("no interface `{}` here", a.iface))?;
    let b = loadgen::Blast {
        frame_len: a.size,
        flows: a.flows,
        pps: a.pps,
        duration: Duration::from_secs_f64(a.seconds.max(0.0)),
        src_mac: loadgen::parse_mac(src.trim()).map_err(anyhow::Error::msg)?,
        dst_mac: loadgen::parse_mac(&a.dst_mac).map_err(|e| anyhow::anyhow!("--dst-mac: {e}"))?,
        src_ip: a.src_ip.octets(),
        dst_ip: a.dst_ip.octets(),
        spread_sources: a.spread_sources,
    };
    let s = debloat_gateway::sys::PacketSocket::open_sender(&a.iface)?;
    let r = b.run(&s)?;
    println!(
        "{{\"sent\": {}, \"refused\": {}, \"elapsed_s\": {:.6}}}",
        r.sent,
        r.refused,
        r.elapsed.as_secs_f64()
    );
    Ok(())
}
