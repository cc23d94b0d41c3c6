//! Packet I/O back ends: how frames get in and out of the interfaces. Today one: AF_PACKET with
//! a TPACKET ring ([`sys`], where all of the crate's `unsafe` is), read in batches by
//! [`intake`], with the interfaces' offloads turned off while the gateway runs ([`offload`]).
//! A new back end (AF_XDP) is one more module here that hands [`intake`] frames.

pub mod intake;
pub mod offload;
pub mod sys;
