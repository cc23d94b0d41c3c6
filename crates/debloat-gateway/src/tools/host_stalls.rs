//! A witness of the host taking the CPUs away while a measurement runs.
//!
//! The machines are virtual: now and then the hypervisor runs something else on a vCPU (the
//! guest's `steal` time, the eighth number of `/proc/stat`'s `cpu` line) or stops the
//! whole machine for a while. Everything a testbed or the kernel lab measures lives on this
//! machine, so such a stall delays every packet in flight at once: in CI on 2026-11-28 one
//! comparison of fq_codel read the kernel's ping p99 15 ms above debloat's, and an earlier run
//! of the same comparison read debloat's 54 ms above the kernel's. A run that stalled
//! says nothing about the discipline, so the tests that judge a tail or a rate read this
//! witness and run again once when the host stalled and the figure failed; they still fail
//! when a run without a stall differs.
//!
//! Two readings:
//! * the `steal` counter, summed over the vCPUs (in `USER_HZ` ticks, 10 ms each): how much, in
//!   all;
//! * on every CPU the process may use, a thread pinned there that sleeps 1 ms at a time
//!   (SCHED_FIFO where the process may, so that nothing of the machine's own delays it) and
//!   notes each oversleep from [`STALL_MS`] on, with its wall-clock times: when, so that a
//!   measurement can leave out what was in flight then (`debloat_lab::side` does for its
//!   pings: the guest's clock is the host's).
//!
//! Unsafe: two libc calls, pinning a watching thread and setting its scheduling policy.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A stolen total or a pause from this long on voids a run's tail latency (a p99 of a few
/// hundred pings 50 ms apart moves when four of them wait).
pub const VOIDS_AFTER_MS: f64 = 20.0;

/// A share of one CPU stolen by the host over a measurement from which a figure of timing that
/// fails (a latency, a goodput or a shaped rate to a percent or two; in the kernel lab, where
/// both runs share the guest's one CPU with everything they measure, any figure) is not judged:
/// the host decided it. A p99 of 300 pings is decided by its worst three; with 5 % of the time
/// stolen in slices some fifteen of them meet a stall, and the stalls the watching threads
/// cannot place (under [`STALL_MS`], or a vCPU slowed rather than stopped) stay among them; at
/// 27 % a guest forwarding 10 Mbit/s fell 13 % short of it. Under 5 % every figure is judged.
pub const TIMING_UNJUDGED_FROM: f64 = 0.05;

/// A watching thread's oversleep from this long on is a stall, ms (a vCPU under SCHED_FIFO
/// wakes within a tenth of that when the host leaves it alone).
pub const STALL_MS: f64 = 2.0;

/// What the host took away over one watched interval.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HostStalls {
    /// CPU time the hypervisor gave to others while a vCPU wanted it, every vCPU together, ms
    /// (10 ms steps; None where `/proc/stat` has no steal counter).
    pub steal_ms: Option<f64>,
    /// The longest a watching thread overslept its 1 ms, ms.
    pub longest_pause_ms: f64,
    /// Each stall of a watched CPU, `[from, to]` in seconds since the epoch, in time order
    /// (CPUs' stalls that overlap are one).
    #[serde(default)]
    pub stalls: Vec<[f64; 2]>,
    /// Whether the watching threads ran under SCHED_FIFO (otherwise the machine's own load
    /// can delay them too, and the stalls over-state the host's).
    #[serde(default)]
    pub realtime: bool,
    /// Each watched CPU's own stalls, `[from, to]` as in `stalls`, one list a CPU (not
    /// serialized: `stalls` says when; this, how much of the machine).
    #[serde(skip)]
    pub per_cpu: Vec<Vec<[f64; 2]>>,
    /// How long the watch ran, s.
    pub seconds: f64,
}

impl HostStalls {
    /// Whether the host stalled enough to void a tail or a rate measured meanwhile
    /// ([`VOIDS_AFTER_MS`]).
    pub fn voids(&self) -> bool {
        self.steal_ms.unwrap_or(0.0) >= VOIDS_AFTER_MS || self.longest_pause_ms >= VOIDS_AFTER_MS
    }

    /// The steal as a share of one CPU's time over the watch (0.05: 5 %); None without a
    /// steal counter.
    pub fn stolen_share(&self) -> Option<f64> {
        Some(self.steal_ms? / (self.seconds * 1e3).max(1e-9))
    }

    /// Whether the host stole enough to decide a figure of timing ([`TIMING_UNJUDGED_FROM`]).
    pub fn decides_timing(&self) -> bool {
        self.stolen_share().unwrap_or(0.0) >= TIMING_UNJUDGED_FROM
    }

    /// These stalls and `other`'s as one watch: the stalls of both (overlapping ones joined),
    /// the longer pause; the steal and the time are this one's.
    pub fn with_stalls_of(&self, other: &HostStalls) -> HostStalls {
        let mut all = self.stalls.clone();
        all.extend_from_slice(&other.stalls);
        let mut per_cpu = self.per_cpu.clone();
        per_cpu.extend(other.per_cpu.iter().cloned());
        HostStalls {
            stalls: merged(all),
            per_cpu,
            longest_pause_ms: self.longest_pause_ms.max(other.longest_pause_ms),
            ..self.clone()
        }
    }

    /// Whether a stall overlaps `[from, to]` (seconds since the epoch) widened by `margin_s`
    /// either side.
    pub fn touches(&self, from: f64, to: f64, margin_s: f64) -> bool {
        let (a, b) = (from - margin_s, to + margin_s);
        // `stalls` is in time order: the first stall ending after `a` decides.
        let i = self.stalls.partition_point(|s| s[1] < a);
        self.stalls.get(i).is_some_and(|s| s[0] <= b)
    }

    /// How much of the machine the stalls took from `[from, to]` (seconds since the epoch),
    /// s: the CPU time they covered in it divided by the CPUs watched (a 30 ms stall of one of
    /// two vCPUs counts 15 ms, of both 30 ms). A rate read over the window ran for that much
    /// less. Without the per-CPU lists (a watch read back from JSON), the joined stalls count
    /// whole.
    pub fn stalled_within(&self, from: f64, to: f64) -> f64 {
        let over = |v: &[[f64; 2]]| -> f64 {
            v.iter()
                .map(|s| (s[1].min(to) - s[0].max(from)).max(0.0))
                .sum()
        };
        if self.per_cpu.is_empty() {
            return over(&self.stalls);
        }
        let all: f64 = self.per_cpu.iter().map(|v| over(v)).sum();
        all / self.per_cpu.len() as f64
    }
}

impl std::fmt::Display for HostStalls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.steal_ms {
            Some(s) => write!(
                f,
                "the host stole {s:.0} ms of CPU ({:.1} % of one CPU's time)",
                self.stolen_share().unwrap_or(0.0) * 100.0
            )?,
            None => write!(f, "no steal counter")?,
        }
        let total: f64 = self
            .stalls
            .iter()
            .map(|s| s[1] - s[0])
            .fold(0.0, |a, b| a + b);
        write!(
            f,
            "; {} stalls of {STALL_MS} ms or more, {:.0} ms in all, the longest {:.1} ms{}; over {:.1} s",
            self.stalls.len(),
            total * 1e3,
            self.longest_pause_ms,
            if self.realtime { "" } else { " (not SCHED_FIFO)" },
            self.seconds
        )
    }
}

/// The `steal` field of `/proc/stat`'s first line, ticks; None where it is missing.
pub fn steal_ticks(stat: &str) -> Option<u64> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    line.split_whitespace().nth(8)?.parse().ok()
}

fn read_steal() -> Option<u64> {
    steal_ticks(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// What one watching thread saw: its stalls, its longest oversleep, whether it ran SCHED_FIFO.
type Seen = (Vec<[f64; 2]>, Duration, bool);

/// A running watch; [`Watch::stop`] ends it.
pub struct Watch {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<Seen>>,
    steal0: Option<u64>,
    start: Instant,
}

impl Watch {
    /// Start watching, one thread on each CPU the process may use, at SCHED_FIFO 1 where the
    /// process may.
    pub fn start() -> Watch {
        Watch::start_at(1)
    }

    /// The same at SCHED_FIFO `priority`: above the realtime threads of what is measured, so
    /// that their own work is not taken for a stall (the kernel lab's guest, whose gateway
    /// runs at 50, watches at 99).
    pub fn start_at(priority: i32) -> Watch {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = allowed_cpus()
            .into_iter()
            .filter_map(|cpu| {
                let flag = Arc::clone(&stop);
                std::thread::Builder::new()
                    .name(format!("host-stalls-{cpu}"))
                    .spawn(move || sleeper(cpu, priority, &flag))
                    .ok()
            })
            .collect();
        Watch {
            stop,
            threads,
            steal0: read_steal(),
            start: Instant::now(),
        }
    }

    /// Stop and say what the host took away meanwhile.
    pub fn stop(mut self) -> HostStalls {
        self.stop.store(true, Ordering::Relaxed);
        let (mut stalls, mut longest, mut realtime) = (Vec::new(), Duration::ZERO, true);
        let mut per_cpu = Vec::new();
        for t in self.threads.drain(..) {
            if let Ok((s, l, rt)) = t.join() {
                stalls.extend_from_slice(&s);
                per_cpu.push(s);
                longest = longest.max(l);
                realtime &= rt;
            }
        }
        // USER_HZ is 100 on every Linux architecture that exports it to /proc/stat.
        let steal_ms = match (self.steal0, read_steal()) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a) as f64 * 10.0),
            _ => None,
        };
        HostStalls {
            steal_ms,
            longest_pause_ms: longest.as_secs_f64() * 1e3,
            stalls: merged(stalls),
            realtime,
            per_cpu,
            seconds: self.start.elapsed().as_secs_f64(),
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Intervals sorted and the overlapping ones joined.
fn merged(mut v: Vec<[f64; 2]>) -> Vec<[f64; 2]> {
    v.sort_by(|a, b| a[0].total_cmp(&b[0]));
    let mut out: Vec<[f64; 2]> = Vec::with_capacity(v.len());
    for s in v {
        match out.last_mut() {
            Some(last) if s[0] <= last[1] => last[1] = last[1].max(s[1]),
            _ => out.push(s),
        }
    }
    out
}

fn epoch_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// On `cpu`, sleep 1 ms at a time until told to stop, noting each oversleep from [`STALL_MS`].
fn sleeper(cpu: usize, priority: i32, stop: &AtomicBool) -> Seen {
    pin_to(cpu);
    let realtime = realtime_if_allowed(priority);
    let tick = Duration::from_millis(1);
    let (mut stalls, mut longest) = (Vec::new(), Duration::ZERO);
    while !stop.load(Ordering::Relaxed) {
        let (t, at) = (Instant::now(), epoch_s());
        std::thread::sleep(tick);
        let over = t.elapsed().saturating_sub(tick);
        longest = longest.max(over);
        if over.as_secs_f64() * 1e3 >= STALL_MS {
            stalls.push([at, epoch_s()]);
        }
    }
    (stalls, longest, realtime)
}

/// The CPUs this process may run on.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity fills it for this
    // process (pid 0) within the size given; CPU_ISSET reads it within its bounds.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return vec![0];
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// Keep the calling thread on `cpu` (where that fails it roams, and sees less).
fn pin_to(cpu: usize) {
    // SAFETY: as in [`allowed_cpus`]; sched_setaffinity(0) changes only the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// SCHED_FIFO at the lowest real-time priority, where the process may (root); whether it did.
fn realtime_if_allowed(priority: i32) -> bool {
    let p = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: sets this thread's policy from a valid sched_param; failure changes nothing.
    unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &p) == 0 }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The guest's stalls join the host's: overlapping ones become one, the longer pause
    /// counts, the steal stays the host's.
    #[test]
    fn two_watches_stalls_join() {
        let host = HostStalls {
            steal_ms: Some(10.0),
            longest_pause_ms: 12.0,
            stalls: vec![[10.0, 10.012], [20.0, 20.005]],
            realtime: true,
            seconds: 60.0,
            per_cpu: Vec::new(),
        };
        let guest = HostStalls {
            longest_pause_ms: 68.6,
            stalls: vec![[10.010, 10.030], [30.0, 30.0686]],
            ..HostStalls::default()
        };
        let both = host.with_stalls_of(&guest);
        assert_eq!(
            both.stalls,
            vec![[10.0, 10.030], [20.0, 20.005], [30.0, 30.0686]]
        );
        assert_eq!((both.longest_pause_ms, both.steal_ms), (68.6, Some(10.0)));
        assert!(both.touches(30.05, 30.06, 0.0) && !host.touches(30.05, 30.06, 0.0));
        assert!(both.voids() && !host.voids());
    }

    #[test]
    fn steal_is_the_eighth_number_of_the_cpu_line() {
        let stat =
            "cpu  778236 94 102892 4857179 5142 0 16385 16683 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n";
        assert_eq!(steal_ticks(stat), Some(16683));
        assert_eq!(steal_ticks("cpu  1 2 3 4\n"), None);
        assert_eq!(steal_ticks("intr 5\n"), None);
    }

    #[test]
    fn a_run_is_void_from_twenty_ms_stolen_or_paused() {
        let calm = HostStalls {
            steal_ms: Some(10.0),
            longest_pause_ms: 3.0,
            seconds: 40.0,
            ..HostStalls::default()
        };
        assert!(!calm.voids());
        let stolen = HostStalls {
            steal_ms: Some(20.0),
            ..calm.clone()
        };
        assert!(stolen.voids());
        let paused = HostStalls {
            longest_pause_ms: 25.0,
            ..calm.clone()
        };
        assert!(paused.voids());
        let uncounted = HostStalls {
            steal_ms: None,
            ..calm
        };
        assert!(!uncounted.voids());
    }

    #[test]
    fn overlapping_stalls_of_two_cpus_are_one_and_a_flight_touches_them_with_its_margin() {
        let m = merged(vec![
            [10.0, 10.01],
            [5.0, 5.003],
            [10.005, 10.02],
            [7.0, 7.002],
        ]);
        assert_eq!(m, vec![[5.0, 5.003], [7.0, 7.002], [10.0, 10.02]]);
        let h = HostStalls {
            stalls: m,
            ..HostStalls::default()
        };
        // A ping in flight from 9.98 s to 9.995 s: 5 ms before the stall at 10 s.
        assert!(!h.touches(9.98, 9.995, 0.0));
        assert!(h.touches(9.98, 9.995, 0.005));
        assert!(h.touches(10.01, 10.011, 0.0), "inside a stall");
        assert!(h.touches(4.9, 7.5, 0.0), "over two stalls");
        assert!(!h.touches(5.01, 6.99, 0.001), "between two stalls");
        assert!(!h.touches(10.03, 11.0, 0.005), "after the last");
        assert!(!h.touches(1.0, 4.99, 0.005), "before the first");
        let within = |a: f64, b: f64| (h.stalled_within(a, b) * 1e6).round();
        assert_eq!(within(4.0, 11.0), 3.0e3 + 2.0e3 + 20.0e3, "all three, µs");
        assert_eq!(
            within(5.001, 10.01),
            2.0e3 + 2.0e3 + 10.0e3,
            "cut at both ends"
        );
        assert_eq!(within(5.5, 6.5), 0.0, "between two stalls");
        // Two CPUs: the first stalled 20 ms alone, then both 10 ms: 10 + 10 of the machine.
        let two = HostStalls {
            per_cpu: vec![vec![[1.0, 1.03]], vec![[1.02, 1.03]]],
            ..HostStalls::default()
        };
        assert_eq!((two.stalled_within(0.0, 2.0) * 1e6).round(), 20.0e3);
        assert_eq!((two.stalled_within(1.025, 2.0) * 1e6).round(), 5.0e3);
    }

    /// The watch sees a pause of the whole process as a pause of the machine would look from
    /// inside it: a shell stops this process for 80 ms (SIGSTOP, then SIGCONT).
    #[test]
    fn the_watch_sees_the_process_stopped_for_80_ms() {
        let w = Watch::start();
        std::thread::sleep(Duration::from_millis(20));
        let (before, pid) = (epoch_s(), std::process::id().to_string());
        let st = std::process::Command::new("sh")
            .args(["-c", "kill -STOP $0; sleep 0.08; kill -CONT $0", &pid])
            .status()
            .unwrap();
        assert!(st.success());
        let after = epoch_s();
        std::thread::sleep(Duration::from_millis(20));
        let s = w.stop();
        assert!(s.longest_pause_ms >= 70.0, "{s}");
        assert!(s.voids(), "{s}");
        assert!(s.seconds >= 0.1, "{s}");
        let long: Vec<_> = s.stalls.iter().filter(|x| x[1] - x[0] >= 0.07).collect();
        assert!(
            long.iter()
                .any(|x| x[0] >= before - 0.002 && x[1] <= after + 0.002),
            "no stall of 70 ms or more between {before} and {after}: {:?}",
            s.stalls
        );
        assert!(s.touches(before + 0.03, before + 0.04, 0.0), "{s}");
        assert!(s.to_string().contains("the longest"), "{s}");
    }
}
