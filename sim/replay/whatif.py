"""What-ifs that start from a traced step: the same program with CUDA graphs, a
faster or slower host, or another GPU.

Each is a :func:`~sim.replay.replay.replay` of the trace's graph with one setting
changed; :func:`what_ifs` runs the replay of the trace as recorded first, then its
split into a device-bound part (the replay with launches that cost no host time)
and a host-bound part (the rest: the time the step waits for launches), then each
what-if asked for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from hetsim.costmodel.base import CostModelError
from hetsim.costmodel.platform import Device, Platform
from hetsim.costmodel.trace.devices import device_ratio, traced_device
from hetsim.graphs.graph import Graph, GraphError
from hetsim.sim.replay.replay import ReplayResult, replay

__all__ = ["WhatIfs", "gpu_scales", "traced_gpu", "what_ifs"]

def traced_gpu(graph: Graph, platform: str | Platform | None = None) -> Device:
    """The GPU that ran the trace (:func:`costmodel.trace.devices.traced_device`); a
    GraphError where no preset describes it."""
    try:
        return traced_device(graph.meta, platform)
    except CostModelError as e:
        raise GraphError(str(e)) from None


def gpu_scales(graph: Graph, traced: Device, other: Device) -> dict[str, float]:
    """Per GPU node, the factor of its device time on ``other`` against ``traced``
    (:func:`costmodel.trace.devices.device_ratio`)."""
    return {n: device_ratio(d["op"], traced, other) for n, d in graph.nodes(data=True) if d["op"] != "sync"}


@dataclass
class WhatIfs:
    """The replays of one traced step: ``traced`` (as recorded), ``device_bound``
    (launches free), then each what-if by its label."""

    graph: Graph
    traced: ReplayResult
    device_bound: ReplayResult
    cases: dict[str, ReplayResult] = field(default_factory=dict)

    @property
    def host_bound_s(self) -> float:
        """The part of the replayed step that waits for launches."""
        return self.traced.makespan - self.device_bound.makespan


def what_ifs(graph: Graph, *, cuda_graphs: bool = True, graph_launch_s: float = 10e-6,
             host_scales: Sequence[float] = (), gpus: Sequence[str] = (),
             traced_platform: str | None = None) -> WhatIfs:
    """Replay ``graph`` as traced and with each change asked for.

    Parameters
    ----------
    cuda_graphs
        Add ``cuda graphs``: one launch of ``graph_launch_s`` per segment.
    host_scales
        Add ``host x F`` for each factor (0.5: a host twice as fast).
    gpus
        Add ``gpu PRESET`` for each platform preset (or TOML): every kernel's
        time scaled by :func:`gpu_scales` from the traced GPU (:func:`traced_gpu`,
        ``traced_platform`` when the trace's device has no preset).
    """
    out = WhatIfs(graph, replay(graph), replay(graph, launch_scale=0.0))
    if cuda_graphs:
        out.cases["cuda graphs"] = replay(graph, launch="graph", graph_launch_s=graph_launch_s)
    for f in host_scales:
        out.cases[f"host x {f:g}"] = replay(graph, host_scale=f)
    if gpus:
        traced = traced_gpu(graph, traced_platform)
        for name in gpus:
            pl = Platform.load(name)
            other = pl.devices_of_kind("gpu")
            if not other:
                raise GraphError(f"platform {pl.name!r} has no GPU to run the traced kernels")
            out.cases[f"gpu {pl.name}"] = replay(graph, kernel_scale=gpu_scales(graph, traced, other[0]))
    return out
