//! The device limit: what sits between a discipline and the link. In Linux, the driver's TX
//! ring holds packets the qdisc can no longer reorder or drop, and BQL (`dql`) limits how many
//! bytes may wait there so that the queue stays in the qdisc where the AQM can see it.

pub mod dql;
pub mod ring;

pub use ring::{Device, DeviceConfig};
