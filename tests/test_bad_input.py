"""Bad input: each malformed file or value is one line ``hetsim CMD: error: ...`` naming
the culprit (exit status 2), never a traceback, and nothing is accepted silently."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hetsim.costmodel import CostModelError, read_profile
from hetsim.experiments.cli.main import main
from hetsim.graphs import Graph, GraphError

ROOT = Path(__file__).resolve().parents[1]


def good_graph() -> Graph:
    g = Graph(name="t")
    for n in ("n1", "n2"):
        g.add_op(n, "relu", inputs=[([4], "float32")], outputs=[([4], "float32")])
    g.add_edge("n1", "n2")
    g.meta["inputs"] = [{"name": "x", "bytes": 16, "consumers": ["n1"]}]
    g.meta["outputs"] = [{"node": "n2", "output": 0, "bytes": 16}]
    return g


def graph_file(tmp_path: Path, change=None) -> Path:  # noqa: ANN001
    data = good_graph().to_dict()
    if change is not None:
        change(data)
    path = tmp_path / "graph.json"
    path.write_text(json.dumps(data))
    return path


def one_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    rc = main(argv)
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"hetsim {argv[0]}: error: ")
    return err


GRAPH_CASES = [
    (lambda d: d.__setitem__("meta", [1, 2]), "'meta' must be a mapping, got list [1, 2]"),
    (lambda d: d["meta"]["inputs"][0].__setitem__("bytes", "big"), "meta.inputs[0] ('x'): 'bytes' must be a number, got 'big'"),
    (lambda d: d["meta"].__setitem__("inputs", 7), "meta.inputs must be a list of tables, got 7"),
    (lambda d: d["meta"]["inputs"][0].__setitem__("bytes", -5), "meta.inputs[0] ('x'): 'bytes' must be finite and >= 0, got -5"),
    (lambda d: d["edges"][0].__setitem__("bytes", -5), "edge 'n1' -> 'n2': 'bytes' must be finite and >= 0, got -5"),
    (lambda d: d["edges"][0].__setitem__("output", 3), "edge 'n1' -> 'n2': 'output' 3 is beyond the 1 output(s) of node 'n1'"),
    (lambda d: d["meta"]["inputs"][0].__setitem__("consumers", ["zz"]), "meta.inputs[0] ('x') names unknown consumer 'zz'"),
    (lambda d: d["meta"]["outputs"][0].__setitem__("node", "zz"), "meta.outputs[0] names unknown node 'zz'"),
    (lambda d: d["meta"]["outputs"][0].__setitem__("output", 1), "meta.outputs[0]: 'output' 1 is not one of the 1 output(s) of node 'n2'"),
]


@pytest.mark.parametrize(("change", "message"), GRAPH_CASES)
@pytest.mark.parametrize("command", ["graph", "simulate"])
def test_malformed_graph_files(change, message: str, command: str, tmp_path: Path,  # noqa: ANN001
                               capsys: pytest.CaptureFixture[str]) -> None:
    path = graph_file(tmp_path, change)
    argv = [command, str(path)] + (["--platform", "cpu2", "--scheduler", "heft"] if command == "simulate" else [])
    assert one_error(capsys, argv) == f"hetsim {command}: error: {path}: {message}"


def test_graphs_built_in_python_refuse_the_same() -> None:
    g = good_graph()
    with pytest.raises(GraphError, match=r"edge 'n2' -> 'n1'.*'bytes' must be finite and >= 0, got -1"):
        g.add_edge("n2", "n1", bytes=-1)
    with pytest.raises(GraphError, match="node 'n1' has no output 2"):
        g.add_edge("n1", "n2", bytes=4, output=2)
    g.meta["inputs"][0]["bytes"] = "big"
    from hetsim.sim import Plan, simulate

    with pytest.raises(GraphError, match=r"meta.inputs\[0\] \('x'\): 'bytes' must be a number, got 'big'"):
        simulate(g, "cpu2", Plan(dict.fromkeys(g, "cpu0")))


def test_non_utf8_platform_and_sweep_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b'name = "\xff\xfe"\n')
    graph = graph_file(tmp_path)
    err = one_error(capsys, ["simulate", str(graph), "--platform", str(bad), "--scheduler", "heft"])
    assert err == f"hetsim simulate: error: {bad}: not UTF-8 text (byte 0xff at offset 8)"
    err = one_error(capsys, ["sweep", str(bad), "--dry-run"])
    assert err == f"hetsim sweep: error: {bad}: not UTF-8 text (byte 0xff at offset 8)"


def test_platform_devices_that_are_not_tables(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    toml = tmp_path / "box.toml"
    toml.write_text('name = "box"\ndevices = [1, 2]\n')
    err = one_error(capsys, ["simulate", str(graph_file(tmp_path)), "--platform", str(toml), "--scheduler", "heft"])
    assert err == f"hetsim simulate: error: {toml}: devices[0] must be a table, got 1"


@pytest.mark.parametrize(("key", "value", "message"), [
    ("priority", {"n1": "high"}, "priority of node 'n1' must be a number, got 'high'"),
    ("stages", 5, "'stages' must be a list of lists of nodes, got 5"),
    ("meta", [1], "'meta' must be a mapping, got [1]"),
    ("placement", {"n1": 3, "n2": "cpu0"}, "'placement' must be a mapping node -> device name"),
])
def test_malformed_plan_files(key: str, value: object, message: str, tmp_path: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
    plan = {"hetsim_plan": 1, "placement": {"n1": "cpu0", "n2": "cpu0"}, "meta": {}, key: value}
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    err = one_error(capsys, ["simulate", str(graph_file(tmp_path)), "--platform", "cpu2", "--plan", str(path)])
    assert err == f"hetsim simulate: error: {path}: {message}"


def test_a_profile_cut_off_mid_row_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prof = tmp_path / "prof"
    shutil.copytree(ROOT / "profiles" / "cpu2-torch", prof)
    ops = prof / "ops.csv"
    text = ops.read_text()
    last = text.rstrip("\n").rsplit("\n", 1)[1]
    ops.write_text(text.rstrip("\n")[: -len(last)] + last[: last.rfind(",") - 2])  # the last two fields lost
    lines = len(text.rstrip("\n").splitlines())
    with pytest.raises(CostModelError, match=rf"ops.csv: line {lines} has \d+ fields, the header \d+ \(a row cut off"):
        read_profile(prof)
    ops.write_text(text.rstrip("\n"))  # every field there, but no final newline: cut off too
    with pytest.raises(CostModelError, match="the last row ends without a newline: cut off mid-write"):
        read_profile(prof)
    err = one_error(capsys, ["simulate", str(graph_file(tmp_path)), "--platform", "cpu2", "--scheduler", "all-cpu",
                             "--cost", str(prof)])
    assert "ops.csv: the last row ends without a newline" in err
