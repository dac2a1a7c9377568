"""Figure 6 from ``results.csv``: simulated against measured makespan, per cost model.

One log-log panel per cost model (:func:`experiments.plotting.charts.sim_vs_measured`: the
y = x line, ±10 % and ±20 % bands, MAPE in the corner), one dot per (model,
scheduler) plan, coloured by model. The headline recomputes, from the rows, the
error statistics and Kendall's tau between the simulated and measured rankings of
the schedulers of each model. Writes ``fig6_sim_vs_measured.{png,pdf}``::

    python experiments/fig6_sim_vs_measured/plot.py [--results CSV] [--out DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
from scipy.stats import kendalltau

from hetsim.experiments.figures import plot_main
from hetsim.experiments.plotting.charts import COLUMN_WIDTH_IN, sim_vs_measured
from hetsim.experiments.sweep import load_results

HERE = Path(__file__).resolve().parent
NAME = "fig6_sim_vs_measured"



def cost_label(cost: str) -> str:
    """``roofline``, inputs measured in the run, or ``profile <name>``."""
    if cost == "roofline":
        return "roofline (analytic)"
    if cost == "measured" or "measured in this run" in str(cost):
        return "op times and host costs measured in the run"
    return f"profile {Path(cost).name} (measured)"


def errors(df: pd.DataFrame) -> pd.DataFrame:
    """Per (cost, model): plans, MAPE, max |error|, share within 10 %, Kendall tau,
    best scheduler simulated and measured."""
    ok = df[df["status"] == "ok"].copy()
    ok["abs_err_pct"] = (ok["simulated_s"] / ok["measured_s"] - 1).abs() * 100
    rows = []
    for (cost, model), g in ok.groupby(["cost", "model"], sort=False):
        tau, p = kendalltau(g["simulated_s"], g["measured_s"]) if len(g) > 1 else (float("nan"),) * 2
        rows.append({
            "cost": cost, "model": model, "plans": len(g), "mape_pct": g["abs_err_pct"].mean(),
            "max_err_pct": g["abs_err_pct"].max(), "within_10pct": (g["abs_err_pct"] <= 10).mean() * 100,
            "kendall_tau": tau, "kendall_p": p,
            "best_simulated": g.loc[g["simulated_s"].idxmin(), "scheduler"],
            "best_measured": g.loc[g["measured_s"].idxmin(), "scheduler"],
        })  # fmt: skip
    return pd.DataFrame(rows)


def headline(df: pd.DataFrame) -> dict[str, object]:
    """Error table per (cost, model), and per cost over all plans."""
    e = errors(df)
    ok = df[df["status"] == "ok"].copy()
    ok["abs_err_pct"] = (ok["simulated_s"] / ok["measured_s"] - 1).abs() * 100
    overall = ok.groupby("cost")["abs_err_pct"].agg(["count", "mean", "max"]).round(2)
    return {
        "per_model": e.round(3).to_dict(orient="records"),
        "per_cost": overall.to_dict(orient="index"),
        "sources": sorted(set(df["source"].astype(str))),
        "skipped_or_failed": int((df["status"] != "ok").sum()),
    }


def figure(df: pd.DataFrame) -> Figure:
    """One panel per cost model."""
    ok = df[df["status"] == "ok"]
    costs = list(dict.fromkeys(ok["cost"]))
    fig = Figure(figsize=(COLUMN_WIDTH_IN, 0.3 + 2.8 * len(costs)), layout="constrained")
    axes = fig.subplots(len(costs), 1, squeeze=False)[:, 0]
    for ax, cost in zip(axes, costs):
        sim_vs_measured(ok[ok["cost"] == cost], sim="simulated_s", measured="measured_s", hue="model",
                        title=cost_label(cost), ax=ax)  # fmt: skip
        for axis in (ax.xaxis, ax.yaxis):  # plain numbers at 1, 2, 5 x 10^k; no minor labels
            axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
            axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            axis.set_minor_formatter(NullFormatter())
    fig.suptitle(f"Simulated vs measured on {', '.join(sorted(set(ok['platform'])))}", fontsize=8)
    return fig


def main(argv: list[str] | None = None) -> int:
    """Command line: ``plot.py [--results CSV] [--out DIR]``."""
    return plot_main(__doc__, HERE, NAME, figure, headline, load_results, argv)


if __name__ == "__main__":
    sys.exit(main())
