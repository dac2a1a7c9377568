"""Figure 4 from ``results.csv``: GoogLeNet, by-op vs by-path vs dynamic, PC and embedded.

Speedup over ``all-gpu`` (same platform, batch and granularity) per scheduler,
batch size and platform, at fused granularity (what TVM launches); the op
granularity rows are in the headline table only. Writes
``fig4_googlenet_parallel.{png,pdf}`` and prints the headline numbers::

    python experiments/fig4_googlenet_parallel/plot.py [--results CSV] [--out DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from hetsim.experiments.figures import plot_main
from hetsim.experiments.plotting.charts import COLUMN_WIDTH_IN, makespan_bars
from hetsim.experiments.sweep import load_results

HERE = Path(__file__).resolve().parent
NAME = "fig4_googlenet_parallel"
KEYS = ["platform", "granularity", "batch"]
SHOWN = ["all-cpu", "heft", "by-op", "by-path", "dynamic"]


def speedups(df: pd.DataFrame, baseline: str = "all-gpu") -> pd.DataFrame:
    """Every ok row with ``speedup`` = ``baseline``'s makespan / its makespan."""
    ok = df[df["status"] == "ok"]
    base = ok[ok["scheduler"] == baseline][[*KEYS, "makespan_s"]]
    out = ok.merge(base.rename(columns={"makespan_s": "base_s"}), on=KEYS, how="inner")
    out["speedup"] = out["base_s"] / out["makespan_s"]
    return out


def headline(df: pd.DataFrame) -> dict[str, object]:
    """Speedups over all-gpu per (platform, granularity, scheduler), mean over batch,
    and the best scheduler of every (platform, granularity, batch)."""
    s = speedups(df)
    mean = s.groupby(["platform", "granularity", "scheduler"])["speedup"].mean().round(3)
    best = s.loc[s.groupby(KEYS)["makespan_s"].idxmin()]
    return {
        "mean_speedup_vs_all_gpu": {f"{p} {g} {sch}": v for (p, g, sch), v in mean.items()},
        "best": {f"{r.platform} {r.granularity} b{r.batch}": f"{r.scheduler} x{r.speedup:.3f}"
                 for r in best.itertuples()},
    }  # fmt: skip


def figure(df: pd.DataFrame, granularity: str = "fused") -> Figure:
    """One panel per platform: speedup over all-gpu per batch size and scheduler."""
    s = speedups(df)
    s = s[(s["granularity"] == granularity) & s["scheduler"].isin(SHOWN)].sort_values("batch")
    s["batch size"] = "batch " + s["batch"].astype(str)
    platforms = list(dict.fromkeys(df["platform"]))
    platforms = [p for p in platforms if p in set(s["platform"])]
    fig = Figure(figsize=(COLUMN_WIDTH_IN, 0.8 + 1.3 * len(platforms)), layout="constrained")
    axes = fig.subplots(len(platforms), 1, squeeze=False, sharex=True)[:, 0]
    handles = []
    for ax, p in zip(axes, platforms):
        part = s[s["platform"] == p]
        makespan_bars(part, metric="speedup", group="batch size", hue="scheduler", scale=1.0,
                      hue_order=[h for h in SHOWN if h in set(part["scheduler"])],
                      ylabel="vs all-gpu", labels="legend", values=False, ax=ax)  # fmt: skip
        handles = ax.get_legend_handles_labels()[0] or handles
        for legend in [ax.get_legend(), *fig.legends]:
            if legend is not None:
                legend.remove()
        ax.axhline(1.0, color="black", linestyle="--", linewidth=0.8)
        ax.set_title(f"{p}, GoogLeNet ({granularity})", loc="left")
    fig.legend(handles=handles, loc="outside upper center", ncols=3)
    return fig


def main(argv: list[str] | None = None) -> int:
    """Command line: ``plot.py [--results CSV] [--out DIR]``."""
    return plot_main(__doc__, HERE, NAME, figure, headline, load_results, argv)


if __name__ == "__main__":
    sys.exit(main())
