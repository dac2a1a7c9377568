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

import argparse
import copy
import os
import sys
import time
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from experiments.sweep import Sweep, SweepError, run_sweep

HERE = Path(__file__).resolve().parent
CACHE = HERE.parent / ".cache" / "graphs"


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
    """Run every sweep into ``out/results.csv`` (skipping points done); return the rows."""
    cache = os.environ.get("HETSIM_CACHE") or str(CACHE)
    frames = [run_sweep(s, out, workers=workers, cache_dir=cache, parquet=False, progress=progress)
              for s in sweeps]  # fmt: skip
    return pd.concat(frames, ignore_index=True)


def main(argv: list[str] | None = None) -> int:
    """Command line: ``run.py [--quick] [--out DIR] [--workers N]``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="reduced grid (smoke test)")
    ap.add_argument("--out", type=Path, default=HERE, help="folder of results.csv")
    ap.add_argument("--workers", type=int, default=2, help="worker processes (0: inline)")
    args = ap.parse_args(argv)
    sweeps = quick_sweeps() if args.quick else full_sweeps()
    t0 = time.perf_counter()
    df = run(sweeps, args.out, workers=args.workers)
    bad = df[df["status"] != "ok"]
    print(f"{len(df)} rows ({len(bad)} errors) in {args.out / 'results.csv'}; "
          f"{time.perf_counter() - t0:.0f} s")  # fmt: skip
    for r in bad.itertuples():
        print(f"  error: {r.model} {r.model_args} {r.scheduler}: {r.error}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
