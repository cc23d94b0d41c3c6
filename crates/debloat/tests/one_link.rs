//! One link model, three drivers: the same packets through the core's data path (what
//! `debloat replay` runs), the gateway's `Path` (frames) and the simulator's wired link meet the
//! same fates at the same nanoseconds — queueing in pfifo, serialisation at the rate, and
//! netem's loss, duplication, reordering, jitter and slots on the wire — and a classify stage
//! written once, in a test, that all three run in front of the discipline.

use debloat_core::classify::{Admit, Classify};
use debloat_core::link::Emulation;
use debloat_core::packet::{PacketMeta, Record};
use debloat_core::path::{DataPath, Event};
use debloat_core::Direction;
use debloat_core::{FlowHasher, QdiscSpec};
use debloat_gateway::path::Path;
use debloat_sim::world::{DeviceConfig, Dir, LinkConfig, Wire, World};
use etherparse::PacketBuilder;

const RATE_BPS: u64 = 10_000_000;
const LEN: u32 = 1000;
/// 1000 B every 0.7 ms on a 10 Mbit/s link (0.8 ms each): the queue grows in pfifo.
const INTERVAL_NS: u64 = 700_000;
const PACKETS: u64 = 1500;
const QDISC: &str = "pfifo limit 200";

/// (sequence number, sent at, delivered at) in the order delivered.
type Fates = Vec<(u64, u64, u64)>;

fn sent_at(seq: u64) -> u64 {
    (seq - 1) * INTERVAL_NS
}

fn emulation(words: &str) -> Emulation {
    let mut e: Emulation = words.parse().expect("netem words");
    e.rate_bps = Some(RATE_BPS);
    e
}

fn qdisc<P: debloat_core::Packet + 'static>() -> Box<dyn debloat_core::Qdisc<P>> {
    QDISC
        .parse::<QdiscSpec>()
        .expect("spec")
        .build(FlowHasher::new([1, 2]), 1)
}

/// A stage of the test's own: it drops every 4th packet it sees and marks the rest EF.
#[derive(Default)]
struct EveryFourth {
    seen: u64,
}

impl Classify for EveryFourth {
    fn classify(&mut self, meta: &mut PacketMeta, _: Direction, _: u64) -> Admit {
        self.seen += 1;
        meta.dscp = 46;
        if self.seen.is_multiple_of(4) {
            Admit::Drop
        } else {
            Admit::Pass
        }
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// A fresh stage for a run, or none.
type StageFor = Option<fn() -> Box<dyn Classify>>;

/// The core's data path, as `debloat replay` drives it.
fn through_core(words: &str, stage: StageFor) -> Fates {
    let mut stage = stage.map(|f| f());
    let mut dp = DataPath::new(qdisc::<Record>(), emulation(words), 0, 99);
    let mut out = Fates::new();
    let mut on = |e: Event<'_, Record>| {
        if let Event::Delivered { packet, at } = e {
            out.push((packet.id, sent_at(packet.id), at));
        }
    };
    for seq in 1..=PACKETS {
        let t = sent_at(seq);
        while let Some(w) = dp.next_wakeup().filter(|&w| w <= t) {
            dp.poll(w, &mut on);
        }
        let flow = debloat_core::flow::FlowKey::ip(
            "198.18.1.3".parse().expect("v4"),
            "198.18.2.1".parse().expect("v4"),
            2112,
            2112,
            17,
        );
        let r = Record::new(seq, PacketMeta::new(LEN, flow));
        match stage.as_deref_mut() {
            Some(s) => dp.arrive_classified(r, t, s, Direction::Up, &mut on),
            None => dp.arrive(r, t, &mut on),
        }
    }
    dp.finish(&mut on);
    assert!(dp.accounted());
    out
}

fn frame(seq: u64) -> Vec<u8> {
    let b = PacketBuilder::ethernet2([1; 6], [2; 6])
        .ipv4([198, 18, 1, 3], [198, 18, 2, 1], 64)
        .udp(2112, 2112);
    let mut payload = vec![0u8; LEN as usize - 42];
    payload[..8].copy_from_slice(&seq.to_be_bytes());
    let mut buf = Vec::new();
    b.write(&mut buf, &payload).expect("frame");
    buf
}

/// The gateway's direction: frames, parsed, through the same data path.
fn through_gateway(words: &str, stage: StageFor) -> Fates {
    let mut stage = stage.map(|f| f());
    let spec: QdiscSpec = QDISC.parse().expect("spec");
    let mut p = Path::new(&spec, emulation(words), FlowHasher::new([1, 2]), 1);
    let mut out = Fates::new();
    let mut deliver = |p: &mut Path, t: u64| {
        p.poll(t, &mut |d| {
            let seq = u64::from_be_bytes(d[42..50].try_into().expect("8 bytes"));
            out.push((seq, sent_at(seq), t));
        })
    };
    for seq in 1..=PACKETS {
        let t = sent_at(seq);
        while let Some(w) = p.next_wakeup().filter(|&w| w <= t) {
            deliver(&mut p, w);
        }
        p.on_frame_marked(
            frame(seq),
            t,
            stage.as_deref_mut().map(|s| (s, Direction::Up)),
        );
    }
    while let Some(w) = p.next_wakeup() {
        deliver(&mut p, w);
    }
    assert!(p.accounted());
    out
}

/// The simulator: a UDP flood up a wired link with the same discipline, rate and wire.
fn through_sim(words: &str, stage: StageFor) -> Fates {
    let link = |impair| LinkConfig {
        rate_bps: RATE_BPS,
        delay_ns: 0,
        qdisc: qdisc(),
        device: DeviceConfig::default(),
        wire: Wire {
            impair,
            ..Wire::default()
        },
    };
    let stop = PACKETS * INTERVAL_NS;
    let mut w = World::new(
        link(emulation(words)),
        link(Emulation::default()),
        stop + 2_000_000_000,
        100_000_000,
    );
    if let Some(f) = stage {
        w.set_stage(f());
    }
    let k = w.add_probe("flood", true, 0, 0, INTERVAL_NS);
    w.set_probe_flood(k, LEN, Dir::Up, stop);
    w.run(|_| {});
    let p = &w.probes[0];
    p.seqs
        .iter()
        .zip(&p.samples)
        .map(|(&seq, &(sent, owd))| (u64::from(seq), sent, sent + owd))
        .collect()
}

fn same_fates(words: &str) -> Fates {
    same_fates_through(words, None)
}

fn same_fates_through(words: &str, stage: StageFor) -> Fates {
    let core = through_core(words, stage);
    let gateway = through_gateway(words, stage);
    let sim = through_sim(words, stage);
    assert_same(&core, &gateway, words, "gateway");
    assert_same(&core, &sim, words, "simulator");
    core
}

/// The first fate that differs, rather than two lists of thousands.
fn assert_same(core: &Fates, other: &Fates, words: &str, who: &str) {
    let first = core.iter().zip(other).position(|(a, b)| a != b);
    assert!(
        first.is_none() && core.len() == other.len(),
        "{words}: the core and the {who} differ at fate {first:?} ({:?} against {:?}), \
         {} fates against {}",
        first.map(|i| core[i]),
        first.map(|i| other[i]),
        core.len(),
        other.len()
    );
}

/// Fates that depend only on the link are the same whichever drives it: the queue in pfifo
/// (drops at 200), serialisation at 10 Mbit/s, and the wire's loss, duplicates, reordering
/// and jitter (the words name the seed, so all three draw the same numbers).
#[test]
fn the_same_packets_meet_the_same_fates_in_replay_the_gateway_and_the_simulator() {
    let words = "delay 4ms 3ms loss 5% duplicate 3% reorder 4% seed 11";
    let fates = same_fates(words);
    let delivered = fates.len() as u64;
    // Something of each happened: drops in pfifo (1500 offered at 1.14× the rate into 200
    // slots), losses, duplicates, packets overtaking others.
    assert!(delivered < PACKETS, "{delivered} of {PACKETS} delivered");
    let mut seqs: Vec<u64> = fates.iter().map(|f| f.0).collect();
    let overtaken = seqs.windows(2).filter(|w| w[0] > w[1]).count();
    assert!(overtaken > 10, "{overtaken} reorderings");
    seqs.sort_unstable();
    let dups = seqs.windows(2).filter(|w| w[0] == w[1]).count();
    assert!(dups > 10, "{dups} duplicates");
    // Serialisation: the first packet leaves 0.8 ms after it was sent, plus its delay draw.
    let (_, s, d) = fates.iter().find(|f| f.0 == 1).copied().expect("first");
    assert!(
        (800_000..=800_000 + 7_000_000).contains(&(d - s)),
        "{}",
        d - s
    );
}

/// netem's `slot` releases the wire in bursts: the same bursts in every driver.
#[test]
fn slots_release_the_same_bursts_in_every_driver() {
    let fates = same_fates("delay 1ms slot 3ms 6ms packets 4 seed 5");
    let mut bursts = fates.clone();
    bursts.dedup_by_key(|f| f.2);
    assert!(
        bursts.len() * 2 < fates.len(),
        "{} release instants for {} packets",
        bursts.len(),
        fates.len()
    );
}

/// A wire with no impairment takes a fast path in the core (no random draws): the queue and
/// the transmitter alone decide, identically in every driver.
#[test]
fn a_plain_wire_gives_the_same_fates_in_every_driver() {
    let fates = same_fates("seed 3");
    // 1500 packets offered at 1.14× the rate: the queue grows by one packet in eight, to about
    // 187, short of pfifo's 200, so every packet arrives, in order, each one transmission time
    // after the one before while the queue stands.
    assert_eq!(fates.len(), PACKETS as usize);
    assert!(fates.windows(2).all(|w| w[0].0 < w[1].0), "in order");
    let gaps: Vec<u64> = fates.windows(2).map(|w| w[1].2 - w[0].2).collect();
    assert!(
        gaps.iter().filter(|&&g| g == 800_000).count() > 1000,
        "back to back at 0.8 ms"
    );
}

/// A stage added once, here, is run by replay's path, the gateway and the simulator alike, in
/// the same place: every 4th packet never reaches the discipline, and the rest meet the same
/// fates in all three.
#[test]
fn a_stage_written_once_runs_in_replay_the_gateway_and_the_simulator() {
    let fates = same_fates_through("seed 3", Some(|| Box::new(EveryFourth::default())));
    assert_eq!(fates.len() as u64, PACKETS - PACKETS / 4);
    assert!(
        fates.iter().all(|f| f.0 % 4 != 0),
        "a 4th packet got through"
    );
    // With a quarter gone the link is no longer overloaded: of each three packets sent 0.7 ms
    // apart, the first waits for nothing (0.8 ms on the link), the next two 0.1 and 0.2 ms
    // behind the one before; the gap where the 4th was lets the queue empty.
    let delays: Vec<u64> = fates.iter().map(|f| f.2 - f.1).collect();
    assert!(
        delays
            .iter()
            .zip([800_000, 900_000, 1_000_000].iter().cycle())
            .all(|(d, want)| d == want),
        "{:?}",
        &delays[..9]
    );
}
