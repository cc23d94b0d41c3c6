"""Dask's overhead on a sweep: the same 1,000 runs through `debloat sim --sweep … --seeds 10`
(the CLI: one process, the seeds of each configuration on every core) and through
`debloat.sweep` on a LocalCluster of as many single-threaded worker processes, on this machine;
the wall times, their ratio, Dask's cost per run, and a check that every run's numbers are the
same on both sides.

    python crates/debloat-py/benches/sweep_overhead.py [--workers 2] [--length 10] [--seeds 10]

Needs the CLI (target/release/debloat, or DEBLOAT_BIN) and the package with dask installed.
Results go in BENCHMARKS.md with the machine's name; the issue's bar is ≤ 1.2×.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import tempfile
import time
from pathlib import Path

import debloat
from debloat import frames

REPO = Path(__file__).resolve().parents[3]
GRID = {
    "qdisc": ["pfifo limit 1000", "codel", "fq_codel", "cake"],
    "link": ["10Mbit/1Mbit", "20Mbit/2Mbit", "50Mbit/5Mbit", "100Mbit/10Mbit", "200Mbit/20Mbit"],
    "rtt": ["10ms", "20ms", "40ms", "80ms", "160ms"],
}


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    p.add_argument("--length", type=float, default=10.0)
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--test", default="rrul_be")
    a = p.parse_args()
    cli = os.environ.get("DEBLOAT_BIN", str(REPO / "target/release/debloat"))
    fixed = dict(length=a.length, delay=1, jitter="1ms")
    n = a.seeds
    for v in GRID.values():
        n *= len(v)
    print(f"{n} runs of {a.test} ({a.length:g} s each), {os.cpu_count()} cores: {cpu_name()}")

    with tempfile.TemporaryDirectory() as d:
        argv = [cli, "sim", a.test, "--length", str(a.length), "--delay", "1", "--jitter", "1ms",
                "--seeds", str(a.seeds), "--output", d]
        for k, vs in GRID.items():
            argv += ["--sweep", f"{k}={';'.join(vs)}"]
        t = time.monotonic()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
        t_cli = time.monotonic() - t
        cli_runs = []
        for k in range(1, n // a.seeds + 1):
            doc = json.loads((Path(d) / f"run-{k}" / "summary.json").read_text())
            for seed, s in zip(doc["seeds"], doc["runs"]):
                cli_runs.append(frames.headline(a.test, s) | {"seed": seed})

    from dask.distributed import Client, LocalCluster

    with LocalCluster(n_workers=a.workers, threads_per_worker=1, processes=True, dashboard_address=None) as lc, \
            Client(lc) as client:
        client.run(lambda: __import__("debloat"))  # import once per worker, outside the timing
        with tempfile.TemporaryDirectory() as out:  # each run's Parquet files, as the CLI writes its own
            t = time.monotonic()
            s = debloat.sweep(GRID, test=a.test, seeds=a.seeds, client=client, progress=False,
                              output=out, **fixed)
            t_dask = time.monotonic() - t
    runs = s.runs
    cols = ["up_mbps", "down_mbps", "ping_p50_ms", "ping_p99_ms", "dropped", "seed"]
    got = [tuple(r[c] for c in cols) for r in runs[cols].to_dict("records")]
    want = [tuple(r[c] for c in cols) for r in cli_runs]
    same = sorted(got) == sorted(want)
    print(f"CLI  --sweep --seeds {a.seeds}: {t_cli:7.2f} s")
    print(f"Dask LocalCluster({a.workers} processes), Parquet out: {t_dask:7.2f} s  ({t_dask / t_cli:.2f}×;"
          f" {1000 * (t_dask - t_cli) / n:+.2f} ms a run)")
    print(f"every run's numbers identical: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
