"""The profiler: a real (tiny) profiling run on the CPU, resume, crash safety, the CLI."""

from __future__ import annotations

import json
import time

import numpy as np
import pandas as pd
import pytest
import torch

from hetsim.costmodel.profile_reader import OPS_COLUMNS, read_profile
from hetsim.experiments.cli.main import main
from hetsim.graphs import FEATURE_COLUMNS, Graph, signature
from hetsim.runtime import profiler as rp
from hetsim.runtime.backends import BackendError, get_backend, parse_device
from hetsim.runtime.profiler import MeasureSettings, profile_graphs, profile_models, time_kernel

FAST = MeasureSettings(warmup_s=0.002, min_time_s=0.005, max_time_s=0.05, max_repeats=300)
NO_GPU = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")


def tiny_graph(name: str = "tiny", width: int = 32) -> Graph:
    """matmul -> relu (two distinct signatures)."""
    g = Graph(name=name, meta={"granularity": "op", "model": name, "batch": 2})
    g.add_op("0000_matmul", "matmul", inputs=[([2, 64], "float32"), ([64, width], "float32")],
             outputs=[([2, width], "float32")], attrs={"out_dtype": "float32"}, flops=2 * 2 * 64 * width)
    g.add_op("0001_relu", "relu", inputs=[([2, width], "float32")], outputs=[([2, width], "float32")])
    g.add_edge("0000_matmul", "0001_relu")
    return g


def profile(graphs, out, **kw):
    return profile_graphs(graphs, "cpu", "torch", out, settings=FAST, progress=False, **kw)


def test_profile_writes_a_valid_folder(tmp_path):
    out = tmp_path / "prof"
    run = profile([tiny_graph()], out)
    assert (run.measured, run.skipped) == (2, 0)
    assert sorted(p.name for p in out.iterdir()) == ["dispatch.json", "manifest.json", "ops.csv"]
    prof = read_profile(out)  # the costmodel reader validates everything
    ops = prof.ops
    assert set(OPS_COLUMNS) <= set(ops.columns) and set(FEATURE_COLUMNS) <= set(ops.columns)
    assert sorted(ops["op"]) == ["matmul", "relu"]
    assert set(ops["signature"]) == {signature(tiny_graph().nodes[n]) for n in tiny_graph()}
    assert (ops[["time_s", "p10_s", "p90_s"]] > 0).all().all() and (ops["wall_s"].astype(float) > 0).all()
    assert (ops["p10_s"] <= ops["time_s"]).all() and (ops["time_s"] <= ops["p90_s"]).all()
    assert (ops["repeats"] >= 5).all() and set(ops["device"]) == {"cpu"} and set(ops["backend"]) == {"torch"}
    assert list(ops["batch"]) == [2, 2] and list(ops["models"]) == ["tiny", "tiny"]
    m = prof.manifest
    assert m["hetsim_profile"] == 2 and m["backend"] == "torch" and m["models"] == ["tiny"]
    assert m["machine"]["cpu_model"] and m["libraries"]["torch"] == torch.__version__
    assert m["devices"][0]["name"] == "cpu" and m["devices"][0]["threads"] >= 1
    assert 0 < prof.dispatch["cpu"] < 1e-3


def test_rerun_resumes_and_tags_models(tmp_path):
    out = tmp_path / "prof"
    profile([tiny_graph()], out)
    before = pd.read_csv(out / "ops.csv")
    run = profile([tiny_graph()], out)
    assert (run.measured, run.skipped) == (0, 2)
    pd.testing.assert_frame_equal(pd.read_csv(out / "ops.csv"), before)
    # a second model sharing the relu signature: one new row, the shared one tagged
    other = tiny_graph("other", width=16)
    other.nodes["0001_relu"]["inputs"] = [{"shape": [2, 32], "dtype": "float32"}]
    run = profile([other], out)
    assert (run.measured, run.skipped) == (1, 1)
    ops = read_profile(out).ops
    assert len(ops) == 3 and dict(zip(ops["op"], ops["models"]))["relu"] == "tiny;other"
    assert read_profile(out).manifest["models"] == ["tiny", "other"]


def test_a_crashed_run_leaves_the_previous_files_intact(tmp_path, monkeypatch):
    out = tmp_path / "prof"
    profile([tiny_graph()], out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    real, calls = rp.time_kernel, []

    def crash_on_second(*a, **kw):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("simulated crash")
        return real(*a, **kw)

    monkeypatch.setattr(rp, "time_kernel", crash_on_second)
    with pytest.raises(RuntimeError, match="simulated crash"):
        profile([tiny_graph("new", width=8)], out, flush_every=100)
    ops = read_profile(out).ops  # still valid: the measured row was kept, nothing half-written
    old = pd.read_csv(pd.io.common.BytesIO(before["ops.csv"]))
    pd.testing.assert_frame_equal(ops[ops["model"] == "tiny"][["signature", "time_s"]].reset_index(drop=True),
                                  old[["signature", "time_s"]])
    assert len(ops) == 3 and not list(out.glob(".*"))
    # a crash while the file is replaced: the old ops.csv stays as it was
    monkeypatch.setattr(rp, "time_kernel", real)
    current = (out / "ops.csv").read_bytes()

    def no_replace(*a, **kw):
        raise OSError("disk full")

    monkeypatch.setattr("hetsim.costmodel.profile_reader.os.replace", no_replace)
    with pytest.raises(OSError, match="disk full"):
        profile([tiny_graph("third", width=4)], out, flush_every=1)
    monkeypatch.undo()
    assert (out / "ops.csv").read_bytes() == current and not list(out.glob(".*"))
    read_profile(out)


def test_time_kernel_stops_when_stable_and_respects_max_repeats():
    cpu = parse_device("cpu")

    def spin(us: float = 200.0):
        t = time.perf_counter() + us * 1e-6
        while time.perf_counter() < t:
            pass

    tm = time_kernel(spin, cpu, MeasureSettings(min_time_s=0.01, max_time_s=2.0, max_repeats=10_000))
    assert 5 <= tm.repeats < 10_000 and tm.time_s == pytest.approx(200e-6, rel=0.5)
    assert tm.p10_s <= tm.time_s <= tm.p90_s
    tm = time_kernel(spin, cpu, MeasureSettings(min_time_s=1.0, max_time_s=5.0, min_repeats=3, max_repeats=7))
    assert tm.repeats == 7


def test_dispatch_is_measured_per_backend():
    t = rp.measure_dispatch(get_backend("torch"), parse_device("cpu"), calls=50, rounds=5)
    assert 0 < t < 1e-3


def test_cli_profiles_a_tiny_zoo_model_end_to_end(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HETSIM_CACHE", str(tmp_path / "cache"))  # the rerun reuses the graphs
    out = tmp_path / "rnn"
    argv = ["profile", "lstm", "--arg", "seq_len=2", "--arg", "hidden=8", "--batches", "1,2",
            "--out", str(out), "--min-time", "0.002", "--max-time", "0.02", "--no-progress"]
    assert main(argv) == 0
    first = capsys.readouterr().out
    prof = read_profile(out)
    assert prof.manifest["models"] == ["lstm"] and prof.manifest["batches"] == [1, 2]
    assert len(prof.ops) > 10 and (prof.ops["time_s"] > 0).all()
    assert {"matmul", "add", "sigmoid", "tanh", "split", "take"} <= set(prof.ops["op"])
    assert f"{len(prof.ops)} signature(s) measured, 0 already there" in first
    assert main(argv) == 0
    assert f"0 signature(s) measured, {len(prof.ops)} already there" in capsys.readouterr().out


@NO_GPU
def test_cuda_on_a_cpu_machine_fails_before_anything_runs(tmp_path, capsys):
    out = tmp_path / "gpu"
    assert main(["profile", "lstm", "--devices", "cpu,cuda:0", "--out", str(out), "--no-progress"]) == 2
    assert "'cuda:0' asked for, but torch sees no CUDA GPU" in capsys.readouterr().err
    with pytest.raises(BackendError, match="no CUDA GPU"):
        profile_models(["lstm"], "cuda:0", "torch", out)
    assert not out.exists()


def test_api_errors_are_clear(tmp_path):
    with pytest.raises(BackendError, match="unknown zoo model"):
        profile_models(["resnet9000"], "cpu", "torch", tmp_path / "x")
    with pytest.raises(BackendError, match="torch backend runs op-granularity"):
        profile_models(["lstm"], "cpu", "torch", tmp_path / "x", granularity="fused")
    with pytest.raises(BackendError, match="unknown backend"):
        profile_models(["lstm"], "cpu", "onnx", tmp_path / "x")
    g = tiny_graph()
    g.nodes["0001_relu"]["op"] = "fancy_op"
    with pytest.raises(BackendError, match="fancy_op"):
        profile([g], tmp_path / "y")
    run = profile([g], tmp_path / "z", on_error="skip")
    assert run.measured == 1 and "fancy_op" in run.failed[0]
    assert not (tmp_path / "x").exists()


def test_tvm_backend_profiles_fused_kernels(tmp_path, monkeypatch):
    monkeypatch.setenv("HETSIM_CACHE", str(tmp_path / "cache"))
    run = profile_models(["lstm"], "cpu", "tvm", tmp_path / "tvm", granularity="fused",
                         model_kwargs={"lstm": {"seq_len": 2, "hidden": 8}}, settings=FAST,
                         progress=False)
    ops = read_profile(tmp_path / "tvm").ops
    assert run.measured == len(ops) > 3 and set(ops["backend"]) == {"tvm"}
    assert all(op.startswith("fused:") for op in ops["op"]) and (ops["time_s"] > 0).all()
    assert json.loads((tmp_path / "tvm" / "manifest.json").read_text())["granularity"] == "fused"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_ops_links_and_dispatch(tmp_path):
    out = tmp_path / "gpu"
    profile_graphs([tiny_graph()], "cpu,cuda:0", "torch", out, settings=FAST, progress=False)
    prof = read_profile(out)
    assert set(prof.ops["device"]) == {"cpu", "cuda:0"} and (prof.ops["time_s"] > 0).all()
    assert set(prof.link_fits) == {"cpu->cuda:0", "cuda:0->cpu"} and prof.duplex is not None
    assert prof.links["bytes"].max() == 1 << 30 and set(prof.links["pinned"]) == {0, 1}
    assert np.all(prof.links.groupby("direction")["time_s"].max() > 0)
    assert 0 < prof.dispatch["cuda:0"] < 1e-3


# ------------------------------------------------------------------ GPU path, faked
class FakeKernel:
    """A prepared node: what the fake timer reads to know which op it times."""

    def __init__(self, op: str) -> None:
        self.op = op

    def __call__(self) -> None:
        return None


class FakeBackend:
    """The backend interface the profiler uses, running nothing."""

    name = "torch"

    def configure(self, device):
        return None

    def prepare(self, graph, node, device, seed=0):
        return FakeKernel(graph.nodes[node]["op"])

    def synchronize(self, device):
        return None


#: device seconds per call and host launch seconds per call of each op on the fake GPU
DEVICE_S = {"matmul": 10e-6, "relu": 3e-6}
LAUNCH_S = 7e-6


class FakeStreamTimer:
    """:class:`runtime.stream_timer.CudaStreamTimer`'s interface with fixed times."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int]] = []

    def device_times(self, fn, calls, replays, *, host_per_call=1e-5):
        self.calls.append((fn.op, calls, replays))
        return [DEVICE_S[fn.op]] * replays, "cuda_graph"

    def launch_time(self, fn, calls=50, rounds=5):
        return LAUNCH_S


def gpu_graph() -> Graph:
    """matmul -> reshape (a view) -> relu."""
    g = tiny_graph()
    g.add_op("0002_reshape", "reshape", inputs=[([2, 32], "float32")], outputs=[([64], "float32")],
             attrs={"shape": [64]})
    g.add_edge("0001_relu", "0002_reshape")
    return g


@pytest.fixture
def fake_gpu(monkeypatch):
    """profile_graphs on ``cpu,cuda:0`` with the GPU faked: no CUDA call is made."""
    timer = FakeStreamTimer()
    monkeypatch.setattr(rp, "_check_request", lambda devices, backend, gran, threads: [
        parse_device("cpu"), parse_device("cuda:0")])
    monkeypatch.setattr(rp, "device_entries", lambda devs: [
        {"name": d.name, "kind": d.kind, "torch_device": d.torch_device, "model": "fake"} for d in devs])
    monkeypatch.setattr(rp, "_driver", lambda: None)
    monkeypatch.setattr(rp, "_cuda_timer", lambda d: timer)
    return timer


def test_gpu_rows_hold_the_stream_device_time_and_the_launch(tmp_path, fake_gpu):
    out = tmp_path / "gpu"
    run = profile_graphs([gpu_graph()], "cpu,cuda:0", "torch", out, settings=FAST, progress=False,
                         links=False, backend_obj=FakeBackend())
    prof = read_profile(out)
    assert prof.manifest["hetsim_profile"] == 2
    gpu = prof.ops[prof.ops["device"] == "cuda:0"].set_index("op")
    assert sorted(gpu.index) == ["matmul", "relu"]  # the view is not timed on the GPU
    assert sorted(prof.ops.loc[prof.ops["device"] == "cpu", "op"]) == ["matmul", "relu", "reshape"]
    assert run.measured == 5 and run.skipped == 1
    assert gpu.loc["matmul", "time_s"] == 10e-6 and gpu.loc["relu", "time_s"] == 3e-6
    assert (gpu["launch_s"] == LAUNCH_S).all() and set(gpu["timer"]) == {"cuda_graph"}
    assert pd.to_numeric(gpu["wall_s"]).isna().all() and prof.ops.loc[prof.ops["device"] == "cpu", "launch_s"].isna().all()
    # the probe replays one call, then each replay holds about 1 ms of calls
    probes = [c for c in fake_gpu.calls if c[0] == "matmul"]
    assert probes[0] == ("matmul", 1, 3) and {c[1] for c in probes[1:]} == {100}
    assert gpu.loc["matmul", "repeats"] % 100 == 0 and gpu.loc["relu", "repeats"] % 256 == 0  # 1 ms / 3 us, capped at 256
    launch = prof.launch_times()
    assert set(launch) == {"cuda:0"} and launch["cuda:0"][""] == LAUNCH_S


def test_the_launch_column_is_the_gpu_dispatch_time_and_views_cost_nothing(tmp_path, fake_gpu):
    from hetsim.costmodel import fit
    from hetsim.costmodel.platform import Device

    out = tmp_path / "gpu"
    profile_graphs([gpu_graph()], "cpu,cuda:0", "torch", out, settings=FAST, progress=False,
                   links=False, backend_obj=FakeBackend())
    cost = fit(out, "table")
    gpu = Device("gpu", "gpu", peak_flops=1e13, mem_bandwidth_bytes_per_s=1e12, memory_bytes=1 << 30,
                 dispatch_s=1e-3)
    g = gpu_graph()
    assert cost.op_time(g, "0000_matmul", gpu) == pytest.approx(10e-6)
    assert cost.dispatch_time(g, "0000_matmul", gpu) == LAUNCH_S
    assert cost.op_time(g, "0002_reshape", gpu) == 0.0 and cost.dispatch_time(g, "0002_reshape", gpu) == 0.0
    assert cost.coverage(g, gpu) == 1.0


def test_a_version_1_gpu_profile_is_read_with_a_warning_naming_it(tmp_path, fake_gpu):
    from hetsim.costmodel import CostModelError
    from hetsim.costmodel.learned.measured import CostModelWarning
    from hetsim.costmodel.profile_writer import ProfileWriter

    out = tmp_path / "old"
    profile_graphs([tiny_graph()], "cpu,cuda:0", "torch", out, settings=FAST, progress=False,
                   links=False, backend_obj=FakeBackend())
    m = json.loads((out / "manifest.json").read_text())
    (out / "manifest.json").write_text(json.dumps({**m, "hetsim_profile": 1, "name": "old-h100"}))
    with pytest.warns(CostModelWarning, match=r"profile 'old-h100' .* is format version 1: its GPU times"):
        prof = read_profile(out)
    assert (prof.ops["time_s"] > 0).all()
    with pytest.raises(CostModelError, match="format version 1, the new run writes version 2"):
        ProfileWriter(out, {**m, "hetsim_profile": 2}).open()


def test_stream_timer_divides_a_replay_by_its_calls_and_falls_back_when_capture_fails():
    from hetsim.runtime.stream_timer import CudaStreamTimer

    class FakeEvent:
        def __init__(self, enable_timing=False):
            self.t = None

        def record(self):
            self.t = clock[0]

        def synchronize(self):
            return None

        def elapsed_time(self, end):
            return (end.t - self.t) * 1e3  # ms

    class FakeGraph:
        def replay(self):
            clock[0] += 12e-6 * captured[0]

    class Ctx:
        def __init__(self, on_enter=None):
            self.on_enter = on_enter

        def __enter__(self):
            if self.on_enter:
                self.on_enter()

        def __exit__(self, *exc):
            return False

    class FakeStream:
        def wait_stream(self, other):
            return None

    def capture(graph):
        if refuse[0]:
            return Ctx(lambda: (_ for _ in ()).throw(RuntimeError("operation not permitted when capturing")))
        return Ctx(lambda: captured.__setitem__(0, 0))

    class FakeCuda:
        Event = FakeEvent
        CUDAGraph = FakeGraph
        Stream = FakeStream

        @staticmethod
        def device(i):
            return Ctx()

        @staticmethod
        def stream(s):
            return Ctx()

        @staticmethod
        def current_stream():
            return FakeStream()

        graph = staticmethod(capture)

        @staticmethod
        def synchronize():
            return None

    clock, captured, refuse = [0.0], [0], [False]

    def op():
        captured[0] += 1  # counts the calls recorded into the graph
        clock[0] += 12e-6  # an eager call (the fallback) also takes 12 us of device time

    timer = CudaStreamTimer(0, cuda=FakeCuda)
    times, how = timer.device_times(op, 40, 3)
    assert how == "cuda_graph" and len(times) == 3 and times == pytest.approx([12e-6] * 3)
    refuse[0] = True
    times, how = timer.device_times(op, 10, 2)
    assert how == "cuda_stream" and times == pytest.approx([12e-6] * 2)


def test_busy_wait_measures_its_spin_once_and_caps_it():
    from hetsim.runtime.stream_timer import BusyWait

    class Event:
        def __init__(self, enable_timing: bool = False) -> None:
            pass

        def record(self) -> None:
            pass

        def synchronize(self) -> None:
            pass

        def elapsed_time(self, end: object) -> float:
            return 2.0  # ms for the 1e6-cycle calibration spin: 5e8 cycles/s

    spins: list[int] = []
    cuda = type("Cuda", (), {"Event": Event, "_sleep": staticmethod(spins.append)})
    busy = BusyWait(cuda)
    busy(1e-3)
    busy(5.0)  # capped at 0.2 s
    assert spins == [1_000_000, 500_000, 100_000_000] and busy.rate() == 5e8
    BusyWait(type("NoSpin", (), {}))(1.0)  # a CUDA API without _sleep: nothing to do
