"""Training graphs from forward graphs, by mirroring (an approximation), and a
PipeDream-style co-located pipeline plan.

The importer gives inference (forward) graphs only. :func:`training_graph` builds
the graph of one training step from one, for the pipeline-training experiment
(``experiments/fig3_pipeline_training``):

* every forward node ``f`` keeps its attributes;
* a backward node ``bwd/<f>`` is appended per forward node, with the same op kind
  (so that the cost model classes it the same), **2x** the forward FLOPs and bytes
  (the usual rule of thumb: the gradient with respect to the inputs and the one with
  respect to the weights each cost about one forward pass), and ``param_bytes``
  equal to the forward node's (the weight-gradient buffer it writes);
* every forward edge ``u -> v`` is mirrored as ``bwd/<v> -> bwd/<u>`` with the same
  tensor size (the gradient has the shape of the activation);
* an edge ``f -> bwd/<f>`` carries ``f``'s output (the activation saved for the
  backward pass) to its backward node.

This is an approximation, not an autodiff graph: real backward kernels differ per
op (a ReLU's backward is a mask, a convolution's two kernels are not one), the
loss and the optimizer step are not modelled, nor is recomputation or weight
stashing. Graph inputs are kept; the graph has no outputs (weight gradients stay
on the device that computed them).

:func:`colocated_plan` places a training graph the way PipeDream does: a stage
holds the forward *and* the backward of its layers. It runs a pipeline scheduler
(``antichain-dp`` by default) on the forward graph priced with training costs
(:func:`training_cost_view`: 3x forward FLOPs and bytes per layer, activation
plus gradient on every edge) and puts every backward node on its forward node's
device.

Examples
--------
>>> from hetsim.graphs import Graph
>>> g = Graph(name="chain")
>>> g.add_op("a", "conv2d", flops=2e9, bytes=8_000_000, outputs=[([1, 64, 56, 56], "float32")])
>>> g.add_op("b", "relu", bytes=1_600_000, outputs=[([1, 64, 56, 56], "float32")])
>>> g.add_edge("a", "b")
>>> t = training_graph(g)
>>> sorted(t.nx.edges)
[('a', 'b'), ('a', 'bwd/a'), ('b', 'bwd/b'), ('bwd/b', 'bwd/a')]
>>> t.nodes["bwd/a"]["flops"]
4000000000.0
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from hetsim.graphs.graph import Graph, tensor_bytes, validate

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.base import CostModel
    from hetsim.costmodel.platform import Platform
    from hetsim.sim.plan import Plan

__all__ = ["BACKWARD_PREFIX", "colocated_plan", "forward_of", "training_cost_view", "training_graph"]

#: node-id prefix of the mirrored backward nodes
BACKWARD_PREFIX = "bwd/"


def _output_bytes(graph: Graph, node: str) -> int:
    """Size of ``node``'s output 0: its largest out-edge, else its output spec."""
    sizes = [int(d["bytes"]) for _, _, d in graph.nx.out_edges(node, data=True)
             if int(d.get("output", 0)) == 0]  # fmt: skip
    if sizes:
        return max(sizes)
    outs = graph.nx.nodes[node]["outputs"]
    return tensor_bytes(outs[0]["shape"], outs[0]["dtype"]) if outs else 0


def training_graph(forward: Graph, *, backward_factor: float = 2.0) -> Graph:
    """The graph of one training step of ``forward`` (mirrored backward; see module doc).

    Parameters
    ----------
    forward
        An inference graph (any granularity); not modified.
    backward_factor
        FLOPs and bytes of a backward node, as a multiple of its forward node's.

    Returns
    -------
    Graph
        Named ``<name>-train``; ``meta["training"]`` records how it was built.

    Raises
    ------
    ValueError
        For a ``backward_factor`` that is not positive, or a node id that already
        starts with :data:`BACKWARD_PREFIX`.
    """
    if not backward_factor > 0:
        raise ValueError(f"backward_factor must be > 0, got {backward_factor!r}")
    clash = [n for n in forward.nx if str(n).startswith(BACKWARD_PREFIX)]
    if clash:
        raise ValueError(f"node {clash[0]!r} already starts with {BACKWARD_PREFIX!r}")
    g = forward.nx.copy()
    fnodes = list(forward.nx.nodes(data=True))
    for n, d in fnodes:
        b = copy.deepcopy(dict(d))
        b["flops"] = float(d["flops"]) * backward_factor
        b["bytes"] = int(round(int(d["bytes"]) * backward_factor))
        b["param_bytes"] = int(d["param_bytes"])
        # gradients flow the other way: in = the output gradients, out = the input gradients
        b["inputs"], b["outputs"] = copy.deepcopy(d["outputs"]), copy.deepcopy(d["inputs"])
        b["attrs"] = {**b.get("attrs", {}), "pass": "backward", "forward": n}
        if "name" in b:
            b["name"] = f"{b['name']} (backward)"
        g.add_node(BACKWARD_PREFIX + n, **b)
    for v in forward.nx:
        for k, u in enumerate(sorted(forward.nx.predecessors(v))):
            nbytes = int(forward.nx.edges[u, v]["bytes"])
            g.add_edge(BACKWARD_PREFIX + v, BACKWARD_PREFIX + u, bytes=nbytes, output=k)
    for n, _ in fnodes:  # saved activation: the forward output, read by the backward node
        g.add_edge(n, BACKWARD_PREFIX + n, bytes=_output_bytes(forward, n), output=0)
    meta = copy.deepcopy(forward.meta)
    meta["outputs"] = []
    meta["training"] = {
        "forward": forward.name,
        "backward_factor": backward_factor,
        "approximation": "mirrored backward nodes (2x forward FLOPs/bytes), reversed edges, "
                         "saved-activation edges; no loss, optimizer or weight stashing",
    }  # fmt: skip
    out = Graph(g, name=f"{forward.name}-train", meta=meta)
    return validate(out)


def forward_of(node: str) -> str:
    """The forward node of a training-graph node (itself for a forward node)."""
    return node[len(BACKWARD_PREFIX):] if node.startswith(BACKWARD_PREFIX) else node


def training_cost_view(forward: Graph, *, backward_factor: float = 2.0) -> Graph:
    """``forward`` priced as fwd + bwd per node: FLOPs and bytes x (1 + factor),
    ``param_bytes`` x 2 (weights and their gradient), edge bytes x 2 (activation
    forward, gradient back). The graph PipeDream's planner partitions."""
    g = forward.nx.copy()
    k = 1.0 + backward_factor
    for _, d in g.nodes(data=True):
        d["flops"] = float(d["flops"]) * k
        d["bytes"] = int(round(int(d["bytes"]) * k))
        d["param_bytes"] = 2 * int(d["param_bytes"])
    for _, _, d in g.edges(data=True):
        d["bytes"] = 2 * int(d["bytes"])
    return Graph(g, name=f"{forward.name}-fwdbwd", meta=copy.deepcopy(forward.meta))


def colocated_plan(
    train: Graph,
    forward: Graph,
    platform: Platform,
    cost: CostModel,
    *,
    scheduler: str = "antichain-dp",
    **kw: Any,
) -> Plan:
    """A PipeDream-style plan of ``train``: each backward node on its forward node's device.

    ``scheduler`` (with hyper-parameters ``kw``) partitions
    :func:`training_cost_view` of ``forward``; the plan keeps its ``microbatches``
    and priorities follow ``train``'s topological order. ``stages`` is left out (a
    co-located stage has edges both ways, which :class:`sim.plan.Plan` stages forbid);
    ``meta["stage_devices"]`` and ``meta["forward_plan"]`` describe the partition.
    """
    # lazy: at the top it would load simpy with this module
    from hetsim import schedulers
    from hetsim.schedulers.base import topo_priority
    from hetsim.sim.plan import Plan

    fplan = schedulers.get(scheduler, **kw).schedule(training_cost_view(forward), platform, cost)
    placement = {n: fplan.placement[forward_of(n)] for n in train.nx}
    meta = {"forward_plan": scheduler, "stage_devices": fplan.meta.get("stage_devices"),
            "stage_time_estimate": fplan.meta.get("stage_time_estimate"),
            "mode": fplan.meta.get("mode")}  # fmt: skip
    return Plan(placement=placement, priority=topo_priority(train),
                microbatches=fplan.microbatches, meta=meta)  # fmt: skip
