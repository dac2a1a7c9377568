"""Figure 4: GoogLeNet by-op vs by-path vs dynamic on a PC and an embedded board.

The flexible-parallel TVM runtime thesis this project follows runs independent
operators (``by-op``) or whole inception branches (``by-path``) of GoogLeNet on the
CPU and the GPU at once; ``dynamic`` places each op when it becomes ready
(StarPU's earliest-finish rule). This script runs the grid of ``sweep.toml`` beside
it (batch 1, 4, 16; fused and op granularity; ``ryzen-gtx1080``, ``xeon-p2200``
and ``jetson-orin``; the single-device baselines and HEFT for reference) and
appends one tidy row per point to ``results.csv`` in this folder (points already
there are skipped)::

    python experiments/fig4_googlenet_parallel/run.py && python experiments/fig4_googlenet_parallel/plot.py

``--quick`` runs a 3-point grid on a 64-pixel GoogLeNet (for the tests).
"""

from __future__ import annotations

import sys
from pathlib import Path

from hetsim.experiments.figures import SweepFigure

HERE = Path(__file__).resolve().parent
#: the grid of ``sweep.toml``; ``--quick``: a 64-pixel GoogLeNet, three schedulers
FIGURE = SweepFigure(HERE, {
    "name": "fig4-quick",
    "grid": {"model": "googlenet", "batch": [1], "granularity": "fused",
             "platform": "jetson-orin", "scheduler": ["all-gpu", "by-op", "by-path"]},
    "model_args": {"googlenet": {"image_size": 64}},
}, lambda r: f"{r.platform} b{r.batch} {r.granularity} {r.scheduler}")  # fmt: skip
full_sweep, quick_sweep, run = FIGURE.full_sweep, FIGURE.quick_sweep, FIGURE.run


def main(argv: list[str] | None = None) -> int:
    """Command line: ``run.py [--quick] [--out DIR] [--workers N]``."""
    return FIGURE.main(__doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
