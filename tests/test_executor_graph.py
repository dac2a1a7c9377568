"""GPU execution as a deployment runs it (runtime.executor: segments, CUDA graphs,
events, copies), without a GPU: the CUDA calls go to a fake device that runs the
"GPU" work on CPU tensors and records every call.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
import time
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from hetsim.costmodel.roofline import Roofline  # noqa: E402
from hetsim.graphs.graph import Graph  # noqa: E402
from hetsim.runtime import ExecutionError, execute  # noqa: E402
from hetsim.runtime.backends.base import DeviceSpec, parse_device  # noqa: E402
from hetsim.runtime.backends.torch_backend import TorchBackend  # noqa: E402
from hetsim.runtime.executor import execute as executor_execute  # noqa: E402
from hetsim.runtime.executor.execute import Execution, execute_wired  # noqa: E402
from hetsim.runtime.executor.result import UNTRACED  # noqa: E402
from hetsim.runtime.executor.segments import gpu_segments, launch_order  # noqa: E402
from hetsim.runtime.executor.setup import CheckedPlan, Wiring, plan_devices, resolve_launch  # noqa: E402
from hetsim.sim import Plan, PlanError, Platform  # noqa: E402

BOX = Platform.preset("xeon-p2200")  # devices "cpu" (host) and "gpu"
GPU = DeviceSpec("cuda:0", "gpu", "cuda:0", 0)
CPU = parse_device("cpu@1")
SIZE = 8


# ----------------------------------------------------------------------- graphs
def _graph(edges: dict[str, list[str]]) -> tuple[Graph, Wiring]:
    """Nodes in the given order: one input -> matmul by a fixed weight, two -> add;
    no input: reads the graph input ``x``. The last node is the graph output."""
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


def _nodes(segments: dict) -> dict[str, list[tuple[str, ...]]]:
    return {d: [s.nodes for s in segs] for d, segs in segments.items()}


# --------------------------------------------------------------------- segments
def test_a_chain_on_the_gpu_is_one_segment():
    g, _ = _graph({"a": [], "b": ["a"], "c": ["b"]})
    segs = gpu_segments(g, Plan(dict.fromkeys("abc", "gpu")), BOX)
    assert _nodes(segs) == {"gpu": [("a", "b", "c")]}
    (s,) = segs["gpu"]
    assert (s.inputs, s.outputs, s.first, s.index) == (("x",), ("c",), "a", 0)


def test_alternating_placements_make_a_segment_per_gpu_op():
    g, _ = _graph({"a": [], "b": ["a"], "c": ["b"], "d": ["c"], "e": ["d"]})
    segs = gpu_segments(g, Plan({"a": "gpu", "b": "cpu", "c": "gpu", "d": "cpu", "e": "gpu"}), BOX)
    assert _nodes(segs) == {"gpu": [("a",), ("c",), ("e",)]}
    assert [(s.inputs, s.outputs) for s in segs["gpu"]] == [(("x",), ("a",)), (("b",), ("c",)), (("d",), ("e",))]


def test_a_cpu_op_between_gpu_ops_cuts_the_chain():
    g, _ = _graph({"a": [], "b": ["a"], "c": ["b"], "d": ["c"], "e": ["d"]})
    segs = gpu_segments(g, Plan({"a": "gpu", "b": "gpu", "c": "cpu", "d": "gpu", "e": "gpu"}), BOX)
    assert _nodes(segs) == {"gpu": [("a", "b"), ("d", "e")]}
    assert segs["gpu"][0].outputs == ("b",) and segs["gpu"][1].inputs == ("c",)


def test_forks_and_joins():
    # all on the GPU: the fork and the join stay in one segment
    g, _ = _graph({"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]})
    assert _nodes(gpu_segments(g, Plan(dict.fromkeys("abcd", "gpu")), BOX)) == {"gpu": [("a", "b", "c", "d")]}
    # a branch on the CPU: a's output leaves (a ends its segment), d reads the CPU's (d starts one)
    segs = gpu_segments(g, Plan({"a": "gpu", "b": "gpu", "c": "cpu", "d": "gpu"}), BOX)
    assert _nodes(segs) == {"gpu": [("a",), ("b",), ("d",)]}
    assert [s.outputs for s in segs["gpu"]] == [("a",), ("b",), ("d",)]
    assert segs["gpu"][2].inputs == ("b", "c")
    # the CPU forks, the GPU joins: one segment, entered once
    g2, _ = _graph({"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"], "e": ["d"]})
    segs = gpu_segments(g2, Plan({"a": "cpu", "b": "cpu", "c": "cpu", "d": "gpu", "e": "gpu"}), BOX)
    assert _nodes(segs) == {"gpu": [("d", "e")]} and segs["gpu"][0].inputs == ("b", "c")


def test_segments_follow_the_launch_order_not_the_bare_priorities():
    """g1 is ranked first but waits, through the CPU, for g2: cut by priority alone,
    [g1, g2] would wait for its own output."""
    g, _ = _graph({"g2": [], "c": ["g2"], "g1": ["c"]})
    plan = Plan({"g2": "gpu", "c": "cpu", "g1": "gpu"}, {"g1": 0, "g2": 5, "c": 6})
    assert launch_order(g, plan) == ["g2", "c", "g1"]
    assert _nodes(gpu_segments(g, plan, BOX)) == {"gpu": [("g2",), ("g1",)]}


def test_a_dynamic_plan_has_no_segments():
    from hetsim.schedulers import get

    g, _ = _graph({"a": [], "b": ["a"]})
    plan = get("dynamic").schedule(g, BOX, Roofline())
    with pytest.raises(PlanError, match="dynamic plan places its ops at run time"):
        gpu_segments(g, plan, BOX)


# -------------------------------------------------------------------- fake CUDA
class FakeStream:
    def __init__(self, name: str) -> None:
        self.name, self.device = name, 0


class FakeEvent:
    def __init__(self, i: int, timing: bool) -> None:
        self.id, self.timing = i, timing


class FakeGraph:
    def __init__(self, i: int, body: Any, outs: dict) -> None:
        self.id, self.body, self.outs, self.replays = i, body, outs, 0


class FakeCuda:
    """The executor's CUDA device on CPU tensors; every call is logged. As on a GPU, a
    call from another thread while a capture is in progress breaks the capture (a
    capture lasts ``capture_s`` seconds of wall time, so that a worker's call overlaps it
    if the executor lets one run)."""

    def __init__(self, fail_in: str | None = None, capture_s: float = 0.0) -> None:
        self.log: list[tuple] = []
        self.capture_s = capture_s
        self.capture_thread: int | None = None
        self.streams: list[FakeStream] = []
        self.events: list[FakeEvent] = []
        self.graphs: list[FakeGraph] = []
        self.pinned_ids: set[int] = set()
        self.capturing: int | None = None
        self.captured: dict[int, list[str]] = {}
        self.fail_in = fail_in
        #: "wait_host", "synchronize" or "replay": where a CUDA error surfaces
        self.fail_at: str | None = None

    def _check_capture(self, call: str) -> None:
        if self.capture_thread is not None and self.capture_thread != threading.get_ident():
            raise RuntimeError(f"CUDA error: operation not permitted when stream is capturing ({call} from "
                               "another thread during a capture)")

    def stream(self, index: int) -> FakeStream:
        self.streams.append(FakeStream(f"s{len(self.streams)}"))
        return self.streams[-1]

    def event(self, *, timing: bool) -> FakeEvent:
        self.events.append(FakeEvent(len(self.events), timing))
        return self.events[-1]

    def record(self, event: FakeEvent, stream: FakeStream) -> None:
        self._check_capture("record")
        self.log.append(("record", event.id, stream.name))

    def wait(self, stream: FakeStream, event: FakeEvent) -> None:
        self._check_capture("wait")
        self.log.append(("wait", stream.name, event.id))

    def wait_host(self, event: FakeEvent) -> None:
        self.log.append(("wait_host", event.id))
        if self.fail_at == "wait_host":
            raise RuntimeError("CUDA error: an illegal memory access was encountered")

    def done(self, event: FakeEvent) -> bool:
        return True  # its copies run when issued

    def elapsed_s(self, start: FakeEvent, end: FakeEvent) -> float:
        return (end.id - start.id) * 1e-6

    def empty(self, like: Any, device: str) -> Any:
        self._check_capture("empty")
        return torch.empty_like(like)

    def pinned(self, like: Any) -> Any:
        self._check_capture("pinned")
        t = torch.empty_like(like)
        self.pinned_ids.add(id(t))
        return t

    def copy(self, dst: Any, src: Any, stream: FakeStream) -> None:
        self._check_capture("copy")
        self.log.append(("copy", "pinned" if id(src) in self.pinned_ids else "device",
                         "pinned" if id(dst) in self.pinned_ids else "device", stream.name))
        dst.copy_(src)

    def busy(self, stream: FakeStream, seconds: float) -> None:
        self._check_capture("busy")
        self.log.append(("busy", stream.name))

    def capture(self, body: Any, stream: FakeStream) -> tuple[FakeGraph, dict]:
        self._check_capture("capture")  # entering a capture synchronises the device
        self.log.append(("warmup", stream.name))
        body()
        gid = len(self.graphs)
        self.capturing = gid
        self.captured[gid] = []
        self.capture_thread = threading.get_ident()
        try:
            outs = body()
            time.sleep(self.capture_s)
        finally:
            self.capturing = self.capture_thread = None
        self.graphs.append(FakeGraph(gid, body, outs))
        self.log.append(("capture", gid, stream.name))
        return self.graphs[-1], outs

    def replay(self, graph: FakeGraph, stream: FakeStream) -> None:
        """Run the body again and write its outputs into the captured ones, as a replay does."""
        self._check_capture("replay")
        if self.fail_at == "replay":
            raise RuntimeError("CUDA error: an illegal instruction was encountered")
        graph.replays += 1
        self.log.append(("replay", graph.id, stream.name))
        for v, new in graph.body().items():
            for static, value in zip(graph.outs[v], new):
                static.copy_(value)

    def synchronize(self, index: int) -> None:
        self._check_capture("synchronize")
        self.log.append(("sync", index))
        if self.fail_at == "synchronize":
            raise RuntimeError("CUDA error: an illegal memory access was encountered")

    def using(self, index: int, stream: FakeStream) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext()


@pytest.fixture
def fake_gpu(monkeypatch):
    """Let the "GPU" of an execution run on the CPU: its kernels are built for the CPU
    and configuring it does nothing; the fake device logs which node ran while a
    graph was being captured."""
    real_build = executor_execute.build_calls
    fake = FakeCuda()

    def build(graph, wiring, bk, device, nodes, index, **kw):
        calls = real_build(graph, wiring, bk, CPU if device.kind == "gpu" else device, nodes, index, **kw)
        if device.kind == "gpu":
            for n, call in calls.items():
                call.fn = _logging(fake, n, call.fn)
        return calls

    real_configure = TorchBackend.configure
    monkeypatch.setattr(executor_execute, "build_calls", build)
    monkeypatch.setattr(TorchBackend, "configure", lambda self, d: None if d.kind == "gpu" else real_configure(self, d))
    return fake


def _logging(fake: FakeCuda, node: str, fn: Any) -> Any:
    def run(*args: Any) -> Any:
        if fake.capturing is not None:
            fake.captured[fake.capturing].append(node)
            if fake.fail_in == node:
                raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return fn(*args)

    return run


def _execution(g: Graph, wiring: Wiring, plan: Plan, fake: FakeCuda, launch: str = "graph", **kw: Any) -> Execution:
    checked = CheckedPlan(BOX, {"cpu": CPU, "gpu": GPU}, plan_devices(plan, BOX), launch)
    return Execution(g, plan, BOX, wiring, checked=checked, cuda_device=fake, pin_threads=False, **kw)


CHAIN = {"a": [], "b": ["a"], "c": ["b"], "d": ["c"]}
MIXED = Plan({"a": "gpu", "b": "gpu", "c": "cpu", "d": "gpu"}, meta={"scheduler": "mixed"})


# ------------------------------------------------------------------ graph launch
def test_each_segment_is_captured_once_and_replayed(fake_gpu):
    g, wiring = _graph(CHAIN)
    with _execution(g, wiring, MIXED, fake_gpu) as ex:
        ex.run(2, timed=False)
        ex.run(3)
        res = ex.result()
        assert fake_gpu.captured == {0: ["a", "b"], 1: ["d"]}
        # a capture run of its own, 2 warm-up and 3 timed runs
        assert [gr.replays for gr in fake_gpu.graphs] == [6, 6]
        assert [x for x in fake_gpu.log if x[0] in ("warmup", "capture")] == [
            ("warmup", "s1"), ("capture", 0, "s1"), ("warmup", "s1"), ("capture", 1, "s1")]
        assert res.launch == "graph" and res.check["error"] <= 1.0 and res.check["node_error"] <= 1.0
        # the median run: one launch record per segment replay, the CPU op's dispatch and op records
        kinds = sorted((r["kind"], r["name"]) for r in res.records)
        assert kinds == [("dispatch", "c"), ("dispatch", "graph a..b"), ("dispatch", "graph d"), ("op", "c")]
        assert res.device_busy["gpu"] == 0.0 and res.summary()["launch"] == "graph"
        assert res.notes == [UNTRACED] and res.placement == MIXED.placement
        assert "GPU launch graph" in str(res)


def test_events_copies_and_waits_of_a_timed_run(fake_gpu):
    """x crosses to the GPU through a pinned buffer on the host-to-device stream; the
    first segment waits for that copy on the GPU; b's output is copied into a pinned
    buffer on the device-to-host stream after the segment's event, and the CPU worker
    waits on the copy's event itself; c's output crosses back staged in pinned
    memory; the host waits on the graph output's copy. No timing event anywhere."""
    g, wiring = _graph(CHAIN)
    with _execution(g, wiring, MIXED, fake_gpu) as ex:
        ex.run(1, timed=False)
        rt = ex.engine.cuda
        h2d, d2h, comp = rt.h2d[1].name, rt.d2h[(1, 0)].name, rt.compute[(1, 0)].name
        assert (h2d, comp, d2h) == ("s0", "s1", "s2")  # the compute stream's outputs leave on its own copy stream
        fake_gpu.log.clear()
        ex.run(1)
        ev = {key[0]: e.id for key, e in rt.events.items() if key[0] in ("segment",)}
        copy_ev = {key[1:]: e.id for key, e in rt.events.items() if key[0] == "copy"}
        n = ex.engine.index
        x_ev = copy_ev[(0, n["x"], 0, 1)]
        b_ev = copy_ev[(0, n["b"], 0, 0)]
        c_ev = copy_ev[(0, n["c"], 0, 1)]
        d_ev = copy_ev[(0, n["d"], 0, 0)]
        seg0 = rt.events[("segment", 0, 0)].id
        seg1 = rt.events[("segment", 0, 1)].id
        assert ev  # segment events exist
        assert fake_gpu.log == [
            ("copy", "pinned", "device", h2d), ("record", x_ev, h2d),
            ("wait", comp, x_ev), ("replay", 0, comp), ("record", seg0, comp),
            ("wait", d2h, seg0), ("copy", "device", "pinned", d2h), ("record", b_ev, d2h),
            ("wait_host", b_ev),
            ("copy", "pinned", "device", h2d), ("record", c_ev, h2d),
            ("wait", comp, c_ev), ("replay", 1, comp), ("record", seg1, comp),
            ("wait", d2h, seg1), ("copy", "device", "pinned", d2h), ("record", d_ev, d2h),
            ("wait_host", d_ev), ("sync", 0),
        ]
        assert not any(e.timing for e in fake_gpu.events)
        assert ex.engine.idle_spin_s == 0.0  # CPU workers block at once when a GPU takes part


def test_captures_on_a_two_stream_gpu_never_overlap_another_threads_cuda_work(fake_gpu):
    """Two GPU segments ready together on a GPU with two streams: captured one at a
    time during set-up, before the workers start, so no capture overlaps a worker's
    CUDA call (captured by the workers, each capture would break the other's)."""
    fake_gpu.capture_s = 0.05
    g, wiring = _graph({"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"], "e": ["d"]})
    two = BOX.replace(devices=tuple(dataclasses.replace(d, streams=2) if d.kind == "gpu" else d
                                    for d in BOX.devices))
    plan = Plan({"a": "cpu", "b": "gpu", "c": "gpu", "d": "cpu", "e": "gpu"}, meta={"scheduler": "fork"})
    checked = CheckedPlan(two, {"cpu": CPU, "gpu": GPU}, plan_devices(plan, two), "graph")
    with Execution(g, plan, two, wiring, checked=checked, cuda_device=fake_gpu, pin_threads=False) as ex:
        ex.run(3)
        assert ex.check_result["node_error"] <= 1.0
        assert sorted(map(tuple, fake_gpu.captured.values())) == [("b",), ("c",), ("e",)]


def test_several_requests_capture_a_graph_each(fake_gpu):
    g, wiring = _graph(CHAIN)
    plan = Plan(MIXED.placement, microbatches=2)
    with _execution(g, wiring, plan, fake_gpu) as ex:
        ex.run(2)
        assert ex.check_result["error"] <= 1.0
        assert sorted(map(tuple, fake_gpu.captured.values())) == [("a", "b"), ("a", "b"), ("d",), ("d",)]
        assert [gr.replays for gr in fake_gpu.graphs] == [3, 3, 3, 3]


def test_a_fork_across_devices_runs_right(fake_gpu):
    g, wiring = _graph({"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"], "e": ["d"]})
    plan = Plan({"a": "gpu", "b": "gpu", "c": "cpu", "d": "gpu", "e": "gpu"})
    with _execution(g, wiring, plan, fake_gpu) as ex:
        ex.run(2)
        assert ex.check_result["node_error"] <= 1.0
        assert fake_gpu.captured == {0: ["a"], 1: ["b"], 2: ["d", "e"]}


def test_a_plan_ranking_a_waiting_gpu_op_first_runs_without_deadlock(fake_gpu):
    g, wiring = _graph({"g2": [], "c": ["g2"], "g1": ["c"]})
    plan = Plan({"g2": "gpu", "c": "cpu", "g1": "gpu"}, {"g1": 0, "g2": 5, "c": 6})
    with _execution(g, wiring, plan, fake_gpu, timeout_s=20.0) as ex:
        ex.run(2)
        assert ex.check_result["node_error"] <= 1.0
        assert fake_gpu.captured == {0: ["g2"], 1: ["g1"]}


class _Split:
    """A run-time policy: a, b and d on the GPU, the rest on the CPU."""

    name = "split"

    def select(self, node: str, view: Any) -> str:
        return "gpu" if node in ("a", "b", "d") else "cpu"

    def to_dict(self) -> dict:
        return {"name": self.name, "params": {}}


def test_a_dynamic_plan_launches_eagerly_with_an_event_after_every_op(fake_gpu):
    g, wiring = _graph({"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]})
    plan = Plan({}, policy=_Split())
    with _execution(g, wiring, plan, fake_gpu, launch="eager", seed=0) as ex:
        ex.run(2)
        res = ex.result()
        names = ex.engine.names
        with_event = {names[key[2]] for key in ex.engine.cuda.events if key[0] == "op"}
    assert res.check["node_error"] <= 1.0 and res.launch == "eager" and res.decision_s is not None
    assert fake_gpu.graphs == [] and not any(e.timing for e in fake_gpu.events)
    on_cpu = {r["node"] for r in res.records if r["kind"] == "op"}
    on_gpu = {r["node"] for r in res.records if r["kind"] == "dispatch"} - on_cpu
    assert on_gpu and with_event == on_gpu  # placed at run time: every GPU op may be waited for
    assert res.placement == {"a": "gpu", "b": "gpu", "c": "cpu", "d": "gpu"}  # the decisions the run made


def test_eager_launch_and_a_traced_run(fake_gpu, tmp_path):
    """Eager: no graph, one launch record per GPU op. The traced run of its own times
    every GPU op and copy with timing events; the timed runs made none."""
    g, wiring = _graph(CHAIN)
    checked = CheckedPlan(BOX, {"cpu": CPU, "gpu": GPU}, ["cpu", "gpu"], "eager")
    res = execute_wired(g, MIXED, BOX, wiring, warmup=1, repeats=2, trace=True, checked=checked,
                        cuda_device=fake_gpu, pin_threads=False)
    assert fake_gpu.graphs == [] and res.launch == "eager" and res.notes == []
    assert sorted(r["name"] for r in res.records if r["kind"] == "dispatch") == ["a", "b", "c", "d"]
    # each GPU op of the traced run is launched behind a spin, before its start event
    log = fake_gpu.log
    starts = [i for i, x in enumerate(log) if x[0] == "record" and fake_gpu.events[x[1]].timing
              and log[i - 1][0] == "busy"]
    assert len([x for x in log if x[0] == "busy"]) == len(starts) == 3
    timing = [e for e in fake_gpu.events if e.timing]
    assert timing and min(e.id for e in timing) > max(e.id for e in fake_gpu.events if not e.timing)
    ops = {r["node"]: r for r in res.trace if r["kind"] == "op"}
    assert {n: r["resource"] for n, r in ops.items()} == {"a": "gpu", "b": "gpu", "c": "cpu", "d": "gpu"}
    assert all(r["end"] > r["start"] for n, r in ops.items() if n != "c")
    assert sorted(r["name"] for r in res.trace if r["kind"] == "transfer") == ["b[0]->cpu", "c[0]->gpu",
                                                                              "d[0]->cpu", "x[0]->gpu"]
    assert res.device_busy["gpu"] == pytest.approx(sum(ops[n]["end"] - ops[n]["start"] for n in "abd"))
    trace = json.loads(res.to_chrome_trace(tmp_path / "run_trace.json").read_text())  # the traced run's
    assert sorted(e["name"] for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "op") == [
        "a", "b", "c", "d"]


def test_a_traced_run_of_a_graph_plan_launches_eagerly(fake_gpu):
    g, wiring = _graph(CHAIN)
    with _execution(g, wiring, MIXED, fake_gpu) as ex:
        ex.run(1)
        replays = [gr.replays for gr in fake_gpu.graphs]
        records = ex.trace()
        assert [gr.replays for gr in fake_gpu.graphs] == replays  # no replay in the traced run
        assert sorted(r["node"] for r in records if r["kind"] == "op") == ["a", "b", "c", "d"]
        ex.run(1)  # and the next run replays again
        assert [gr.replays for gr in fake_gpu.graphs] == [r + 1 for r in replays]
        assert ex.check_result["error"] <= 1.0


def test_a_cuda_error_in_a_captured_segment_names_the_plan_and_its_first_node(fake_gpu):
    """Segments are captured during set-up: the execution is never built."""
    g, wiring = _graph(CHAIN)
    fake_gpu.fail_in = "d"
    with pytest.raises(ExecutionError, match=r"plan 'mixed': the CUDA graph of the segment from node 'd' "
                                             r"\(1 ops\) on 'gpu': capture failed: RuntimeError: CUDA error: an illegal memory access "
                                             r"was encountered \(an op that waits for the host cannot be captured: "
                                             r"run this plan with launch 'eager'\)"):
        _execution(g, wiring, MIXED, fake_gpu)
    # another execution of the same process is unaffected
    fake_gpu.fail_in = None
    with _execution(g, wiring, MIXED, fake_gpu) as other:
        other.run(1)
        assert other.result().check["error"] <= 1.0


def test_a_failed_replay_names_the_plan_and_the_segment(fake_gpu):
    g, wiring = _graph(CHAIN)
    ex = _execution(g, wiring, MIXED, fake_gpu)
    ex.run(1)
    fake_gpu.fail_at = "replay"
    with pytest.raises(ExecutionError, match=r"^plan 'mixed': the CUDA graph of the segment from node 'a' \(2 ops\) "
                                             r"on 'gpu': RuntimeError: CUDA error: an illegal instruction"):
        ex.run(1)


@pytest.mark.parametrize(("where", "culprit"), [("wait_host", "waited on by node 'c'"), ("synchronize", "")])
def test_an_asynchronous_cuda_error_names_the_plan_and_the_last_launch(fake_gpu, where, culprit):
    """A kernel fault surfaces where the host next waits on the GPU: in the CPU worker
    waiting for its input, or at the end of the run."""
    g, wiring = _graph(CHAIN)
    ex = _execution(g, wiring, MIXED, fake_gpu)
    ex.run(1)
    fake_gpu.fail_at = where
    with pytest.raises(ExecutionError, match=r"plan 'mixed': the GPU work of a run \(last launched: 'gpu': "
                                             r"'graph (a\.\.b|d)'\)" + (", " + culprit if culprit else "")
                                             + r".*RuntimeError: CUDA error: an illegal"):
        ex.run(1)
    assert ex.engine is None


# ------------------------------------------------------------------ launch modes
def test_launch_mode_defaults_and_refusals():
    assert resolve_launch(None, dynamic=False, backend="torch", gpu=True) == "graph"
    assert resolve_launch(None, dynamic=False, backend="tvm", gpu=True) == "eager"
    assert resolve_launch("eager", dynamic=False, backend="torch", gpu=True) == "eager"
    assert resolve_launch(None, dynamic=False, backend="torch", gpu=False) is None
    with pytest.raises(ExecutionError, match=r"launch must be one of \['graph', 'eager'\], got 'fast'"):
        resolve_launch("fast", dynamic=False, backend="torch", gpu=True)


def test_graph_launch_with_a_dynamic_plan_or_tvm_is_refused_before_anything_runs():
    from hetsim.schedulers import get

    g, wiring = _graph(CHAIN)
    dynamic = get("dynamic").schedule(g, BOX, Roofline())
    with pytest.raises(ExecutionError, match="launch 'graph' needs a static plan"):
        execute_wired(g, dynamic, BOX, wiring, launch="graph")
    with pytest.raises(ExecutionError, match="launch 'graph' needs the torch backend .* not 'tvm'"):
        execute_wired(g, MIXED, BOX, wiring, launch="graph", backend="tvm")


def test_a_cpu_plan_runs_as_before_whatever_the_launch_mode():
    g, wiring = _graph(CHAIN)
    cpu2 = Platform.preset("cpu2")
    plan = Plan({"a": "cpu0", "b": "cpu1", "c": "cpu0", "d": "cpu1"})
    res = execute_wired(g, plan, cpu2, wiring, warmup=0, repeats=2, launch="graph")
    assert res.launch is None and res.trace is None and res.check["error"] <= 1.0
    assert sorted(r["node"] for r in res.records if r["kind"] == "op") == ["a", "b", "c", "d"]


def test_the_plan_is_checked_once_per_execute(monkeypatch):
    """execute() checks the plan (validate, device map, devices present) once, not
    again in each execution it builds."""
    from hetsim.runtime.executor import setup

    g, wiring = _graph(CHAIN)
    plan = Plan(dict.fromkeys(CHAIN, "cpu0"))
    calls = {"validate": 0, "map_devices": 0}
    validate, map_devices = Plan.validate, setup.map_devices

    def counting_validate(self, *a, **kw):
        calls["validate"] += 1
        return validate(self, *a, **kw)

    def counting_map(*a, **kw):
        calls["map_devices"] += 1
        return map_devices(*a, **kw)

    monkeypatch.setattr(Plan, "validate", counting_validate)
    monkeypatch.setattr(setup, "map_devices", counting_map)
    monkeypatch.setattr(executor_execute, "load_model", lambda graph: None)
    monkeypatch.setattr(executor_execute, "wire", lambda graph, model: wiring)
    res = execute(g, plan, "cpu2", warmup=0, repeats=1, replicas=2)
    assert calls == {"validate": 1, "map_devices": 1} and len(res.makespans) == 2


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_real_cuda_graphs_replay_a_mixed_plan():
    g, wiring = _graph(CHAIN)
    with Execution(g, MIXED, BOX, wiring, device_map={"cpu": "cpu@1"}, pin_threads=False) as ex:
        ex.run(1, timed=False)
        ex.run(3)
        res = ex.result()
        assert res.launch == "graph" and res.check["node_error"] <= 1.0
        assert sorted(key[0] for key in ex.engine.cuda.graphs) == [0, 1]
        assert [c.replays for c in ex.engine.cuda.graphs.values()] == [5, 5]
        records = ex.trace()
    assert sorted(r["node"] for r in records if r["kind"] == "op") == ["a", "b", "c", "d"]


def test_a_traced_execution_times_every_run(fake_gpu):
    """traced=True (profiling and calibration executions): every run, timed ones too,
    launches eagerly between timing events; nothing is captured."""
    g, wiring = _graph(CHAIN)
    with _execution(g, wiring, MIXED, fake_gpu, traced=True) as ex:
        ex.run(2)
        res = ex.result()
    assert fake_gpu.graphs == [] and res.launch == "eager" and res.notes == []
    assert sorted(r["node"] for r in res.records if r["kind"] == "op") == ["a", "b", "c", "d"]
    assert len([r for r in res.records if r["kind"] == "transfer"]) == 4
    assert res.device_busy["gpu"] > 0


def test_model_host_costs_time_each_gpu_op_in_the_executor_as_it_runs(fake_gpu):
    """Every op of the graph on the GPU, launched eagerly: each op's host cost from its
    worker's pick to its next pick, the median over the runs; their summary by op kind."""
    from hetsim.runtime.calibration.model_host import host_cost_summary, model_host_costs

    g, wiring = _graph({"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]})
    plan = Plan(dict.fromkeys(g.nx, "gpu"))
    checked = CheckedPlan(BOX, {"cpu": CPU, "gpu": GPU}, plan_devices(plan, BOX), "eager")
    per_node = model_host_costs(g, wiring, BOX, device="gpu", warmup=1, runs=3, cuda_device=fake_gpu, checked=checked)
    assert set(per_node) == {"a", "b", "c", "d"} and all(t > 0 for t in per_node.values())
    assert fake_gpu.graphs == []  # eager: nothing captured
    summary = host_cost_summary(g, per_node)
    assert set(summary["per_op_s"]) == {"matmul", "add"} and summary["ops"] == 4
    assert min(per_node.values()) <= summary["median_s"] <= max(per_node.values())
    with pytest.raises(ValueError, match="no GPU op was launched"):
        host_cost_summary(g, {})
