//! `tbf`: the token bucket filter (net/sched/sch_tbf.c), the simplest shaper, in front of a
//! child discipline (by default a `bfifo` of `limit` bytes).
//!
//! Tokens are nanoseconds of transmission at `rate`: the bucket holds at most the time `burst`
//! bytes take (`buffer`); a packet leaves when the tokens cover its own time, which they lose.
//! With `peakrate`, a second bucket of `mtu` bytes at the peak rate must cover it too. A packet
//! longer than the smaller bucket can never leave: it is dropped on arrival (a GSO super-packet
//! is cut into its segments instead, `tbf_segment`). The rate's byte time is the kernel's
//! `psched_l2t_ns`, a multiply and shift precomputed from the rate ([`RateCfg`]), with
//! `overhead` and `mpu` added; while the head waits the discipline reports when it may leave
//! ([`Dequeue::NotBefore`], Linux's watchdog) and counts an overlimit.
//!
//! Where this differs from the kernel: Linux asks its child to `peek`; the [`Qdisc`] trait has
//! no peek, so the head is taken out of the child and held (what Linux's
//! `qdisc_peek_dequeued` does for children that cannot peek). A child is given as words after
//! `child` (`tbf rate 10Mbit burst 10kb latency 50ms child fq_codel`), where tc would take a
//! second command.

pub mod spec;

pub use spec::TbfSpec;

use crate::flow::FlowHasher;
use crate::packet::{Nanos, Packet};
pub use crate::qdisc::ratecfg::RateCfg;
use crate::qdisc::stats::{QdiscStats, Xstats};
use crate::qdisc::{Dequeue, DropBox, DropReason, Dropped, Qdisc, Verdict};

/// The `tbf` qdisc.
pub struct Tbf<P> {
    spec: TbfSpec,
    rate: RateCfg,
    peak: Option<RateCfg>,
    /// Bucket depth, ns at `rate`.
    buffer: i64,
    /// Peak bucket depth, ns at `peakrate`.
    mtu: i64,
    /// The largest packet that can ever leave, bytes.
    max_size: u32,
    tokens: i64,
    ptokens: i64,
    /// When the buckets were last charged.
    t_c: Nanos,
    child: Box<dyn Qdisc<P>>,
    /// The child's head, taken out to be looked at (see the module doc).
    head: Option<P>,
    dropped: DropBox<P>,
    sent_bytes: u64,
    sent_pkts: u64,
    drops: u64,
    overlimits: u64,
}

impl<P> std::fmt::Debug for Tbf<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tbf").field("spec", &self.spec).finish()
    }
}

impl<P: Packet + 'static> Tbf<P> {
    /// A tbf from a parsed spec; `hasher` and `seed` go to the child.
    pub fn new(spec: &TbfSpec, hasher: FlowHasher, seed: u64) -> Self {
        let rate = RateCfg::new(spec.rate_bps / 8, spec.overhead, spec.mpu);
        let peak = spec
            .peakrate_bps
            .map(|p| RateCfg::new(p / 8, spec.overhead, spec.mpu));
        let buffer = rate.l2t_ns(spec.burst) as i64;
        let (mtu, max_size) = match &peak {
            Some(p) => (p.l2t_ns(spec.mtu) as i64, spec.burst.min(spec.mtu)),
            None => (0, spec.burst),
        };
        Tbf {
            spec: spec.clone(),
            rate,
            peak,
            buffer,
            mtu,
            max_size,
            tokens: buffer,
            ptokens: mtu,
            t_c: 0,
            child: spec.child().build(hasher, seed),
            head: None,
            dropped: DropBox::default(),
            sent_bytes: 0,
            sent_pkts: 0,
            drops: 0,
            overlimits: 0,
        }
    }

    /// Hand one packet to the child, passing on its drops.
    fn give_child(&mut self, packet: P, now: Nanos) -> Verdict {
        let v = self.child.enqueue(packet, now);
        while let Some(d) = self.child.take_dropped() {
            self.drops += 1;
            self.dropped.push(d.packet, d.reason);
        }
        v
    }

    /// `tbf_segment`: a GSO packet too long for the bucket, cut into its segments.
    fn segment(&mut self, mut packet: P, now: Nanos) -> Verdict {
        let mut verdict = Verdict::Dropped;
        let mut queue = |q: &mut Self, seg: P| {
            if seg.meta().len > q.max_size {
                q.drops += 1;
                q.dropped.push(seg, DropReason::Overlimit);
            } else if q.give_child(seg, now) != Verdict::Dropped {
                verdict = Verdict::Queued;
            }
        };
        while let Some(seg) = packet.split_first_segment() {
            queue(self, seg);
        }
        queue(self, packet);
        verdict
    }
}

impl<P: Packet + 'static> Qdisc<P> for Tbf<P> {
    fn enqueue(&mut self, packet: P, now: Nanos) -> Verdict {
        if packet.meta().len > self.max_size {
            if packet.meta().gso_segs > 1 {
                return self.segment(packet, now);
            }
            self.drops += 1;
            self.dropped.push(packet, DropReason::Overlimit);
            return Verdict::Dropped;
        }
        self.give_child(packet, now)
    }

    fn dequeue(&mut self, now: Nanos) -> Dequeue<P> {
        if self.head.is_none() {
            let d = self.child.dequeue(now);
            while let Some(x) = self.child.take_dropped() {
                self.drops += 1;
                self.dropped.push(x.packet, x.reason);
            }
            match d {
                Dequeue::Packet(p) => self.head = Some(p),
                other => return other,
            }
        }
        let Some(len) = self.head.as_ref().map(|p| p.meta().len) else {
            return Dequeue::Empty;
        };
        let elapsed = now.saturating_sub(self.t_c).min(i64::MAX as u64) as i64;
        let mut toks = elapsed.min(self.buffer);
        let mut ptoks = 0i64;
        if let Some(peak) = &self.peak {
            ptoks = (toks + self.ptokens).min(self.mtu) - peak.l2t_ns(len) as i64;
        }
        toks = (toks + self.tokens).min(self.buffer) - self.rate.l2t_ns(len) as i64;
        if (toks | ptoks) >= 0 {
            let Some(p) = self.head.take() else {
                return Dequeue::Empty;
            };
            self.t_c = now;
            self.tokens = toks;
            self.ptokens = ptoks;
            self.sent_bytes += u64::from(len);
            self.sent_pkts += 1;
            return Dequeue::Packet(p);
        }
        self.overlimits += 1;
        Dequeue::NotBefore(now + (-toks).max(-ptoks) as u64)
    }

    fn take_dropped(&mut self) -> Option<Dropped<P>> {
        self.dropped.take()
    }

    fn qlen(&self) -> usize {
        self.child.qlen() + usize::from(self.head.is_some())
    }

    fn backlog(&self) -> u64 {
        self.child.backlog() + self.head.as_ref().map_or(0, |p| u64::from(p.meta().len))
    }

    fn stats(&self) -> QdiscStats {
        QdiscStats {
            kind: "tbf".into(),
            options: self.spec.tc_options(),
            bytes: self.sent_bytes,
            packets: self.sent_pkts,
            drops: self.drops,
            overlimits: self.overlimits,
            requeues: 0,
            backlog: self.backlog(),
            qlen: self.qlen() as u64,
            xstats: Xstats::None,
        }
    }

    fn set_bandwidth(&mut self, rate_bps: Option<u64>) -> bool {
        let Some(bps) = rate_bps else {
            return false;
        };
        self.spec.rate_bps = bps;
        self.rate = RateCfg::new(bps / 8, self.spec.overhead, self.spec.mpu);
        self.buffer = self.rate.l2t_ns(self.spec.burst) as i64;
        self.tokens = self.tokens.min(self.buffer);
        true
    }

    fn drain(&mut self, out: &mut dyn FnMut(P)) {
        if let Some(p) = self.head.take() {
            out(p);
        }
        self.child.drain(out);
    }
}

#[cfg(test)]
mod tests;
