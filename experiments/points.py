"""One point of a sweep: load the graph, build the platform, plan, simulate, return a row.

This module is what sweep workers (local processes or Dask workers) import and
run; it keeps no state beyond three small, bounded LRU caches (graphs, cost
models, platforms), so that a worker that runs many points of one model imports
and compiles that model once, and a long sweep cannot grow its memory.

A row is a flat dict with the columns of :data:`COLUMNS`: the point's parameters,
its metrics, and bookkeeping (``status``, ``error``, ``point_id``...).

Examples
--------
>>> from hetsim.experiments.points import Point, run_point
>>> p = Point(model="lstm", platform="xeon-p2200", scheduler="heft",
...           model_args={"seq_len": 4, "hidden": 32})
>>> len(p.id)
16
>>> row = run_point(p)  # doctest: +SKIP
>>> row["status"], row["makespan_s"] > 0  # doctest: +SKIP
('ok', True)
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import dataclasses
import functools
import hashlib
import itertools
import json
import math
import multiprocessing
import os
import socket
import statistics
import sys
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.graphs.graph import Graph
    from hetsim.sim.platform import Platform
    from hetsim.sim.result import SimResult

__all__ = [
    "COLUMNS", "GRAPH_CACHE_SIZE", "METRIC_COLUMNS", "OVERRIDES", "PARAM_COLUMNS", "Point",
    "clear_caches", "load_graph", "make_cost", "make_platform", "metrics", "run_many", "run_point",
    "run_points", "simulate_point",
]  # fmt: skip

#: platform override multipliers, as named by :meth:`sim.platform.Platform.scaled`
OVERRIDES: tuple[str, ...] = ("link_bandwidth", "gpu_peak", "cpu_peak", "gpu_bandwidth")

#: how many imported graphs one process keeps (graphs of a few MB each)
GRAPH_CACHE_SIZE = 8

#: parameter columns, in :class:`Point` field order
PARAM_COLUMNS: tuple[str, ...] = (
    "model", "batch", "granularity", "model_args", "platform", *OVERRIDES, "cost",
    "scheduler", "scheduler_args", "requests", "interval_s", "noise", "seed",
)  # fmt: skip

#: measured columns (SI units: seconds, bytes, fractions); NaN where not applicable
METRIC_COLUMNS: tuple[str, ...] = (
    "nodes", "makespan_s", "latency_mean_s", "latency_p50_s", "latency_p99_s",
    "throughput_per_s", "cpu_util", "gpu_util", "link_util", "dispatch_util", "bytes_moved",
    "peak_memory_cpu_bytes", "peak_memory_gpu_bytes", "graph_time_s", "sched_time_s",
    "sim_time_s",
)  # fmt: skip

#: every column of a results row, in file order
COLUMNS: tuple[str, ...] = (
    "point_id", "sweep", "status", *PARAM_COLUMNS, *METRIC_COLUMNS, "error", "git_commit",
    "hetsim_version", "worker", "finished_at",
)  # fmt: skip


@dataclass(frozen=True)
class Point:
    """The parameters of one simulation: what :func:`run_point` runs.

    Parameters
    ----------
    model
        A zoo model name (:func:`graphs.zoo.names`) or a graph JSON file.
    batch, granularity, model_args
        Passed to :func:`graphs.zoo.load` (ignored for a graph JSON file).
    platform
        Preset name or platform TOML path.
    link_bandwidth, gpu_peak, cpu_peak, gpu_bandwidth
        Multipliers for :meth:`sim.platform.Platform.scaled`.
    cost
        A cost-model spec: ``"roofline"``, a profile folder... (:func:`make_cost`).
    scheduler, scheduler_args
        Registry name and keyword hyper-parameters (:func:`schedulers.get`).
    requests, interval_s, noise, seed
        Passed to :func:`sim.simulate`.
    """

    model: str
    platform: str
    scheduler: str
    batch: int = 1
    granularity: str = "op"
    model_args: Mapping[str, Any] = field(default_factory=dict)
    link_bandwidth: float = 1.0
    gpu_peak: float = 1.0
    cpu_peak: float = 1.0
    gpu_bandwidth: float = 1.0
    cost: str = "roofline"
    scheduler_args: Mapping[str, Any] = field(default_factory=dict)
    requests: int = 1
    interval_s: float = 0.0
    noise: float = 0.0
    seed: int = 0

    def params(self) -> dict[str, Any]:
        """The parameter columns of the row (``*_args`` as canonical JSON strings)."""
        out = {}
        for name in PARAM_COLUMNS:
            value = getattr(self, name)
            if name in ("model_args", "scheduler_args"):
                value = _canonical(value)
            elif name in OVERRIDES or name in ("interval_s", "noise"):
                value = float(value)
            out[name] = value
        return out

    @property
    def id(self) -> str:
        """Stable hash of the parameters (16 hex digits): same parameters, same id."""
        text = json.dumps(self.params(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def graph_key(self) -> tuple[str, int, str, str]:
        """What identifies the imported graph: (model, batch, granularity, model_args)."""
        return (self.model, int(self.batch), self.granularity, _canonical(self.model_args))

    def replace(self, **changes: Any) -> Point:
        """A copy with some parameters changed."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Point:
        """The point of a results row (a dict or a DataFrame row)."""
        kw = {}
        for f in dataclasses.fields(cls):
            v = row[f.name]
            if f.name.endswith("_args"):
                v = json.loads(v) if isinstance(v, str) and v else dict(v or {})
            elif f.name in ("batch", "requests", "seed"):
                v = int(v)
            elif f.type == "float":
                v = float(v)
            kw[f.name] = v if not hasattr(v, "item") else v.item()
        return cls(**kw)


def _canonical(args: Mapping[str, Any]) -> str:
    return json.dumps(dict(args), sort_keys=True, separators=(",", ":"))


# ----------------------------------------------------------------- caches
def _is_graph_file(model: str) -> bool:
    return model.endswith(".json")


@contextmanager
def _file_lock(directory: Path, key: str) -> Iterator[None]:
    """Exclusive lock on ``directory/.locks/key`` (no-op where ``fcntl`` is missing).

    Two workers that need the same uncached model at once: one imports it, the
    other waits and then reads the zoo's on-disk cache instead of importing again.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    locks = directory / ".locks"
    locks.mkdir(parents=True, exist_ok=True)
    with open(locks / key, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@functools.lru_cache(maxsize=GRAPH_CACHE_SIZE)
def _load_graph_cached(
    model: str, batch: int, granularity: str, args_json: str, cache_dir: str | None
) -> Graph:
    if _is_graph_file(model):
        from hetsim.graphs.graph import load

        return load(model)
    from hetsim.graphs import zoo

    kwargs = json.loads(args_json)
    directory = None if cache_dir is None else Path(cache_dir)
    if directory is not None:
        try:  # a Dask worker on another machine may not be able to create it
            directory.mkdir(parents=True, exist_ok=True)
        except OSError:
            directory = None
    if directory is None:
        return zoo.load(model, batch=batch, granularity=granularity, **kwargs)
    key = hashlib.sha256(f"{model}|{batch}|{granularity}|{args_json}".encode()).hexdigest()[:16]
    with _file_lock(directory, key):
        return zoo.load(model, batch=batch, granularity=granularity, cache=directory, **kwargs)


def load_graph(
    model: str,
    *,
    batch: int = 1,
    granularity: str = "op",
    model_args: Mapping[str, Any] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
) -> Graph:
    """The graph of a zoo model (or graph JSON file), cached in this process.

    Up to :data:`GRAPH_CACHE_SIZE` graphs are kept (least recently used dropped).
    With ``cache_dir`` the zoo's on-disk cache is used as well, under a file lock,
    so that the processes of one machine import each model once.
    Callers must not mutate the returned graph (it is shared between points).
    """
    args_json = _canonical(model_args or {})
    cache = None if cache_dir is None else str(Path(cache_dir).resolve())
    return _load_graph_cached(model, int(batch), granularity, args_json, cache)


@functools.lru_cache(maxsize=4)
def make_cost(spec: str) -> Any:
    """The cost model of a ``--cost`` spec (:func:`costmodel.from_spec`), cached.

    ``"roofline"``, a profile folder, ``PROFILE:KIND`` or a saved model file. At
    most 4 per process are kept: a learned model is fitted once per worker.
    """
    from hetsim.costmodel import from_spec

    return from_spec(spec)


@functools.lru_cache(maxsize=32)
def make_platform(
    name: str,
    link_bandwidth: float = 1.0,
    gpu_peak: float = 1.0,
    cpu_peak: float = 1.0,
    gpu_bandwidth: float = 1.0,
) -> Platform:
    """A preset or TOML platform with the override multipliers applied (cached)."""
    from hetsim.sim.platform import Platform

    base = Platform.load(name)
    scale = dict(link_bandwidth=link_bandwidth, gpu_peak=gpu_peak, cpu_peak=cpu_peak,
                 gpu_bandwidth=gpu_bandwidth)  # fmt: skip
    if all(float(v) == 1.0 for v in scale.values()):
        return base
    return base.scaled(**{k: float(v) for k, v in scale.items()})


def clear_caches() -> None:
    """Empty the per-process graph, cost-model and platform caches."""
    _load_graph_cached.cache_clear()
    make_cost.cache_clear()
    make_platform.cache_clear()


# -------------------------------------------------------------------- run
def _worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else math.nan


def _quantile(values: list[float], q: float) -> float:
    """Nearest-rank quantile (the value of a request that happened)."""
    if not values:
        return math.nan
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def metrics(result: SimResult, platform: Platform) -> dict[str, Any]:
    """The metric columns of a row from a :class:`sim.result.SimResult`.

    ``cpu_util``/``gpu_util``: mean utilisation over the devices of that kind;
    ``link_util``: mean over link directions; NaN where the platform has none.
    ``peak_memory_*_bytes``: the largest peak over the devices of that kind.
    """
    kinds = {d.name: d.kind for d in platform.devices}
    util: dict[str, list[float]] = {"cpu": [], "gpu": []}
    peak: dict[str, list[int]] = {"cpu": [], "gpu": []}
    for dev, u in result.device_utilisation.items():
        util.setdefault(kinds.get(dev, "other"), []).append(u)
    for dev, m in result.peak_memory.items():
        peak.setdefault(kinds.get(dev, "other"), []).append(m)
    lat = list(result.latencies)
    makespan = result.makespan
    return {
        "makespan_s": makespan,
        "latency_mean_s": _mean(lat),
        "latency_p50_s": _quantile(lat, 0.5),
        "latency_p99_s": _quantile(lat, 0.99),
        "throughput_per_s": result.throughput,
        "cpu_util": _mean(util["cpu"]),
        "gpu_util": _mean(util["gpu"]),
        "link_util": _mean(list(result.link_utilisation.values())),
        "dispatch_util": result.dispatch_busy / makespan if makespan > 0 else math.nan,
        "bytes_moved": int(sum(result.bytes_moved.values())),
        "peak_memory_cpu_bytes": max(peak["cpu"]) if peak["cpu"] else math.nan,
        "peak_memory_gpu_bytes": max(peak["gpu"]) if peak["gpu"] else math.nan,
    }


def simulate_point(
    point: Point, *, cache_dir: str | os.PathLike[str] | None = None, record: bool = False
) -> tuple[SimResult, dict[str, Any]]:
    """Simulate one point: graph, platform, cost model, scheduler, plan, simulation.

    Raises whatever goes wrong (:func:`run_point` turns it into an error row).
    ``record=True`` keeps the simulation records, e.g. to draw the point's Gantt
    chart (:func:`experiments.plots.gantt`).

    Returns
    -------
    (SimResult, dict)
        The result and the metric columns of its row (:func:`metrics` plus
        ``nodes`` and the ``*_time_s`` timings).
    """
    from hetsim import schedulers
    from hetsim.sim import simulate

    t0 = time.perf_counter()
    graph = load_graph(point.model, batch=point.batch, granularity=point.granularity,
                       model_args=point.model_args, cache_dir=cache_dir)  # fmt: skip
    platform = make_platform(
        point.platform, point.link_bandwidth, point.gpu_peak, point.cpu_peak, point.gpu_bandwidth
    )
    cost = make_cost(point.cost)
    t1 = time.perf_counter()
    scheduler = schedulers.get(point.scheduler, **dict(point.scheduler_args))
    if hasattr(scheduler, "applies_to") and not scheduler.applies_to(graph, platform):
        why = scheduler.why_not(graph, platform) if hasattr(scheduler, "why_not") else None
        raise schedulers.SchedulerError(
            why or f"{point.scheduler} does not apply to {point.model} on {point.platform}"
        )
    if hasattr(scheduler, "transform"):  # e.g. tensor-split: schedule the rewritten graph
        graph = scheduler.transform(graph, platform, cost)
    plan = scheduler.schedule(graph, platform, cost)
    t2 = time.perf_counter()
    result = simulate(graph, platform, plan, cost, requests=point.requests,
                      interval_s=point.interval_s, seed=point.seed, noise=point.noise,
                      record=record)  # fmt: skip
    t3 = time.perf_counter()
    row = metrics(result, platform)
    row.update(nodes=graph.number_of_nodes(), graph_time_s=t1 - t0, sched_time_s=t2 - t1,
               sim_time_s=t3 - t2)  # fmt: skip
    return result, row


def _one_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return " | ".join(line.strip() for line in text.splitlines() if line.strip())


def run_point(point: Point, *, cache_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Run one point; never raises for an error inside the point.

    Parameters
    ----------
    point
        What to simulate.
    cache_dir
        The zoo's on-disk graph cache (``None``: ``$HETSIM_CACHE`` if set).

    Returns
    -------
    dict
        A row with every column of :data:`COLUMNS` except the ones the sweep
        driver fills in (``sweep``, ``git_commit``, ``hetsim_version``: None here).
        ``status`` is ``"ok"``, or ``"error"`` with ``error`` holding the exception
        on one line and the metrics NaN; the full traceback is under the extra
        key ``"traceback"`` (not a column).
    """
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(point.params())
    row.update(dict.fromkeys(METRIC_COLUMNS, math.nan))
    row["point_id"] = point.id
    try:
        row.update(simulate_point(point, cache_dir=cache_dir)[1])
        row["status"] = "ok"
        row["error"] = ""
    except Exception as e:  # noqa: BLE001 - one bad point must not stop a sweep
        row["status"] = "error"
        row["error"] = _one_line(e)
        row["traceback"] = traceback.format_exc()
    row["worker"] = _worker_name()
    row["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    return row


def run_points(
    points: list[Point], *, cache_dir: str | os.PathLike[str] | None = None
) -> list[dict[str, Any]]:
    """:func:`run_point` over several points (one task of a chunked sweep)."""
    return [run_point(p, cache_dir=cache_dir) for p in points]


# ------------------------------------------------------------- executors
def _chunks(points: list[Point], size: int) -> list[list[Point]]:
    """Chunks of consecutive points of one graph; the first chunk of every graph
    comes first, so that workers import different models in parallel."""
    groups: dict[tuple, list[Point]] = {}
    for p in points:
        groups.setdefault(p.graph_key(), []).append(p)
    per_graph = [[g[i : i + size] for i in range(0, len(g), size)] for g in groups.values()]
    return [c[0] for c in per_graph] + [ch for c in per_graph for ch in c[1:]]


def _default_workers() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return os.cpu_count() or 1


def run_many(
    points: list[Point],
    emit: Callable[[dict[str, Any]], None],
    *,
    workers: int | None = None,
    client: Any = None,
    cache_dir: str | os.PathLike[str] | None = None,
    chunksize: int = 1,
    mp_context: str | None = None,
) -> None:
    """Run ``points`` and call ``emit(row)`` in this process as each one finishes.

    Parameters
    ----------
    points
        What to run. Tasks are chunks of up to ``chunksize`` consecutive points of
        one graph; the first task of every graph goes first, so that workers
        import different models in parallel and then reuse their cached graphs.
    emit
        Called with every row (:func:`run_point`), in completion order.
    workers
        Local worker processes (``None``: every core this process may use; ``0``:
        run in this process). Ignored when ``client`` is given.
    client
        A :class:`dask.distributed.Client`: run the tasks on its cluster.
    cache_dir
        The zoo's on-disk graph cache, passed to every worker.
    chunksize
        Points per task.
    mp_context
        Start method of local processes (default ``fork`` on Linux, else ``spawn``;
        with ``spawn`` workers re-import hetsim and see only registered schedulers
        that their imports register).
    """
    if chunksize < 1:
        raise ValueError(f"chunksize must be >= 1, got {chunksize}")
    chunks = _chunks(points, chunksize)
    cache = None if cache_dir is None else str(cache_dir)
    if client is not None:
        _run_dask(chunks, cache, emit, client)
    elif workers == 0 or not chunks:
        _run_inline(chunks, cache, emit)
    else:
        n = min(workers or _default_workers(), len(chunks))
        _run_pool(chunks, cache, emit, n, mp_context)


def _run_inline(chunks: list[list[Point]], cache_dir: str | None, emit: Callable) -> None:
    for chunk in chunks:
        for row in run_points(chunk, cache_dir=cache_dir):
            emit(row)


def _crash_rows(chunk: list[Point], why: str) -> Iterator[dict[str, Any]]:
    for p in chunk:
        row = dict.fromkeys(COLUMNS)
        row.update(p.params(), point_id=p.id, status="error", error=why)
        yield row


def _run_pool(
    chunks: list[list[Point]],
    cache_dir: str | None,
    emit: Callable,
    workers: int,
    mp_context: str | None,
) -> None:
    """Local processes, at most ``2 * workers`` tasks in flight.

    A worker that dies (segfault, OOM kill) breaks the pool. The tasks that were
    running then are suspects: each of their points is run again alone, in a pool
    of one (a point that kills that one too gets an error row); the other tasks
    go back to the queue of a fresh pool. Finished rows are never lost.
    """
    if mp_context is None:
        mp_context = "fork" if sys.platform.startswith("linux") else "spawn"
    ctx = multiprocessing.get_context(mp_context)
    queue = collections.deque(chunks)
    suspects: collections.deque[list[Point]] = collections.deque()
    while queue or suspects:
        if suspects:
            for chunk in _pool_pass(suspects, 1, ctx, cache_dir, emit, window=1):
                for row in _crash_rows(chunk, "worker process died while running this point"):
                    emit(row)
            continue
        for chunk in _pool_pass(queue, workers, ctx, cache_dir, emit):
            suspects.extend([p] for p in chunk)
        if suspects:
            print(f"sweep: a worker process died; running {len(suspects)} suspect point(s) alone",
                  file=sys.stderr)  # fmt: skip


def _pool_pass(
    queue: collections.deque[list[Point]],
    workers: int,
    ctx: Any,
    cache_dir: str | None,
    emit: Callable,
    window: int | None = None,
) -> list[list[Point]]:
    """Run tasks from ``queue`` on one pool until it is empty or the pool breaks.

    Returns the tasks running when the pool broke (all unfinished ones if none was
    seen running); the other unfinished tasks are put back at the queue's front.
    """
    window = window or 2 * workers
    pending: dict[cf.Future, list[Point]] = {}
    broken: list[tuple[list[Point], bool]] = []
    with cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        try:
            while (queue and not broken) or pending:
                while queue and len(pending) < window and not broken:
                    chunk = queue.popleft()
                    try:
                        pending[pool.submit(run_points, chunk, cache_dir=cache_dir)] = chunk
                    except cf.process.BrokenProcessPool:
                        queue.appendleft(chunk)
                        broken.append(([], False))
                running = {f for f in pending if f.running()}
                done, _ = cf.wait(pending, timeout=0.5, return_when=cf.FIRST_COMPLETED)
                running |= {f for f in pending if f.running()}
                for fut in done:
                    chunk = pending.pop(fut)
                    try:
                        rows = fut.result()
                    except cf.process.BrokenProcessPool:
                        broken.append((chunk, fut in running))
                        continue
                    for row in rows:
                        emit(row)
        except BaseException:
            for fut in pending:
                fut.cancel()
            raise
    broken = [(c, r) for c, r in broken if c]
    suspect = [c for c, r in broken if r] or [c for c, _ in broken]
    queue.extendleft(reversed([c for c, _ in broken if c not in suspect]))
    return suspect


def _run_dask(
    chunks: list[list[Point]], cache_dir: str | None, emit: Callable, client: Any
) -> None:
    from distributed import as_completed

    threads = sum(client.nthreads().values()) or 1
    window = max(8, 4 * threads)  # cover the round trip to the scheduler
    queue = iter(chunks)
    futures = {}

    def submit(n: int) -> list[Any]:
        new = []
        for chunk in itertools.islice(queue, n):
            key = f"hetsim-point-{chunk[0].id}-{uuid.uuid4().hex[:8]}"
            fut = client.submit(run_points, chunk, cache_dir=cache_dir, key=key, pure=False)
            futures[fut] = chunk
            new.append(fut)
        return new

    ac = as_completed(submit(window))
    try:
        for fut in ac:
            chunk = futures.pop(fut)
            try:
                rows = fut.result()
            except Exception as e:  # noqa: BLE001 - KilledWorker, lost scheduler...
                rows = list(_crash_rows(chunk, f"dask: {type(e).__name__}: {e}"))
            for row in rows:
                emit(row)
            ac.update(submit(1))
    except BaseException:
        client.cancel(list(futures))
        raise
