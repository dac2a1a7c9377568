"""The tables of :func:`sim.engine.array_kernel.replay` for one static plan, built on arrays.

What :func:`sim.engine.prep.build_fanout` makes node by node (the buffers an op
allocates when it starts, its readers in its memory domain, its readers after a
hand-over, its transfers grouped by output and destination device, in that order)
is made here for every op at once from the graph's edge arrays and the plan's
placement, with numpy: one pass per table over the edges, sorted where the engine
sorts. The graph inputs' pseudo-nodes and the ops that produce a graph output (a
few) are made by :func:`~sim.engine.prep.build_fanout` itself and merged in.
``tests/test_array_replay.py`` checks these tables against the engine's
:class:`~sim.engine.prep.Fanout` objects on every reference case.

What depends on the graph alone (each edge's output index, each node's inputs and
tensor sizes as arrays) is made once per :class:`~sim.engine.prep.GraphTables`
(:func:`graph_arrays`) and shared by the plans of a :class:`sim.Simulator`.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING, Any

import numpy as np

from hetsim.sim.engine.prep import build_fanout, priced_route

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.sim.engine.prep import Fanout, GraphTables, Prepared
    from hetsim.sim.engine.run import EngineRun

__all__ = ["GraphArrays", "KernelTables", "fanout_tables", "graph_arrays", "kernel_args", "plan_tables"]

_I64 = np.int64
#: capacities clamped to this (the kernel's memory counters are int64)
INT_MAX = 1 << 62


@dataclass
class GraphArrays:
    """A graph's part of the kernel's tables (:func:`graph_arrays`)."""

    edge_k: np.ndarray  # each op out-edge's output index (GraphTables' edge order)
    o_node: np.ndarray  # each (node, output) with a size: node, output, bytes (by node, then output)
    o_k: np.ndarray
    o_size: np.ndarray
    size_pk: np.ndarray  # bytes of output k of node p at p * n_out + k
    p_ptr: np.ndarray  # each node's inputs (CSR): producer, output
    p_node: np.ndarray
    p_k: np.ndarray


def graph_arrays(tables: GraphTables) -> GraphArrays:
    """The arrays of ``tables`` that every plan's kernel tables read, made once."""
    if tables.arrays is not None:
        return tables.arrays
    n = len(tables.topo)
    n_all, n_out = len(tables.names), tables.n_out
    src, dst = tables.edge_src, tables.edge_dst
    edge_k = tables.edge_out
    if edge_k is None:
        edge_k = np.fromiter(chain.from_iterable((k for _, k in lst) for lst in tables.succs[:n]), dtype=_I64,
                             count=len(src))
    if tables.out_arrays is not None:
        o_node, o_k, o_size = tables.out_arrays
    else:
        out_size = tables.out_size
        counts = np.fromiter(map(len, out_size), dtype=_I64, count=n_all)
        o_node = np.repeat(np.arange(n_all, dtype=_I64), counts)
        o_k = np.fromiter(chain.from_iterable(out_size), dtype=_I64, count=len(o_node))
        o_size = np.fromiter(chain.from_iterable(map(dict.values, out_size)), dtype=_I64, count=len(o_node))
        if len(counts) and counts.max() > 1:  # by output within a node, as build_fanout allocates
            order = np.lexsort((o_k, o_node))
            o_k, o_size = o_k[order], o_size[order]
    size_pk = np.zeros(n_all * n_out, dtype=_I64)
    size_pk[o_node * n_out + o_k] = o_size
    # each node's inputs: the op edges by reader, then the graph inputs' (in any order:
    # the kernel releases them all when the node ends)
    inputs = [(ci, p) for p in range(n, n_all) for ci, _ in tables.succs[p]] if n_all > n else []
    readers = np.concatenate((dst, np.array([ci for ci, _ in inputs], dtype=_I64)))
    producers = np.concatenate((src, np.array([p for _, p in inputs], dtype=_I64)))
    outputs = np.concatenate((edge_k, np.zeros(len(inputs), dtype=_I64)))
    p_ptr, p_node, p_k = _csr(n_all, readers, producers, outputs)
    arrays = GraphArrays(edge_k, o_node, o_k, o_size, size_pk, p_ptr, p_node, p_k)
    tables.arrays = arrays
    return arrays


@dataclass
class KernelTables:
    """Per-node tables of a plan (CSR: ``*_ptr`` per node, then entries)."""

    a_ptr: np.ndarray  # buffers allocated when the node starts: key, readers
    a_buf: np.ndarray
    a_nref: np.ndarray
    total: np.ndarray  # bytes allocated when the node starts, and of its unread outputs
    dead: np.ndarray
    l_ptr: np.ndarray  # readers in its memory domain
    l_node: np.ndarray
    ho_ptr: np.ndarray  # readers after a hand-over, and its delay
    ho_node: np.ndarray
    ho_delay: np.ndarray
    g_ptr: np.ndarray  # transfer groups: output, destination, bytes, a graph output, rank
    g_k: np.ndarray
    g_dst: np.ndarray
    g_nbytes: np.ndarray
    g_isout: np.ndarray
    g_rank: np.ndarray
    gh_ptr: np.ndarray  # each group's hops: link direction, seconds
    gh_res: np.ndarray
    gh_time: np.ndarray
    gc_ptr: np.ndarray  # each group's readers
    gc_node: np.ndarray
    fin_keys: np.ndarray  # buffers released when a request completes


def _csr(n: int, nodes: np.ndarray, *cols: np.ndarray) -> tuple[np.ndarray, ...]:
    """Entries ``(nodes, cols...)`` grouped by node (stable): the pointers, then the columns."""
    ptr = np.zeros(n + 1, dtype=_I64)
    np.cumsum(np.bincount(nodes, minlength=n), out=ptr[1:])
    if len(nodes) < 2 or (nodes[1:] >= nodes[:-1]).all():  # grouped already (edges by producer)
        return (ptr, *(np.ascontiguousarray(c) for c in cols))
    order = np.argsort(nodes, kind="stable")
    return (ptr, *(c[order] for c in cols))


def _cat(parts: list[Any], dtype: Any = _I64) -> np.ndarray:
    return np.concatenate([np.asarray(p, dtype=dtype) for p in parts]) if parts else np.zeros(0, dtype=dtype)


def fanout_tables(n_all: int, n_out: int, n_dev: int, fanouts: list[tuple[int, Fanout]],
                  regular: KernelTables | None = None) -> KernelTables:
    """:class:`KernelTables` of the fan-outs ``(node, Fanout)``, merged with ``regular``
    (tables of the other nodes, or None)."""
    fos = [fo for _, fo in fanouts]
    us = [u for u, _ in fanouts]
    rep = [np.repeat(np.array(us, dtype=_I64), np.fromiter(map(len, lists), dtype=_I64, count=len(us)))
           for lists in ([fo.alloc for fo in fos], [fo.local for fo in fos], [fo.handoff for fo in fos],
                         [fo.groups for fo in fos])]
    alloc = np.array([a for fo in fos for a in fo.alloc], dtype=_I64).reshape(-1, 3)
    groups = [g for fo in fos for g in fo.groups]
    total = np.zeros(n_all, dtype=_I64)
    dead = np.zeros(n_all, dtype=_I64)
    total[us] = [fo.total for fo in fos]
    dead[us] = [fo.dead_total for fo in fos]
    fin = [key for fo in fos for key in fo.held]
    fin += [(u * n_out + g.k) * n_dev + g.dst for u, g in zip(rep[3].tolist(), groups) if g.is_output]
    gid_h = np.repeat(np.arange(len(groups), dtype=_I64), [len(g.hops) for g in groups])
    gid_c = np.repeat(np.arange(len(groups), dtype=_I64), [len(g.consumers) for g in groups])
    mine = {
        "a": (rep[0], alloc[:, 0], alloc[:, 2]),
        "l": (rep[1], _cat([fo.local for fo in fos])),
        "ho": (rep[2], _cat([[v for v, _ in fo.handoff] for fo in fos]),
               _cat([[h for _, h in fo.handoff] for fo in fos], np.float64)),
        "g": (rep[3], _cat([[g.k for g in groups]]), _cat([[g.dst for g in groups]]),
              _cat([[g.nbytes for g in groups]]), _cat([[int(g.is_output) for g in groups]]),
              _cat([[g.rank for g in groups]])),
        "gh": (gid_h, _cat([g.hops for g in groups]), _cat([g.times for g in groups], np.float64)),
        "gc": (gid_c, _cat([g.consumers for g in groups])),
    }
    return _merged(n_all, mine, total, dead, np.array(fin, dtype=_I64), regular)


def _merged(n_all: int, mine: dict[str, tuple], total: np.ndarray, dead: np.ndarray, fin: np.ndarray,
            regular: KernelTables | None) -> KernelTables:
    """The tables of ``mine`` (entry columns, the first one a node, or a group index for
    ``gh`` and ``gc``), with ``regular``'s entries merged in."""
    if regular is not None:
        r = regular
        n_reg_groups = len(r.g_k)

        def rows(ptr: np.ndarray) -> np.ndarray:
            return np.repeat(np.arange(len(ptr) - 1, dtype=_I64), np.diff(ptr))

        mine = {
            "a": tuple(np.concatenate(p) for p in zip((rows(r.a_ptr), r.a_buf, r.a_nref), mine["a"])),
            "l": tuple(np.concatenate(p) for p in zip((rows(r.l_ptr), r.l_node), mine["l"])),
            "ho": tuple(np.concatenate(p) for p in zip((rows(r.ho_ptr), r.ho_node, r.ho_delay), mine["ho"])),
            "g": tuple(np.concatenate(p) for p in zip((rows(r.g_ptr), r.g_k, r.g_dst, r.g_nbytes, r.g_isout,
                                                        r.g_rank), mine["g"])),
            "gh": tuple(np.concatenate(p) for p in zip((rows(r.gh_ptr), r.gh_res, r.gh_time),
                                                        (mine["gh"][0] + n_reg_groups, *mine["gh"][1:]))),
            "gc": tuple(np.concatenate(p) for p in zip((rows(r.gc_ptr), r.gc_node),
                                                        (mine["gc"][0] + n_reg_groups, *mine["gc"][1:]))),
        }
        total, dead = total + r.total, dead + r.dead
        fin = np.concatenate((r.fin_keys, fin))
    a_ptr, a_buf, a_nref = _csr(n_all, *mine["a"])
    l_ptr, l_node = _csr(n_all, *mine["l"])
    ho_ptr, ho_node, ho_delay = _csr(n_all, *mine["ho"])
    g_nodes = mine["g"][0]
    g_ptr, g_k, g_dst, g_nbytes, g_isout, g_rank = _csr(n_all, *mine["g"])
    position = np.empty(len(g_nodes), dtype=_I64)  # a group's index -> its place, groups by node
    position[np.argsort(g_nodes, kind="stable")] = np.arange(len(g_nodes), dtype=_I64)
    gh_ptr, gh_res, gh_time = _csr(len(g_nodes), position[mine["gh"][0]], *mine["gh"][1:])
    gc_ptr, gc_node = _csr(len(g_nodes), position[mine["gc"][0]], *mine["gc"][1:])
    return KernelTables(a_ptr, a_buf, a_nref, total, dead, l_ptr, l_node, ho_ptr, ho_node, ho_delay,
                        g_ptr, g_k, g_dst, g_nbytes, g_isout, g_rank, gh_ptr, gh_res, gh_time, gc_ptr, gc_node,
                        fin)


def plan_tables(prep: Prepared, platform: Any, transfer_time: Any, ga: GraphArrays) -> KernelTables:
    """:class:`KernelTables` of a static plan: the ops that produce no graph output on
    arrays, the others (and the graph inputs) by :func:`~sim.engine.prep.build_fanout`."""
    n_ops, n_all, n_dev, n_out = prep.n_ops, len(prep.names), len(prep.dev_names), prep.n_out
    loc = prep.loc_array
    special = np.zeros(n_all, dtype=np.bool_)
    special[n_ops:] = True
    special[list(prep.graph_outputs)] = True
    src, dst, k = prep.edge_src, prep.edge_dst, ga.edge_k
    keep = ~special[src]
    if not keep.all():
        src, dst, k = src[keep], dst[keep], k[keep]
    du, dv = loc[src], loc[dst]
    same = np.array(prep.domain_same, dtype=np.bool_).reshape(n_dev, n_dev)
    handoff_s = np.array([float(d.handoff_s) if d.handoff_s > 0.0 else 0.0 for d in platform.devices])
    in_domain = same[du, dv]
    handed = in_domain & (du != dv) & (handoff_s[dv] > 0.0)
    local = in_domain & ~handed
    rank = prep.rank_array
    # transfers: one group per (producer, output, destination), by output then destination
    cross = np.flatnonzero(~in_domain)
    key = (src[cross] * n_out + k[cross]) * n_dev + dv[cross]
    if len(key) > 1 and not (key[1:] >= key[:-1]).all():
        cross = cross[np.argsort(key, kind="stable")]  # stable: the readers of a group in edge order
    cs, ck, cd = src[cross], k[cross], dv[cross]
    first = np.ones(len(cross), dtype=np.bool_)
    first[1:] = (cs[1:] != cs[:-1]) | (ck[1:] != ck[:-1]) | (cd[1:] != cd[:-1])
    starts = np.flatnonzero(first)
    gid_c = np.cumsum(first) - 1
    g_node, g_k, g_dst = cs[starts], ck[starts], cd[starts]
    g_nbytes = ga.size_pk[g_node * n_out + g_k]
    g_rank = np.minimum.reduceat(rank[dst[cross]], starts) if len(starts) else np.zeros(0, dtype=_I64)
    # each group's hops, priced once per (source, destination, bytes)
    g_src = loc[g_node]
    if len(starts):  # (source, destination, size) numbered in one 1-d key
        sizes, size_of = np.unique(g_nbytes, return_inverse=True)
        _, first_of, which = np.unique((g_src * n_dev + g_dst) * len(sizes) + size_of.reshape(-1),
                                       return_index=True, return_inverse=True)
        which = which.reshape(-1)
        routes = [priced_route(prep, platform, transfer_time, int(g_node[i]), int(g_k[i]), int(g_src[i]),
                               int(g_dst[i]))[:2] for i in first_of.tolist()]
    else:
        which, routes = np.zeros(0, dtype=_I64), []
    r_ptr = np.zeros(len(routes) + 1, dtype=_I64)
    np.cumsum([len(h) for h, _ in routes], out=r_ptr[1:])
    r_res = _cat([h for h, _ in routes])
    r_time = _cat([t for _, t in routes], np.float64)
    hop_counts = np.diff(r_ptr)[which]
    gid_h = np.repeat(np.arange(len(starts), dtype=_I64), hop_counts)
    first_hop = np.cumsum(hop_counts) - hop_counts
    at = np.repeat(r_ptr[which] - first_hop, hop_counts) + np.arange(len(gid_h), dtype=_I64)
    gh_res, gh_time = r_res[at], r_time[at]
    # buffers: one reference per reader in the domain and per transfer group
    key_reads = np.concatenate((src[in_domain] * n_out + k[in_domain], g_node * n_out + g_k))
    nref = np.bincount(key_reads, minlength=n_all * n_out)
    mine = ~special[ga.o_node]
    o_node, o_k, o_size = ga.o_node[mine], ga.o_k[mine], ga.o_size[mine]
    o_ref = nref[o_node * n_out + o_k]
    read = o_ref > 0
    total = np.zeros(n_all, dtype=_I64)
    dead = np.zeros(n_all, dtype=_I64)
    np.add.at(total, o_node, o_size)
    np.add.at(dead, o_node[~read], o_size[~read])
    a_node = o_node[read]
    regular = {
        "a": (a_node, (a_node * n_out + o_k[read]) * n_dev + loc[a_node], o_ref[read]),
        "l": (src[local], dst[local]),
        "ho": (src[handed], dst[handed], handoff_s[dv[handed]]),
        "g": (g_node, g_k, g_dst, g_nbytes, np.zeros(len(starts), dtype=_I64), g_rank),
        "gh": (gid_h, gh_res, gh_time),
        "gc": (gid_c, dst[cross]),
    }
    tables = _merged(n_all, regular, total, dead, np.zeros(0, dtype=_I64), None)
    others = [(u, build_fanout(prep, platform, transfer_time, u, prep.loc0[u], prep.loc0))
              for u in np.flatnonzero(special).tolist()]
    return fanout_tables(n_all, n_out, n_dev, others, tables) if others else tables


def kernel_args(run: EngineRun, tables: KernelTables, ga: GraphArrays) -> tuple:
    """The arguments of :func:`sim.engine.array_kernel.replay` for ``run`` (before its
    output arrays)."""
    prep = run.prep
    n_ops, n_all, n_dev, n_out = prep.n_ops, len(prep.names), len(prep.dev_names), prep.n_out
    t = tables
    npred = np.diff(ga.p_ptr)
    roots = np.flatnonzero(npred[:n_ops] == 0).astype(_I64)
    same = np.array(prep.domain_same, dtype=np.bool_).reshape(n_dev, n_dev)
    stream_dev = np.repeat(np.arange(n_dev, dtype=_I64), prep.streams)
    capacity = np.array([min(c, INT_MAX) for c in prep.capacity], dtype=_I64)
    return (n_ops, n_all, n_dev, n_out, prep.host, run.n_req, float(run.interval), run.platform.dispatch_threads,
            prep.loc_array, np.array(run.top, dtype=np.float64),
            np.array(run.tdsp, dtype=np.float64), prep.rank_array,
            prep.order_array, npred, roots, same, ga.p_ptr, ga.p_node, ga.p_k, ga.size_pk,
            t.a_ptr, t.a_buf, t.a_nref, t.total, t.dead, t.l_ptr, t.l_node, t.ho_ptr, t.ho_node, t.ho_delay,
            t.g_ptr, t.g_k, t.g_dst, t.g_nbytes, t.g_isout, t.g_rank, t.gh_ptr, t.gh_res, t.gh_time, t.gc_ptr,
            t.gc_node, t.fin_keys, capacity, np.array(run.mem, dtype=_I64), stream_dev, len(prep.res_names))
