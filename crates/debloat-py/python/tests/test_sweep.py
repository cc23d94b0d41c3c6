"""Sweeps on a LocalCluster of 2 worker processes: every run's numbers equal the CLI's, a sweep
resumes from its Parquet files, and a worker killed mid-sweep loses no run and repeats none."""

import json
import os
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import debloat
from debloat import frames
from debloat._words import words
from debloat.sweeps import run_id, runs_of

distributed = pytest.importorskip("dask.distributed")

GRID = {"qdisc": ["pfifo limit 100", "fq_codel"], "rtt": ["20ms", "60ms"]}
FIXED = dict(link="20Mbit/2Mbit", jitter="2ms", length=2, delay=0.5)


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def stored(out):
    """Runs in a sweep's Parquet folder, each once."""
    import pandas as pd

    ids = pd.read_parquet(out / "runs")["run_id"]
    assert ids.is_unique
    return len(ids)


def cli_rows(cli, run, tag):
    """The CLI's summary.json for one run, as the sweep's rows would carry it."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        p = subprocess.run([cli, "sim", *words(["tcp_nup"], {**run, "output": d})],
                           capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        with open(os.path.join(d, "summary.json")) as f:
            s = json.load(f)
    return frames.run_rows({"seed": run["seed"], "summary": s, "flent": None}, "tcp_nup", tag)


def test_forty_runs_on_two_workers_equal_the_clis(cli, client, tmp_path):
    s = debloat.sweep(GRID, test="tcp_nup", seeds=10, client=client, output=tmp_path, **FIXED)
    assert len(s) == 40 and len(s.runs) == 40
    assert s.runs["run_id"].is_unique
    assert sorted(s.varying) == ["qdisc", "rtt"]
    assert stored(tmp_path) == 40
    runs = runs_of(GRID, 10, FIXED)
    tags = [{"run_id": run_id("tcp_nup", r), "qdisc": r["qdisc"], "rtt": r["rtt"]} for r in runs]
    with ThreadPoolExecutor(2) as pool:
        want = list(pool.map(lambda rt: cli_rows(cli, *rt), zip(runs, tags)))
    tables = {t: s.pandas(t) for t in ("runs", "flows", "pings", "queues")}
    for run, tag, w in zip(runs, tags, want):
        for t, df in tables.items():
            got = df[df["run_id"] == tag["run_id"]]
            got = [{k: v for k, v in r.items() if v is not None and v == v}
                   for r in got.to_dict("records")]
            exp = [{k: v for k, v in r.items() if v is not None and v == v} for r in w[t]]
            assert got == exp, (t, run)
    # The grid's words are columns (a queue's own discipline is queue_qdisc), the seeds differ
    # (jitter is random).
    assert set(tables["queues"]["queue_qdisc"]) >= {"pfifo limit 100p"}
    assert set(s.runs["qdisc"]) == set(GRID["qdisc"])
    assert s.runs.groupby(["qdisc", "rtt"])["ping_p50_ms"].nunique().min() > 1


def test_a_sweep_resumes_from_its_files(client, tmp_path):
    first = debloat.sweep(GRID, test="tcp_nup", seeds=2, client=client, output=tmp_path, **FIXED)

    class NoCluster:
        def submit(self, *a, **k):
            raise AssertionError("a run was submitted again")

    again = debloat.sweep(GRID, test="tcp_nup", seeds=2, client=NoCluster(), output=tmp_path, **FIXED)
    assert again.runs.equals(first.runs)
    # One more seed: only the four new runs go to the cluster.
    more = debloat.sweep(GRID, test="tcp_nup", seeds=3, client=client, output=tmp_path, **FIXED)
    assert len(more) == 12 and stored(tmp_path) == 12


def test_a_worker_killed_mid_sweep_loses_and_repeats_nothing(client, tmp_path):
    grid = {"qdisc": ["pfifo limit 100", "fq_codel"], "rtt": ["20ms", "60ms"]}
    fixed = dict(FIXED, length=20)  # ~0.1 s a run: the sweep lasts long enough to be hit
    pids = client.run(os.getpid)
    victim = sorted(pids.values())[0]
    done_at_kill = {}

    def finished(dask_scheduler):
        return sum(1 for k, ts in dask_scheduler.tasks.items()
                   if str(k).startswith("debloat-run-") and ts.state == "memory")

    def kill_when_started():
        while client.run_on_scheduler(finished) < 4:
            time.sleep(0.01)
        done_at_kill["n"] = client.run_on_scheduler(finished)
        os.kill(victim, signal.SIGKILL)

    killer = threading.Thread(target=kill_when_started, daemon=True)
    killer.start()
    s = debloat.sweep(grid, test="tcp_nup", seeds=10, client=client, output=tmp_path, **fixed)
    killer.join(timeout=5)
    assert done_at_kill.get("n", 40) < 40, "the worker was killed after the sweep ended"
    assert victim not in client.run(os.getpid).values(), "the worker was not killed"
    assert len(s) == 40 and s.runs["run_id"].is_unique and len(s.runs) == 40
    # Every run's numbers are those of the same run on its own.
    ref = debloat.sim("tcp_nup", qdisc="fq_codel", rtt="60ms", seed=7, **fixed)
    row = s.runs[(s.runs["qdisc"] == "fq_codel") & (s.runs["rtt"] == "60ms") & (s.runs["seed"] == 7)]
    assert row["ping_p99_ms"].item() == ref.runs.loc[0, "ping_p99_ms"]
    assert row["up_mbps"].item() == ref.runs.loc[0, "up_mbps"]
