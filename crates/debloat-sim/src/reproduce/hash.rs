//! HASH (§3.5): a Monte-Carlo of flow-to-queue mapping. 100 random flows are hashed into 1024
//! queues, as fq_codel does (keyed SipHash, `reciprocal_scale`, direct-mapped) and as cake does
//! (the same hash into its 8-way set-associative table); the share of flows that end up alone
//! in their queue is compared with the binomial figures: (1023/1024)^99 = 90.78 % direct-mapped,
//! ≈100 % 8-way.

use super::{Band, Check, Outcome};
use debloat_core::flow::{reciprocal_scale, FlowKey, HashPart};
use debloat_core::qdisc::cake::hash::{FlowMode, FlowSet, Table, QUEUES};
use debloat_core::rng::SplitMix64;
use debloat_core::FlowHasher;
use std::net::{IpAddr, Ipv4Addr};

const FLOWS: usize = 100;
const TRIALS: usize = 4000;

/// A random TCP 5-tuple inside 198.18.0.0/15.
fn random_flow(rng: &mut SplitMix64) -> FlowKey {
    let mut a = || {
        let x = rng.next_u32() & 0x1_ffff;
        IpAddr::V4(Ipv4Addr::from(0xc612_0000 | x))
    };
    let (src, dst) = (a(), a());
    FlowKey::ip(src, dst, rng.next_u16(), rng.next_u16(), 6)
}

/// The fraction of flows alone in their queue, given each flow's queue.
fn alone(queues: &[usize]) -> usize {
    let mut count = vec![0u32; QUEUES];
    for &q in queues {
        count[q] += 1;
    }
    queues.iter().filter(|&&q| count[q] == 1).count()
}

/// Run the Monte-Carlo; returns (direct-mapped %, 8-way %) of flows alone in their queue.
pub fn own_queue_pct(seed: u64, trials: usize) -> (f64, f64) {
    let mut rng = SplitMix64::new(seed);
    let (mut direct, mut assoc) = (0, 0);
    for t in 0..trials {
        let hasher = FlowHasher::new([seed ^ t as u64, (t as u64).wrapping_mul(0x9e37_79b9)]);
        let hashes: Vec<u32> = (0..FLOWS)
            .map(|_| hasher.hash(&random_flow(&mut rng), HashPart::Flow))
            .collect();
        let mapped: Vec<usize> = hashes
            .iter()
            .map(|&h| reciprocal_scale(h, QUEUES as u32) as usize)
            .collect();
        direct += alone(&mapped);
        let mut table = Table::default();
        let placed: Vec<usize> = hashes
            .iter()
            .map(|&h| {
                let q = table.lookup(h, 0, 0, FlowMode::FLOWS_ONLY);
                // The flow is active: its queue now holds packets.
                table.slots[q].set = FlowSet::Sparse;
                q
            })
            .collect();
        assoc += alone(&placed);
    }
    let n = (trials * FLOWS) as f64;
    (direct as f64 * 100.0 / n, assoc as f64 * 100.0 / n)
}

/// HASH: 4000 trials of 100 flows (sampling error of the direct-mapped figure ≈ 0.05 %).
pub fn hash(seed: u64) -> Outcome {
    let (direct, assoc) = own_queue_pct(seed, TRIALS);
    let mut o = Outcome::new("HASH");
    o.checks.push(Check::new(
        "direct-mapped (fq_codel): flows alone in their queue",
        direct,
        "%",
        "90.78 %",
        Band::Within {
            min: 90.78 - 0.5,
            max: 90.78 + 0.5,
        },
    ));
    o.checks.push(Check::new(
        "8-way set-associative (cake): flows alone in their queue",
        assoc,
        "%",
        "≈100 %",
        Band::AtLeast { min: 99.9 },
    ));
    o
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_flow_is_always_alone() {
        assert_eq!(super::alone(&[5]), 1);
        assert_eq!(super::alone(&[5, 5, 6]), 1);
    }
}
