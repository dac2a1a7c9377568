"""Read a Kineto trace (what ``torch.profiler`` exports: Chrome trace JSON, ``.json``
or ``.json.gz``) into its host calls, GPU activities, synchronisation records and
annotations.

Kineto writes one event per CPU op (``cpu_op``), runtime call (``cuda_runtime``,
``cuda_driver``; ROCm traces name HIP calls in the same category), GPU kernel
(``kernel``), copy (``gpu_memcpy``), fill (``gpu_memset``) and synchronisation
(``cuda_sync``), plus user annotations (``ProfilerStep#N``, ``record_function``
ranges) and flow events (``ac2g``: a launch to its kernel). A runtime call and the
GPU work it enqueued share ``args.correlation``; that id, not the flow events, ties
them here (the flows carry the same id). Times are Kineto's microseconds; this
module turns them into seconds from the trace's first event.
"""

from __future__ import annotations

import gzip
import json
import os
import warnings
import zlib
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from hetsim.graphs.graph import GraphError

__all__ = ["GPU_KINDS", "KNOWN_CATEGORIES", "Activity", "Annotation", "HostCall", "KinetoTrace", "load_trace_json",
           "TraceWarning", "read_kineto"]


class TraceWarning(UserWarning):
    """A trace that reads, with a part the importer could not use as recorded (clock
    skew, unknown event categories, a wait whose stream the trace does not say)."""


#: GPU activity categories (lower case) and the kind each becomes
GPU_KINDS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "memcpy": "memcpy",
             "gpu_memset": "memset", "memset": "memset"}
#: host-call categories: CUDA and HIP runtime and driver calls
RUNTIME_CATEGORIES = {"cuda_runtime", "cuda_driver", "runtime", "hip_runtime", "hip_driver"}
#: categories read or knowingly left aside; anything else is named in a TraceWarning
KNOWN_CATEGORIES = frozenset({
    *GPU_KINDS, *RUNTIME_CATEGORIES, "cpu_op", "user_annotation", "gpu_user_annotation", "cuda_sync",
    "ac2g", "fwdbwd", "async_cpu_to_gpu", "async_gpu", "cpu_instant_event", "python_function", "trace",
    "cuda_profiler_range", "overhead", "python", "gpu_mem", "cpu_to_gpu", "marker", "kernel_launch",
    "critical_path", "__metadata",
})
#: the categories whose events the importer reads
_READ = frozenset({*GPU_KINDS, *RUNTIME_CATEGORIES, "cpu_op", "user_annotation", "cuda_sync"})


@dataclass(slots=True)
class HostCall:
    """One runtime or driver call on a host thread (seconds from the trace's start)."""

    name: str
    thread: int
    start: float
    end: float
    correlation: int


@dataclass(slots=True)
class Activity:
    """One piece of GPU work: a kernel, a copy or a fill, on its stream."""

    kind: str
    name: str
    stream: int
    start: float
    end: float
    correlation: int
    bytes: int = 0


@dataclass(slots=True)
class Annotation:
    """A named range on a host thread: ``ProfilerStep#N`` or a ``record_function``."""

    name: str
    thread: int
    start: float
    end: float


@dataclass
class KinetoTrace:
    """What :func:`read_kineto` keeps of a trace.

    ``calls`` are in start order per thread (``threads[i]`` is the ``(pid, tid)`` of
    thread ``i``); ``activities`` maps a correlation id to the GPU work of that call;
    ``syncs`` a correlation id to the ``cuda_sync`` record's arguments (the stream a
    wait or synchronisation is on, the stream and the record of the event it waits
    for, where the trace says); ``cpu_ops`` the outermost CPU ops per thread
    (start, end, name, record-function id).
    """

    path: str
    device: str | None
    runtime: str
    threads: list[tuple[Any, Any]]
    calls: list[list[HostCall]]
    activities: dict[int, list[Activity]]
    syncs: dict[int, dict[str, Any]]
    annotations: list[Annotation]
    cpu_ops: list[list[tuple[float, float, str, int]]]
    origin_us: float
    unknown_categories: dict[str, int] = field(default_factory=dict)

    def cpu_op_at(self, thread: int, t: float) -> tuple[str, int] | None:
        """The outermost CPU op of ``thread`` running at time ``t``: its name and
        record-function id (what the execution trace calls ``rf_id``; -1: none), or None."""
        ops = self.cpu_ops[thread]
        i = bisect_right(ops, (t, float("inf"), "", 0)) - 1
        if i >= 0 and ops[i][0] <= t <= ops[i][1]:
            return ops[i][2], ops[i][3]
        return None

    @property
    def n_activities(self) -> int:
        return sum(len(v) for v in self.activities.values())


def load_trace_json(path: str) -> Any:
    """The JSON document of ``path`` (gzip by its magic bytes), or a one-line GraphError."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except IsADirectoryError:
        raise GraphError(f"{path}: is a folder, not a trace file") from None
    except OSError as e:
        raise GraphError(f"{path}: cannot read trace: {e.strerror or e}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:
            raise GraphError(f"{path}: gzip stream is truncated or corrupt ({e})") from None
    try:
        return _fast_loads(raw)
    except UnicodeDecodeError:
        raise GraphError(f"{path}: not a trace (bytes that are not UTF-8 JSON)") from None
    except json.JSONDecodeError as e:
        what = "truncated" if e.pos >= len(raw.rstrip()) - 1 else "not valid JSON"
        raise GraphError(f"{path}: {what} at line {e.lineno} column {e.colno} ({e.msg})") from None


def _fast_loads(raw: bytes) -> Any:
    """``json.loads``, through orjson where it is installed (3x faster on large traces)."""
    try:
        import orjson
    except ImportError:
        return json.loads(raw)
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw)  # the standard parser's message names line and column


def _int(value: Any, default: int = -1) -> int:
    """An id as Kineto writes it: an int, a numeric string, a ``0x..`` string (HIP)."""
    if value.__class__ is int:
        return value
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value, 0)
        except ValueError:
            return default
    return default


def read_kineto(path: str | os.PathLike[str]) -> KinetoTrace:
    """Read a Kineto trace file.

    Raises
    ------
    GraphError
        A missing, truncated or non-JSON file, or JSON that is not a Chrome trace
        (no ``traceEvents`` list), in one line naming the file.

    Warns
    -----
    TraceWarning
        Event categories the importer does not know (counted by name).
    """
    path = os.fspath(path)
    doc = load_trace_json(path)
    if isinstance(doc, list):
        events, doc = doc, {}
    elif isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list):
        events = doc["traceEvents"]
    else:
        raise GraphError(f"{path}: not a Chrome/Kineto trace (no 'traceEvents' list)")
    props = doc.get("deviceProperties") or []
    device = props[0].get("name") if props and isinstance(props[0], dict) else None

    xs: list[tuple[str, dict[str, Any]]] = []
    unknown: Counter[str] = Counter()
    origin = float("inf")
    norm: dict[Any, str] = {}  # a category as written -> lower case, or "" when it is not read
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        raw = e.get("cat", "")
        cat = norm.get(raw)
        if cat is None:
            low = str(raw).lower()
            cat = norm[raw] = low if low in _READ else ("" if low in KNOWN_CATEGORIES else "?" + low)
        if not cat:
            continue
        if cat[0] == "?":
            unknown[cat[1:] or "(none)"] += 1
            continue
        ts, dur = e.get("ts"), e.get("dur", 0)
        if ts.__class__ not in (int, float) or dur.__class__ not in (int, float) \
                or e.get("name", "").__class__ is not str:
            continue
        if ts < origin:
            origin = float(ts)
        xs.append((cat, e))
    if unknown:
        warnings.warn(TraceWarning(
            f"{path}: left out {sum(unknown.values())} event(s) of unknown categories "
            f"({', '.join(f'{k} x{v}' for k, v in unknown.most_common(5))})"), stacklevel=2)
    if not xs:
        raise GraphError(f"{path}: the trace holds no complete ('ph': 'X') events")

    thread_ids: dict[tuple[Any, Any], int] = {}
    calls: list[list[HostCall]] = []
    cpu_ops: list[list[tuple[float, float, str, int]]] = []
    activities: dict[int, list[Activity]] = {}
    syncs: dict[int, dict[str, Any]] = {}
    annotations: list[Annotation] = []
    runtime = "cuda"

    def thread_of(e: dict[str, Any]) -> int:
        key = (e.get("pid"), e.get("tid"))
        i = thread_ids.get(key)
        if i is None:
            i = thread_ids[key] = len(calls)
            calls.append([])
            cpu_ops.append([])
        return i

    for cat, e in xs:
        start = (float(e["ts"]) - origin) * 1e-6
        dur = e.get("dur", 0)
        end = start + (dur * 1e-6 if dur > 0 else 0.0)
        name = e.get("name", "")
        if cat == "cpu_op":
            if name.startswith("ProfilerStep#"):
                annotations.append(Annotation(name, thread_of(e), start, end))
            else:
                a = e.get("args")
                rf = _int(a.get("Record function id", a.get("External id"))) if a.__class__ is dict else -1
                cpu_ops[thread_of(e)].append((start, end, name, rf))
            continue
        args = e.get("args")
        if not isinstance(args, dict):
            args = {}
        if cat in GPU_KINDS:
            corr = _int(args.get("correlation"))
            if corr < 0:
                continue
            activities.setdefault(corr, []).append(Activity(
                GPU_KINDS[cat], str(name), _int(args.get("stream"), 0), start, end, corr,
                max(0, _int(args.get("bytes"), 0))))
        elif cat in RUNTIME_CATEGORIES:
            if name.startswith("hip"):
                runtime = "hip"
            th = thread_of(e)
            calls[th].append(HostCall(str(name), th, start, end, _int(args.get("correlation"))))
        elif cat == "cuda_sync":
            corr = _int(args.get("correlation"))
            if corr >= 0:
                syncs[corr] = {"kind": name, "stream": _int(args.get("stream")),
                               "wait_on_stream": _int(args.get("wait_on_stream")),
                               "record": _int(args.get("wait_on_cuda_event_record_corr_id"))}
        elif cat == "user_annotation":
            annotations.append(Annotation(str(name), thread_of(e), start, end))
    for lst in calls:
        lst.sort(key=lambda c: (c.start, -c.end))
    outer: list[list[tuple[float, float, str, int]]] = []
    for ops in cpu_ops:
        ops.sort(key=lambda o: (o[0], -o[1]))
        top: list[tuple[float, float, str, int]] = []
        for op in ops:
            if not top or op[0] >= top[-1][1]:
                top.append(op)
        outer.append(top)
    annotations.sort(key=lambda a: a.start)
    return KinetoTrace(path=path, device=device, runtime=runtime, threads=list(thread_ids), calls=calls,
                       activities=activities, syncs=syncs, annotations=annotations, cpu_ops=outer,
                       origin_us=origin, unknown_categories=dict(unknown))
