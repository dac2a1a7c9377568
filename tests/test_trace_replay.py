"""A traced step replayed: its own schedule gives back the traced step time, the
what-ifs start from it, the trace is a cost source and a calibration."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from hetsim.costmodel.base import CostModelError
from hetsim.costmodel.spec import check_spec, from_spec
from hetsim.costmodel.trace import TraceCostModel, calibrated_from_trace, trace_figures
from hetsim.experiments.cli.main import main
from hetsim.graphs.graph import Graph, GraphError
from hetsim.graphs.trace import TraceWarning, from_trace
from hetsim.sim import Plan, Platform, simulate
from hetsim.sim.replay import ReplaySettings, replay
from hetsim.sim.replay.whatif import gpu_scales, traced_gpu, what_ifs

DATA = Path(__file__).parent / "data" / "traces"
ALEXNET = DATA / "alexnet-a100-forward.json.gz"
ALEXNET_STEP = "[param|pytorch.model.alex_net|0|0|0|measure|forward]"
#: the traces the replay target is held on: file -> step (None: the default)
BENCHMARK = {
    "alexnet-a100-forward.json.gz": ALEXNET_STEP,
    "event-sync-a100.json.gz": None,
    "event-sync-multi-stream-a100.json.gz": None,
    "minitoy-mi250-train.json.gz": None,
    "ns-resolution-v100-train.json.gz": None,
    "trace-diff-a100-train.json.gz": None,
    "trace-diff-v100-train.json.gz": None,
}


def graph_of(name: str, step: str | None = None) -> Graph:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceWarning)
        return from_trace(DATA / name, step=step)


@pytest.mark.parametrize("name", sorted(BENCHMARK))
def test_replay_of_the_traced_schedule_gives_back_the_traced_step_time(name):
    g = graph_of(name, BENCHMARK[name])
    r = replay(g)
    assert r.measured == g.meta["step_time_s"]
    assert abs(r.error) < 0.01, f"{name}: simulated {r.makespan} s against measured {r.measured} s"
    # every stream does the device work the trace measured
    assert r.stream_busy == pytest.approx(r.measured_stream_busy)


def test_replay_respects_every_edge_and_stream_order():
    g = graph_of("trace-diff-a100-train.json.gz")
    r = replay(g)
    span = {rec["node"]: (rec["start"], rec["end"]) for rec in r.records if rec["kind"] == "op"}
    for u, v in g.nx.edges:
        if u in span and v in span:
            assert span[u][1] <= span[v][0] + 1e-12
    by_stream: dict[str, list[tuple[float, float]]] = {}
    for rec in r.records:
        if rec["kind"] == "op":
            by_stream.setdefault(rec["resource"], []).append((rec["start"], rec["end"]))
    for spans in by_stream.values():
        spans.sort()
        assert all(a[1] <= b[0] + 1e-12 for a, b in zip(spans, spans[1:], strict=False))


def test_host_scale_and_launch_mode_move_the_step_as_they_should():
    g = graph_of("alexnet-a100-forward.json.gz", ALEXNET_STEP)
    base = replay(g).makespan
    assert replay(g, host_scale=0.5).makespan < base < replay(g, host_scale=2.0).makespan
    free = replay(g, launch_scale=0.0).makespan
    graphs = replay(g, launch="graph", graph_launch_s=10e-6)
    assert graphs.launches == 1  # one segment: the forward up to its final synchronisation
    assert free <= graphs.makespan <= free + 10e-6 + 1e-9
    with pytest.raises(GraphError, match="launch must be one of"):
        ReplaySettings(launch="lazy")
    with pytest.raises(GraphError, match="host_scale must be a finite number >= 0"):
        replay(g, host_scale=-1)


def test_cuda_graph_what_if_is_within_the_traced_time_less_the_launch_excess():
    g = graph_of("alexnet-a100-forward.json.gz", ALEXNET_STEP)
    gl = 10e-6
    w = what_ifs(g, graph_launch_s=gl)
    cg = w.cases["cuda graphs"]
    excess = w.host_bound_s - cg.launches * gl
    assert w.host_bound_s > 0.8 * w.traced.makespan  # the traced forward waits on its launches
    assert cg.makespan <= w.traced.measured - excess


def test_another_gpu_scales_kernels_by_class():
    g = graph_of("alexnet-a100-forward.json.gz", ALEXNET_STEP)
    a100 = traced_gpu(g)
    h100 = Platform.preset("h100-server").devices_of_kind("gpu")[0]
    scales = gpu_scales(g, a100, h100)
    conv = next(n for n, d in g.nodes(data=True) if d["op"] == "conv")
    elem = next(n for n, d in g.nodes(data=True) if d["op"] == "elementwise")
    assert scales[conv] == pytest.approx(a100.peak_flops / h100.peak_flops)
    assert scales[elem] == pytest.approx(a100.mem_bandwidth_bytes_per_s / h100.mem_bandwidth_bytes_per_s)
    w = what_ifs(g, cuda_graphs=False, gpus=["h100-server"])
    assert w.cases["gpu h100-server"].makespan < w.traced.makespan
    mi250 = graph_of("minitoy-mi250-train.json.gz")
    with pytest.raises(GraphError, match="no preset describes the traced GPU 'AMD Radeon Graphics'"):
        what_ifs(mi250, gpus=["h100-server"])


def test_chrome_trace_puts_the_replay_beside_the_traced_step(tmp_path):
    g = graph_of("event-sync-multi-stream-a100.json.gz")
    r = replay(g)
    path = r.to_chrome_trace(tmp_path / "replay.json", g)
    doc = json.loads(Path(path).read_text())
    names = {e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "process_name"}
    assert {"traced stream 20", "simulated stream 20", "traced host 0", "simulated host 0"} <= names


def test_trace_cost_source_prices_the_graph_with_its_measured_times():
    g = graph_of("alexnet-a100-forward.json.gz", ALEXNET_STEP)
    spec = f"trace:{ALEXNET}@{ALEXNET_STEP}"
    check_spec(spec)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceWarning)
        cost = from_spec(spec)
    assert isinstance(cost, TraceCostModel)
    node = next(n for n, d in g.nodes(data=True) if d["op"] == "gemm")
    a = g.nodes[node]["attrs"]
    gpu = Platform.preset("a100-40gb-server").device("gpu")
    assert cost.op_time(g, node, gpu) == a["kernel_s"]
    assert cost.dispatch_time(g, node, gpu) == a["host_s"] + a["call_s"]
    # the hetsim engine on the platform the trace calibrates: all ops on the GPU, eager launches
    platform = calibrated_from_trace(Platform.preset("a100-40gb-server"),
                                     trace_figures(ALEXNET, step=ALEXNET_STEP))
    res = simulate(g, platform, Plan({n: "gpu" for n in g.nx}), cost)
    assert res.makespan == pytest.approx(g.meta["step_time_s"], rel=0.05)
    # on the CPU the measured time is carried over by the ratio of compute peaks (a GEMM),
    # said once in a named warning; the host work of the op stays the measured one
    cpu = Platform.preset("a100-40gb-server").device("cpu")
    with pytest.warns(UserWarning, match="41 carried from the traced gpu by the ratio of compute peaks"):
        assert cost.op_time(g, node, cpu) == pytest.approx(a["kernel_s"] * gpu.peak_flops / cpu.peak_flops)
    assert cost.dispatch_time(g, node, cpu) == a["host_s"] + a["call_s"]
    # a trace whose GPU no preset describes prices other devices by the roofline
    amd = TraceCostModel(graph_of("minitoy-mi250-train.json.gz"))
    assert amd.traced is None and amd.how(next(iter(amd.kernel_s)), cpu) == "fallback"
    with pytest.raises(CostModelError, match="trace cost source: .*nope.json: cannot read trace"):
        from_spec("trace:nope.json")


def test_calibrate_from_trace_writes_a_platform_with_the_traced_figures(tmp_path, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceWarning)
        assert main(["calibrate", "--from-trace", str(DATA / "trace-diff-a100-train.json.gz"),
                     "--out", str(tmp_path)]) == 0
    pl = Platform.load(tmp_path / "platform.toml")
    gpu = pl.device("gpu")
    figures = json.loads((tmp_path / "measurements.json").read_text())
    assert gpu.launch == "eager" and pl.calibration["trace"] == "trace-diff-a100-train.json.gz"
    assert gpu.dispatch_s == pytest.approx(float(figures["host_per_launch_us"]) * 1e-6)
    assert "launch_latency_us" in capsys.readouterr().out


def test_replay_command_prints_the_check_and_the_what_ifs(tmp_path, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceWarning)
        assert main(["replay", str(ALEXNET), "--step", ALEXNET_STEP, "--host-scale", "0.5", "--gpu", "h100-server",
                     "--chrome-trace", str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr().out
    assert "device-bound part" in out and "host-bound part" in out
    for label in ("cuda graphs", "host x 0.5", "gpu h100-server"):
        assert label in out
    assert "check: cuda graphs" in out and out.rstrip().splitlines()[-2].endswith(": yes")
    assert (tmp_path / "r.json").is_file()
