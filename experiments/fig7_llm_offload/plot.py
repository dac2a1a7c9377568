"""Figure 7 from ``results.csv``: predicted against published tokens/s, each point labelled.

One log-log panel: the y = x line and a ±25 % band, one labelled dot per published
figure, coloured by source. The headline prints each figure's error and the
quantities that explain the far-off ones (the host bandwidth a row implies:
CPU-resident bytes read per token x published tokens/s, against the preset's).
Hollow markers: ``results_host070.csv`` (``run.py --host-bandwidth-scale 0.70``), the
same predictions with the CPU at 70 % of its peak memory bandwidth, where present.
Writes ``fig7_llm_offload.{png,pdf}``::

    python experiments/fig7_llm_offload/plot.py [--results CSV] [--out DIR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, NullLocator

from hetsim.graphs.files import atomic_write

HERE = Path(__file__).resolve().parent
NAME = "fig7_llm_offload"


def headline(df: pd.DataFrame) -> pd.DataFrame:
    """Per figure: published, predicted, error; for batch-1 rows the host bandwidth the
    published figure implies if the CPU-resident bytes bound the step."""
    out = df[["id", "published", "predicted", "error_pct", "cpu_bytes", "cpu_bandwidth"]].copy()
    dec = df["metric"] == "decode_tok_s"
    out["implied_cpu_GBps"] = np.where(dec, df["cpu_bytes"] * df["published"] / 1e9, np.nan)
    out["preset_cpu_GBps"] = df["cpu_bandwidth"] / 1e9
    return out.drop(columns=["cpu_bytes", "cpu_bandwidth"]).round(2)


def draw(df: pd.DataFrame, host070: pd.DataFrame | None = None) -> Figure:
    fig = Figure(figsize=(6.0, 4.6))
    ax = fig.add_subplot()
    lo, hi = 0.6 * min(df["published"].min(), df["predicted"].min()), 1.6 * max(df["published"].max(),
                                                                                 df["predicted"].max())
    x = np.geomspace(lo, hi, 50)
    ax.plot(x, x, color="0.3", lw=1)
    ax.fill_between(x, x / 1.25, x * 1.25, color="0.9", label="±25 %")
    colours = {"ihq": "tab:blue", "llmfit": "tab:orange", "flexgen": "tab:green"}
    names = {"ihq": "llama.cpp -ngl sweep, i7-8700 + RTX 5060 Ti (InventiveHQ)",
             "llmfit": "llama.cpp -ngl 42, i9-10900X + RTX 2080 (llmfit #778)",
             "flexgen": "FlexGen OPT-30B, T4 + 208 GB (Sheng et al.)"}
    for key, c in colours.items():
        g = df[df["id"].str.startswith(key)]
        ax.scatter(g["published"], g["predicted"], color=c, s=22, zorder=3, label=names[key])
        for _, r in g.iterrows():
            label = r["id"].split("-")[-1] if key == "ihq" else ("-ngl 42" if key == "llmfit" else "OPT-30B")
            # to the right of the marker (radius about 2.5 pt), centred on it: clear of it
            ax.annotate(f"{label} ({r['error_pct']:+.0f} %)", (r["published"], r["predicted"]), fontsize=7,
                        xytext=(6, 0), textcoords="offset points", ha="left", va="center")
    if host070 is not None:
        ax.scatter(host070["published"], host070["predicted"], facecolors="none", edgecolors="0.35", s=30,
                   zorder=2, label="same, CPU at 70 % of its peak bandwidth (sensitivity)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ticks = [t for t in (2, 3, 5, 10, 20, 50) if lo <= t <= hi]
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(FixedLocator(ticks))
        axis.set_minor_locator(NullLocator())
        axis.set_major_formatter(lambda v, _: f"{v:g}")
    ax.set_xlabel("published tokens/s")
    ax.set_ylabel("predicted tokens/s (hetsim, roofline of the preset)")
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, default=HERE / "results.csv")
    ap.add_argument("--out", type=Path, default=HERE)
    a = ap.parse_args(argv)
    df = pd.read_csv(a.results)
    sens = a.results.with_name("results_host070.csv")
    host070 = pd.read_csv(sens) if sens.exists() else None
    fig = draw(df, host070)
    for ext in ("png", "pdf"):
        atomic_write(a.out / f"{NAME}.{ext}", lambda fh, ext=ext: fig.savefig(fh, format=ext, dpi=200), binary=True)
    print(headline(df).to_string(index=False))
    print(f"mean |error| {df['error_pct'].abs().mean():.1f} % over {len(df)} figures")
    if host070 is not None:
        print("CPU at 70 % of its peak bandwidth:")
        print(host070[["id", "published", "predicted", "error_pct"]].round(2).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
