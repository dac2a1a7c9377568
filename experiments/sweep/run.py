"""Running points into a results folder: the driver of sweeps and figure scripts.

:func:`run_grid` runs the points of a list that ``OUT/results.csv`` does not hold
yet (on local processes, in this process or on Dask: :func:`~experiments.sweep.runners.run_many`),
appends one row per point as it finishes (:class:`~experiments.sweep.results.ResultsFile`),
logs each error's traceback in ``OUT/errors.log`` and returns the rows of the
list. :func:`run_sweep` is that for a :class:`~experiments.sweep.spec.Sweep`; the
figure scripts call it with their own points, columns and task.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hetsim.experiments.sweep.point import COLUMNS, Point, run_chunk
from hetsim.experiments.sweep.results import (
    ERRORS_LOG,
    RESULTS,
    ResultsFile,
    git_commit,
    hetsim_version,
    load_results,
)
from hetsim.experiments.sweep.runners import SweepPoint, Task, run_many
from hetsim.experiments.sweep.spec import Sweep, SweepError
from hetsim.graphs.files import atomic_write, open_own_file, refuse_link

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["pending_points", "run_grid", "run_sweep"]


def pending_points(
    sweep: Sweep, out: str | os.PathLike[str], *, retry_errors: bool = False
) -> list[Point]:
    """The points of ``sweep`` not yet in ``out/results.csv`` (errors too if retried)."""
    done = ResultsFile(Path(out) / RESULTS).status()
    keep = {"ok"} if retry_errors else {"ok", "error"}
    return [p for p in sweep.points() if done.get(p.id) not in keep]


def _describe(row: Mapping[str, Any]) -> str:
    """The parameters an errors.log entry is headed with."""
    keys = ("model", "graph", "scheduler", "platform", "plan", "cost")
    return " ".join(str(row[k]) for k in keys if row.get(k) not in (None, ""))


def run_grid(
    points: Sequence[SweepPoint],
    out: str | os.PathLike[str],
    *,
    name: str,
    columns: Sequence[str] = COLUMNS,
    task: Task = run_chunk,
    workers: int | None = None,
    client: Any = None,
    limit: int | None = None,
    retry_errors: bool = False,
    done: Sequence[str] = ("ok", "error"),
    cache_dir: str | os.PathLike[str] | None = None,
    chunksize: int = 1,
    progress: bool = True,
    mp_context: str | None = None,
) -> pd.DataFrame:
    """Run the points not yet in ``out/results.csv``; return the rows of ``points``.

    Parameters
    ----------
    points
        What to run (anything with ``id``, ``params()`` and ``graph_key()``).
    out
        Output folder: ``results.csv`` and ``errors.log``.
    name
        Recorded in the ``sweep`` column (with ``git_commit`` and ``hetsim_version``).
    columns
        The columns of ``results.csv`` (an existing file must have the same).
    task
        What runs a chunk of points (:func:`~experiments.sweep.runners.run_many`).
    workers, client, chunksize, mp_context
        As :func:`~experiments.sweep.runners.run_many`.
    limit
        Run at most this many of the pending points.
    retry_errors
        Run again the points whose row has ``status="error"`` (their old rows are
        dropped first).
    done
        The statuses that count as done (a figure adds e.g. ``"skipped"``).
    cache_dir
        The zoo's on-disk graph cache (default ``$HETSIM_CACHE``, else ``out/.cache``).
    progress
        Show a progress bar (points done / total, ETA) on stderr.

    Returns
    -------
    pandas.DataFrame
        The rows of ``points`` (earlier runs included), in their order.
    """
    if limit is not None and limit < 0:
        raise SweepError(f"limit must be >= 0, got {limit}")
    if chunksize < 1:
        raise SweepError(f"chunksize must be >= 1, got {chunksize}")
    out = Path(out)
    cache = str(Path(cache_dir or os.environ.get("HETSIM_CACHE") or out / ".cache").resolve())
    meta = {"sweep": name, "git_commit": git_commit(), "hetsim_version": hetsim_version()}
    keep = set(done) - ({"error"} if retry_errors else set())
    with ResultsFile(out / RESULTS, columns=columns) as results:
        refuse_link(out / ERRORS_LOG)  # before the points run, not at their first error
        status = results.status()
        redo = {p.id for p in points if p.id in status and status[p.id] not in keep}
        if redo:
            results.drop(redo)
        todo = [p for p in points if p.id not in status or p.id in redo]
        done_before = len(points) - len(todo)
        if limit is not None:
            todo = todo[:limit]
        errors = 0

        from tqdm.auto import tqdm

        with tqdm(total=done_before + len(todo), initial=done_before, desc=name, unit="pt",
                  disable=not progress, dynamic_ncols=True, smoothing=0.1) as bar:  # fmt: skip

            def emit(row: dict[str, Any]) -> None:
                nonlocal errors
                tb = row.pop("traceback", None)
                row.update(meta)
                results.append(row)
                if row["status"] == "error":
                    errors += 1
                    bar.set_postfix(errors=errors)
                    log = open_own_file(out / ERRORS_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT)  # no link
                    with os.fdopen(log, "a", encoding="utf-8") as fh:
                        fh.write(f"=== {row['point_id']} {_describe(row)} ({row.get('finished_at', '')})\n"
                                 f"{tb or row['error']}\n")  # fmt: skip
                bar.update(1)

            run_many(todo, emit, task=task, workers=workers, client=client, cache_dir=cache,
                     chunksize=chunksize, mp_context=mp_context)  # fmt: skip
    if errors:
        print(f"{name}: {errors} point(s) ended in error; tracebacks in {out / ERRORS_LOG}", file=sys.stderr)
    return load_results(out / RESULTS, ids=[p.id for p in points])


def run_sweep(
    sweep: Sweep,
    out: str | os.PathLike[str],
    workers: int | None = None,
    client: Any = None,
    *,
    limit: int | None = None,
    retry_errors: bool = False,
    cache_dir: str | os.PathLike[str] | None = None,
    chunksize: int = 1,
    progress: bool = True,
    parquet: bool | None = None,
    mp_context: str | None = None,
) -> pd.DataFrame:
    """Run the points of ``sweep`` not yet in ``out/results.csv``; return its rows.

    Parameters
    ----------
    sweep
        What to run (:meth:`Sweep.from_toml`).
    out
        Output folder: ``results.csv``, ``errors.log``, ``<name>.sweep.json``
        and (by default) the graph cache ``.cache/``.
    workers
        Local worker processes (``None``: every core this process may use;
        ``0``: run in this process, for debugging). Ignored with ``client``.
    client
        A :class:`dask.distributed.Client`: run the points on its cluster.
    limit, retry_errors, cache_dir, chunksize, progress, mp_context
        As :func:`run_grid`.
    parquet
        Also write ``results.parquet`` at the end (``None``: when pyarrow is installed).

    Returns
    -------
    pandas.DataFrame
        The rows of this sweep's points (earlier runs included), in :meth:`Sweep.points` order.
    """
    if parquet and importlib.util.find_spec("pyarrow") is None:
        raise SweepError("parquet=True needs pyarrow: pip install 'hetsim[parquet]' (results.csv needs nothing)")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    refuse_link(out / "results.parquet")  # before the sweep runs, not once it is done
    atomic_write(out / f"{sweep.name}.sweep.json", lambda fh: json.dump(sweep.to_dict(), fh, indent=1))
    df = run_grid(sweep.points(), out, name=sweep.name, workers=workers, client=client, limit=limit,
                  retry_errors=retry_errors, cache_dir=cache_dir, chunksize=chunksize, progress=progress,
                  mp_context=mp_context)  # fmt: skip
    if parquet or (parquet is None and importlib.util.find_spec("pyarrow") is not None):
        table = load_results(out / RESULTS)
        atomic_write(out / "results.parquet", lambda fh: table.to_parquet(fh, index=False), binary=True)
    return df
