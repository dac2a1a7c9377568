"""Figure 1: CNN spatial partitioning (critical-path greedy) vs single-device TVM.

The CPU-GPU adaptive-partitioning thesis this project follows places the operators
of a CNN's critical path on their fastest device and corrects the rest greedily
(``cp-greedy``); it reports +12.51 % on average over TVM's fused single-device
execution on its Xeon Gold 6248R + Quadro P2200 machine, best at small batch and
for deep models. This script runs the grid of ``sweep.toml`` beside it (5 CNNs x
batch 1, 4, 16, 64 x 13 schedulers, fused granularity, ``xeon-p2200``, roofline)
and appends one tidy row per point to ``results.csv`` in this folder (points
already there are skipped)::

    python experiments/fig1_cnn_partitioning/run.py && python experiments/fig1_cnn_partitioning/plot.py

``--quick`` runs a two-point grid on a 32-pixel ResNet-18 (for the tests).
Imported graphs are cached in ``experiments/.cache/graphs`` (``$HETSIM_CACHE``
overrides it).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from hetsim.experiments.figures import run_sweeps, sweep_main
from hetsim.experiments.sweep import Sweep

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

HERE = Path(__file__).resolve().parent


def full_sweep() -> Sweep:
    """The figure's grid (``sweep.toml``)."""
    return Sweep.from_toml(HERE / "sweep.toml")


def quick_sweep() -> Sweep:
    """A reduced grid of the same shape: one 32-pixel ResNet-18, three schedulers."""
    return Sweep.from_dict({
        "name": "fig1-quick",
        "grid": {"model": "resnet18", "batch": [1], "granularity": "fused",
                 "platform": "xeon-p2200", "scheduler": ["all-cpu", "all-gpu", "cp-greedy"]},
        "model_args": {"resnet18": {"image_size": 32}},
    })  # fmt: skip


def run(sweep: Sweep, out: str | os.PathLike[str], *, workers: int = 2,
        progress: bool = True) -> pd.DataFrame:  # fmt: skip
    """Run the points of ``sweep`` not yet in ``out/results.csv``; return its rows."""
    return run_sweeps([sweep], out, workers=workers, progress=progress)


def main(argv: list[str] | None = None) -> int:
    """Command line: ``run.py [--quick] [--out DIR] [--workers N]``."""
    return sweep_main(__doc__, HERE, full_sweep, quick_sweep, run,
                      lambda r: f"{r.model} b{r.batch} {r.scheduler}", argv)  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
