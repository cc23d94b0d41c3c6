"""Sweeps on Dask's distributed scheduler: every combination × seed is one task.

``sweep({"qdisc": ["fq_codel", "cake"], "rtt": ["10ms", "50ms"]}, test="rrul", seeds=10,
link="20Mbit/2Mbit")`` runs 2 × 2 × 10 = 40 simulations. Each run is one Dask task whose key is
the run's id (a hash of its words and seed), so a task that Dask reruns after a worker died is
still one run: nothing is lost and nothing counted twice. Each task runs one seed on one thread
with the GIL released; a worker process per core is the fast arrangement (the default
``LocalCluster`` has that).

With ``output=DIR`` the finished runs are written as Parquet, partitioned by table and batch
(``DIR/<table>/part-*.parquet``, see :class:`Store`; ``pandas.read_parquet(DIR/"flows")`` reads
a table back); a sweep started again with the same ``output`` reads the runs it finds there
instead of running them again (resume), and at most the last batch (5 s of runs) is lost if
it is killed. The same seed gives the same numbers on any worker as the CLI gives.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pyarrow.parquet as pq

from . import _native, frames
from ._words import value_word, words
from .result import Tables


def runs_of(grid: Mapping[str, Sequence[Any]] | Sequence[Mapping[str, Any]],
            seeds: int | Iterable[int], fixed: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The runs a sweep asks for: each a dict of words (the fixed ones, the combination's, and
    ``seed``). ``grid`` is a dict of lists (every combination) or a list of dicts (those runs).
    ``seeds``: N (seeds ``fixed['seed']`` or 1, and the N − 1 after it) or the seeds themselves."""
    if isinstance(grid, Mapping):
        for k, v in grid.items():
            if isinstance(v, (str, bytes)) or not isinstance(v, Iterable):
                raise TypeError(f"grid[{k!r}] must be a list of values, e.g. [{v!r}]")
        keys = list(grid)
        combos = [dict(zip(keys, vals)) for vals in itertools.product(*(list(grid[k]) for k in keys))]
    else:
        combos = [dict(c) for c in grid]
    if isinstance(seeds, int):
        if seeds < 1:
            raise ValueError("seeds must be at least 1")
        first = int(fixed.get("seed", 1))
        seeds = range(first, first + seeds)
    base = {k: v for k, v in fixed.items() if k != "seed"}
    return [{**base, **c, "seed": s} for c in combos for s in seeds]


def run_id(test: str | None, run: Mapping[str, Any]) -> str:
    """A run's id: a hash of its test and words (as the CLI reads them)."""
    run = dict(run)
    test = run.pop("test", test)
    canon = json.dumps([test, sorted((k, value_word(v)) for k, v in run.items())])
    return hashlib.sha256(canon.encode()).hexdigest()[:16]


def run_one(test: str | None, run: dict[str, Any], tag: dict[str, Any]) -> dict[str, list[dict]]:
    """One run, on whichever worker Dask picks: its rows, tagged with its id and grid words.
    A grid may vary ``test`` too."""
    run = dict(run)
    test = run.pop("test", test)
    payload = json.loads(_native.sim(words([test], run)))
    return frames.run_rows(payload["runs"][0], payload["test"], tag)


def _check(test: str | None, todo: dict[str, tuple[dict, dict]]) -> None:
    """Parse every configuration (seeds aside) as the CLI would, here, before Dask sees it."""
    seen = set()
    for run, tag in todo.values():
        config = {k: v for k, v in run.items() if k != "seed"}
        key = run_id(test, config)
        if key in seen:
            continue
        seen.add(key)
        config = dict(config)
        t = config.pop("test", test)
        try:
            _native.check_sim(words([t], config))
        except _native.DebloatError as e:
            shown = ", ".join(f"{k}={value_word(tag[k])}" for k in tag if k != "run_id")
            raise type(e)(f"sweep run ({shown or 'the fixed words'}): {e}") from None


class Store:
    """A sweep's Parquet folder: ``DIR/<table>/part-<token>.parquet``, each part holding a batch
    of finished runs (up to 200, or what finished within 5 s), the ``runs`` part written last so
    that a run counts as done only once all its tables are on disk. Written on the client, as
    results arrive, so that a task Dask reran after a worker died is still written once."""

    BATCH, SECONDS = 200, 5.0

    def __init__(self, out: Path):
        self.out, self.buf, self.last, self.n = out, [], time.monotonic(), 0

    def done(self, wanted: set[str]) -> dict[str, dict[str, list[dict]]]:
        """The runs of ``wanted`` already in the folder, as rows by table."""
        if not (self.out / "runs").is_dir():
            return {}
        def rows(t: str) -> list[dict]:
            # Part by part: parts may differ in a column's type (all null in one batch).
            return [r for f in sorted((self.out / t).glob("part-*.parquet")) for r in pq.read_table(f).to_pylist()]

        ids = {r["run_id"] for r in rows("runs")} & wanted
        got: dict[str, dict[str, list[dict]]] = {rid: {t: [] for t in frames.TABLES} for rid in ids}
        for t in frames.TABLES:
            if ids and (self.out / t).is_dir():
                for row in rows(t):
                    if row.get("run_id") in got:
                        got[row["run_id"]][t].append(row)
        return got

    def add(self, rows: dict[str, list[dict]]) -> None:
        self.buf.append(rows)
        if len(self.buf) >= self.BATCH or time.monotonic() - self.last >= self.SECONDS:
            self.flush()

    def flush(self) -> None:
        if not self.buf:
            return
        merged, token = frames.merge(self.buf), f"{time.time_ns():x}-{os.getpid()}-{self.n}"
        for t in (*[t for t in frames.TABLES if t != "runs"], "runs"):
            d = self.out / t
            d.mkdir(parents=True, exist_ok=True)
            tmp = d / f".part-{token}.parquet.tmp"
            pq.write_table(frames.table(merged[t]), tmp)
            os.replace(tmp, d / f"part-{token}.parquet")
        self.buf, self.last, self.n = [], time.monotonic(), self.n + 1


class Progress:
    """``sweep: 12/40 runs (3 read from DIR) 4.1 s`` on stderr: redrawn on a terminal, every
    tenth otherwise."""

    def __init__(self, total: int, resumed: int, show: bool):
        self.total, self.done, self.resumed, self.show = total, resumed, resumed, show
        self.t0, self.tty, self.last = time.monotonic(), sys.stderr.isatty(), -1

    def step(self) -> None:
        self.done += 1
        if not self.show:
            return
        tenth = self.done * 10 // max(self.total, 1)
        if self.tty or tenth != self.last or self.done == self.total:
            self.last = tenth
            end = "\n" if self.done == self.total or not self.tty else ""
            read = f" ({self.resumed} read back)" if self.resumed else ""
            print(f"\rsweep: {self.done}/{self.total} runs{read}, {time.monotonic() - self.t0:.1f} s",
                  end=end, file=sys.stderr, flush=True)


def sweep(grid, *, test: str | None = None, seeds: int | Iterable[int] = 1, client=None,
          output: str | os.PathLike | None = None, progress: bool = True, **fixed: Any) -> "SweepResult":
    """Run every combination of ``grid`` × ``seeds`` on Dask; the keyword arguments other than
    these are ``debloat sim``'s words for every run (``link="20Mbit/2Mbit"``, ``length=10`` …).

    ``client``: a ``dask.distributed.Client`` (a cluster's scheduler, dask-jobqueue's Slurm/PBS
    clusters…); by default a ``LocalCluster`` with one single-threaded worker process per core,
    closed at the end. Returns a :class:`SweepResult`: the tables of every run, each row tagged
    with ``run_id``, the grid's words (and any other word that differs between runs) and
    ``seed``. Every distinct configuration is checked before any run is sent: a mistake in the
    grid is a :class:`debloat.DebloatError` naming the run, not a failed task.
    """
    runs = runs_of(grid, seeds, fixed)
    named = list(grid) if isinstance(grid, Mapping) else list(dict.fromkeys(k for c in grid for k in c))
    keys = sorted({k for r in runs for k in r} - {"seed"} - set(named))
    varying = [k for k in named if k != "seed"]
    varying += [k for k in keys if len({value_word(r.get(k)) for r in runs}) > 1]
    todo: dict[str, tuple[dict, dict]] = {}
    for r in runs:
        rid = run_id(test, r)
        todo.setdefault(rid, (r, {"run_id": rid, **{k: r.get(k) for k in varying}}))
    _check(test, todo)
    out = Path(output) if output is not None else None
    store = Store(out) if out is not None else None
    parts = store.done(set(todo)) if store is not None else {}
    bar = Progress(len(todo), len(parts), progress)
    missing = [rid for rid in todo if rid not in parts]
    if missing:
        _submit(test, todo, missing, client, store, parts, bar)
    elif progress and todo:
        print(f"sweep: {len(todo)}/{len(todo)} runs ({len(parts)} read back from {out}), none to run",
              file=sys.stderr)
    return SweepResult(frames.merge(parts[rid] for rid in todo), list(todo), varying)


def _submit(test, todo, missing, client, store, parts, bar) -> None:
    from dask.distributed import Client, LocalCluster, as_completed

    own = client is None
    if own:
        n = os.cpu_count() or 1
        client = Client(LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                     dashboard_address=None))
    try:
        futures = [client.submit(run_one, test, todo[rid][0], todo[rid][1],
                                 key=f"debloat-run-{rid}", pure=False) for rid in missing]
        for fut, rows in as_completed(futures, with_results=True):
            rid = fut.key.removeprefix("debloat-run-") if isinstance(fut.key, str) else str(fut.key)
            if rid in parts:
                continue
            parts[rid] = rows
            if store is not None:
                store.add(rows)
            bar.step()
    finally:
        if store is not None:
            store.flush()
        if own:
            cluster = client.cluster
            client.close()
            cluster.close()


class SweepResult(Tables):
    """A sweep's tables (``runs``, ``flows``, ``pings``, ``queues``, ``series``), each row with
    its ``run_id``, the words the grid varied and its ``seed``."""

    def __init__(self, rows: dict[str, list[dict]], run_ids: list[str], varying: list[str]):
        super().__init__(rows)
        self.run_ids = run_ids
        self.varying = varying

    def __len__(self) -> int:
        return len(self.run_ids)

    def __repr__(self) -> str:
        return f"<debloat.SweepResult {len(self)} runs, varying {', '.join(self.varying) or 'nothing'}>"
