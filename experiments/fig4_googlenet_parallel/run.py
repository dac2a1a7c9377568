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
    """A reduced grid of the same shape: a 64-pixel GoogLeNet, three schedulers."""
    return Sweep.from_dict({
        "name": "fig4-quick",
        "grid": {"model": "googlenet", "batch": [1], "granularity": "fused",
                 "platform": "jetson-orin", "scheduler": ["all-gpu", "by-op", "by-path"]},
        "model_args": {"googlenet": {"image_size": 64}},
    })  # fmt: skip


def run(sweep: Sweep, out: str | os.PathLike[str], *, workers: int = 2,
        progress: bool = True) -> pd.DataFrame:  # fmt: skip
    """Run the points of ``sweep`` not yet in ``out/results.csv``; return its rows."""
    return run_sweeps([sweep], out, workers=workers, progress=progress)


def main(argv: list[str] | None = None) -> int:
    """Command line: ``run.py [--quick] [--out DIR] [--workers N]``."""
    return sweep_main(__doc__, HERE, full_sweep, quick_sweep, run,
                      lambda r: f"{r.platform} b{r.batch} {r.granularity} {r.scheduler}", argv)  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
