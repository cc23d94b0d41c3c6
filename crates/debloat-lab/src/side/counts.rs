//! A discipline's counters in one shape, read from the kernel's `tc -s -j qdisc show` and from
//! `debloat gateway stats --json` (whose statistics carry tc's own names).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One CAKE tin's counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Tin {
    /// Packets sent.
    pub sent_packets: u64,
    /// Packets dropped (AQM and overflow).
    pub drops: u64,
    /// Packets CE-marked.
    pub ecn_mark: u64,
    /// ACKs the filter dropped.
    pub ack_drops: u64,
    /// Average sojourn, µs: cake's EWMA (a gain of 1/256 per packet, so it follows the last
    /// few hundred packets), averaged over the readings taken through the measured part of
    /// the load ([`Counts::average_sojourns`]); one reading alone is a fraction of a second.
    pub avg_delay_us: u64,
    /// Peak sojourn (EWMA), µs.
    pub peak_delay_us: u64,
}

/// A discipline's counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Counts {
    /// Packets sent.
    pub packets: u64,
    /// Packets dropped.
    pub drops: u64,
    /// Packets CE-marked (codel's and fq_codel's `ecn_mark`, the tins' sum for cake).
    pub marks: u64,
    /// CAKE's tins (empty for the others).
    pub tins: Vec<Tin>,
    /// CAKE's capacity estimate, bytes/s (its `autorate-ingress`; otherwise the configured
    /// rate), 0 for the others.
    #[serde(default)]
    pub capacity_estimate: u64,
    /// debloat only: frames' mean and longest wait in the kernel's receive ring before the
    /// gateway took them, µs (a queue in front of the discipline that it cannot see).
    pub ring_wait_us: Option<(f64, u64)>,
}

impl Counts {
    /// Drops over packets offered (sent + dropped).
    pub fn drop_rate(&self) -> f64 {
        self.drops as f64 / (self.packets + self.drops).max(1) as f64
    }
    /// Marks over packets sent.
    pub fn mark_rate(&self) -> f64 {
        self.marks as f64 / self.packets.max(1) as f64
    }

    /// From one qdisc's object, in tc's JSON names; `xstats` may be nested (the gateway's).
    fn from_object(q: &Value) -> Counts {
        let n = |v: &Value, k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
        let x = q.get("xstats").unwrap_or(q);
        let tins: Vec<Tin> = x
            .get("tins")
            .and_then(Value::as_array)
            .map(|ts| {
                ts.iter()
                    .map(|t| Tin {
                        sent_packets: n(t, "sent_packets"),
                        drops: n(t, "drops"),
                        ecn_mark: n(t, "ecn_mark"),
                        ack_drops: n(t, "ack_drops"),
                        avg_delay_us: n(t, "avg_delay_us"),
                        peak_delay_us: n(t, "peak_delay_us"),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let marks = if tins.is_empty() {
            n(x, "ecn_mark")
        } else {
            tins.iter().map(|t| t.ecn_mark).sum()
        };
        Counts {
            packets: n(q, "packets"),
            drops: n(q, "drops"),
            marks,
            tins,
            capacity_estimate: n(x, "capacity_estimate"),
            ring_wait_us: None,
        }
    }

    /// Replace each tin's average sojourn by its mean over `readings` (taken through the
    /// load): cake's EWMA at any one instant is one moment of TCP's sawtooth, so two runs of
    /// the same discipline differ by more than the discipline does. No readings: unchanged.
    pub fn average_sojourns<'a>(&mut self, readings: impl Iterator<Item = &'a Counts> + Clone) {
        for (i, tin) in self.tins.iter_mut().enumerate() {
            let seen: Vec<u64> = readings
                .clone()
                .filter_map(|r| r.tins.get(i).map(|t| t.avg_delay_us))
                .collect();
            if !seen.is_empty() {
                tin.avg_delay_us = seen.iter().sum::<u64>() / seen.len() as u64;
            }
        }
    }

    /// The qdisc of `kind` in `tc -s -j qdisc show dev D`'s output (the leaf under HTB).
    pub fn from_tc_json(json: &str, kind: &str) -> Result<Counts, String> {
        let v: Value = serde_json::from_str(json).map_err(|e| format!("tc's JSON: {e}"))?;
        v.as_array()
            .and_then(|qs| {
                qs.iter()
                    .find(|q| q.get("kind").and_then(Value::as_str) == Some(kind))
            })
            .map(Counts::from_object)
            .ok_or_else(|| format!("no {kind} qdisc in tc's output: {json}"))
    }

    /// One direction (`egress` or `ingress`) of `debloat gateway stats --json`: the
    /// discipline's counters, with the frames its emulated link lost or refused (loss model,
    /// full buffer, the wire's `limit`) counted as drops and not as sent, and what waits in
    /// the link's buffer not yet sent, as the kernel's netem counts them.
    pub fn from_gateway_json(json: &str, dir: &str) -> Result<Counts, String> {
        let v: Value =
            serde_json::from_str(json).map_err(|e| format!("the gateway's JSON: {e}"))?;
        let e = v.get(dir);
        let mut c = e
            .and_then(|e| e.get("stats"))
            .map(Counts::from_object)
            .ok_or_else(|| format!("no {dir} statistics in the gateway's answer: {json}"))?;
        let n = |v: Option<&Value>, k: &str| {
            v.and_then(|v| v.get(k))
                .and_then(Value::as_u64)
                .unwrap_or(0)
        };
        let frames = e.and_then(|e| e.get("frames"));
        let refused = n(frames, "lost") + n(frames, "overlimit") + n(frames, "buffer_dropped");
        c.drops += refused;
        // What waits in the link's buffer has left the discipline but not the link, as what
        // waits in netem's queue is not yet `Sent` there.
        c.packets = c.packets.saturating_sub(refused + n(e, "in_buffer"));
        c.ring_wait_us = e.and_then(|e| e.get("ring_wait")).map(|w| {
            let w = Some(w);
            (
                n(w, "total_us") as f64 / n(w, "frames").max(1) as f64,
                n(w, "max_us"),
            )
        });
        Ok(c)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn tc_json_leaf_under_htb_is_found() {
        let j = r#"[{"kind":"htb","handle":"1:","packets":90,"drops":0},
                    {"kind":"fq_codel","handle":"10:","parent":"1:1","bytes":1,"packets":90,"drops":10,"ecn_mark":3}]"#;
        let c = Counts::from_tc_json(j, "fq_codel").unwrap();
        assert_eq!((c.packets, c.drops, c.marks), (90, 10, 3));
        assert!((c.drop_rate() - 0.1).abs() < 1e-12);
        assert!(Counts::from_tc_json(j, "cake")
            .unwrap_err()
            .contains("no cake qdisc"));
    }

    #[test]
    fn cake_tins_sum_their_marks_in_both_shapes() {
        let tc = r#"[{"kind":"cake","packets":10,"drops":2,"tins":[{"sent_packets":4,"drops":1,"ecn_mark":2,"ack_drops":0,"avg_delay_us":5,"peak_delay_us":9},{"sent_packets":6,"drops":1,"ecn_mark":1}]}]"#;
        let gw = r#"{"egress":{"stats":{"kind":"cake","packets":10,"drops":2,"xstats":{"tins":[{"sent_packets":4,"drops":1,"ecn_mark":2,"ack_drops":0,"avg_delay_us":5,"peak_delay_us":9},{"sent_packets":6,"drops":1,"ecn_mark":1}]}}}}"#;
        let a = Counts::from_tc_json(tc, "cake").unwrap();
        let b = Counts::from_gateway_json(gw, "egress").unwrap();
        assert_eq!(a, b);
        assert_eq!((a.marks, a.tins.len(), a.tins[0].peak_delay_us), (3, 2, 9));
    }

    /// A frame the discipline let go and the emulated link lost is a drop, not a packet sent,
    /// as netem (the kernel's side of a `--netem` comparison) counts it.
    #[test]
    fn the_links_losses_are_drops_not_packets_sent() {
        let gw = r#"{"egress":{"stats":{"kind":"pfifo","packets":1000,"drops":0},"in_buffer":20,"frames":{"lost":10,"overlimit":0,"buffer_dropped":5}}}"#;
        let c = Counts::from_gateway_json(gw, "egress").unwrap();
        assert_eq!((c.packets, c.drops), (965, 15));
        assert!((c.drop_rate() - 15.0 / 980.0).abs() < 1e-12);
    }

    #[test]
    fn sojourns_are_averaged_over_the_readings_and_nothing_else_moves() {
        let tins = |d: &[u64]| Counts {
            packets: 7,
            tins: d
                .iter()
                .map(|&avg_delay_us| Tin {
                    avg_delay_us,
                    sent_packets: 3,
                    ..Tin::default()
                })
                .collect(),
            ..Counts::default()
        };
        let readings = [tins(&[1000, 10]), tins(&[3000, 30]), tins(&[8000])];
        let mut last = tins(&[9000, 90]);
        last.average_sojourns(readings.iter());
        // Tin 0 from three readings, tin 1 from the two that had it.
        assert_eq!(last, tins(&[4000, 20]));
        let mut none = tins(&[5]);
        none.average_sojourns([].iter());
        assert_eq!(none, tins(&[5]));
    }
}
