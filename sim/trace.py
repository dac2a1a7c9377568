"""Trace exporters: simulation records to files (the engine only returns data).

Chrome trace format (``{"traceEvents": [...]}``), which Perfetto and
``chrome://tracing`` open: one process (``pid``) per device, per link direction and
for the host dispatcher, one thread (``tid``) per stream; complete events
(``ph: "X"``) with ``ts``/``dur`` in microseconds, the only place where times are
not in seconds. ``process_name``/``thread_name`` metadata events name the tracks.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hetsim.graphs.graph import atomic_write

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.sim.result import SimResult

__all__ = ["chrome_trace", "write_chrome_trace"]

_US = 1e6


def chrome_trace(
    records: Iterable[Mapping[str, Any]] | SimResult,
    *,
    resources: Iterable[str] | None = None,
) -> dict[str, Any]:
    """Chrome trace dict of simulation records (or of a :class:`SimResult`).

    Parameters
    ----------
    records
        Record dicts (``SimResult.records``; the runtime writes the same format).
    resources
        Track order: resource names in the order they get pids. Unlisted resources
        follow in order of first appearance. A ``SimResult`` gives its devices,
        then its link directions, then ``"dispatch"``.

    Examples
    --------
    >>> recs = [{"kind": "op", "name": "a", "node": "a", "request": 0, "resource": "gpu",
    ...          "stream": 0, "start": 0.0, "end": 2e-6, "bytes": 8}]
    >>> ev = chrome_trace(recs)["traceEvents"]
    >>> [e["name"] for e in ev if e["ph"] == "M"]
    ['process_name', 'process_sort_index', 'thread_name']
    >>> ev[-1]["ph"], ev[-1]["ts"], ev[-1]["dur"], ev[-1]["pid"], ev[-1]["tid"]
    ('X', 0.0, 2.0, 1, 0)
    """
    order: list[str] = []
    if hasattr(records, "records"):
        result = records
        if result.records is None:
            raise ValueError("this result has no records: run simulate(..., record=True)")
        order = list(result.device_busy) + list(result.link_busy) + ["dispatch"]
        records = result.records
    records = list(records)  # type: ignore[arg-type]
    if resources is not None:
        order = list(resources)
    pid: dict[str, int] = {}
    for name in order:
        pid.setdefault(name, len(pid) + 1)
    for rec in records:
        pid.setdefault(str(rec["resource"]), len(pid) + 1)
    events: list[dict[str, Any]] = []
    threads: set[tuple[int, int]] = set()
    for name, p in pid.items():
        events.append(
            {"name": "process_name", "ph": "M", "pid": p, "tid": 0, "args": {"name": name}}
        )
        events.append(
            {"name": "process_sort_index", "ph": "M", "pid": p, "tid": 0, "args": {"sort_index": p}}
        )
    body: list[dict[str, Any]] = []
    for rec in records:
        p = pid[str(rec["resource"])]
        tid = int(rec.get("stream") or 0)
        threads.add((p, tid))
        args = {
            k: rec[k]
            for k in ("node", "request", "bytes", "dst", "output", "hop")
            if rec.get(k) is not None
        }
        body.append(
            {
                "name": str(rec["name"]),
                "cat": str(rec["kind"]),
                "ph": "X",
                "ts": float(rec["start"]) * _US,
                "dur": (float(rec["end"]) - float(rec["start"])) * _US,
                "pid": p,
                "tid": tid,
                "args": args,
            }
        )
    kinds = {str(rec["resource"]): str(rec["kind"]) for rec in records if rec["kind"] != "decision"}
    for p, tid in sorted(threads):
        name = next(n for n, q in pid.items() if q == p)
        label = _thread_label(kinds.get(name, ""), tid)
        events.append(
            {"name": "thread_name", "ph": "M", "pid": p, "tid": tid, "args": {"name": label}}
        )
    return {"traceEvents": events + body, "displayTimeUnit": "ms"}


def _thread_label(kind: str, tid: int) -> str:
    if kind == "dispatch":
        return f"dispatch thread {tid}"
    if kind == "transfer":
        return "copies"
    if kind in ("launch", "host"):  # a worker's host thread (sim.engine.host)
        return f"host thread {tid}"
    return "views (zero cost)" if tid < 0 else f"stream {tid}"


def write_chrome_trace(
    records: Iterable[Mapping[str, Any]] | SimResult,
    path: str | os.PathLike[str],
    *,
    resources: Iterable[str] | None = None,
) -> Path:
    """Write :func:`chrome_trace` JSON to ``path`` (parents created) atomically
    (:func:`graphs.graph.atomic_write`); return the path."""
    trace = chrome_trace(records, resources=resources)
    return atomic_write(path, lambda fh: json.dump(trace, fh, separators=(",", ":")))
