"""Figure 2: RNN time-slice pipeline vs single-device execution (LSTM, GRU).

The multi-task subgraph-parallel scheduling of the CPU-GPU adaptive-partitioning
thesis cuts an unrolled recurrent model into contiguous slices of time steps, one
per device, so that consecutive requests flow through CPU and GPU as a pipeline
(``timeslice-pipeline``); the thesis reports +14 to +19 % over single-device
execution, up to +38 % for large batches. This script runs ``sweep.toml`` beside
it: the grid times the one-at-a-time variants of the models' options given in its
``[variants]`` table (layers, sequence length around a base), and appends one tidy
row per point to ``results.csv`` in this folder (points already there are skipped)::

    python experiments/fig2_rnn_timeslice/run.py && python experiments/fig2_rnn_timeslice/plot.py

``--quick`` runs a 6-point grid on a tiny LSTM (for the tests).
"""

from __future__ import annotations

import copy
import os
import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from hetsim.experiments.figures import run_sweeps, sweep_main
from hetsim.experiments.sweep import Sweep, SweepError

HERE = Path(__file__).resolve().parent


def expand_variants(variants: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Model-option variants, varied one at a time around ``variants["base"]``.

    >>> expand_variants({"base": {"layers": 2, "seq_len": 16}, "layers": [1, 2]})
    [{'layers': 1, 'seq_len': 16}, {'layers': 2, 'seq_len': 16}]
    """
    base = dict(variants.get("base", {}))
    out = [base] if len(variants) == 1 else []
    for key, values in variants.items():
        if key == "base":
            continue
        if not isinstance(values, list) or not values:
            raise SweepError(f"[variants]: {key!r} must be a non-empty list, got {values!r}")
        for v in values:
            var = {**base, key: v}
            if var not in out:
                out.append(var)
    return out


def sweeps_from_dict(data: Mapping[str, Any], *, source: str = "<dict>") -> list[Sweep]:
    """One :class:`Sweep` per variant of ``data["variants"]`` (the rest is a sweep file)."""
    data = copy.deepcopy(dict(data))
    variants = expand_variants(data.pop("variants", {"base": {}}))
    models = data.get("grid", {}).get("model", [])
    models = models if isinstance(models, list) else [models]
    out = []
    for var in variants:
        one = {**data, "model_args": {m: dict(var) for m in models}}
        out.append(Sweep.from_dict(one, source=source))
    return out


def full_sweeps() -> list[Sweep]:
    """The figure's sweeps (``sweep.toml``, one per variant)."""
    path = HERE / "sweep.toml"
    with path.open("rb") as fh:
        return sweeps_from_dict(tomllib.load(fh), source=str(path))


def quick_sweeps() -> list[Sweep]:
    """A reduced grid of the same shape: a 3-step, 16-wide LSTM, 1 and 4 requests."""
    return sweeps_from_dict({
        "name": "fig2-quick",
        "grid": {"model": "lstm", "granularity": "fused", "platform": "xeon-p2200",
                 "scheduler": ["all-cpu", "all-gpu", "timeslice-pipeline"], "requests": [1, 4]},
        "variants": {"base": {"hidden": 16, "layers": 1, "seq_len": 3}},
    })  # fmt: skip


def run(sweeps: list[Sweep], out: str | os.PathLike[str], *, workers: int = 2,
        progress: bool = True) -> pd.DataFrame:  # fmt: skip
    """Run the points of ``sweeps`` not yet in ``out/results.csv``; return their rows."""
    return run_sweeps(sweeps, out, workers=workers, progress=progress)


def main(argv: list[str] | None = None) -> int:
    """Command line: ``run.py [--quick] [--out DIR] [--workers N]``."""
    return sweep_main(__doc__, HERE, full_sweeps, quick_sweeps, run,
                      lambda r: f"{r.model} {r.model_args} {r.scheduler}", argv)  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
