"""The API against the CLI: same words and seed, same numbers; the CLI's errors as exceptions."""

import gzip
import json
import os
import threading
from pathlib import Path

import pytest

import debloat
from conftest import run_cli

WORDS = dict(link="20Mbit/2Mbit", qdisc="fq_codel", jitter="2ms", length=3, delay=1)


def cli_summary(cli, tmp_path, test, seed, **words):
    out = tmp_path / f"cli-{seed}"
    argv = debloat._words.words([test], {**words, "seed": seed, "output": out})
    run_cli(cli, "sim", *argv)
    flent = next(out.glob("*.flent.gz"))
    with gzip.open(flent, "rt") as f:
        data = json.load(f)
    return json.loads((out / "summary.json").read_text()), data


@pytest.mark.parametrize("seed", [1, 7])
def test_sim_equals_the_cli_for_the_same_seed(cli, tmp_path, seed):
    r = debloat.sim("rrul", seed=seed, **WORDS)
    want, flent = cli_summary(cli, tmp_path, "rrul", seed, **WORDS)
    assert r.summary == want
    assert r.flent()["results"] == flent["results"]
    assert r.flent()["x_values"] == flent["x_values"]
    # The tables are the summary's numbers.
    assert list(r.flows["throughput_mbps"]) == [f["throughput_mbps"] for f in want["flows"]]
    assert list(r.pings["latency_p99_ms"]) == [p["latency_ms"]["p99"] for p in want["pings"]]
    assert list(r.queues["dropped"]) == [q["dropped"] for q in want["queues"]]
    up = sum(f["throughput_mbps"] for f in want["flows"] if f["direction"] == "up")
    assert r.runs.loc[0, "up_mbps"] == pytest.approx(up, rel=1e-12)
    # The series: flent's samples, long form (rrul: 12 series).
    assert r.series["series"].nunique() == len(flent["results"])
    assert len(r.series) == len(flent["x_values"]) * len(flent["results"])


def test_seeds_run_each_seed_as_a_single_run_would(cli, tmp_path):
    r = debloat.sim("rrul", seeds=3, seed=4, **WORDS)
    assert r.seeds == [4, 5, 6]
    assert list(r.runs["seed"]) == [4, 5, 6]
    for seed, summary in zip(r.seeds, r.summaries):
        assert summary == debloat.sim("rrul", seed=seed, **WORDS).summary
    # jitter is random: the seeds differ.
    assert r.runs["ping_p50_ms"].nunique() > 1


def test_output_writes_the_clis_files(tmp_path):
    debloat.sim("tcp_1up", length=2, delay=0.5, output=tmp_path)
    assert (tmp_path / "summary.json").is_file()
    assert len(list(tmp_path.glob("*.flent.gz"))) == 1


def test_polars_and_arrow_views():
    r = debloat.sim("tcp_1up", length=2, delay=0.5)
    assert r.arrow("flows").num_rows == 1
    pl = pytest.importorskip("polars")
    assert isinstance(r.polars("runs"), pl.DataFrame)
    with pytest.raises(KeyError, match="expected one of runs, flows"):
        r.arrow("flow")


def test_errors_are_the_clis_words():
    with pytest.raises(debloat.UsageError, match=r"(?s)--qdsic.*similar argument exists: '--qdisc'"):
        debloat.sim("rrul", qdsic="cake")
    with pytest.raises(debloat.DebloatError, match="unknown cake option `bandwith`: did you mean `bandwidth`"):
        debloat.sim("rrul", qdisc="cake bandwith 10Mbit")
    with pytest.raises(ValueError, match="unknown test"):
        debloat.sim("rrull")
    with pytest.raises(debloat.UsageError, match=r"debloat\.sweep"):
        debloat.sim("rrul", sweep="rtt=1ms;2ms")


def test_spec():
    s = debloat.spec("cake bandwidth 20Mbit diffserv4")
    assert "diffserv4" in s["tc"] and "bandwidth 20Mbit" in s["tc"]
    assert s["spec"].startswith("cake")
    with pytest.raises(debloat.DebloatError, match="bandwith"):
        debloat.spec("cake bandwith 20Mbit")


def trace_csv(path: Path, n: int = 400) -> None:
    """n 1500-byte UDP packets at 20 Mbit/s (one every 600 µs)."""
    lines = ["t_ns,src,dst,sport,dport,proto,len,dscp,ecn"]
    for i in range(n):
        lines.append(f"{i * 600_000},198.18.0.1,198.18.1.1,{4000 + i % 4},5000,udp,1500,0,0")
    path.write_text("\n".join(lines) + "\n")


def test_replay_equals_the_cli(cli, tmp_path):
    trace_csv(tmp_path / "t.csv")
    df = debloat.replay(qdisc="pfifo limit 20", rate="10Mbit", input=tmp_path / "t.csv")
    run_cli(cli, "replay", "--qdisc", "pfifo limit 20", "--rate", "10Mbit", "--input",
            str(tmp_path / "t.csv"), "--output", str(tmp_path / "cli.csv"))
    import pandas as pd

    want = pd.read_csv(tmp_path / "cli.csv")
    assert len(df) == 400
    pd.testing.assert_frame_equal(df, want, check_dtype=False)
    st = df.attrs["stats"]
    # Every packet accounted for once: sent or dropped (the link drains at the end).
    assert st["packets"] + st["drops"] == 400, st
    assert st["drops"] > 0 and st["backlog"] == 0
    assert (df["fate"] == "sent").sum() == st["packets"]
    assert "replayed 400 packets" in df.attrs["summary"]


def test_reproduce_rows_with_verdicts():
    df = debloat.reproduce("HASH")
    assert list(df["id"].unique()) == ["HASH"]
    assert set(df["verdict"]) <= {"ok", "miss"} and len(df) == 2
    assert {"measured", "band_kind", "band_min", "published"} <= set(df.columns)
    many = debloat.reproduce("HASH", seeds=3)
    assert {"mean", "half_width", "verdict"} <= set(many.columns)
    with pytest.raises(debloat.DebloatError, match="unknown experiment `NOPE`"):
        debloat.reproduce("NOPE")


def fifo(tmp_path: Path, name: str) -> Path:
    p = tmp_path / name
    os.mkfifo(p)
    return p


def test_the_gil_is_released_while_a_run_reads_and_simulates(tmp_path):
    """The run reads its scenario from a pipe that only another Python thread writes: were the
    GIL held through the native call, the writer could never run and the run never end."""
    pipe = fifo(tmp_path, "scenario.toml")
    text = (
        'length = 2\n[link]\ndown = "20Mbit"\nup = "2Mbit"\nrtt = "20ms"\n'
        '[[flow]]\nname = "flood"\nkind = "udp-flood"\nrate = "3Mbit"\nsize = 300\nstart = 0\nstop = 1\n'
    )
    got = {}

    def run():
        try:
            got["r"] = debloat.sim(scenario=pipe)
        except Exception as e:  # reported below
            got["e"] = e

    t = threading.Thread(target=run)
    t.start()
    with open(pipe, "w") as f:  # blocks until the native code opens the pipe
        f.write(text)
    t.join(timeout=60)
    assert not t.is_alive(), "the run did not end: the GIL was held"
    assert "e" not in got, got.get("e")
    assert list(got["r"].flows["name"]) == ["flood"]


LQ = Path(__file__).resolve().parents[4] / "contrib" / "libreqos"


def test_circuits_come_back_as_tables(tmp_path):
    """sim(network=…, devices=…, load=…): LibreQoS's files with a load profile."""
    prof = tmp_path / "p.toml"
    prof.write_text('length = 5\nrtt = "20ms"\n[[group]]\nnode = "AP_South"\nactive = 0.5\n')
    r = debloat.sim(network=LQ / "network.json", devices=LQ / "ShapedDevices.csv", load=prof)
    assert len(r.circuits) == 40 and int(r.circuits["active"].sum()) == 8
    assert list(r.nodes["name"]) == ["Tower_1", "AP_North", "AP_South"]
    south = r.nodes.set_index("name").loc["AP_South"]
    assert south["active"] == 8 and 80 < south["down_class_mbps"] <= 100.5
    assert r.circuits.loc[~r.circuits["active"], "down_mbps"].eq(0).all()
    with pytest.raises(debloat.DebloatError, match='node "AP_East": not in network.json'):
        prof.write_text('length = 5\nrtt = "20ms"\n[[group]]\nnode = "AP_East"\n')
        debloat.sim(network=LQ / "network.json", devices=LQ / "ShapedDevices.csv", load=prof)
