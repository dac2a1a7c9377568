"""Property-based fuzz of hetsim's file inputs (platform TOML, plan JSON, graph JSON, a
model's config.json, a GGUF header) and of its command line: whatever a file or an argument list holds, hetsim either works,
with finite results, or refuses with one of its own errors; it never raises anything
else (a traceback on the command line), never prints a traceback, and never writes
outside the output folder it was given.

The cases are shared among the tests: the ``ci`` profile runs about 100 in all,
``HYPOTHESIS_PROFILE=thorough`` 10 000 (CI runs that too).
"""

from __future__ import annotations

import functools
import io
import json
import math
import os
import struct
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from gguf_files import TINY_CONFIGS, write_gguf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hetsim.costmodel.base import CostModelError
from hetsim.experiments.cli.main import main
from hetsim.experiments.output_folder import FolderLockedError
from hetsim.graphs.graph import Graph, GraphError
from hetsim.graphs.llm.gguf_header import read_gguf_header
from hetsim.graphs.llm.hf_config import architecture_from_hf
from hetsim.graphs.llm.quant_recipe import recipe_tensors
from hetsim.schedulers import SchedulerError, load_plan
from hetsim.sim import Plan, Platform, PlatformError, simulate
from hetsim.sim.engine.state import SimulationError
from hetsim.sim.plan import PlanError

#: every error class by which hetsim refuses an input
REFUSALS = (GraphError, PlatformError, PlanError, SimulationError, SchedulerError, CostModelError, FolderLockedError)
#: the tests below, among which the profile's cases are shared
TESTS = 6
CASES = max(10, settings().max_examples // TESTS)
FUZZ = settings(max_examples=CASES, deadline=None, derandomize=False,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])  # fmt: skip

#: values a hostile file holds where a number, a name or a table is expected
WILD = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 1, -1, 1e-300, 1e300, 2**63, "", "cpu", "gpu", "../../etc/passwd", True, None]),
    st.text(max_size=12),
    st.lists(st.integers(-5, 5), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(-5, 5), max_size=2),
)


def chain() -> Graph:
    g = Graph(name="tiny", meta={"granularity": "op"})
    for n in "abc":
        g.add_op(n, "matmul", inputs=[([4, 4], "float32")], outputs=[([4, 4], "float32")], flops=128.0)
    g.add_edge("a", "b")
    g.add_edge("b", "c")
    return g


def finite_run(graph: Graph, platform: Platform | str, plan: Plan) -> None:
    """Simulate; a result that is not refused is finite."""
    try:
        res = simulate(graph, platform, plan)
    except REFUSALS:
        return
    assert math.isfinite(res.makespan) and res.makespan >= 0, res.makespan
    assert all(math.isfinite(x) for x in res.latencies)


def mutate(data: Any, path: list[Any], value: Any) -> Any:
    """DATA with the item at PATH (keys or indices, as far as they reach) replaced by VALUE."""
    node = data
    for key in path[:-1]:
        if isinstance(node, dict) and node:
            node = node[sorted(node, key=str)[key % len(node)] if isinstance(key, int) else next(iter(node))]
        elif isinstance(node, list) and node:
            node = node[key % len(node) if isinstance(key, int) else 0]
        else:
            break
    if isinstance(node, dict) and node:
        node[sorted(node, key=str)[path[-1] % len(node)]] = value
    elif isinstance(node, list) and node:
        node[path[-1] % len(node)] = value
    return data


PLATFORM = Platform.preset("xeon-p2200").to_dict()


@FUZZ
@given(path=st.lists(st.integers(0, 40), min_size=1, max_size=4), value=WILD, extra=st.booleans())
def test_platform_files(tmp_path_factory: pytest.TempPathFactory, path: list[int], value: Any, extra: bool) -> None:
    data = mutate(json.loads(json.dumps(PLATFORM)), path, value)
    devices = data.get("devices")
    if extra and isinstance(devices, list) and devices and isinstance(devices[0], dict):
        devices[0]["unknown_key"] = 1
    try:
        platform = Platform.from_dict(data, source="fuzz")
    except PlatformError:
        return
    finite_run(chain(), platform, Plan({"a": platform.devices[0].name, "b": platform.devices[0].name,
                                        "c": platform.devices[-1].name}))  # fmt: skip


PLAN = {"hetsim_plan": 1, "placement": {"a": "cpu", "b": "gpu", "c": "cpu"}, "priority": {"a": 0, "b": 1, "c": 2},
        "microbatches": 2, "policy": {"name": "dynamic", "params": {"include_dispatch": True}}}  # fmt: skip


@FUZZ
@given(path=st.lists(st.integers(0, 10), min_size=1, max_size=3), value=WILD,
       drop=st.sampled_from([None, "placement", "priority", "microbatches", "policy", "hetsim_plan"]))
def test_plan_files(tmp_path_factory: pytest.TempPathFactory, path: list[int], value: Any, drop: str | None) -> None:
    data = mutate(json.loads(json.dumps(PLAN)), path, value)
    if drop:
        data.pop(drop, None)
    file = tmp_path_factory.mktemp("plan") / "p.json"
    file.write_text(json.dumps(data))
    try:
        plan = load_plan(file)
    except REFUSALS:
        return
    finite_run(chain(), "xeon-p2200", plan)


GRAPH = chain().to_dict()


@FUZZ
@given(path=st.lists(st.integers(0, 12), min_size=1, max_size=5), value=WILD)
def test_graph_files(path: list[int], value: Any) -> None:
    data = mutate(json.loads(json.dumps(GRAPH)), path, value)
    try:
        graph = Graph.from_dict(data, source="fuzz")
    except GraphError:
        return
    finite_run(graph, "cpu2", Plan(dict.fromkeys(graph.nx, "cpu0")))


#: the pieces an argument list is drawn from: subcommands, options, values good and bad
COMMANDS = ["simulate", "compare", "graph", "sweep", "plot"]
OPTIONS = ["--platform", "--scheduler", "--schedulers", "--requests", "--interval", "--batch", "--granularity",
           "--cost", "--out", "--json", "--trace", "--plan", "--noise", "--seed", "--kind", "--agg", "--width",
           "--dry-run", "--no-plots", "--workers", "--arg", "--input-shape"]  # fmt: skip
VALUES = ["tiny.json", "plan.json", "s.toml", "results", "cpu2", "xeon-p2200", "heft", "all-cpu", "all-cpu,heft",
          "bogus", "0", "1", "-1", "3", "1e308", "nan", "inf", "1e-300", "99999999999999999999", "op", "fused",
          "out", "out/x.json", "/dev/null", "roofline", "bars", "mean", "2x2", "a=1", ""]  # fmt: skip


@functools.cache
def tiny_json() -> bytes:
    """The file :meth:`Graph.to_json` writes for :func:`chain`, made once (a synced atomic
    write): each box holds a copy of its bytes."""
    with tempfile.TemporaryDirectory() as folder:
        chain().to_json(Path(folder) / "tiny.json")
        return (Path(folder) / "tiny.json").read_bytes()


def make_inputs(folder: Path) -> None:
    (folder / "tiny.json").write_bytes(tiny_json())
    (folder / "plan.json").write_text(json.dumps({"hetsim_plan": 1, "placement": dict.fromkeys("abc", "cpu")}))
    (folder / "s.toml").write_text('name = "s"\n[grid]\nmodel = ["tiny.json"]\nplatform = ["cpu2"]\n'
                                   'scheduler = ["all-cpu"]\n')
    (folder / "results").mkdir()
    (folder / "results" / "results.csv").write_text("point_id,status,makespan_s,scheduler,model\np,ok,abc,heft,m\n")


def listing(folder: Path) -> set[str]:
    return {str(p) for p in folder.rglob("*")}


def run_in_box(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, argv: list[str],
               inputs: dict[str, bytes] | None = None) -> tuple[int, Path]:
    """``hetsim ARGV`` run in ``box/work`` (holding :func:`make_inputs` and INPUTS, name ->
    bytes): it exits 0, 1 or 2 without a traceback, and nothing appears in ``box``
    outside ``work``. Returns the exit code and ``work``."""
    box = tmp_path_factory.mktemp("box")
    work = box / "work"
    work.mkdir()
    make_inputs(work)
    for name, data in (inputs or {}).items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_bytes(data)
    before = listing(box) - listing(work)
    monkeypatch.chdir(work)
    err = io.StringIO()
    with redirect_stdout(io.StringIO()), redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as e:  # argparse's refusal
            code = e.code
    text = err.getvalue()
    assert code in (0, 1, 2), (argv, code, text)
    assert "Traceback" not in text, (argv, text)
    assert listing(box) - listing(work) == before, (argv, sorted(listing(box) - listing(work) - before))
    assert os.path.exists(os.devnull) and not Path(os.devnull).is_file()
    return code, work


@FUZZ
@given(command=st.sampled_from(COMMANDS), rest=st.lists(st.one_of(st.sampled_from(OPTIONS), st.sampled_from(VALUES)),
                                                          max_size=7))  # fmt: skip
def test_command_lines(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
                       command: str, rest: list[str]) -> None:
    """Work in ``box/work``: nothing may appear in ``box`` outside it."""
    argv = [command, *rest]
    if command in ("simulate", "compare", "graph") and not any(v.endswith(".json") for v in rest[:1]):
        argv = [command, "tiny.json", *rest]
    if command == "compare" and "--schedulers" not in rest:
        argv += ["--schedulers", "all-cpu,heft"]  # the optimal scheduler's search is not what is fuzzed here
    if command == "sweep":
        argv = ["sweep", "s.toml", *rest]
    if command == "plot":
        argv = ["plot", "results", "--kind", "bars", *rest]
    run_in_box(tmp_path_factory, monkeypatch, argv)


#: ``hetsim llm plan`` on a described machine, its plan written into the work folder
LLM_PLAN = ["--gpu", "RTX 4090", "--ram-gb", "64", "--ram-bw", "90GB/s", "--threads", "16", "--context", "512",
            "--out", "plan.json"]  # fmt: skip


def finite_plan(work: Path) -> None:
    """The plan file an LLM plan wrote holds finite numbers only."""
    def refuse(constant: str) -> None:
        raise AssertionError(f"plan.json holds {constant}")

    def numbers(obj: Any) -> list[float]:
        if isinstance(obj, dict):
            return [x for v in obj.values() for x in numbers(v)]
        if isinstance(obj, list):
            return [x for v in obj for x in numbers(v)]
        return [obj] if isinstance(obj, (int, float)) and not isinstance(obj, bool) else []

    plan = json.loads((work / "plan.json").read_text(), parse_constant=refuse)
    assert all(math.isfinite(x) for x in numbers(plan))


@FUZZ
@given(name=st.sampled_from(sorted(TINY_CONFIGS)), path=st.lists(st.integers(0, 40), min_size=1, max_size=3),
       value=WILD)  # fmt: skip
def test_config_files(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, name: str,
                      path: list[int], value: Any) -> None:
    """A Hugging Face config.json with one value replaced: planned with finite figures, or
    refused in one line."""
    data = mutate(json.loads(json.dumps(TINY_CONFIGS[name])), path, value)
    config = json.dumps(data).encode()
    code, work = run_in_box(tmp_path_factory, monkeypatch, ["llm", "plan", "model/config.json", *LLM_PLAN],
                            {"model/config.json": config})
    if code == 0:
        finite_plan(work)


@functools.cache
def tiny_gguf() -> tuple[bytes, int, tuple[str, ...]]:
    """(bytes of a tiny llama GGUF file, the length of its header: everything before the
    tensor data, its metadata keys)."""
    a = architecture_from_hf(TINY_CONFIGS["llama"], name="llama")
    with tempfile.TemporaryDirectory() as folder:
        path = write_gguf(Path(folder) / "m.gguf", a, recipe_tensors(a, "Q4_K_M"))
        header = read_gguf_header(path)
        data = path.read_bytes()
    end = data.index(header.tensors[-1].name.encode()) + len(header.tensors[-1].name)
    return data, end + 4 * 8, tuple(sorted(header.metadata))


@FUZZ
@given(key=st.integers(0, 40), value=st.binary(min_size=4, max_size=4), vtype=st.one_of(st.none(), st.integers(0, 15)),
       poke=st.one_of(st.none(), st.tuples(st.integers(0, 10**6), st.binary(min_size=1, max_size=8))),
       cut=st.one_of(st.none(), st.integers(0, 10**6)))  # fmt: skip
def test_gguf_headers(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, key: int,
                      value: bytes, vtype: int | None, poke: tuple[int, bytes] | None, cut: int | None) -> None:
    """A GGUF file whose header has a metadata value (and perhaps its type) replaced, a few
    bytes overwritten, or is cut short: planned with finite figures, or refused in one line."""
    data, header_end, keys = tiny_gguf()
    data = bytearray(data)
    name = keys[key % len(keys)].encode()
    at = data.index(struct.pack("<Q", len(name)) + name) + 8 + len(name)  # the value's type, then the value
    if vtype is not None:
        data[at:at + 4] = struct.pack("<I", vtype)
    data[at + 4:at + 8] = value
    if poke is not None:
        offset, chunk = poke
        offset %= header_end
        data[offset:offset + len(chunk)] = chunk
    if cut is not None:
        data = data[:cut % header_end]
    code, work = run_in_box(tmp_path_factory, monkeypatch, ["llm", "plan", "m.gguf", *LLM_PLAN],
                            {"m.gguf": bytes(data)})
    if code == 0:
        finite_plan(work)
