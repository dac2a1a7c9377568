"""The host's cost of each GPU op on a model's own shapes, measured in the executor as it
runs: all of the model's ops on one GPU, launched eagerly, the host cost of each op
from its worker's pick of the op to its pick of the next one
(:func:`runtime.executor.result.host_costs`), so the executor's bookkeeping counts.

A tiny op's launch (:mod:`~runtime.calibration.cuda_bench`) costs the host far less
than a model's ops do (each op's arguments, its output's allocation, the executor's
ready heap and events): :func:`runtime.calibration.calibrate` with ``models`` writes
these figures (per op kind, and the median that becomes the GPU's ``dispatch_s``).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from hetsim.runtime.executor.execute import Execution
from hetsim.runtime.executor.result import host_costs
from hetsim.sim.plan import Plan

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.platform import Platform
    from hetsim.graphs.graph import Graph
    from hetsim.runtime.executor.setup import Wiring

__all__ = ["host_cost_summary", "model_host_costs"]


def model_host_costs(graph: Graph, wiring: Wiring, platform: Platform, *, device: str = "gpu", warmup: int = 3,
                     runs: int = 10, **execution: Any) -> dict[str, float]:
    """Node -> the median over ``runs`` eager runs of the host's cost of launching it,
    every op of ``graph`` on platform device ``device``.

    Parameters
    ----------
    graph, wiring
        The model's graph and dataflow (:func:`runtime.executor.setup.wire`).
    platform, device
        The platform and its GPU device that runs every op.
    warmup, runs
        Untimed and timed runs.
    execution
        Keywords of :class:`runtime.executor.execute.Execution` (``device_map``,
        ``model``, ``cuda_device``, ``checked``).
    """
    plan = Plan(dict.fromkeys(graph.nx, device), meta={"scheduler": f"all-{device}"})
    per_node: dict[str, list[float]] = {}
    with Execution(graph, plan, platform, wiring, launch="eager", check=False, pin_threads=False,
                   **execution) as ex:
        ex.run(warmup, timed=False)
        ex.run(runs)
        for records in ex.runs:
            for node, t in host_costs(records).items():
                per_node.setdefault(node, []).append(t)
    return {node: float(statistics.median(ts)) for node, ts in per_node.items()}


def host_cost_summary(graph: Graph, per_node: Mapping[str, float]) -> dict[str, Any]:
    """``{"per_op_s": {op kind: median seconds}, "median_s": median over the ops, "ops":
    how many}`` of :func:`model_host_costs`' figures."""
    if not per_node:
        raise ValueError(f"graph {graph.name!r}: no GPU op was launched, no host cost to measure")
    kinds: dict[str, list[float]] = {}
    for node, t in per_node.items():
        kinds.setdefault(str(graph.nx.nodes[node]["op"]), []).append(t)
    return {"per_op_s": {k: float(statistics.median(v)) for k, v in sorted(kinds.items())},
            "median_s": float(statistics.median(per_node.values())), "ops": len(per_node)}
