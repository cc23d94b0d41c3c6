//! Shared helpers for the scenario tests: open-loop traffic through a bottleneck.
#![allow(dead_code)]

use debloat_core::flow::FlowKey;
use debloat_core::link::Emulation;
use debloat_core::packet::{Ecn, PacketMeta, Record};
use debloat_core::path::{DataPath, Event};
use debloat_core::testutil::addr;
use debloat_core::{FlowHasher, Qdisc, QdiscSpec};

/// A constant-bit-rate source.
#[derive(Clone, Debug)]
pub struct Source {
    pub name: &'static str,
    pub flow: FlowKey,
    pub len: u32,
    pub rate_bps: u64,
    pub dscp: u8,
    pub ecn: Ecn,
    pub start_ns: u64,
}

impl Source {
    pub fn udp(
        name: &'static str,
        src_host: u8,
        dst_host: u8,
        port: u16,
        len: u32,
        rate_bps: u64,
    ) -> Source {
        Source {
            name,
            flow: FlowKey::ip(addr(0, src_host), addr(1, dst_host), port, 5001, 17),
            len,
            rate_bps,
            dscp: 0,
            ecn: Ecn::NotEct,
            start_ns: 0,
        }
    }
    pub fn dscp(mut self, d: u8) -> Source {
        self.dscp = d;
        self
    }
    pub fn ecn(mut self) -> Source {
        self.ecn = Ecn::Ect0;
        self
    }
    pub fn interval_ns(&self) -> u64 {
        u64::from(self.len) * 8 * 1_000_000_000 / self.rate_bps
    }
}

/// What happened to one source's packets.
#[derive(Clone, Debug, Default)]
pub struct FlowResult {
    pub sent: u64,
    pub sent_bytes: u64,
    pub dropped: u64,
    pub marked: u64,
    /// (enqueue time, sojourn) for sent packets.
    pub sojourns: Vec<(u64, u64)>,
    /// Bytes sent after the warm-up.
    pub bytes_after_warmup: u64,
}

impl FlowResult {
    pub fn max_sojourn_after(&self, t: u64) -> u64 {
        self.sojourns
            .iter()
            .filter(|s| s.0 >= t)
            .map(|s| s.1)
            .max()
            .unwrap_or(0)
    }
}

/// Run sources for `dur_ns` through `qdisc` on a link of `link_bps` (None = unlimited).
/// Throughput is counted for packets whose transmission starts after `warmup_ns`.
pub fn run<Q: Qdisc<Record>>(
    qdisc: Q,
    link_bps: Option<u64>,
    sources: &[Source],
    dur_ns: u64,
    warmup_ns: u64,
) -> (Vec<FlowResult>, Q) {
    let mut b = DataPath::new(qdisc, Emulation::rate(link_bps), 0, 0);
    let mut res = vec![FlowResult::default(); sources.len()];
    let mut id = 0u64;
    let mut out = |e: Event<'_, Record>| match e {
        Event::Sent { packet, start, .. } => {
            let r = &mut res[(packet.id >> 40) as usize];
            r.sent += 1;
            r.sent_bytes += u64::from(packet.meta.len);
            if packet.meta.ecn == Ecn::Ce {
                r.marked += 1;
            }
            r.sojourns
                .push((packet.meta.enqueue_ns, start - packet.meta.enqueue_ns));
            if start >= warmup_ns {
                r.bytes_after_warmup += u64::from(packet.meta.len);
            }
        }
        Event::Dropped { packet, .. } => res[(packet.id >> 40) as usize].dropped += 1,
        Event::Delivered { .. } | Event::Dequeued { .. } => {}
    };
    each_arrival(sources, dur_ns, |i, t| {
        let s = &sources[i];
        let mut m = PacketMeta::new(s.len, s.flow);
        m.dscp = s.dscp;
        m.ecn = s.ecn;
        b.arrive(Record::new(((i as u64) << 40) | id, m), t, &mut out);
        id += 1;
    });
    b.poll(dur_ns, &mut out);
    (res, b.into_qdisc())
}

/// Build a qdisc from a spec string.
pub fn qdisc(spec: &str) -> Box<dyn Qdisc<Record>> {
    spec.parse::<QdiscSpec>()
        .expect("valid spec")
        .build(FlowHasher::new([7, 11]), 42)
}

/// Mbit/s over `secs` seconds.
pub fn mbps(bytes: u64, secs: f64) -> f64 {
    bytes as f64 * 8.0 / secs / 1e6
}

/// What a path did with its packets.
#[derive(Debug, Default)]
pub struct PathResult {
    pub sent: u64,
    pub qdisc_dropped: u64,
    pub delivered: u64,
    /// Longest time from leaving the discipline to the far end, ns.
    pub max_delay_ns: u64,
}

/// Run sources for `dur_ns` through `qdisc` on an unlimited link with `modem` behind it,
/// then let the path drain.
pub fn run_path(
    qdisc: Box<dyn Qdisc<Record>>,
    modem: Option<debloat_core::link::Modem>,
    sources: &[Source],
    dur_ns: u64,
) -> (PathResult, DataPath<Record, Box<dyn Qdisc<Record>>>) {
    let mut b = DataPath::new(qdisc, Emulation::default(), 0, 0);
    b.link_mut().set_modem(modem);
    let mut r = PathResult::default();
    let mut left = std::collections::BTreeMap::new();
    let mut out = |e: Event<'_, Record>| match e {
        Event::Sent { packet, end, .. } => {
            left.insert(packet.id, end);
        }
        Event::Dropped { .. } => r.qdisc_dropped += 1,
        Event::Delivered { packet, at } => {
            r.delivered += 1;
            let d = at - left.get(&packet.id).copied().unwrap_or(at);
            r.max_delay_ns = r.max_delay_ns.max(d);
        }
        Event::Dequeued { .. } => {}
    };
    let mut id = 0u64;
    each_arrival(sources, dur_ns, |i, t| {
        let s = &sources[i];
        b.arrive(Record::new(id, PacketMeta::new(s.len, s.flow)), t, &mut out);
        id += 1;
    });
    b.finish(&mut out);
    r.sent = id;
    (r, b)
}

/// Each source's packets in time order until `dur_ns`: `f(source, time)`.
pub fn each_arrival(sources: &[Source], dur_ns: u64, mut f: impl FnMut(usize, u64)) {
    let mut next: Vec<u64> = sources.iter().map(|s| s.start_ns).collect();
    loop {
        let (i, &t) = next
            .iter()
            .enumerate()
            .min_by_key(|x| (*x.1, x.0))
            .expect("sources");
        if t >= dur_ns {
            break;
        }
        f(i, t);
        next[i] = t + sources[i].interval_ns();
    }
}
