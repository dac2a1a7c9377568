"""Integer-indexed tables that :mod:`sim.engine` builds before the SimPy run.

The hot loop of the engine touches no networkx and no string-keyed dicts: every
node, device and link direction is an int, and everything that does not depend on
time (successor lists, tensor sizes, routes, static op times, fan-out of a tensor
to devices) is computed here, once per :func:`sim.engine.simulate` call.

Node numbering: ops ``0..n_ops-1`` in the graph's deterministic topological order,
then one pseudo-node per graph input (``n_ops..``), placed on the platform host and
"finished" when a request arrives.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from heapq import heappop, heappush
from typing import TYPE_CHECKING, Any

from hetsim.graphs.graph import check_io, tensor_bytes

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.graphs.graph import Graph
    from hetsim.sim.plan import Plan
    from hetsim.sim.platform import Link, Platform

__all__ = [
    "Fanout",
    "Group",
    "PrepError",
    "Prepared",
    "build_fanout",
    "check_time",
    "prepare",
    "route",
]

_NO_RANK = 1 << 62


class PrepError(ValueError):
    """Malformed graph metadata or cost model output (re-raised as SimulationError)."""


@dataclass(slots=True)
class Group:
    """One tensor (output ``k`` of a producer) sent to one destination device."""

    k: int
    dst: int
    hops: tuple[int, ...]  # link-direction resource indices, in order
    times: tuple[float, ...]  # transfer time of each hop
    nbytes: int
    consumers: list[int]  # static consumers on dst (decremented on arrival)
    is_output: bool  # also the graph output delivered to the host
    rank: int  # priority of the most urgent consumer (queue order on links)


@dataclass(slots=True)
class Fanout:
    """What happens around producer ``u`` placed on device ``du``."""

    alloc: list[tuple[int, int, int]]  # (k, size, refs) of buffers allocated on du at start
    dead: list[tuple[int, int]]  # (k, size) of outputs nobody reads: freed at finish
    held: list[int]  # outputs kept on du (host domain) until the request ends
    local: list[int]  # static successors in du's memory domain (one entry per edge)
    handoff: list[tuple[int, float]]  # (successor, delay): on another device of du's domain
    dyn: list[int]  # dynamically placed successors
    groups: list[Group]  # cross-domain transfers, one per (output, destination device)
    total: int = 0  # bytes allocated on du when u starts (alloc and dead)
    dead_total: int = 0  # bytes freed when u finishes


@dataclass
class Prepared:
    """Static, integer-indexed description of one simulation."""

    names: list[str]  # node ids, then graph input names
    n_ops: int
    index: dict[str, int]
    preds: list[list[tuple[int, int]]]  # op -> [(producer, output)], pseudo inputs included
    succs: list[list[tuple[int, int]]]  # producer -> [(consumer, output)]
    out_size: list[dict[int, int]]  # producer -> output index -> bytes
    graph_outputs: list[list[int]]  # producer -> output indices that are graph outputs
    rank: list[int]  # op -> position in the plan's (priority, topo index) order
    order: list[int]  # rank -> op
    loc0: list[int]  # static device per node (-1: chosen by the policy)
    params: list[int]
    dev_names: list[str]
    streams: list[int]
    capacity: list[int]
    domain_same: list[list[bool]]
    host: int
    res_names: list[str]  # link-direction resources
    res_links: list[Link]
    routes: dict[tuple[int, int], tuple[tuple[int, ...], tuple[Link, ...]]] = field(
        default_factory=dict
    )
    res_index: dict[str, int] | None = None  # resource name -> index, built on first route


def prepare(graph: Graph, platform: Platform, plan: Plan) -> Prepared:
    """Index the graph, the placement and the platform's resources.

    Raises :class:`graphs.GraphError` for malformed graph inputs or outputs
    (:func:`graphs.graph.check_io`).
    """
    check_io(graph)
    nxg = graph.nx
    ins_names = list(nxg)  # insertion order
    n = len(ins_names)
    ins_index = {name: i for i, name in enumerate(ins_names)}
    ins_data = [d for _, d in nxg.nodes(data=True)]
    adj = [
        [(ins_index[v], int(d.get("output", 0)), int(d["bytes"])) for v, d in nbrs.items()]
        for _, nbrs in nxg.adjacency()
    ]
    # Kahn's algorithm, smallest insertion index first: the same deterministic
    # order as Graph.topological_order(), on ints.
    indeg = [0] * n
    for lst in adj:
        for v, _, _ in lst:
            indeg[v] += 1
    heap = [i for i in range(n) if indeg[i] == 0]
    topo_ins: list[int] = []
    while heap:
        i = heappop(heap)
        topo_ins.append(i)
        for v, _, _ in adj[i]:
            indeg[v] -= 1
            if indeg[v] == 0:
                heappush(heap, v)
    if len(topo_ins) < n:
        graph.topological_order()  # raises GraphError naming the cycle
    pos = [0] * n
    for t, i in enumerate(topo_ins):
        pos[i] = t
    topo = [ins_names[i] for i in topo_ins]
    data = [ins_data[i] for i in topo_ins]
    index = {name: t for t, name in enumerate(topo)}
    preds: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    out_size: list[dict[int, int]] = []
    for d in data:
        out_size.append(
            {k: tensor_bytes(spec["shape"], spec["dtype"]) for k, spec in enumerate(d["outputs"])}
        )
    succs: list[list[tuple[int, int]]] = []
    for t, i in enumerate(topo_ins):
        out: list[tuple[int, int]] = []
        edge_sizes: dict[int, int] = {}
        for v, k, b in adj[i]:
            pv = pos[v]
            preds[pv].append((t, k))  # in increasing producer index: sorted
            out.append((pv, k))
            if b > edge_sizes.get(k, -1):
                edge_sizes[k] = b
        if edge_sizes:  # the edges' size of a tensor wins over its shape
            out_size[t].update(edge_sizes)
        succs.append(out)

    names = list(topo)
    inputs = graph.meta.get("inputs") or []
    for j, spec in enumerate(inputs):
        name = str(spec.get("name", f"input{j}"))
        p = n + j
        names.append(name)
        out_size.append({0: int(spec["bytes"])})
        succs.append([])
        seen: set[int] = set()
        for c in spec.get("consumers") or []:
            ci = index[c]
            if ci not in seen:
                seen.add(ci)
                preds[ci].append((p, 0))
                succs[p].append((ci, 0))
    n_all = len(names)

    graph_outputs: list[list[int]] = [[] for _ in range(n_all)]
    for spec in graph.meta.get("outputs") or []:
        node = spec.get("node")
        i, k = index[node], int(spec.get("output", 0))
        if k not in graph_outputs[i]:
            graph_outputs[i].append(k)
            graph_outputs[i].sort()
        if k not in out_size[i]:
            out_size[i][k] = int(spec.get("bytes", 0))

    prio = plan.priority
    if prio:
        keyed = sorted(range(n), key=lambda i: (float(prio.get(topo[i], i)), i))
    else:
        keyed = list(range(n))
    rank = [0] * n
    for r, i in enumerate(keyed):
        rank[i] = r

    dev_names = platform.device_names
    dev_index = {d: i for i, d in enumerate(dev_names)}
    host = dev_index[platform.host]
    loc0 = [dev_index[plan.placement[u]] if u in plan.placement else -1 for u in topo]
    loc0 += [host] * (n_all - n)
    params = [int(d["param_bytes"]) for d in data] + [0] * (n_all - n)
    domain_same = [[platform.shares_memory(a, b) for b in dev_names] for a in dev_names]

    resources = platform.link_resources()
    res_names = [name for name, _ in resources]
    res_links = [link for _, link in resources]
    devs = platform.devices
    return Prepared(
        names=names,
        n_ops=n,
        index=index,
        preds=preds,
        succs=succs,
        out_size=out_size,
        graph_outputs=graph_outputs,
        rank=rank,
        order=keyed,
        loc0=loc0,
        params=params,
        dev_names=dev_names,
        streams=[d.streams for d in devs],
        capacity=[d.memory_bytes for d in devs],
        domain_same=domain_same,
        host=host,
        res_names=res_names,
        res_links=res_links,
    )


def route(
    prep: Prepared, platform: Platform, src: int, dst: int
) -> tuple[tuple[int, ...], tuple[Link, ...]]:
    """Link-direction resources (and links) a tensor crosses from ``src`` to ``dst``
    (:meth:`sim.platform.Platform.link_directions`, as resource indices)."""
    key = (src, dst)
    hit = prep.routes.get(key)
    if hit is not None:
        return hit
    names = prep.dev_names
    if prep.res_index is None:
        prep.res_index = {name: i for i, name in enumerate(prep.res_names)}
    hops = platform.link_directions(names[src], names[dst])
    out = (tuple(prep.res_index[res] for res, _ in hops), tuple(link for _, link in hops))
    prep.routes[key] = out
    return out


def build_fanout(
    prep: Prepared,
    platform: Platform,
    transfer_time: Callable[[int, Any], float],
    u: int,
    du: int,
    loc: list[int],
) -> Fanout:
    """Fan-out of producer ``u`` on ``du``: local successors, transfers, buffers.

    ``loc`` gives the static device of each node (-1 when a policy places it).
    Each static consumer on another memory domain gets its input through a
    :class:`Group`: one transfer per (output, destination device), however many
    consumers read it there.
    """
    same = prep.domain_same[du]
    refs: dict[int, int] = {}
    local: list[int] = []
    handoff: list[tuple[int, float]] = []
    # graph inputs (u >= n_ops) are in place when a request starts: nobody waits on them
    delay = [float(d.handoff_s) if u < prep.n_ops else 0.0 for d in platform.devices]
    dyn: list[int] = []
    groups: dict[tuple[int, int], Group] = {}
    rank = prep.rank
    for v, k in prep.succs[u]:
        dv = loc[v]
        if dv >= 0 and not same[dv]:
            g = groups.get((k, dv))
            if g is None:
                g = groups[(k, dv)] = _group(prep, platform, transfer_time, u, k, du, dv)
                refs[k] = refs.get(k, 0) + 1  # the transfer reads the source copy
            g.consumers.append(v)
            if rank[v] < g.rank:
                g.rank = rank[v]
            continue
        refs[k] = refs.get(k, 0) + 1
        if dv < 0:
            dyn.append(v)
        elif dv != du and delay[dv] > 0.0:
            handoff.append((v, delay[dv]))
        else:
            local.append(v)
    held: list[int] = []
    for k in prep.graph_outputs[u]:
        if same[prep.host]:
            held.append(k)
            refs[k] = refs.get(k, 0) + 1
            continue
        g = groups.get((k, prep.host))
        if g is None:
            g = groups[(k, prep.host)] = _group(prep, platform, transfer_time, u, k, du, prep.host)
            refs[k] = refs.get(k, 0) + 1
        g.is_output = True
    alloc: list[tuple[int, int, int]] = []
    dead: list[tuple[int, int]] = []
    sizes = prep.out_size[u]
    for k in sorted(sizes) if len(sizes) > 1 else sizes:
        if k in refs:
            alloc.append((k, sizes[k], refs[k]))
        else:
            dead.append((k, sizes[k]))
    ordered = [groups[key] for key in sorted(groups)] if groups else []
    for g in ordered:  # an output-only transfer queues with its producer's priority
        if g.rank == _NO_RANK:
            g.rank = rank[u] if u < prep.n_ops else 0
    dead_total = sum(size for _, size in dead)
    total = dead_total + sum(size for _, size, _ in alloc)
    return Fanout(alloc, dead, held, local, handoff, dyn, ordered, total, dead_total)


def _group(
    prep: Prepared,
    platform: Platform,
    transfer_time: Callable[[int, Any], float],
    u: int,
    k: int,
    du: int,
    dv: int,
) -> Group:
    hops, links = route(prep, platform, du, dv)
    nbytes = prep.out_size[u].get(k, 0)
    times = tuple(
        check_time(transfer_time(nbytes, lk), f"transfer over {lk.name!r}") for lk in links
    )
    return Group(k, dv, hops, times, nbytes, [], False, _NO_RANK)


def check_time(t: Any, what: str) -> float:
    """A cost model's answer as a finite float >= 0, else :class:`PrepError`."""
    try:
        t = float(t)
    except (TypeError, ValueError):
        raise PrepError(f"cost model returned {t!r} for {what}") from None
    if not t >= 0 or t == float("inf"):
        raise PrepError(f"cost model returned {t!r} for {what} (need a finite time >= 0)")
    return t
