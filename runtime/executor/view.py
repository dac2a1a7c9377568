"""Helpers of the executor: the policy's view, cached prices, thread pinning, allocator.

:class:`RunView` is the :class:`sim.plan.SystemView` a dynamic policy sees at run
time; :class:`CachedCost` answers its cost questions from memory; :func:`pin_cores`
gives each CPU worker thread its own cores; :func:`link_resource` names the link
direction(s) a copy uses the way the simulator does.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np

from hetsim.costmodel.base import host_dispatch
from hetsim.runtime.executor.setup import ExecutionError

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.graphs.graph import Graph
    from hetsim.runtime.backends.base import DeviceSpec
    from hetsim.runtime.executor.run import Engine, RequestState
    from hetsim.sim.platform import Platform

__all__ = ["CachedCost", "RunView", "link_resource", "pin_cores", "torch_threads", "tune_malloc"]


class CachedCost:
    """A cost model whose ``op_time``/``dispatch_time`` answers are remembered per
    (node, device): what a dynamic policy asks, answered in ~0.1 us."""

    def __init__(self, cost: Any) -> None:
        self._cost = cost
        self._op: dict[tuple[str, str], float] = {}
        self._disp: dict[tuple[str, str], float] = {}

    def op_time(self, graph: Graph, node: str, device: Any) -> float:
        key = (node, device.name)
        t = self._op.get(key)
        if t is None:
            t = self._op[key] = float(self._cost.op_time(graph, node, device))
        return t

    def dispatch_time(self, graph: Graph, node: str, device: Any) -> float:
        key = (node, device.name)
        t = self._disp.get(key)
        if t is None:
            t = self._disp[key] = host_dispatch(self._cost, graph, node, device)
        return t

    def transfer_time(self, nbytes: int, link: Any, **kw: Any) -> float:
        return float(self._cost.transfer_time(nbytes, link, **kw))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cost, name)


class RunView:
    """:class:`sim.plan.SystemView` over the executor's live state.

    ``now``: wall seconds since the repeat started. ``device_free_at``: the
    earliest stream end of the device (ops running now end at their start plus
    their predicted time, or now when that has passed; a CPU stream whose op has
    returned is free from that moment, however early against its prediction, as
    in the simulator, where ops take their predicted time) plus the predicted time of
    the ops queued on it, shared among its streams -- the simulator's formula
    over observed starts. ``location``: the device holding a node's output in the
    request being placed.
    """

    def __init__(self, engine: Engine, seed: int | None) -> None:
        self._e = engine
        self.graph, self.platform, self.cost = engine.graph, engine.platform, engine.cost
        self.rng = np.random.default_rng(seed)
        #: the request being placed (set by the engine before each decision)
        self.state: RequestState | None = None

    @property
    def now(self) -> float:
        return self._e.clock() - self._e.t0

    def device_free_at(self, device: str) -> float:
        e = self._e
        d = e.dev_index.get(device)
        if d is None:
            raise ExecutionError(f"device_free_at: unknown device {device!r}")
        now = e.clock() - e.t0
        ends = e.stream_end[d]
        if len(ends) == 1:
            start = ends[0] if ends[0] > now else now
        else:
            start = min(t if t > now else now for t in ends)
        q = e.queued[d]
        return start + (q if q > 0.0 else 0.0) / len(ends)

    def location(self, node: str) -> str | None:
        e = self._e
        i = e.index.get(node)
        if i is None:
            raise ExecutionError(f"location: unknown node {node!r}")
        d = self.state.loc[i] if self.state is not None else e.loc0[i]
        return e.dev_names[d] if d >= 0 else None


def pin_cores(specs: list[DeviceSpec], streams: list[int], active: Any) -> dict[tuple[int, int], set[int]]:
    """Cores for each active CPU worker ``(device, stream)``: consecutive cores of this
    process's affinity mask, ``threads`` each, laid out in platform order over every
    CPU device, so that a device keeps its cores whichever others a plan uses (``cpu1``
    runs on the second core even when ``cpu0`` has no op). When the platform's CPU
    workers do not all fit, the active ones' consecutively; when those do not fit
    either, nothing is pinned and the OS places the threads."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    every = [(d, s, spec.cpu_threads()) for d, spec in enumerate(specs) if spec.kind == "cpu"
             for s in range(streams[d])]
    for want in (every, [w for w in every if w[0] in active]):
        if cores and sum(t for _, _, t in want) <= len(cores):
            out, i = {}, 0
            for d, s, t in want:
                if d in active:
                    out[(d, s)] = set(cores[i:i + t])
                i += t
            return out
    return {}


def link_resource(platform: Platform, src: str, dst: str) -> str:
    """The simulator's name of the link direction(s) a copy from ``src`` to ``dst`` uses."""
    try:
        hops = platform.link_directions(src, dst)
    except Exception:  # noqa: BLE001 - no declared link: name the pair
        return f"{src}->{dst}"
    return "+".join(res for res, _ in hops) or f"{src}->{dst}"


def torch_threads(n: int | None = None) -> int | None:
    """torch's intra-op thread count of this thread (set it to ``n`` when given);
    None when torch is not imported."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None:
        return None
    if n is not None:
        torch.set_num_threads(n)
    return torch.get_num_threads()


_MALLOC_TUNED = False


def tune_malloc() -> None:
    """glibc: serve large blocks from the heap (threshold 32 MiB, the maximum) and
    never trim it, once per process; a no-op elsewhere."""
    global _MALLOC_TUNED
    if _MALLOC_TUNED:
        return
    _MALLOC_TUNED = True
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc
        return
    m_trim_threshold, m_top_pad, m_mmap_threshold = -1, -2, -3
    mallopt(m_mmap_threshold, 32 << 20)
    mallopt(m_trim_threshold, (1 << 31) - 1)
    mallopt(m_top_pad, 64 << 20)
