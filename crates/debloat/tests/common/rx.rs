//! The bytes a namespace's `eth0` received, over an interval of the test's choosing.
//!
//! Reading the counter through `ip -s link` and stamping it with `Instant::now()` afterwards
//! pairs a count with a time up to a process start later: under load (a busy loop on the other
//! core) that skew reached a second and more, and a 5 s window read 12 Mbit/s of a 20 Mbit/s
//! link. Here one shell in the namespace reads the counter from sysfs and stamps it in the same
//! breath (`read` and `$EPOCHREALTIME` are bash builtins: no process between them), every 20 ms,
//! and a rate is the difference of two such samples over their own timestamps.

use super::bed::{ns, Bed};
use debloat_gateway::testbed;
use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A rate read off the samples, and the window it was read over.
#[derive(Clone, Copy, Debug)]
pub struct Rate {
    /// Bits per second.
    pub bps: f64,
    /// The window's first and last sample's stamps, seconds since the epoch (the clock of
    /// `host_stalls`' stalls).
    pub from: f64,
    pub to: f64,
}

/// Samples of `eth0`'s received bytes in one namespace: (seconds since the epoch, bytes).
pub struct RxSamples {
    child: Child,
    samples: Arc<Mutex<Vec<(f64, u64)>>>,
}

impl RxSamples {
    /// Start sampling the `role` namespace's `eth0` ("server", "client").
    pub fn start(bed: &Bed, role: &str) -> RxSamples {
        let script = "while :; do read -r b < /sys/class/net/eth0/statistics/rx_bytes; \
                      echo \"$EPOCHREALTIME $b\"; sleep 0.02; done";
        let mut child = testbed::in_ns(&ns(bed, role), &["bash", "-c", script])
            .env("LC_ALL", "C")
            .stdout(Stdio::piped())
            .spawn()
            .expect("bash runs in the namespace");
        let out = child.stdout.take().expect("piped stdout");
        let samples = Arc::new(Mutex::new(Vec::new()));
        let into = Arc::clone(&samples);
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let mut w = line.split(' ');
                let t = w.next().and_then(|t| t.parse::<f64>().ok());
                let b = w.next().and_then(|b| b.parse::<u64>().ok());
                if let (Some(t), Some(b)) = (t, b) {
                    into.lock().unwrap_or_else(|e| e.into_inner()).push((t, b));
                }
            }
        });
        RxSamples { child, samples }
    }

    /// The first sample taken at or after `t`, waiting up to 5 s for it.
    pub fn at(&self, t: SystemTime) -> (f64, u64) {
        let want = t
            .duration_since(UNIX_EPOCH)
            .expect("after 1970")
            .as_secs_f64();
        for _ in 0..500 {
            let s = self.samples.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(&x) = s.iter().find(|(ts, _)| *ts >= want) {
                return x;
            }
            drop(s);
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("no sample of the received bytes within 5 s of the time asked for");
    }

    /// Bits per second received between the samples at `t0` and `t1`, over their own stamps.
    pub fn rate_bps(&self, t0: SystemTime, t1: SystemTime) -> f64 {
        self.rate(t0, t1).bps
    }

    /// The rate between the samples at `t0` and `t1`, with the window it was read over.
    pub fn rate(&self, t0: SystemTime, t1: SystemTime) -> Rate {
        let ((s0, b0), (s1, b1)) = (self.at(t0), self.at(t1));
        assert!(s1 > s0, "samples at {s0} and {s1}: the interval is empty");
        Rate {
            bps: (b1 - b0) as f64 * 8.0 / (s1 - s0),
            from: s0,
            to: s1,
        }
    }
}

impl Drop for RxSamples {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
