"""Graph data model: schema checks, JSON round trip, bad files."""

from __future__ import annotations

import json

import networkx as nx
import pytest

from hetsim import graphs
from hetsim.graphs import Graph, GraphError


def test_add_op_defaults_bytes_from_shapes(diamond: Graph) -> None:
    d = diamond.nodes["a"]
    assert d["bytes"] == 32  # 16 in + 16 out
    assert diamond.edges["a", "b"] == {"bytes": 16, "output": 0}
    assert diamond.total_flops == 9.0


def test_topological_order_is_deterministic(diamond: Graph) -> None:
    assert diamond.topological_order() == ["a", "b", "c", "d"]


def test_json_round_trip_is_exact(tmp_path, diamond: Graph) -> None:
    diamond.nodes["b"]["step"] = 3
    diamond.nodes["b"]["layer"] = "cell.0"
    diamond.meta["inputs"] = [{"name": "x", "shape": [1, 4], "dtype": "float32", "bytes": 16, "consumers": ["a"]}]
    path = diamond.to_json(tmp_path / "g.json")
    back = graphs.load(path)
    assert back.to_dict() == diamond.to_dict()
    assert json.loads(path.read_text())["hetsim_graph"] == graphs.SCHEMA_VERSION


def test_duplicate_node_and_unknown_edge_end(diamond: Graph) -> None:
    with pytest.raises(GraphError, match="duplicate node id 'a'"):
        diamond.add_op("a", "relu")
    with pytest.raises(GraphError, match="unknown node 'zz'"):
        diamond.add_edge("a", "zz")


def test_validate_names_bad_node(diamond: Graph) -> None:
    g = diamond.copy()
    del g.nodes["c"]["flops"]
    with pytest.raises(GraphError, match=r"node 'c': missing attribute\(s\) \['flops'\]"):
        graphs.validate(g)
    g = diamond.copy()
    g.nodes["b"]["bytes"] = -1
    with pytest.raises(GraphError, match="node 'b': 'bytes' must be finite and >= 0"):
        graphs.validate(g)
    g = diamond.copy()
    g.nodes["b"]["outputs"] = [{"shape": [1, 4], "dtype": "float99"}]
    with pytest.raises(GraphError, match="node 'b': outputs\\[0\\] has unknown dtype 'float99'"):
        graphs.validate(g)
    g = diamond.copy()
    g.nodes["b"]["colour"] = "red"
    with pytest.raises(GraphError, match=r"unknown attribute\(s\) \['colour'\]"):
        graphs.validate(g)


def test_cycle_is_named(diamond: Graph) -> None:
    g = diamond.copy()
    g.nx.add_edge("d", "a", bytes=16, output=0)
    with pytest.raises(GraphError, match="cycle"):
        graphs.validate(g)
    with pytest.raises(GraphError, match="has a cycle"):
        g.topological_order()


def test_cyclic_json_file(tmp_path, diamond: Graph) -> None:
    data = diamond.to_dict()
    data["edges"].append({"src": "d", "dst": "a", "bytes": 16, "output": 0})
    p = tmp_path / "cyclic.json"
    p.write_text(json.dumps(data))
    with pytest.raises(GraphError, match=r"cyclic\.json: cycle .*a"):
        graphs.load(p)


def test_truncated_and_foreign_files(tmp_path, diamond: Graph) -> None:
    p = diamond.to_json(tmp_path / "g.json")
    text = p.read_text()
    (tmp_path / "trunc.json").write_text(text[: len(text) // 2])
    with pytest.raises(GraphError, match="trunc.json: malformed or truncated JSON"):
        graphs.load(tmp_path / "trunc.json")
    (tmp_path / "cut.json").write_text('{"name": "x", "nodes": [{"id": "a')
    with pytest.raises(GraphError) as e:  # where it stops, without a doubled "at"
        graphs.load(tmp_path / "cut.json")
    assert str(e.value).endswith("cut.json: malformed or truncated JSON (Unterminated string starting at: "
                                 "line 1 column 32)")
    (tmp_path / "other.json").write_text(json.dumps({"hello": 1}))
    with pytest.raises(GraphError, match="other.json: not a hetsim graph file"):
        graphs.load(tmp_path / "other.json")
    (tmp_path / "bin.json").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    with pytest.raises(GraphError, match="bin.json: not a hetsim graph file"):
        graphs.load(tmp_path / "bin.json")
    with pytest.raises(GraphError, match="no such graph file"):
        graphs.load(tmp_path / "missing.json")
    future = diamond.to_dict()
    future["hetsim_graph"] = 99
    (tmp_path / "v99.json").write_text(json.dumps(future))
    with pytest.raises(GraphError, match="schema version 99 is not supported"):
        graphs.load(tmp_path / "v99.json")


def test_edge_to_unknown_node_in_file(tmp_path, diamond: Graph) -> None:
    data = diamond.to_dict()
    data["edges"].append({"src": "a", "dst": "ghost", "bytes": 1})
    (tmp_path / "ghost.json").write_text(json.dumps(data))
    with pytest.raises(GraphError, match="unknown node 'ghost'"):
        graphs.load(tmp_path / "ghost.json")


def test_to_json_is_atomic_on_failure(tmp_path, diamond: Graph) -> None:
    p = diamond.to_json(tmp_path / "g.json")
    before = p.read_text()
    bad = diamond.copy()
    bad.meta["unserialisable"] = object()
    with pytest.raises(TypeError):
        bad.to_json(p)
    assert p.read_text() == before
    assert [f.name for f in tmp_path.iterdir()] == ["g.json"]


def test_tensor_bytes() -> None:
    assert graphs.tensor_bytes([2, 3], "float16") == 12
    with pytest.raises(GraphError, match="unknown dtype 'complex7'"):
        graphs.tensor_bytes([1], "complex7")


def test_validate_rejects_multigraph() -> None:
    with pytest.raises(GraphError, match="DiGraph"):
        graphs.validate(Graph(nx.MultiDiGraph()))


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("flops", float("nan"), r"node 'x': 'flops' must be finite and >= 0, got nan"),
        ("flops", float("inf"), r"node 'x': 'flops' must be finite and >= 0, got inf"),
        ("flops", -1.0, r"node 'x': 'flops' must be finite and >= 0, got -1.0"),
        ("flops", "1e9", r"node 'x': 'flops' must be a number, got '1e9'"),
        ("bytes", -4, r"node 'x': 'bytes' must be finite and >= 0, got -4"),
        ("bytes", True, r"node 'x': 'bytes' must be a number, got True"),
        ("param_bytes", -1, r"node 'x': 'param_bytes' must be finite and >= 0, got -1"),
        ("param_bytes", 10**400, r"node 'x': 'param_bytes' must be finite and >= 0"),
    ],
)
def test_add_op_checks_numbers_as_the_loader_does(key: str, value, match: str) -> None:
    g = Graph(name="api")
    with pytest.raises(GraphError, match=match):
        g.add_op("x", "relu", **{key: value})
    assert "x" not in g
    g.add_op("y", "relu", flops=1e6, bytes=8, param_bytes=0)  # the same numbers in a file load
    data = g.to_dict()
    data["nodes"][0][key] = value
    with pytest.raises(GraphError, match=match.replace("node 'x'", "node 'y'")):
        Graph.from_dict(data, source="g.json")


def test_add_op_node_id_must_be_a_string() -> None:
    with pytest.raises(GraphError, match=r"node id \['a'\] must be a string"):
        Graph().add_op(["a"], "relu")


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('"flops": 1e999', r"huge\.json: node 'a': 'flops' must be finite and >= 0, got inf"),
        ('"flops": 1' + "0" * 400, r"huge\.json: node 'a': 'flops' must be finite and >= 0"),
        ('"flops": 1' + "0" * 5000, r"huge\.json: malformed JSON \(ValueError: Exceeds the limit"),
    ],
)
def test_numbers_beyond_float_range_in_a_file(tmp_path, text: str, match: str) -> None:
    g = Graph(name="huge")
    g.add_op("a", "relu", flops=1.0, bytes=8)
    raw = json.dumps(g.to_dict()).replace('"flops": 1.0', text)
    (tmp_path / "huge.json").write_text(raw)
    with pytest.raises(GraphError, match=match) as e:
        graphs.load(tmp_path / "huge.json")
    assert "\n" not in str(e.value) and len(str(e.value)) < 400


def test_node_ids_that_are_lists_in_a_file(tmp_path, diamond: Graph) -> None:
    data = diamond.to_dict()
    data["nodes"][0]["id"] = ["a"]
    with pytest.raises(GraphError, match=r"g\.json: node #0: id \['a'\] must be a string"):
        Graph.from_dict(data, source="g.json")
    data = diamond.to_dict()
    data["edges"][0]["dst"] = ["b"]
    with pytest.raises(GraphError, match=r"g\.json: edge #0: node id \['b'\] must be a string"):
        Graph.from_dict(data, source="g.json")


def test_a_folder_is_not_a_graph_file(tmp_path) -> None:
    with pytest.raises(GraphError, match=r": is a folder, not a graph file"):
        graphs.load(tmp_path)
