"""Figure 3 from ``results.csv``: pipeline-training speedup over one GPU, 4 and 8 GPUs.

Speedup = steady-state throughput (micro-batches/s) of a plan / that of
``all-gpu`` (the whole training step on one GPU), same model and platform. One
panel per platform, one bar per plan kind and model; the dashed line is the
published speedup (3.4 on 4 GPUs, 3.76 on 8). Plan kinds: antichain-dp on the
training DAG as is or with each backward node co-located with its forward node
(PipeDream's stage shape), on the preset with its host CPU (antichain-dp then
gives the CPU a stage) or on its GPUs only. Writes
``fig3_pipeline_training.{png,pdf}`` and prints the headline numbers::

    python experiments/fig3_pipeline_training/plot.py [--results CSV] [--out DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from hetsim.experiments.figures import plot_main
from hetsim.experiments.plotting.charts import COLUMN_WIDTH_IN, makespan_bars
from hetsim.experiments.sweep import load_results

HERE = Path(__file__).resolve().parent
NAME = "fig3_pipeline_training"
#: published speedups over one GPU, by number of GPUs (the works it follows)
PUBLISHED = {4: 3.4, 8: 3.76}
LABELS = {("antichain-dp", False): "DAG as is, +CPU",
          ("antichain-dp", True): "DAG as is, GPUs",
          ("antichain-dp-colocated", False): "co-located, +CPU",
          ("antichain-dp-colocated", True): "co-located, GPUs"}  # fmt: skip



def speedups(df: pd.DataFrame) -> pd.DataFrame:
    """Rows of the pipelined plans with ``speedup`` = throughput / all-gpu's throughput."""
    ok = df[df["status"] == "ok"]
    keys = ["model", "platform", "gpus_only"]
    base = ok[ok["plan"] == "all-gpu"][[*keys, "throughput_per_s"]]
    base = base.rename(columns={"throughput_per_s": "base_per_s"})
    out = ok[ok["plan"] != "all-gpu"].merge(base, on=keys, how="inner")
    out["speedup"] = out["throughput_per_s"] / out["base_per_s"]
    return out.reset_index(drop=True)


def headline(df: pd.DataFrame) -> dict[str, object]:
    """Speedups per (plan, GPUs, model) and their means per (plan, GPUs)."""
    s = speedups(df)
    s["kind"] = [LABELS.get((p, bool(o)), p) for p, o in zip(s["plan"], s["gpus_only"])]
    table = {f"{r.kind}, {r.gpus} GPUs, {r.model}": round(float(r.speedup), 2) for r in s.itertuples()}
    mean = s.groupby(["kind", "gpus"])["speedup"].mean().round(2)
    return {
        "speedup": table,
        "mean_speedup": {f"{k}, {g} GPUs": v for (k, g), v in mean.items()},
        "memory_overflows": {f"{r.plan} {r.platform} gpus_only={r.gpus_only} {r.model}": int(r.memory_overflows)
                             for r in df.itertuples() if r.status == "ok" and r.memory_overflows},
        "peak_memory_gpu_GB_of_overflowing": {f"{r.plan} {r.platform} gpus_only={r.gpus_only} {r.model}":
                                              round(r.peak_memory_gpu_bytes / 1e9, 2)
                                              for r in df.itertuples() if r.status == "ok" and r.memory_overflows},
    }  # fmt: skip


def figure(df: pd.DataFrame) -> Figure:
    """One panel per GPU count."""
    s = speedups(df)
    s["plan kind"] = [LABELS.get((p, bool(o)), p) for p, o in zip(s["plan"], s["gpus_only"])]
    gpus = sorted(set(s["gpus"]))
    models = list(dict.fromkeys(df["model"]))
    fig = Figure(figsize=(COLUMN_WIDTH_IN, 1.1 + 1.45 * len(gpus)), layout="constrained")
    axes = fig.subplots(len(gpus), 1, squeeze=False)[:, 0]
    for ax, n in zip(axes, gpus):
        part = s[s["gpus"] == n]
        makespan_bars(part, metric="speedup", group="model", hue="plan kind", scale=1.0,
                      order=[m for m in models if m in set(part["model"])],
                      hue_order=[v for v in LABELS.values() if v in set(part["plan kind"])],
                      ylabel="speedup over 1 GPU", labels="legend", values=False, ax=ax)  # fmt: skip
        handles, _ = ax.get_legend_handles_labels()
        for legend in [ax.get_legend(), *fig.legends]:
            if legend is not None:
                legend.remove()
        if n in PUBLISHED:
            ax.axhline(PUBLISHED[n], color="black", linestyle="--", linewidth=0.8)
        ax.axhline(1.0, color="grey", linewidth=0.5)
        ax.set_ylim(0, max(n, float(part["speedup"].max()) * 1.1))
        ax.set_title(f"{n} GPUs ({part['platform'].iloc[0]})", loc="left")
    published = Line2D([], [], color="black", linestyle="--", linewidth=0.8,
                       label="published (" + " / ".join(f"{v:g}" for v in PUBLISHED.values()) + ")")
    fig.legend(handles=[*handles, published], loc="outside upper center", ncols=3, fontsize=6)
    return fig


def main(argv: list[str] | None = None) -> int:
    """Command line: ``plot.py [--results CSV] [--out DIR]``."""
    return plot_main(__doc__, HERE, NAME, figure, headline, load_results, argv)


if __name__ == "__main__":
    sys.exit(main())
