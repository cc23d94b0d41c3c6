//! # debloat-core
//!
//! Sans-IO queue disciplines that behave like the Linux kernel's: `pfifo`/`bfifo`,
//! `pfifo_fast`, `codel`, `fq_codel`, `pie`, `fq_pie`, `tbf`, `cake` (with COBALT, tins, host isolation, the shaper, overhead compensation and
//! the ACK filter), the `deadline` baseline, DQL (the algorithm behind BQL), and Wi-Fi airtime
//! (mac80211's per-station queues, the airtime-fairness scheduler and AQL, in `airtime`). Specs and
//! statistics are in tc's words.
//!
//! ## The contract
//! * **No I/O, no clocks, no threads, no self-seeding.** Time is a `u64` of nanoseconds passed
//!   into every call ([`packet::Nanos`]); hash keys and random seeds are configuration.
//! * **Inputs and outputs.** [`Qdisc::enqueue`] and [`Qdisc::dequeue`] are the inputs; packets
//!   come out of `dequeue` (or [`Dequeue::NotBefore`] says when to ask again) and dropped packets
//!   out of [`Qdisc::take_dropped`]. `now` never goes backwards.
//! * **Every packet is accounted for exactly once**: sent, dropped (with a [`DropReason`]), or
//!   queued. The property tests in `tests/accounting.rs` hold every discipline to this.
//! * **No panics on input**: any packet, any spec that parses, any clock.
//!
//! ```
//! use debloat_core::{QdiscSpec, Qdisc, Dequeue, FlowHasher, packet::{Record, PacketMeta}, flow::FlowKey};
//! let spec: QdiscSpec = "fq_codel target 5ms".parse().unwrap();
//! let mut q = spec.build::<Record>(FlowHasher::default(), 1);
//! let flow = FlowKey::ip("198.18.0.1".parse().unwrap(), "198.18.1.1".parse().unwrap(), 1, 2, 17);
//! q.enqueue(Record::new(0, PacketMeta::new(1514, flow)), 0);
//! assert!(matches!(q.dequeue(1_000), Dequeue::Packet(_)));
//! ```

#![forbid(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]
#![warn(missing_docs)]

pub mod airtime;
pub mod autorate;
pub mod classify;
pub mod device;
pub mod direction;
pub mod flow;
pub mod link;
pub mod packet;
pub mod path;
pub mod qdisc;
pub mod rate_words;
pub mod rng;
pub mod units;

#[doc(hidden)]
pub mod testutil;

pub use direction::Direction;
pub use flow::FlowHasher;
pub use packet::{Nanos, Packet, PacketMeta, Record};
pub use qdisc::spec::{QdiscSpec, SpecError};
pub use qdisc::stats::QdiscStats;
pub use qdisc::{Dequeue, DropReason, Dropped, Qdisc, Verdict};

/// `psched_mtu` of an Ethernet device: MTU 1500 + 14-byte header. fq_codel's default quantum,
/// CoDel's byte floor and CAKE's MTU.
pub const PSCHED_MTU: u32 = 1514;
