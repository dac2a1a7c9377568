"""Integer-indexed tables that :mod:`sim.engine.simulator` builds before the SimPy run.

The hot loop of the engine touches no networkx and no string-keyed dicts: every
node, device and link direction is an int, and everything that does not depend on
time (successor lists, tensor sizes, routes, static op times, the fan-out of a
tensor to devices, the buffers each op reads) is computed here, in one pass over
the nodes and one over the edges (O(V + E); no sort when the graph's insertion
order is already topological, as importers and builders write it): what depends on
the graph alone once per :class:`sim.engine.simulator.Simulator` (:func:`index_graph`), the
rest once per simulation (:func:`prepare`). The ops' out-edges are also kept in CSR
form (each op's readers, each edge's producer and reader as arrays), so that the ops
whose readers all sit on their own device, the common case, are found in one numpy
pass per plan and share their reader list (:func:`static_fanouts`).

Node numbering: ops ``0..n_ops-1`` in the graph's deterministic topological order,
then one pseudo-node per graph input (``n_ops..``), placed on the platform host and
"finished" when a request arrives.

Buffers: a copy of output ``k`` of node ``p`` on device ``d`` is the int
``(p * n_out + k) * n_dev + d`` (:meth:`Prepared.buffer`), the key of the
per-request reference counts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import chain
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from hetsim.graphs.bulk_check import EdgeColumns
from hetsim.graphs.graph import DTYPE_BYTES, check_io, tensor_bytes
from hetsim.graphs.topo_order import first_ready_order

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.graphs.graph import Graph
    from hetsim.sim.plan import Plan
    from hetsim.sim.platform import Link, Platform

__all__ = [
    "EMPTY",
    "Fanout",
    "GraphTables",
    "Group",
    "PrepError",
    "Prepared",
    "build_fanout",
    "check_time",
    "index_graph",
    "prepare",
    "priced_route",
    "route",
]

_NO_RANK = 1 << 62
#: the shared empty fan-out list (most ops have no transfers, handoffs or held outputs)
EMPTY: tuple = ()


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
    """What happens around producer ``u`` placed on device ``du``.

    ``alloc`` holds ``(buffer, size, refs)`` of the outputs allocated on ``du``
    when ``u`` starts that someone reads (``refs`` readers: local consumer edges,
    transfers, the host keeping a graph output).
    """

    alloc: list[tuple[int, int, int]]
    held: list[int]  # buffers kept on du (host domain) until the request ends
    local: list[int] | tuple  # static successors in du's memory domain (one entry per edge)
    handoff: list[tuple[int, float]] | tuple  # (successor, delay): another device of du's domain
    dyn: list[int] | tuple  # dynamically placed successors
    groups: list[Group] | tuple  # cross-domain transfers, one per (output, destination device)
    total: int = 0  # bytes allocated on du when u starts (read and unread outputs)
    dead_total: int = 0  # bytes of the unread outputs, freed when u finishes


@dataclass
class Prepared:
    """Static, integer-indexed description of one simulation."""

    names: list[str]  # node ids, then graph input names
    n_ops: int
    index: dict[str, int]
    out_size: list[dict[int, int]]  # producer -> output index -> bytes
    graph_outputs: dict[int, list[int]]  # producer -> output indices that are graph outputs
    rank: list[int]  # op -> position in the plan's (priority, topo index) order
    order: list[int]  # rank -> op
    loc0: list[int]  # static device per node (-1: chosen by the policy)
    params: list[int]
    node_data: list[dict[str, Any]]  # op -> its networkx attribute dict
    dev_names: list[str]
    streams: list[int]
    capacity: list[int]
    domain_same: list[list[bool]]
    host: int
    res_names: list[str]  # link-direction resources
    res_links: list[Link]
    n_out: int = 1  # outputs per node in buffer numbering (largest output index + 1)
    # loc0, rank and order as int64 arrays
    loc_array: np.ndarray | None = None
    rank_array: np.ndarray | None = None
    order_array: np.ndarray | None = None
    # the ops' out-edges in CSR form (GraphTables): each op's readers, one per edge, and
    # each edge's producer and reader as arrays
    edge_src: np.ndarray | None = None
    edge_dst: np.ndarray | None = None
    routes: dict[tuple[int, int], tuple[tuple[int, ...], tuple[Link, ...]]] = field(
        default_factory=dict
    )
    res_index: dict[str, int] | None = None  # resource name -> index, built on first route
    tables: Any = None  # the GraphTables this was prepared over (:func:`prepare`)

    @property
    def preds(self) -> list[list[tuple[int, int]]]:
        """Op -> ``[(producer, output)]``, pseudo inputs included (:class:`GraphTables`)."""
        return self.tables.preds

    @property
    def succs(self) -> list[list[tuple[int, int]]]:
        """Producer -> ``[(consumer, output)]``."""
        return self.tables.succs

    @property
    def readers(self) -> list[list[int]]:
        """Op -> the reader of each of its out-edges."""
        return self.tables.readers

    def buffer(self, p: int, k: int, d: int) -> int:
        """The key of the copy of output ``k`` of node ``p`` on device ``d``."""
        return (p * self.n_out + k) * len(self.dev_names) + d

    def unbuffer(self, key: int) -> tuple[int, int, int]:
        """``(p, k, d)`` of a buffer key."""
        rest, d = divmod(key, len(self.dev_names))
        p, k = divmod(rest, self.n_out)
        return p, k, d


def _link(
    rows: Iterable[dict[Any, dict[str, Any]]], index: dict[Any, int], out_size: list[dict[int, int]]
) -> tuple[list[list[tuple[int, int]]], list[list[tuple[int, int]]]] | None:
    """Successors and predecessors ``(node, output)`` of each node, in one pass over
    ``rows`` (each node's out-edges, in topological order; ``index``: a node's
    position in it); sets ``out_size`` from the edges (an edge's size of a tensor
    wins over its shape; the largest of several). None, with ``out_size`` partly
    set, when an edge does not go forward: ``rows`` is not in topological order."""
    n = len(index)
    preds: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    succs: list[list[tuple[int, int]]] = []
    append = succs.append
    for t, nbrs in enumerate(rows):
        if not nbrs:
            append([])
            continue
        out = []
        sizes = out_size[t]
        several = len(nbrs) > 1
        edge_sizes: dict[int, int] = {}
        for w, d in nbrs.items():
            v = index[w]
            if v <= t:
                return None
            k, b = d.get("output", 0), d["bytes"]
            if type(k) is not int:
                k = int(k)
            if type(b) is not int:
                b = int(b)
            out.append((v, k))
            preds[v].append((t, k))  # in increasing producer index: sorted
            if not several:
                sizes[k] = b
            elif b > edge_sizes.get(k, -1):
                edge_sizes[k] = b
        if several:
            sizes.update(edge_sizes)
        append(out)
    return succs, preds


def _link_columns(
    cols: EdgeColumns, out_size: list[dict[int, int]]
) -> tuple[Links, np.ndarray, tuple[np.ndarray, ...]] | None:
    """:func:`_link` of a graph whose edges all go forward in insertion order, from its
    :func:`graphs.bulk_check.edge_columns`: the lists (:class:`Links`, sliced from whole
    columns when first read), the sizes set per (producer, output) group, each
    edge's output index as an array, and the groups' producer, output and size arrays
    (by producer, then output) (None, nothing set, when a column is not plain ints
    within int64: :func:`_link` then reads the edges one by one)."""
    n, ks, bs = len(cols.names), cols.outputs, cols.nbytes
    if bs is None or not cols.forward or (ks and not set(map(type, ks)) | set(map(type, bs)) <= {int}):
        return None
    try:
        k_arr = np.array(ks, dtype=np.int64)
        b_arr = np.array(bs, dtype=np.int64)
    except OverflowError:
        return None
    src, dst = cols.src, cols.dst
    groups: tuple[np.ndarray, ...] = (src[:0], k_arr[:0], b_arr[:0])
    if len(src):  # each (producer, output): the largest edge, set in the order the edges name them
        group = np.lexsort((np.arange(len(src)), k_arr, src))
        gs, gk = src[group], k_arr[group]
        starts = np.flatnonzero(np.r_[True, (gs[1:] != gs[:-1]) | (gk[1:] != gk[:-1])])
        biggest = np.maximum.reduceat(b_arr[group], starts)
        groups = (gs[starts], gk[starts], biggest)
        order = np.argsort(group[starts], kind="stable")  # by the position of each group's first edge
        for p, k, b in zip(groups[0][order].tolist(), groups[1][order].tolist(), biggest[order].tolist()):
            out_size[p][k] = b
    return Links(columns=(n, src, dst, cols.degree, k_arr)), k_arr, groups


class Links:
    """Each op's successors and predecessors ``(node, output)`` and readers, as lists:
    given, or sliced from the graph's edge columns on first use (a simulation replayed
    on arrays, :mod:`sim.engine.array_replay`, reads none of them)."""

    def __init__(self, succs: list | None = None, preds: list | None = None, readers: list | None = None,
                 columns: tuple | None = None) -> None:
        self.columns = columns
        self.lists = None if columns is not None else (succs, preds, readers)

    def get(self) -> tuple[list, list, list]:
        """``(succs, preds, readers)``."""
        if self.lists is None:
            n, src, dst, degree, k_arr = self.columns
            bounds = [0, *np.cumsum(degree).tolist()]
            heads = dst.tolist()
            pairs = list(zip(heads, k_arr.tolist()))
            succs = [pairs[bounds[t]:bounds[t + 1]] for t in range(n)]
            readers = [heads[bounds[t]:bounds[t + 1]] for t in range(n)]
            by_reader = np.argsort(dst, kind="stable")  # producers ascending for each reader, as _link appends
            rpairs = list(zip(src[by_reader].tolist(), k_arr[by_reader].tolist()))
            rbounds = np.searchsorted(dst[by_reader], np.arange(n + 1)).tolist()
            preds = [rpairs[rbounds[v]:rbounds[v + 1]] for v in range(n)]
            self.lists, self.columns = (succs, preds, readers), None
        return self.lists

    def in_degrees(self, n: int) -> np.ndarray:
        """Inputs of each of the ``n`` ops (from the columns while not sliced)."""
        if self.lists is None:
            return np.bincount(self.columns[2], minlength=n)
        return np.fromiter(map(len, self.lists[1]), dtype=np.int64, count=n)


def _columns(data: list[dict[str, Any]]) -> tuple[list[dict[int, int]], list[int]]:
    """Output index -> bytes of each node's declared outputs (:func:`tensor_bytes`),
    and each node's ``param_bytes``: a column at a time (``map``), then a pass over the
    nodes that declare outputs."""
    width, prod = DTYPE_BYTES, math.prod
    params: list[int] = list(map(itemgetter("param_bytes"), data))
    declared = list(map(itemgetter("outputs"), data))
    if not any(declared):  # none declared (synthetic graphs): the edges give the sizes
        out: list[dict[int, int]] = [{} for _ in declared]
        declared = []
    else:
        out = []
    append = out.append
    for outs in declared:
        if not outs:
            append({})
            continue
        if len(outs) == 1:
            spec = outs[0]
            w = width.get(spec["dtype"])
            if w is not None:  # shapes are lists of ints (graphs.validate)
                append({0: w * prod(spec["shape"])})
                continue
        append({k: tensor_bytes(spec["shape"], spec["dtype"]) for k, spec in enumerate(outs)})
    if not set(map(type, params)) <= {int}:
        params = [int(b) for b in params]
    return out, params


@dataclass
class GraphTables:
    """What every simulation of one graph reads from it (:func:`index_graph`), the
    graph's part of :class:`Prepared`; read-only once made, so that simulations of
    several plans share it (:class:`sim.engine.simulator.Simulator`)."""

    topo: list[str]  # node ids in topological order
    names: list[str]  # node ids, then graph input names
    index: dict[str, int]
    links: Links  # preds, succs and readers (properties below)
    out_size: list[dict[int, int]]
    graph_outputs: dict[int, list[int]]
    params: list[int]  # nodes, then 0 per graph input
    node_data: list[dict[str, Any]]
    n_out: int
    edge_src: np.ndarray  # the ops' out-edges (readers' order): producer, reader
    edge_dst: np.ndarray
    #: each edge's output index, when read as an array (from the graph's columns)
    edge_out: np.ndarray | None = None
    #: the array replay's tables of the graph (sim.engine.array_prep.graph_arrays), made on first use
    arrays: Any = None
    #: each (node, output) with a size: node, output, bytes (by node, then output), as
    #: arrays, when read from the columns (else None: from ``out_size``)
    out_arrays: tuple[np.ndarray, ...] | None = None
    #: the ops' ``params`` as int64, when that holds their sum (else None)
    param_array: np.ndarray | None = None

    @property
    def succs(self) -> list[list[tuple[int, int]]]:
        """Producer -> ``[(consumer, output)]`` (graph inputs included)."""
        return self.links.get()[0]

    @property
    def preds(self) -> list[list[tuple[int, int]]]:
        """Op -> ``[(producer, output)]``, pseudo inputs included."""
        return self.links.get()[1]

    @property
    def readers(self) -> list[list[int]]:
        """Op -> the reader of each of its out-edges (graph inputs not included)."""
        return self.links.get()[2]


def index_graph(graph: Graph, columns: EdgeColumns | None = None) -> GraphTables:
    """Number the nodes in a topological order and index their edges, tensor sizes and
    weights (O(V + E)); ``columns``: the graph's :func:`graphs.bulk_check.edge_columns`
    when read already.

    Raises :class:`graphs.GraphError` for malformed graph inputs or outputs
    (:func:`graphs.graph.check_io`) and for a cycle.
    """
    check_io(graph)
    nxg = graph.nx
    topo = list(nxg)  # insertion order: topological as importers and builders write it
    n = len(topo)
    index = columns.index if columns is not None else dict(zip(topo, range(n)))
    data = [d for _, d in nxg.nodes(data=True)]
    out_size, params = _columns(data)
    declared = any(out_size)  # else the edges give every size (_link_columns' groups)
    from_columns = _link_columns(columns, out_size) if columns is not None else None
    linked = from_columns[0] if from_columns is not None else None
    if linked is None and (columns is None or columns.forward):
        linked = _listed(_link((nbrs for _, nbrs in nxg.adjacency()), index, out_size))
    if linked is None:  # an edge goes backwards: renumber in topological order
        adj = [nbrs for _, nbrs in nxg.adjacency()]
        order = first_ready_order([[index[w] for w in nbrs] for nbrs in adj])
        if len(order) < n:
            graph.topological_order()  # raises GraphError naming the cycle
        topo = [topo[i] for i in order]
        data = [data[i] for i in order]
        index = dict(zip(topo, range(n)))
        out_size, params = _columns(data)
        declared = any(out_size)
        if columns is not None:
            columns = columns.renumbered(order)
            from_columns = _link_columns(columns, out_size)
            linked = from_columns[0] if from_columns is not None else None
        if linked is None:
            linked = _listed(_link((adj[i] for i in order), index, out_size))
        assert linked is not None  # every edge goes forward in a topological order
    n_out = 1
    for sizes in out_size:
        if len(sizes) > 1 or (sizes and 0 not in sizes):
            n_out = max(n_out, max(sizes) + 1)

    names = list(topo)
    inputs = graph.meta.get("inputs") or []
    if inputs:  # their edges are added to the lists
        succs, preds, _ = linked.get()
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

    graph_outputs: dict[int, list[int]] = {}
    for spec in graph.meta.get("outputs") or []:
        node = spec.get("node")
        i, k = index[node], int(spec.get("output", 0))
        ks = graph_outputs.setdefault(i, [])
        if k not in ks:
            ks.append(k)
            ks.sort()
        if k not in out_size[i]:
            out_size[i][k] = int(spec.get("bytes", 0))
            n_out = max(n_out, k + 1)
    params += [0] * (n_all - n)
    edge_out = out_arrays = None
    if from_columns is not None:  # the columns' edges are these, in this order
        edge_out = from_columns[1]
        if not declared and not inputs and not graph_outputs:  # every size is an edge group's
            out_arrays = from_columns[2]
        edge_src, edge_dst = columns.src, columns.dst
    else:
        succs, _, readers = linked.get()
        degree = np.fromiter(map(len, readers), dtype=np.int64, count=n)
        edge_src = np.repeat(np.arange(n, dtype=np.int64), degree)
        edge_dst = np.fromiter(chain.from_iterable(readers), dtype=np.int64, count=len(edge_src))
    return GraphTables(topo=topo, names=names, index=index, links=linked,
                       out_size=out_size, graph_outputs=graph_outputs, params=params,
                       node_data=data, n_out=n_out, edge_src=edge_src, edge_dst=edge_dst,
                       edge_out=edge_out, out_arrays=out_arrays, param_array=_int64_summable(params[:n]))


def _int64_summable(values: list[int]) -> np.ndarray | None:
    """``values`` (ints >= 0) as an int64 array when int64 holds their sum, else None."""
    try:
        arr = np.array(values, dtype=np.int64)
    except OverflowError:
        return None
    if len(arr) and (arr.min() < 0 or int(arr.max()) * len(arr) >= 1 << 62):
        return None
    return arr


def _listed(linked: tuple[list, list] | None) -> Links | None:
    """:class:`Links` of :func:`_link`'s lists (each op's readers taken from its successors)."""
    if linked is None:
        return None
    succs, preds = linked
    return Links(succs, preds, [[v for v, _ in lst] for lst in succs[:len(preds)]])


def prepare(tables: GraphTables, platform: Platform, plan: Plan) -> Prepared:
    """Index the placement and the platform's resources, over the graph's ``tables``
    (:func:`index_graph`, shared by every plan of the graph)."""
    topo, names, n = tables.topo, tables.names, len(tables.topo)
    n_all = len(names)
    prio = plan.priority
    if prio:
        keyed = sorted(range(n), key=lambda i: (float(prio.get(topo[i], i)), i))
        rank = [0] * n
        for r, i in enumerate(keyed):
            rank[i] = r
        order_array, rank_array = np.array(keyed, dtype=np.int64), np.array(rank, dtype=np.int64)
    else:
        keyed = list(range(n))
        rank = keyed
        order_array = rank_array = np.arange(n, dtype=np.int64)

    dev_names = platform.device_names
    dev_index = {d: i for i, d in enumerate(dev_names)}
    host = dev_index[platform.host]
    placement = plan.placement
    if len(placement) == n and plan.policy is None and list(placement) == topo:
        devs = placement.values()  # placed in this order: no look-up
    elif len(placement) == n and plan.policy is None:  # validated: every node placed
        devs = map(placement.__getitem__, topo)
    else:
        dev_index = {None: -1, **dev_index}
        devs = map(placement.get, topo)
    loc_array = np.fromiter(chain(map(dev_index.__getitem__, devs), [host] * (n_all - n)), dtype=np.int64,
                            count=n_all)
    loc0 = loc_array.tolist()
    domain_same = [[platform.shares_memory(a, b) for b in dev_names] for a in dev_names]

    resources = platform.link_resources()
    devs = platform.devices
    return Prepared(
        names=names,
        n_ops=n,
        index=tables.index,
        out_size=tables.out_size,
        graph_outputs=tables.graph_outputs,
        rank=rank,
        order=keyed,
        loc0=loc0,
        params=tables.params,
        node_data=tables.node_data,
        dev_names=dev_names,
        streams=[d.streams for d in devs],
        capacity=[d.memory_bytes for d in devs],
        domain_same=domain_same,
        host=host,
        res_names=[name for name, _ in resources],
        res_links=[link for _, link in resources],
        n_out=tables.n_out,
        loc_array=loc_array,
        rank_array=rank_array,
        order_array=order_array,
        edge_src=tables.edge_src,
        edge_dst=tables.edge_dst,
        tables=tables,
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


def static_fanouts(
    prep: Prepared,
    platform: Platform,
    transfer_time: Callable[[int, Any], float],
) -> list[Fanout | None]:
    """:func:`build_fanout` of every node the plan places (None for the others).

    The common case (an op of one output, not a graph output, every reader placed by
    the plan) is built inline, each (route, size)'s hop times priced once; the rest by
    :func:`build_fanout`.
    """
    loc, succs, out_size, n_ops = prep.loc0, prep.succs, prep.out_size, prep.n_ops
    graph_outputs, n_dev, n_out = prep.graph_outputs, len(prep.dev_names), prep.n_out
    rank, domain_same = prep.rank, prep.domain_same
    handoff_s = [float(d.handoff_s) if d.handoff_s > 0.0 else 0.0 for d in platform.devices]
    priced: dict[tuple[int, int, int], tuple[tuple[int, ...], tuple[float, ...]]] = {}
    readers = prep.readers
    home = _home(prep)
    out: list[Fanout | None] = []
    append = out.append
    for u, lst in enumerate(succs):
        du = loc[u]
        if du < 0:
            append(None)
            continue
        sizes = out_size[u]
        if home[u] and len(sizes) == 1 and u not in graph_outputs:  # every reader on du: no loop
            [(k0, size)] = sizes.items()
            append(Fanout([((u * n_out + k0) * n_dev + du, size, len(lst))], EMPTY, readers[u], EMPTY, EMPTY,
                          EMPTY, size, 0))
            continue
        if u >= n_ops or u in graph_outputs or len(sizes) != 1:
            if not lst and not sizes and u < n_ops and u not in graph_outputs:  # no outputs at all
                append(Fanout(EMPTY, EMPTY, EMPTY, EMPTY, EMPTY, EMPTY, 0, 0))
            else:
                append(build_fanout(prep, platform, transfer_time, u, du, loc))
            continue
        [(k0, size)] = sizes.items()
        local: list[int] = []
        handoff: list[tuple[int, float]] | tuple = EMPTY
        groups: dict[int, Group] | None = None
        same = domain_same[du]
        nref = 0
        for v, k in lst:
            dv = loc[v]
            if k != k0 or dv < 0:  # another output, or a reader the policy places
                break
            if dv == du:
                local.append(v)
                nref += 1
            elif same[dv]:
                nref += 1
                h = handoff_s[dv]
                if h > 0.0:
                    if not handoff:
                        handoff = []
                    handoff.append((v, h))
                else:
                    local.append(v)
            else:
                if groups is None:
                    groups = {}
                g = groups.get(dv)
                if g is None:
                    key = (du, dv, size)
                    hit = priced.get(key)
                    if hit is None:
                        hops, times, _ = priced_route(prep, platform, transfer_time, u, k0, du, dv)
                        hit = priced[key] = (hops, times)
                    g = groups[dv] = Group(k0, dv, hit[0], hit[1], size, [v], False, rank[v])
                    nref += 1  # the transfer reads the source copy
                else:
                    g.consumers.append(v)
                    if rank[v] < g.rank:
                        g.rank = rank[v]
        else:
            if nref:
                alloc = [((u * n_out + k0) * n_dev + du, size, nref)]
                dead = 0
            else:
                alloc, dead = EMPTY, size
            if groups is None:
                ordered: list[Group] | tuple = EMPTY
            elif len(groups) == 1:
                ordered = list(groups.values())
            else:
                ordered = [groups[dv] for dv in sorted(groups)]
            append(Fanout(alloc, EMPTY, local, handoff, EMPTY, ordered, size, dead))
            continue
        append(build_fanout(prep, platform, transfer_time, u, du, loc))
    return out


def _home(prep: Prepared) -> list[bool]:
    """Whether each op placed by the plan has readers, all of them on its own device
    (one numpy pass over the edges; False for the graph inputs)."""
    n = prep.n_ops
    loc = np.fromiter(prep.loc0, dtype=np.int64, count=len(prep.loc0))[:n]
    src, dst = prep.edge_src, prep.edge_dst
    away = np.bincount(src[loc[dst] != loc[src]], minlength=n)
    has = np.bincount(src, minlength=n)
    return ((away == 0) & (has > 0) & (loc >= 0)).tolist() + [False] * (len(prep.loc0) - n)


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
    is_op, devices = u < prep.n_ops, platform.devices
    dyn: list[int] = []
    groups: dict[tuple[int, int], Group] = {}
    rank = prep.rank
    for v, k in prep.succs[u]:
        dv = loc[v]
        if dv >= 0 and not same[dv]:
            g = groups.get((k, dv))
            if g is None:
                route_k = priced_route(prep, platform, transfer_time, u, k, du, dv)
                g = groups[(k, dv)] = Group(k, dv, *route_k, [], False, _NO_RANK)
                refs[k] = refs.get(k, 0) + 1  # the transfer reads the source copy
            g.consumers.append(v)
            if rank[v] < g.rank:
                g.rank = rank[v]
            continue
        refs[k] = refs.get(k, 0) + 1
        if dv < 0:
            dyn.append(v)
        elif dv != du and is_op and devices[dv].handoff_s > 0.0:
            handoff.append((v, float(devices[dv].handoff_s)))
        else:
            local.append(v)
    held: list[int] = []
    for k in prep.graph_outputs.get(u, EMPTY):
        if same[prep.host]:
            held.append(prep.buffer(u, k, du))
            refs[k] = refs.get(k, 0) + 1
            continue
        g = groups.get((k, prep.host))
        if g is None:
            route_k = priced_route(prep, platform, transfer_time, u, k, du, prep.host)
            g = groups[(k, prep.host)] = Group(k, prep.host, *route_k, [], False, _NO_RANK)
            refs[k] = refs.get(k, 0) + 1
        g.is_output = True
    alloc: list[tuple[int, int, int]] = []
    dead_total = total = 0
    sizes = prep.out_size[u]
    for k in sorted(sizes) if len(sizes) > 1 else sizes:
        total += sizes[k]
        if k in refs:
            alloc.append((prep.buffer(u, k, du), sizes[k], refs[k]))
        else:
            dead_total += sizes[k]
    if len(groups) > 1:
        ordered = [groups[key] for key in sorted(groups)]
    else:
        ordered = list(groups.values()) if groups else EMPTY
    for g in ordered:  # an output-only transfer queues with its producer's priority
        if g.rank == _NO_RANK:
            g.rank = rank[u] if u < prep.n_ops else 0
    return Fanout(alloc or EMPTY, held or EMPTY, local, handoff or EMPTY, dyn or EMPTY, ordered,
                  total, dead_total)


def priced_route(
    prep: Prepared,
    platform: Platform,
    transfer_time: Callable[[int, Any], float],
    u: int,
    k: int,
    du: int,
    dv: int,
) -> tuple[tuple[int, ...], tuple[float, ...], int]:
    """The link-direction resources output ``k`` of node ``u`` crosses from device
    ``du`` to ``dv`` (:func:`route`), each hop's time (``transfer_time(nbytes, link)``,
    checked by :func:`check_time`) and the tensor's bytes."""
    hops, links = route(prep, platform, du, dv)
    nbytes = prep.out_size[u].get(k, 0)
    times = tuple([_hop_time(transfer_time, nbytes, lk) for lk in links])
    return hops, times, nbytes


def _hop_time(transfer_time: Callable[[int, Any], float], nbytes: int, link: Link) -> float:
    """``transfer_time(nbytes, link)``, checked (:func:`check_time`) where it is not
    already a finite float >= 0 (the message is built only then)."""
    t = transfer_time(nbytes, link)
    if type(t) is float and 0.0 <= t < math.inf:
        return t
    return check_time(t, f"transfer over {link.name!r}")


def check_time(t: Any, what: str) -> float:
    """A cost model's answer as a finite float >= 0, else :class:`PrepError`."""
    try:
        t = float(t)
    except (TypeError, ValueError):
        raise PrepError(f"cost model returned {t!r} for {what}") from None
    if not t >= 0 or t == float("inf"):
        raise PrepError(f"cost model returned {t!r} for {what} (need a finite time >= 0)")
    return t
