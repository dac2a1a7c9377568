"""The deterministic topological order of a graph's nodes, on their numbers: the one
:meth:`graphs.Graph.topological_order` gives (ties broken by insertion order), used on
ints by the graph's checks (:mod:`graphs.bulk_check`) and the simulator's tables."""

from __future__ import annotations

import heapq

__all__ = ["first_ready_order"]


def first_ready_order(succ: list[list[int]]) -> list[int]:
    """Kahn's algorithm on nodes ``0..len(succ)-1`` (``succ[i]``: the successors of
    ``i``), the ready node of the smallest number first; shorter than ``succ`` when the
    graph has a cycle (the nodes on and after it left out)."""
    indeg = [0] * len(succ)
    for lst in succ:
        for j in lst:
            indeg[j] += 1
    ready = [i for i, d in enumerate(indeg) if not d]  # ascending: a heap
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for j in succ[i]:
            indeg[j] -= 1
            if not indeg[j]:
                heapq.heappush(ready, j)
    return order
