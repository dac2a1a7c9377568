"""Figure 1 from ``results.csv``: scheduler speedups over single-device TVM, CNNs, batch 1-64.

(a) speedup over ``all-gpu`` (TVM on the GPU) against the batch size, geometric
mean over the five CNNs, one line per scheduler; (b) the gain of ``cp-greedy``
over the better of the two single-device executions, per model and batch.
Writes ``fig1_cnn_partitioning.{png,pdf}`` and prints the headline numbers::

    python experiments/fig1_cnn_partitioning/plot.py [--results CSV] [--out DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from hetsim.experiments.figures import plot_main
from hetsim.experiments.plotting.charts import COLUMN_WIDTH_IN, makespan_bars, speedup_lines
from hetsim.experiments.sweep import load_results

HERE = Path(__file__).resolve().parent
NAME = "fig1_cnn_partitioning"
#: schedulers drawn in panel (a), besides the all-gpu baseline
LINES = ["all-cpu", "heft", "peft", "cp-greedy", "donf", "by-path", "dynamic", "tensor-split"]


def single_device_gain(df: pd.DataFrame, scheduler: str = "cp-greedy") -> pd.DataFrame:
    """Per (model, batch): makespans of all-cpu, all-gpu, ``scheduler``, and its gain.

    ``gain_pct`` = best single-device makespan / ``scheduler``'s makespan - 1, in %;
    ``gain_vs_gpu_pct`` the same against ``all-gpu`` alone.
    """
    ok = df[df["status"] == "ok"]
    wide = ok.pivot_table(index=["model", "batch"], columns="scheduler", values="makespan_s",
                          aggfunc="first")  # fmt: skip
    out = pd.DataFrame({
        "all_cpu_s": wide["all-cpu"], "all_gpu_s": wide["all-gpu"], "sched_s": wide[scheduler],
    })  # fmt: skip
    out["best_single_s"] = out[["all_cpu_s", "all_gpu_s"]].min(axis=1)
    out["gain_pct"] = (out["best_single_s"] / out["sched_s"] - 1) * 100
    out["gain_vs_gpu_pct"] = (out["all_gpu_s"] / out["sched_s"] - 1) * 100
    return out.reset_index().dropna(subset=["gain_pct"])


def headline(df: pd.DataFrame) -> dict[str, object]:
    """The numbers the README quotes: mean gain of cp-greedy, by batch and by model,
    and each scheduler's mean gain over the best single device."""
    gain = single_device_gain(df)
    per_sched = {}
    for s in sorted(set(df["scheduler"]) - {"all-cpu", "all-gpu"}):
        g = single_device_gain(df, s) if (df["scheduler"] == s).any() else None
        if g is not None and len(g):
            per_sched[s] = round(float(g["gain_pct"].mean()), 2)
    return {
        "points": len(gain),
        "cp_greedy_mean_gain_pct": round(float(gain["gain_pct"].mean()), 2),
        "cp_greedy_mean_gain_vs_gpu_pct": round(float(gain["gain_vs_gpu_pct"].mean()), 2),
        "by_batch": gain.groupby("batch")["gain_pct"].mean().round(2).to_dict(),
        "by_model": gain.groupby("model")["gain_pct"].mean().round(2).to_dict(),
        "mean_gain_by_scheduler": per_sched,
    }


def figure(df: pd.DataFrame) -> Figure:
    """The two-panel figure."""
    fig = Figure(figsize=(COLUMN_WIDTH_IN, 4.8), layout="constrained")
    ax_a, ax_b = fig.subplots(2, 1, height_ratios=[1.15, 1])
    present = [s for s in ["all-gpu", *LINES] if (df["scheduler"] == s).any()]
    speedup_lines(df, x="batch", baseline="all-gpu", where={"scheduler": present},
                  agg="geomean", ax=ax_a, xlabel="batch size")  # fmt: skip
    handles, _ = ax_a.get_legend_handles_labels()
    ax_a.get_legend().remove()
    fig.legend(handles=handles, loc="outside upper center", ncols=3, fontsize=6)
    ax_a.set_title(f"(a) geomean over the 5 CNNs, {', '.join(sorted(set(df['platform'])))}", loc="left")
    gain = single_device_gain(df).sort_values(["batch", "model"])
    gain["batch size"] = "batch " + gain["batch"].astype(str)
    makespan_bars(gain, metric="gain_pct", group="model", hue="batch size", scale=1.0,
                  ylabel="gain (%)", labels="legend", values=False, ax=ax_b)  # fmt: skip
    ax_b.get_legend().remove()
    ax_b.legend(loc="upper right", ncols=2, fontsize=6)
    ax_b.set_title("(b) cp-greedy vs best single device", loc="left")
    ax_b.tick_params(axis="x", labelsize=6)
    ax_b.axhline(0, color="black", linewidth=0.5)
    annotate_flat_groups(ax_b, gain)
    return fig


def annotate_flat_groups(ax: Axes, gain: pd.DataFrame, below_pct: float = 0.5) -> None:
    """Write the largest gain over a model's group of bars where every bar is below
    ``below_pct`` %: such bars are too short to see, and a gain of 0 % must not look
    like a missing one."""
    largest = gain.groupby("model")["gain_pct"].apply(lambda g: g.abs().max())
    for x, label in zip(ax.get_xticks(), ax.get_xticklabels()):
        value = largest.get(label.get_text())
        if value is not None and value < below_pct:
            ax.annotate(f"< {below_pct:g} %\nmax\n{value:.2f}", (x, 0), xytext=(0, 3),
                        textcoords="offset points", ha="center", va="bottom", fontsize=5.5)


def main(argv: list[str] | None = None) -> int:
    """Command line: ``plot.py [--results CSV] [--out DIR]``."""
    return plot_main(__doc__, HERE, NAME, figure, headline, load_results, argv)


if __name__ == "__main__":
    sys.exit(main())
