"""What ``debloat.sim`` returns: the run's tables as data frames, its summary and flent file."""

from __future__ import annotations

import gzip
import json
import os
from typing import Any

import pandas as pd
import pyarrow as pa

from . import frames


class Tables:
    """Tables ``runs``, ``flows``, ``pings``, ``queues`` and ``series`` (see ``debloat.frames``)
    as Arrow tables, with pandas (the attributes) or polars (``polars(name)``) views."""

    def __init__(self, rows: dict[str, list[dict]]):
        self._arrow = {t: frames.table(v) for t, v in rows.items()}
        for t in frames.TABLES:
            self._arrow.setdefault(t, frames.table([]))

    def arrow(self, name: str) -> pa.Table:
        """The table ``name`` as a ``pyarrow.Table``."""
        if name not in self._arrow:
            raise KeyError(f"no table {name!r}: expected one of {', '.join(self._arrow)}")
        return self._arrow[name]

    def pandas(self, name: str) -> pd.DataFrame:
        """The table ``name`` as a pandas DataFrame."""
        return self.arrow(name).to_pandas()

    def polars(self, name: str):
        """The table ``name`` as a polars DataFrame (``pip install polars``)."""
        try:
            import polars as pl
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise ImportError("polars is not installed: pip install polars (or debloat[polars])") from e
        return pl.from_arrow(self.arrow(name))

    @property
    def runs(self) -> pd.DataFrame:
        """One row per run: its headline numbers."""
        return self.pandas("runs")

    @property
    def flows(self) -> pd.DataFrame:
        """One row per flow per run."""
        return self.pandas("flows")

    @property
    def pings(self) -> pd.DataFrame:
        """One row per latency probe per run."""
        return self.pandas("pings")

    @property
    def queues(self) -> pd.DataFrame:
        """One row per discipline on the path per run."""
        return self.pandas("queues")

    @property
    def series(self) -> pd.DataFrame:
        """flent's time series, long form: one row per (run, series, sample)."""
        return self.pandas("series")


class SimResult(Tables):
    """One ``debloat.sim`` call: one run per seed. A circuit run (``network=``, ``devices=``,
    ``load=``: LibreQoS's files and a load profile) also has the tables ``circuits`` (one row
    per circuit: goodput, its class's rate, ping, drops) and ``nodes`` (one per node).

    ``summary`` is the first run's ``summary.json`` as a dict, ``summaries`` every seed's;
    ``flent(seed)`` its flent data file as a dict and ``write_flent(path)`` writes it gzipped,
    as flent and ``debloat report`` read it.
    """

    def __init__(self, payload: dict[str, Any]):
        self.test: str = payload["test"]
        self._runs: list[dict[str, Any]] = payload["runs"]
        rows = frames.merge(frames.run_rows(r, self.test, {}) for r in self._runs)
        # `sim(network=…, devices=…, load=…)`: LibreQoS's circuits and nodes, a row each.
        for extra in ("circuits", "nodes"):
            if extra in payload:
                rows[extra] = payload[extra]
        super().__init__(rows)

    @property
    def circuits(self) -> pd.DataFrame:
        """A circuit run's circuits (``KeyError`` for other runs)."""
        return self.pandas("circuits")

    @property
    def nodes(self) -> pd.DataFrame:
        """A circuit run's nodes (``KeyError`` for other runs)."""
        return self.pandas("nodes")

    @property
    def seeds(self) -> list[int]:
        """The seeds run, in order."""
        return [r["seed"] for r in self._runs]

    @property
    def summary(self) -> dict[str, Any]:
        """The first seed's summary, as ``summary.json`` has it."""
        return self._runs[0]["summary"]

    @property
    def summaries(self) -> list[dict[str, Any]]:
        """Every seed's summary."""
        return [r["summary"] for r in self._runs]

    def flent(self, seed: int | None = None) -> dict[str, Any]:
        """A seed's flent data file as a dict (the first seed's by default)."""
        run = self._run(seed)
        if run.get("flent") is None:
            raise ValueError("a scenario file's run has no flent data file (it is not one of flent's tests)")
        return run["flent"]

    def write_flent(self, path: str | os.PathLike, seed: int | None = None) -> None:
        """Write a seed's flent data file, gzipped JSON (``.flent.gz``)."""
        with gzip.open(path, "wt", encoding="utf-8") as f:
            json.dump(self.flent(seed), f)

    def _run(self, seed: int | None) -> dict[str, Any]:
        if seed is None:
            return self._runs[0]
        for r in self._runs:
            if r["seed"] == seed:
                return r
        raise KeyError(f"seed {seed} was not run; seeds: {self.seeds}")

    def __repr__(self) -> str:
        return f"<debloat.SimResult {self.test}, seeds {self.seeds}>"
