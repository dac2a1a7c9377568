"""Pure graph algorithms and transforms: critical path, widest antichain, tensor splitting.

Every function takes a :class:`~graphs.graph.Graph`, never mutates it, and raises
:class:`~graphs.graph.GraphError` on a cycle or an unknown node.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import networkx as nx

from hetsim.graphs.graph import Graph, GraphError, tensor_bytes

__all__ = ["critical_path", "depths", "widest_antichain", "split_op", "weight_only_nodes"]

NodeWeight = str | Callable[[str], float] | None
EdgeWeight = str | Callable[[str, str], float] | None


def _node_weight_fn(graph: Graph, weight: NodeWeight) -> Callable[[str], float]:
    if weight is None:
        return lambda n: 1.0
    if callable(weight):
        return weight
    nodes = graph.nx.nodes

    def get(n: str) -> float:
        try:
            return float(nodes[n][weight])
        except KeyError:
            raise GraphError(f"node {n!r} has no attribute {weight!r}") from None

    return get


def _edge_weight_fn(graph: Graph, weight: EdgeWeight) -> Callable[[str, str], float]:
    if weight is None:
        return lambda u, v: 0.0
    if callable(weight):
        return weight
    edges = graph.nx.edges
    return lambda u, v: float(edges[u, v].get(weight, 0.0))


def critical_path(
    graph: Graph, weight: NodeWeight = "flops", *, edge_weight: EdgeWeight = None
) -> tuple[float, list[str]]:
    """Longest weighted path through the DAG.

    Parameters
    ----------
    graph
        The graph (not modified).
    weight
        Node weight: an attribute name (``"flops"``, ``"bytes"``), a callable
        ``node -> float`` (e.g. a cost model's time on the fastest device), or None
        to count nodes.
    edge_weight
        Optional edge weight: attribute name or callable ``(u, v) -> float``.

    Returns
    -------
    (length, path)
        The path's total weight and its nodes in order.

    Examples
    --------
    >>> g = Graph()
    >>> for n, f in [("a", 1), ("b", 5), ("c", 2), ("d", 1)]:
    ...     g.add_op(n, "relu", flops=f)
    >>> for u, v in [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")]:
    ...     g.add_edge(u, v, bytes=0)
    >>> critical_path(g)
    (7.0, ['a', 'b', 'd'])
    """
    order = graph.topological_order()
    if not order:
        return 0.0, []
    w = _node_weight_fn(graph, weight)
    ew = _edge_weight_fn(graph, edge_weight)
    best: dict[str, float] = {}
    prev: dict[str, str | None] = {}
    for n in order:
        b, p = 0.0, None
        for u in graph.nx.predecessors(n):
            cand = best[u] + ew(u, n)
            if cand > b or p is None:
                b, p = cand, u
        best[n] = b + w(n)
        prev[n] = p
    end = max(order, key=best.__getitem__)  # first of the longest: deterministic
    path = [end]
    while prev[path[-1]] is not None:
        path.append(prev[path[-1]])  # type: ignore[arg-type]
    path.reverse()
    return float(best[end]), path


def depths(graph: Graph) -> dict[str, int]:
    """Longest-path depth of each node from the graph's sources (sources have 0)."""
    depth: dict[str, int] = {}
    for n in graph.topological_order():
        depth[n] = max((depth[u] + 1 for u in graph.nx.predecessors(n)), default=0)
    return depth


def weight_only_nodes(graph: Graph) -> list[str]:
    """Nodes whose inputs depend on no graph input: work on weights and constants alone,
    which a deployment does once, before running (the importer folds it away).

    A node counts as reached when it reads a graph input (``meta["inputs"]``
    consumers) or a reached node's output.

    Examples
    --------
    >>> g = Graph(meta={"inputs": [{"name": "x", "consumers": ["b"]}]})
    >>> for n in "abc":
    ...     g.add_op(n, "relu", inputs=[([1], "float32")], outputs=[([1], "float32")])
    >>> g.add_edge("a", "b"); g.add_edge("b", "c")
    >>> weight_only_nodes(g)
    ['a']
    """
    reached: set[str] = set()
    stack = [c for spec in graph.meta.get("inputs") or [] for c in spec.get("consumers") or []]
    while stack:
        n = stack.pop()
        if n not in reached and n in graph.nx:
            reached.add(n)
            stack.extend(graph.nx.successors(n))
    return [n for n in graph.nx if n not in reached]


def widest_antichain(graph: Graph, *, exact_limit: int = 2500) -> tuple[int, bool]:
    """Size of the largest set of mutually independent operators.

    Exact (Dilworth: ``n`` minus a maximum matching in the bipartite graph of the
    transitive closure) for graphs of up to ``exact_limit`` nodes; above that the
    widest level of the depth layering, a lower bound.

    Returns
    -------
    (width, exact)
    """
    n = graph.number_of_nodes()
    if n == 0:
        return 0, True
    graph.topological_order()  # raises on a cycle
    if n > exact_limit:
        counts: dict[int, int] = {}
        for d in depths(graph).values():
            counts[d] = counts.get(d, 0) + 1
        return max(counts.values()), False
    closure = nx.transitive_closure_dag(graph.nx)
    bip = nx.Graph()
    left = [("L", u) for u in closure]
    bip.add_nodes_from(left, bipartite=0)
    bip.add_nodes_from((("R", v) for v in closure), bipartite=1)
    bip.add_edges_from((("L", u), ("R", v)) for u, v in closure.edges)
    matching = nx.bipartite.hopcroft_karp_matching(bip, top_nodes=left)
    matched = sum(1 for k in matching if k[0] == "L")
    return n - matched, True


# ------------------------------------------------------------------ tensor split
_CHANNEL_SPLIT_OPS = {"conv2d", "conv1d", "conv3d", "matmul", "dense", "linear"}


def split_op(
    graph: Graph,
    node: str,
    parts: int | Sequence[float],
    axis: int = 0,
) -> Graph:
    """Partition one operator's output along ``axis`` into several operators plus a concat.

    The node is replaced by ``f"{node}/part{i}"`` (one per part) and
    ``f"{node}/concat"``, which takes over the node's outgoing edges. FLOPs are
    divided in proportion to each part's share of the output; activation inputs
    that are split along the same axis (``axis=0``: batch) move only their share,
    weights split along the output-channel axis (``axis=1`` of a conv2d, the last
    axis of a matmul) are divided, other inputs are read whole by every part. A
    grouped convolution (``groups > 1``, e.g. depthwise) splits at group
    boundaries: each part reads the input channels of its groups and has their
    number as its ``groups``.

    Parameters
    ----------
    graph
        The graph (not modified; a new graph is returned).
    node
        The operator to split; it must have exactly one output.
    parts
        Number of equal parts, or the fractions of each part (positive, normalised).
    axis
        Output axis to split (negative counts from the end).

    Returns
    -------
    Graph
        A new, validated graph.
    """
    if node not in graph.nx:
        raise GraphError(f"split_op: unknown node {node!r} in graph {graph.name!r}")
    data = graph.nx.nodes[node]
    if len(data["outputs"]) != 1:
        raise GraphError(f"split_op: node {node!r} has {len(data['outputs'])} outputs; need exactly 1")
    out = data["outputs"][0]
    rank = len(out["shape"])
    if rank == 0:
        raise GraphError(f"split_op: node {node!r} has a scalar output")
    ax = axis + rank if axis < 0 else axis
    if not 0 <= ax < rank:
        raise GraphError(f"split_op: axis {axis} out of range for output rank {rank} of {node!r}")
    dim = out["shape"][ax]
    op = data["op"]
    channel_axis = 1 if op.startswith("conv") else rank - 1
    split_weights = op in _CHANNEL_SPLIT_OPS and ax == channel_axis and ax != 0
    groups = int((data.get("attrs") or {}).get("groups", 1) or 1) if op.startswith("conv") and split_weights else 1
    if groups > 1:  # a grouped (depthwise) conv splits at group boundaries; each part reads its groups' channels
        if dim % groups:
            raise GraphError(f"split_op: node {node!r} has {dim} output channels in {groups} groups")
        if isinstance(parts, int) and parts > groups:
            raise GraphError(f"split_op: cannot split the {groups} groups of {node!r} into {parts} parts")
        sizes = [k * (dim // groups) for k in _part_sizes(groups, parts, node)]
    else:
        sizes = _part_sizes(dim, parts, node)
    fracs = [s / dim for s in sizes]

    new = graph.copy()
    g = new.nx
    in_edges = list(graph.nx.in_edges(node, data=True))
    out_edges = list(graph.nx.out_edges(node, data=True))
    g.remove_node(node)
    extra = {k: data[k] for k in ("step", "layer") if k in data}
    part_ids = []
    for i, (size, frac) in enumerate(zip(sizes, fracs)):
        pid = f"{node}/part{i}"
        if pid in g:
            raise GraphError(f"split_op: node id {pid!r} already exists")
        inputs = [{"shape": list(t["shape"]), "dtype": t["dtype"]} if split_weights and slot == 0  # activation
                  else _split_input(t, out, ax, size, op, split_weights) for slot, t in enumerate(data["inputs"])]
        attrs = dict(data["attrs"], split_of=node, split_part=i, split_axis=ax)
        if groups > 1:
            part_groups = size * groups // dim
            data_in = inputs[0]  # the activation, NC...: its channels of this part's groups
            data_in["shape"][1] = part_groups * (data["inputs"][0]["shape"][1] // groups)
            attrs["groups"] = part_groups
        outputs = [{"shape": [size if j == ax else d for j, d in enumerate(out["shape"])], "dtype": out["dtype"]}]
        pbytes = int(round(data["param_bytes"] * frac)) if split_weights else int(data["param_bytes"])
        nbytes = sum(tensor_bytes(t["shape"], t["dtype"]) for t in inputs + outputs)
        g.add_node(
            pid,
            op=op,
            inputs=inputs,
            outputs=outputs,
            attrs=attrs,
            flops=float(data["flops"]) * frac,
            bytes=int(nbytes),
            param_bytes=pbytes,
            **({"ops": data["ops"]} if "ops" in data else {}),
            **extra,
        )
        part_ids.append(pid)
        for u, _, ed in in_edges:
            share = (ax == 0 and not split_weights) or groups > 1
            g.add_edge(u, pid, bytes=int(round(ed["bytes"] * frac)) if share else ed["bytes"], output=ed.get("output", 0))
    cid = f"{node}/concat"
    part_outs = [g.nodes[p]["outputs"][0] for p in part_ids]
    out_b = tensor_bytes(out["shape"], out["dtype"])
    g.add_node(
        cid,
        op="concat",
        inputs=part_outs,
        outputs=[dict(out)],
        attrs={"axis": ax, "split_of": node},
        flops=0.0,
        bytes=2 * out_b,
        param_bytes=0,
        **extra,
    )
    for p in part_ids:
        g.add_edge(p, cid, bytes=tensor_bytes(g.nodes[p]["outputs"][0]["shape"], out["dtype"]), output=0)
    for _, v, ed in out_edges:
        g.add_edge(cid, v, **ed)
    _rewire_meta(new, node, part_ids, cid)
    # import cycle: hetsim.graphs.graph -> hetsim.graphs -> hetsim.graphs.transforms
    from hetsim.graphs.graph import validate

    return validate(new)


def _part_sizes(dim: int, parts: int | Sequence[float], node: str) -> list[int]:
    if isinstance(parts, int):
        if parts < 2:
            raise GraphError(f"split_op: need at least 2 parts for {node!r}, got {parts}")
        fr = [1.0] * parts
    else:
        fr = [float(f) for f in parts]
        if len(fr) < 2 or any(f <= 0 for f in fr):
            raise GraphError(f"split_op: part fractions for {node!r} must be >= 2 positive numbers, got {list(parts)}")
    if dim < len(fr):
        raise GraphError(f"split_op: cannot split an axis of size {dim} of {node!r} into {len(fr)} parts")
    total = sum(fr)
    # largest-remainder rounding, each part at least 1
    raw = [dim * f / total for f in fr]
    sizes = [max(1, int(r)) for r in raw]
    while sum(sizes) > dim:
        i = max(range(len(sizes)), key=lambda k: (sizes[k] - raw[k], sizes[k]))
        sizes[i] -= 1
    rema = sorted(range(len(sizes)), key=lambda k: raw[k] - sizes[k], reverse=True)
    k = 0
    while sum(sizes) < dim:
        sizes[rema[k % len(rema)]] += 1
        k += 1
    return sizes


def _split_input(t: dict[str, Any], out: dict[str, Any], ax: int, size: int, op: str, split_weights: bool) -> dict[str, Any]:
    shape = list(t["shape"])
    if split_weights:
        # weights: conv2d OIHW splits O (axis 0); matmul/dense weight [.., K, N] splits N
        if op.startswith("conv") and len(shape) >= 3 and shape[0] == out["shape"][ax]:
            shape[0] = size
        elif op in ("matmul", "dense", "linear") and shape and shape[-1] == out["shape"][ax] and len(shape) == 2:
            shape[-1] = size
        elif len(shape) == 1 and shape[0] == out["shape"][ax]:  # bias
            shape[0] = size
    elif ax < len(shape) and shape[ax] == out["shape"][ax] and len(shape) == len(out["shape"]):
        shape[ax] = size
    return {"shape": shape, "dtype": t["dtype"]}


def _rewire_meta(graph: Graph, node: str, parts: list[str], concat: str) -> None:
    for inp in graph.meta.get("inputs", []) or []:
        cons = inp.get("consumers") or []
        if node in cons:
            inp["consumers"] = [c for c in cons if c != node] + parts
    for out in graph.meta.get("outputs", []) or []:
        if out.get("node") == node:
            out["node"] = concat
