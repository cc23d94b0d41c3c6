//! Wi-Fi airtime: rates and airtime estimates (`rate`), access categories and their EDCA
//! parameters (`ac`), mac80211's per-station queues with a shared flow table (`txq`), and the
//! airtime-fairness scheduler with Airtime Queue Limits (`scheduler`). On Wi-Fi a byte's cost depends on the station's rate — the same kilobyte takes
//! 100× more airtime at 6 Mbit/s than at 600 — so queues are limited and shared in units of time.

pub mod ac;
pub mod rate;
pub mod scheduler;
pub mod txq;

pub use ac::{Ac, Edca};
pub use rate::PhyRate;
pub use scheduler::{AqlConfig, Radio, Scheduler};
pub use txq::MacFq;
