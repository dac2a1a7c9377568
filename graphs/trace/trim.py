"""Cut a Kineto trace down to one step: a smaller file that imports and replays as
the step did in the whole trace."""

from __future__ import annotations

import gzip
import json
import os
from typing import Any

from hetsim.graphs.graph import atomic_write
from hetsim.graphs.trace.build import build_graph
from hetsim.graphs.trace.kineto import GPU_KINDS, load_trace_json, read_kineto
from hetsim.graphs.trace.step import WHOLE, select_step

__all__ = ["trim_trace"]


def trim_trace(path: str | os.PathLike[str], out: str | os.PathLike[str], *, step: str | None = None) -> dict[str, int]:
    """Write the events of one step of ``path`` to ``out`` (gzip when ``out`` ends in
    ``.gz``) and return how many events were kept and left out.

    Kept: the metadata events and the trace's header (device properties), the
    step's own annotation and the annotations inside it, the host events that
    start within the step, the flows among them, and the GPU work that runs while
    the step's GPU work does (the work launched earlier that still runs when the
    step starts included, so that the step's streams start as busy as they were).
    Other steps' annotations are left out. ``step`` is chosen as in
    :func:`graphs.trace.from_trace`.
    """
    trace = read_kineto(path)
    window = select_step(trace, step)
    graph = build_graph(trace, window)
    t0 = window.start
    gpu_end = t0 + max(float(graph.meta["step_time_s"]), window.end - t0)
    doc = load_trace_json(os.fspath(path))
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    origin = trace.origin_us

    def sec(ts: Any) -> float:
        return (float(ts) - origin) * 1e-6

    kept: list[Any] = []
    for e in events:
        if not isinstance(e, dict):
            continue
        ph = e.get("ph")
        if ph == "M":
            kept.append(e)
            continue
        ts = e.get("ts")
        if not isinstance(ts, int | float) or isinstance(ts, bool):
            continue
        start = sec(ts)
        end = start + max(0.0, float(e.get("dur", 0) or 0)) * 1e-6
        cat = str(e.get("cat", "")).lower()
        name = str(e.get("name", ""))
        if cat in GPU_KINDS or cat in ("cuda_sync", "gpu_user_annotation"):
            keep = end >= t0 and start <= gpu_end
        elif cat == "user_annotation" or name.startswith("ProfilerStep#"):
            keep = (window.name == WHOLE or name == window.name or not name.startswith("ProfilerStep#")) \
                and start >= t0 - 1e-9 and end <= window.end + 1e-9
        else:
            keep = t0 <= start <= window.end
        if keep:
            kept.append(e)
    out_doc = dict(doc) if isinstance(doc, dict) else {}
    out_doc["traceEvents"] = kept
    text = json.dumps(out_doc, separators=(",", ":"))
    if os.fspath(out).endswith(".gz"):
        atomic_write(out, lambda fh: fh.write(gzip.compress(text.encode(), mtime=0)), binary=True)
    else:
        atomic_write(out, lambda fh: fh.write(text))
    return {"kept": len(kept), "left_out": len(events) - len(kept)}
