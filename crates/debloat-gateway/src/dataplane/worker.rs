//! `--workers N`: N forwarding threads, each a [`Gateway`] of its own over a shard of the hosts.
//!
//! Each interface gets one socket per worker, opened in order in one thread, and a program that
//! sends a host's frames, both ways, to the same worker: on AF_PACKET a fanout group's
//! classic-BPF program ([`crate::sys::fanout`]), on AF_XDP the XDP program, with the workers'
//! sockets sharing the queue's UMEM ([`crate::io::xdp::socket`]). Both hash the host's address
//! the same way, so an interface that `--io auto` leaves on AF_PACKET agrees with one on AF_XDP.
//! Each worker then runs the forwarding loop unchanged on its two
//! sockets, with its own disciplines, and every half millisecond takes its share of the shaper's
//! rate ([`crate::shards`]). The first worker serves the control socket and the metrics, merges
//! the others' numbers into `gateway stats`, and passes `gateway set` on to them.
//!
//! `gateway reload` (and SIGHUP) reaches every worker: the first reads the file, applies it, and
//! passes the configuration on; each other worker applies it at its next split (within half a
//! millisecond), so the shaper's total, and the split of it, change together.
//!
//! A rate controller (`--autorate-*`) runs on the first worker and drives the shaper's total:
//! it hears the round trips of the TCP flows (or the reflector pings) the first worker sees,
//! judges the load from every worker's bytes sent and backlog (summed from what each publishes
//! at its splits), and sets the total the workers split ([`Shards::set_total`]).

use crate::forward::{Config, Gateway};
use crate::io::xdp::XdpSocket;
use crate::port::{IoChoice, Port};
use crate::shards::{split, Demand, Shards, SPLIT_EVERY_NS, STANDING_BYTES};
use crate::snapshot::{ShardStats, Snapshot};
use crate::sys::{HostIs, PacketSocket};
use debloat_core::QdiscSpec;
use std::io;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// How often a worker publishes its numbers and takes commands, ns.
const PUBLISH_EVERY_NS: u64 = 100_000_000;
/// The arrival rate's smoothing time, ns.
pub(crate) const SMOOTH_NS: f64 = 20e6;
/// A shard with frames waiting at this share of the last 5 ms of splits counts as busy.
pub(crate) const BUSY_SHARE: f64 = 0.75;
/// The smoothing time of the share of splits at which frames waited, ns.
pub(crate) const CONSTRAINED_NS: f64 = 5e6;

/// A worker's place among the others.
#[derive(Debug)]
pub struct ShardRole {
    /// Its index (the fanout member it is on both interfaces).
    pub index: usize,
    /// What the workers share.
    pub shards: Arc<Shards>,
    /// Its CPU, if pinned.
    pub cpu: Option<usize>,
    split_at: u64,
    publish_at: u64,
    /// Per direction: the discipline's bytes sent and backlog at the last split, and when.
    last: [(u64, u64, u64); 2],
    arrival_bps: [f64; 2],
    /// Per direction: the smoothed share of splits at which frames waited.
    constrained: [f64; 2],
    /// Per direction: an htb tree's split, once the first split has seen it.
    htb: [Option<crate::htb_split::Watch>; 2],
    /// Per direction: the share last set on the shaper.
    share: [Option<u64>; 2],
    /// `--circuit` requests waiting for the other workers' answers (the first worker).
    pub(crate) circuits_waiting: Vec<crate::circuit_asks::Waiting>,
}

impl ShardRole {
    /// When the next split is due.
    pub fn due(&self) -> u64 {
        self.split_at
    }

    /// Forget the shares last set (a reload set the shapers to the file's rates): the next
    /// split sets each again.
    pub(crate) fn forget_shares(&mut self) {
        self.share = [None; 2];
        self.htb = [None, None];
    }
}

/// The shaper's configured rate, bit/s, if the discipline has one the workers can split: cake's
/// `bandwidth`, tbf's `rate` (its `peakrate` stays each worker's). An htb tree is split class by
/// class instead ([`crate::htb_split`]).
fn shaper_bps(spec: &QdiscSpec) -> Option<u64> {
    match spec {
        QdiscSpec::Cake(c) => c.bandwidth_bytes_per_s.map(|b| b * 8),
        QdiscSpec::Tbf(t) => Some(t.rate_bps),
        _ => None,
    }
}

impl Gateway {
    /// When due (every half millisecond): say what arrives, take this worker's share of each shaper; every
    /// 100 ms, publish the numbers and take the commands passed on.
    pub(crate) fn shard_tick(&mut self, now: u64) {
        let Some(role) = self.shard.as_mut().filter(|r| now >= r.split_at) else {
            return;
        };
        role.split_at = now + SPLIT_EVERY_NS;
        self.circuit_asks_tick(now);
        let Some(role) = self.shard.as_mut() else {
            return;
        };
        if let Some(cfg) = role.shards.take_reload(role.index) {
            let index = role.index;
            if let Err(e) = self.apply(for_worker(cfg, index)) {
                eprintln!("worker {index}: the reloaded configuration was refused here: {e}");
            }
        }
        let Some(role) = self.shard.as_mut() else {
            return;
        };
        for (dir, side) in [&mut self.egress, &mut self.ingress]
            .into_iter()
            .enumerate()
        {
            let st = side.path.qdisc().stats();
            let (sent0, backlog0, t0) = role.last[dir];
            let arrived = (st.bytes + st.backlog).saturating_sub(sent0 + backlog0);
            let dt = now.saturating_sub(t0).max(1) as f64;
            let inst = arrived as f64 * 8.0 * 1e9 / dt;
            let a = (dt / SMOOTH_NS).min(1.0);
            role.arrival_bps[dir] += a * (inst - role.arrival_bps[dir]);
            role.last[dir] = (st.bytes, st.backlog, now);
            // Busy: frames waited in the shard's discipline at three quarters of the splits of
            // the last 5 ms, or a queue of two frames stands now. A light shard's share is
            // twice what arrives (see `split`), so its frames wait at most half the time; a
            // flow its share holds back keeps a frame waiting nearly always.
            let constrained = f64::from(u8::from(st.backlog > 0));
            let c = (dt / CONSTRAINED_NS).min(1.0);
            role.constrained[dir] += c * (constrained - role.constrained[dir]);
            let d = Demand {
                arrival_bps: role.arrival_bps[dir],
                busy: role.constrained[dir] >= BUSY_SHARE || st.backlog >= STANDING_BYTES,
            };
            role.shards.publish(role.index, dir, d);
            role.shards
                .publish_counts(role.index, dir, st.bytes, st.backlog);
            if let QdiscSpec::Htb(h) = &side.spec {
                let w = role.htb[dir].get_or_insert_with(|| crate::htb_split::Watch::new(h, now));
                let q = side.path.qdisc_mut().as_mut();
                let took = w.tick(q, &role.shards, role.index, dir, now);
                role.share[dir] = w.total();
                // A large tree splits less often: at most a twentieth of the worker's time.
                role.split_at = role.split_at.max(now + 20 * took);
                continue;
            }
            let demands = role.shards.demands(dir);
            let Some(total) = role.shards.total(dir).or_else(|| shaper_bps(&side.spec)) else {
                role.share[dir] = None;
                continue;
            };
            let mine = split(total, &demands)[role.index];
            let moved = role.share[dir].is_none_or(|s| s.abs_diff(mine) * 200 > s);
            if moved && side.path.qdisc_mut().set_bandwidth(Some(mine)) {
                role.share[dir] = Some(mine);
            }
        }
        if now >= role.publish_at {
            role.publish_at = now + PUBLISH_EVERY_NS;
            self.shard_publish();
            self.take_commands();
        }
    }

    /// Publish this worker's numbers (the first worker merges the others' instead).
    pub(crate) fn shard_publish(&self) {
        let Some(r) = self.shard.as_ref().filter(|r| r.index > 0) else {
            return;
        };
        let s = self.local_snapshot();
        *r.shards.snapshots[r.index]
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(s);
    }

    /// Apply what the first worker passed on.
    fn take_commands(&mut self) {
        let Some(r) = self.shard.as_ref().filter(|r| r.index > 0) else {
            return;
        };
        let index = r.index;
        let cmds = std::mem::take(
            &mut *r.shards.commands[index]
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        );
        for c in cmds {
            if let Err(e) = self.set(&c) {
                eprintln!("worker {index}: set {c}: {e}");
            }
        }
    }

    /// This worker's line in `gateway stats`.
    pub(crate) fn shard_stats(&self) -> Option<ShardStats> {
        let r = self.shard.as_ref()?;
        let (e, i) = (self.egress.path.counters(), self.ingress.path.counters());
        Some(ShardStats {
            worker: r.index,
            cpu: r.cpu,
            egress_received: e.received,
            egress_sent: e.sent,
            ingress_received: i.received,
            ingress_sent: i.sent,
            egress_rate_bps: r.share[0],
            ingress_rate_bps: r.share[1],
        })
    }

    /// On the first worker: everyone's numbers added to its own.
    pub(crate) fn merge_shards(&self, s: &mut Snapshot) {
        let Some(r) = self.shard.as_ref().filter(|r| r.index == 0) else {
            return;
        };
        for slot in r.shards.snapshots.iter().skip(1) {
            if let Some(o) = &*slot.lock().unwrap_or_else(|e| e.into_inner()) {
                s.merge(o);
                s.shards.extend(o.shards.iter().cloned());
            }
        }
    }
}

/// The fanout group of an interface for this gateway (unique among the gateways of a host).
fn group(side: u16) -> u16 {
    ((std::process::id() as u16) << 1) | side
}

/// Each worker's LAN and WAN ports, and why an interface is not on AF_XDP where `auto` fell
/// back: worker `i` is fanout member `i`, or has the `i`th AF_XDP socket, on both interfaces.
fn open_ports(cfg: &Config) -> io::Result<Vec<((Port, Port), Fallback)>> {
    if cfg.io != IoChoice::Packet {
        // Both sides on one UMEM where both take AF_XDP; else each side on its own (which
        // says why a side is not on AF_XDP).
        let modes = cfg.io.xdp_modes();
        if let Ok(pairs) = XdpSocket::open_pair(&cfg.lan, &cfg.wan, cfg.workers, modes) {
            let port = |s, name: &str| Port::xdp(s, name, cfg.busy_poll).map_err(io::Error::other);
            return pairs
                .into_iter()
                .map(|(l, w)| Ok(((port(l, &cfg.lan)?, port(w, &cfg.wan)?), [None, None])))
                .collect();
        }
    }
    let (lan, lan_why) = side_ports(cfg, &cfg.lan, 0, HostIs::Source)?;
    let (wan, wan_why) = side_ports(cfg, &cfg.wan, 1, HostIs::Destination)?;
    Ok(lan
        .into_iter()
        .zip(wan)
        .map(|ports| (ports, [lan_why.clone(), wan_why.clone()]))
        .collect())
}

/// Why AF_XDP was not used on the LAN and the WAN side.
type Fallback = [Option<String>; 2];

/// One interface's port for each worker: AF_XDP sockets sharing the queue's UMEM, the XDP
/// program steering by host; or AF_PACKET sockets in a fanout group, its program steering by
/// host the same way. `side` numbers the fanout group; `host` says which address is the host's.
fn side_ports(
    cfg: &Config,
    ifname: &str,
    side: u16,
    host: HostIs,
) -> io::Result<(Vec<Port>, Option<String>)> {
    let mut why = None;
    if cfg.io != IoChoice::Packet {
        let modes = cfg.io.xdp_modes();
        let xdp = XdpSocket::open_shared(ifname, cfg.workers, host, modes).and_then(|socks| {
            socks
                .into_iter()
                .map(|s| Port::xdp(s, ifname, cfg.busy_poll))
                .collect::<Result<Vec<Port>, String>>()
        });
        match xdp {
            Ok(ports) => return Ok((ports, None)),
            Err(w) if cfg.io == IoChoice::Auto => why = Some(crate::port::auto_reason(w)),
            Err(w) => {
                return Err(io::Error::other(format!(
                    "--io {} on {ifname}: {w}",
                    cfg.io
                )))
            }
        }
    }
    let ports = (0..cfg.workers)
        .map(|_| {
            let s = PacketSocket::open(ifname)?;
            s.join_fanout(group(side), host)?;
            Ok(Port::Packet(s))
        })
        .collect::<io::Result<Vec<Port>>>()?;
    Ok((ports, why))
}

/// A worker's port on interface `ifname` (side 0 the LAN, 1 the WAN) after it was deleted and
/// made again: an AF_PACKET socket rejoining the side's fanout group. Each worker notices on
/// its own, so they cannot make the shared AF_XDP sockets together as at start: a side that
/// was on AF_XDP goes on on AF_PACKET, and says so.
pub(crate) fn reopen_port(
    cfg: &Config,
    ifname: &str,
    side: usize,
) -> io::Result<(Port, Option<String>)> {
    let host = [HostIs::Source, HostIs::Destination][side.min(1)];
    let s = PacketSocket::open(ifname)?;
    s.join_fanout(group(side as u16), host)?;
    let why = (cfg.io != IoChoice::Packet).then(|| {
        format!("{ifname} was made again under {} workers: AF_PACKET in the fanout group (the workers' AF_XDP sockets are made together, at start)", cfg.workers)
    });
    Ok((Port::Packet(s), why))
}

/// What a worker thread needs to start.
struct Start {
    cfg: Config,
    ports: (Port, Port),
    fallback: Fallback,
    index: usize,
    shards: Arc<Shards>,
}

fn role(index: usize, shards: Arc<Shards>, cpu: Option<usize>) -> ShardRole {
    ShardRole {
        index,
        shards,
        cpu,
        split_at: 0,
        publish_at: 0,
        last: [(0, 0, 0); 2],
        arrival_bps: [0.0; 2],
        constrained: [0.0; 2],
        htb: [None, None],
        share: [None; 2],
        circuits_waiting: Vec::new(),
    }
}

impl Start {
    fn open(self) -> io::Result<Gateway> {
        let cpu = self
            .cfg
            .cores
            .as_ref()
            .and_then(|c| c.get(self.index).copied());
        if let Some(c) = cpu {
            crate::sys::pin_to_cpu(c)?;
        }
        let cfg = for_worker(self.cfg, self.index);
        let r = role(self.index, self.shards, cpu);
        let [lan_why, wan_why] = self.fallback;
        Gateway::open_with(
            cfg,
            (self.ports.0, lan_why),
            (self.ports.1, wan_why),
            Some(r),
        )
    }
}

/// Worker `index`'s own configuration: the first serves the control socket, the metrics and
/// the rate controllers (and their reflector pings) for all.
fn for_worker(mut cfg: Config, index: usize) -> Config {
    if index > 0 {
        (cfg.control, cfg.metrics, cfg.reflectors) = (None, None, None);
        (cfg.autorate_egress, cfg.autorate_ingress) = (None, None);
    }
    cfg
}

/// The workers after the first, forwarding on threads of their own until `stop` is set.
pub type Others = Vec<std::thread::JoinHandle<()>>;

/// Open `cfg.workers` workers: the first is returned (to run on the calling thread, with the
/// control socket); the others already run, each pinned to its core (`cfg.cores`) and at
/// SCHED_FIFO `realtime` if given, until `stop`. Join them after the first has stopped, then
/// take the first's snapshot: it merges what they published last.
pub fn open_workers(
    cfg: &Config,
    stop: &Arc<AtomicBool>,
    realtime: Option<u8>,
) -> io::Result<(Gateway, Others)> {
    let ports = open_ports(cfg)?;
    let shards = Arc::new(Shards::new(cfg.workers));
    let mut starts: Vec<Start> = ports
        .into_iter()
        .enumerate()
        .map(|(index, (ports, fallback))| Start {
            cfg: cfg.clone(),
            ports,
            fallback,
            index,
            shards: Arc::clone(&shards),
        })
        .collect();
    let others = starts.split_off(1);
    let first = starts.pop().ok_or_else(|| io::Error::other("no worker"))?;
    let mut threads = Vec::new();
    for s in others {
        let stop = Arc::clone(stop);
        let index = s.index;
        let t = std::thread::Builder::new()
            .name(format!("worker {index}"))
            .spawn(move || match s.open() {
                Ok(mut gw) => {
                    if let Some(p) = realtime {
                        if let Err(e) = crate::sys::realtime(p) {
                            eprintln!("worker {index}: --realtime: {e}");
                        }
                    }
                    if let Err(e) = gw.run(&stop) {
                        eprintln!("worker {index}: {e}");
                    }
                }
                Err(e) => eprintln!("worker {index} did not start: {e}"),
            })?;
        threads.push(t);
    }
    match first.open() {
        Ok(gw) => Ok((gw, threads)),
        Err(e) => {
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            for t in threads {
                let _ = t.join();
            }
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::shaper_bps;
    use debloat_core::QdiscSpec;

    /// The rates the workers split: cake's bandwidth and tbf's rate; none for a discipline
    /// that does not shape (and htb, whose classes are split one by one: `htb_split`).
    #[test]
    fn the_shapers_the_workers_split() {
        let bps = |w: &str| shaper_bps(&w.parse::<QdiscSpec>().expect("valid"));
        assert_eq!(bps("cake bandwidth 20Mbit"), Some(20_000_000));
        assert_eq!(
            bps("tbf rate 10Mbit burst 10kb latency 50ms"),
            Some(10_000_000)
        );
        assert_eq!(bps("cake"), None);
        assert_eq!(bps("fq_codel"), None);
        assert_eq!(bps("htb class 1:1 rate 10Mbit"), None);
    }
}
