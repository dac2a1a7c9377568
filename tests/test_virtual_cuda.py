"""The executor's GPU path on a virtual-time CUDA device (runtime.executor.virtual):
streams on a virtual clock, CUDA's capture rules, races between streams, and every
applicable scheduler's plan of the zoo models run with outputs equal to the
single-device reference.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from hetsim import schedulers  # noqa: E402
from hetsim.costmodel.roofline import Roofline  # noqa: E402
from hetsim.graphs.graph import Graph  # noqa: E402
from hetsim.runtime import ExecutionError  # noqa: E402
from hetsim.runtime.executor.cuda import CudaRuntime  # noqa: E402
from hetsim.runtime.executor.setup import Wiring, plan_devices  # noqa: E402
from hetsim.runtime.executor.virtual.device import CudaRuleError, Producer, VirtualCuda  # noqa: E402
from hetsim.sim import Plan, Platform  # noqa: E402

ONE_STREAM = Platform.preset("xeon-p2200")  # cpu + one GPU stream
FOUR_STREAMS = Platform.preset("h100-server")  # cpu + a GPU of four streams
SIZE = 8


def two_gpus() -> Platform:
    """The host and the first two GPUs of ``multi-gpu-4`` (peer links between them)."""
    return Platform.preset("multi-gpu-4").only(["cpu", "gpu0", "gpu1"], name="two-gpu")


TWO_GPUS = two_gpus()
PLATFORMS = {"one-stream": ONE_STREAM, "four-streams": FOUR_STREAMS, "two-gpus": TWO_GPUS}


class Flat:
    """Every op 1 ms on any device, 10 us to dispatch; copies 1 us."""

    def op_time(self, graph: Any, node: str, device: Any) -> float:
        return 1e-3

    def dispatch_time(self, graph: Any, node: str, device: Any) -> float:
        return 1e-5

    def transfer_time(self, nbytes: int, link: Any) -> float:
        return 1e-6


# ----------------------------------------------------------------------- graphs
def _graph(edges: dict[str, list[str]]) -> tuple[Graph, Wiring]:
    """One input -> matmul by a fixed weight, two -> add; no input: reads the graph
    input ``x``. The last node is the graph output."""
    g = Graph(name="g")
    t = ([4, SIZE], "float32")
    rng = np.random.default_rng(0)
    consts = {0: (rng.standard_normal((SIZE, SIZE)) / SIZE**0.5).astype(np.float32)}
    srcs: dict[str, list] = {}
    first = []
    for n, preds in edges.items():
        if len(preds) == 2:
            g.add_op(n, "add", inputs=[t, t], outputs=[t], flops=32.0)
            srcs[n] = [("node", (p, 0)) for p in preds]
        else:
            g.add_op(n, "matmul", inputs=[t, ([SIZE, SIZE], "float32")], outputs=[t], flops=512.0,
                     param_bytes=4 * SIZE * SIZE)
            srcs[n] = [("node", (preds[0], 0)) if preds else ("input", "x"), ("const", 0)]
            if not preds:
                first.append(n)
        for p in preds:
            g.add_edge(p, n)
    last = list(edges)[-1]
    g.meta["inputs"] = [{"name": "x", "shape": [4, SIZE], "dtype": "float32", "bytes": 16 * SIZE,
                         "consumers": first}]
    g.meta["outputs"] = [{"node": last, "output": 0, "shape": [4, SIZE], "dtype": "float32", "bytes": 16 * SIZE}]
    return g, Wiring(srcs, consts, {}, {"x": rng.random((4, SIZE), dtype=np.float32)})


CHAIN = {"a": [], "b": ["a"], "c": ["b"], "d": ["c"]}
FORK = {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"], "e": ["d"]}


def _run(platform: Platform, edges: dict, placement: dict[str, str], launch: str, cost: Any = None,
         runs: int = 1, **kw: Any) -> tuple[VirtualCuda, Any]:
    g, wiring = _graph(edges)
    dev = VirtualCuda(platform, cost if cost is not None else Flat())
    with dev.execution(g, Plan(placement, meta={"scheduler": "test"}), wiring, launch=launch, **kw) as ex:
        ex.run(runs)
        return dev, ex.result()


# ------------------------------------------------------------- runs and time
@pytest.mark.parametrize("launch", ["graph", "eager"])
def test_a_mixed_plan_runs_right_without_monkeypatching(launch):
    dev, res = _run(ONE_STREAM, CHAIN, {"a": "gpu", "b": "gpu", "c": "cpu", "d": "gpu"}, launch)
    assert res.check["node_error"] <= 1.0 and res.launch == launch
    assert dev.last_makespan > 3e-3  # four ops of 1 ms in a chain
    if launch == "graph":
        assert len(dev.graphs) == 2 and dev.graphs[0].replays == dev.graphs[1].replays >= 1


def test_a_chain_on_one_gpu_lasts_its_kernels_and_copies():
    """All four ops on the GPU: the copy in (1 us) overlaps the first launch, the
    kernels run back to back, then the copy out; the executor's makespan is read
    from the device's clock."""
    gpu = ONE_STREAM.device("gpu")
    assert float(gpu.event_s) == float(gpu.copy_issue_s) == 0.0  # nothing else on the host's path
    for launch in ("graph", "eager"):
        dev, res = _run(ONE_STREAM, CHAIN, dict.fromkeys(CHAIN, "gpu"), launch)
        first = float(gpu.graph_launch_s) if launch == "graph" else 1e-5
        assert dev.last_makespan == pytest.approx(max(1e-6, first) + 4e-3 + 1e-6, rel=1e-9)
        assert res.makespans == [pytest.approx(dev.last_makespan, rel=1e-9)]


def test_a_traced_run_times_each_gpu_op_on_the_device():
    """A traced run launches each GPU op behind a spin between two timing events:
    each op's device time is its priced 1 ms."""
    g, wiring = _graph(CHAIN)
    dev = VirtualCuda(ONE_STREAM, Flat())
    with dev.execution(g, Plan({"a": "gpu", "b": "gpu", "c": "cpu", "d": "gpu"}), wiring, launch="graph") as ex:
        ex.run(1)
        records = ex.trace()
    ops = {r["node"]: r["end"] - r["start"] for r in records if r["kind"] == "op"}
    assert ops == {n: pytest.approx(1e-3 if n != "c" else 1e-3 + 1e-5, rel=1e-6) for n in "abcd"}


def test_eager_host_bound_chain_is_the_sum_of_its_launches():
    """Kernels shorter than their launch: the stream waits for the host, which
    launches one op per dispatch time."""

    class HostBound(Flat):
        def op_time(self, graph: Any, node: str, device: Any) -> float:
            return 1e-6

        def dispatch_time(self, graph: Any, node: str, device: Any) -> float:
            return 1e-4

    dev, _ = _run(ONE_STREAM, CHAIN, dict.fromkeys(CHAIN, "gpu"), "eager", cost=HostBound())
    assert 4e-4 <= dev.last_makespan <= 4e-4 + 1e-4
    graph, _ = _run(ONE_STREAM, CHAIN, dict.fromkeys(CHAIN, "gpu"), "graph", cost=HostBound())
    assert graph.last_makespan < 1e-4  # one launch for the four kernels


def test_two_streams_run_a_fork_side_by_side():
    """b and c on two streams of one GPU overlap: the fork lasts three ops, not four."""
    placement = dict.fromkeys(FORK, "gpu")
    plan_streams = FOUR_STREAMS
    dev, res = _run(plan_streams, FORK, placement, "eager")
    assert res.check["node_error"] <= 1.0
    assert 4e-3 < dev.last_makespan  # a, (b | c), d, e: at least four ops in series
    assert dev.last_makespan < 5e-3 + 1e-4  # never five in series


def test_the_clock_is_each_threads_own():
    dev = VirtualCuda(ONE_STREAM, Flat())
    s = dev.stream(0)
    ev = dev.event(timing=True)
    with dev.using(0, s):
        dev.record(ev, s)
    seen = []
    t = threading.Thread(target=lambda: seen.append(dev.clock()))
    t.start()
    t.join()
    assert dev.clock() == pytest.approx(float(ONE_STREAM.device("gpu").event_s)) and seen == [0.0]


@pytest.mark.xfail(strict=True, reason="a CPU worker that finds no op whose copies have landed waits for the "
                                       "one whose last copy was issued first (b), not for the first copy to land: "
                                       "c becomes ready while it waits, and lands first")
def test_a_cpu_worker_runs_an_op_whose_input_has_arrived():
    """a (1 ms) and e (0.1 ms) run on two GPU streams; b reads a, c reads e, both on
    the CPU, b ranked first. The simulator's CPU worker runs c while a's output is on
    its way (3.14 ms); the executor's takes b, the only op ready when it looks, whose
    copy has not landed, and waits for it."""
    from hetsim.sim import simulate

    class Cost(Flat):
        def op_time(self, graph: Any, node: str, device: Any) -> float:
            return {"a": 1e-3, "e": 1e-4}.get(node, 1e-3)

    g, wiring = _graph({"e": [], "a": [], "b": ["a"], "c": ["e"], "d": ["b", "c"]})
    plan = Plan({"e": "gpu", "a": "gpu", "b": "cpu", "c": "cpu", "d": "cpu"}, {"a": 0, "e": 1, "b": 2, "c": 3, "d": 4})
    platform = FOUR_STREAMS.replace(devices=tuple(
        dataclasses.replace(d, launch="eager", event_s=0.0, copy_issue_s=0.0) if d.kind == "gpu" else d
        for d in FOUR_STREAMS.devices))
    predicted = simulate(g, platform, plan, Cost()).makespan
    dev = VirtualCuda(platform, Cost())
    with dev.execution(g, plan, wiring, launch="eager") as ex:
        ex.run(1)
        measured = ex.result().makespans[0]
    assert predicted == pytest.approx(3.141e-3, rel=1e-3)
    assert measured == pytest.approx(predicted, rel=0.02)


# ------------------------------------------------------------------- ordering
def _kernel(dev: VirtualCuda, name: str, stream: Any, *args: Any) -> Any:
    def call(a: list, r: int = 0) -> tuple:
        return (a[0] + 1,)

    with dev.using(stream.gpu, stream):
        return dev.run_kernel(call, name, stream.gpu, list(args), 0)


def _device() -> VirtualCuda:
    dev = VirtualCuda(FOUR_STREAMS, Flat())
    dev.prices = {(n, "gpu"): (1e-5, 1e-3) for n in "abc"}
    return dev


def test_reading_another_streams_output_without_a_wait_names_both_ops():
    dev = _device()
    s1, s2 = dev.stream(0), dev.stream(0)
    x = torch.zeros(2)
    dev.tag(x, Producer("x", None, 0, 0, 0.0))
    (a,) = _kernel(dev, "a", s1, x)
    with pytest.raises(CudaRuleError, match=r"'b' on stream gpu0\.s1 reads the output of 'a' on stream gpu0\.s0, "
                                            r"which it never waited for"):
        _kernel(dev, "b", s2, a)


def test_an_event_wait_orders_the_read_and_the_stream_after_it():
    dev = _device()
    s1, s2 = dev.stream(0), dev.stream(0)
    x = torch.zeros(2)
    (a,) = _kernel(dev, "a", s1, x)
    ev = dev.event(timing=False)
    with dev.using(0, s1):
        dev.record(ev, s1)
    with dev.using(0, s2):
        dev.wait(s2, ev)
    (b,) = _kernel(dev, "b", s2, a)
    assert torch.equal(b, x + 2)
    assert s2.tail >= s1.tail + 1e-3  # b started after a ended
    # the host reading a's output needs its own wait
    with pytest.raises(CudaRuleError, match=r"'c' on the host .* reads the output of 'b'"):
        dev.check_read("c", None, dev.host(), b, None)
    done = dev.event(timing=False)
    with dev.using(0, s2):
        dev.record(done, s2)
    dev.wait_host(done)
    dev.check_read("c", None, dev.host(), b, None)
    assert dev.clock() >= s2.tail


def test_an_output_that_is_an_input_keeps_its_producer():
    """batch_norm in inference hands its running statistics back: two streams that
    read the same constant after it are not racing."""
    dev = _device()
    s1, s2 = dev.stream(0), dev.stream(0)
    const, x = torch.ones(2), torch.zeros(2)

    def both(a: list, r: int = 0) -> tuple:
        return (a[0] + 1, a[1], a[1].view(2))

    with dev.using(0, s1):
        out, same, view = dev.run_kernel(both, "a", 0, [x, const], 0)
    assert dev.producer(out).name == "a" and dev.producer(same) is None and dev.producer(view) is None
    _kernel(dev, "b", s2, const)  # no error: nothing wrote it


def test_a_kernel_reading_another_memory_is_an_error():
    dev = VirtualCuda(TWO_GPUS, Flat())
    dev.prices = {("b", "gpu1"): (1e-5, 1e-3), ("a", "gpu0"): (1e-5, 1e-3)}
    s0, s1 = dev.stream(0), dev.stream(1)
    (a,) = _kernel(dev, "a", s0, torch.zeros(2))
    with pytest.raises(CudaRuleError, match=r"'b' on GPU 1 reads the output of 'a', which is in the memory of GPU 0"):
        _kernel(dev, "b", s1, a)


def test_a_missing_wait_in_the_executor_is_caught(monkeypatch):
    """With the executor's cross-stream wait removed, the fork's join reads a branch
    on another stream unordered: the run fails naming both ops."""
    monkeypatch.setattr(CudaRuntime, "_inputs",
                        lambda self, st, reads, stream, mine: [st.vals[p][k] for p, k in reads])
    real_wait = VirtualCuda.wait
    monkeypatch.setattr(VirtualCuda, "wait", lambda self, stream, event: None)
    with pytest.raises(ExecutionError, match=r"'a' on stream \S+ reads the output of 'a host-to-device copy' on "
                                             r"stream \S+, which it never waited for"):
        _run(FOUR_STREAMS, FORK, dict.fromkeys(FORK, "gpu"), "eager")
    monkeypatch.setattr(VirtualCuda, "wait", real_wait)


# --------------------------------------------------------------------- capture
def _capture_device() -> tuple[VirtualCuda, Any, Any]:
    dev = _device()
    return dev, dev.stream(0), dev.stream(0)


def _capturing(dev: VirtualCuda, stream: Any, inside: Any) -> None:
    """Capture a graph of one kernel on ``stream`` in this thread, running ``inside``
    (from another thread) while the capture is in progress."""
    x = torch.zeros(2)

    def body() -> tuple:
        if dev.host().capturing is not None:
            inside()
        return _kernel(dev, "a", stream, x)

    dev.capture(body, stream)


def _in_thread(fn: Any) -> BaseException | None:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 - handed back
            errors.append(e)

    t = threading.Thread(target=run, name="other")
    t.start()
    t.join()
    return errors[0] if errors else None


@pytest.mark.parametrize(("what", "call"), [
    ("a device synchronisation", lambda dev, s: dev.synchronize(0)),
    ("an allocator flush", lambda dev, s: dev.empty_cache(0)),
    ("a capture's start", lambda dev, s: dev.capture(lambda: None, s)),
])
def test_a_sync_a_flush_or_a_capture_during_a_capture_is_an_error(what, call):
    dev, s1, s2 = _capture_device()
    seen: list[BaseException | None] = []
    with pytest.raises(CudaRuleError, match=r"capture of 'a' on stream gpu0\.s0 was invalidated: " + what):
        _capturing(dev, s1, lambda: seen.append(_in_thread(lambda: call(dev, s2))))
    assert isinstance(seen[0], CudaRuleError) and "while thread" in str(seen[0])


def test_a_capture_on_another_gpu_or_after_the_first_is_allowed():
    dev = VirtualCuda(TWO_GPUS, Flat())
    dev.prices = {("a", "gpu0"): (1e-5, 1e-3), ("a", "gpu1"): (1e-5, 1e-3)}
    s0, _s1 = dev.stream(0), dev.stream(1)
    seen: list = []
    _capturing(dev, s0, lambda: seen.append(_in_thread(lambda: dev.synchronize(1))))
    assert seen == [None]
    _capturing(dev, s0, lambda: None)
    assert len(dev.graphs) == 2


def test_a_host_wait_inside_a_capture_is_refused():
    dev, s1, _ = _capture_device()
    ev = dev.event(timing=False)
    with pytest.raises(CudaRuleError, match="host wait on an event inside a capture"):
        _capturing(dev, s1, lambda: dev.wait_host(ev))


def test_a_replay_is_one_launch_of_all_its_kernels():
    dev, s1, _ = _capture_device()
    x = torch.zeros(2)

    def body() -> tuple:
        (a,) = _kernel(dev, "a", s1, x)
        return _kernel(dev, "b", s1, a)

    graph, (out,) = dev.capture(body, s1)
    before, tail = dev.launches, s1.tail
    x += 1
    with dev.using(0, s1):
        dev.replay(graph, s1)
    assert dev.launches == before + 1 and torch.equal(out, x + 2)
    assert s1.tail == pytest.approx(max(tail, dev.clock()) + 2e-3)


# ---------------------------------------------------------------------- zoo matrix
MODELS = {"googlenet": {"image_size": 32}, "resnet18": {"image_size": 32}, "mobilenet_v2": {"image_size": 32},
          "bert_base": {"seq_len": 8}}
#: schedulers that place nothing on a GPU (no GPU work to check), or that do not
#: plan graphs of this size in reasonable time
SKIP = {"all-cpu": "no GPU work", "optimal": "exhaustive search: small graphs only"}


def applicable(name: str, launch: str) -> bool:
    """Whether scheduler ``name`` has a plan to run in ``launch`` mode here."""
    return name not in SKIP and not (name == "dynamic" and launch == "graph")


@pytest.fixture(scope="module")
def zoo_models(tmp_path_factory):
    """name -> (graph, Relax model, wiring) of each zoo model, imported once per module
    in a worker (the matrix's tests of one model share a worker: ``MATRIX``)."""
    from hetsim.graphs import zoo
    from hetsim.runtime.executor.setup import load_model, wire

    cache = tmp_path_factory.getbasetemp() / "virtual-zoo"
    built: dict[str, tuple] = {}

    def get(name: str) -> tuple:
        if name not in built:
            g = zoo.load(name, cache=cache, **MODELS[name])
            model = load_model(g)
            built[name] = (g, model, wire(g, model))
        return built[name]

    return get


@pytest.fixture(scope="module")
def zoo_plans() -> dict:
    """(model, platform, scheduler) -> its plan, made once for both launch modes: no
    scheduler reads the launch mode, and ``random`` draws with its fixed seed."""
    return {}


def check_plan_runs(zoo_models, zoo_plans: dict, model: str, platform: str, scheduler: str, launch: str) -> None:
    g, model_ir, wiring = zoo_models(model)
    plat = PLATFORMS[platform]
    cost = Roofline()
    key = (model, platform, scheduler)
    if key not in zoo_plans:
        zoo_plans[key] = schedulers.get(scheduler).run(g, plat, cost, simulate=False)
    planned = zoo_plans[key]
    if not any(plat.device(d).kind == "gpu" for d in plan_devices(planned.plan, plat)):
        pytest.skip(f"{scheduler} places nothing of {model} on a GPU of {platform}")
    same = planned.graph is g
    if not same:  # a rewritten graph (tensor-split): its model is its source's, which the executor wires
        assert planned.graph.program is g.program and planned.graph.meta["granularity"] == g.meta["granularity"]
    dev = VirtualCuda(plat, cost)
    with dev.execution(planned.graph, planned.plan, wiring if same else None, model=model_ir,
                       launch=launch, cost=cost) as ex:
        ex.run(1)
        res = ex.result()
    assert res.check["node_error"] <= 1.0 and res.check["error"] <= 1.0
    assert dev.last_makespan > 0.0


FAST = [("resnet18", "four-streams", "heft", "graph"), ("resnet18", "two-gpus", "round-robin", "eager"),
        ("resnet18", "one-stream", "donf", "graph")]


@pytest.mark.parametrize(("model", "platform", "scheduler", "launch"), FAST)
def test_zoo_plans_run_under_the_virtual_device(zoo_models, zoo_plans, model, platform, scheduler, launch):
    check_plan_runs(zoo_models, zoo_plans, model, platform, scheduler, launch)


#: every plan; one model's plans form one group, which ``pytest-xdist --dist loadgroup``
#: runs in one worker (one TVM import of the model, one plan for both launch modes)
MATRIX = [pytest.param(m, p, s, launch, marks=pytest.mark.xdist_group(f"virtual-{m}"))
          for m in MODELS for p in PLATFORMS for s in schedulers.names()
          for launch in ("graph", "eager") if applicable(s, launch)]


@pytest.mark.slow
@pytest.mark.parametrize(("model", "platform", "scheduler", "launch"), MATRIX)
def test_every_plan_of_the_matrix_runs_under_the_virtual_device(zoo_models, zoo_plans, model, platform, scheduler,
                                                                 launch):
    check_plan_runs(zoo_models, zoo_plans, model, platform, scheduler, launch)


#: plans whose executor and simulator makespans once differed, each by one rule: the
#: order of the copies on a link and the host thread woken (four streams), peer copies
#: on a stream of their own and GPU producers gating other GPUs' launches (two GPUs), a
#: dynamic plan placing the readers of a launched GPU op (four streams)
AGREEMENT = [("googlenet", "four-streams", "round-robin", "eager"), ("googlenet", "two-gpus", "random", "graph"),
             ("resnet18", "four-streams", "dynamic", "eager")]


@pytest.mark.parametrize(("model", "platform", "scheduler", "launch"), AGREEMENT)
def test_executor_and_simulator_agree_in_virtual_time(zoo_models, model, platform, scheduler, launch):
    from hetsim.sim import simulate

    g, model_ir, wiring = zoo_models(model)
    cost = Roofline()
    plat = PLATFORMS[platform]
    plat = plat.replace(devices=tuple(
        dataclasses.replace(d, launch=launch, graph_launch_s=4e-6, event_s=0.0, copy_issue_s=2e-6)
        if d.kind == "gpu" else d for d in plat.devices))
    planned = schedulers.get(scheduler).run(g, plat, cost, simulate=False)
    predicted = simulate(g, plat, planned.plan, cost).makespan
    dev = VirtualCuda(plat, cost)
    with dev.execution(g, planned.plan, wiring, model=model_ir, launch=launch, cost=cost) as ex:
        ex.run(1)
    assert dev.last_makespan == pytest.approx(predicted, rel=0.02)


def test_copies_to_the_host_from_two_streams_take_the_link_in_turn():
    # b and c run side by side on two streams and end together; their copies to the
    # CPU (1 us each, each on its stream's own copy stream) share the GPU-to-host link
    g, wiring = _graph(FORK)
    dev = VirtualCuda(FOUR_STREAMS, Flat())
    with dev.execution(g, Plan({"a": "gpu", "b": "gpu", "c": "gpu", "d": "cpu", "e": "cpu"}), wiring,
                       launch="eager") as ex:
        ex.run(1)
        records = ex.trace()
    ops = {r["node"]: (r["start"], r["end"]) for r in records if r["kind"] == "op"}
    assert ops["b"][1] == pytest.approx(ops["c"][1], abs=1e-5)
    copies = sorted((r["start"], r["end"]) for r in records if r["kind"] == "transfer" and r["dst"] == "cpu")
    assert len(copies) == 2  # the second ends a copy's time after the first (its events span its wait)
    assert copies[1][1] - copies[0][1] == pytest.approx(1e-6, rel=1e-3)


def test_a_cpu_worker_takes_an_op_whose_copy_has_landed_before_one_still_copying():
    """b (ranked first) and c are both ready on the CPU when its worker looks; b's input
    is still being copied from the GPU, c's has landed: the worker runs c first, as the
    simulator's worker does (an op is ready once its inputs are in its memory)."""
    from hetsim.sim import simulate

    class Cost(Flat):
        def op_time(self, graph: Any, node: str, device: Any) -> float:
            return {"a": 1e-3, "e": 1e-5, "f": 2e-4, "h": 1e-4}.get(node, 1e-3)

    g, wiring = _graph({"e": [], "a": [], "f": [], "b": ["a"], "c": ["e"], "h": ["f"], "d": ["b", "c"],
                        "i": ["d", "h"]})
    plan = Plan({"e": "gpu", "a": "gpu", "f": "cpu", "b": "cpu", "c": "cpu", "h": "cpu", "d": "cpu", "i": "cpu"},
                {"f": 0, "a": 1, "e": 2, "h": 3, "b": 4, "c": 5, "d": 6, "i": 7})
    platform = FOUR_STREAMS.replace(devices=tuple(
        dataclasses.replace(d, launch="eager", event_s=0.0, copy_issue_s=0.0) if d.kind == "gpu" else d
        for d in FOUR_STREAMS.devices))
    predicted = simulate(g, platform, plan, Cost()).makespan
    dev = VirtualCuda(platform, Cost())
    with dev.execution(g, plan, wiring, launch="eager") as ex:
        ex.run(1)
        res = ex.result()
    ops = {r["node"]: r["start"] for r in res.records if r["kind"] == "op" and r["resource"] == "cpu"}
    assert ops["c"] < ops["b"]  # c's input had landed when the worker came back from f and h
    assert res.makespans[0] == pytest.approx(predicted, rel=0.02)
