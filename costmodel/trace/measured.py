"""The measured times of a traced step as a cost model (``cost="trace:PATH"``)."""

from __future__ import annotations

import os
import warnings
from typing import TYPE_CHECKING, Any

from hetsim.costmodel.base import CostModelBase, CostModelError, host_dispatch
from hetsim.costmodel.roofline import Roofline
from hetsim.costmodel.trace.devices import device_ratio, traced_device
from hetsim.graphs.graph import Graph, GraphError
from hetsim.graphs.trace import from_trace

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.platform import Device, Link

__all__ = ["TraceCostModel"]


class TraceCostModel(CostModelBase):
    """Kernel and host times measured in a profiler trace, as the simulator, the
    schedulers and ``compare`` take a cost model.

    A node of the trace's graph (:func:`graphs.trace.from_trace`) on the traced GPU
    (a GPU with the traced one's roofline figures: the preset of the GPU the trace
    names, :func:`~costmodel.trace.devices.traced_device`) costs its measured device
    time (``op_time``) and the host time of its launch, the work since the thread's
    previous call included (``dispatch_time``). On another device (a CPU, another
    GPU) its measured time is carried over by the ratio of the two devices' compute
    peaks or memory bandwidths, by kernel class
    (:func:`~costmodel.trace.devices.device_ratio`). A host synchronisation costs no
    device time. What the trace did not measure (a node of another graph; any node
    when no preset describes the traced GPU and it runs elsewhere) is priced by
    ``fallback`` (default the roofline). Each graph and device priced otherwise than
    as measured is said once in a
    :class:`~costmodel.learned.measured.CostModelWarning`.

    Parameters
    ----------
    source
        A trace file (``.json`` / ``.json.gz``) or the graph read from one.
    step
        The step of a trace file (as :func:`graphs.trace.from_trace`).
    fallback
        The cost model of what the trace does not price.
    traced_platform
        The platform whose first GPU ran the trace (default: found by the trace's
        device name).

    Examples
    --------
    >>> cost = TraceCostModel("tests/data/traces/event-sync-a100.json.gz")
    >>> cost.describe()
    'trace:event-sync-a100.json.gz (ProfilerStep#100, 8 nodes)'
    """

    def __init__(self, source: str | os.PathLike[str] | Graph, *, step: str | None = None,
                 fallback: Any = None, traced_platform: Any = None) -> None:
        if isinstance(source, Graph):
            graph = source
        else:
            try:
                graph = from_trace(source, step=step)
            except GraphError as e:
                raise CostModelError(f"trace cost source: {e}") from None
        self.kernel_s: dict[str, float] = {}
        self.host_s: dict[str, float] = {}
        self.op: dict[str, str] = {}
        for n, d in graph.nodes(data=True):
            a = d["attrs"]
            if "seq" not in a:
                raise CostModelError(f"graph {graph.name!r}: node {n!r} holds no traced times; "
                                     "give a trace file or a graph read from one")
            self.op[n] = d["op"]
            if d["op"] == "sync":
                self.kernel_s[n] = 0.0
                self.host_s[n] = a["host_s"] + a["post_s"]
            else:
                self.kernel_s[n] = a["kernel_s"]
                self.host_s[n] = a["host_s"] + a["call_s"]
        self.fallback = fallback if fallback is not None else Roofline()
        self.graph_name = graph.name
        self.name = f"trace:{graph.meta.get('trace', graph.name)}"
        try:
            self.traced: Device | None = traced_device(graph.meta, traced_platform)
        except CostModelError:
            if traced_platform is not None:
                raise
            self.traced = None
        self._warned: set[tuple[str, str]] = set()

    def describe(self) -> str:
        """``trace:FILE (STEP, N nodes)``."""
        return f"{self.name} ({self.graph_name}, {len(self.kernel_s)} nodes)"

    def how(self, node: str, device: Device) -> str:
        """How ``node`` is priced on ``device``: ``measured``, ``ratio`` or ``fallback``."""
        if node not in self.kernel_s:
            return "fallback"
        t = self.traced
        if device.kind == "gpu" and (t is None or (device.peak_flops == t.peak_flops and
                                                   device.mem_bandwidth_bytes_per_s == t.mem_bandwidth_bytes_per_s)):
            return "measured"
        return "ratio" if t is not None else "fallback"

    def _say(self, graph: Graph, device: Device) -> None:
        key = (graph.name, device.name)
        if key in self._warned:
            return
        self._warned.add(key)
        counts = {"ratio": 0, "fallback": 0}
        for n in graph.nx:
            h = self.how(n, device)
            if h in counts:
                counts[h] += 1
        if not any(counts.values()):
            return
        # lazy: at the top it would load pandas with this module
        from hetsim.costmodel.learned.measured import CostModelWarning

        parts = []
        if counts["ratio"]:
            parts.append(f"{counts['ratio']} carried from the traced {self.traced.name if self.traced else 'GPU'} "
                         "by the ratio of compute peaks or memory bandwidths")
        if counts["fallback"]:
            parts.append(f"{counts['fallback']} not measured, priced by {type(self.fallback).__name__}")
        warnings.warn(CostModelWarning(f"{self.name}: node(s) of graph {graph.name!r} on {device.name}: "
                                       + "; ".join(parts)), stacklevel=3)

    def op_time(self, graph: Graph, node: str, device: Device) -> float:
        """The measured device time of ``node`` on the traced GPU, carried over
        elsewhere (see the class docstring)."""
        how = self.how(node, device)
        if how == "measured":
            return self.kernel_s[node]
        self._say(graph, device)
        if how == "ratio":
            return self.kernel_s[node] * device_ratio(self.op[node], self.traced, device)
        if graph.nodes[node]["op"] == "sync":
            return 0.0
        return float(self.fallback.op_time(graph, node, device))

    def dispatch_time(self, graph: Graph, node: str, device: Device) -> float:
        """The measured host time of ``node``: its launch call and the host's work
        since the previous call (the framework's work for the op, which a CPU
        placement does too); the fallback's dispatch for a node the trace lacks."""
        if node in self.host_s:
            return self.host_s[node]
        return float(host_dispatch(self.fallback, graph, node, device))

    def transfer_time(self, nbytes: int, link: Link) -> float:
        """The fallback's transfer time (a trace times copies as nodes, not links)."""
        return float(self.fallback.transfer_time(nbytes, link))


def trace_source(arg: str, *, platform: Any = None) -> TraceCostModel:
    """The ``trace:PATH[@STEP]`` cost spec."""
    path, at, step = arg.partition("@")
    if not path:
        raise CostModelError("cost spec 'trace:': give the trace file, trace:PATH or trace:PATH@STEP")
    return TraceCostModel(path, step=step if at else None)
