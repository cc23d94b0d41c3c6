//! One configuration over several seeds (`debloat sim --seeds N`): the runs are independent and
//! deterministic, so they run side by side on threads and come back in seed order.

use crate::scenario::{simulate, Config, Summary};
use debloat_report::repeats::Repeats;
use serde_json::Value;
use std::sync::atomic::{AtomicUsize, Ordering};

/// One seed's run.
pub struct SeedRun {
    /// The seed.
    pub seed: u64,
    /// Its summary.
    pub summary: Summary,
    /// Its flent data file (before gzip), titled `title, seed N`.
    pub flent: Value,
}

/// Run `cfg` once per seed on up to `threads` threads; `done(k)` is called as the k-th run
/// finishes (for progress). The flent files get epochs `epoch`, `epoch + 1`, … in seed order.
pub fn run_seeds(
    cfg: &Config,
    seeds: &[u64],
    threads: usize,
    epoch: u64,
    title: &str,
    done: &(dyn Fn(usize) + Sync),
) -> Vec<SeedRun> {
    let finished = AtomicUsize::new(0);
    par_map(seeds.len(), threads, |i| {
        let seed = seeds[i];
        let mut c = cfg.clone();
        c.seed = seed;
        let r = simulate(&c, |_| {});
        let t = seed_title(title, seed);
        let flent = crate::flent::data_file(&r.world, &c, epoch + i as u64, &t);
        done(finished.fetch_add(1, Ordering::Relaxed) + 1);
        SeedRun {
            seed,
            summary: r.summary,
            flent,
        }
    })
}

/// `f(0) … f(n − 1)` on up to `threads` threads, each taking the next index as it finishes,
/// returned in index order (a panic in `f` is passed on).
pub fn par_map<T: Send>(n: usize, threads: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let next = AtomicUsize::new(0);
    let mut done: Vec<(usize, T)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads.clamp(1, n.max(1)))
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= n {
                            break;
                        }
                        mine.push((i, f(i)));
                    }
                    mine
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

/// A seed's title: "cake, seed 3" (or "seed 3").
pub fn seed_title(title: &str, seed: u64) -> String {
    if title.is_empty() {
        format!("seed {seed}")
    } else {
        format!("{title}, seed {seed}")
    }
}

/// Fold the runs' metrics.
pub fn fold(runs: &[SeedRun]) -> Repeats {
    Repeats::fold(
        runs.iter().map(|r| r.seed).collect(),
        &runs.iter().map(|r| r.summary.metrics()).collect::<Vec<_>>(),
    )
}
