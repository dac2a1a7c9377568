"""PEFT: Predict Earliest Finish Time.

H. Arabnejad, J. G. Barbosa, "List Scheduling Algorithm for Heterogeneous Systems
by an Optimistic Cost Table", IEEE TPDS 25(3):682-694, 2014.

The optimistic cost table ``OCT(n, p)`` is the length of the shortest path from
``n``'s successors to the exit when ``n`` runs on ``p``, every later node taking
its best device, transfers priced at their mean (zero on the same device):
``OCT(n, p) = max_s min_q [OCT(s, q) + w(s, q) + (cbar(n, s) if q != p else 0)]``.
Nodes are ranked by the mean of their OCT row; the ready node of highest rank goes
to the device minimising ``EFT(n, p) + OCT(n, p)`` (insertion-based EFT).
Complexity O(E x D^2) for the table plus the EFT evaluations, as HEFT (the
insertion search through a gap index per stream, near-linear).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from hetsim.schedulers.base import CostTable, Scheduler, quantize, ready_order
from hetsim.schedulers.eft_state import EFTState
from hetsim.sim.plan import Plan

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.base import CostModel
    from hetsim.costmodel.platform import Platform
    from hetsim.graphs.graph import Graph


def optimistic_cost_table(table: CostTable) -> dict[str, dict[str, float]]:
    """PEFT's OCT, ``oct[node][device]`` (eq. 1 of the paper)."""
    devs = table.devices
    g = table.graph.nx
    oct_: dict[str, dict[str, float]] = {}
    for n in reversed(table.topo):
        row = dict.fromkeys(devs, 0.0)
        for s in g.successors(n):
            c = table.mean_comm(table.edge_bytes(n, s))
            via = {q: oct_[s][q] + table.w[s][q] for q in devs}
            for p in devs:
                best = min(via[q] + (0.0 if q == p else c) for q in devs)
                row[p] = max(row[p], best)
        oct_[n] = row
    return oct_


class PEFT(Scheduler):
    """Predict Earliest Finish Time (Arabnejad & Barbosa 2014).

    Parameters
    ----------
    insertion
        Insertion-based EFT (the paper's policy).
    contention
        Model link and host-dispatch contention in the EFT estimate.
    """

    name = "peft"

    def __init__(self, *, insertion: bool = True, contention: bool = False) -> None:
        self.insertion = insertion
        self.contention = contention

    def _schedule(self, graph: Graph, platform: Platform, cost: CostModel) -> Plan:
        table = CostTable(graph, platform, cost)
        oct_ = optimistic_cost_table(table)
        rank = {n: sum(r.values()) / len(r) for n, r in oct_.items()}
        q = quantize(rank)
        state = EFTState(table, insertion=self.insertion, contention=self.contention)
        for n in ready_order(graph, lambda n: -q[n]):
            best, best_val = table.devices[0], math.inf
            for d in table.devices:
                val = state.eft(n, d)[1] + oct_[n][d]
                if val < best_val:
                    best, best_val = d, val
            state.assign(n, best)
        return state.to_plan()
