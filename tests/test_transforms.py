"""critical_path, widest_antichain, split_op, features, dependency matrix, summary."""

from __future__ import annotations

import pytest

from hetsim import graphs
from hetsim.graphs import Graph, GraphError


def test_critical_path_by_flops_and_count(diamond: Graph) -> None:
    assert graphs.critical_path(diamond) == (7.0, ["a", "b", "d"])
    assert graphs.critical_path(diamond, weight=None) == (3.0, ["a", "b", "d"])
    length, path = graphs.critical_path(diamond, weight=lambda n: {"b": 0.0}.get(n, 1.0))
    assert (length, path) == (3.0, ["a", "c", "d"])
    with_edges = graphs.critical_path(diamond, weight=None, edge_weight="bytes")
    assert with_edges == (3.0 + 32.0, ["a", "b", "d"])


def test_critical_path_does_not_mutate(diamond: Graph) -> None:
    before = diamond.to_dict()
    graphs.critical_path(diamond)
    graphs.split_op(diamond, "b", 2, axis=1)
    assert diamond.to_dict() == before


def test_widest_antichain_exact_and_bound(diamond: Graph) -> None:
    assert graphs.widest_antichain(diamond) == (2, True)
    g = Graph()
    for i in range(5):
        g.add_op(f"n{i}", "relu")
    g.add_op("src", "relu")
    for i in range(5):
        g.add_edge("src", f"n{i}", bytes=0)
    assert graphs.widest_antichain(g) == (5, True)
    assert graphs.widest_antichain(g, exact_limit=2) == (5, False)


def test_widest_antichain_not_fooled_by_levels() -> None:
    # a chain a->b->c plus an independent x: levels give width 2, antichain is 2;
    # a long chain a->b->c->d with y hanging off a: levels {b,y} but {y,c} etc. -> 2
    g = Graph()
    for n in "abcdxy":
        g.add_op(n, "relu")
    for u, v in [("a", "b"), ("b", "c"), ("c", "d"), ("a", "y")]:
        g.add_edge(u, v, bytes=0)
    assert graphs.widest_antichain(g) == (3, True)  # {x, y, b}


def _conv_graph() -> Graph:
    g = Graph(name="conv", meta={"inputs": [{"name": "x", "shape": [4, 3, 8, 8], "dtype": "float32", "bytes": 3072, "consumers": ["conv"]}],
                                 "outputs": [{"node": "relu", "output": 0, "shape": [4, 16, 8, 8], "dtype": "float32", "bytes": 16384}]})
    flops = 2 * 4 * 16 * 3 * 3 * 3 * 8 * 8
    g.add_op("pre", "relu", inputs=[([4, 3, 8, 8], "float32")], outputs=[([4, 3, 8, 8], "float32")])
    g.add_op(
        "conv",
        "conv2d",
        inputs=[([4, 3, 8, 8], "float32"), ([16, 3, 3, 3], "float32")],
        outputs=[([4, 16, 8, 8], "float32")],
        attrs={"strides": [1, 1], "padding": [1, 1, 1, 1], "groups": 1},
        flops=flops,
        param_bytes=16 * 3 * 3 * 3 * 4,
        layer="features.0",
    )
    g.add_op("relu", "relu", inputs=[([4, 16, 8, 8], "float32")], outputs=[([4, 16, 8, 8], "float32")])
    g.add_op("pool", "max_pool2d", inputs=[([4, 16, 8, 8], "float32")], outputs=[([4, 16, 4, 4], "float32")])
    g.add_edge("pre", "conv")
    g.add_edge("conv", "relu")
    g.add_edge("conv", "pool")
    return g


def test_split_op_batch_axis_divides_flops_and_activations() -> None:
    g = _conv_graph()
    s = graphs.split_op(g, "conv", [3, 1], axis=0)
    assert "conv" not in s and {"conv/part0", "conv/part1", "conv/concat"} <= set(s)
    p0, p1 = s.nodes["conv/part0"], s.nodes["conv/part1"]
    assert p0["outputs"][0]["shape"] == [3, 16, 8, 8] and p1["outputs"][0]["shape"] == [1, 16, 8, 8]
    assert p0["inputs"][0]["shape"] == [3, 3, 8, 8]
    assert p0["inputs"][1]["shape"] == [16, 3, 3, 3]  # weights read whole
    assert p0["flops"] + p1["flops"] == pytest.approx(g.nodes["conv"]["flops"])
    assert p0["flops"] == pytest.approx(0.75 * g.nodes["conv"]["flops"])
    assert p0["param_bytes"] == p1["param_bytes"] == g.nodes["conv"]["param_bytes"]
    assert s.edges["pre", "conv/part0"]["bytes"] == 3 * 3 * 64 * 4
    assert s.edges["conv/part1", "conv/concat"]["bytes"] == 16 * 64 * 4
    assert set(s.successors("conv/concat")) == {"relu", "pool"}
    assert s.edges["conv/concat", "relu"]["bytes"] == g.edges["conv", "relu"]["bytes"]
    assert s.meta["inputs"][0]["consumers"] == ["conv/part0", "conv/part1"]
    assert s.total_flops == pytest.approx(g.total_flops)
    assert p0["layer"] == "features.0"


def test_split_op_channel_axis_divides_weights() -> None:
    g = _conv_graph()
    s = graphs.split_op(g, "conv", 2, axis=1)
    p0 = s.nodes["conv/part0"]
    assert p0["inputs"][1]["shape"] == [8, 3, 3, 3]
    assert p0["inputs"][0]["shape"] == [4, 3, 8, 8]  # activation read whole
    assert p0["param_bytes"] == g.nodes["conv"]["param_bytes"] // 2
    assert s.edges["pre", "conv/part0"]["bytes"] == g.edges["pre", "conv"]["bytes"]
    assert s.nodes["conv/concat"]["attrs"]["axis"] == 1


def test_split_op_channel_axis_of_a_depthwise_conv_splits_its_groups() -> None:
    """Each part of a grouped (depthwise) conv reads only its groups' input channels and
    has their number as ``groups`` (it kept the whole op's 32 groups, which torch
    refused: mobilenet_v2 under tensor-split failed in the executor)."""
    g = Graph(name="dw")
    g.add_op("pre", "relu", inputs=[([32, 32, 8, 8], "float32")], outputs=[([32, 32, 8, 8], "float32")])
    g.add_op("dw", "conv2d", inputs=[([32, 32, 8, 8], "float32"), ([32, 1, 3, 3], "float32")],
             outputs=[([32, 32, 8, 8], "float32")], attrs={"padding": [1, 1, 1, 1], "groups": 32},
             flops=2.0 * 32 * 32 * 64 * 9, param_bytes=32 * 9 * 4)
    g.add_edge("pre", "dw")
    s = graphs.split_op(g, "dw", [3, 1], axis=1)
    p0, p1 = s.nodes["dw/part0"], s.nodes["dw/part1"]
    # batch 32 = channels 32: the activation is sliced by channel, never by batch
    assert p0["inputs"][0]["shape"] == [32, 24, 8, 8] and p1["inputs"][0]["shape"] == [32, 8, 8, 8]
    assert p0["inputs"][1]["shape"] == [24, 1, 3, 3] and p0["outputs"][0]["shape"] == [32, 24, 8, 8]
    assert (p0["attrs"]["groups"], p1["attrs"]["groups"]) == (24, 8)
    assert s.edges["pre", "dw/part0"]["bytes"] == 32 * 24 * 64 * 4  # only its channels move
    # a multiplier-2 grouped conv splits at group boundaries (2 output channels per group)
    g2 = Graph(name="grouped")
    g2.add_op("c", "conv2d", inputs=[([1, 4, 8, 8], "float32"), ([8, 2, 3, 3], "float32")],
              outputs=[([1, 8, 8, 8], "float32")], attrs={"groups": 2})
    q = graphs.split_op(g2, "c", 2, axis=1)
    assert [q.nodes[f"c/part{i}"]["attrs"]["groups"] for i in (0, 1)] == [1, 1]
    assert q.nodes["c/part0"]["inputs"][0]["shape"] == [1, 2, 8, 8]
    with pytest.raises(GraphError, match="cannot split the 2 groups of 'c' into 3 parts"):
        graphs.split_op(g2, "c", 3, axis=1)


def test_split_op_bad_input() -> None:
    g = _conv_graph()
    with pytest.raises(GraphError, match="unknown node 'nope'"):
        graphs.split_op(g, "nope", 2)
    with pytest.raises(GraphError, match="axis 7 out of range"):
        graphs.split_op(g, "conv", 2, axis=7)
    with pytest.raises(GraphError, match="cannot split an axis of size 4"):
        graphs.split_op(g, "conv", 5, axis=0)
    with pytest.raises(GraphError, match="at least 2 parts"):
        graphs.split_op(g, "conv", 1)
    with pytest.raises(GraphError, match="positive numbers"):
        graphs.split_op(g, "conv", [1.0, -1.0])


def test_features_rows_and_columns(diamond: Graph) -> None:
    g = _conv_graph()
    f = graphs.features(g)
    assert list(f.index) == ["pre", "conv", "relu", "pool"]
    row = f.loc["conv"]
    assert row["op"] == "conv2d"
    assert row["flops"] == g.nodes["conv"]["flops"]
    assert row["intensity"] == pytest.approx(g.nodes["conv"]["flops"] / g.nodes["conv"]["bytes"])
    assert (row["kernel_h"], row["kernel_w"], row["stride"], row["groups"]) == (3, 3, 1, 1)
    assert (row["in_degree"], row["out_degree"], row["depth"]) == (1, 2, 1)
    assert f.loc["pool", "depth"] == 2
    assert [row[f"out0_d{i}"] for i in range(4)] == [4, 16, 8, 8]
    assert set(graphs.FEATURE_COLUMNS) <= set(f.columns)
    assert f[graphs.FEATURE_COLUMNS].isna().sum().sum() == 0


def test_signature_identifies_identical_layers() -> None:
    g = _conv_graph()
    sig = graphs.signature(g.nodes["conv"])
    assert sig == graphs.signature(dict(g.nodes["conv"], layer="other"))
    other = dict(g.nodes["conv"], attrs={"strides": [2, 2], "padding": [1, 1, 1, 1], "groups": 1})
    assert sig != graphs.signature(other)


def test_dependency_matrix(diamond: Graph) -> None:
    m = graphs.dependency_matrix(diamond)
    assert m.shape == (4, 4)
    assert m.toarray().tolist() == [[0, 1, 1, 0], [0, 0, 0, 1], [0, 0, 0, 1], [0, 0, 0, 0]]
    mb = graphs.dependency_matrix(diamond, weight="bytes")
    assert mb[0, 1] == 16


def test_summary_and_dot(diamond: Graph) -> None:
    s = graphs.summary(diamond)
    assert (s["nodes"], s["edges"], s["longest_path_nodes"], s["widest_antichain"]) == (4, 4, 3, 2)
    assert s["ops"] == {"relu": 4}
    assert s["activation_mb"] == pytest.approx(4 * 16 / 1e6)
    text = graphs.format_summary(s)
    assert "widest antichain    2" in text
    dot = graphs.to_dot(diamond)
    assert dot.startswith('digraph "diamond"') and '"a" -> "b"' in dot
