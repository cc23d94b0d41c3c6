"""debloat in Python: the simulator, replay, specs and reproductions, results as data frames.

- ``sim(test, **words)``: one of flent's tests (or ``scenario=FILE``) in the simulator;
  ``debloat sim``'s options as keyword arguments (``qdisc_up="cake"`` is ``--qdisc-up cake``).
  Returns a :class:`SimResult` whose ``flows``, ``pings``, ``queues``, ``series`` and ``runs``
  are pandas DataFrames. Same words and seed, same numbers as the CLI.
- ``sweep(grid, seeds=…, client=…)``: every combination × seed as a Dask task (a
  ``LocalCluster`` by default, or any ``dask.distributed.Client``), one data frame per table,
  Parquet files that let an interrupted sweep resume.
- ``spec(text)``, ``replay(**words)``, ``reproduce(*ids, **words)``.

A refused call raises :class:`DebloatError` (a ``ValueError``) with the CLI's message;
:class:`UsageError` when the words did not parse. Simulations run with the GIL released.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

import pandas as pd
import pyarrow.csv as pacsv

from . import _native
from ._native import DebloatError, UsageError
from ._words import words
from .result import SimResult, Tables
from .sweeps import SweepResult, sweep

__version__: str = _native.__version__
__all__ = [
    "sim",
    "sweep",
    "spec",
    "replay",
    "reproduce",
    "SimResult",
    "SweepResult",
    "Tables",
    "DebloatError",
    "UsageError",
]


def sim(test: str | None = None, **options: Any) -> SimResult:
    """Run one of flent's tests in the simulator, as ``debloat sim TEST --OPTION VALUE…`` does.

    ``seeds=N`` runs seeds ``seed`` … ``seed + N − 1`` (on every core); ``output=DIR`` writes
    the CLI's files there too (its flent data file and ``summary.json``). ``scenario=FILE`` runs
    a TOML scenario instead of a test. For many configurations use :func:`sweep`.

    >>> r = debloat.sim("rrul", link="20Mbit/2Mbit", qdisc="cake", length=10)
    >>> r.flows[["name", "throughput_mbps"]]
    """
    return SimResult(json.loads(_native.sim(words([test], options))))


def spec(text: str) -> dict[str, Any]:
    """A discipline's spec as ``debloat spec --json`` reads it: ``{"spec"`` (normalised),
    ``"qdisc"`` (its statistics and derived parameters), ``"classes"``, ``"tc"`` (tc's text)``}``."""
    return json.loads(_native.spec(text))


def replay(**options: Any) -> pd.DataFrame:
    """Run a packet trace through one discipline and link, as ``debloat replay`` does; returns
    the fates table (one row per input packet, in input order). ``input=`` and ``qdisc=`` are
    required; ``output=`` (the fates CSV) and ``stats_json=`` are kept where given, else written
    to a temporary folder. The summary the CLI prints is in ``df.attrs["summary"]``, the
    statistics (``tc -s``'s numbers) in ``df.attrs["stats"]``."""
    with tempfile.TemporaryDirectory(prefix="debloat-replay-") as tmp:
        opts = dict(options)
        opts.setdefault("output", os.path.join(tmp, "fates.csv"))
        opts.setdefault("stats_json", os.path.join(tmp, "stats.json"))
        text = _native.replay(words([], opts))
        empty_is_null = pacsv.ConvertOptions(strings_can_be_null=True)
        df = pacsv.read_csv(os.fspath(opts["output"]), convert_options=empty_is_null).to_pandas()
        with open(opts["stats_json"], encoding="utf-8") as f:
            df.attrs["stats"] = json.load(f)
    df.attrs["summary"] = text
    return df


def reproduce(*ids: str, **options: Any) -> pd.DataFrame:
    """Rerun published experiments (``debloat reproduce ID… [--seeds N]``): one row per check,
    with what was measured (``measured``; with ``seeds=N`` the interval: ``mean``,
    ``half_width``…), the published value, the band (``band_kind``, ``band_min``, ``band_max``)
    and the ``verdict`` (ok, miss; with seeds also uncertain). ``all=True`` runs every
    experiment. A check outside its band is a row, not an error."""
    out = json.loads(_native.reproduce(words(list(ids), options)))
    rows = []
    for exp in out:
        for c in exp.get("checks", []):
            row: dict[str, Any] = {"id": exp.get("id")}
            for k, v in c.items():
                if isinstance(v, dict):
                    row.update({f"{k}_{ck}": cv for ck, cv in v.items()} if k != "spread" else v)
                elif not isinstance(v, list):
                    row[k] = v
            rows.append(row)
    return pd.DataFrame(rows)
