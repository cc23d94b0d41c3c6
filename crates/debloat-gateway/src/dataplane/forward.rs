//! The forwarding loop: two AF_PACKET sockets, two [`Path`]s, a monotonic clock, and a control
//! socket. Frames from the LAN go through the egress path to the WAN; frames from the WAN go
//! through the ingress path to the LAN. The loop sleeps in `ppoll` until a socket is readable or
//! the next frame is due (nanosecond deadlines), so shaping is as precise as the kernel's timer.
//! With [`Config::busy_poll`] it never sleeps: it watches the receive rings' slots in memory
//! (no system call) and the clock in a tight loop, as DPDK-style forwarders do. That takes the
//! process's wake-up (a context switch, and on a VM an idle CPU's exit) out of every frame's
//! path, at the price of one core kept 100 % busy even when no frame comes.
//!
//! The gateway forwards at layer 2, like a bridge: ARP, IPv6 neighbour discovery and every
//! other frame pass through the disciplines as their own flows, so the hosts on either side
//! address each other directly.

use super::send::{pass_through, send_due, SEND_BATCH};
use crate::control::ControlServer;
use crate::intake::{receive, Intake};
use crate::metrics::Exporter;
use crate::path::Path;
use crate::port::{Backend, IoChoice, Port};
use crate::sys::{wait, LinkEvents};
use debloat_core::classify::circuits::Circuits;
use debloat_core::classify::qosify::{self, Classifier, Direction};
use debloat_core::link::Emulation;
use debloat_core::{FlowHasher, QdiscSpec};
use std::io;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

/// How to run.
#[derive(Clone, Debug)]
pub struct Config {
    /// LAN-side interface (client side).
    pub lan: String,
    /// WAN-side interface (server side).
    pub wan: String,
    /// Discipline for LAN → WAN.
    pub egress: QdiscSpec,
    /// Discipline for WAN → LAN.
    pub ingress: QdiscSpec,
    /// Emulated link LAN → WAN.
    pub emulate_egress: Emulation,
    /// Emulated link WAN → LAN.
    pub emulate_ingress: Emulation,
    /// A capacity trace with a modem's FIFO behind the LAN → WAN emulation (`rate trace FILE`).
    pub modem_egress: Option<debloat_core::link::ModemSpec>,
    /// The same for WAN → LAN.
    pub modem_ingress: Option<debloat_core::link::ModemSpec>,
    /// A shaper-rate controller on the LAN → WAN discipline (it must be cake).
    pub autorate_egress: Option<crate::autorate::AutorateConfig>,
    /// The same for WAN → LAN.
    pub autorate_ingress: Option<crate::autorate::AutorateConfig>,
    /// Reflector pings for cake-autorate's mode (its only delay signal).
    pub reflectors: Option<crate::pinger::PingerConfig>,
    /// Seed of the flow hash and of the emulation's randomness.
    pub seed: u64,
    /// Unix socket for `debloat gateway stats` (created 0600).
    pub control: Option<PathBuf>,
    /// Address of the Prometheus endpoint (`GET /metrics`), if any.
    pub metrics: Option<std::net::SocketAddr>,
    /// Address of the live view (`GET /`, `/api/snapshot`, `/metrics`), if any.
    pub http: Option<std::net::SocketAddr>,
    /// Spin instead of sleeping between frames (one core stays busy; lower latency).
    pub busy_poll: bool,
    /// The packet I/O back end (`--io`).
    pub io: IoChoice,
    /// Forward frames untouched, with no discipline, classifier or emulation: the ceiling of
    /// the I/O back end, for benchmarks (`--passthrough`).
    pub passthrough: bool,
    /// Forwarding threads, each with a shard of the hosts (`--workers`; 1: one thread).
    pub workers: usize,
    /// The CPU of each worker (`--cores`), if they are pinned.
    pub cores: Option<Vec<usize>>,
    /// qosify's rules, marking DSCP before the disciplines (one stage for both directions:
    /// replies take the class of their flow).
    pub classify: Option<qosify::Config>,
    /// LibreQoS's circuits (`--network`/`--devices`): each packet to its subscriber's class of
    /// the HTB trees `egress` and `ingress` are; instead of `classify`.
    pub circuits: Option<std::sync::Arc<Circuits>>,
    /// How many circuits the statistics and Prometheus list, the busiest first (0: all).
    pub circuit_metrics: usize,
}

pub use crate::intake::{RingWait, MAX_FRAME};

pub use crate::snapshot::{ClassifyStats, DirectionStats, Snapshot};

pub(crate) struct Side {
    pub(crate) path: Path,
    pub(crate) autorate: Option<crate::autorate::Control>,
    pub(crate) spec: QdiscSpec,
    intake: Intake,
    tx_errors: u64,
}

/// Reads the configuration again (the command line's files), or says why it cannot
/// (`gateway reload`, SIGHUP; applied by [`crate::reload`]).
pub type Reloader = Box<dyn FnMut() -> Result<Config, String> + Send>;

/// The gateway.
pub struct Gateway {
    pub(crate) cfg: Config,
    pub(crate) lan: Port,
    pub(crate) wan: Port,
    /// Why AF_XDP was not used on the LAN and the WAN side (`--io auto`), if it was not.
    fallback: [Option<String>; 2],
    pub(crate) egress: Side,
    pub(crate) ingress: Side,
    clock: crate::intake::Clock,
    control: Option<ControlServer>,
    metrics: Option<Exporter>,
    /// Interfaces appearing, going and changing (None where rtnetlink cannot be joined: the
    /// periodic check still finds a re-made interface).
    links: Option<LinkEvents>,
    pub(crate) marker: Option<Classifier>,
    /// The circuit stage, when the disciplines are LibreQoS's trees.
    pub(crate) circuits: Option<Circuits>,
    /// Re-reads the configuration for `reload` (SIGHUP, `debloat gateway reload`).
    pub(crate) reloader: Option<crate::reload::ReloadReader>,
    /// Set (by a SIGHUP handler) to ask the loop to reload.
    pub(crate) reload_asked: std::sync::Arc<AtomicBool>,
    /// The `gateway set` commands applied since the configuration was last read: a reload
    /// says what became of each (issue 46: it used to undo them without a word).
    pub(crate) runtime_sets: Vec<String>,
    /// Reflector pings, when a controller needs them.
    pub(crate) pinger: Option<crate::pinger::Pinger>,
    /// This gateway's place among N workers, when there are several (`crate::worker`).
    pub(crate) shard: Option<crate::worker::ShardRole>,
}

/// How often the forwarding loop hands the Prometheus endpoint fresh numbers.
const PUBLISH_EVERY_NS: u64 = 1_000_000_000;
/// How often the loop checks that each interface is still the one its socket is bound to
/// (besides whenever rtnetlink says a link changed).
const LINK_CHECK_EVERY_NS: u64 = 250_000_000;
/// How often a busy-polling loop looks at the control socket (a system call each time).
const BUSY_CONTROL_EVERY_NS: u64 = 1_000_000;

impl Gateway {
    /// Open the interfaces and the control socket.
    pub fn open(cfg: Config) -> io::Result<Gateway> {
        let [lan, wan] = Port::open_pair(&cfg.lan, &cfg.wan, cfg.io, cfg.busy_poll)?;
        Self::open_with(cfg, lan, wan, None)
    }

    /// Open with the interfaces' ports already open (a worker's fanout members).
    pub(crate) fn open_with(
        cfg: Config,
        (lan, lan_why): (Port, Option<String>),
        (wan, wan_why): (Port, Option<String>),
        shard: Option<crate::worker::ShardRole>,
    ) -> io::Result<Gateway> {
        for (name, why) in [(&cfg.lan, &lan_why), (&cfg.wan, &wan_why)] {
            if let Some(why) = why {
                eprintln!(
                    "{name}: AF_XDP not used ({why}); forwarding through AF_PACKET's TPACKET ring"
                );
            }
        }
        let hasher = FlowHasher::new([cfg.seed, cfg.seed.rotate_left(17) ^ 0x6a09_e667]);
        let side = |spec: &QdiscSpec, emu, modem: &Option<_>, salt| Side {
            path: Path::new(spec, emu, hasher, cfg.seed.wrapping_add(salt)).with_modem(modem),
            autorate: None,
            spec: spec.clone(),
            intake: Intake::default(),
            tx_errors: 0,
        };
        let control = cfg
            .control
            .as_deref()
            .map(ControlServer::spawn)
            .transpose()?;
        let metrics = Exporter::spawn_on(cfg.metrics, cfg.http)?;
        let marker = cfg
            .classify
            .clone()
            .map(|c| Classifier::new(c, qosify::FLOW_SLOTS, hasher).sharing_hash());
        let mut egress = side(&cfg.egress, cfg.emulate_egress, &cfg.modem_egress, 1);
        let mut ingress = side(&cfg.ingress, cfg.emulate_ingress, &cfg.modem_ingress, 2);
        crate::autorate::controllers([&mut egress, &mut ingress], &cfg, shard.as_ref())?;
        // A direction's data is timed by the ACKs the other direction carries: both log.
        if egress.autorate.is_some() || ingress.autorate.is_some() {
            egress.path.log_tcp();
            ingress.path.log_tcp();
        }
        let pinger = crate::autorate::pinger_for(&cfg)?;
        Ok(Gateway {
            shard,
            pinger,
            marker,
            circuits: cfg.circuits.as_deref().cloned(),
            reloader: None,
            reload_asked: std::sync::Arc::new(AtomicBool::new(false)),
            runtime_sets: Vec::new(),
            egress,
            ingress,
            lan,
            wan,
            fallback: [lan_why, wan_why],
            clock: crate::intake::Clock::new(),
            control,
            metrics,
            links: LinkEvents::open().ok(),
            cfg,
        })
    }

    pub(crate) fn now(&self) -> u64 {
        self.clock.now()
    }

    /// Forward until `stop` is set; returns the final numbers.
    pub fn run(&mut self, stop: &AtomicBool) -> io::Result<Snapshot> {
        let mut batch = Vec::with_capacity(SEND_BATCH);
        let mut publish_at = 0;
        let mut control_at = 0;
        let mut links_at = 0;
        while !stop.load(Ordering::Relaxed) {
            let now = self.now();
            if now >= links_at {
                self.check_links();
                self.clock.resync();
                links_at = now + LINK_CHECK_EVERY_NS;
            }
            let (e, i) = (&mut self.egress, &mut self.ingress);
            e.tx_errors += send_due(&mut e.path, &mut self.wan, now, &mut batch);
            i.tx_errors += send_due(&mut i.path, &mut self.lan, now, &mut batch);
            self.shard_tick(now);
            if let Some(m) = &self.metrics {
                if now >= publish_at {
                    m.publish(self.snapshot());
                    publish_at = now + PUBLISH_EVERY_NS;
                }
            }
            let ctl = self.control.as_ref().map_or(-1, |c| c.as_raw_fd());
            let nl = self.links.as_ref().map_or(-1, |l| l.as_raw_fd());
            let ready = if self.cfg.busy_poll {
                self.busy_ready(now, &mut control_at, [ctl, nl])?
            } else {
                let next = [
                    self.egress.path.next_wakeup(),
                    self.ingress.path.next_wakeup(),
                    self.metrics.as_ref().map(|_| publish_at),
                    self.egress.autorate.as_ref().map(|c| c.due()),
                    self.shard.as_ref().map(|r| r.due()),
                    self.ingress.autorate.as_ref().map(|c| c.due()),
                ]
                .into_iter()
                .flatten()
                .min();
                // Wake at least every 100 ms to notice `stop`.
                let timeout = next
                    .map_or(100_000_000, |t| t.saturating_sub(now))
                    .min(100_000_000);
                wait(
                    [self.lan.as_raw_fd(), self.wan.as_raw_fd(), ctl, nl],
                    Some(timeout),
                )?
            };
            self.serve_ready(ready)?;
            if self.reload_asked.swap(false, Ordering::Relaxed) {
                if let Some(e) = self.ask_reload(None) {
                    eprintln!("{e}");
                }
            }
            if let Some(r) = self.poll_reload() {
                eprintln!("{r}");
            }
            self.feed_autorate();
        }
        self.shard_publish();
        Ok(self.snapshot())
    }

    /// A busy-polling turn: the rings read in memory; the control and link sockets (a system
    /// call) only when a millisecond has passed since they were last looked at.
    fn busy_ready(
        &mut self,
        now: u64,
        control_at: &mut u64,
        fds: [i32; 2],
    ) -> io::Result<[bool; 4]> {
        let [ctl_ready, nl_ready] = if now >= *control_at {
            *control_at = now + BUSY_CONTROL_EVERY_NS;
            wait(fds, Some(0))?
        } else {
            [false; 2]
        };
        let r = [
            self.lan.readable(),
            self.wan.readable(),
            ctl_ready,
            nl_ready,
        ];
        // An AF_XDP socket whose NAPI runs here: once a turn, frames waiting or not
        // (io/xdp/busy.rs).
        let polled = self.lan.poll_napi() | self.wan.poll_napi();
        if !polled && r == [false; 4] {
            if matches!(self.lan, Port::Xdp(..)) || matches!(self.wan, Port::Xdp(..)) {
                // In copy mode the kernel's receive work for an AF_XDP socket runs in a NAPI
                // poll, a kernel thread where NAPI is threaded: on a forwarding core of its
                // own, a spinning loop must leave it room.
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        Ok(r)
    }

    /// Act on what the wait found ready: link events, frames from either side, the control
    /// socket.
    fn serve_ready(&mut self, ready: [bool; 4]) -> io::Result<()> {
        if ready[3] {
            if let Some(l) = &self.links {
                l.drain();
            }
            self.check_links();
        }
        if self.cfg.passthrough {
            let e = &mut self.egress;
            if ready[0] {
                e.tx_errors += pass_through(&mut self.lan, &mut self.wan, &mut e.intake)?;
            }
            let i = &mut self.ingress;
            if ready[1] {
                i.tx_errors += pass_through(&mut self.wan, &mut self.lan, &mut i.intake)?;
            }
        } else if ready[0] {
            let m = super::circuits::stage(&mut self.circuits, &mut self.marker, Direction::Up);
            let e = &mut self.egress;
            receive(&mut self.lan, &mut e.intake, &mut e.path, &self.clock, m)?;
        }
        if ready[1] {
            let m = super::circuits::stage(&mut self.circuits, &mut self.marker, Direction::Down);
            let i = &mut self.ingress;
            receive(&mut self.wan, &mut i.intake, &mut i.path, &self.clock, m)?;
        }
        if ready[2] {
            self.serve_control();
        }
        Ok(())
    }

    /// An interface deleted and made again under the same name has a new index, and the old
    /// socket, bound to the old one, would never see a frame again: open one on the new
    /// interface. What the paths hold is kept; frames sent meanwhile were refused and counted.
    fn check_links(&mut self) {
        let (cfg, lan, wan) = (&self.cfg, &mut self.lan, &mut self.wan);
        let worker = self.shard.is_some();
        let [lan_why, wan_why] = &mut self.fallback;
        let mut reopened = false;
        let sides = [
            (lan, &cfg.lan, &mut self.egress, lan_why),
            (wan, &cfg.wan, &mut self.ingress, wan_why),
        ];
        for (i, (sock, name, side, fallback)) in sides.into_iter().enumerate() {
            let Some(now) = crate::sys::ifindex_of(name) else {
                continue;
            };
            if now == sock.ifindex() {
                continue;
            }
            let port = match worker {
                true => crate::worker::reopen_port(cfg, name, i),
                false => Port::open(name, cfg.io, cfg.busy_poll),
            };
            match port {
                Ok((s, why)) => {
                    // Bound while the new interface was still down: drop that error now.
                    let _ = s.take_error();
                    eprintln!(
                        "{name} was made again (index {} → {now}): forwarding on the new one",
                        sock.ifindex()
                    );
                    *sock = s;
                    *fallback = why;
                    side.intake.reopened += 1;
                    reopened = true;
                }
                Err(e) => eprintln!("{name} was made again but cannot be opened yet: {e}"),
            }
        }
        if reopened {
            // A port opened again has a UMEM of its own: the other no longer shares it.
            let shared = self.lan.shares_umem(&self.wan);
            self.lan.mark_shared_umem(shared);
            self.wan.mark_shared_umem(shared);
        }
    }

    /// Hand the controllers what the paths and the pinger saw ([`crate::autorate::feed`]).
    /// Feed the shaper-rate controllers, if any. Without one no clock is read: a clock read
    /// is a system call where there is no vDSO.
    fn feed_autorate(&mut self) {
        if self.egress.autorate.is_none() && self.ingress.autorate.is_none() {
            return;
        }
        let now = self.now();
        let (e, i) = (&mut self.egress, &mut self.ingress);
        let (egress, ingress) = (
            (&mut e.path, &mut e.autorate),
            (&mut i.path, &mut i.autorate),
        );
        crate::autorate::feed(egress, ingress, self.pinger.as_ref(), now);
    }

    /// Where the Prometheus endpoint listens, if it does.
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.metrics
            .as_ref()
            .and_then(|e| e.addr_of(self.cfg.metrics))
    }

    /// Where the live view listens, if it does.
    pub fn http_addr(&self) -> Option<std::net::SocketAddr> {
        self.metrics.as_ref().and_then(|e| e.addr_of(self.cfg.http))
    }

    /// The numbers now: with several workers, the first one's are everyone's (merged from what
    /// the others published last, at most 100 ms ago).
    pub fn snapshot(&self) -> Snapshot {
        let mut s = self.local_snapshot();
        self.merge_shards(&mut s);
        s
    }

    /// This worker's own numbers.
    pub(crate) fn local_snapshot(&self) -> Snapshot {
        let d = |s: &Side, from: &str, to: &str, io: Backend| DirectionStats {
            path: format!("{from} → {to}"),
            io,
            qdisc: s.spec.to_string(),
            link: s.path.emulation().to_string(),
            stats: s.path.qdisc().stats(),
            frames: s.path.counters(),
            intake: s.intake,
            tx_errors: s.tx_errors,
            on_wire: s.path.on_wire(),
            in_buffer: s.path.in_buffer(),
            autorate: s
                .autorate
                .as_ref()
                .map(|c| c.status_with(self.pinger.as_ref())),
        };
        Snapshot {
            uptime_s: self.clock.uptime_s(),
            egress: d(
                &self.egress,
                &self.cfg.lan,
                &self.cfg.wan,
                self.lan.backend(self.fallback[0].as_ref()),
            ),
            ingress: d(
                &self.ingress,
                &self.cfg.wan,
                &self.cfg.lan,
                self.wan.backend(self.fallback[1].as_ref()),
            ),
            classify: self.marker.as_ref().map(ClassifyStats::of),
            circuits: self.circuits.as_ref().map(Circuits::counts),
            circuit_traffic: self.circuit_traffic(),
            workers: self.shard.as_ref().map_or(1, |r| r.shards.len()),
            shards: self.shard_stats().into_iter().collect(),
        }
    }

    fn serve_control(&mut self) {
        let Some(c) = &self.control else { return };
        for req in c.take() {
            if req.line == "reload" {
                let _ = self.ask_reload(Some(req)); // answered once applied
                continue;
            }
            let reply = if let Some(cmd) = req.line.strip_prefix("set ") {
                match self.set(cmd) {
                    Ok(()) => {
                        if let Some(r) = &self.shard {
                            r.shards.broadcast(cmd);
                        }
                        self.runtime_sets.push(cmd.to_string());
                        format!("ok: {cmd}\n")
                    }
                    Err(e) => format!("error: {e}\n"),
                }
            } else if let Some(id) = req.line.strip_prefix("circuit-json ") {
                let id = id.trim().to_string();
                self.ask_circuit(req, &id, true); // answered once every worker has
                continue;
            } else if let Some(id) = req.line.strip_prefix("circuit ") {
                let id = id.trim().to_string();
                self.ask_circuit(req, &id, false);
                continue;
            } else if req.line == "json" {
                serde_json::to_string_pretty(&self.snapshot()).unwrap_or_default() + "\n"
            } else {
                self.snapshot().to_text()
            };
            req.answer(reply);
        }
    }
}

impl Gateway {
    /// A control command: `egress|ingress WORDS` changes a discipline (`bandwidth 8Mbit`),
    /// `emulate-egress|emulate-ingress WORDS` replaces an emulated link (netem's words).
    pub fn set(&mut self, cmd: &str) -> Result<(), crate::control::ChangeError> {
        let (what, words) = cmd.split_once(' ').unwrap_or((cmd, ""));
        match what {
            "egress" | "ingress" => {
                let side = if what == "egress" {
                    &mut self.egress
                } else {
                    &mut self.ingress
                };
                side.path.change_qdisc(words)?;
                side.spec = crate::control::reload::spec_after_set(&side.spec, words);
                Ok(())
            }
            "emulate-egress" | "emulate-ingress" => {
                let emu: Emulation =
                    words
                        .parse()
                        .map_err(|e: debloat_core::link::netem::EmulateError| {
                            crate::control::ChangeError::Words {
                                what: format!("`{words}`"),
                                why: e.0,
                            }
                        })?;
                let side = if what == "emulate-egress" {
                    &mut self.egress
                } else {
                    &mut self.ingress
                };
                side.path.change_emulation(emu)
            }
            other => Err(crate::control::ChangeError::UnknownSetting(
                other.to_string(),
            )),
        }
    }
}
