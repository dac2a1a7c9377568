"""Tensor (intra-operator) split of the heaviest operators across CPU and GPU.

The intra-operator partitioning of the CPU-GPU adaptive partitioning thesis this
project follows (the single-layer CPU-GPU co-execution of Y. Kim, J. Kim, D. Chae,
D. Kim, J. Kim, "muLayer: Low Latency On-Device Inference Using Cooperative
Single-Layer Acceleration and Processor-Friendly Quantization", EuroSys 2019): the ``top_k`` most expensive conv/matmul-like operators are cut
along their output channels into one part per device, sized in proportion to each
device's predicted speed on the whole operator, so that both parts finish at about
the same time; a concat joins them. The rest of the graph is then scheduled with
HEFT, the parts pinned to their devices.

A split also costs: the input crosses to the other device, the parts are joined,
and two small kernels pay two launches. So each of the ``top_k`` candidates is kept
only if it shortens the simulated makespan of the HEFT plan (with the
``requests`` the plan will serve), starting from plain HEFT on the graph as given:
tensor-split never returns a plan slower than HEFT's, and on a graph where no
split pays it returns HEFT's plan for the graph unchanged.

Because the plan is for a rewritten graph, the split happens in :meth:`transform`
(``graphs.split_op``; the graph it returns records the splits in
``meta["tensor_split"]``, the graph itself when no split pays); :meth:`schedule`
plans the graph it is given with HEFT, pinning the parts of the splits recorded
there. Use :meth:`Scheduler.run` to do both. Complexity: O(V log V) to pick the
operators, then for each of the ``top_k`` candidates a split (O(V + E)), HEFT
(near-linear: :mod:`schedulers.heft`) and a simulation.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from hetsim.graphs.graph import GraphError
from hetsim.graphs.transforms import split_op
from hetsim.schedulers.base import CostTable, Scheduler
from hetsim.schedulers.heft import heft_state
from hetsim.sim.engine.simulator import SimulationError, simulate
from hetsim.sim.plan import Plan, PlanError

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.base import CostModel
    from hetsim.costmodel.platform import Platform
    from hetsim.graphs.graph import Graph

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
    """Split up to ``top_k`` heavy conv/matmul ops across two devices where it pays, then HEFT.

    Parameters
    ----------
    top_k
        Operators tried (the most expensive by mean op time); each is kept only if
        it shortens the simulated makespan.
    min_fraction
        Skip an operator whose smaller part would get less than this share.
    only_if_faster
        Keep a split only if it shortens the simulated makespan (default); False
        keeps every split tried, e.g. to study what splitting costs.
    requests, interval_s
        The workload the split is judged on (None: that of :meth:`Scheduler.run`,
        1 request when scheduled alone).
    """

    name = "tensor-split"
    minimum = {"top_k": 1, "requests": 1}
    min_devices = 2

    def __init__(
        self,
        *,
        top_k: int = 3,
        min_fraction: float = 0.05,
        only_if_faster: bool = True,
        requests: int | None = None,
        interval_s: float | None = None,
    ) -> None:
        self.top_k = top_k
        self.min_fraction = min_fraction
        self.only_if_faster = only_if_faster
        self.requests = requests
        self.interval_s = interval_s

    @staticmethod
    def pair(platform: Platform) -> list[str]:
        """The two devices that share a split: the first CPU and the first GPU, or
        the first two devices when the platform lacks one of the kinds."""
        cpus, gpus = platform.devices_of_kind("cpu"), platform.devices_of_kind("gpu")
        if cpus and gpus:
            return [cpus[0].name, gpus[0].name]
        return platform.device_names[:2]

    def transform(self, graph: Graph, platform: Platform, cost: CostModel) -> Graph:
        """A new graph with the splits that shorten the makespan (``meta["tensor_split"]``;
        ``meta["tensor_split_trials"]``: the simulated makespan of plain HEFT, and of
        the plan with each split tried added to those kept before it), or ``graph``
        itself when none does."""
        if graph.number_of_nodes() == 0 or len(platform.devices) < 2:
            return graph
        table = CostTable(graph, platform, cost)
        devs = self.pair(platform)
        nodes = graph.nx.nodes
        cands = [n for n in table.topo if split_kind(nodes[n]) and len(nodes[n]["outputs"]) == 1]
        cands.sort(key=lambda n: (-table.wbar(n), table.index[n]))
        heft = best = self._makespan(graph, platform, cost, heft_state(table).to_plan())
        trials: dict[str, float] = {}
        out, done = graph, {}
        for n in cands:
            if len(trials) >= self.top_k:
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
                trial = split_op(out, n, fracs, axis=axis)
            except GraphError:
                continue  # axis too small to split, or not splittable: leave it whole
            splits = {**done, n: {"devices": devs, "fractions": fracs, "axis": axis}}
            trial.meta["tensor_split"] = splits
            span = self._makespan(trial, platform, cost, self._heft(trial, platform, cost, splits))
            trials[n] = span
            if span < best or not self.only_if_faster:
                out, done, best = trial, splits, min(span, best)
        if not done:
            return graph
        out.meta["tensor_split_trials"] = {"heft": heft, "splits": trials}
        return out

    def _heft(self, graph: Graph, platform: Platform, cost: CostModel, splits: dict[str, Any]) -> Plan:
        """HEFT on ``graph`` with the parts of ``splits`` pinned to their devices."""
        pinned = {}
        for node, info in splits.items():
            for i, dev in enumerate(info["devices"]):
                part = f"{node}/part{i}"
                if part in graph.nx and dev in platform:
                    pinned[part] = dev
        return heft_state(CostTable(graph, platform, cost), pinned=pinned).to_plan(split_nodes=sorted(splits))

    def _makespan(self, graph: Graph, platform: Platform, cost: CostModel, plan: Plan) -> float:
        """Simulated makespan of ``plan`` for the requests it is judged on (inf when it
        does not fit the devices' memory)."""
        try:
            return simulate(graph, platform, plan, cost, requests=int(self.requests or 1),
                            interval_s=float(self.interval_s or 0.0)).makespan  # fmt: skip
        except (PlanError, SimulationError):
            return math.inf

    def _schedule(self, graph: Graph, platform: Platform, cost: CostModel) -> Plan:
        splits = graph.meta.get("tensor_split") or {}
        plan = self._heft(graph, platform, cost, splits)
        trials = graph.meta.get("tensor_split_trials")
        if trials:
            plan.meta["heft_makespan_s"] = trials["heft"]
        return plan
