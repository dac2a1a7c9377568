"""The measured times of a traced step as a cost model (``cost="trace:PATH"``)."""

from __future__ import annotations

import os
import warnings
from typing import TYPE_CHECKING, Any

from hetsim.costmodel.base import CostModelError, host_dispatch
from hetsim.graphs.graph import Graph, GraphError

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.sim.platform import Device, Link

__all__ = ["TraceCostModel"]


class TraceCostModel:
    """Kernel and host times measured in a profiler trace, as the simulator, the
    schedulers and ``compare`` take a cost model.

    A node of the trace's graph (:func:`graphs.trace.from_trace`) on a GPU costs its
    measured device time (``op_time``) and the host time its launch took there,
    the work since the thread's previous call included (``dispatch_time``); a host
    synchronisation costs no device time. Anything the trace did not measure (a
    node of another graph, a node on a CPU) is priced by ``fallback`` (default the
    roofline), with one :class:`~costmodel.learned.measured.CostModelWarning` per
    graph and device saying how many nodes it priced.

    Parameters
    ----------
    source
        A trace file (``.json`` / ``.json.gz``) or the graph read from one.
    step
        The step of a trace file (as :func:`graphs.trace.from_trace`).
    fallback
        The cost model of what the trace does not price.

    Examples
    --------
    >>> cost = TraceCostModel("tests/data/traces/event-sync-a100.json.gz")
    >>> cost.describe()
    'trace:event-sync-a100.json.gz (ProfilerStep#100, 8 nodes)'
    """

    def __init__(self, source: str | os.PathLike[str] | Graph, *, step: str | None = None,
                 fallback: Any = None) -> None:
        from hetsim.costmodel.roofline import Roofline

        if isinstance(source, Graph):
            graph = source
        else:
            from hetsim.graphs.trace import from_trace

            try:
                graph = from_trace(source, step=step)
            except GraphError as e:
                raise CostModelError(f"trace cost source: {e}") from None
        self.kernel_s: dict[str, float] = {}
        self.host_s: dict[str, float] = {}
        for n, d in graph.nodes(data=True):
            a = d["attrs"]
            if "seq" not in a:
                raise CostModelError(f"graph {graph.name!r}: node {n!r} holds no traced times; "
                                     "give a trace file or a graph read from one")
            if d["op"] == "sync":
                self.kernel_s[n] = 0.0
                self.host_s[n] = a["host_s"] + a["post_s"]
            else:
                self.kernel_s[n] = a["kernel_s"]
                self.host_s[n] = a["host_s"] + a["call_s"]
        self.fallback = fallback if fallback is not None else Roofline()
        self.graph_name = graph.name
        self.name = f"trace:{graph.meta.get('trace', graph.name)}"
        self._warned: set[tuple[str, str]] = set()

    def describe(self) -> str:
        """``trace:FILE (STEP, N nodes)``."""
        return f"{self.name} ({self.graph_name}, {len(self.kernel_s)} nodes)"

    def _measured(self, graph: Graph, node: str, device: Device) -> bool:
        if device.kind == "gpu" and node in self.kernel_s:
            return True
        key = (graph.name, device.name)
        if key not in self._warned:
            from hetsim.costmodel.learned.measured import CostModelWarning

            self._warned.add(key)
            missing = sum(1 for n in graph.nx if not (device.kind == "gpu" and n in self.kernel_s))
            warnings.warn(CostModelWarning(
                f"{self.name}: {missing} node(s) of graph {graph.name!r} on {device.name} were not measured "
                f"by the trace; priced by {type(self.fallback).__name__}"), stacklevel=3)
        return False

    def op_time(self, graph: Graph, node: str, device: Device) -> float:
        """The measured device time of ``node`` (a GPU node of the trace), else the fallback's."""
        if self._measured(graph, node, device):
            return self.kernel_s[node]
        if graph.nodes[node]["op"] == "sync":
            return 0.0
        return float(self.fallback.op_time(graph, node, device))

    def dispatch_time(self, graph: Graph, node: str, device: Device) -> float:
        """The measured host time of ``node``'s launch, else the fallback's dispatch."""
        if self._measured(graph, node, device):
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
