"""One point of a sweep: its parameters, and the row that running it gives.

A :class:`Point` names a model, a platform (with override multipliers), a cost
model, a scheduler and the simulation's options; :func:`run_point` loads what it
names from the worker's caches (:mod:`experiments.sweep.caches`), plans and
simulates it through :meth:`Scheduler.run <schedulers.base.Scheduler.run>` and
returns a flat row with the columns of :data:`COLUMNS`: the parameters, the
metrics, and bookkeeping (``status``, ``error``, ``point_id``...).

Examples
--------
>>> from hetsim.experiments.sweep import Point, run_point
>>> p = Point(model="lstm", platform="xeon-p2200", scheduler="heft",
...           model_args={"seq_len": 4, "hidden": 32})
>>> len(p.id)
16
>>> row = run_point(p)  # doctest: +SKIP
>>> row["status"], row["makespan_s"] > 0  # doctest: +SKIP
('ok', True)
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import socket
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from hetsim import schedulers
from hetsim.experiments.sweep.caches import canonical, load_graph, make_cost, make_platform
from hetsim.sim.result import METRIC_COLUMNS as SIM_METRICS

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.schedulers.run import PlanRun

__all__ = [
    "COLUMNS", "METRIC_COLUMNS", "OVERRIDES", "PARAM_COLUMNS", "Point", "one_line", "point_id",
    "run_chunk", "run_point", "simulate_point",
]  # fmt: skip

#: platform override multipliers, as named by :meth:`sim.platform.Platform.scaled`
OVERRIDES: tuple[str, ...] = ("link_bandwidth", "gpu_peak", "cpu_peak", "gpu_bandwidth")

#: parameter columns, in :class:`Point` field order
PARAM_COLUMNS: tuple[str, ...] = (
    "model", "batch", "granularity", "model_args", "platform", *OVERRIDES, "cost",
    "scheduler", "scheduler_args", "requests", "interval_s", "noise", "seed",
)  # fmt: skip

#: measured columns (SI units: seconds, bytes, fractions; NaN where not applicable):
#: :data:`schedulers.RUN_COLUMNS` with the graph's load time
METRIC_COLUMNS: tuple[str, ...] = ("nodes", *SIM_METRICS, "graph_time_s", "sched_time_s", "sim_time_s")

#: every column of a results row, in file order
COLUMNS: tuple[str, ...] = (
    "point_id", "sweep", "status", *PARAM_COLUMNS, *METRIC_COLUMNS, "error", "git_commit",
    "hetsim_version", "worker", "finished_at",
)  # fmt: skip


def point_id(params: Mapping[str, Any]) -> str:
    """Stable id of a point: 16 hex digits of the SHA-256 of its parameter columns
    as canonical JSON (same parameters, same id, in every process and run)."""
    return hashlib.sha256(canonical(params).encode()).hexdigest()[:16]


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
                value = canonical(value)
            elif name in OVERRIDES or name in ("interval_s", "noise"):
                value = float(value)
            out[name] = value
        return out

    @property
    def id(self) -> str:
        """Stable hash of the parameters (16 hex digits): same parameters, same id."""
        return point_id(self.params())

    def graph_key(self) -> tuple[str, int, str, str]:
        """What identifies the imported graph: (model, batch, granularity, model_args)."""
        return (self.model, int(self.batch), self.granularity, canonical(self.model_args))

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


def simulate_point(
    point: Point, *, cache_dir: str | os.PathLike[str] | None = None, record: bool = False
) -> tuple[PlanRun, dict[str, Any]]:
    """Simulate one point: graph, platform and cost model from the caches, then
    :meth:`Scheduler.run <schedulers.base.Scheduler.run>`.

    Raises whatever goes wrong (:func:`run_point` turns it into an error row).
    ``record=True`` keeps the simulation records, e.g. to draw the point's Gantt
    chart (:func:`experiments.plotting.charts.gantt`).

    Returns
    -------
    (PlanRun, dict)
        The run and the metric columns of its row (:meth:`PlanRun.metrics` plus
        ``graph_time_s``).
    """
    t0 = time.perf_counter()
    graph = load_graph(point.model, batch=point.batch, granularity=point.granularity,
                       model_args=point.model_args, cache_dir=cache_dir)  # fmt: skip
    platform = make_platform(
        point.platform, point.link_bandwidth, point.gpu_peak, point.cpu_peak, point.gpu_bandwidth
    )
    cost = make_cost(point.cost, point.platform)
    t1 = time.perf_counter()
    run = schedulers.get(point.scheduler, **dict(point.scheduler_args)).run(
        graph, platform, cost, requests=point.requests, interval_s=point.interval_s, seed=point.seed,
        noise=point.noise, record=record,
    )  # fmt: skip
    return run, {**run.metrics(), "graph_time_s": t1 - t0}


def one_line(exc: BaseException) -> str:
    """``"Type: message"`` on one line (the lines of a long message joined by ``|``)."""
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
        row["error"] = one_line(e)
        row["traceback"] = traceback.format_exc()
    row["worker"] = f"{socket.gethostname()}:{os.getpid()}"
    row["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    return row


def run_chunk(
    points: list[Point], *, cache_dir: str | os.PathLike[str] | None = None
) -> list[dict[str, Any]]:
    """:func:`run_point` over several points: the task a sweep's runners send to a worker."""
    return [run_point(p, cache_dir=cache_dir) for p in points]
