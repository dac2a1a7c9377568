"""The common case of :func:`graphs.graph.validate`, checked a column at a time.

:func:`plainly_valid` reads each attribute of every node and edge as one column
(``map`` over the attribute dicts, in C) and checks each column's types and ranges as
a whole (sets of types, numpy comparisons). It answers True only when every check of
``validate`` would pass; for anything it does not recognise as plainly valid (a
numpy number, a tensor given as another kind of mapping, an cycle, a missing key) it answers False, and ``validate`` then runs its
node-by-node checks, which name the culprit. At 100 000 nodes it takes a few
hundredths of a second where the node-by-node checks take about a second.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter
from typing import TYPE_CHECKING

import networkx as nx
import numpy as np

from hetsim.graphs.topo_order import first_ready_order

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.graphs.graph import Graph

__all__ = ["EdgeColumns", "edge_columns", "plainly_valid"]

_FLOAT_MAX = sys.float_info.max
_NUMBER_TYPES = frozenset({int, float})


def _numbers_ok(column: list) -> bool:
    """Every value an int or float (not a bool), finite and >= 0."""
    if not column:
        return True
    if not set(map(type, column)) <= _NUMBER_TYPES:
        return False
    try:
        arr = np.array(column, dtype=np.float64)
    except OverflowError:  # an int past float range: validate names it
        return False
    return bool(((arr >= 0.0) & (arr <= _FLOAT_MAX)).all())


def _tensors_ok(lists: list, dtypes: frozenset[str]) -> bool:
    """Each entry a list of ``{"shape": [int >= 0, ...], "dtype": known}`` dicts."""
    if set(map(type, lists)) - {list}:
        return False
    tensors = list(chain.from_iterable(lists))
    if not tensors:
        return True
    if set(map(type, tensors)) != {dict}:
        return False
    try:
        shapes = list(map(itemgetter("shape"), tensors))
        kinds = list(map(itemgetter("dtype"), tensors))
    except KeyError:
        return False
    if set(map(type, shapes)) != {list} or set(map(type, kinds)) != {str} or not set(kinds) <= dtypes:
        return False
    dims = list(chain.from_iterable(shapes))
    return not dims or (set(map(type, dims)) == {int} and min(dims) >= 0)


def _acyclic(n: int, src: np.ndarray, dst: np.ndarray) -> bool:
    """Whether the edges ``src[i] -> dst[i]`` between nodes ``0..n-1`` make no cycle."""
    order = np.argsort(src, kind="stable")
    starts = np.searchsorted(src[order], np.arange(n + 1)).tolist()
    heads = dst[order].tolist()
    return len(first_ready_order([heads[starts[i]:starts[i + 1]] for i in range(n)])) == n


def plainly_valid(graph: Graph, required: tuple[str, ...], allowed: frozenset[str], int_keys: tuple[str, ...],
                  dtypes: frozenset[str], columns: EdgeColumns | None = None) -> bool:
    """True when :func:`graphs.graph.validate` would find nothing wrong with the nodes
    and edges of ``graph`` (its checks of ``meta``, :func:`graphs.graph.check_io`, are
    not made here), the graph acyclic; False when in doubt.

    ``required``/``allowed``: the node attribute keys; ``int_keys``: the optional keys
    that hold an int; ``dtypes``: the known tensor dtypes; ``columns``: the graph's
    :func:`edge_columns`, when read already.
    """
    g = graph.nx
    if type(g) is not nx.DiGraph:
        return False
    names = list(g)
    if names and set(map(type, names)) != {str}:
        return False
    data = [d for _, d in g.nodes(data=True)]
    keysets = set(map(tuple, data))  # the distinct key sequences: a few
    need = frozenset(required)
    if any(not need <= set(ks) or not set(ks) <= allowed for ks in keysets):
        return False
    ops, ins, outs, attrs, flops, nbytes, params = (list(map(itemgetter(k), data)) for k in required)
    if ops and (set(map(type, ops)) != {str} or "" in set(ops)):
        return False
    if "fused" in set(ops) and not all(type(d.get("ops")) is list for d in data if d["op"] == "fused"):
        return False
    if attrs and set(map(type, attrs)) != {dict}:
        return False
    if not (_numbers_ok(flops) and _numbers_ok(nbytes) and _numbers_ok(params)):
        return False
    if not (_tensors_ok(ins, dtypes) and _tensors_ok(outs, dtypes)):
        return False
    for k in int_keys:
        if any(k in ks for ks in keysets):
            vals = [d[k] for d in data if k in d]
            if set(map(type, vals)) != {int}:
                return False
    # edges: bytes a number, output an int >= 0 within the producer's outputs, acyclic
    cols = columns if columns is not None else edge_columns(graph)
    if cols.nbytes is None:  # an edge without bytes
        return False
    if not cols.nbytes:
        return True
    if not _numbers_ok(cols.nbytes) or set(map(type, cols.outputs)) != {int}:
        return False
    src, dst = cols.src, cols.dst
    if not cols.forward and not _acyclic(len(names), src, dst):  # validate names the cycle
        return False
    try:
        out = np.array(cols.outputs, dtype=np.int64)
    except OverflowError:
        return False
    n_out = np.fromiter(map(len, outs), dtype=np.int64, count=len(outs))[src]
    return bool(((out >= 0) & ((n_out == 0) | (out < n_out))).all())


@dataclass
class EdgeColumns:
    """A graph's nodes and edges as columns (:func:`edge_columns`), read once for its
    checks (:func:`plainly_valid`) and the simulator's tables."""

    names: list  # the nodes in insertion order
    index: dict  # node -> its position
    degree: np.ndarray  # out-edges per node
    src: np.ndarray  # each edge's producer and reader positions, edges in adjacency order
    dst: np.ndarray
    outputs: list  # each edge's ``output`` (0 where absent)
    nbytes: list | None  # each edge's ``bytes``; None when an edge has none
    forward: bool  # every edge goes to a later node

    def renumbered(self, order: list[int]) -> EdgeColumns:
        """The same edges with the nodes numbered in ``order`` (a topological order: node
        ``order[i]`` becomes ``i``), each producer's edges in their adjacency order."""
        pos = np.empty(len(order), dtype=np.int64)
        pos[np.array(order, dtype=np.int64)] = np.arange(len(order), dtype=np.int64)
        src, dst = pos[self.src], pos[self.dst]
        perm = np.argsort(src, kind="stable")
        take = perm.tolist()
        names = [self.names[i] for i in order]
        return EdgeColumns(names, dict(zip(names, range(len(names)))), self.degree[order], src[perm], dst[perm],
                           [self.outputs[i] for i in take],
                           None if self.nbytes is None else [self.nbytes[i] for i in take], bool((src < dst).all()))


def edge_columns(graph: Graph) -> EdgeColumns:
    """The positions, producer, reader, output index and bytes of every edge of ``graph``."""
    g = graph.nx
    names = list(g)
    index = dict(zip(names, range(len(names))))
    rows = list(map(itemgetter(1), g.adjacency()))
    degree = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    n_edges = int(degree.sum())
    nbytes: list | None
    try:  # every edge dict read once (Graph.add_edge sets both keys)
        pairs = list(map(itemgetter("bytes", "output"), chain.from_iterable(map(dict.values, rows))))
        nbytes, outputs = list(map(itemgetter(0), pairs)), list(map(itemgetter(1), pairs))
    except KeyError:
        edicts = list(chain.from_iterable(map(dict.values, rows)))
        try:
            nbytes = list(map(itemgetter("bytes"), edicts))
        except KeyError:
            nbytes = None
        outputs = [d.get("output", 0) for d in edicts]
    src = np.repeat(np.arange(len(rows), dtype=np.int64), degree)
    dst = np.fromiter(map(index.__getitem__, chain.from_iterable(rows)), dtype=np.int64, count=n_edges)
    return EdgeColumns(names, index, degree, src, dst, outputs, nbytes, bool((src < dst).all()))
