"""The critical path of a simulated schedule: which records decided the makespan.

A record (an op, a transfer hop or a host dispatch of
:attr:`SimResult.records <sim.result.SimResult.records>`) starts either at time 0
or the moment something it waited for ended: an input (its producer's op, the
tensor's last transfer hop, its own dispatch) or the previous job of its server
(the same device stream, link direction or dispatch lane). Walking back from the
records that end at the makespan through such predecessors gives the critical
path, and the *resource waits* on it (a record that waited for another job of its
server, rather than for its data) are where reordering can help. A change of the
plan that touches no node of the path leaves it in place (up to the simulator's
list-scheduling anomalies), which is why local search moves only its nodes: the
classic critical-path neighbourhood of job-shop scheduling (van Laarhoven, Aarts,
Lenstra, "Job Shop Scheduling by Simulated Annealing", Operations Research 40(1),
1992; Nowicki and Smutnicki, "A Fast Taboo Search Algorithm for the Job Shop
Problem", Management Science 42(6), 1996).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.graphs.graph import Graph

__all__ = ["CriticalPath", "critical_path_of"]


@dataclass
class CriticalPath:
    """Records on the critical path(s) of one request of a simulation.

    Attributes
    ----------
    records
        The critical records, latest first (all tied paths).
    nodes
        Graph nodes they involve: an op's or dispatch's node, a transfer's
        producer, in first-seen order.
    waits
        ``(record, blocker)`` pairs of the path where ``record`` (an op, its
        dispatch, or a transfer) waited for ``blocker``, an earlier op of the same
        device stream or an earlier transfer of the same link direction, for
        another node.
    """

    records: list[Mapping[str, Any]] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    waits: list[tuple[Mapping[str, Any], Mapping[str, Any]]] = field(default_factory=list)


def critical_path_of(records: Sequence[Mapping[str, Any]], graph: Graph, *, request: int = 0) -> CriticalPath:
    """The critical path of request ``request`` in a simulation's ``records``.

    Parameters
    ----------
    records
        ``SimResult.records`` (a simulation with ``record=True``).
    graph
        The simulated graph (for its edges: an op waits for its predecessors).
    request
        Which request's path.

    Notes
    -----
    O(R log R) for R records: one sort by end time, and each record on the path
    looks up the records that ended when it started (a bisection).
    """
    recs = [r for r in records if r.get("request", 0) == request]
    if not recs:
        return CriticalPath()
    recs.sort(key=lambda r: r["end"])
    ends = [float(r["end"]) for r in recs]
    makespan = ends[-1]
    eps = 1e-12 + 1e-9 * abs(makespan)
    pred = graph.nx.pred
    stream_of = {r["node"]: (r["resource"], r["stream"]) for r in recs if r["kind"] == "op"}

    def stream_wait(r: Mapping[str, Any], x: Mapping[str, Any]) -> bool:
        """``r`` waited for ``x``, an earlier job of its device stream or link direction."""
        if x["node"] == r["node"] or x["kind"] == "dispatch":
            return False
        if r["kind"] == "dispatch":  # a dispatch waits for its op's stream to be free
            return x["kind"] == "op" and stream_of.get(r["node"]) == (x["resource"], x["stream"])
        return x["kind"] == r["kind"] and x["resource"] == r["resource"] and x["stream"] == r["stream"]

    def related(r: Mapping[str, Any], x: Mapping[str, Any]) -> bool:
        if x is r:
            return False
        if stream_wait(r, x):
            return True
        if x["resource"] == r["resource"] and (x["stream"] == r["stream"] or r["kind"] == "dispatch"):
            return True
        node, xn = r["node"], x["node"]
        if r["kind"] == "transfer":  # its producer's op, or its own previous hop
            return xn == node and (x["kind"] == "op" or x["kind"] == "transfer" and x["name"] == r["name"])
        if xn == node:  # an op's own dispatch
            return x["kind"] == "dispatch" and r["kind"] == "op"
        return node is not None and (xn is None or xn in pred[node])

    out = CriticalPath()
    seen_nodes: set[str] = set()
    lo = bisect.bisect_left(ends, makespan - eps)
    frontier = list(range(lo, len(recs)))
    visited = set(frontier)
    while frontier:
        i = frontier.pop()
        r = recs[i]
        out.records.append(r)
        node = r["node"]
        if node is not None and node not in seen_nodes:
            seen_nodes.add(node)
            out.nodes.append(node)
        start = float(r["start"])
        if start <= eps:
            continue
        a = bisect.bisect_left(ends, start - eps)
        b = bisect.bisect_right(ends, start + eps)
        for j in range(a, b):
            x = recs[j]
            if not related(r, x):
                continue
            if stream_wait(r, x):
                out.waits.append((r, x))
            if j not in visited:
                visited.add(j)
                frontier.append(j)
    return out
