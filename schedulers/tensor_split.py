"""Tensor (intra-operator) split of the heaviest operators across CPU and GPU.

The intra-operator partitioning of the CPU-GPU adaptive partitioning thesis this
project follows (the single-layer CPU-GPU co-execution of Y. Kim, J. Kim, D. Chae,
D. Kim, J. Kim, "muLayer: Low Latency On-Device Inference Using Cooperative
Single-Layer Acceleration and Processor-Friendly Quantization", EuroSys 2019): the ``top_k`` most expensive conv/matmul-like operators are cut
along their output channels into one part per device, sized in proportion to each
device's predicted speed on the whole operator, so that both parts finish at about
the same time; a concat joins them. The rest of the graph is then scheduled with
HEFT, the parts pinned to their devices.

Because the plan is for a rewritten graph, the split happens in :meth:`transform`
(``graphs.split_op``); :meth:`schedule` expects that graph (its
``meta["tensor_split"]`` records the splits) and raises otherwise. Use
:meth:`Scheduler.run` to do both. Complexity: O(V log V) to pick the operators,
O(k x (V + E)) for the splits, then HEFT's (near-linear: :mod:`schedulers.heft`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hetsim.graphs.graph import GraphError
from hetsim.graphs.transforms import split_op
from hetsim.schedulers.base import CostTable, Scheduler, SchedulerError
from hetsim.schedulers.heft import heft_state
from hetsim.sim.plan import Plan

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.base import CostModel
    from hetsim.graphs.graph import Graph
    from hetsim.sim.platform import Platform

SPLITTABLE = frozenset({"conv1d", "conv2d", "conv3d", "matmul", "dense", "linear", "batch_matmul"})


def _short(op: str) -> str:
    return op.rsplit(".", 1)[-1]


def split_kind(data: dict) -> str | None:
    """``"conv"`` or ``"matmul"`` for a splittable node (a fused node by its first
    splittable member), else None."""
    members = data.get("ops") if data["op"] == "fused" else [data["op"]]
    for m in members or []:
        s = _short(str(m))
        if s in SPLITTABLE:
            return "conv" if s.startswith("conv") else "matmul"
    return None


class TensorSplit(Scheduler):
    """Split the ``top_k`` heaviest conv/matmul ops across two devices, then HEFT.

    Parameters
    ----------
    top_k
        Operators to split (the most expensive by mean op time).
    min_fraction
        Skip an operator whose smaller part would get less than this share.
    """

    name = "tensor-split"
    min_devices = 2

    def __init__(self, *, top_k: int = 3, min_fraction: float = 0.05) -> None:
        self.top_k = top_k
        self.min_fraction = min_fraction

    @staticmethod
    def pair(platform: Platform) -> list[str]:
        """The two devices that share a split: the first CPU and the first GPU, or
        the first two devices when the platform lacks one of the kinds."""
        cpus, gpus = platform.devices_of_kind("cpu"), platform.devices_of_kind("gpu")
        if cpus and gpus:
            return [cpus[0].name, gpus[0].name]
        return platform.device_names[:2]

    def transform(self, graph: Graph, platform: Platform, cost: CostModel) -> Graph:
        """A new graph with the chosen operators split (``meta["tensor_split"]``)."""
        if graph.number_of_nodes() == 0 or len(platform.devices) < 2:
            return graph
        table = CostTable(graph, platform, cost)
        devs = self.pair(platform)
        nodes = graph.nx.nodes
        cands = [n for n in table.topo if split_kind(nodes[n]) and len(nodes[n]["outputs"]) == 1]
        cands.sort(key=lambda n: (-table.wbar(n), table.index[n]))
        out = graph.copy()
        done: dict[str, dict] = {}
        for n in cands:
            if len(done) >= self.top_k:
                break
            times = [table.w[n][d] for d in devs]
            if any(t == float("inf") or t <= 0 for t in times):
                continue
            speed = [1.0 / t for t in times]
            fracs = [s / sum(speed) for s in speed]
            if min(fracs) < self.min_fraction:
                continue
            axis = 1 if split_kind(nodes[n]) == "conv" else -1
            try:
                out = split_op(out, n, fracs, axis=axis)
            except GraphError:
                continue  # axis too small to split, or not splittable: leave it whole
            done[n] = {"devices": devs, "fractions": fracs, "axis": axis}
        out.meta["tensor_split"] = done
        return out

    def _schedule(self, graph: Graph, platform: Platform, cost: CostModel) -> Plan:
        splits = graph.meta.get("tensor_split")
        if splits is None:
            raise SchedulerError(
                "tensor-split schedules the graph returned by its transform(): call "
                "transform(graph, platform, cost) first, or run(graph, platform, cost)"
            )
        pinned = {}
        for node, info in splits.items():
            for i, dev in enumerate(info["devices"]):
                part = f"{node}/part{i}"
                if part in graph.nx and dev in platform:
                    pinned[part] = dev
        state = heft_state(CostTable(graph, platform, cost), pinned=pinned)
        return state.to_plan(split_nodes=sorted(splits))
