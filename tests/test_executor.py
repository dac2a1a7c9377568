"""The plan executor (runtime.executor.execute): real runs on this machine's CPU (cpu2).

The zoo model is squeezenet1_1 at 64x64 (117 ops, parallel fire-module branches),
imported once per module. GPU tests skip when CUDA is absent.
"""

from __future__ import annotations

import json
import os
import warnings
from collections import defaultdict

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from hetsim.costmodel.roofline import Roofline  # noqa: E402
from hetsim.graphs.graph import Graph  # noqa: E402
from hetsim.runtime import ExecutionError, RunResult, execute  # noqa: E402
from hetsim.runtime.backends import BackendError  # noqa: E402
from hetsim.runtime.executor.execute import execute_wired, map_devices  # noqa: E402
from hetsim.runtime.executor.setup import TorchCall, Wiring  # noqa: E402
from hetsim.sim import Plan, PlanError, Platform, simulate  # noqa: E402

CPU2 = Platform.preset("cpu2")
HAS_CUDA = torch.cuda.is_available()


@pytest.fixture(scope="module")
def squeeze():
    """(graph, relax model) of squeezenet1_1 at 64x64."""
    from hetsim.runtime.backends.tvm_backend import import_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = import_model("squeezenet1_1", image_size=64)
    return model.graph, model


def _plan(name: str, graph: Graph, platform: Platform = CPU2) -> tuple[Graph, Plan]:
    from hetsim import schedulers

    cost = Roofline()
    if name == "alternate":  # every other op on the other worker: a handoff per edge
        topo = graph.topological_order()
        return graph, Plan({n: f"cpu{i % 2}" for i, n in enumerate(topo)})
    s = schedulers.get(name, **({"only_if_faster": False} if name == "tensor-split" else {}))
    g = s.transform(graph, platform, cost)
    return g, s.schedule(g, platform, cost)


def _check_records(run: RunResult, graph: Graph, plan: Plan) -> None:
    ops = [r for r in run.records if r["kind"] == "op"]
    by_node = {(r["node"], r["request"]): r for r in ops}
    assert len(by_node) == len(ops) == graph.number_of_nodes() * run.requests
    for r in ops:
        assert 0.0 <= r["start"] <= r["end"]
        assert set(r) >= {"kind", "name", "node", "request", "resource", "stream", "start", "end", "bytes"}
        if plan.policy is None:
            assert r["resource"] == plan.placement[r["node"]]
    for u, v in graph.nx.edges:  # dependencies respected
        for req in range(run.requests):
            assert by_node[(u, req)]["end"] <= by_node[(v, req)]["start"] + 1e-9, (u, v)
    lanes = defaultdict(list)  # no overlap on one worker
    for r in ops:
        lanes[(r["resource"], r["stream"])].append((r["start"], r["end"]))
    for spans in lanes.values():
        spans.sort()
        for (_, e0), (s1, _) in zip(spans, spans[1:]):
            assert e0 <= s1 + 1e-9
    assert len(run.makespans) == 2 and all(m > 0 for m in run.makespans)
    assert max(r["end"] for r in ops) <= max(run.makespans) + 1e-3


@pytest.mark.parametrize("scheduler", ["all-cpu", "heft", "alternate", "dynamic"])
def test_execute_cpu2_matches_reference(squeeze, scheduler):
    graph, model = squeeze
    g, plan = _plan(scheduler, graph)
    run = execute(g, plan, CPU2, model=model, warmup=1, repeats=2, cost=Roofline(), seed=0)
    assert run.check is not None and run.check["reference"] == "torch module"
    assert run.check["error"] <= 1.0
    _check_records(run, g, plan)
    assert run.devices == {"cpu0": "cpu@1", "cpu1": "cpu@1"}
    used = {r["resource"] for r in run.records if r["kind"] == "op"}
    for d in used:
        assert run.device_busy[d] > 0
    if scheduler in ("alternate", "dynamic"):
        assert used == {"cpu0", "cpu1"}
    if scheduler == "all-cpu":
        assert run.device_busy["cpu1"] == 0.0
    # a dynamic plan's placements are timed (what validation simulates it with); a static plan makes none
    if scheduler == "dynamic":
        assert 0.0 < run.decision_s < run.median and run.summary()["decision_s"] == run.decision_s
        assert "run-time placement: median" in str(run)
    else:
        assert run.decision_s is None and "decision_s" not in run.summary()


class Depthwise(torch.nn.Module):
    """A stem, a depthwise 3x3, a pointwise 1x1 and a strided depthwise 3x3: the
    convolution kinds of a MobileNet block, at 32x32 (10 ops, a few seconds to import
    and run where mobilenet_v2 takes half a minute)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.dw1 = torch.nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.pw = torch.nn.Conv2d(16, 32, 1)
        self.dw2 = torch.nn.Conv2d(32, 32, 3, stride=2, padding=1, groups=32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dw2(torch.relu(self.pw(torch.relu(self.dw1(self.stem(x))))))


def test_tensor_split_of_depthwise_convolutions_runs():
    """Split depthwise convolutions (each part its groups' channels) run on both
    workers and give the module's outputs."""
    from hetsim import schedulers
    from hetsim.runtime.backends.relax_model import import_module

    torch.manual_seed(0)
    model = import_module(Depthwise().eval(), (torch.rand(1, 3, 32, 32),), name="depthwise")
    s = schedulers.get("tensor-split", only_if_faster=False)
    g = s.transform(model.graph, CPU2, Roofline())
    grouped = [n for n, d in g.nodes(data=True) if "split_of" in d["attrs"] and d["attrs"].get("groups", 1) > 1]
    assert grouped, "no depthwise convolution was split"
    run = execute(g, s.schedule(g, CPU2, Roofline()), CPU2, model=model, warmup=0, repeats=1)
    assert {r["resource"] for r in run.records if r["kind"] == "op" and r["node"] in grouped} == {"cpu0", "cpu1"}
    assert run.check["error"] <= 1.0 and run.check["node_error"] <= 1.0


def test_tensor_split_and_microbatches(squeeze):
    """A graph rewritten by tensor-split (parts read slices of the weights) and a
    pipeline plan with micro-batches (several requests in flight) both run right."""
    graph, model = squeeze
    g, plan = _plan("tensor-split", graph)
    assert any("/part" in n for n in g.nx)
    run = execute(g, plan, CPU2, model=model, warmup=1, repeats=2)
    assert run.check["error"] <= 1.0
    _check_records(run, g, plan)
    plan4 = Plan(plan.placement, plan.priority, microbatches=3)
    run4 = execute(g, plan4, CPU2, model=model, warmup=0, repeats=2)
    assert run4.requests == 3
    _check_records(run4, g, plan4)


def test_each_worker_is_a_thread_with_its_own_intra_op_threads(monkeypatch):
    """cpu2's workers are two threads, each running its kernels with one intra-op
    thread: torch's thread count is per thread (OpenMP), so each worker sets it."""
    import threading

    g, wiring = _branches(chain=3, size=64)
    seen: dict[str, set[int]] = defaultdict(set)
    real = TorchCall.__call__

    def spy(self, args, request=0):
        seen[threading.current_thread().name].add(torch.get_num_threads())
        return real(self, args, request)

    monkeypatch.setattr(TorchCall, "__call__", spy)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        plan = Plan({n: ("cpu0" if n.startswith("a") else "cpu1") for n in g.nx})
        execute_wired(g, plan, CPU2, wiring, warmup=0, repeats=1, check=True)
        assert torch.get_num_threads() == 2  # the caller's setting is given back
    finally:
        torch.set_num_threads(before)
    assert seen["hetsim-cpu0-0"] == {1} and seen["hetsim-cpu1-0"] == {1}


@pytest.mark.slow
def test_two_workers_are_faster_than_one():
    """Two branches on two workers run concurrently: their kernels overlap in time
    (torch releases the GIL inside kernels). An executor that serialises its workers
    gives no overlap at all; how much they overlap depends on the cores the host gives
    us (a busy core time-slices both threads), and the speed-up is a timing figure,
    printed by benchmarks/validate_cpu2.py, so neither is asserted here. The records
    are the last run's. Each branch runs about 10 ms, longer than the few ms for which
    the OS gives another process a core, so that a busy core cannot serialise a whole
    run: with 3 ms branches (a chain of 8), a full suite beside a CPU-bound pytest
    process saw no overlap in three executions, and so did 2 of 6 runs of this test
    beside two CPU-bound processes; with 28, none of 6. Up to three executions are
    tried (a serialising executor overlaps in none)."""
    chain = 28
    g, wiring = _branches(chain=chain, size=512)
    one = execute_wired(g, Plan(dict.fromkeys(g.nx, "cpu0")), CPU2, wiring, warmup=2, repeats=7)
    assert one.median > 0
    tried = []
    for _ in range(3):
        two = execute_wired(g, Plan({n: ("cpu0" if n.startswith("a") else "cpu1") for n in g.nx}), CPU2,
                            wiring, warmup=2, repeats=7)
        a = [(r["start"], r["end"]) for r in two.records if r["kind"] == "op" and r["resource"] == "cpu0"]
        b = [(r["start"], r["end"]) for r in two.records if r["kind"] == "op" and r["resource"] == "cpu1"]
        assert len(a) == chain and len(b) == chain + 1 and two.median > 0  # the b chain and z
        overlap = sum(max(0.0, min(e0, e1) - max(s0, s1)) for s0, e0 in a for s1, e1 in b)
        tried.append((overlap, sum(e - s for s, e in a)))
        if overlap > 0:
            break
    assert tried[-1][0] > 0, f"no overlap in {len(tried)} executions (overlap s, busy s of cpu0): {tried}"


def test_replicas_measure_a_plan_as_several_executions_built_apart(monkeypatch):
    """``replicas=3``: three executions of the plan, each with its own buffers and
    threads, warmed up, then run in interleaved rounds; their timed runs pooled."""
    from hetsim.runtime.executor.execute import Execution

    g, wiring = _branches(chain=2, size=64)
    built: list[Execution] = []
    timed_runs: list[int] = []  # which execution ran each timed run, in order
    init, run = Execution.__init__, Execution.run

    def counting_init(self, *args, **kw):
        init(self, *args, **kw)
        built.append(self)

    def counting_run(self, n=1, *, timed=True):
        if timed:
            timed_runs.extend([built.index(self)] * n)
        return run(self, n, timed=timed)

    monkeypatch.setattr(Execution, "__init__", counting_init)
    monkeypatch.setattr(Execution, "run", counting_run)
    res = execute_wired(g, Plan(dict.fromkeys(g.nx, "cpu0")), CPU2, wiring, warmup=1, repeats=4, replicas=3)
    assert len(built) == 3 and len(res.makespans) == 12
    assert sorted(timed_runs) == [0] * 4 + [1] * 4 + [2] * 4  # one timed run of each per round
    assert timed_runs[:3] == [0, 1, 2] and timed_runs != [0, 1, 2] * 4  # the first round in order, then shuffled
    assert all(ex.engine is None for ex in built)  # all closed
    with pytest.raises(ValueError, match="replicas must be an int >= 1"):
        execute_wired(g, Plan(dict.fromkeys(g.nx, "cpu0")), CPU2, wiring, replicas=0)


def test_the_run_settings_travel_as_one_frozen_set():
    """execute, execute_wired and Execution take their settings as one ExecutionOptions
    (a keyword sets its field); a validation's options give each execution its own."""
    from hetsim.runtime.executor.execute import Execution
    from hetsim.runtime.executor.options import ExecutionOptions
    from hetsim.runtime.validation.options import ValidationOptions

    g, wiring = _branches(chain=2, size=64)
    plan = Plan(dict.fromkeys(g.nx, "cpu0"))
    quick = ExecutionOptions(warmup=0, repeats=2, replicas=2, pin_threads=False)
    assert len(execute_wired(g, plan, CPU2, wiring, quick).makespans) == 4
    assert len(execute_wired(g, plan, CPU2, wiring, quick, replicas=1).makespans) == 2
    with pytest.raises(TypeError, match=r"execute_wired\(\) got an unexpected keyword argument 'repeat' "
                                        r"\(options: atol, backend, check, device_map, launch, pin_threads, "):
        execute_wired(g, plan, CPU2, wiring, repeat=1)
    with pytest.raises(TypeError, match=r"execute\(\): options must be ExecutionOptions, got ValidationOptions"):
        execute(g, plan, CPU2, ValidationOptions())
    with pytest.raises(TypeError, match=r"Execution\(\) got 'repeats': the runs are made by run\(n\) and trace\(\)"):
        Execution(g, plan, CPU2, wiring, repeats=2)
    for bad, message in ((dict(repeats=0), "repeats must be an int >= 1, got 0"),
                         (dict(warmup=-1), "warmup must be an int >= 0, got -1"),
                         (dict(requests=True), "requests must be an int >= 1, got True"),
                         (dict(replicas=0), "replicas must be an int >= 1")):
        for options in (ExecutionOptions, ValidationOptions):  # a validation's checked as the executor's
            with pytest.raises(ValueError, match=message):
                options(**bad)
    assert ExecutionOptions(warmup=np.int64(2), requests=np.int64(3)).warmup == 2  # numpy ints as Python's
    each = ValidationOptions(repeats=4, replicas=2, seed=3, backend="tvm").execution("eager")
    assert each == ExecutionOptions(backend="tvm", repeats=4, replicas=2, seed=3, launch="eager")


def test_workers_stop_polling_when_the_run_ends(monkeypatch):
    """A pinned worker polls its queue for a while before it blocks, but not past the
    end of the run: a worker still polling would take its core (and the GIL) from what
    runs next, the next timed run first of all. With the poll made 30 s long, both
    workers of a two-worker plan are blocked soon after each run returns."""
    import functools
    import time

    from hetsim.runtime.executor import run as executor_run
    from hetsim.runtime.executor.execute import Execution

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two cores: unpinned workers do not poll")
    monkeypatch.setattr(executor_run.Engine, "__init__",
                        functools.partialmethod(executor_run.Engine.__init__, spin_s=30.0))
    g, wiring = _branches(chain=4, size=128)
    plan = Plan({n: ("cpu0" if n.startswith("a") else "cpu1") for n in g.nx})
    with Execution(g, plan, CPU2, wiring) as ex:
        assert ex.engine.idle_spin_s == 30.0
        for _ in range(2):
            ex.run(1)
            deadline = time.perf_counter() + 10.0
            while time.perf_counter() < deadline and not all(ex.engine.idle):
                time.sleep(0.01)
            assert all(len(waiting) == 1 for waiting in ex.engine.idle), "a worker still polls after the run"


def _branches(chain: int, size: int, branches: str = "ab") -> tuple[Graph, Wiring]:
    """x (64 x size) -> two chains of matmul with a size x size weight (a*, b*) -> add;
    with one branch (``branches="a"``), the chain alone."""
    g = Graph(name="branches")
    t = ([64, size], "float32")
    srcs: dict = {}
    rng = np.random.default_rng(0)
    consts = {0: (rng.standard_normal((size, size)) / size**0.5).astype(np.float32)}
    for br in branches:
        prev = None
        for i in range(chain):
            n = f"{br}{i}"
            g.add_op(n, "matmul", inputs=[t, ([size, size], "float32")], outputs=[t],
                     flops=128.0 * size * size, param_bytes=4 * size * size)
            srcs[n] = [("node", (prev, 0)) if prev else ("input", "x"), ("const", 0)]
            if prev:
                g.add_edge(prev, n)
            prev = n
    last = f"a{chain - 1}"
    if len(branches) == 2:
        g.add_op("z", "add", inputs=[t, t], outputs=[t])
        g.add_edge(f"a{chain - 1}", "z")
        g.add_edge(f"b{chain - 1}", "z")
        srcs["z"] = [("node", (f"a{chain - 1}", 0)), ("node", (f"b{chain - 1}", 0))]
        last = "z"
    g.meta["inputs"] = [{"name": "x", "shape": [64, size], "dtype": "float32", "bytes": 256 * size,
                         "consumers": [f"{br}0" for br in branches]}]
    g.meta["outputs"] = [{"node": last, "output": 0, "shape": [64, size], "dtype": "float32",
                          "bytes": 256 * size}]
    return g, Wiring(srcs, consts, {}, {"x": rng.random((64, size), dtype=np.float32)})


class _Recorder:
    """A dynamic policy that alternates devices and records what the view told it."""

    name = "recorder"

    def __init__(self) -> None:
        self.seen: list[tuple[str, float, dict, list]] = []

    def select(self, node, view):
        now = view.now
        free = {d: view.device_free_at(d) for d in view.platform.device_names}
        locs = [view.location(p) for p in view.graph.nx.predecessors(node)]
        self.seen.append((node, now, free, locs))
        return view.platform.device_names[len(self.seen) % 2]

    def to_dict(self):
        return {"name": self.name, "params": {}}


def test_dynamic_policy_uses_the_system_view(squeeze):
    graph, model = squeeze
    policy = _Recorder()
    plan = Plan({}, policy=policy)
    run = execute(graph, plan, CPU2, model=model, warmup=1, repeats=1)  # records: the last run
    assert run.check["error"] <= 1.0
    n = graph.number_of_nodes()
    assert len(policy.seen) == 2 * n  # every op placed once per run
    last = policy.seen[n:]
    nows = [now for _, now, _, _ in last]
    assert all(b >= a for a, b in zip(nows, nows[1:])) and nows[0] >= 0
    for _, now, free, locs in last:
        assert all(v >= now - 1e-9 for v in free.values())
        assert all(loc in ("cpu0", "cpu1") for loc in locs)  # predecessors are placed
    placed = {r["node"]: r["resource"] for r in run.records if r["kind"] == "op"}
    chosen = {node: ("cpu0", "cpu1")[(n + i + 1) % 2] for i, (node, *_) in enumerate(last)}
    assert placed == chosen


class _SlowForecast:
    """A cost model that predicts every op to take a second (real ones take microseconds)."""

    def op_time(self, graph, node, device):
        return 1.0

    def dispatch_time(self, graph, node, device):
        return 0.0

    def transfer_time(self, nbytes, link, **kw):
        return 0.0


def test_a_dynamic_policy_sees_a_stream_free_once_its_op_has_returned():
    """An op that returns before its predicted end frees its stream: the earliest-finish
    policy keeps a chain on the worker that ran it, as the simulator does. Before, the
    stream looked busy until the predicted end, and the chain hopped between the two
    workers at every op, paying a handoff each time."""
    from hetsim import schedulers

    g, wiring = _branches(chain=8, size=32, branches="a")
    plan = schedulers.get("dynamic").schedule(g, CPU2, _SlowForecast())
    run = execute_wired(g, plan, CPU2, wiring, warmup=1, repeats=3, cost=_SlowForecast())
    placed = [r["resource"] for r in sorted(run.records, key=lambda r: r["start"]) if r["kind"] == "op"]
    assert len(placed) == 8 and placed == ["cpu0"] * 8
    sim = simulate(g, CPU2, plan, _SlowForecast(), record=True)
    assert {r["resource"] for r in sim.records if r["kind"] == "op"} == {"cpu0"}


def test_result_exports(squeeze, tmp_path):
    graph, model = squeeze
    g, plan = _plan("heft", graph)
    run = execute(g, plan, CPU2, model=model, warmup=0, repeats=2)
    path = run.to_chrome_trace(tmp_path / "run_trace.json")
    trace = json.loads(path.read_text())
    xs = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(xs) == len(run.records)
    assert {"cpu0", "dispatch"} <= {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    row = run.summary()
    assert row["makespan_s"] == run.median and row["ops"] == g.number_of_nodes()
    assert run.p10 <= run.median <= run.p90
    assert "makespan (ms)" in str(run)
    df = run.to_dataframe()
    assert len(df) == len(run.records)


# ---------------------------------------------------------------------- bad input
def test_map_devices():
    plat = Platform.preset("xeon-p2200")
    assert {k: v.name for k, v in map_devices(plat).items()} == {"cpu": "cpu@24", "gpu": "cuda:0"}
    assert map_devices(plat, {"gpu": "cuda:1"})["gpu"].name == "cuda:1"
    with pytest.raises(ExecutionError, match="not devices of platform"):
        map_devices(plat, {"tpu": "cpu"})


def test_plan_for_another_graph(squeeze):
    graph, model = squeeze
    plan = Plan({**dict.fromkeys(graph.nx, "cpu0"), "conv_from_elsewhere": "cpu1"})
    with pytest.raises(PlanError, match="conv_from_elsewhere"):
        execute(graph, plan, CPU2, model=model, repeats=1)


@pytest.mark.skipif(HAS_CUDA, reason="this machine has a GPU")
def test_missing_gpu_is_reported_before_anything_runs():
    g = Graph(name="no-model")  # no zoo model: anything done after the device check would fail
    g.add_op("a", "relu", inputs=[([4], "float32")], outputs=[([4], "float32")])
    plat = Platform.preset("xeon-p2200")
    cpu = {"cpu": "cpu"}  # its CPU has 24 threads; this machine fewer
    with pytest.raises(ExecutionError, match=r"'gpu' runs on 'cuda:0'.*no CUDA GPU"):
        execute(g, Plan({"a": "gpu"}), plat, device_map=cpu)
    with pytest.raises(ExecutionError, match=r"'cpu' runs on 'cpu@24'.*may use"):
        execute(g, Plan({"a": "cpu"}), plat)
    run_cpu = Plan({"a": "cpu"})  # the same platform is fine when the plan uses its CPU
    with pytest.raises(ExecutionError, match="names no model.*import_module"):
        execute(g, run_cpu, plat, device_map=cpu)


def test_backend_cannot_run_op():
    g = Graph(name="odd")
    g.add_op("a", "frobnicate", inputs=[([4], "float32")], outputs=[([4], "float32")])
    g.meta["inputs"] = [{"name": "x", "shape": [4], "dtype": "float32", "bytes": 16, "consumers": ["a"]}]
    g.meta["outputs"] = [{"node": "a", "output": 0, "shape": [4], "dtype": "float32", "bytes": 16}]
    wiring = Wiring({"a": [("input", "x")]}, {}, {}, {"x": np.ones(4, np.float32)})
    with pytest.raises(BackendError, match=r"'frobnicate'.*tvm backend"):
        execute_wired(g, Plan({"a": "cpu0"}), CPU2, wiring, repeats=1)


def test_wrong_execution_is_caught(squeeze, monkeypatch):
    """A plan executed wrongly must not pass as fast: the node that differs from a
    single-device run is named."""
    import threading

    graph, model = squeeze
    real = TorchCall.__call__
    target = graph.topological_order()[40]

    def corrupt(self, args, request=0):
        out = real(self, args, request)
        if threading.current_thread().name.startswith("hetsim-") and self is calls.get(target):
            return (out[0] * 1.001,)
        return out

    calls: dict = {}
    from hetsim.runtime.executor import setup as setup_mod
    build = setup_mod.build_calls

    def spy_build(*a, **kw):
        out = build(*a, **kw)
        calls.update(out)
        return out

    monkeypatch.setattr(TorchCall, "__call__", corrupt)
    monkeypatch.setattr("hetsim.runtime.executor.execute.build_calls", spy_build)
    with pytest.raises(ExecutionError, match=f"node '{target}' \\(run on 'cpu1'\\) differs"):
        execute(graph, Plan(dict.fromkeys(graph.nx, "cpu1")), CPU2, model=model, repeats=1)


def test_wrong_weights_are_caught_by_the_module_reference(squeeze):
    """Wrong weights (the same in the plan's run and the single-device run) differ
    from the zoo model's own forward."""
    from hetsim.runtime.executor.setup import wire

    graph, model = squeeze
    wiring = wire(graph, model)  # its own weights: the fixture's model keeps its own
    key = max(wiring.consts, key=lambda k: wiring.consts[k].size)  # the largest weight
    wiring.consts[key] = wiring.consts[key] * 1.5
    with pytest.raises(ExecutionError, match="differ from the torch module reference"):
        execute_wired(graph, Plan(dict.fromkeys(graph.nx, "cpu0")), CPU2, wiring, model=model, repeats=1)


def test_out_of_memory_reports_predicted_peak(squeeze, monkeypatch):
    graph, model = squeeze
    real = TorchCall.__call__

    def oom(self, args, request=0):
        if self.slots and self.slots[0][1] > 20:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(self, args, request)

    monkeypatch.setattr(TorchCall, "__call__", oom)
    with pytest.raises(ExecutionError, match=r"out of memory.*simulator predicts peak memory cpu0 [0-9.]+ MiB"):
        execute(graph, Plan(dict.fromkeys(graph.nx, "cpu0")), CPU2, model=model, repeats=1)


def test_graph_that_the_model_does_not_explain(squeeze):
    graph, model = squeeze
    g = graph.copy()
    g.add_op("extra", "relu", inputs=[([1, 1000], "float32")], outputs=[([1, 1000], "float32")])
    with pytest.raises(ExecutionError, match="'extra'"):
        execute(g, Plan(dict.fromkeys(g.nx, "cpu0")), CPU2, model=model, repeats=1)


def test_overhead_is_small():
    from hetsim.runtime.validation.validate import measure_overhead

    t = measure_overhead("cpu@1", ops=100, repeats=3)
    assert 1e-7 < t < 1e-3


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
@pytest.mark.parametrize("launch", ["graph", "eager"])
def test_cpu_gpu_plan_on_a_gpu(squeeze, launch):
    """Both launch modes give the module's outputs; the timed runs record the GPU's
    launches only, the traced run every op and copy."""
    import dataclasses

    graph, model = squeeze
    plat = Platform.preset("xeon-p2200")
    g = graph
    plan = Plan({n: ("gpu" if i % 3 else "cpu") for i, n in enumerate(g.topological_order())})
    run = execute(g, plan, plat, model=model, warmup=1, repeats=2, device_map={"cpu": "cpu"}, launch=launch,
                  trace=True)
    assert run.check["error"] <= 1.0 and run.check["node_error"] <= 1.0 and run.launch == launch
    assert not any(r["kind"] == "transfer" or r["resource"] == "gpu" for r in run.records if r["kind"] != "dispatch")
    assert any(r["kind"] == "transfer" for r in run.trace)
    traced = dataclasses.replace(run, records=run.trace, makespans=[max(r["end"] for r in run.trace)] * 2)
    _check_records(traced, g, plan)
    assert run.device_busy["gpu"] > 0
    sim = simulate(g, plat, plan, Roofline(), record=True)
    assert sim.makespan > 0


def test_tvm_backend_runs_a_plan():
    """The tvm backend's kernels (compiled PrimFuncs, preallocated outputs) run a
    two-worker plan and match the torch module."""
    from hetsim.runtime.backends.tvm_backend import import_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = import_model("lstm", seq_len=2, hidden=8)
    g = model.graph
    topo = g.topological_order()
    plan = Plan({n: f"cpu{i % 2}" for i, n in enumerate(topo)})
    cores = os.sched_getaffinity(0)
    run = execute(g, plan, CPU2, backend="tvm", model=model, warmup=1, repeats=2)
    assert run.backend == "tvm" and run.check["error"] <= 1.0 and run.check["node_error"] <= 1.0
    _check_records(run, g, plan)
    # TVM's thread pool left the caller's cores alone (TVM_BIND_THREADS=0): pinned to
    # one, it would leave every later execution in the process unable to pin its workers
    assert os.sched_getaffinity(0) == cores


def test_a_cpu_worker_keeps_its_cores_whichever_others_a_plan_uses(monkeypatch):
    from types import SimpleNamespace

    from hetsim.runtime.executor import view as executor_view
    def spec(kind: str, threads: int) -> SimpleNamespace:
        return SimpleNamespace(kind=kind, cpu_threads=lambda: threads)

    specs = [spec("cpu", 1), spec("cpu", 1), spec("gpu", 1)]
    monkeypatch.setattr(executor_view.os, "sched_getaffinity", lambda _pid: {0, 1, 2, 3})
    assert executor_view.pin_cores(specs, [1, 1, 1], {0, 1}) == {(0, 0): {0}, (1, 0): {1}}
    assert executor_view.pin_cores(specs, [1, 1, 1], {1}) == {(1, 0): {1}}  # cpu1 alone: still core 1
    # more workers than cores: the active ones consecutively, else none
    assert executor_view.pin_cores(specs, [3, 2, 1], {1}) == {(1, 0): {0}, (1, 1): {1}}
    assert executor_view.pin_cores(specs, [3, 2, 1], {0, 1}) == {}
