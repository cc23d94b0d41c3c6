//! The back end and worker families: `debloat_gateway_io_info`, `debloat_gateway_workers`.

use super::{dirs, gauge, Collect, Labels};
use prometheus_client::encoding::DescriptorEncoder;

impl Collect {
    /// The packet I/O back end of each direction's receiving interface, and the workers.
    pub(super) fn encode_io(&self, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = &self.0;
        let rows: Vec<(Labels, f64)> = dirs(s)
            .into_iter()
            .map(|(dir, d)| {
                let from = d.path.split(" → ").next().unwrap_or("");
                let l = vec![
                    ("direction", dir.to_string()),
                    ("interface", from.to_string()),
                    ("io", d.io.io.to_string()),
                    (
                        "xdp_mode",
                        d.io.xdp.map_or("", |x| x.mode.as_str()).to_string(),
                    ),
                    (
                        "zero_copy",
                        d.io.xdp.is_some_and(|x| x.zero_copy).to_string(),
                    ),
                    (
                        "rx_queues",
                        d.io.xdp.map_or(String::new(), |x| x.queues.to_string()),
                    ),
                    (
                        "multi_buffer",
                        d.io.xdp.is_some_and(|x| x.multi_buffer).to_string(),
                    ),
                    (
                        "shared_umem",
                        d.io.xdp.is_some_and(|x| x.shared_umem).to_string(),
                    ),
                ];
                (l, 1.0)
            })
            .collect();
        gauge(
            enc,
            "debloat_gateway_io_info",
            "The packet I/O back end each direction's frames arrive through.",
            &rows,
        )?;
        gauge(
            enc,
            "debloat_gateway_workers",
            "Forwarding threads.",
            &[(vec![], s.workers as f64)],
        )
    }
}
