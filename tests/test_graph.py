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
