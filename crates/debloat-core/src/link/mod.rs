//! The link behind a discipline: serialisation at a rate, with framing.

pub mod bottleneck;
