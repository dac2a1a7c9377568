"""What every figure script under ``experiments/fig*/`` shares."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["plot_main"]


def plot_main(
    doc: str | None,
    here: Path,
    name: str,
    figure: Callable[[Any], Any],
    headline: Callable[[Any], Mapping[str, Any]],
    load: Callable[[Path], Any],
    argv: Sequence[str] | None = None,
) -> int:
    """Command line of a figure's ``plot.py``: ``plot.py [--results CSV] [--out DIR]``.

    Reads ``--results`` (default ``here/results.csv``) with ``load``, saves
    ``figure(df)`` as ``--out/name`` (PNG and PDF) and prints ``headline(df)``.
    """
    from experiments.plots import save_figure

    ap = argparse.ArgumentParser(description=(doc or name).splitlines()[0])
    ap.add_argument("--results", type=Path, default=here / "results.csv")
    ap.add_argument("--out", type=Path, default=here)
    args = ap.parse_args(argv)
    df = load(args.results)
    for path in save_figure(figure(df), args.out / name):
        print(f"wrote {path}")
    for key, value in headline(df).items():
        print(f"{key}: {value}")
    return 0
