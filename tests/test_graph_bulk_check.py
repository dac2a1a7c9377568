"""graphs.bulk_check and the orders and tables read through it: the same answers as the
node-by-node reads they stand in for."""

from __future__ import annotations

import random

import networkx as nx
import numpy as np
import pytest

from hetsim.graphs import Graph, GraphError
from hetsim.graphs.bulk_check import edge_columns
from hetsim.graphs.graph import validate
from hetsim.sim.engine.prep import Links, index_graph


def random_graph(seed: int, *, shuffled: bool) -> Graph:
    """Up to 40 nodes with 0-3 declared outputs each, edges between random pairs (forward
    in insertion order unless ``shuffled``)."""
    rng = random.Random(seed)
    g = Graph(name=f"g{seed}")
    n = rng.randint(1, 40)
    names = [f"x{i}" for i in range(n)]
    order = names[:]
    if shuffled:
        rng.shuffle(order)
    for name in order:
        outs = [([rng.randint(1, 5)], "float32") for _ in range(rng.randint(0, 3))]
        g.add_op(name, rng.choice(["relu", "matmul"]), bytes=rng.randint(0, 99), outputs=outs)
    for _ in range(rng.randint(0, 3 * n)):
        if n < 2:
            break
        a, b = sorted(rng.sample(range(n), 2))
        k = len(g.nodes[names[a]]["outputs"])
        g.add_edge(names[a], names[b], bytes=rng.choice([0, 7, rng.randint(0, 10**6)]),
                   output=rng.randint(0, k - 1) if k else rng.randint(0, 3))
    return g


@pytest.mark.parametrize("seed", range(12))
def test_topological_order_is_networkx_lexicographic_order(seed: int) -> None:
    g = random_graph(seed, shuffled=seed % 2 == 1)
    index = {n: i for i, n in enumerate(g.nx)}
    assert g.topological_order() == list(nx.lexicographical_topological_sort(g.nx, key=index.__getitem__))


@pytest.mark.parametrize("seed", range(12))
def test_engine_tables_from_columns_are_those_read_edge_by_edge(seed: int) -> None:
    g = random_graph(seed, shuffled=seed % 2 == 1)
    a, b = index_graph(g), index_graph(g, edge_columns(g))
    for name in a.__dataclass_fields__:
        x, y = getattr(a, name), getattr(b, name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and (x == y).all(), name
        elif isinstance(x, Links):  # sliced from the columns on first use
            assert x.get() == y.get(), name
        elif name == "edge_out":  # kept from the columns only: each out-edge's output index
            assert x is None and y.tolist() == [k for succs in a.links.get()[0] for _, k in succs]
        else:
            assert x == y, name
    assert [list(d.items()) for d in a.out_size] == [list(d.items()) for d in b.out_size]


@pytest.mark.parametrize(("change", "message"), [
    (lambda g: g.nodes["x1"].update(flops=float("nan")), "'flops' must be finite"),
    (lambda g: g.nodes["x1"].update(bytes=True), "'bytes' must be a number"),
    (lambda g: g.nodes["x1"].update(param_bytes=2**2000), "'param_bytes' must be finite"),
    (lambda g: g.nodes["x1"].update(outputs=[{"shape": [-1], "dtype": "float32"}]), "is not a list of ints >= 0"),
    (lambda g: g.nodes["x1"].update(outputs=[{"shape": [2], "dtype": "float7"}]), "unknown dtype"),
    (lambda g: g.nodes["x1"].update(step=1.5), "'step' must be an int"),
    (lambda g: g.nodes["x1"].update(colour="red"), "unknown attribute"),
    (lambda g: g.nodes["x1"].pop("attrs"), "missing attribute"),
    (lambda g: g.nodes["x1"].update(op=""), "'op' must be a non-empty string"),
    (lambda g: g.edges["x0", "x1"].pop("bytes"), "missing 'bytes'"),
    (lambda g: g.edges["x0", "x1"].update(output=-1), "'output' must be an int >= 0"),
    (lambda g: g.edges["x0", "x1"].update(output=5), r"is beyond the 1 output\(s\)"),
    (lambda g: g.nx.add_edge("x2", "x0", bytes=1, output=0), "cycle"),
])
def test_a_bad_graph_is_refused_with_the_node_by_node_message(change, message: str) -> None:  # noqa: ANN001
    g = Graph(name="bad")
    for i in range(3):
        g.add_op(f"x{i}", "relu", bytes=8, outputs=[([2], "float32")])
    g.add_edge("x0", "x1")
    g.add_edge("x1", "x2")
    validate(g)  # plainly valid
    change(g)
    with pytest.raises(GraphError, match=message):
        validate(g)
    with pytest.raises(GraphError, match=message):
        validate(g, columns=edge_columns(g))


def test_a_backward_edge_of_an_acyclic_graph_is_valid() -> None:
    g = random_graph(3, shuffled=True)
    assert validate(g, columns=edge_columns(g)) is g
