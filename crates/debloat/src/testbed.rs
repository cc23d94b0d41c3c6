//! `debloat testbed up|down`: client, gateway and server network namespaces with the gateway
//! emulating the bottleneck; and two small traffic tools to run inside them (`tcp-sink`,
//! `tcp-send`: bulk TCP with a chosen congestion control, counting what was received).

use anyhow::{bail, Context, Result};
use debloat_core::units::{fmt_rate, fmt_time, parse_rate, parse_time};
use debloat_gateway::testbed::{self, Setup};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
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
    Up(UpArgs),
    /// Stop the gateway and remove the namespaces.
    Down(DownArgs),
    /// Accept TCP connections and count the bytes received (run it in the server namespace).
    TcpSink(SinkArgs),
    /// Bulk TCP uploads to a sink for a while; prints goodput as the sink counted it.
    TcpSend(SendArgs),
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
    /// Emulated bottleneck rate, both directions or DOWN/UP.
    #[arg(long, default_value = "10Mbit")]
    rate: String,
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
        Cmd::SendFrames(f) => send_frames(f),
        Cmd::Blast(b) => blast(b),
        Cmd::Capture(c) => capture(c),
    }
}

fn up(u: &UpArgs) -> Result<()> {
    if let Err(why) = testbed::available() {
        bail!("cannot build a testbed here: {why}");
    }
    let (down, upr) = match u.rate.split_once('/') {
        Some((d, up)) => (d, up),
        None => (u.rate.as_str(), u.rate.as_str()),
    };
    let rate = |s: &str| parse_rate(s).with_context(|| format!("--rate {}", u.rate));
    let (down_bps, up_bps) = (rate(down)?, rate(upr)?);
    let rtt = parse_time(&u.rtt).with_context(|| format!("--rtt {}", u.rtt))?;
    for (s, what) in [(&u.egress, "--egress"), (&u.ingress, "--ingress")] {
        s.parse::<debloat_core::QdiscSpec>()
            .with_context(|| format!("{what} \"{s}\""))?;
    }
    let link = |bps: u64| {
        format!(
            "rate {} delay {} {}",
            fmt_rate(bps),
            fmt_time(rtt / 2),
            u.impair
        )
        .trim_end()
        .to_string()
    };
    link(up_bps)
        .parse::<debloat_gateway::Emulation>()
        .with_context(|| format!("--impair \"{}\"", u.impair))?;
    let mut gateway_args: Vec<String> = vec![
        "--egress".into(),
        u.egress.clone(),
        "--ingress".into(),
        u.ingress.clone(),
        "--emulate-egress".into(),
        link(up_bps),
        "--emulate-ingress".into(),
        link(down_bps),
    ];
    if let Some(port) = u.metrics {
        gateway_args.extend(["--metrics".into(), port.to_string()]);
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
    let setup = Setup {
        prefix: u.prefix.clone(),
        exe: std::env::current_exe()?,
        gateway_args,
    };
    testbed::up(&setup)?;
    let [c, g, s] = testbed::namespaces(&u.prefix);
    println!(
        "testbed {p} up: {c} ({}, {}) ⇄ {g} ⇄ {s} ({}, {})\n  client → server: {} then {}\n  server → client: {} then {}\n  stats: debloat gateway stats --control {}\n  log:   {}\n  e.g.   ip netns exec {c} ping {}",
        testbed::CLIENT_V4,
        testbed::CLIENT_V6,
        testbed::SERVER_V4,
        testbed::SERVER_V6,
        u.egress,
        link(up_bps),
        u.ingress,
        link(down_bps),
        testbed::control_socket(&u.prefix).display(),
        testbed::log_file(&u.prefix).display(),
        testbed::SERVER_V4,
        p = u.prefix
    );
    Ok(())
}

/// One accepted connection of `tcp-sink`.
#[derive(Default)]
struct Conn {
    /// Bytes received in all.
    bytes: u64,
    /// Bytes received after the omitted start (`--omit`).
    counted: u64,
    /// When the first byte arrived.
    first: Option<Instant>,
    /// When the last byte arrived.
    last: Option<Instant>,
    /// `bytes` at the previous interval report.
    reported: u64,
}

/// Read one connection until it closes or `end`, counting into `c`. A blocking read, so the
/// data is taken as soon as it arrives. When the sink polled its sockets every millisecond, a
/// BBR sender's bandwidth estimate rose above the link's rate and it kept a standing queue of
/// up to a BDP in a FIFO where iperf3's receiver left none (FIFO-DEPTH's BBR test): a receiver
/// that has not read its data holds back ACKs that would shrink the window, and the bunched
/// ACKs inflate BBR's delivery-rate samples.
fn drain(mut stream: TcpStream, c: &std::sync::Mutex<Conn>, end: Instant, omit: Duration) {
    let mut buf = vec![0u8; 1 << 16];
    if stream
        .set_read_timeout(Some(Duration::from_millis(50)))
        .is_err()
    {
        return;
    }
    while Instant::now() < end {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let now = Instant::now();
                let Ok(mut c) = c.lock() else { break };
                let first = *c.first.get_or_insert(now);
                c.last = Some(now);
                c.bytes += n as u64;
                if now - first >= omit {
                    c.counted += n as u64;
                }
            }
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut
                    || e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
}

fn sink(a: &SinkArgs) -> Result<()> {
    use std::sync::{Arc, Mutex};
    let l = TcpListener::bind(a.listen).with_context(|| format!("listening on {}", a.listen))?;
    l.set_nonblocking(true)?;
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(a.seconds);
    let omit = Duration::from_secs_f64(a.omit);
    let mut conns: Vec<Arc<Mutex<Conn>>> = Vec::new();
    let mut readers = Vec::new();
    let every = (a.interval > 0.0).then(|| Duration::from_secs_f64(a.interval));
    let mut next_report = every.map(|e| start + e);
    while Instant::now() < end {
        if let (Some(e), Some(at)) = (every, next_report) {
            if Instant::now() >= at {
                let t = (at - start).as_secs_f64();
                let rates: Vec<String> = conns
                    .iter()
                    .enumerate()
                    .map(|(i, c)| {
                        let mbps = c.lock().map_or(0.0, |mut c| {
                            let r = (c.bytes - c.reported) as f64 * 8.0 / e.as_secs_f64() / 1e6;
                            c.reported = c.bytes;
                            r
                        });
                        format!("#{} {mbps:.2}", i + 1)
                    })
                    .collect();
                println!(
                    "interval {:.1}-{t:.1} s (Mbit/s): {}",
                    t - e.as_secs_f64(),
                    rates.join(" ")
                );
                next_report = Some(at + e);
            }
        }
        match l.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false)?;
                let c = Arc::new(Mutex::new(Conn::default()));
                conns.push(Arc::clone(&c));
                readers.push(std::thread::spawn(move || drain(stream, &c, end, omit)));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(1)),
        }
    }
    for r in readers {
        let _ = r.join();
    }
    for (i, c) in conns.iter().enumerate() {
        let c = c
            .lock()
            .map_err(|_| anyhow::anyhow!("a reader thread panicked"))?;
        // Goodput over the counted part: from the first byte plus the omitted start to the last.
        let secs = match (c.first, c.last) {
            (Some(f), Some(l)) => l
                .saturating_duration_since(f + omit)
                .as_secs_f64()
                .max(1e-3),
            _ => 1.0,
        };
        let omitted = if a.omit > 0.0 {
            format!(" (first {} s omitted)", a.omit)
        } else {
            String::new()
        };
        println!(
            "connection {} received {} bytes in {secs:.3} s{omitted}: {:.3} Mbit/s",
            i + 1,
            c.counted,
            c.counted as f64 * 8.0 / secs / 1e6
        );
    }
    Ok(())
}

fn send(a: &SendArgs) -> Result<()> {
    let mut threads = Vec::new();
    for _ in 0..a.streams.max(1) {
        let sock = socket2::Socket::new(
            socket2::Domain::for_address(a.to),
            socket2::Type::STREAM,
            Some(socket2::Protocol::TCP),
        )?;
        sock.set_tcp_congestion(a.cc.as_bytes())
            .with_context(|| format!("--cc {}: not available in this kernel (see /proc/sys/net/ipv4/tcp_available_congestion_control)", a.cc))?;
        if let Some(ip) = a.bind {
            sock.bind(&SocketAddr::new(ip, 0).into())
                .with_context(|| format!("--bind {ip}: not an address of this host"))?;
        }
        sock.connect(&a.to.into())
            .with_context(|| format!("connecting to {}", a.to))?;
        let mut s: TcpStream = sock.into();
        let secs = a.seconds;
        threads.push(std::thread::spawn(move || -> std::io::Result<u64> {
            let buf = vec![0x5au8; 1 << 16];
            let end = Instant::now() + Duration::from_secs_f64(secs);
            let mut sent = 0u64;
            s.set_write_timeout(Some(Duration::from_millis(200)))?;
            while Instant::now() < end {
                match s.write(&buf) {
                    Ok(n) => sent += n as u64,
                    Err(e)
                        if e.kind() == std::io::ErrorKind::WouldBlock
                            || e.kind() == std::io::ErrorKind::TimedOut => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(sent)
        }));
    }
    let mut total = 0;
    for t in threads {
        total += t
            .join()
            .map_err(|_| anyhow::anyhow!("a sender thread panicked"))??;
    }
    println!(
        "sent {total} bytes on {} connection(s) with {} in {} s",
        a.streams, a.cc, a.seconds
    );
    Ok(())
}

fn send_frames(a: &FramesArgs) -> Result<()> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x99, 0x08, 0x00]);
    match a.kind.as_str() {
        "garbage" => f.extend_from_slice(&[0xff; 46]),
        "truncated" => {
            // IPv4, IHL 5, total length 1500, UDP, 198.18.1.2 → 198.18.2.2; 100 bytes present.
            let mut ip = [0u8; 100];
            ip[..20].copy_from_slice(&[
                0x45, 0, 0x05, 0xdc, 0, 0, 0x40, 0, 64, 17, 0, 0, 198, 18, 1, 2, 198, 18, 2, 2,
            ]);
            f.extend_from_slice(&ip);
        }
        "oversized" => f.resize(9100, 0),
        "vlan" | "qinq" => {
            let b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0x99], [0xff; 6])
                .ipv4([198, 18, 1, 2], [198, 18, 2, 2], 64)
                .udp(4000, 9);
            f.clear();
            b.write(&mut f, b"tagged")?;
            let mut tags = Vec::new();
            if a.kind == "qinq" {
                tags.extend_from_slice(&[0x88, 0xa8, 0x00, 200]);
            }
            tags.extend_from_slice(&[0x81, 0x00, 0xa0, 100]);
            f.splice(12..12, tags);
        }
        k => bail!("--kind {k}: expected garbage, truncated, oversized, vlan or qinq"),
    }
    let s = debloat_gateway::sys::PacketSocket::open_sender(&a.iface)?;
    let mut sent = 0;
    for _ in 0..a.count {
        if s.send(&f).is_ok() {
            sent += 1;
        }
    }
    println!("sent {sent} {} frames of {} bytes", a.kind, f.len());
    println!("frame: {}", hex(&f));
    Ok(())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Print every frame that arrives on an interface for a while, one hex line each.
fn capture(a: &CaptureArgs) -> Result<()> {
    let mut s = debloat_gateway::sys::PacketSocket::open(&a.iface)?;
    let end = Instant::now() + Duration::from_secs_f64(a.seconds);
    while Instant::now() < end {
        match s.recv_frame()? {
            Some(debloat_gateway::sys::Received::Frame(f)) => println!("{}", hex(&f)),
            Some(debloat_gateway::sys::Received::Oversized(n)) => println!("oversized {n}"),
            None => {
                let left = end.saturating_duration_since(Instant::now());
                debloat_gateway::sys::wait(
                    [std::os::fd::AsRawFd::as_raw_fd(&s)],
                    Some(left.as_nanos() as u64),
                )?;
            }
        }
    }
    Ok(())
}

/// `aa:bb:cc:dd:ee:ff` → bytes.
pub fn parse_mac(s: &str) -> Result<[u8; 6]> {
    let mut mac = [0u8; 6];
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        bail!("MAC address `{s}`: expected six hex bytes like 02:00:00:00:00:01");
    }
    for (m, p) in mac.iter_mut().zip(parts) {
        *m = u8::from_str_radix(p, 16)
            .with_context(|| format!("MAC address `{s}`: `{p}` is not a hex byte"))?;
    }
    Ok(mac)
}

fn blast(a: &BlastArgs) -> Result<()> {
    if let Some(cpu) = a.cpu {
        debloat_gateway::sys::pin_to_cpu(cpu)?;
    }
    let src = std::fs::read_to_string(format!("/sys/class/net/{}/address", a.iface))
        .with_context(|| format!("no interface `{}` here", a.iface))?;
    let b = debloat_gateway::loadgen::Blast {
        frame_len: a.size,
        flows: a.flows,
        pps: a.pps,
        duration: Duration::from_secs_f64(a.seconds.max(0.0)),
        src_mac: parse_mac(src.trim())?,
        dst_mac: parse_mac(&a.dst_mac)?,
        src_ip: a.src_ip.octets(),
        dst_ip: a.dst_ip.octets(),
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
