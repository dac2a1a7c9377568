"""One step of a Kineto trace as a :class:`~graphs.graph.Graph`: a node per piece of
GPU work (kernel, copy, fill) and per host synchronisation, in the host's order,
with the measured host and device times.

The graph is the traced program: ``attrs["seq"]`` orders the nodes as their host
calls ran; ``attrs["thread"]`` is the host thread; a GPU node's ``host_s`` is the
host time since the thread's previous node (CPU ops, Python, runtime calls that
enqueue nothing), ``call_s`` its launch call, ``stream`` and ``kernel_s`` its stream
and measured device time; a ``sync`` node's ``host_s`` and ``post_s`` the host time
before it and after the wait returned. Edges are the orders the program imposed on
the device: stream order (the previous work on the stream), event waits
(``cudaStreamWaitEvent``: the work an event recorded on another stream) and host
synchronisations (a sync waits for the work of the streams it names; the thread's
next node waits for the sync). Measured times (``start_s``, ``end_s``: from the
step's start) stay on every node so that a replay checks itself against them.
"""

from __future__ import annotations

import functools
import re
import statistics
import warnings
from typing import Any

from hetsim.graphs.graph import Graph, GraphError
from hetsim.graphs.trace.kineto import Activity, HostCall, KinetoTrace, TraceWarning
from hetsim.graphs.trace.step import Window

__all__ = ["COMPUTE_CLASSES", "build_graph", "kernel_class", "runtime_role"]

_KERNEL_CLASSES = [
    ("conv", re.compile(r"conv|cudnn|implicit_gemm|fprop|dgrad|wgrad|winograd|miopen", re.I)),
    ("attention", re.compile(r"flash|fmha|attention|attn", re.I)),
    ("gemm", re.compile(r"gemm|cutlass|^Cijk_|cublas|ampere_|volta_|turing_|sm\d\d_xmma|matmul|hgemm|sgemm", re.I)),
    ("collective", re.compile(r"nccl|rccl", re.I)),
    ("reduce", re.compile(r"reduce|softmax|norm|sum_|mean|argmax|topk|sort|scan", re.I)),
]
#: kernel classes whose time follows the GPU's compute peak (the rest its memory bandwidth)
COMPUTE_CLASSES = frozenset({"conv", "attention", "gemm"})
_ROLE_SUFFIX = re.compile(r"(_v\d+|_ptsz|_ptds|_spt|R\d{4})$")


@functools.lru_cache(maxsize=4096)
def kernel_class(name: str) -> str:
    """The class of a kernel by its name: ``conv``, ``attention``, ``gemm``,
    ``collective``, ``reduce`` or ``elementwise``."""
    head = name[:200]
    for cls, pattern in _KERNEL_CLASSES:
        if pattern.search(head):
            return cls
    return "elementwise"


def runtime_role(name: str) -> str:
    """What a runtime call that enqueued no GPU work does to the order of work:
    ``sync_device``, ``sync_stream``, ``sync_event``, ``record`` (an event record),
    ``wait`` (a stream waiting for an event) or ``host`` (host time only). CUDA
    (``cuda*``, ``cu*``) and HIP (``hip*``) names read alike."""
    base = _ROLE_SUFFIX.sub("", name)
    for prefix in ("cuda", "hip", "cu"):
        if base.startswith(prefix):
            base = base[len(prefix):]
            break
    if base in ("DeviceSynchronize", "CtxSynchronize", "Free", "MemFree", "FreeHost"):
        return "sync_device"
    if base == "StreamSynchronize":
        return "sync_stream"
    if base == "EventSynchronize":
        return "sync_event"
    if base in ("EventRecord", "EventRecordWithFlags"):
        return "record"
    if base == "StreamWaitEvent":
        return "wait"
    return "host"


class _Builder:
    """The state of one pass over a step's host calls in their order."""

    def __init__(self, trace: KinetoTrace, window: Window, graph: Graph) -> None:
        self.trace, self.w, self.g = trace, window, graph
        n = len(trace.threads)
        self.prev_end = [window.start] * n
        self.host_acc = [0.0] * n
        self.last_on_stream: dict[int, str] = {}
        self.end_of: dict[str, float] = {}
        self.record_snaps: dict[int, dict[int, str]] = {}
        self.last_record: dict[int, tuple[dict[int, str], int | None]] = {}
        self.last_stream: dict[int, int] = {}
        self.pending_wait: dict[int, set[str]] = {}
        self.thread_waits: dict[int, list[tuple[str, int | None]]] = {}
        self.pending_sync: dict[int, str] = {}
        self.seq = 0
        self.skewed: list[float] = []
        self.guessed_waits = 0
        self.dropped_waits = 0
        self.latencies: list[float] = []
        self.gaps: list[float] = []
        self.sparse_graphs = 0

    def add(self, nid: str, op: str, attrs: dict[str, Any], nbytes: int, name: str | None, preds: set[str]) -> None:
        """Add a node and its in-edges (zero bytes) straight to the networkx graph: the
        schema is checked once, by ``validate``, when the graph is complete."""
        data: dict[str, Any] = {"op": op, "inputs": [], "outputs": [], "attrs": attrs, "flops": 0.0,
                                "bytes": int(nbytes), "param_bytes": 0}
        if name is not None:
            data["name"] = name
        nx_graph = self.g.nx
        nx_graph.add_node(nid, **data)
        for p in sorted(preds):
            nx_graph.add_edge(p, nid, bytes=0, output=0)

    def rel(self, t: float) -> float:
        return t - self.w.start

    def add_gpu(self, c: HostCall, acts: list[Activity]) -> None:
        th = c.thread
        if len(acts) > 1:  # a CUDA-graph launch: did the profiler record the graph's work?
            span = max(a.end for a in acts) - min(a.start for a in acts)
            if span > 1e-3 and sum(a.end - a.start for a in acts) < 0.5 * span:
                self.sparse_graphs += 1
        for j, a in enumerate(sorted(acts, key=lambda x: x.start)):
            nid = f"c{c.correlation}" if len(acts) == 1 else f"c{c.correlation}.{j}"
            if nid in self.g.nx:
                nid = f"{nid}#{self.seq}"
            preds: set[str] = set()
            prev = self.last_on_stream.get(a.stream)
            if prev is not None:
                preds.add(prev)
            preds |= self.pending_wait.pop(a.stream, set())
            if j == 0:
                for src, src_stream in self.thread_waits.pop(th, []):
                    # a guessed wait is kept only where the trace's times allow it
                    if src_stream != a.stream and self.end_of[src] <= a.start + 1e-6:
                        preds.add(src)
                    else:
                        self.dropped_waits += 1
                sync = self.pending_sync.pop(th, None)
                if sync is not None:
                    preds.add(sync)
            if a.start < c.start - 1e-6:
                self.skewed.append(c.start - a.start)
            attrs: dict[str, Any] = {
                "seq": self.seq, "thread": th, "stream": a.stream, "kind": a.kind,
                "host_s": self.host_acc[th] if j == 0 else 0.0,
                "call_s": (c.end - c.start) if j == 0 else 0.0,
                "call_start_s": self.rel(c.start),
                "kernel_s": a.end - a.start, "start_s": self.rel(a.start), "end_s": self.rel(a.end),
                "call": c.name,
            }
            cpu_op = self.trace.cpu_op_at(th, c.start)
            if cpu_op:
                attrs["cpu_op"] = cpu_op[0]
                if cpu_op[1] >= 0:
                    attrs["op_id"] = cpu_op[1]
            if a.kind == "memcpy" and c.end >= a.end - 1e-6:
                attrs["blocking"] = True
                attrs["post_s"] = max(0.0, c.end - max(c.start, a.end))
            op = kernel_class(a.name) if a.kind == "kernel" else a.kind
            self.add(nid, op, attrs, a.bytes, a.name[:160], preds)
            ready = max([self.end_of[p] for p in preds] + [self.w.start + self.busy.get(a.stream, 0.0)])
            if c.start >= ready:  # launched onto an idle stream: the start waited for the launch only
                self.latencies.append(a.start - c.start)
            elif c.start + 50e-6 < ready and a.start >= ready:  # queued well ahead: the stream's own gap
                self.gaps.append(a.start - ready)
            self.last_on_stream[a.stream] = nid
            self.end_of[nid] = a.end
            self.last_stream[th] = a.stream
            self.seq += 1
        self.host_acc[th] = 0.0

    def awaited(self, c: HostCall, role: str) -> set[str]:
        info = self.trace.syncs.get(c.correlation) if c.correlation >= 0 else None
        if role == "sync_stream" and info and info["stream"] >= 0:
            node = self.last_on_stream.get(info["stream"])
            return {node} if node else set()
        if role == "sync_event" and info:
            snap = self.record_snaps.get(info["record"], self.last_on_stream)
            if info["wait_on_stream"] >= 0:
                node = snap.get(info["wait_on_stream"])
                return {node} if node else set()
        # the trace does not name the stream (or names them all): the streams whose work
        # had ended when the call returned (a sync cannot have waited for work still running)
        return {n for n in self.last_on_stream.values() if self.end_of[n] <= c.end + 1e-6}

    def add_sync(self, c: HostCall, role: str) -> None:
        th = c.thread
        nodes = self.awaited(c, role)
        if not nodes:
            self.host_acc[th] += c.end - c.start
            return
        waited_until = max(self.end_of[n] for n in nodes)
        nid = f"s{c.correlation}" if c.correlation >= 0 and f"s{c.correlation}" not in self.g.nx else f"s#{self.seq}"
        attrs = {"seq": self.seq, "thread": th, "kind": role, "host_s": self.host_acc[th],
                 "call_s": c.end - c.start, "post_s": max(0.0, min(c.end - c.start, c.end - max(c.start, waited_until))),
                 "call_start_s": self.rel(c.start), "start_s": self.rel(c.start), "end_s": self.rel(c.end),
                 "call": c.name}
        preds = set(nodes)
        prev = self.pending_sync.pop(th, None)
        if prev is not None:
            preds.add(prev)
        self.add(nid, "sync", attrs, 0, None, preds)
        self.pending_sync[th] = nid
        self.end_of[nid] = c.end
        self.host_acc[th] = 0.0
        self.seq += 1

    def add_wait(self, c: HostCall) -> None:
        th = c.thread
        info = self.trace.syncs.get(c.correlation) if c.correlation >= 0 else None
        if info and info["stream"] >= 0:
            waiting = info["stream"]
            snap = self.record_snaps.get(info["record"]) if info["record"] >= 0 else None
            if snap is None:
                snap = self.last_record.get(th, (self.last_on_stream, None))[0]
            if info["wait_on_stream"] >= 0:
                srcs = {snap[info["wait_on_stream"]]} if info["wait_on_stream"] in snap else set()
            else:
                srcs = {n for s, n in snap.items() if s != waiting}
            self.pending_wait.setdefault(waiting, set()).update(srcs)
        else:
            # the trace does not say which stream waits: the one this thread launches on next
            snap, stream = self.last_record.get(th, (self.last_on_stream, self.last_stream.get(th)))
            src = snap.get(stream) if stream is not None else None
            if src is not None:
                self.thread_waits.setdefault(th, []).append((src, stream))
                self.guessed_waits += 1

    def run(self) -> None:
        w = self.w
        calls = [c for lst in self.trace.calls for c in lst if w.start <= c.start <= w.end]
        calls.sort(key=lambda c: (c.start, c.thread))
        # work launched before the step that still runs when it starts
        busy: dict[int, float] = {}
        for acts in self.trace.activities.values():
            for a in acts:
                if a.end > w.start and self.launched_before(a):
                    busy[a.stream] = max(busy.get(a.stream, 0.0), a.end - w.start)
        self.g.meta["stream_busy_s"] = {str(s): t for s, t in sorted(busy.items())}
        self.busy = busy
        for c in calls:
            th = c.thread
            self.host_acc[th] += max(0.0, c.start - self.prev_end[th])
            self.prev_end[th] = max(self.prev_end[th], c.end)
            acts = self.trace.activities.get(c.correlation) if c.correlation >= 0 else None
            if acts:
                self.add_gpu(c, acts)
                continue
            role = runtime_role(c.name)
            if role.startswith("sync"):
                self.add_sync(c, role)
                continue
            self.host_acc[th] += c.end - c.start
            if role == "record":
                snap = dict(self.last_on_stream)
                if c.correlation >= 0:
                    self.record_snaps[c.correlation] = snap
                self.last_record[th] = (snap, self.last_stream.get(th))
            elif role == "wait":
                self.add_wait(c)

    def launched_before(self, a: Activity) -> bool:
        return a.correlation not in self._in_window

    def prepare(self) -> None:
        w = self.w
        self._in_window = {c.correlation for lst in self.trace.calls for c in lst
                           if w.start <= c.start <= w.end and c.correlation >= 0}


def build_graph(trace: KinetoTrace, window: Window, *, name: str | None = None) -> Graph:
    """The graph of ``window`` of ``trace`` (see the module docstring).

    Raises
    ------
    GraphError
        The step launched no GPU work (a trace without kernels, or a CPU-only step).

    Warns
    -----
    TraceWarning
        Kernels that start before their launch call (clock skew between host and
        device); event waits whose stream the trace does not record (the stream the
        thread launches on next is taken).
    """
    g = Graph(name=name or window.name)
    b = _Builder(trace, window, g)
    b.prepare()
    b.run()
    gpu = [n for n, d in g.nodes(data=True) if d["op"] != "sync"]
    if not gpu:
        what = "holds no GPU kernels, copies or fills" if not trace.activities else \
            "launched no GPU work"
        raise GraphError(f"{trace.path}: step {window.name!r} {what}; nothing to simulate")
    if b.skewed:
        warnings.warn(TraceWarning(
            f"{trace.path}: {len(b.skewed)} GPU activit(ies) start before their launch call (clock skew "
            f"between host and device, up to {max(b.skewed) * 1e6:.1f} us); their launch latency is taken as 0"),
            stacklevel=3)
    if b.guessed_waits:
        warnings.warn(TraceWarning(
            f"{trace.path}: {b.guessed_waits} event wait(s) without their stream in the trace (no cuda_sync "
            "records): each is taken to order the thread's next launch after the stream it last launched on, "
            f"where the measured times allow it ({b.dropped_waits} did not)"),
            stacklevel=3)
    if b.sparse_graphs:
        warnings.warn(TraceWarning(
            f"{trace.path}: {b.sparse_graphs} CUDA-graph launch(es) whose recorded work leaves the stream idle for "
            "most of the graph's span: the profiler recorded part of the graph, and the replay misses the rest"),
            stacklevel=3)
    ends = [d["attrs"]["end_s"] for _, d in g.nodes(data=True)]
    lat = [max(0.0, x) for x in b.latencies] or [0.0]
    gaps = [max(0.0, x) for x in b.gaps] or [0.0]
    n_threads = len(trace.threads)
    tails = [0.0] * n_threads
    if window.thread is not None:
        tails[window.thread] = max(0.0, window.end - b.prev_end[window.thread])
    streams = sorted({d["attrs"]["stream"] for _, d in g.nodes(data=True) if d["op"] != "sync"})
    g.meta.update({
        "source": "kineto", "trace": trace.path.rsplit("/", 1)[-1], "device": trace.device,
        "runtime": trace.runtime, "step": window.name, "step_start_s": window.start,
        "step_time_s": max(window.end - window.start, max(ends)),
        "launch_latency_s": statistics.median(lat), "queue_gap_s": statistics.median(gaps), "streams": streams,
        "host_threads": [t for t in range(n_threads) if any(d["attrs"]["thread"] == t for _, d in g.nodes(data=True))],
        "tail_host_s": {str(t): x for t, x in enumerate(tails) if x > 0},
        "inputs": [], "outputs": [], "granularity": "kernel",
    })
    return g
