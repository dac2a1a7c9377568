"""Replay a traced program: the graph of a profiler trace (``graphs.from_trace``) run
again with its own streams, its own host order and its measured times, or with one
of them changed.

The replay runs the program as it was recorded, not as a plan: one clock per host
thread, which issues the thread's calls in their traced order, each after its host
time (``host_s``: what the thread did since its previous call, then ``call_s``, the
call itself); a GPU node starts at max(launch issued + launch latency, its
predecessors' ends + the stream's gap between queued kernels) and runs for its
``kernel_s``: the launch-queue recurrence of Daydream (Zhu et al., USENIX ATC 2020)
and dPRO (Hu et al., MLSys 2022) on the trace's streams. A synchronisation returns
``post_s`` after the work it waits for ends; a copy that blocked its call likewise.
This is a different semantics from :mod:`sim.engine`, which runs a *plan* (nodes
placed on devices, launched from a ready heap as hetsim's executor does): a traced
program fixes the host's order and the streams, and its cross-stream event waits do
not block the host.

``launch="graph"`` replays it as CUDA graphs: each thread's GPU nodes between two
host synchronisations (or blocking copies) are one segment, launched once for
``graph_launch_s``; the host time spent between the segment's launches is gone (the
captured work replays without the host), the rest of the host stays.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hetsim.graphs.graph import Graph, GraphError
from hetsim.sim.trace import write_chrome_trace

__all__ = ["LAUNCH_MODES", "ReplayResult", "ReplaySettings", "replay", "traced_records"]

#: how the replay launches GPU work: one launch per node, or one per segment
LAUNCH_MODES = ("eager", "graph")


@dataclass(frozen=True)
class ReplaySettings:
    """What a replay changes of the traced program (the defaults change nothing).

    ``host_scale`` multiplies every host time (0.5: a host twice as fast);
    ``launch_scale`` multiplies, on top, the host time of GPU launches (the work
    since the thread's previous call and the call; 0: launches cost nothing, the
    device-bound part of the step);
    ``kernel_scale`` maps a node to the factor of its device time (another GPU,
    :func:`sim.replay.whatif.gpu_scales`); ``launch_latency_s`` and ``queue_gap_s``
    default to the trace's own figures (``graph.meta``); ``graph_launch_s`` is the
    host time of one CUDA-graph launch (``launch="graph"``).
    """

    launch: str = "eager"
    host_scale: float = 1.0
    launch_scale: float = 1.0
    kernel_scale: Mapping[str, float] | None = None
    launch_latency_s: float | None = None
    queue_gap_s: float | None = None
    graph_launch_s: float = 10e-6

    def __post_init__(self) -> None:
        if self.launch not in LAUNCH_MODES:
            raise GraphError(f"replay: launch must be one of {list(LAUNCH_MODES)}, got {self.launch!r}")
        for key in ("host_scale", "launch_scale", "launch_latency_s", "queue_gap_s", "graph_launch_s"):
            v = getattr(self, key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float) or not v >= 0
                                  or v == float("inf")):
                raise GraphError(f"replay: {key} must be a finite number >= 0, got {v!r}")


@dataclass
class ReplayResult:
    """A replay's times (seconds from the step's start).

    ``makespan``: the step's simulated time; ``measured``: the trace's;
    ``stream_busy`` / ``measured_stream_busy``: device time per stream;
    ``host_busy`` / ``measured_host_busy``: host time per thread (its calls and the
    work between them, waits left out); ``launches``: host launches (graph mode: one
    per segment); ``records``: the simulator's record format (kind, name, node, resource,
    stream, start, end), for :mod:`sim.trace`.
    """

    graph: str
    launch: str
    makespan: float
    measured: float
    stream_busy: dict[int, float]
    measured_stream_busy: dict[int, float]
    host_busy: dict[int, float]
    measured_host_busy: dict[int, float]
    stream_end: dict[int, float]
    measured_stream_end: dict[int, float]
    launches: int
    records: list[dict[str, Any]] = field(default_factory=list, repr=False)

    @property
    def error(self) -> float:
        """Relative error of the simulated step time against the measured one."""
        return (self.makespan - self.measured) / self.measured if self.measured else 0.0

    def to_chrome_trace(self, path: Any, graph: Graph | None = None) -> Any:
        """Write the replay as Chrome trace JSON (Perfetto); with ``graph`` the traced
        step's own times go beside it (``traced ...`` tracks above ``simulated ...``)."""
        recs = (traced_records(graph) if graph is not None else []) + self.records
        return write_chrome_trace(recs, path)


def _order(graph: Graph) -> list[tuple[str, dict[str, Any], list[str]]]:
    """The nodes in host order with their attrs and predecessors; a GraphError for a
    graph that is not a traced program."""
    nodes = graph.nx.nodes
    rows = []
    for n in graph.nx:
        a = nodes[n]["attrs"]
        if "seq" not in a or "thread" not in a:
            raise GraphError(f"graph {graph.name!r}: node {n!r} has no traced order (attrs 'seq', 'thread'); "
                             "replay takes a graph read from a profiler trace (graphs.from_trace)")
        rows.append((a["seq"], n, a))
    rows.sort(key=lambda r: r[0])
    pred = graph.nx.pred
    return [(n, a, list(pred[n])) for _, n, a in rows]


def _segments(order: list[tuple[str, dict[str, Any], list[str]]], sync: set[str]) -> set[str]:
    """The nodes that open a CUDA-graph segment: per thread, the first GPU node after
    a host synchronisation or a blocking copy (and the thread's first)."""
    starts: set[str] = set()
    open_: dict[int, bool] = {}
    for n, a, _ in order:
        th = a["thread"]
        if n in sync or a.get("blocking"):
            open_[th] = False
            continue
        if not open_.get(th, False):
            starts.add(n)
            open_[th] = True
    return starts


def replay(graph: Graph, settings: ReplaySettings | None = None, **changes: Any) -> ReplayResult:
    """Replay the traced program of ``graph`` (see the module docstring).

    ``settings`` (or its fields as keywords) says what to change; nothing: the
    trace's own schedule, which should give back the traced step time.

    Examples
    --------
    >>> from hetsim.graphs.trace import from_trace                          # doctest: +SKIP
    >>> g = from_trace("tests/data/traces/alexnet-a100-forward.json.gz")   # doctest: +SKIP
    >>> r = replay(g); r.makespan, r.measured                              # doctest: +SKIP
    """
    s = settings or ReplaySettings()
    if changes:
        s = ReplaySettings(**{**s.__dict__, **changes})
    meta = graph.meta
    lat = float(meta.get("launch_latency_s", 0.0)) if s.launch_latency_s is None else s.launch_latency_s
    gap = float(meta.get("queue_gap_s", 0.0)) if s.queue_gap_s is None else s.queue_gap_s
    hs = s.host_scale
    scale = s.kernel_scale or {}
    order = _order(graph)
    sync = {n for n, a, _ in order if graph.nx.nodes[n]["op"] == "sync"}
    seg_starts = _segments(order, sync) if s.launch == "graph" else set()
    clock: dict[int, float] = {}
    stream_free = {int(k): float(v) for k, v in (meta.get("stream_busy_s") or {}).items()}
    end: dict[str, float] = {}
    recs: list[dict[str, Any]] = []
    host_busy: dict[int, float] = {}
    stream_busy: dict[int, float] = {}
    launches = 0
    for n, a, preds in order:
        th = a["thread"]
        t = clock.get(th, 0.0)
        ready = max((end[p] for p in preds), default=0.0)
        if n in sync:
            issue = t + a["host_s"] * hs
            done = max(issue, ready) + a["post_s"] * hs
            host_busy[th] = host_busy.get(th, 0.0) + (a["host_s"] + a["post_s"]) * hs
            recs.append(_rec("host", n, f"host {th}", th, issue, done))
            clock[th] = end[n] = done
            continue
        stream = a["stream"]
        if s.launch == "graph" and not a.get("blocking"):
            if n in seg_starts:
                issue = t + s.graph_launch_s
                host_busy[th] = host_busy.get(th, 0.0) + s.graph_launch_s
                recs.append(_rec("launch", n, f"host {th}", th, t, issue))
                launches += 1
                clock[th] = issue
            else:
                issue = t
        else:
            ls = hs * s.launch_scale
            issue = t + a["host_s"] * ls
            call = a["call_s"] * ls
            if a["call_s"] > 0 or a["host_s"] > 0:
                launches += 1
            host_busy[th] = host_busy.get(th, 0.0) + (a["host_s"] + a["call_s"]) * ls
            recs.append(_rec("launch", n, f"host {th}", th, issue, issue + call))
            clock[th] = issue + call
        dur = a["kernel_s"] * scale.get(n, 1.0)
        if preds or stream in stream_free:
            start = max(issue + lat, max(ready, stream_free.get(stream, 0.0)) + gap)
        else:
            start = issue + lat
        finish = start + dur
        stream_free[stream] = finish
        stream_busy[stream] = stream_busy.get(stream, 0.0) + dur
        end[n] = finish
        recs.append(_rec("op", n, f"stream {stream}", 0, start, finish))
        if a.get("blocking"):
            clock[th] = max(clock[th], finish) + a.get("post_s", 0.0) * hs
            host_busy[th] += a.get("post_s", 0.0) * hs
    tails = {int(k): float(v) for k, v in (meta.get("tail_host_s") or {}).items()}
    for th, tail in tails.items():
        clock[th] = clock.get(th, 0.0) + tail * hs
        host_busy[th] = host_busy.get(th, 0.0) + tail * hs
    makespan = max([*clock.values(), *end.values(), 0.0])
    m_stream, m_end, m_host = _measured(order, sync, tails)
    return ReplayResult(
        graph=graph.name, launch=s.launch, makespan=makespan, measured=float(meta.get("step_time_s", 0.0)),
        stream_busy=dict(sorted(stream_busy.items())), measured_stream_busy=m_stream,
        host_busy=dict(sorted(host_busy.items())), measured_host_busy=m_host,
        stream_end={k: stream_free[k] for k in sorted(stream_busy)}, measured_stream_end=m_end,
        launches=launches, records=recs)


def _rec(kind: str, node: str, resource: str, stream: int, start: float, end: float) -> dict[str, Any]:
    return {"kind": kind, "name": node, "node": node, "request": 0, "resource": f"simulated {resource}",
            "stream": stream, "start": start, "end": end, "bytes": 0}


def _measured(order: list[tuple[str, dict[str, Any], list[str]]], sync: set[str],
              tails: Mapping[int, float]) -> tuple[dict[int, float], dict[int, float], dict[int, float]]:
    """The trace's device time and last end per stream, and host time per thread."""
    busy: dict[int, float] = {}
    last: dict[int, float] = {}
    host: dict[int, float] = {}
    for n, a, _ in order:
        th = a["thread"]
        if n in sync:
            host[th] = host.get(th, 0.0) + a["host_s"] + a["post_s"]
            continue
        busy[a["stream"]] = busy.get(a["stream"], 0.0) + a["kernel_s"]
        last[a["stream"]] = max(last.get(a["stream"], 0.0), a["end_s"])
        host[th] = host.get(th, 0.0) + a["host_s"] + a["call_s"] + a.get("post_s", 0.0)
    for th, tail in tails.items():
        host[th] = host.get(th, 0.0) + tail
    return dict(sorted(busy.items())), dict(sorted(last.items())), dict(sorted(host.items()))


def traced_records(graph: Graph) -> list[dict[str, Any]]:
    """The traced step's own host calls and GPU work as records (``traced host T``,
    ``traced stream S``), times from the step's start."""
    recs = []
    for n, d in graph.nodes(data=True):
        a = d["attrs"]
        if "seq" not in a:
            continue
        th = a["thread"]
        if d["op"] == "sync":
            recs.append({"kind": "host", "name": n, "node": n, "request": 0, "resource": f"traced host {th}",
                         "stream": th, "start": a["start_s"], "end": a["end_s"], "bytes": 0})
            continue
        recs.append({"kind": "launch", "name": n, "node": n, "request": 0, "resource": f"traced host {th}",
                     "stream": th, "start": a["call_start_s"], "end": a["call_start_s"] + a["call_s"], "bytes": 0})
        recs.append({"kind": "op", "name": n, "node": n, "request": 0, "resource": f"traced stream {a['stream']}",
                     "stream": 0, "start": a["start_s"], "end": a["end_s"], "bytes": 0})
    recs.sort(key=lambda r: (r["resource"], r["start"]))
    return recs
