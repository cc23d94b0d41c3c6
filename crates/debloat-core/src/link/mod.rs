//! The link behind a discipline, sans-IO: a transmitter that serialises one packet at a time at
//! a rate (paying for link-layer framing), then a wire that applies netem's impairments and a
//! propagation delay. One model for every driver: the simulator's wired links, `debloat replay`
//! and the gateway's emulated links all send through [`Link`].
//!
//! ```text
//! transmit(p, now) ─► admit: loss/ECN ─► busy until now + tx_time(framed length, rate) ─► wire:
//!                     (lost: no time)     (returns that time)                    duplicate, corrupt,
//!                                                                                limit, reorder or
//!                                                                                delay + propagation
//!                                                                     pop_due(now) ◄─┘ (slot-gated)
//! ```
//!
//! The driver decides when to transmit (the link must be idle: [`Link::busy_until`]); the data
//! path ([`crate::path::DataPath`]) does that for a discipline, the simulator for its device
//! ring. Time never goes backwards.
//!
//! A link whose capacity follows a trace ([`trace`]) has a [`Modem`] between the transmitter
//! and the wire: the transmitter hands each packet to the modem's FIFO at the end of its
//! serialisation (at the interface's rate, or at once without one), and the packet reaches the
//! wire when the trace lets it leave, or is dropped by the full FIFO.

pub mod framing;
pub mod modem;
pub mod netem;
pub mod overhead;
pub mod trace;
pub mod wire;

pub use framing::{Framing, LinkLayer};
pub use modem::{parse_limit, split_trace_words, Modem, ModemCounters, ModemSpec};
pub use netem::{Emulation, Netem};
pub use trace::{Trace, TraceError};
pub use wire::{Wire, WireCounters};

use crate::packet::{Nanos, Packet};

/// Time to serialise `len` bytes at `rate_bps` bit/s, rounded up to a whole nanosecond.
pub fn tx_time(len: u32, rate_bps: u64) -> Nanos {
    tx_time_bytes(u64::from(len), rate_bps)
}

/// [`tx_time`] for a length in 64 bits (a framed length).
pub fn tx_time_bytes(len: u64, rate_bps: u64) -> Nanos {
    let rate = rate_bps.max(1);
    // The same integer either way; 64 bits are much cheaper than 128 and hold any frame.
    if len < 1 << 31 {
        return (len * 8_000_000_000).div_ceil(rate);
    }
    let bits = u128::from(len) * 8 * 1_000_000_000;
    bits.div_ceil(u128::from(rate)) as Nanos
}

/// A transmitter and its wire.
pub struct Link<P> {
    rate_bps: Option<u64>,
    layer: LinkLayer,
    busy_until: Nanos,
    modem: Option<Modem>,
    wire: Wire<P>,
}

impl<P: Packet + Clone> Link<P> {
    /// A link as netem's words describe it (`emu`: rate, framing and impairments; its `buffer`
    /// belongs to the data path in front), with `propagation_ns` of fixed delay and `seed` for
    /// the impairments unless the words name one.
    pub fn new(emu: Emulation, propagation_ns: Nanos, seed: u64) -> Link<P> {
        Link {
            rate_bps: emu.rate_bps,
            layer: LinkLayer::Netem(emu.framing),
            busy_until: 0,
            modem: None,
            wire: Wire::new(emu, propagation_ns, seed),
        }
    }

    /// Describe the link layer in CAKE's words instead of netem's (the simulator's `--framing`).
    pub fn with_layer(mut self, layer: LinkLayer) -> Link<P> {
        self.layer = layer;
        self
    }

    /// The rate, bit/s (None: never limits).
    pub fn rate(&self) -> Option<u64> {
        self.rate_bps
    }

    /// Change the rate from the next packet on; the packet being sent finishes at the old one.
    pub fn set_rate(&mut self, rate_bps: Option<u64>) {
        self.rate_bps = rate_bps;
    }

    /// Put a trace-driven modem behind the transmitter (None: take it away), from the next
    /// packet on.
    pub fn set_modem(&mut self, modem: Option<Modem>) {
        self.modem = modem;
    }

    /// The modem, if the link has one.
    pub fn modem(&self) -> Option<&Modem> {
        self.modem.as_ref()
    }

    /// Packets the modem's full FIFO dropped (0 without a modem).
    pub fn modem_dropped(&self) -> u64 {
        self.modem.as_ref().map_or(0, |m| m.counters().dropped)
    }

    /// Change the framing from the next packet on.
    pub fn set_layer(&mut self, layer: LinkLayer) {
        self.layer = layer;
    }

    /// When the packet being sent finishes (the link is idle from then on).
    pub fn busy_until(&self) -> Nanos {
        self.busy_until
    }

    /// The wire (impairments, counters, what it holds).
    pub fn wire(&self) -> &Wire<P> {
        &self.wire
    }

    /// The wire, mutably (to change its impairments).
    pub fn wire_mut(&mut self) -> &mut Wire<P> {
        &mut self.wire
    }

    /// When a packet with this metadata, sent from `now`, would finish. Saturates at the end of
    /// time: netem's words allow a per-packet overhead of gigabytes at 1 bit/s, whose
    /// transmission would outlast the clock (the fuzzer found it).
    pub fn tx_end(&self, meta: &crate::packet::PacketMeta, now: Nanos) -> Nanos {
        let len = self.layer.wire_len(meta);
        now.saturating_add(self.rate_bps.map_or(0, |r| tx_time_bytes(len, r)))
    }

    /// A frame enters the link (its `buffer`, or the transmitter when it has none): netem's
    /// loss model decides here, before the frame costs the link any time. False: lost
    /// (counted in [`Link::wire`]'s counters); true: it goes on, perhaps CE-marked.
    pub fn admit(&mut self, p: &mut P) -> bool {
        self.wire.admit(p)
    }

    /// Take `p` at `now` (the link is idle) and send it; returns when the link is free again:
    /// `now` when the loss model took it ([`Link::admit`]), else the end of its serialisation,
    /// after which it goes onto the wire; `released` is called with the release time of each
    /// copy placed.
    pub fn transmit(&mut self, mut p: P, now: Nanos, released: &mut impl FnMut(Nanos)) -> Nanos {
        if !self.admit(&mut p) {
            return now;
        }
        let end = self.tx_end(p.meta(), now);
        self.transmit_until(p, now, end, released);
        end
    }

    /// Send an admitted frame ([`Link::admit`]) when the caller has already asked
    /// [`Link::tx_end`] for `end`.
    pub fn transmit_until(
        &mut self,
        p: P,
        now: Nanos,
        end: Nanos,
        released: &mut impl FnMut(Nanos),
    ) {
        self.busy_until = end;
        match self.modem.as_mut() {
            None => self.wire.place(p, now, end, released),
            Some(m) => {
                let len = self.layer.wire_len(p.meta());
                if let Some(depart) = m.admit(p.meta(), len, end) {
                    self.wire.place(p, depart, depart, released);
                }
            }
        }
    }

    /// The next packet due at the far end by `now`.
    pub fn pop_due(&mut self, now: Nanos) -> Option<P> {
        self.wire.pop_due(now)
    }

    /// When the next packet may arrive at the far end (None: nothing on the wire).
    pub fn next_release(&self) -> Option<Nanos> {
        self.wire.next_release()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Record;
    use crate::testutil::pkt;

    fn link(words: &str, propagation_ns: Nanos) -> Link<Record> {
        Link::new(words.parse().expect("netem words"), propagation_ns, 1)
    }

    #[test]
    fn serialises_at_the_rate_then_adds_delay_and_propagation() {
        let mut l = link("rate 8Mbit delay 10ms", 5_000_000);
        let mut at = vec![];
        // 1000 B at 8 Mbit/s = 1 ms.
        assert_eq!(l.transmit(pkt(1, 1000), 0, &mut |t| at.push(t)), 1_000_000);
        assert_eq!(l.busy_until(), 1_000_000);
        assert_eq!(at, [16_000_000]);
        assert!(l.pop_due(15_999_999).is_none());
        assert_eq!(l.pop_due(16_000_000).map(|p| p.id), Some(1));
        assert_eq!(tx_time(1514, 10_000_000), 1_211_200);
        // The 64-bit path and the 128-bit one agree where they meet.
        for len in [1u64, 1514, (1 << 31) - 1, 1 << 31, 1 << 40] {
            let wide = (u128::from(len) * 8_000_000_000).div_ceil(7_000_001) as u64;
            assert_eq!(tx_time_bytes(len, 7_000_001), wide, "{len}");
        }
    }

    /// netem loses a packet at enqueue, before its rate: a lost packet costs the link no time.
    #[test]
    fn a_lost_packet_costs_the_link_no_time() {
        let mut l = link("rate 8Mbit loss 100%", 0);
        let mut placed = 0;
        assert_eq!(l.transmit(pkt(1, 1000), 5, &mut |_| placed += 1), 5);
        assert_eq!((placed, l.wire().counters.lost, l.busy_until()), (0, 1, 0));
        assert!(l.next_release().is_none());
        // With `ecn`, an ECN-capable packet is marked instead and costs its time as any other.
        let mut l = link("rate 8Mbit loss 100% ecn", 0);
        assert_eq!(
            l.transmit(crate::testutil::ect(pkt(1, 1000)), 0, &mut |_| placed += 1),
            1_000_000
        );
        let c = l.wire().counters;
        assert_eq!((placed, c.lost, c.ecn_marked), (1, 0, 1));
    }

    #[test]
    fn a_corrupted_record_is_lost_as_its_checksum_would_lose_it() {
        let mut l = link("corrupt 100%", 0);
        l.transmit(pkt(1, 100), 0, &mut |_| {});
        let c = l.wire().counters;
        assert_eq!((c.corrupted, c.lost, l.wire().len()), (1, 1, 0));
    }

    #[test]
    fn cake_framing_costs_transmission_time() {
        let o = crate::link::overhead::Overhead {
            strip_l2: false,
            overhead: 24,
            mpu: 0,
            atm: Default::default(),
        };
        let mut l = link("rate 8Mbit", 0).with_layer(LinkLayer::Cake(o));
        assert_eq!(l.transmit(pkt(1, 1000), 0, &mut |_| {}), 1_024_000);
    }
}
