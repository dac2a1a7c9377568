"""PyTorch's execution trace (``torch.profiler.ExecutionTraceObserver``) beside a
Kineto trace: the tensors each op read and wrote, as data dependencies between the
GPU work of different ops.

An execution trace is JSON ``{"schema", "nodes": [...]}``; a node is one op call
with ``rf_id`` (the record-function id Kineto writes on the same op as ``Record
function id``, or ``External id`` in older traces), ``inputs`` and ``outputs``
(a tensor is ``[tensor_id, storage_id, offset, numel, element_bytes, device]``).
"""

from __future__ import annotations

import os
from typing import Any

from hetsim.graphs.graph import Graph, GraphError
from hetsim.graphs.trace.kineto import load_trace_json

__all__ = ["add_tensor_edges", "op_tensors"]


def _tensors(values: Any) -> list[tuple[int, int, int]]:
    """The (storage id, offset, bytes) of each tensor among an op's inputs or outputs
    (tensor lists included)."""
    out: list[tuple[int, int, int]] = []
    if not isinstance(values, list):
        return out
    for v in values:
        if isinstance(v, list) and len(v) == 6 and all(isinstance(x, int) and not isinstance(x, bool)
                                                       for x in v[:5]) and isinstance(v[5], str):
            out.append((v[1], v[2], max(0, v[3] * v[4])))
        elif isinstance(v, list):
            out.extend(_tensors(v))
    return out


def op_tensors(path: str | os.PathLike[str]) -> dict[int, tuple[list[tuple[int, int, int]],
                                                                list[tuple[int, int, int]]]]:
    """Per ``rf_id``: the tensors the op read and those it wrote, each (storage id,
    offset, bytes) (an in-place op, whose schema marks an argument ``(a!)``, writes
    that input too).

    Raises
    ------
    GraphError
        A file that is not an execution trace (no ``nodes`` list), in one line.
    """
    doc = load_trace_json(os.fspath(path))
    nodes = doc.get("nodes") if isinstance(doc, dict) else None
    if not isinstance(nodes, list):
        raise GraphError(f"{path}: not a PyTorch execution trace (no 'nodes' list)")
    out: dict[int, tuple[list[tuple[int, int, int]], list[tuple[int, int, int]]]] = {}
    for n in nodes:
        if not isinstance(n, dict) or not isinstance(n.get("rf_id"), int):
            continue
        reads = _tensors(n.get("inputs"))
        writes = _tensors(n.get("outputs"))
        if "(a!)" in str(n.get("op_schema", "")):
            writes = writes + [t for t in reads if t not in writes]
        if reads or writes:
            out[n["rf_id"]] = (reads, writes)
    return out


def add_tensor_edges(graph: Graph, path: str | os.PathLike[str]) -> int:
    """Add to ``graph`` an edge from the last GPU node of the op that last wrote a
    tensor to the first GPU node of each later op that reads it, where the measured
    times allow it (the writer ended before the reader started), its ``bytes`` the
    tensors' sizes (what a placement across devices would move); return how many
    edges were added (``meta["tensor_edges"]``)."""
    tensors = op_tensors(path)
    first: dict[int, str] = {}
    last: dict[int, str] = {}
    order = sorted((d["attrs"]["seq"], n) for n, d in graph.nodes(data=True) if "op_id" in d["attrs"])
    ops: list[int] = []
    for _, n in order:
        rf = graph.nodes[n]["attrs"]["op_id"]
        if rf not in first:
            first[rf] = n
            ops.append(rf)
        last[rf] = n
    writer: dict[tuple[int, int], int] = {}
    added = 0
    for rf in ops:
        reads, writes = tensors.get(rf, ([], []))
        dst = first[rf]
        start = graph.nodes[dst]["attrs"]["start_s"]
        for storage, offset, size in reads:
            w = writer.get((storage, offset))
            if w is None or w == rf:
                continue
            src = last[w]
            if graph.nx.has_edge(src, dst):
                graph.edges[src, dst]["bytes"] += size
            elif graph.nodes[src]["attrs"]["end_s"] <= start + 1e-6:
                graph.add_edge(src, dst, bytes=size)
                added += 1
        for storage, offset, _ in writes:
            writer[(storage, offset)] = rf
    graph.meta["execution_trace"] = os.path.basename(os.fspath(path))
    graph.meta["tensor_edges"] = added
    return added
