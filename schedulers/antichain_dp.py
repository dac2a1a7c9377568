"""Pipeline partitioning by dynamic programming over the antichain DAG (PipeDream).

D. Narayanan, A. Harlap, A. Phanishayee, V. Seshadri, N. R. Devanur, G. R. Ganger,
P. B. Gibbons, M. Zaharia, "PipeDream: Generalized Pipeline Parallelism for DNN
Training", SOSP 2019, section 3.1 (and the antichain DAG of its planner for
branching models, as in Tarnawski et al., "Efficient Algorithms for Device
Placement of DNN Graph Operators", NeurIPS 2020).

A pipeline stage is the difference of two downsets (sets of nodes closed under
predecessors; each is bounded by an antichain), so a split into ``m`` stages is a
chain of downsets ``{} = I_0 < I_1 < ... < I_m = V``. The DP

    A[k][J] = min over downsets I < J of max(A[k - 1][I], T(J \\ I, device_k))

minimises the slowest stage, where ``T`` is the stage's op + dispatch time on its
device plus the transfer of the tensors leaving ``I`` (the cut) over the link from
the previous stage's device. Stages map to devices in a fixed order, GPUs first,
then CPUs; every device gets a stage (a 2-device CPU-GPU box uses both).
Stage op times are prefix sums over downsets (``T(J \\ I) = C(J) - C(I)``), so the
DP costs O(S^2 x D) for S downsets.

The number of downsets grows exponentially with the graph's width: up to
``max_states`` are enumerated (breadth first, as bitmasks); beyond that the graph
is coarsened to one linear sequence of cut points, the prefixes of a
topological order (every prefix is a downset), and the same DP runs on it
(a contiguous split of a chain, as PipeDream does for linear models): its tables in
O(V + E) (prefix sums), the split in O(V) cost evaluations on two devices, O(V^2 x
D) on more (:func:`schedulers.timeslice.partition_chain`). Enumerating the downsets
costs O(max_states x (V + E)) at most. Measured (``python
benchmarks/scheduler_scaling.py``, layered DAGs on ``xeon-p2200``, CPU time):
see the README's "Speed and scale".
The plan carries the stages and ``microbatches``.
"""

from __future__ import annotations

import math
from itertools import accumulate
from typing import TYPE_CHECKING

from hetsim.schedulers.base import CostTable, Scheduler, SchedulerError, topo_priority
from hetsim.schedulers.timeslice import partition_chain
from hetsim.sim.plan import Plan, size_text

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.base import CostModel
    from hetsim.costmodel.platform import Platform
    from hetsim.graphs.graph import Graph


def downsets(preds: list[int], n: int, max_states: int) -> list[int] | None:
    """All downsets as bitmasks (``preds[i]``: bitmask of node i's predecessors),
    sorted by size; None when there are more than ``max_states``.

    Breadth first from the empty set; each downset keeps the nodes that can join it
    (not in it, every predecessor in it), so a step costs O(those + successors),
    not O(n).
    """
    succs: list[list[int]] = [[] for _ in range(n)]
    for i, m in enumerate(preds):
        while m:
            low = m & -m
            succs[low.bit_length() - 1].append(i)
            m ^= low
    seen = {0}
    frontier: list[tuple[int, list[int]]] = [(0, [i for i in range(n) if not preds[i]])]
    while frontier:
        nxt = []
        for s, addable in frontier:
            for i in addable:
                t = s | 1 << i
                if t in seen:
                    continue
                seen.add(t)
                if len(seen) > max_states:
                    return None
                more = [j for j in succs[i] if preds[j] & t == preds[j]]
                nxt.append((t, [j for j in addable if j != i] + more))
        frontier = nxt
    return sorted(seen, key=lambda s: (s.bit_count(), s))


class AntichainDP(Scheduler):
    """PipeDream-style stage partitioning, one stage per device, micro-batched.

    Parameters
    ----------
    microbatches
        Micro-batches the plan asks the simulator to pipeline.
    max_states
        Most downsets enumerated before falling back to the linear sequence.
    """

    name = "antichain-dp"
    minimum = {"microbatches": 1, "max_states": 1}

    def __init__(self, *, microbatches: int = 4, max_states: int = 300) -> None:
        self.microbatches = microbatches
        self.max_states = max_states

    def _schedule(self, graph: Graph, platform: Platform, cost: CostModel) -> Plan:
        table = CostTable(graph, platform, cost)
        order = sorted(table.devices, key=lambda d: platform.device(d).kind != "gpu")
        topo = table.topo
        n = len(topo)
        idx = table.index
        preds = [0] * n
        for u, v in graph.nx.edges:
            preds[idx[v]] |= 1 << idx[u]
        states = downsets(preds, n, self.max_states)
        work = {d: [table.w[x][d] + table.disp[x][d] for x in topo] for d in order}
        tensors = [(1 << idx[t.producer], sum(1 << idx[c] for c in t.consumers), t.nbytes)
                   for t in table.tensors.values() if t.producer is not None and t.consumers]
        params = [graph.nx.nodes[x]["param_bytes"] for x in topo]
        if states is None:
            mode, states = "linear", [(1 << i) - 1 for i in range(n + 1)]
            cost_of, cut, held = _prefix_tables(n, work, tensors, params)
        else:
            mode = "antichain"
            cost_of = {d: [sum(w for i, w in enumerate(work[d]) if s >> i & 1) for s in states] for d in order}
            cut = [sum(b for p, c, b in tensors if p & s and c & ~s) for s in states]
            held = [sum(b for i, b in enumerate(params) if s >> i & 1) for s in states]
        room = {d: platform.device(d).memory_bytes for d in order}
        if mode == "linear":
            def price(i: int, j: int, dev: str, k: int) -> float:
                if held[j] - held[i] > room[dev]:
                    return math.inf  # the stage's weights do not fit the device
                comm = table.comm(cut[i], order[k - 1], dev) if k > 0 and cut[i] else 0.0
                return cost_of[dev][j] - cost_of[dev][i] + comm

            bottleneck, segs = partition_chain(n, order, price)
            masks = [(states[i], states[j]) for i, j, _ in segs]
            devs = [d for _, _, d in segs]
        else:
            bottleneck, masks, devs = self._dp(states, order, cost_of, cut, table, held, room)
        if not math.isfinite(bottleneck):
            raise SchedulerError(_no_split(graph, table, order[: min(len(order), n)], room))
        placement: dict[str, str] = {}
        stages: list[list[str]] = []
        for (lo, hi), dev in zip(masks, devs):
            stage = [topo[i] for i in range(n) if (hi & ~lo) >> i & 1]
            stages.append(stage)
            placement.update(dict.fromkeys(stage, dev))
        return Plan(
            placement=placement,
            priority=topo_priority(graph),
            stages=stages,
            microbatches=self.microbatches,
            meta={"mode": mode, "states": len(states), "stage_time_estimate": bottleneck,
                  "stage_devices": devs},
        )

    @staticmethod
    def _dp(
        states: list[int],
        order: list[str],
        cost_of: dict[str, list[float]],
        cut: list[int],
        table: CostTable,
        held: list[int],
        room: dict[str, int],
    ) -> tuple[float, list[tuple[int, int]], list[str]]:
        s_count = len(states)
        full = s_count - 1  # the largest downset (all nodes) sorts last
        m = min(len(order), states[full].bit_count())
        best = [[math.inf] * s_count for _ in range(m + 1)]
        back = [[-1] * s_count for _ in range(m + 1)]
        best[0][0] = 0.0
        for k in range(1, m + 1):
            dev = order[k - 1]
            cd = cost_of[dev]
            for j in range(1, s_count):
                sj = states[j]
                for i in range(j):
                    prev = best[k - 1][i]
                    si = states[i]
                    if prev >= best[k][j] or si & sj != si or si == sj or held[j] - held[i] > room[dev]:
                        continue
                    comm = table.comm(cut[i], order[k - 2], dev) if k > 1 and cut[i] else 0.0
                    val = max(prev, cd[j] - cd[i] + comm)
                    if val < best[k][j]:
                        best[k][j], back[k][j] = val, i
        masks: list[tuple[int, int]] = []
        if not math.isfinite(best[m][full]):
            return math.inf, masks, order[:m]
        j = full
        for k in range(m, 0, -1):
            i = back[k][j]
            masks.append((states[i], states[j]))
            j = i
        masks.reverse()
        return best[m][full], masks, order[:m]


def _prefix_tables(
    n: int, work: dict[str, list[float]], tensors: list[tuple[int, int, int]], params: list[int]
) -> tuple[dict[str, list[float]], list[int], list[int]]:
    """Stage tables of the prefixes ``0..j-1`` of the topological order, j = 0..n, in
    O(V + E): op + dispatch time per device (summed in index order, as ``sum`` over
    the prefix does), bytes cut between prefix and rest, weights held."""
    cost_of = {d: list(accumulate(w, initial=0)) for d, w in work.items()}
    held = list(accumulate(params, initial=0))
    delta = [0] * (n + 2)  # a tensor is cut by prefixes j with producer < j <= last consumer
    for p, c, b in tensors:
        delta[p.bit_length()] += b
        delta[c.bit_length()] -= b
    cut = list(accumulate(delta[: n + 1]))
    return cost_of, cut, held


def _no_split(graph: Graph, table: CostTable, stages: list[str], room: dict[str, int]) -> str:
    """Why no split into ``stages`` (devices in pipeline order) fits: a node that fits
    none of them, else one whose op does not fit some stage's device, else the weights."""
    where = f"antichain-dp: no split of graph {graph.name!r} into stages on {', '.join(stages)} (in that order)"
    nodes = graph.nx.nodes
    for x in table.topo:
        misfit = [d for d in stages if math.isinf(table.w[x][d])]
        if misfit:
            need = size_text(nodes[x]["bytes"])
            return (f"{where} fits the devices' memory: node {x!r} needs {need}, more than "
                    + ", ".join(f"{d!r} has ({size_text(room[d])})" for d in misfit))
    total = sum(nodes[x]["param_bytes"] for x in table.topo)
    return (f"{where} keeps every stage's weights within its device's memory "
            f"({size_text(total)} of weights; {', '.join(f'{d}: {size_text(room[d])}' for d in stages)})")
