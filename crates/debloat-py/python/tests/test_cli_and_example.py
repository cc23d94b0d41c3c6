"""`python -m debloat sweep GRID.toml` and the analysis example, as a user runs them."""

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("dask.distributed")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "latency_vs_throughput.py"

GRID = """
test = "tcp_nup"
seeds = 2
[words]
link = "20Mbit/2Mbit"
length = 2
delay = 0.5
jitter = "1ms"
[grid]
qdisc = ["pfifo limit 100", "cake"]
"""


def test_python_m_debloat_sweep(tmp_path):
    grid = tmp_path / "grid.toml"
    grid.write_text(GRID)
    p = subprocess.run([sys.executable, "-m", "debloat", "sweep", str(grid), "--workers", "2",
                        "--output", str(tmp_path / "out")], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.strip().splitlines()
    assert lines[0].split()[:3] == ["run_id", "qdisc", "seed"] and len(lines) == 1 + 4, p.stdout
    assert "sweep: 4/4 runs" in p.stderr
    import pandas as pd

    assert len(pd.read_parquet(tmp_path / "out" / "runs")) == 4
    # Again: every run is read back, none run.
    p = subprocess.run([sys.executable, "-m", "debloat", "sweep", str(grid), "--output",
                        str(tmp_path / "out")], capture_output=True, text=True)
    assert p.returncode == 0 and "(4 read back from" in p.stderr, p.stderr


def test_python_m_debloat_sweep_on_a_scheduler(tmp_path):
    """--scheduler: the runs go to a cluster the command did not start (here one with a single
    worker process, as a remote scheduler would be)."""
    from dask.distributed import LocalCluster

    grid = tmp_path / "grid.toml"
    grid.write_text(GRID)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as c:
        p = subprocess.run([sys.executable, "-m", "debloat", "sweep", str(grid), "--scheduler",
                            c.scheduler_address, "--quiet"], capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        # The tasks went through that scheduler (each task makes several transitions).
        assert c.scheduler.transition_counter >= 4 * 3, c.scheduler.transition_counter
    assert len(p.stdout.strip().splitlines()) == 1 + 4 and p.stderr == "", p.stderr


def test_a_bad_grid_file_says_what_is_wrong(tmp_path):
    grid = tmp_path / "grid.toml"
    grid.write_text('test = "tcp_nup"\n[grid]\nqdisc = ["cake bandwith 1Mbit"]\n')
    p = subprocess.run([sys.executable, "-m", "debloat", "sweep", str(grid), "--workers", "1"],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "bandwith" in p.stderr, p.stderr
    grid.write_text('test = "tcp_nup"\nqdisc = ["cake"]\n')
    p = subprocess.run([sys.executable, "-m", "debloat", "sweep", str(grid)], capture_output=True, text=True)
    assert p.returncode == 2 and "unknown: qdisc" in p.stderr, p.stderr


def test_the_analysis_example_draws_its_plot(tmp_path):
    pytest.importorskip("matplotlib")
    pytest.importorskip("scipy")
    png = tmp_path / "lvt.png"
    p = subprocess.run([sys.executable, str(EXAMPLE), "--quick", "--seeds", "3", "--length", "2",
                        "--plot", str(png)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert png.stat().st_size > 10_000
    table = (tmp_path / "lvt.csv").read_text().splitlines()
    assert table[0].startswith("qdisc,link,rtt,n,goodput_mbps,p99_ms") and len(table) == 1 + 4
    # fq_codel keeps the 99th percentile far below the 1000-packet FIFO's.
    rows = {tuple(r.split(",")[:3]): r.split(",") for r in table[1:]}
    fifo = float(rows[("pfifo limit 1000", "10Mbit/10Mbit", "20ms")][5])
    fq = float(rows[("fq_codel", "10Mbit/10Mbit", "20ms")][5])
    assert fq < fifo / 5, (fq, fifo)
