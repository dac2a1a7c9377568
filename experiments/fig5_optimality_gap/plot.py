"""Figure 5 from ``results.csv``: optimality gap of each heuristic against CP-SAT.

gap = heuristic makespan / reference - 1, per graph (random DAGs and real
subgraphs), where the reference is the simulated makespan of the ``optimal`` plan
when CP-SAT proved it optimal, else CP-SAT's lower bound (then the gap is an upper
bound; those graphs are counted in the headline). One box per scheduler (median,
quartiles, whiskers at 1.5 IQR) with every graph as a dot (circles: random DAGs,
triangles: real subgraphs); schedulers sorted by median gap. Writes
``fig5_optimality_gap.{png,pdf}`` and prints the headline numbers::

    python experiments/fig5_optimality_gap/plot.py [--results CSV] [--out DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from hetsim.experiments.figures import plot_main
from hetsim.experiments.plotting.charts import COLUMN_WIDTH_IN, PAPER_RC, scheduler_style
from hetsim.experiments.sweep import load_results

HERE = Path(__file__).resolve().parent
NAME = "fig5_optimality_gap"
GRAPH_KEYS = ["graph", "platform", "cost"]



def gaps(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (graph, heuristic) with ``reference_s``, ``reference`` and ``gap_pct``.

    ``reference`` is ``"optimum"`` (the optimal plan's simulated makespan, CP-SAT
    status OPTIMAL) or ``"lower bound"`` (CP-SAT's bound, status FEASIBLE).
    Graphs whose ``optimal`` row failed are left out.
    """
    ok = df[df["status"] == "ok"]
    opt = ok[ok["scheduler"] == "optimal"][[*GRAPH_KEYS, "makespan_s", "opt_status", "opt_bound_s"]]
    opt = opt.rename(columns={"makespan_s": "optimal_s"})
    proven = opt["opt_status"] == "OPTIMAL"
    opt["reference_s"] = np.where(proven, opt["optimal_s"], opt["opt_bound_s"])
    opt["reference"] = np.where(proven, "optimum", "lower bound")
    heur = ok[ok["scheduler"] != "optimal"].drop(columns=["opt_status", "opt_bound_s"])
    out = heur.merge(opt, on=GRAPH_KEYS, how="inner")
    out["gap_pct"] = (out["makespan_s"] / out["reference_s"] - 1) * 100
    return out.reset_index(drop=True)


def headline(df: pd.DataFrame) -> dict[str, object]:
    """Per scheduler: median / mean / max gap (%), share within 5 % and at 0 %."""
    g = gaps(df)
    per = g.groupby("scheduler")["gap_pct"]
    table = pd.DataFrame({
        "median": per.median(), "mean": per.mean(), "p90": per.quantile(0.9), "max": per.max(),
        "within_5pct": per.apply(lambda s: (s <= 5).mean() * 100),
        "optimal_found": per.apply(lambda s: (s <= 1e-6).mean() * 100),
        "below_reference": per.apply(lambda s: int((s < -1e-6).sum())),
    }).round(2).sort_values("median")  # fmt: skip
    refs = g.drop_duplicates(GRAPH_KEYS)["reference"].value_counts().to_dict()
    opt = df[(df["scheduler"] == "optimal") & (df["status"] == "ok")]
    return {
        "graphs": int(g.drop_duplicates(GRAPH_KEYS).shape[0]),
        "references": refs,
        "graphs_by_family": g.drop_duplicates(GRAPH_KEYS)["family"].value_counts().to_dict(),
        "optimal_solve_time_s_max": round(float(opt["solve_time_s"].max()), 2) if len(opt) else None,
        "gap_pct_by_scheduler": table.to_dict(orient="index"),
    }


def figure(df: pd.DataFrame) -> Figure:
    """Horizontal box plot of the gap per scheduler, dots per graph."""
    g = gaps(df)
    order = g.groupby("scheduler")["gap_pct"].median().sort_values().index.tolist()
    with mpl.rc_context(PAPER_RC):
        fig = Figure(figsize=(COLUMN_WIDTH_IN, 0.7 + 0.24 * len(order)), layout="constrained")
        ax = fig.add_subplot()
        data = [g.loc[g["scheduler"] == s, "gap_pct"].to_numpy() for s in order]
        box = ax.boxplot(data, orientation="horizontal", widths=0.6, showfliers=False, patch_artist=True,
                         medianprops={"color": "black", "linewidth": 0.8},
                         whiskerprops={"linewidth": 0.5}, capprops={"linewidth": 0.5})  # fmt: skip
        for patch, s in zip(box["boxes"], order):
            patch.set_facecolor(scheduler_style(s)["color"])
            patch.set_alpha(0.55)
            patch.set_linewidth(0.5)
        rng = np.random.default_rng(0)  # jitter only: the data are not random
        for i, s in enumerate(order):
            part = g[g["scheduler"] == s]
            for fam, marker in (("random", "o"), ("real", "^")):
                x = part.loc[part["family"] == fam, "gap_pct"].to_numpy()
                y = i + 1 + rng.uniform(-0.18, 0.18, len(x))
                ax.scatter(x, y, s=4, marker=marker, color="black", linewidths=0, alpha=0.6,
                           label=None if i else f"{fam} graphs", zorder=3)  # fmt: skip
        ax.set_yticks(range(1, len(order) + 1), order)
        ax.set_ylim(len(order) + 0.6, 0.4)
        ax.set_xscale("symlog", linthresh=1.0)
        ax.xaxis.set_major_formatter(mpl.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_xlabel("gap to the CP-SAT optimum (%), symlog")
        ax.axvline(0, color="black", linewidth=0.5)
        ax.grid(True, axis="x")
        ax.set_xlim(-0.5, max(1.0, float(g["gap_pct"].max())) * 1.4)
        fig.legend(loc="outside upper center", ncols=2, fontsize=6)
    return fig


def main(argv: list[str] | None = None) -> int:
    """Command line: ``plot.py [--results CSV] [--out DIR]``."""
    return plot_main(__doc__, HERE, NAME, figure, headline, load_results, argv)


if __name__ == "__main__":
    sys.exit(main())
