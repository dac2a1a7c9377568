"""Markdown tables of the GPU cost-model figures, from the CSVs ``benchmarks/gpu_costmodel.py``
writes here (``published.csv``, ``zoo.csv``, ``targets.csv``): what
``docs/guide/gpu-cost-models.md`` shows.

Run: ``python experiments/gpu_costmodel/table.py [FOLDER]`` (default: this folder).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd


def markdown(frame: pd.DataFrame) -> str:
    """``frame`` as a Markdown table (index dropped)."""
    cols = [str(c) for c in frame.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


def error_table(frame: pd.DataFrame, index: list[str]) -> pd.DataFrame:
    """Signed error (%) per row of ``index`` and cost model, and the mean absolute error."""
    wide = frame.pivot_table(index=index, columns="cost", values="error_pct")[list(dict.fromkeys(frame["cost"]))]
    out = wide.map(lambda v: f"{v:+.1f}").reset_index().astype(object)
    mean = frame.assign(a=frame["error_pct"].abs()).groupby("cost", sort=False)["a"].mean()
    out.loc[len(out)] = ["mean abs"] + [""] * (len(index) - 1) + [f"{mean[c]:.1f}" for c in wide.columns]
    return out


def main(folder: Path) -> None:
    if (folder / "published.csv").is_file():
        print("Published FP32 inference latencies (NeuSight), error % of the preset's all-GPU busy time:\n")
        print(markdown(error_table(pd.read_csv(folder / "published.csv"), ["model", "batch", "gpu"])))
        print()
    if (folder / "zoo.csv").is_file():
        print("Measured zoo kernel sums, error % of the preset's all-GPU busy time:\n")
        print(markdown(error_table(pd.read_csv(folder / "zoo.csv"), ["model", "batch", "gpu"])))
        print()
    if (folder / "targets.csv").is_file():
        t = pd.read_csv(folder / "targets.csv")
        t["figure %"] = t.pop("mape_pct").map(lambda v: f"{v:.1f}")
        t["met"] = t["met"].map({True: "met", False: "missed"})
        print("Targets:\n")
        print(markdown(t))


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent)
