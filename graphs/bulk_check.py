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
from itertools import chain
from operator import itemgetter
from typing import TYPE_CHECKING

import networkx as nx
import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.graphs.graph import Graph

__all__ = ["plainly_valid"]

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
        kinds = set(map(itemgetter("dtype"), tensors))
    except KeyError:
        return False
    if set(map(type, shapes)) != {list} or set(map(type, kinds)) != {str} or not kinds <= dtypes:
        return False
    dims = list(chain.from_iterable(shapes))
    return not dims or (set(map(type, dims)) == {int} and min(dims) >= 0)


def _acyclic(n: int, src: np.ndarray, dst: np.ndarray) -> bool:
    """Whether the edges ``src[i] -> dst[i]`` between nodes ``0..n-1`` make no cycle
    (Kahn's algorithm on ints)."""
    order = np.argsort(src, kind="stable")
    starts = np.searchsorted(src[order], np.arange(n + 1)).tolist()
    heads = dst[order].tolist()
    indeg = np.bincount(dst, minlength=n).tolist()
    stack = [i for i in range(n) if not indeg[i]]
    seen = 0
    while stack:
        u = stack.pop()
        seen += 1
        for v in heads[starts[u]:starts[u + 1]]:
            indeg[v] -= 1
            if not indeg[v]:
                stack.append(v)
    return seen == n


def plainly_valid(graph: Graph, required: tuple[str, ...], allowed: frozenset[str], int_keys: tuple[str, ...],
                  dtypes: frozenset[str]) -> bool:
    """True when :func:`graphs.graph.validate` would find nothing wrong with the nodes
    and edges of ``graph`` (its checks of ``meta``, :func:`graphs.graph.check_io`, are
    not made here), the graph acyclic; False when in doubt.

    ``required``/``allowed``: the node attribute keys; ``int_keys``: the optional keys
    that hold an int; ``dtypes``: the known tensor dtypes.
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
    # edges: bytes a number, output an int >= 0 within the producer's outputs, forward
    index = dict(zip(names, range(len(names))))
    rows = [nbrs for _, nbrs in g.adjacency()]
    degree = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    if not degree.sum():
        return True
    edicts = list(chain.from_iterable(map(dict.values, rows)))
    try:
        ebytes = list(map(itemgetter("bytes"), edicts))
    except KeyError:
        return False
    if not _numbers_ok(ebytes):
        return False
    try:
        eout = list(map(itemgetter("output"), edicts))  # Graph.add_edge sets it
    except KeyError:
        eout = [d.get("output", 0) for d in edicts]
    if set(map(type, eout)) != {int}:
        return False
    src = np.repeat(np.arange(len(rows), dtype=np.int64), degree)
    dst = np.fromiter(map(index.__getitem__, chain.from_iterable(rows)), dtype=np.int64, count=len(edicts))
    if not (src < dst).all() and not _acyclic(len(rows), src, dst):  # validate names the cycle
        return False
    try:
        out = np.array(eout, dtype=np.int64)
    except OverflowError:
        return False
    n_out = np.fromiter(map(len, outs), dtype=np.int64, count=len(outs))[src]
    return bool(((out >= 0) & ((n_out == 0) | (out < n_out))).all())
