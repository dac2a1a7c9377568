"""Simulated against measured makespan on the lent H100 machine, one panel per run.

``results.csv`` holds the rows of three ``hetsim validate --all`` runs of googlenet,
resnet18, bert_base (32 tokens) and mobilenet_v2 on ``h100-box.toml`` (one CPU
worker of 8 threads + the H100; README.md beside this file says how each was run):
``1-profile`` priced by the profile ``profiles/h100-torch`` (operators timed alone),
``2-in-run`` with the op times of each device measured alone in the run's rounds and
the copy latency and hand-over measured in them, ``3-in-run-host`` as 2 with the copy
latency counted from the producer's end and the two workers' slowdown
(``runtime.validation.link_calibration``). Writes ``validation_h100.{png,pdf}`` and prints, per
run, the error statistics and Kendall's tau per model::

    python experiments/validation_h100/plot.py [--results CSV] [--out DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from hetsim.experiments.figures import plot_main
from hetsim.experiments.plotting.charts import COLUMN_WIDTH_IN, sim_vs_measured

HERE = Path(__file__).resolve().parent
NAME = "validation_h100"
TITLES = {"1-profile": "1: operators timed alone (profile)",
          "2-in-run": "2: each device alone, in the run",
          "3-in-run-host": "3: + copy lag and both-active slowdown"}


def headline(df: pd.DataFrame) -> dict[str, object]:
    """Per run: plans, mean and max |error|, share inside the band or within 5 %,
    Kendall tau per model."""
    ok = df[df["status"] == "ok"].copy()
    ok["abs_err"] = ok["error_pct"].abs()
    out: dict[str, object] = {}
    for run, g in ok.groupby("run", sort=True):
        near = (g["in_band"].astype(bool) | (g["abs_err"] <= 5)).mean() * 100
        taus = g.groupby("model", sort=False)["kendall_tau"].first().round(3).to_dict()
        out[run] = (f"{len(g)} plans, mean |error| {g['abs_err'].mean():.1f} %, max {g['abs_err'].max():.1f} %, "
                    f"inside band or within 5 %: {near:.0f} %, Kendall tau {taus}")
    return out


def figure(df: pd.DataFrame) -> Figure:
    """One log-log panel per run."""
    ok = df[df["status"] == "ok"]
    order = {m: i for i, m in enumerate(dict.fromkeys(ok["model"]))}  # the same colour per model in every panel
    ok = ok.sort_values("model", key=lambda s: s.map(order), kind="stable")
    runs = sorted(set(ok["run"]))
    fig = Figure(figsize=(COLUMN_WIDTH_IN * len(runs), 3.3), layout="constrained")
    axes = fig.subplots(1, len(runs), squeeze=False)[0]
    for ax, run in zip(axes, runs):
        sim_vs_measured(ok[ok["run"] == run], sim="simulated_s", measured="measured_s", hue="model",
                        title=TITLES.get(run, run), ax=ax)
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
            axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            axis.set_minor_formatter(NullFormatter())
    return fig


def main(argv: list[str] | None = None) -> int:
    """Command line: ``plot.py [--results CSV] [--out DIR]``."""
    return plot_main(__doc__, HERE, NAME, figure, headline, pd.read_csv, argv)


if __name__ == "__main__":
    sys.exit(main())
