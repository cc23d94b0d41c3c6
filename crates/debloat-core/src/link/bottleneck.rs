//! A bottleneck: one discipline feeding one link that sends a packet at a time at a fixed rate.
//! This is the whole of `debloat replay`, and the harness the scenario tests use.
//!
//! Sans-IO like the disciplines: the caller feeds arrivals in time order with
//! [`Bottleneck::arrive`] and collects [`Event`]s; [`Bottleneck::finish`] drains what is left.
//! The link asks the discipline for a packet whenever it is idle and something is queued, as the
//! kernel's `qdisc_run` does after every enqueue and every completed transmission. With no rate
//! the link takes packets as fast as the discipline releases them (e.g. CAKE's own shaper).

use crate::packet::{Nanos, Packet};
use crate::qdisc::{Dequeue, DropReason, Qdisc};

/// Something that happened to a packet.
#[derive(Debug)]
pub enum Event<P> {
    /// The link started sending `packet` at `start`; it finishes at `end`.
    Sent {
        /// The packet as it left (ECN field included).
        packet: P,
        /// Start of transmission.
        start: Nanos,
        /// End of transmission.
        end: Nanos,
    },
    /// The discipline dropped `packet` at `at`.
    Dropped {
        /// The packet.
        packet: P,
        /// Why.
        reason: DropReason,
        /// When.
        at: Nanos,
    },
}

/// What a link adds to each packet before serialising it, as netem's
/// `rate RATE [PACKETOVERHEAD [CELLSIZE [CELLOVERHEAD]]]` (`packet_time_ns` in sch_netem.c):
/// `overhead` bytes per packet (may be negative), then, with a cell size, the length rounded up
/// to whole cells of `cell_size + cell_overhead` bytes (ATM-like links).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Framing {
    /// Bytes added to (or, negative, taken from) every packet.
    pub overhead: i32,
    /// Cell size in bytes (0: no cells).
    pub cell_size: u32,
    /// Bytes added to every cell.
    pub cell_overhead: i32,
}

impl Framing {
    /// The bytes the link serialises for a packet of `len` bytes. Deviation: netem's unsigned
    /// arithmetic wraps when a negative overhead exceeds the packet; here it stops at zero.
    pub fn wire_len(&self, len: u32) -> u64 {
        let len = (i64::from(len) + i64::from(self.overhead)).max(0) as u64;
        if self.cell_size == 0 {
            return len;
        }
        let cells = len.div_ceil(u64::from(self.cell_size));
        let cell = (i64::from(self.cell_size) + i64::from(self.cell_overhead)).max(0) as u64;
        cells * cell
    }
}

/// A discipline in front of a fixed-rate link.
#[derive(Debug)]
pub struct Bottleneck<Q> {
    qdisc: Q,
    rate_bps: Option<u64>,
    framing: Framing,
    link_free_at: Nanos,
    next_attempt: Option<Nanos>,
    now: Nanos,
}

/// Time to serialise `len` bytes at `rate_bps` bit/s, rounded up to a whole nanosecond.
pub fn tx_time(len: u32, rate_bps: u64) -> Nanos {
    tx_time_bytes(u64::from(len), rate_bps)
}

fn tx_time_bytes(len: u64, rate_bps: u64) -> Nanos {
    let bits = u128::from(len) * 8 * 1_000_000_000;
    bits.div_ceil(u128::from(rate_bps.max(1))) as Nanos
}

impl<Q> Bottleneck<Q> {
    /// Change the link's rate (bit/s; `None`: never limits) from the next packet on; the packet
    /// being sent finishes at the old rate.
    pub fn set_rate(&mut self, rate_bps: Option<u64>) {
        self.rate_bps = rate_bps;
    }

    /// The link's rate, bit/s (`None`: never limits).
    pub fn rate(&self) -> Option<u64> {
        self.rate_bps
    }

    /// Change what the link adds to each packet, from the next packet on.
    pub fn set_framing(&mut self, framing: Framing) {
        self.framing = framing;
    }

    /// A bottleneck; `rate_bps` of `None` means the link never limits.
    pub fn new(qdisc: Q, rate_bps: Option<u64>) -> Self {
        Bottleneck {
            qdisc,
            rate_bps,
            framing: Framing::default(),
            link_free_at: 0,
            next_attempt: None,
            now: 0,
        }
    }

    /// The discipline, e.g. for its statistics.
    pub fn qdisc(&self) -> &Q {
        &self.qdisc
    }

    /// The discipline, mutably (e.g. to change a rate at run time).
    pub fn qdisc_mut(&mut self) -> &mut Q {
        &mut self.qdisc
    }

    /// Take the discipline back.
    pub fn into_qdisc(self) -> Q {
        self.qdisc
    }

    /// When the link next wants the discipline, if anything is pending.
    pub fn next_wakeup(&self) -> Option<Nanos> {
        self.next_attempt
    }

    /// Current time (the latest time passed in).
    pub fn now(&self) -> Nanos {
        self.now
    }
}

impl<Q> Bottleneck<Q> {
    fn drain_drops<P: Packet>(&mut self, at: Nanos, out: &mut impl FnMut(Event<P>))
    where
        Q: Qdisc<P>,
    {
        while let Some(d) = self.qdisc.take_dropped() {
            out(Event::Dropped {
                packet: d.packet,
                reason: d.reason,
                at,
            });
        }
    }

    fn attempt<P: Packet>(&mut self, at: Nanos, out: &mut impl FnMut(Event<P>))
    where
        Q: Qdisc<P>,
    {
        self.now = self.now.max(at);
        let got = self.qdisc.dequeue(at);
        self.drain_drops(at, out);
        self.next_attempt = match got {
            Dequeue::Packet(p) => {
                let len = self.framing.wire_len(p.meta().len);
                let end = at + self.rate_bps.map_or(0, |r| tx_time_bytes(len, r));
                self.link_free_at = end;
                out(Event::Sent {
                    packet: p,
                    start: at,
                    end,
                });
                Some(end)
            }
            Dequeue::Empty => None,
            Dequeue::NotBefore(t) => Some(t.max(at + 1)),
        };
    }

    /// Run the link up to and including time `t`.
    pub fn advance_to<P: Packet>(&mut self, t: Nanos, out: &mut impl FnMut(Event<P>))
    where
        Q: Qdisc<P>,
    {
        while let Some(a) = self.next_attempt {
            if a > t {
                break;
            }
            self.attempt(a, out);
        }
        self.now = self.now.max(t);
    }

    /// A packet arrives at time `t` (not before the previous arrival).
    pub fn arrive<P: Packet>(&mut self, packet: P, t: Nanos, out: &mut impl FnMut(Event<P>))
    where
        Q: Qdisc<P>,
    {
        let t = t.max(self.now);
        self.advance_to(t, out);
        self.qdisc.enqueue(packet, t);
        self.drain_drops(t, out);
        if self.next_attempt.is_none() {
            self.next_attempt = Some(t.max(self.link_free_at));
        }
    }

    /// Send everything still queued; returns the time the link went idle.
    pub fn finish<P: Packet>(&mut self, out: &mut impl FnMut(Event<P>)) -> Nanos
    where
        Q: Qdisc<P>,
    {
        while let Some(a) = self.next_attempt {
            self.attempt(a, out);
        }
        self.link_free_at.max(self.now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qdisc::fifo::{Fifo, Limit};
    use crate::testutil::pkt;

    #[test]
    fn serialises_at_the_link_rate() {
        let mut b = Bottleneck::new(Fifo::new(Limit::Packets(10)), Some(8_000_000));
        let mut sent = vec![];
        let mut out = |e: Event<crate::packet::Record>| {
            if let Event::Sent { start, end, .. } = e {
                sent.push((start, end))
            }
        };
        b.arrive(pkt(1, 1000), 0, &mut out);
        b.arrive(pkt(2, 1000), 0, &mut out);
        b.finish(&mut out);
        // 1000 B at 8 Mbit/s = 1 ms each, back to back.
        assert_eq!(sent, vec![(0, 1_000_000), (1_000_000, 2_000_000)]);
        assert_eq!(tx_time(1514, 10_000_000), 1_211_200);
    }

    #[test]
    fn framing_adds_overhead_and_rounds_up_to_cells() {
        let none = Framing::default();
        assert_eq!(none.wire_len(1000), 1000);
        let eth = Framing {
            overhead: 24,
            ..Framing::default()
        };
        assert_eq!(eth.wire_len(1000), 1024);
        // ATM: 1000 + 10 = 1010 bytes take 22 cells of 48, each sent as 53 bytes.
        let atm = Framing {
            overhead: 10,
            cell_size: 48,
            cell_overhead: 5,
        };
        assert_eq!(atm.wire_len(1000), 22 * 53);
        assert_eq!(atm.wire_len(38), 53, "exactly one cell");
        assert_eq!(atm.wire_len(39), 2 * 53, "one byte over: a second cell");
        let shrink = Framing {
            overhead: -2000,
            ..Framing::default()
        };
        assert_eq!(shrink.wire_len(100), 0);
        // The link serialises the framed length.
        let mut b = Bottleneck::new(Fifo::new(Limit::Packets(10)), Some(8_000_000));
        b.set_framing(eth);
        let mut end = 0;
        let mut out = |e: Event<crate::packet::Record>| {
            if let Event::Sent { end: e, .. } = e {
                end = e
            }
        };
        b.arrive(pkt(1, 1000), 0, &mut out);
        b.finish(&mut out);
        assert_eq!(end, 1_024_000);
    }
}
