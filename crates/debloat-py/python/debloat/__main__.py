"""``python -m debloat sweep GRID.toml [--scheduler tcp://HOST:8786] [--output DIR]``.

GRID.toml names the test, the seeds, the words every run shares and the grid::

    test = "rrul"
    seeds = 10                 # or a list: [1, 2, 3]
    output = "sweep-out"       # optional; --output wins
    [words]                    # debloat sim's options, for every run
    link = "20Mbit/2Mbit"
    length = 10
    [grid]                     # every combination of these
    qdisc = ["pfifo limit 1000", "fq_codel", "cake bandwidth 19Mbit"]
    rtt = ["10ms", "50ms"]

Without --scheduler the runs go to a LocalCluster of one worker process per core (--workers N
for another count). The tables are written as Parquet under the output folder (DIR/<table>/),
and a sweep started again with the same folder resumes; the runs table is printed at the end.
"""

from __future__ import annotations

import argparse
import sys

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m debloat", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sweep", help="run a grid of simulations on Dask (see above)")
    s.add_argument("grid", help="the grid's TOML file")
    s.add_argument("--scheduler", help="a Dask scheduler's address, e.g. tcp://10.0.0.1:8786")
    s.add_argument("--workers", type=int, help="LocalCluster worker processes (default: one per core)")
    s.add_argument("--output", help="folder for the Parquet files (default: the grid file's `output`)")
    s.add_argument("--quiet", action="store_true", help="no progress line")
    a = p.parse_args(argv)
    if tomllib is None:
        p.error("reading TOML needs Python 3.11 (tomllib)")
    try:
        with open(a.grid, "rb") as f:
            g = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        print(f"error: {a.grid}: {e}", file=sys.stderr)
        return 2
    unknown = set(g) - {"test", "seeds", "output", "words", "grid"}
    if unknown or "grid" not in g:
        print(f"error: {a.grid}: expected keys test, seeds, output, [words], [grid]"
              f"{'; unknown: ' + ', '.join(sorted(unknown)) if unknown else '; [grid] is missing'}",
              file=sys.stderr)
        return 2
    from . import DebloatError
    from .sweeps import sweep

    client = None
    if a.scheduler or a.workers:
        from dask.distributed import Client, LocalCluster

        client = Client(a.scheduler) if a.scheduler else Client(
            LocalCluster(n_workers=a.workers, threads_per_worker=1, dashboard_address=None))
    try:
        r = sweep(g["grid"], test=g.get("test"), seeds=g.get("seeds", 1), client=client,
                  output=a.output or g.get("output"), progress=not a.quiet, **g.get("words", {}))
    except (DebloatError, TypeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        if client is not None:
            client.close()
    cols = ["run_id", *r.varying, "seed", "up_mbps", "down_mbps", "ping_p50_ms", "ping_p99_ms"]
    print(r.runs[[c for c in cols if c in r.runs.columns]].to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
