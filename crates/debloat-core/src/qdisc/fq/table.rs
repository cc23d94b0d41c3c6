//! fq's flow table: flows keyed by socket or by hash, in `1 << buckets_log` buckets, made on
//! their first packet and collected once long empty (`fq_classify`, `fq_gc`).

use super::{Flow, Fq, GC_AGE, GC_MAX};
use crate::packet::{Nanos, Packet};
use crate::qdisc::pktq::Fifo;

/// `hash_ptr`: the kernel's multiplicative hash of a key into `bits` bits.
fn hash_bucket(key: u64, bits: u8) -> u32 {
    (key.wrapping_mul(0x61C8_8646_80B5_83EB) >> (64 - u32::from(bits))) as u32
}

impl<P: Packet> Fq<P> {
    /// `fq_gc`: collect up to 8 long-empty flows met in `bucket` before the one keyed `key`.
    fn gc(&mut self, bucket: u32, key: u64, now: Nanos) {
        let mut found = [0u32; GC_MAX];
        let mut n = 0;
        for &i in &self.buckets[bucket as usize] {
            let f = &self.flows[i as usize];
            if f.key == key {
                break;
            }
            if f.detached && now > f.age + GC_AGE {
                found[n] = i;
                n += 1;
                if n == GC_MAX {
                    break;
                }
            }
        }
        for &i in &found[..n] {
            self.buckets[bucket as usize].retain(|&j| j != i);
            self.free.push(i);
        }
        self.inactive_flows -= n as u32;
        self.counters.gc_flows += n as u64;
    }

    /// `fq_classify` past the fast path: the flow keyed `key`, created if new.
    pub(super) fn classify(&mut self, key: u64, now: Nanos) -> u32 {
        let bucket = hash_bucket(key, self.spec.buckets_log);
        self.gc(bucket, key, now);
        if let Some(&i) = self.buckets[bucket as usize]
            .iter()
            .find(|&&i| self.flows[i as usize].key == key)
        {
            return i;
        }
        let flow = Flow {
            key,
            q: Fifo::default(),
            credit: i64::from(self.spec.initial_quantum),
            band: 0,
            detached: true,
            throttled: false,
            age: now,
            time_next_packet: 0,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.flows[i as usize] = flow;
                i
            }
            None => {
                self.flows.push(flow);
                let i = (self.flows.len() - 1) as u32;
                self.lists.grow(self.flows.len());
                i
            }
        };
        self.buckets[bucket as usize].push(i);
        self.inactive_flows += 1;
        i
    }
}
