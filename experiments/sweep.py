"""Parameter sweeps: a TOML grid, run point by point on local processes or a Dask cluster.

A sweep file names lists of values; their cross product is run, one
:class:`~experiments.points.Point` per combination::

    name = "pcie-sensitivity"
    description = "How much does PCIe bandwidth matter?"   # optional

    [grid]                       # model, platform, scheduler are required
    model = ["googlenet", "resnet18"]
    batch = [1, 8]               # default [1]
    granularity = ["op"]         # "op" | "fused"; default ["op"]
    platform = ["xeon-p2200"]    # preset names or platform TOML paths
    scheduler = ["all-gpu", "heft", "cp-greedy"]
    cost = ["roofline"]          # cost-model specs (costmodel.from_spec): "roofline",
                                 # a profile folder, PROFILE:KIND, a saved model file
    requests = [1]               # default [1]
    interval_s = [0.0]           # request inter-arrival time; default [0.0]
    link_bandwidth = [0.25, 0.5, 1, 2, 4]   # platform override multipliers,
    gpu_peak = [1.0]                        # default [1.0] each; also cpu_peak,
                                            # gpu_bandwidth
    noise = [0.0]                # simulator noise (CV) and its seed; default
    seed = [0]                   # [0.0] and [0]

    [model_args]                 # optional zoo keyword arguments, per model
    lstm = {seq_len = 16, hidden = 256}

    [scheduler_args]             # optional hyper-parameters, per scheduler
    random = {seed = 0}

A scalar is read as a one-element list. The whole file is checked before anything
runs: unknown keys and unknown model, scheduler, platform or cost-model names raise
:class:`SweepError` listing every problem.

Results are appended to ``OUT/results.csv`` as points finish (one tidy row per
point, columns :data:`experiments.points.COLUMNS`), flushed per row and fsynced at
least every second; a re-run skips points already in the file (by point id), and
a partial last line left by a killed run is dropped. A point that raises gives a
row with ``status="error"`` and the message in ``error`` (traceback in
``OUT/errors.log``); ``retry_errors=True`` runs those points again.

Examples
--------
>>> from hetsim.experiments.sweep import Sweep, run_sweep
>>> sweep = Sweep.from_dict({"name": "demo", "grid": {
...     "model": "lstm", "platform": "xeon-p2200", "scheduler": ["all-gpu", "heft"],
...     "link_bandwidth": [0.5, 1, 2]}, "model_args": {"lstm": {"seq_len": 4, "hidden": 32}}})
>>> len(sweep.points())
6
>>> df = run_sweep(sweep, "out/demo", workers=2)  # doctest: +SKIP
"""

from __future__ import annotations

import csv
import difflib
import importlib.util
import io
import itertools
import json
import math
import os
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hetsim.experiments.points import COLUMNS, OVERRIDES, Point, make_cost, run_many

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = [
    "GRID_KEYS", "ResultsFile", "Sweep", "SweepError", "git_commit", "hetsim_version",
    "load_results", "pending_points", "run_sweep",
]  # fmt: skip

RESULTS = "results.csv"
ERRORS_LOG = "errors.log"


class SweepError(ValueError):
    """A sweep file or a results folder is not usable (the message names the problem)."""


# ------------------------------------------------------------------- format
def _is_str(v: Any) -> bool:
    return isinstance(v, str) and v != ""


def _is_int(minimum: int) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= minimum


def _is_num(positive: bool) -> Callable[[Any], bool]:
    def check(v: Any) -> bool:
        ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        return ok and (v > 0 if positive else v >= 0)

    return check


#: grid key -> (default values or None when required, check, what a value must be);
#: the order is the nesting order of the cross product (model outermost)
GRID_KEYS: dict[str, tuple[list[Any] | None, Callable[[Any], bool], str]] = {
    "model": (None, _is_str, "a zoo model name or graph JSON path"),
    "batch": ([1], _is_int(1), "an int >= 1"),
    "granularity": (["op"], lambda v: v in ("op", "fused"), "'op' or 'fused'"),
    "platform": (None, _is_str, "a platform preset name or TOML path"),
    **{k: ([1.0], _is_num(True), "a positive multiplier") for k in OVERRIDES},
    "cost": (["roofline"], _is_str, "a cost-model spec ('roofline', a profile folder...)"),
    "scheduler": (None, _is_str, "a scheduler name"),
    "requests": ([1], _is_int(1), "an int >= 1"),
    "interval_s": ([0.0], _is_num(False), "a number >= 0"),
    "noise": ([0.0], _is_num(False), "a number >= 0"),
    "seed": ([0], _is_int(0), "an int >= 0"),
}
_TOP_KEYS = ("name", "description", "grid", "model_args", "scheduler_args")


def _suggest(name: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _unknown(where: str, keys: Iterable[str], allowed: Iterable[str]) -> list[str]:
    allowed = list(allowed)
    out = []
    for k in keys:
        if k not in allowed:
            out.append(f"{where}: unknown key {k!r}{_suggest(k, allowed)}; allowed: {allowed}")
    return out


@dataclass
class Sweep:
    """A named grid of parameters whose cross product is run.

    Build it with :meth:`from_toml` or :meth:`from_dict` (both check everything,
    names included, and raise :class:`SweepError` listing every problem).

    Attributes
    ----------
    name
        Recorded in the ``sweep`` column of every row.
    grid
        Grid key -> list of values, every key of :data:`GRID_KEYS` present
        (defaults filled in).
    model_args, scheduler_args
        Model name -> zoo keyword arguments; scheduler name -> hyper-parameters.
    """

    name: str
    grid: dict[str, list[Any]]
    model_args: dict[str, dict[str, Any]] = field(default_factory=dict)
    scheduler_args: dict[str, dict[str, Any]] = field(default_factory=dict)
    description: str = ""
    source: str = "<dict>"

    # --------------------------------------------------------------- loading
    @classmethod
    def from_toml(cls, path: str | os.PathLike[str]) -> Sweep:
        """Read and check a sweep file (format in the module docstring)."""
        path = Path(path)
        try:
            with path.open("rb") as fh:
                data = tomllib.load(fh)
        except FileNotFoundError:
            raise SweepError(f"{path}: no such sweep file") from None
        except tomllib.TOMLDecodeError as e:
            raise SweepError(f"{path}: malformed TOML ({e})") from None
        except UnicodeDecodeError as e:
            raise SweepError(f"{path}: not UTF-8 text (byte {e.object[e.start]:#04x} at offset {e.start})") from None
        except IsADirectoryError:
            raise SweepError(f"{path}: is a folder, not a sweep TOML file") from None
        data.setdefault("name", path.stem)
        return cls.from_dict(data, source=str(path))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "<dict>") -> Sweep:
        """Build from the TOML structure, checking keys, values and names."""
        problems = _unknown("top level", data, _TOP_KEYS)
        grid_in = data.get("grid")
        if not isinstance(grid_in, Mapping):
            problems.append("needs a [grid] table")
            grid_in = {}
        problems += _unknown("[grid]", grid_in, GRID_KEYS)
        grid: dict[str, list[Any]] = {}
        for key, (default, check, what) in GRID_KEYS.items():
            if key not in grid_in:
                if default is None:
                    problems.append(f"[grid]: {key!r} is required ({what})")
                grid[key] = list(default or [])
                continue
            raw = grid_in[key]
            values = list(raw) if isinstance(raw, list | tuple) else [raw]
            if not values:
                problems.append(f"[grid]: {key!r} is an empty list")
            bad = [v for v in values if not check(v)]
            if bad:
                problems.append(f"[grid]: {key!r} values {bad} are not {what}")
            grid[key] = list(dict.fromkeys(v for v in values if check(v)))  # unique, in order
        tables: dict[str, dict[str, dict[str, Any]]] = {}
        for table, column in (("model_args", "model"), ("scheduler_args", "scheduler")):
            raw = data.get(table, {})
            if not isinstance(raw, Mapping) or not all(
                isinstance(v, Mapping) for v in raw.values()
            ):
                problems.append(f"[{table}] must map each {column} name to a table of arguments")
                raw = {}
            for k in raw:
                if k not in grid[column]:
                    problems.append(f"[{table}]: {k!r} is not in grid.{column} {grid[column]}")
            tables[table] = {k: dict(v) for k, v in raw.items()}
        name = data.get("name", "sweep")
        if not _is_str(name):
            problems.append(f"'name' must be a non-empty string, got {name!r}")
        sweep = cls(
            name=str(name),
            grid=grid,
            model_args=tables["model_args"],
            scheduler_args=tables["scheduler_args"],
            description=str(data.get("description", "")),
            source=source,
        )
        problems += sweep._name_problems()
        if problems:
            raise SweepError(_report(source, problems))
        return sweep

    def check_names(self) -> None:
        """Check that every model, platform, scheduler and cost model exists.

        Raises
        ------
        SweepError
            listing every unknown name or bad argument.
        """
        problems = self._name_problems()
        if problems:
            raise SweepError(_report(self.source, problems))

    def _name_problems(self) -> list[str]:
        from hetsim import schedulers
        from hetsim.graphs import zoo
        from hetsim.graphs.graph import GraphError
        from hetsim.sim.platform import PlatformError

        problems = []
        known_models = zoo.names()
        for m in self.grid["model"]:
            if m.endswith(".json"):
                if not Path(m).is_file():
                    problems.append(f"model {m!r}: no such graph file")
            elif m not in known_models:
                problems.append(f"unknown model {m!r}{_suggest(m, known_models)}; known: {known_models}")
            elif self.model_args.get(m):
                try:
                    zoo.params(m, **self.model_args[m])
                except (GraphError, TypeError, ValueError) as e:
                    problems.append(f"[model_args] {m!r}: {e}")
        for p in self.grid["platform"]:
            try:
                _platform(p)
            except (PlatformError, OSError) as e:
                problems.append(f"platform {p!r}: {e}")
        for s in self.grid["scheduler"]:
            if s not in schedulers.names():
                known = schedulers.names()
                problems.append(f"unknown scheduler {s!r}{_suggest(s, known)}; known: {known}")
                continue
            try:
                schedulers.get(s, **self.scheduler_args.get(s, {}))
            except schedulers.SchedulerError as e:
                problems.append(str(e))
        for c in self.grid["cost"]:
            try:
                make_cost(c)
            except Exception as e:  # noqa: BLE001 - any failure to build it is a bad name
                problems.append(f"cost model {c!r}: {type(e).__name__}: {e}")
        return problems

    def to_dict(self) -> dict[str, Any]:
        """The TOML structure (defaults filled in); :meth:`from_dict` reads it back."""
        return {
            "name": self.name,
            "description": self.description,
            "grid": {k: list(v) for k, v in self.grid.items()},
            "model_args": self.model_args,
            "scheduler_args": self.scheduler_args,
        }

    # ---------------------------------------------------------------- points
    def points(self) -> list[Point]:
        """The cross product of the grid, model outermost (graph-major order)."""
        keys = list(GRID_KEYS)
        out = []
        for combo in itertools.product(*(self.grid[k] for k in keys)):
            p = dict(zip(keys, combo))
            p["model_args"] = self.model_args.get(p["model"], {})
            p["scheduler_args"] = self.scheduler_args.get(p["scheduler"], {})
            out.append(Point(**p))
        return out

    def __len__(self) -> int:
        return math.prod(len(v) for v in self.grid.values())


def _platform(name: str) -> Any:
    from hetsim.sim.platform import Platform

    return Platform.load(name)


def _report(source: str, problems: list[str]) -> str:
    if len(problems) == 1:
        return f"{source}: {problems[0]}"
    return f"{source}: {len(problems)} problems:\n" + "\n".join(f"  - {p}" for p in problems)


# ------------------------------------------------------------------ results
def _cell(v: Any) -> Any:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    return v


class ResultsFile:
    """``results.csv``: append-only, crash-safe, one row per point.

    Opening it (as a context manager) takes an exclusive lock on the folder,
    drops a partial last line left by a killed writer and checks the header;
    :meth:`append` writes one row, flushes it to the OS and fsyncs at least every
    ``fsync_s`` seconds (and on close).
    """

    def __init__(self, path: str | os.PathLike[str], *, fsync_s: float = 1.0) -> None:
        self.path = Path(path)
        self.fsync_s = fsync_s
        self._fh: Any = None
        self._lock: Any = None
        self._last_sync = 0.0

    def __enter__(self) -> ResultsFile:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = open(self.path.parent / ".sweep.lock", "a")  # noqa: SIM115
        try:  # a POSIX lock: forked workers do not inherit it, and it dies with this process
            import fcntl

            fcntl.lockf(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except ImportError:  # pragma: no cover - Windows
            pass
        except (BlockingIOError, PermissionError):
            self._lock.close()
            raise SweepError(f"{self.path.parent}: another sweep is writing there") from None
        self.recover()
        self._fh = open(self.path, "a", newline="", encoding="utf-8")  # noqa: SIM115
        if self._fh.tell() == 0:
            self._fh.write(",".join(COLUMNS) + "\n")
            self._sync(force=True)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fh is not None:
            self._sync(force=True)
            self._fh.close()
            self._fh = None
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def recover(self) -> int:
        """Drop a partial trailing line; check the header. Returns the bytes dropped."""
        if not self.path.exists():
            return 0
        data = self.path.read_bytes()
        keep = data.rfind(b"\n") + 1
        if keep < len(data):
            with open(self.path, "r+b") as fh:
                fh.truncate(keep)
                os.fsync(fh.fileno())
            print(
                f"{self.path}: dropped a partial last line ({len(data) - keep} bytes) "
                "left by an interrupted run",
                file=sys.stderr,
            )
        if keep:
            header = data[: data.find(b"\n")].decode("utf-8", "replace").strip()
            if header != ",".join(COLUMNS):
                raise SweepError(
                    f"{self.path}: written with other columns (another hetsim version?); "
                    "use another output folder"
                )
        return len(data) - keep

    def append(self, row: Mapping[str, Any]) -> None:
        """Write one row (columns :data:`COLUMNS`; missing ones empty) and flush it."""
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerow([_cell(row.get(c)) for c in COLUMNS])
        self._fh.write(buf.getvalue())
        self._sync()

    def _sync(self, force: bool = False) -> None:
        self._fh.flush()
        now = time.monotonic()
        if force or now - self._last_sync >= self.fsync_s:
            os.fsync(self._fh.fileno())
            self._last_sync = now

    def status(self) -> dict[str, str]:
        """point id -> status of the rows in the file (the last row wins)."""
        if not self.path.exists():
            return {}
        out = {}
        with open(self.path, newline="", encoding="utf-8") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if header is None:
                return {}
            i_id, i_status = header.index("point_id"), header.index("status")
            for rec in reader:
                if len(rec) == len(header):
                    out[rec[i_id]] = rec[i_status]
        return out

    def drop(self, point_ids: set[str]) -> None:
        """Rewrite the file without the rows of ``point_ids`` (atomically)."""
        if self._fh is not None:
            self._sync(force=True)
            self._fh.close()
        tmp = self.path.with_suffix(".csv.tmp")
        with open(self.path, newline="", encoding="utf-8") as src, \
                open(tmp, "w", newline="", encoding="utf-8") as dst:  # fmt: skip
            header = src.readline()
            dst.write(header)
            i_id = header.strip().split(",").index("point_id")
            for line in src:
                rec = next(csv.reader([line]), [])
                if len(rec) > i_id and rec[i_id] not in point_ids:
                    dst.write(line)
            dst.flush()
            os.fsync(dst.fileno())
        os.replace(tmp, self.path)
        if self._fh is not None:
            self._fh = open(self.path, "a", newline="", encoding="utf-8")  # noqa: SIM115


def load_results(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read a results table: ``results.csv``/``.parquet`` or the folder holding it.

    Malformed lines (a crash mid-write) are skipped; ``error`` is "" for ok rows.
    """
    import pandas as pd

    path = Path(path)
    if path.is_dir():
        path = path / RESULTS
    if not path.exists():
        raise FileNotFoundError(f"{path}: no results file")
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    df = pd.read_csv(
        path,
        on_bad_lines="skip",
        dtype={"point_id": str, "model_args": str, "scheduler_args": str, "error": str},
        keep_default_na=False,
        na_values=[""],
    )
    for col in ("error", "model_args", "scheduler_args"):
        if col in df:
            df[col] = df[col].fillna("")
    return df


def git_commit() -> str:
    """``git rev-parse HEAD`` of the hetsim checkout, or ``"unknown"``."""
    root = Path(__file__).resolve().parents[1]
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def hetsim_version() -> str:
    """The installed hetsim version, or ``"unknown"``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("hetsim")
    except PackageNotFoundError:
        return "unknown"


# ---------------------------------------------------------------- execution
def pending_points(
    sweep: Sweep, out: str | os.PathLike[str], *, retry_errors: bool = False
) -> list[Point]:
    """The points of ``sweep`` not yet in ``out/results.csv`` (errors too if retried)."""
    done = ResultsFile(Path(out) / RESULTS).status()
    keep = {"ok"} if retry_errors else {"ok", "error"}
    return [p for p in sweep.points() if done.get(p.id) not in keep]


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
    limit
        Run at most this many of the pending points.
    retry_errors
        Run again the points whose row has ``status="error"`` (their old rows are
        dropped first).
    cache_dir
        The zoo's on-disk graph cache (default ``$HETSIM_CACHE``, else ``out/.cache``);
        with a Dask cluster it must be a path the workers can use (or they import
        the models themselves).
    chunksize
        Points per task (same graph); more amortises task overhead on a cluster.
    progress
        Show a progress bar (points done / total, ETA) on stderr.
    parquet
        Also write ``results.parquet`` at the end (``None``: when pyarrow is installed).
    mp_context
        Start method of the local processes (default ``fork`` on Linux, else ``spawn``).

    Returns
    -------
    pandas.DataFrame
        The rows of this sweep's points (earlier runs included), in :meth:`Sweep.points` order.
    """
    if limit is not None and limit < 0:
        raise SweepError(f"limit must be >= 0, got {limit}")
    if chunksize < 1:
        raise SweepError(f"chunksize must be >= 1, got {chunksize}")
    if parquet and importlib.util.find_spec("pyarrow") is None:
        raise SweepError("parquet=True needs pyarrow: pip install 'hetsim[parquet]' (results.csv needs nothing)")
    out = Path(out)
    cache = str(Path(cache_dir or os.environ.get("HETSIM_CACHE") or out / ".cache").resolve())
    points = sweep.points()
    meta = {"sweep": sweep.name, "git_commit": git_commit(), "hetsim_version": hetsim_version()}
    with ResultsFile(out / RESULTS) as results:
        status = results.status()
        if retry_errors:
            ids = {p.id for p in points if status.get(p.id) == "error"}
            if ids:
                results.drop(ids)
                status = {k: v for k, v in status.items() if k not in ids}
        todo = [p for p in points if p.id not in status]
        done_before = len(points) - len(todo)
        if limit is not None:
            todo = todo[:limit]
        (out / f"{sweep.name}.sweep.json").write_text(json.dumps(sweep.to_dict(), indent=1))
        errors = 0

        from tqdm.auto import tqdm

        total = done_before + len(todo)
        with tqdm(total=total, initial=done_before, desc=sweep.name, unit="pt", disable=not progress,
                  dynamic_ncols=True, smoothing=0.1) as bar:  # fmt: skip

            def emit(row: dict[str, Any]) -> None:
                nonlocal errors
                tb = row.pop("traceback", None)
                row.update(meta)
                results.append(row)
                if row["status"] != "ok":
                    errors += 1
                    bar.set_postfix(errors=errors)
                    with open(out / ERRORS_LOG, "a", encoding="utf-8") as fh:
                        fh.write(
                            f"=== {row['point_id']} {row['model']} {row['scheduler']} "
                            f"{row['platform']} ({row['finished_at']})\n{tb or row['error']}\n"
                        )
                bar.update(1)

            run_many(todo, emit, workers=workers, client=client, cache_dir=cache,
                     chunksize=chunksize, mp_context=mp_context)  # fmt: skip
    df = load_results(out / RESULTS)
    if parquet or (parquet is None and importlib.util.find_spec("pyarrow") is not None):
        tmp = out / ".results.parquet.tmp"
        df.to_parquet(tmp, index=False)
        os.replace(tmp, out / "results.parquet")
    order = {p.id: i for i, p in enumerate(points)}
    df = df[df["point_id"].isin(order)]
    return df.sort_values("point_id", key=lambda s: s.map(order)).reset_index(drop=True)
