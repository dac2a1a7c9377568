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

import sys
from pathlib import Path

from hetsim.experiments.figures import SweepFigure

HERE = Path(__file__).resolve().parent
#: the grid of ``sweep.toml``; ``--quick``: one 32-pixel ResNet-18, three schedulers
FIGURE = SweepFigure(HERE, {
    "name": "fig1-quick",
    "grid": {"model": "resnet18", "batch": [1], "granularity": "fused",
             "platform": "xeon-p2200", "scheduler": ["all-cpu", "all-gpu", "cp-greedy"]},
    "model_args": {"resnet18": {"image_size": 32}},
}, lambda r: f"{r.model} b{r.batch} {r.scheduler}")  # fmt: skip
full_sweep, quick_sweep, run = FIGURE.full_sweep, FIGURE.quick_sweep, FIGURE.run


def main(argv: list[str] | None = None) -> int:
    """Command line: ``run.py [--quick] [--out DIR] [--workers N]``."""
    return FIGURE.main(__doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
