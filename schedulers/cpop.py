"""CPOP: Critical-Path-On-a-Processor.

H. Topcuoglu, S. Hariri, M.-Y. Wu, "Performance-Effective and Low-Complexity Task
Scheduling for Heterogeneous Computing", IEEE TPDS 13(3), 2002, section 4.2.

Priority of a node = upward rank + downward rank (mean costs). The nodes whose
priority equals the entry's (|CP|) form the critical path; the device minimising
the critical path's total op time is the critical-path processor. Ready nodes are
taken in decreasing priority; critical-path nodes go to the critical-path
processor, the others to their earliest-finish device (insertion-based).
Complexity as HEFT (:mod:`schedulers.heft`: the insertion search through a gap
index per stream, near-linear) plus O(V log V) for the ready queue.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hetsim.schedulers.base import (
    CostTable,
    Scheduler,
    downward_rank,
    quantize,
    ready_order,
    upward_rank,
)
from hetsim.schedulers.eft_state import EFTState
from hetsim.sim.plan import Plan

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.base import CostModel
    from hetsim.costmodel.platform import Platform
    from hetsim.graphs.graph import Graph


class CPOP(Scheduler):
    """Critical-Path-On-a-Processor (Topcuoglu et al. 2002).

    Parameters
    ----------
    insertion
        Insertion-based EFT for the off-critical-path nodes (the paper's policy).
    contention
        Model link and host-dispatch contention in the EFT estimate.
    """

    name = "cpop"

    def __init__(self, *, insertion: bool = True, contention: bool = False) -> None:
        self.insertion = insertion
        self.contention = contention

    def _schedule(self, graph: Graph, platform: Platform, cost: CostModel) -> Plan:
        table = CostTable(graph, platform, cost)
        up, down = upward_rank(table), downward_rank(table)
        q = quantize({n: up[n] + down[n] for n in table.topo})
        g = graph.nx
        # critical path: from the entry of highest priority, follow equal-priority successors
        entries = [n for n in table.topo if g.in_degree(n) == 0]
        node = max(entries, key=lambda n: (q[n], -table.index[n]))
        cp_len = q[node]
        path = [node]
        while True:
            nxt = [s for s in g.successors(node) if q[s] == cp_len]
            if not nxt:
                break
            node = min(nxt, key=table.index.__getitem__)
            path.append(node)
        cp = set(path)
        cp_dev = min(table.devices, key=lambda d: table.total(d, path))
        state = EFTState(table, insertion=self.insertion, contention=self.contention)
        for n in ready_order(graph, lambda n: -q[n]):
            state.assign(n, cp_dev if n in cp else state.best_device(n)[0])
        return state.to_plan(critical_path=path, critical_path_device=cp_dev)
