"""GPU segments of a static plan: the runs of a GPU's ops that launch as one CUDA graph.

:func:`launch_order` is the order in which the executor launches a static plan's
ops: a topological order of the graph that takes, among the ops whose inputs are
done, the one the plan ranks first (lowest ``(priority, topological index)``).
:func:`gpu_segments` cuts each GPU device's ops, in that order, into segments: a
new segment starts at an op that reads an input produced on another device, and
a segment ends at an op whose output another device reads. So only a segment's
first op waits for another device and only its last op is waited for by one; a
segment is launched (a CUDA-graph replay) once every input it reads from outside
is ready, and the segments and the other devices' ops form an acyclic graph (each
dependency between them goes from an earlier position of the launch order to a
later one), so no replay waits on its own output.

Graph inputs and outputs do not cut segments: graph inputs are copied to the GPU
when a request starts, and a graph output inside a segment is copied to the host
when its segment has run.

Examples
--------
>>> from hetsim.graphs.graph import Graph
>>> from hetsim.sim.plan import Plan
>>> from hetsim.sim.platform import Platform
>>> g = Graph()
>>> t = ([4], "float32")
>>> for n in "abcd":
...     g.add_op(n, "relu", inputs=[t], outputs=[t])
>>> for u, v in ("ab", "bc", "cd"):
...     g.add_edge(u, v)
>>> plan = Plan({"a": "gpu", "b": "gpu", "c": "cpu", "d": "gpu"})
>>> [s.nodes for s in gpu_segments(g, plan, Platform.preset("xeon-p2200"))["gpu"]]
[('a', 'b'), ('d',)]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from heapq import heappop, heappush
from typing import TYPE_CHECKING

from hetsim.sim.plan import PlanError

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.graphs.graph import Graph
    from hetsim.sim.plan import Plan
    from hetsim.sim.platform import Platform

__all__ = ["Segment", "SegmentRun", "gpu_segments", "launch_order", "segment_tables", "successors"]


@dataclass(frozen=True)
class Segment:
    """A run of one GPU device's ops launched as one CUDA graph.

    Attributes
    ----------
    device
        The platform GPU device.
    index
        Position among the device's segments (launch order).
    nodes
        Its ops in launch order; only the first reads an input produced on another
        device, only the last has an output another device reads.
    inputs
        What it reads from outside itself: ops of other segments or devices (in
        the order its ops first read them), then graph input names.
    outputs
        Its ops whose outputs are read outside it (other segments, other devices,
        graph outputs), in launch order.
    """

    device: str
    index: int
    nodes: tuple[str, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    @property
    def first(self) -> str:
        """Its first op (the one that names it in errors and launch records)."""
        return self.nodes[0]


def launch_order(graph: Graph, plan: Plan) -> list[str]:
    """The graph's nodes in the order a static plan launches them: among the nodes
    whose predecessors are all launched, the one of lowest ``(priority,
    topological index)`` first (Kahn's algorithm over a heap).

    Examples
    --------
    >>> from hetsim.graphs.graph import Graph
    >>> from hetsim.sim.plan import Plan
    >>> g = Graph()
    >>> for n in "abc":
    ...     g.add_op(n, "relu", inputs=[([1], "float32")], outputs=[([1], "float32")])
    >>> g.add_edge("a", "b")
    >>> launch_order(g, Plan({"a": "cpu", "b": "cpu", "c": "gpu"}, {"a": 2, "b": 3, "c": 1}))
    ['c', 'a', 'b']
    """
    topo = graph.topological_order()
    index = {n: i for i, n in enumerate(topo)}
    prio = plan.priority
    indeg = {n: graph.nx.in_degree(n) for n in topo}
    heap: list[tuple[float, int, str]] = []
    for n in topo:
        if indeg[n] == 0:
            heappush(heap, (float(prio.get(n, index[n])), index[n], n))
    out: list[str] = []
    while heap:
        _, _, u = heappop(heap)
        out.append(u)
        for v in graph.nx.successors(u):
            indeg[v] -= 1
            if indeg[v] == 0:
                heappush(heap, (float(prio.get(v, index[v])), index[v], v))
    return out


def gpu_segments(graph: Graph, plan: Plan, platform: Platform) -> dict[str, list[Segment]]:
    """GPU device -> its segments in launch order (see the module docstring); devices
    with no op have none.

    Raises
    ------
    PlanError
        For a dynamic plan (its placement is decided at run time: there is nothing
        to cut before it runs), or a node the plan does not place.
    """
    if plan.policy is not None:
        raise PlanError("a dynamic plan places its ops at run time: it has no GPU segments to capture")
    placement = plan.placement
    missing = [n for n in graph.nx if n not in placement]
    if missing:
        raise PlanError(f"the plan places no device for node {missing[0]!r}")
    gpus = {d.name for d in platform.devices if d.kind == "gpu"}
    nx = graph.nx
    runs: dict[str, list[list[str]]] = {}
    open_run: dict[str, list[str] | None] = {}
    for v in launch_order(graph, plan):
        d = placement[v]
        if d not in gpus:
            continue
        cur = open_run.get(d)
        if cur is None or any(placement[p] != d for p in nx.predecessors(v)):
            cur = []
            runs.setdefault(d, []).append(cur)
        cur.append(v)
        open_run[d] = None if any(placement[s] != d for s in nx.successors(v)) else cur
    graph_inputs: dict[str, list[str]] = {}
    for spec in graph.meta.get("inputs") or []:
        for c in spec.get("consumers") or []:
            graph_inputs.setdefault(str(c), []).append(str(spec.get("name")))
    graph_outputs = {str(o["node"]) for o in graph.meta.get("outputs") or []}
    out: dict[str, list[Segment]] = {}
    for d in sorted(runs, key=[x.name for x in platform.devices].index):
        for i, nodes in enumerate(runs[d]):
            members = set(nodes)
            inputs: list[str] = []
            names: list[str] = []
            for v in nodes:
                inputs += [p for p in nx.predecessors(v) if p not in members and p not in inputs]
                names += [x for x in graph_inputs.get(v, []) if x not in names]
            outputs = [v for v in nodes
                       if v in graph_outputs or any(s not in members for s in nx.successors(v))]
            out.setdefault(d, []).append(Segment(d, i, tuple(nodes), tuple(inputs + names), tuple(outputs)))
    return out


# ------------------------------------------------------------- engine tables
@dataclass(frozen=True)
class SegmentRun:
    """A :class:`Segment` as the executor's engine runs it (op and producer indices).

    Attributes
    ----------
    id
        Its position among all segments of the plan.
    members
        Its ops' indices in launch order.
    reads
        ``(producer index, output)`` of every value it reads from outside itself.
    first, name
        Its first op's name, and ``"graph <first>..<last>"`` (launch records).
    """

    id: int
    members: tuple[int, ...]
    reads: tuple[tuple[int, int], ...]
    first: str
    name: str


def successors(reads: Sequence[Mapping[int, list[int]]], size: int) -> list[list[int]]:
    """Producer index -> the ops that read it, from each op's reads
    (``reads[v]``: producer index -> its outputs ``v`` reads)."""
    succs: list[list[int]] = [[] for _ in range(size)]
    for v, r in enumerate(reads):
        for p in r:
            succs[p].append(v)
    return succs


def segment_tables(
    reads: Sequence[Mapping[int, list[int]]], segments: Mapping[str, Sequence[Segment]], index: Mapping[str, int],
    size: int,
) -> tuple[tuple[list, list, list], list[SegmentRun | None]]:
    """The dependency tables of a run that launches ``segments`` as units, from the
    ops' own ``reads`` (op index -> producer index -> outputs read; ``size``: ops and
    graph inputs): a segment's first op (its head) reads everything its members
    read from outside it, its other members are never ready on their own, and an
    edge inside a segment is no dependency (stream order keeps it).

    Returns
    -------
    ((reads, successors, predecessor counts), segment of each head op or None)

    Examples
    --------
    >>> seg = Segment("gpu", 0, ("a", "b"), ("x",), ("b",))
    >>> (r, s, n), at = segment_tables([{2: [0]}, {0: [0]}], {"gpu": [seg]}, {"a": 0, "b": 1, "x": 2}, 3)
    >>> r, s, n[1] > 1 << 20, at[0].name, at[0].reads
    ([{2: [0]}, {}], [[], [], [0]], True, 'graph a..b', ((2, 0),))
    """
    n = len(reads)
    out = [dict(r) for r in reads]
    at: list[SegmentRun | None] = [None] * n
    waiting: set[int] = set()
    sid = 0
    for segs in segments.values():
        for seg in segs:
            members = tuple(index[x] for x in seg.nodes)
            inside = set(members)
            merged: dict[int, list[int]] = {}
            for v in members:
                for p, ks in reads[v].items():
                    if p not in inside:
                        have = merged.setdefault(p, [])
                        have += [k for k in ks if k not in have]
                out[v] = {}
            head = members[0]
            out[head] = merged
            waiting.update(members[1:])
            at[head] = SegmentRun(sid, members, tuple((p, k) for p, ks in merged.items() for k in ks), seg.first,
                                  f"graph {seg.first}..{seg.nodes[-1]}" if len(members) > 1 else f"graph {seg.first}")
            sid += 1
    npred = [(1 << 30) if v in waiting else len(out[v]) for v in range(n)]
    return (out, successors(out, size), npred), at
