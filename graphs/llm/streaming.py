"""Weights streamed from host memory to the GPU, expressed in the graph (FlexGen-style).

An op whose weights live in host memory but which runs on the GPU reads them over
PCIe (Sheng et al., "FlexGen: High-Throughput Generative Inference of Large Language
Models with a Single GPU", ICML 2023: weights of the next layer are loaded while the
current one computes). :func:`stream_weights` writes that into the graph so the
simulator needs nothing new: each streamed op ``n`` gets a source node
``n + ".weight"`` (op ``weight``, no kernel: :data:`~graphs.graph.VIEW_OPS`) that
holds the weights (``param_bytes``) and whose output, the bytes the op reads, is an
edge into ``n``; ``n`` keeps its bytes but no longer holds the weights. Placed on the
host, the source's output crosses the link to the GPU once per step, occupies GPU
memory from the start of its transfer to the end of ``n``, and overlaps with the
GPU's work on the layers before.

The prefetch window bounds how early a transfer may start: the sources of layer
``i`` wait (a zero-byte edge) for the first node of layer ``i - window`` (a node
without a ``layer``, the output projection, counts as the layer after the last), so
that at most ``window + 1`` layers of streamed weights are in flight or resident at
once.
Assumption (stated): the source's output buffer on the host is counted besides the
weights it copies, so the host's simulated peak memory overstates by at most the
weights in flight.
"""

from __future__ import annotations

from collections.abc import Iterable

from hetsim.graphs.graph import Graph, GraphError

__all__ = ["WEIGHT_SUFFIX", "stream_weights"]

#: suffix of the node id of a streamed op's weight source
WEIGHT_SUFFIX = ".weight"


def stream_weights(graph: Graph, nodes: Iterable[str], *, window: int = 1) -> Graph:
    """A copy of ``graph`` in which the weights of ``nodes`` are streamed to them.

    Parameters
    ----------
    graph
        An LLM graph (:func:`~graphs.llm.llm_graph`), or any graph whose nodes carry
        ``layer``; the input is not modified.
    nodes
        Ops whose weights live apart from the op (the caller places the sources on
        the host and the ops on the GPU).
    window
        Layers of prefetch: the sources of layer ``i`` start after the first node of
        layer ``i - window`` (>= 1).

    Returns
    -------
    Graph
        With one ``weight`` node per streamed op; ``meta["llm"]["streamed"]`` lists
        the ops.

    Raises
    ------
    GraphError
        an unknown node, a node without weights, a window below 1.

    Examples
    --------
    >>> from hetsim.graphs.llm import llm_graph
    >>> g = stream_weights(llm_graph("tiny", kv_length=8), ["blk.1.ffn_up"])
    >>> g.nodes["blk.1.ffn_up.weight"]["param_bytes"], g.nodes["blk.1.ffn_up"]["param_bytes"]
    (16384, 0)
    """
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise GraphError(f"stream_weights: window must be an int >= 1, got {window!r}")
    nodes = list(dict.fromkeys(nodes))
    for n in nodes:
        if n not in graph.nx:
            raise GraphError(f"stream_weights: graph {graph.name!r} has no node {n!r}")
        if graph.nodes[n]["param_bytes"] <= 0:
            raise GraphError(f"stream_weights: node {n!r} has no weights to stream")
    out = graph.copy()
    frac = float((graph.meta.get("llm") or {}).get("expert_read_fraction", 1.0))
    first_of_layer: dict[int, str] = {}
    for n in graph.topological_order():
        layer = graph.nodes[n].get("layer")
        if isinstance(layer, int) and layer not in first_of_layer:
            first_of_layer[layer] = n
    after_last = max(first_of_layer, default=-1) + 1  # the output layer streams after the last block
    for n in nodes:
        d = out.nodes[n]
        w = int(d["param_bytes"])
        # routed experts' weights cross only for the experts that get a token (expected bytes)
        read = int(round(w * frac)) if "moe_block" in d else w
        src = n + WEIGHT_SUFFIX
        extra = {k: d[k] for k in ("layer", "moe_block", "expert") if k in d}
        out.add_op(src, "weight", outputs=[([max(read, 1)], "uint8")], flops=0.0, bytes=0,
                   param_bytes=w, **extra)
        out.add_edge(src, n, bytes=read)
        d["param_bytes"] = 0
        layer = d.get("layer", after_last)
        if isinstance(layer, int) and layer - window in first_of_layer:
            out.add_edge(first_of_layer[layer - window], src, bytes=0)
    llm = dict(out.meta.get("llm") or {})
    llm["streamed"] = sorted(set(llm.get("streamed", [])) | set(nodes))
    llm["window"] = window
    out.meta["llm"] = llm
    return out
