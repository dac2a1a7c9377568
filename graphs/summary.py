"""One-glance description of a graph (what ``hetsim graph`` prints)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hetsim.graphs.graph import Graph, tensor_bytes
from hetsim.graphs.transforms import critical_path, widest_antichain

__all__ = ["summary", "format_summary", "to_dot"]


def summary(graph: Graph) -> dict[str, Any]:
    """Nodes, edges, GFLOPs, parameter and activation MB, longest path, widest
    antichain and the op-kind histogram of ``graph``.

    Examples
    --------
    >>> g = Graph(name="two")
    >>> g.add_op("a", "relu", outputs=[([4], "float32")], flops=4)
    >>> g.add_op("b", "relu", outputs=[([4], "float32")], flops=4)
    >>> s = summary(g)
    >>> s["nodes"], s["widest_antichain"], s["ops"]
    (2, 2, {'relu': 2})
    """
    nx_g = graph.nx
    act = sum(
        tensor_bytes(t["shape"], t["dtype"]) for _, d in nx_g.nodes(data=True) for t in d["outputs"]
    )
    hops, path = critical_path(graph, weight=None)
    cp_flops, _ = critical_path(graph, weight="flops")
    width, exact = widest_antichain(graph)
    kinds = Counter(
        (d["op"] if d["op"] != "fused" else "fused") for _, d in nx_g.nodes(data=True)
    )
    members = Counter(op for _, d in nx_g.nodes(data=True) for op in d.get("ops", []))
    steps = {d["step"] for _, d in nx_g.nodes(data=True) if "step" in d}
    out: dict[str, Any] = {
        "name": graph.name,
        "granularity": graph.meta.get("granularity", "?"),
        "batch": graph.meta.get("batch"),
        "nodes": graph.number_of_nodes(),
        "edges": graph.number_of_edges(),
        "gflops": graph.total_flops / 1e9,
        "param_mb": graph.param_bytes / 1e6,
        "activation_mb": act / 1e6,
        "longest_path_nodes": int(hops),
        "longest_path_gflops": cp_flops / 1e9,
        "widest_antichain": width,
        "widest_antichain_exact": exact,
        "ops": dict(sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))),
    }
    if members:
        out["fused_member_ops"] = dict(sorted(members.items(), key=lambda kv: (-kv[1], kv[0])))
    if steps:
        out["steps"] = len(steps)
    return out


def format_summary(s: dict[str, Any]) -> str:
    """Human-readable text of :func:`summary`."""
    lines = [
        f"graph {s['name']}  (granularity {s['granularity']}, batch {s['batch']})",
        f"  nodes               {s['nodes']}",
        f"  edges               {s['edges']}",
        f"  total GFLOPs        {s['gflops']:.3f}",
        f"  parameters MB       {s['param_mb']:.2f}",
        f"  activations MB      {s['activation_mb']:.2f}",
        f"  longest path        {s['longest_path_nodes']} nodes, {s['longest_path_gflops']:.3f} GFLOPs",
        f"  widest antichain    {s['widest_antichain']}{'' if s['widest_antichain_exact'] else ' (lower bound)'}",
    ]
    if "steps" in s:
        lines.append(f"  time steps          {s['steps']}")
    lines.append("  op kinds")
    width = max((len(k) for k in s["ops"]), default=0)
    for k, v in s["ops"].items():
        lines.append(f"    {k:<{width}}  {v}")
    if "fused_member_ops" in s:
        lines.append("  fused member ops")
        width = max(len(k) for k in s["fused_member_ops"])
        for k, v in s["fused_member_ops"].items():
            lines.append(f"    {k:<{width}}  {v}")
    return "\n".join(lines)


def to_dot(graph: Graph) -> str:
    """Graphviz DOT text of the graph (node label: id, op, GFLOPs; edge label: KB)."""

    def text(s: object) -> str:  # DOT's escapes inside a quoted string
        return str(s).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    def q(*lines: object) -> str:  # lines of one quoted string, joined by DOT's newline escape
        return '"' + "\\n".join(text(s) for s in lines) + '"'

    lines = [f"digraph {q(graph.name)} {{", "  node [shape=box, fontsize=10];"]
    for n, d in graph.nx.nodes(data=True):
        op = d["op"] if d["op"] != "fused" else "+".join(d.get("ops", [])) or "fused"
        gflop = f"{d['flops'] / 1e9:.3g} GFLOP"
        lines.append(f"  {q(n)} [label={q(n, op, gflop)}];")
    for u, v, d in graph.nx.edges(data=True):
        kb = f"{d['bytes'] / 1e3:.3g} KB"
        lines.append(f"  {q(u)} -> {q(v)} [label={q(kb)}];")
    lines.append("}")
    return "\n".join(lines) + "\n"
