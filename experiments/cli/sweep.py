"""``hetsim sweep``: run a TOML parameter sweep on local processes or a Dask cluster."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from hetsim.experiments.cli.common import non_negative_int, output_folder, positive_int
from hetsim.experiments.cli.main import CLIError

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.experiments.sweep import Point, Sweep


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "sweep",
        help="run a parameter sweep (TOML grid) and append one row per point to results.csv",
        description="Run the cross product of a sweep file (models, batch sizes, platforms and "
        "their overrides, schedulers, cost models, request counts). Rows are appended to "
        "OUT/results.csv as points finish; points already there are skipped, so an "
        "interrupted sweep resumes where it stopped. See experiments/examples/sweep_small.toml.",
    )
    p.add_argument("file", metavar="FILE", help="sweep TOML file")
    p.add_argument(
        "--out", type=output_folder, metavar="DIR", help="output folder (default results/<sweep name>)"
    )
    p.add_argument(
        "--workers", type=non_negative_int, metavar="N",
        help="local worker processes (default: all cores; 0: run in this process)",
    )  # fmt: skip
    p.add_argument(
        "--dask", metavar="ADDRESS",
        help="run on the Dask cluster whose scheduler is at ADDRESS (tcp://host:8786)",
    )  # fmt: skip
    p.add_argument("--limit", type=non_negative_int, metavar="N", help="run at most N of the pending points")
    p.add_argument(
        "--dry-run", action="store_true",
        help="check the sweep and print what would run, without running it",
    )  # fmt: skip
    p.add_argument(
        "--retry-errors", action="store_true", help="run again the points that ended in error"
    )
    p.add_argument(
        "--chunksize", type=positive_int, default=1, metavar="N",
        help="points per task (default 1; larger amortises task overhead on a cluster)",
    )  # fmt: skip
    p.add_argument(
        "--cache", metavar="DIR",
        help="graph cache folder (default $HETSIM_CACHE, else OUT/.cache)",
    )  # fmt: skip
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def run(args: argparse.Namespace) -> int:
    # lazy: a command's module loads only what its parser needs (hetsim --help)
    from hetsim.experiments.sweep import Sweep, SweepError, pending_points, run_sweep

    try:
        sweep = Sweep.from_toml(args.file)
    except SweepError as e:
        raise CLIError(str(e)) from None
    out = Path(args.out) if args.out else Path("results") / sweep.name
    if args.limit is not None and args.limit < 0:
        raise CLIError(f"--limit must be >= 0, got {args.limit}")
    if args.workers is not None and args.workers < 0:
        raise CLIError(f"--workers must be >= 0, got {args.workers}")
    if args.chunksize < 1:
        raise CLIError(f"--chunksize must be >= 1, got {args.chunksize}")
    if args.dry_run:
        print(f"{sweep.name}: {len(sweep)} point(s) in the grid", flush=True)  # first: listing them may take a while
        todo = pending_points(sweep, out, retry_errors=args.retry_errors)
        print(_describe(sweep, len(todo), out))
        if args.limit is not None:
            todo = todo[: args.limit]
            print(f"--limit {args.limit}: {len(todo)} would run now")
        for point in todo[:10]:
            print(f"  {point.id}  {_short(point)}")
        if len(todo) > 10:
            print(f"  ... and {len(todo) - 10} more")
        return 0
    client = None
    if args.dask:
        try:
            from distributed import Client
        except ImportError:
            raise CLIError("--dask needs dask.distributed: pip install 'hetsim[dask]'") from None
        try:
            client = Client(args.dask, timeout=15)
        except OSError as e:
            raise CLIError(f"cannot reach the Dask scheduler at {args.dask}: {e}") from None
    try:
        df = run_sweep(
            sweep, out, workers=args.workers, client=client, limit=args.limit,
            retry_errors=args.retry_errors, cache_dir=args.cache, chunksize=args.chunksize,
            progress=not args.no_progress,
        )  # fmt: skip
    except SweepError as e:
        raise CLIError(str(e)) from None
    finally:
        if client is not None:
            client.close()
    ok = int((df["status"] == "ok").sum())
    errors = len(df) - ok
    print(f"{sweep.name}: {len(df)}/{len(sweep)} points done ({ok} ok, {errors} errors); "
          f"results in {out / 'results.csv'}")  # fmt: skip
    if errors:
        print(f"errors: see the 'error' column, tracebacks in {out / 'errors.log'}")
    return 1 if errors and ok == 0 else 0


def _describe(sweep: Sweep, pending: int, out: Path) -> str:
    dims = "  ".join(f"{k}={len(v)}" for k, v in sweep.grid.items() if len(v) > 1) or "one point"
    return (
        f"sweep {sweep.name!r}: {len(sweep)} points ({dims}); "
        f"{len(sweep) - pending} already in {out / 'results.csv'}, {pending} to run"
    )


def _short(point: Point) -> str:
    # lazy: a command's module loads only what its parser needs (hetsim --help)
    from hetsim.experiments.sweep import Point

    defaults = Point(model="", platform="", scheduler="").params()
    return " ".join(f"{k}={v}" for k, v in point.params().items() if v != defaults[k])
