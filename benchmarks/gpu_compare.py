"""What measured GPU costs change: every scheduler on GPU presets, roofline vs measured.

For each model and GPU preset, ``hetsim compare`` twice: once with ``--cost roofline``
(the GPU priced from its datasheet figures) and once with the preset's default (the
GPU priced from the measured NeuSight profile, the CPU by the roofline in both). The
table gives the all-GPU makespan, the best scheduler and its makespan and speedup over
all-GPU, and the scheduler ranking's agreement between the two cost models.

Run: ``python benchmarks/gpu_compare.py [--models resnet50,googlenet]
[--platforms a100-server,t4-server]`` (first run: the zoo imports and the GPU model
fits, a few minutes; then ~1 min).
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # no spinning XGBoost threads on a busy host

import pandas as pd
from scipy.stats import kendalltau

import hetsim


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="resnet50,googlenet")
    ap.add_argument("--platforms", default="a100-server,t4-server")
    args = ap.parse_args()
    t0 = time.perf_counter()
    rows = []
    for model in args.models.split(","):
        graph = hetsim.zoo.load(model, cache=True)
        for platform in args.platforms.split(","):
            tables = {}
            for cost in ("roofline", "default"):
                cmp = hetsim.compare(graph, platform, cost=cost)
                tab = cmp.table[cmp.table["status"] == "ok"].set_index("scheduler")
                tables[cost] = tab
                best = tab["makespan_s"].idxmin()
                rows.append({"model": model, "platform": platform,
                             "gpu cost": "roofline" if cost == "roofline" else cmp.config["cost_sources"].split(
                                 "gpu=")[-1],
                             "all-gpu ms": tab.loc["all-gpu", "makespan_s"] * 1e3,
                             "all-cpu ms": tab.loc["all-cpu", "makespan_s"] * 1e3,
                             "best": best, "best ms": tab.loc[best, "makespan_s"] * 1e3,
                             "best vs all-gpu": tab.loc["all-gpu", "makespan_s"] / tab.loc[best, "makespan_s"]})
            common = tables["roofline"].index.intersection(tables["default"].index)
            tau = kendalltau(tables["roofline"].loc[common, "makespan_s"],
                             tables["default"].loc[common, "makespan_s"]).statistic
            rows[-1]["rank tau vs roofline"] = tau
    out = pd.DataFrame(rows)
    print(out.to_string(index=False, float_format=lambda v: f"{v:.3f}", na_rep=""))
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
