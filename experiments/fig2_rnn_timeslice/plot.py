"""Figure 2 from ``results.csv``: time-slice pipeline gain over single-device RNN execution.

Gain = makespan of the better single-device execution (all-cpu, all-gpu) /
makespan of ``timeslice-pipeline`` - 1, for the same model, options, batch,
platform and number of requests. (a) against the number of requests (mean over
LSTM/GRU and the option variants); (b) against the number of layers and (c) the
sequence length, at the largest request count. One line per platform and batch.
Writes ``fig2_rnn_timeslice.{png,pdf}`` and prints the headline numbers::

    python experiments/fig2_rnn_timeslice/plot.py [--results CSV] [--out DIR]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib as mpl
import pandas as pd
from matplotlib.figure import Figure

from hetsim.experiments.figures import plot_main
from hetsim.experiments.plotting.charts import COLUMN_WIDTH_IN, OKABE_ITO, PAPER_RC
from hetsim.experiments.sweep import load_results

HERE = Path(__file__).resolve().parent
NAME = "fig2_rnn_timeslice"
KEYS = ["platform", "model", "model_args", "batch", "requests"]


def gains(df: pd.DataFrame, scheduler: str = "timeslice-pipeline") -> pd.DataFrame:
    """One row per point of ``scheduler`` with its single-device baselines and gain (%).

    Adds the model options as columns (``layers``, ``seq_len``, ``hidden``) and
    ``gain_pct`` (vs the better single device), ``gain_vs_gpu_pct`` (vs all-gpu).
    """
    ok = df[df["status"] == "ok"]
    wide = ok.pivot_table(index=KEYS, columns="scheduler", values="makespan_s", aggfunc="first")
    out = pd.DataFrame({"all_cpu_s": wide["all-cpu"], "all_gpu_s": wide["all-gpu"],
                        "sched_s": wide[scheduler]}).reset_index()  # fmt: skip
    opts = pd.DataFrame([json.loads(a) for a in out["model_args"]], index=out.index)
    out = pd.concat([out, opts], axis=1)
    out["best_single_s"] = out[["all_cpu_s", "all_gpu_s"]].min(axis=1)
    out["gain_pct"] = (out["best_single_s"] / out["sched_s"] - 1) * 100
    out["gain_vs_gpu_pct"] = (out["all_gpu_s"] / out["sched_s"] - 1) * 100
    return out.dropna(subset=["gain_pct"])


def _base(g: pd.DataFrame, key: str) -> pd.DataFrame:
    """Rows whose options other than ``key`` are at their most common (base) value."""
    for other in ("layers", "seq_len"):
        if other != key and other in g:
            g = g[g[other] == g[other].mode().iloc[0]]
    return g


def headline(df: pd.DataFrame) -> dict[str, object]:
    """Numbers the README quotes (gains in %)."""
    g = gains(df)
    multi = g[g["requests"] > 1]
    by = g.groupby(["platform", "batch", "requests"])["gain_pct"].mean().round(2)
    best = g.loc[g["gain_pct"].idxmax()]
    return {
        "points": len(g),
        "mean_gain_pct_requests_gt1": round(float(multi["gain_pct"].mean()), 2),
        "mean_gain_pct_by_platform_requests_gt1": multi.groupby("platform")["gain_pct"].mean().round(2).to_dict(),
        "mean_gain_pct_by_platform_batch_requests": {f"{p} b{b} r{r}": v for (p, b, r), v in by.items()},
        "max_gain_pct": round(float(best["gain_pct"]), 2),
        "max_gain_at": f"{best['model']} {best['model_args']} b{best['batch']} r{best['requests']} {best['platform']}",
        "min_gain_pct": round(float(g["gain_pct"].min()), 2),
    }


def figure(df: pd.DataFrame) -> Figure:
    """The three-panel figure."""
    g = gains(df)
    series = sorted({(p, b) for p, b in zip(g["platform"], g["batch"])})
    colours = dict(zip(sorted(set(g["platform"])), [OKABE_ITO["blue"], OKABE_ITO["vermillion"]]))
    top = int(g["requests"].max())
    with mpl.rc_context(PAPER_RC):
        fig = Figure(figsize=(COLUMN_WIDTH_IN, 3.6), layout="constrained")
        grid = fig.add_gridspec(2, 2)
        axes = [fig.add_subplot(grid[0, :]), fig.add_subplot(grid[1, 0]), fig.add_subplot(grid[1, 1])]
        panels = [(axes[0], "requests", g, "requests (pipelined)", "(a) mean over models, options"),
                  (axes[1], "layers", _base(g[g["requests"] == top], "layers"), "layers",
                   f"(b) {top} requests"),
                  (axes[2], "seq_len", _base(g[g["requests"] == top], "seq_len"), "sequence length",
                   f"(c) {top} requests")]  # fmt: skip
        for ax, x, part, xlabel, title in panels:
            for p, b in series:
                sel = part[(part["platform"] == p) & (part["batch"] == b)]
                if sel.empty:
                    continue
                line = sel.groupby(x)["gain_pct"].mean()
                ax.plot(line.index, line.values, color=colours[p], marker="o" if b == 1 else "s",
                        linestyle="-" if b == 1 else "--", label=f"{p}, batch {b}")  # fmt: skip
            ax.axhline(0, color="black", linewidth=0.5)
            ax.set_xscale("log", base=2)
            xs = sorted(set(part[x]))
            ax.set_xticks(xs, [str(v) for v in xs])
            ax.xaxis.set_minor_locator(mpl.ticker.NullLocator())
            ax.set_xlabel(xlabel)
            ax.set_title(title, loc="left")
            ax.grid(True)
        axes[0].set_ylabel("gain over best\nsingle device (%)")
        axes[1].set_ylabel("gain (%)")
        handles, _ = axes[0].get_legend_handles_labels()
        fig.legend(handles=handles, loc="outside upper center", ncols=2)
    return fig


def main(argv: list[str] | None = None) -> int:
    """Command line: ``plot.py [--results CSV] [--out DIR]``."""
    return plot_main(__doc__, HERE, NAME, figure, headline, load_results, argv)


if __name__ == "__main__":
    sys.exit(main())
