"""Operator parameter and dependency features, for cost models and analysis.

``features(graph)`` gives one row per node: the operator kind, its shapes, FLOPs,
bytes, arithmetic intensity, in/out degree and depth, plus the operator attributes
that drive kernel speed (kernel size, stride, groups). ``dependency_matrix(graph)``
is the sparse node x node adjacency (the literature's "dependency features").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from hetsim.graphs.graph import Graph
from hetsim.graphs.transforms import depths

if TYPE_CHECKING:  # pandas and scipy load on first use: `import hetsim.graphs` stays light
    import pandas as pd
    import scipy.sparse as sp

__all__ = ["features", "dependency_matrix", "FEATURE_COLUMNS", "signature"]

_MAX_RANK = 4
#: numeric columns of :func:`features` (what learned cost models train on)
FEATURE_COLUMNS: list[str] = [
    "flops",
    "bytes",
    "param_bytes",
    "intensity",
    "log_flops",
    "log_bytes",
    "in_elems",
    "out_elems",
    "n_inputs",
    "n_outputs",
    "in_degree",
    "out_degree",
    "depth",
    *[f"in0_d{i}" for i in range(_MAX_RANK)],
    *[f"in1_d{i}" for i in range(_MAX_RANK)],
    *[f"out0_d{i}" for i in range(_MAX_RANK)],
    "in0_rank",
    "out0_rank",
    "kernel_h",
    "kernel_w",
    "stride",
    "groups",
    "n_member_ops",
]


def _dims(shape: list[int]) -> list[int]:
    """Right-aligned, zero-padded last ``_MAX_RANK`` dims with leading dims folded in."""
    if not shape:
        return [0] * (_MAX_RANK - 1) + [1]
    if len(shape) > _MAX_RANK:
        lead = int(np.prod(shape[: len(shape) - _MAX_RANK + 1]))
        shape = [lead, *shape[len(shape) - _MAX_RANK + 1 :]]
    return [0] * (_MAX_RANK - len(shape)) + [int(d) for d in shape]


def _attr_int(attrs: Mapping[str, Any], *keys: str, index: int = 0, default: int = 0) -> int:
    for k in keys:
        v = attrs.get(k)
        if v is None:
            continue
        if isinstance(v, list | tuple):
            if not v:
                continue
            v = v[min(index, len(v) - 1)]
        try:
            return int(v)
        except (TypeError, ValueError):
            continue
    return default


def signature(data: Mapping[str, Any]) -> str:
    """A stable string that identifies an operator for measurement lookup:
    op kind (members for fused nodes) + attrs + input shapes + dtypes.

    Identical layers share a signature and are measured once.
    """
    import json

    op = data["op"]
    if op == "fused":
        op = "fused:" + "+".join(data.get("ops", []))
    attrs = {k: v for k, v in sorted(data.get("attrs", {}).items()) if not k.startswith("split_") and k != "primfunc"}
    ins = [(t["shape"], t["dtype"]) for t in data["inputs"]]
    return f"{op}|{json.dumps(attrs, sort_keys=True, separators=(',', ':'))}|{json.dumps(ins, separators=(',', ':'))}"


def features(graph: Graph) -> pd.DataFrame:
    """One row per node, indexed by node id, in graph insertion order.

    Columns: ``op`` (kind; ``fused:conv2d+add+relu`` for fused nodes), ``signature``,
    ``step`` (-1 if absent), and the numeric :data:`FEATURE_COLUMNS`.

    Examples
    --------
    >>> g = Graph()
    >>> g.add_op("mm", "matmul", inputs=[([8, 16], "float32"), ([16, 4], "float32")],
    ...          outputs=[([8, 4], "float32")], flops=2 * 8 * 16 * 4)
    >>> float(features(g).loc["mm", "intensity"])
    1.4545454545454546
    """
    depth = depths(graph) if graph.number_of_nodes() else {}
    rows = []
    index = []
    for n, d in graph.nx.nodes(data=True):
        ins, outs = d["inputs"], d["outputs"]
        in0 = ins[0]["shape"] if ins else []
        in1 = ins[1]["shape"] if len(ins) > 1 else []
        out0 = outs[0]["shape"] if outs else []
        attrs = d.get("attrs", {})
        op = d["op"] if d["op"] != "fused" else "fused:" + "+".join(d.get("ops", []))
        row: dict[str, Any] = {
            "op": op,
            "signature": signature(d),
            "step": int(d.get("step", -1)),
            "flops": float(d["flops"]),
            "bytes": float(d["bytes"]),
            "param_bytes": float(d["param_bytes"]),
            "intensity": float(d["flops"]) / max(float(d["bytes"]), 1.0),
            "log_flops": float(np.log10(1.0 + d["flops"])),
            "log_bytes": float(np.log10(1.0 + d["bytes"])),
            "in_elems": float(sum(int(np.prod(t["shape"])) for t in ins)),
            "out_elems": float(sum(int(np.prod(t["shape"])) for t in outs)),
            "n_inputs": len(ins),
            "n_outputs": len(outs),
            "in_degree": graph.nx.in_degree(n),
            "out_degree": graph.nx.out_degree(n),
            "depth": depth.get(n, 0),
            "in0_rank": len(in0),
            "out0_rank": len(out0),
            "kernel_h": _attr_int(attrs, "kernel_size", "pool_size", index=0)
            or (in1[2] if d["op"].startswith("conv") and len(in1) == 4 else 0),
            "kernel_w": _attr_int(attrs, "kernel_size", "pool_size", index=1)
            or (in1[3] if d["op"].startswith("conv") and len(in1) == 4 else 0),
            "stride": _attr_int(attrs, "strides", "stride", default=1),
            "groups": _attr_int(attrs, "groups", default=1),
            "n_member_ops": len(d.get("ops", [])) or 1,
        }
        for prefix, shape in (("in0", in0), ("in1", in1), ("out0", out0)):
            for i, v in enumerate(_dims(shape)):
                row[f"{prefix}_d{i}"] = v
        rows.append(row)
        index.append(n)
    cols = ["op", "signature", "step", *FEATURE_COLUMNS]
    import pandas as pd

    frame = pd.DataFrame(rows, index=pd.Index(index, name="node"), columns=cols)
    return frame


def dependency_matrix(graph: Graph, *, weight: str | None = None) -> sp.csr_array:
    """Sparse node x node matrix, ``M[i, j] = 1`` (or the edge's ``weight``
    attribute, e.g. ``"bytes"``) when node i feeds node j. Rows and columns follow
    ``list(graph)`` (insertion order)."""
    nodes = list(graph.nx)
    idx = {n: i for i, n in enumerate(nodes)}
    rows, cols, vals = [], [], []
    for u, v, d in graph.nx.edges(data=True):
        rows.append(idx[u])
        cols.append(idx[v])
        vals.append(float(d.get(weight, 0.0)) if weight else 1.0)
    import scipy.sparse as sp

    return sp.csr_array((vals, (rows, cols)), shape=(len(nodes), len(nodes)))
