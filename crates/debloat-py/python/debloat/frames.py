"""A run's JSON (``summary.json`` plus its flent data file) as rows, then Arrow tables.

Tables, one row per …:

- ``flows``: flow (name, kind, direction, cc, dscp, throughput_mbps, loss_pct, retransmits,
  timeouts, ce_marked);
- ``pings``: latency probe (latency_p50_ms … p99, idle_latency_p50_ms …, loss_pct, lost);
- ``queues``: discipline on the path (where, qdisc, sent_pkts, sent_bytes, dropped, marked,
  max_backlog_pkts, sojourn_p50_ms …);
- ``series``: sample of flent's time series, long form (time_s, series, value; a missing sample
  is null, as flent writes it);
- ``runs``: run — its headline numbers (up_mbps, down_mbps: the flows' sums; ping_p50_ms …
  p99 of the first probe, flent's main one; dropped and marked over the queues; jain_fairness).

Every row carries the run's ``seed``; a sweep adds ``run_id`` and the words its grid varies. A
table's own field that has a grid word's name is renamed with the table's prefix (a sweep over
``qdisc`` has the grid's words in ``qdisc`` and each queue's discipline, as tc shows it, in
``queue_qdisc``; over ``cc``, each flow's own in ``flow_cc``). Nested numbers are flattened
with their unit kept last: ``latency_ms: {p50}`` is ``latency_p50_ms``.
"""

from __future__ import annotations

from typing import Any, Iterable

import pyarrow as pa

TABLES = ("runs", "flows", "pings", "queues", "series")
UNITS = ("_ms", "_mbps", "_pct", "_bytes", "_pkts")


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"latency_ms": {"p50": 1}}`` → ``{"latency_p50_ms": 1}``; other nesting joins with ``_``."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        name = prefix + k
        if isinstance(v, dict):
            unit = next((u for u in UNITS if name.endswith(u)), "")
            stem = name[: len(name) - len(unit)] if unit else name
            for ck, cv in flatten(v).items():
                out[f"{stem}_{ck}{unit}"] = cv
        elif isinstance(v, list):
            out[name] = list(v)
        else:
            out[name] = v
    return out


def run_rows(run: dict[str, Any], test: str, tag: dict[str, Any]) -> dict[str, list[dict]]:
    """One run of ``_native.sim``'s JSON as rows for each table, each row tagged with ``tag``."""
    s = run["summary"]
    base = {**tag, "seed": run["seed"]}

    def rows(items: list[dict], prefix: str) -> list[dict]:
        out = []
        for item in items:
            own = flatten(item)
            out.append({**base, **{(prefix + k if k in base else k): v for k, v in own.items()}})
        return out

    return {
        "runs": rows([headline(test, s)], "run_"),
        "flows": rows(s.get("flows", []), "flow_"),
        "pings": rows(s.get("pings", []), "ping_"),
        "queues": rows(s.get("queues", []), "queue_"),
        "series": series_rows(run.get("flent"), base),
    }


def headline(test: str, s: dict[str, Any]) -> dict[str, Any]:
    """A run's numbers in one row."""
    flows, pings, queues = s.get("flows", []), s.get("pings", []), s.get("queues", [])
    first = pings[0] if pings else {}
    lat = first.get("latency_ms") or {}
    return {
        "test": test,
        "up_mbps": sum(f["throughput_mbps"] for f in flows if f.get("direction") == "up"),
        "down_mbps": sum(f["throughput_mbps"] for f in flows if f.get("direction") == "down"),
        "ping": first.get("name"),
        "ping_p50_ms": lat.get("p50"),
        "ping_p90_ms": lat.get("p90"),
        "ping_p99_ms": lat.get("p99"),
        "dropped": sum(q.get("dropped", 0) for q in queues),
        "marked": sum(q.get("marked", 0) for q in queues),
        "jain_fairness": s.get("jain_fairness"),
    }


def series_rows(flent: dict[str, Any] | None, base: dict[str, Any]) -> list[dict]:
    """flent's ``x_values`` × ``results`` in long form."""
    if not flent:
        return []
    xs = flent.get("x_values", [])
    rows = []
    for name, values in flent.get("results", {}).items():
        for t, v in zip(xs, values):
            rows.append({**base, "time_s": t, "series": name, "value": v})
    return rows


def merge(parts: Iterable[dict[str, list[dict]]]) -> dict[str, list[dict]]:
    """Rows of many runs, table by table."""
    out: dict[str, list[dict]] = {t: [] for t in TABLES}
    for p in parts:
        for t in TABLES:
            out[t].extend(p.get(t, []))
    return out


def table(rows: list[dict]) -> pa.Table:
    """Rows as an Arrow table (columns in first-seen order; a key a row lacks is null)."""
    if not rows:
        return pa.table({})
    cols: dict[str, None] = {}
    for r in rows:
        for k in r:
            cols.setdefault(k, None)
    return pa.table({c: [r.get(c) for r in rows] for c in cols})
