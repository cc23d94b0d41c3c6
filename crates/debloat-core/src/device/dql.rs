//! Dynamic queue limits (lib/dynamic_queue_limits.c), the algorithm behind BQL: how many bytes
//! a device's TX ring may hold so it never starves yet never holds more than it needs.
//!
//! The driver reports bytes handed to the hardware ([`Dql::sent`]) and bytes it finished
//! ([`Dql::completed`]); the qdisc may hand over more only while [`Dql::available`] ≥ 0. The
//! limit grows at once, by what drained, whenever the queue was over its limit yet ran dry
//! (starvation); it shrinks at most once per `hold_time`, by the smallest slack seen while the
//! queue stayed busy. All byte arithmetic is `u32` modulo 2^32 as in the kernel.
//!
//! Deviation: time is nanoseconds passed in rather than jiffies; `hold_time` defaults to 1 s
//! (HZ). The 6.9+ stall detector is not modelled (it only reports).

use crate::packet::Nanos;
use thiserror::Error;

/// DQL_MAX_LIMIT: UINT_MAX/2 − UINT_MAX/16.
pub const DQL_MAX_LIMIT: u32 = (u32::MAX / 2) - (u32::MAX / 16);
/// DQL_MAX_OBJECT: UINT_MAX/16, the largest single `sent`.
pub const DQL_MAX_OBJECT: u32 = u32::MAX / 16;

/// A misuse that the kernel would BUG on.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DqlError {
    /// More bytes completed than are in flight.
    #[error("completed {count} bytes but only {inflight} are in flight")]
    OverCompleted {
        /// Bytes reported.
        count: u32,
        /// Bytes in flight.
        inflight: u32,
    },
    /// A single object larger than DQL_MAX_OBJECT.
    #[error("object of {0} bytes exceeds DQL_MAX_OBJECT")]
    TooLarge(u32),
}

/// DQL configuration (sysfs `byte_queue_limits/`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// `limit_min`, bytes (default 0).
    pub min_limit: u32,
    /// `limit_max`, bytes (default DQL_MAX_LIMIT).
    pub max_limit: u32,
    /// `hold_time`, ns (default 1 s).
    pub hold_time_ns: Nanos,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            min_limit: 0,
            max_limit: DQL_MAX_LIMIT,
            hold_time_ns: 1_000_000_000,
        }
    }
}

/// One TX queue's limit state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dql {
    cfg: Config,
    num_queued: u32,
    adj_limit: u32,
    last_obj_cnt: u32,
    limit: u32,
    num_completed: u32,
    prev_ovlimit: u32,
    prev_num_queued: u32,
    prev_last_obj_cnt: u32,
    lowest_slack: u32,
    slack_start_time: Nanos,
    stopped: bool,
}

#[inline]
fn posdiff(a: u32, b: u32) -> u32 {
    if (a.wrapping_sub(b) as i32) > 0 {
        a.wrapping_sub(b)
    } else {
        0
    }
}

impl Dql {
    /// A fresh queue at `now`: limit = min_limit (0 by default).
    pub fn new(cfg: Config, now: Nanos) -> Dql {
        let mut d = Dql {
            cfg,
            num_queued: 0,
            adj_limit: 0,
            last_obj_cnt: 0,
            limit: 0,
            num_completed: 0,
            prev_ovlimit: 0,
            prev_num_queued: 0,
            prev_last_obj_cnt: 0,
            lowest_slack: u32::MAX,
            slack_start_time: now,
            stopped: false,
        };
        d.reset(now);
        d
    }

    /// `dql_reset` / `netdev_tx_reset_queue`.
    pub fn reset(&mut self, now: Nanos) {
        self.limit = self.cfg.min_limit;
        self.num_queued = 0;
        self.num_completed = 0;
        self.last_obj_cnt = 0;
        self.prev_num_queued = 0;
        self.prev_last_obj_cnt = 0;
        self.prev_ovlimit = 0;
        self.lowest_slack = u32::MAX;
        self.slack_start_time = now;
        self.adj_limit = self.limit;
        self.stopped = false;
    }

    /// Current limit, bytes.
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// Bytes handed to the device and not yet completed.
    pub fn inflight(&self) -> u32 {
        self.num_queued.wrapping_sub(self.num_completed)
    }

    /// `dql_avail`: bytes that may still be queued (negative: over the limit).
    pub fn available(&self) -> i64 {
        i64::from(self.adj_limit.wrapping_sub(self.num_queued) as i32)
    }

    /// True while the queue is stopped (STACK_XOFF): the qdisc must not hand over more.
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// `netdev_tx_sent_queue`: `bytes` handed to the device. Returns true if the queue is now
    /// stopped (the packet that crossed the limit is still accepted).
    pub fn sent(&mut self, bytes: u32) -> Result<bool, DqlError> {
        if bytes > DQL_MAX_OBJECT {
            return Err(DqlError::TooLarge(bytes));
        }
        self.last_obj_cnt = bytes;
        self.num_queued = self.num_queued.wrapping_add(bytes);
        if self.available() < 0 {
            self.stopped = true;
        }
        Ok(self.stopped)
    }

    /// `netdev_tx_completed_queue`: the device finished `bytes` at `now`. Returns true if the
    /// queue was stopped and may now be woken.
    pub fn completed(&mut self, bytes: u32, now: Nanos) -> Result<bool, DqlError> {
        if bytes == 0 {
            return Ok(false);
        }
        let inflight = self.inflight();
        if bytes > inflight {
            return Err(DqlError::OverCompleted {
                count: bytes,
                inflight,
            });
        }
        self.adapt(bytes, now);
        if self.stopped && self.available() >= 0 {
            self.stopped = false;
            return Ok(true);
        }
        Ok(false)
    }

    /// `dql_completed`: the limit adaptation.
    fn adapt(&mut self, count: u32, now: Nanos) {
        let num_queued = self.num_queued;
        let completed = self.num_completed.wrapping_add(count);
        let mut limit = self.limit;
        let mut ovlimit = posdiff(num_queued.wrapping_sub(self.num_completed), limit);
        let inprogress = num_queued.wrapping_sub(completed);
        let prev_inprogress = self.prev_num_queued.wrapping_sub(self.num_completed);
        let all_prev_completed = (completed.wrapping_sub(self.prev_num_queued) as i32) >= 0;

        if (ovlimit != 0 && inprogress == 0) || (self.prev_ovlimit != 0 && all_prev_completed) {
            // Starved: grow by what was sent and completed, plus the previous over-limit.
            limit = limit
                .wrapping_add(posdiff(completed, self.prev_num_queued))
                .wrapping_add(self.prev_ovlimit);
            self.slack_start_time = now;
            self.lowest_slack = u32::MAX;
        } else if inprogress != 0 && prev_inprogress != 0 && !all_prev_completed {
            // Busy the whole interval: remember the least slack; shrink once per hold time.
            let slack = posdiff(
                limit.wrapping_add(self.prev_ovlimit),
                completed.wrapping_sub(self.num_completed).wrapping_mul(2),
            );
            let slack_last = if self.prev_ovlimit != 0 {
                posdiff(self.prev_last_obj_cnt, self.prev_ovlimit)
            } else {
                0
            };
            self.lowest_slack = self.lowest_slack.min(slack.max(slack_last));
            if now > self.slack_start_time.saturating_add(self.cfg.hold_time_ns) {
                limit = posdiff(limit, self.lowest_slack);
                self.slack_start_time = now;
                self.lowest_slack = u32::MAX;
            }
        }
        limit = limit.clamp(self.cfg.min_limit, self.cfg.max_limit);
        if limit != self.limit {
            self.limit = limit;
            ovlimit = 0;
        }
        self.adj_limit = limit.wrapping_add(completed);
        self.prev_ovlimit = ovlimit;
        self.prev_last_obj_cnt = self.last_obj_cnt;
        self.num_completed = completed;
        self.prev_num_queued = num_queued;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_queue_stops_after_one_packet_then_grows_on_starvation() {
        let mut d = Dql::new(Config::default(), 0);
        assert_eq!(d.limit(), 0);
        assert_eq!(
            d.sent(1514),
            Ok(true),
            "limit 0: the first packet stops the queue"
        );
        assert_eq!(d.completed(1514, 1000), Ok(true));
        assert_eq!(
            d.limit(),
            1514,
            "starved while over limit: grow by what drained"
        );
        assert_eq!(d.sent(1514), Ok(false));
        assert_eq!(d.sent(1514), Ok(true), "limit plus one packet of overshoot");
        assert_eq!(d.inflight(), 3028);
    }

    #[test]
    fn limit_is_clamped_to_min_and_max() {
        let cfg = Config {
            min_limit: 3000,
            max_limit: 5000,
            hold_time_ns: 1_000_000_000,
        };
        let mut d = Dql::new(cfg, 0);
        assert_eq!(d.limit(), 3000);
        for i in 0..50u64 {
            while !d.stopped() {
                let _ = d.sent(1514);
            }
            let f = d.inflight();
            let _ = d.completed(f, i * 1_000_000);
            assert!((3000..=5000).contains(&d.limit()), "limit {}", d.limit());
        }
    }

    #[test]
    fn over_completion_is_an_error_not_a_panic() {
        let mut d = Dql::new(Config::default(), 0);
        let _ = d.sent(100);
        assert_eq!(
            d.completed(200, 1),
            Err(DqlError::OverCompleted {
                count: 200,
                inflight: 100
            })
        );
        assert_eq!(
            d.sent(DQL_MAX_OBJECT + 1),
            Err(DqlError::TooLarge(DQL_MAX_OBJECT + 1))
        );
    }
}
