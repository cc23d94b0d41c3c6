//! CAKE's per-tin families: delays, backlog, and the tin's packet, byte, drop and mark counters.

use super::{counter, dirs, gauge, Collect, Labels};
use debloat_core::qdisc::stats::Xstats;
use prometheus_client::encoding::DescriptorEncoder;

impl Collect {
    pub(super) fn encode_tins(&self, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut tins = Vec::new();
        for (dir, d) in dirs(&self.0) {
            if let Xstats::Cake(c) = &d.stats.xstats {
                for t in &c.tins {
                    tins.push((
                        vec![("direction", dir.to_string()), ("tin", t.name.clone())],
                        t,
                    ));
                }
            }
        }
        if tins.is_empty() {
            return Ok(());
        }
        type Tin = debloat_core::qdisc::stats::TinStats;
        fn us(v: u64) -> f64 {
            v as f64 / 1e6
        }
        for (name, help, f) in [
            (
                "debloat_cake_tin_peak_delay_seconds",
                "Peak sojourn time (tc pk_delay).",
                (|t: &Tin| us(t.peak_delay_us)) as fn(&Tin) -> f64,
            ),
            (
                "debloat_cake_tin_avg_delay_seconds",
                "Average sojourn time (tc av_delay).",
                |t| us(t.avg_delay_us),
            ),
            (
                "debloat_cake_tin_base_delay_seconds",
                "Sparse-flow sojourn time (tc sp_delay).",
                |t| us(t.base_delay_us),
            ),
            (
                "debloat_cake_tin_target_delay_seconds",
                "The tin's COBALT target (tc target).",
                |t| us(t.target_us),
            ),
            (
                "debloat_cake_tin_backlog_bytes",
                "Bytes queued in the tin.",
                |t| t.backlog_bytes as f64,
            ),
        ] {
            let rows: Vec<(Labels, f64)> = tins.iter().map(|(l, t)| (l.clone(), f(t))).collect();
            gauge(enc, name, help, &rows)?;
        }
        for (name, help, f) in [
            (
                "debloat_cake_tin_packets",
                "Packets enqueued in the tin.",
                (|t: &Tin| u64::from(t.sent_packets)) as fn(&Tin) -> u64,
            ),
            (
                "debloat_cake_tin_bytes",
                "Bytes enqueued in the tin.",
                |t| t.sent_bytes,
            ),
            ("debloat_cake_tin_drops", "Packets the tin dropped.", |t| {
                u64::from(t.drops)
            }),
            (
                "debloat_cake_tin_ecn_marks",
                "Packets the tin marked CE.",
                |t| u64::from(t.ecn_mark),
            ),
            (
                "debloat_cake_tin_ack_drops",
                "ACKs the ACK filter dropped.",
                |t| u64::from(t.ack_drops),
            ),
        ] {
            let rows: Vec<(Labels, u64)> = tins.iter().map(|(l, t)| (l.clone(), f(t))).collect();
            counter(enc, name, help, &rows)?;
        }
        Ok(())
    }
}
