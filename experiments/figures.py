"""What every figure script under ``experiments/fig*/`` shares."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hetsim.experiments.sweep import Sweep, run_sweep

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["GRAPH_CACHE", "SweepFigure", "graph_cache", "headline_entry", "plot_main", "run_sweeps", "sweep_main"]

#: graph cache shared by the figure scripts (``$HETSIM_CACHE`` overrides it)
GRAPH_CACHE = Path(__file__).resolve().parent / ".cache" / "graphs"


def graph_cache() -> str:
    """Folder of the imported-graph cache: ``$HETSIM_CACHE``, else :data:`GRAPH_CACHE`."""
    return os.environ.get("HETSIM_CACHE") or str(GRAPH_CACHE)


def run_sweeps(
    sweeps: Sequence[Sweep], out: str | os.PathLike[str], *, workers: int = 2, progress: bool = True
) -> pd.DataFrame:
    """Run the points of each sweep not yet in ``out/results.csv``; return their rows."""
    import pandas as pd

    frames = [
        run_sweep(s, out, workers=workers, cache_dir=graph_cache(), parquet=False, progress=progress)
        for s in sweeps
    ]
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


def sweep_main(
    doc: str | None,
    here: Path,
    full: Callable[[], Any],
    quick: Callable[[], Any],
    run: Callable[..., pd.DataFrame],
    describe: Callable[[Any], str],
    argv: Sequence[str] | None = None,
) -> int:
    """Command line of a sweep-based figure's ``run.py``: ``[--quick] [--out DIR] [--workers N]``.

    ``run(full() or quick(), out, workers=N)`` runs the grid; each error row is
    printed as ``describe(row)`` with its message.
    """
    ap = argparse.ArgumentParser(description=(doc or "run").splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="reduced grid (smoke test)")
    ap.add_argument("--out", type=Path, default=here, help="folder of results.csv")
    ap.add_argument("--workers", type=int, default=2, help="worker processes (0: inline)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    df = run(quick() if args.quick else full(), args.out, workers=args.workers)
    bad = df[df["status"] != "ok"]
    print(f"{len(df)} rows ({len(bad)} errors) in {args.out / 'results.csv'}; "
          f"{time.perf_counter() - t0:.0f} s")  # fmt: skip
    for r in bad.itertuples():
        print(f"  error: {describe(r)}: {r.error}", file=sys.stderr)
    return 0


@dataclass(frozen=True)
class SweepFigure:
    """A figure whose runner is one sweep: the grid of ``sweep.toml`` in its folder, and
    a reduced grid of the same shape for the tests (``--quick``).

    Parameters
    ----------
    here
        The figure's folder (``experiments/figN_.../``).
    quick
        The reduced grid, as :meth:`Sweep.from_dict` reads it.
    describe
        One line naming an error row of ``results.csv`` (``f"{r.model} b{r.batch}"``).
    """

    here: Path
    quick: Mapping[str, Any]
    describe: Callable[[Any], str]

    def full_sweep(self) -> Sweep:
        """The figure's grid (``sweep.toml``)."""
        return Sweep.from_toml(self.here / "sweep.toml")

    def quick_sweep(self) -> Sweep:
        """The reduced grid."""
        return Sweep.from_dict(self.quick)

    def run(self, sweep: Sweep, out: str | os.PathLike[str], *, workers: int = 2,
            progress: bool = True) -> pd.DataFrame:  # fmt: skip
        """Run the points of ``sweep`` not yet in ``out/results.csv``; return its rows."""
        return run_sweeps([sweep], out, workers=workers, progress=progress)

    def main(self, doc: str | None, argv: Sequence[str] | None = None) -> int:
        """Command line: ``run.py [--quick] [--out DIR] [--workers N]``."""
        return sweep_main(doc, self.here, self.full_sweep, self.quick_sweep, self.run, self.describe, argv)


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
    # lazy: at the top it would load matplotlib with this module
    from hetsim.experiments.plotting.charts import save_figure

    ap = argparse.ArgumentParser(description=(doc or name).splitlines()[0])
    ap.add_argument("--results", type=Path, default=here / "results.csv")
    ap.add_argument("--out", type=Path, default=here)
    args = ap.parse_args(argv)
    df = load(args.results)
    for path in save_figure(figure(df), args.out / name):
        print(f"wrote {path}")
    for key, value in headline(df).items():
        print(headline_entry(key, value))
    return 0


def headline_entry(key: str, value: Any) -> str:
    """One headline figure as printed: ``key: value``; a table (a DataFrame, a mapping of
    mappings, a list of mappings) as ``key:`` then its rows aligned under it, a flat
    mapping as ``key: a 1, b 2``, a list as ``key: a, b``.

    >>> print(headline_entry("gap", {"heft": {"median": 0.0, "max": 3.9}}))
    gap:
          median  max
    heft     0.0  3.9
    """
    import pandas as pd

    if isinstance(value, Mapping) and value and all(isinstance(v, Mapping) for v in value.values()):
        value = pd.DataFrame.from_dict(dict(value), orient="index")
    elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
        value = pd.DataFrame(value)
    if isinstance(value, pd.DataFrame):
        return f"{key}:\n" + value.to_string(index=not isinstance(value.index, pd.RangeIndex))
    if isinstance(value, Mapping):
        return f"{key}: " + ", ".join(f"{k} {v}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return f"{key}: " + ", ".join(map(str, value))
    return f"{key}: {value}"
