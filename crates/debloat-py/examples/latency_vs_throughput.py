"""Latency against throughput, qdisc × rate × RTT × 10 seeds, with 95 % confidence intervals.

    python crates/debloat-py/examples/latency_vs_throughput.py [--seeds 10] [--length 10]
        [--scheduler tcp://HOST:8786] [--output sweep-lvt] [--plot latency_vs_throughput.png]

Runs flent's rrul_be test for every combination (on a LocalCluster of one worker per core, or
the scheduler given), then, from the sweep's `runs` data frame, draws each configuration's mean
goodput (x) against its mean 99th-percentile ping under load (y), with the half-widths of both
95 % confidence intervals (Student's t over the seeds) as error bars: one panel per RTT, one
colour per qdisc, one marker per link rate. The numbers behind the plot are written beside it
as CSV. The links carry 1 ms of jitter so that seeds differ as real runs do (without randomness
the simulator's runs of one configuration are identical).
"""

from __future__ import annotations

import argparse
import sys

import debloat


def summarise(runs):
    """Mean and 95 % CI half-width of goodput and p99 ping per (qdisc, link, rtt)."""
    from scipy import stats

    runs = runs.assign(goodput_mbps=runs["up_mbps"] + runs["down_mbps"])
    g = runs.groupby(["qdisc", "link", "rtt"], sort=False)
    out = g.agg(n=("seed", "count"), goodput_mbps=("goodput_mbps", "mean"),
                goodput_sd=("goodput_mbps", "std"), p99_ms=("ping_p99_ms", "mean"),
                p99_sd=("ping_p99_ms", "std")).reset_index()
    t = out["n"].map(lambda n: stats.t.ppf(0.975, n - 1) if n > 1 else float("nan"))
    out["goodput_ci"] = t * out["goodput_sd"] / out["n"] ** 0.5
    out["p99_ci"] = t * out["p99_sd"] / out["n"] ** 0.5
    return out.drop(columns=["goodput_sd", "p99_sd"])


def plot(table, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rtts = list(dict.fromkeys(table["rtt"]))
    fig, axes = plt.subplots(1, len(rtts), figsize=(6 * len(rtts), 4.5), squeeze=False, sharey=True,
                             layout="constrained")
    markers = dict(zip(dict.fromkeys(table["link"]), "osD^v"))
    colours = dict(zip(dict.fromkeys(table["qdisc"]), plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    for ax, rtt in zip(axes[0], rtts):
        for _, r in table[table["rtt"] == rtt].iterrows():
            ax.errorbar(r["goodput_mbps"], r["p99_ms"], xerr=r["goodput_ci"], yerr=r["p99_ci"],
                        fmt=markers[r["link"]], color=colours[r["qdisc"]], capsize=3)
        ax.set_title(f"base RTT {rtt}")
        ax.set_xlabel("goodput, both directions (Mbit/s)")
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("ping under load, 99th percentile (ms)")
    handles = [plt.Line2D([], [], color=c, marker="o", ls="", label=q) for q, c in colours.items()]
    handles += [plt.Line2D([], [], color="grey", marker=m, ls="", label=f"link {l}") for l, m in markers.items()]
    fig.legend(handles=handles, loc="outside right upper")
    fig.suptitle("rrul_be: latency against throughput (mean ± 95 % CI over seeds)")
    fig.savefig(path, dpi=110, bbox_inches="tight")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--length", type=float, default=10.0, help="load duration per run, s")
    p.add_argument("--scheduler", help="a Dask scheduler (default: a LocalCluster)")
    p.add_argument("--output", help="Parquet folder (resumable)")
    p.add_argument("--plot", default="latency_vs_throughput.png")
    p.add_argument("--quick", action="store_true", help="two qdiscs, one rate, one RTT (for CI)")
    a = p.parse_args(argv)
    grid = {
        "qdisc": ["pfifo limit 1000", "codel", "fq_codel", "cake"],
        "link": ["10Mbit/10Mbit", "50Mbit/10Mbit"],
        "rtt": ["20ms", "80ms"],
    }
    if a.quick:
        grid = {"qdisc": ["pfifo limit 1000", "fq_codel"], "link": ["10Mbit/10Mbit"], "rtt": ["20ms", "80ms"]}
    client = None
    if a.scheduler:
        from dask.distributed import Client

        client = Client(a.scheduler)
    s = debloat.sweep(grid, test="rrul_be", seeds=a.seeds, client=client, output=a.output,
                      length=a.length, delay=1, jitter="1ms")
    table = summarise(s.runs)
    print(table.to_string(index=False, float_format=lambda x: f"{x:.2f}"))
    plot(table, a.plot)
    csv = a.plot.rsplit(".", 1)[0] + ".csv"
    table.to_csv(csv, index=False)
    print(f"wrote {a.plot} and {csv}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
