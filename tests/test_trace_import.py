"""Profiler traces in: a Kineto trace (CUDA or HIP) read into the graph of one step,
its execution trace's tensors, and every bad input as a one-line error or a named
warning."""

from __future__ import annotations

import gzip
import json
import warnings
from pathlib import Path

import pytest

from hetsim.graphs.graph import GraphError, load
from hetsim.graphs.trace import (
    TraceWarning,
    from_trace,
    is_trace_file,
    kernel_class,
    read_kineto,
    runtime_role,
)
from hetsim.graphs.trace.trim import trim_trace

DATA = Path(__file__).parent / "data" / "traces"
ALEXNET = DATA / "alexnet-a100-forward.json.gz"
ALEXNET_STEP = "[param|pytorch.model.alex_net|0|0|0|measure|forward]"


def quiet(path: Path, **kw: object):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceWarning)
        return from_trace(path, **kw)


def write_trace(path: Path, events: list[dict], **header: object) -> Path:
    path.write_text(json.dumps({"traceEvents": events, **header}))
    return path


def launch(corr: int, ts: float, dur: float = 5.0, name: str = "cudaLaunchKernel", tid: int = 1) -> dict:
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur,
            "args": {"correlation": corr}}


def kernel(corr: int, ts: float, dur: float, stream: int = 7, name: str = "void gemm_kernel") -> dict:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
            "args": {"correlation": corr, "stream": stream}}


def test_alexnet_forward_step_is_read_with_its_streams_syncs_and_times():
    g = quiet(ALEXNET, step=ALEXNET_STEP)
    ops = [d["op"] for _, d in g.nodes(data=True)]
    assert len(g) == 41 and ops.count("sync") == 1
    assert g.meta["streams"] == [7, 20]
    assert g.meta["device"] == "NVIDIA A100-PG509-200"
    assert g.meta["step_time_s"] == pytest.approx(36.356e-3, rel=1e-6)  # the annotation's 36356 us
    first = min(g.nodes, key=lambda n: g.nodes[n]["attrs"]["seq"])
    a = g.nodes[first]["attrs"]
    assert a["cpu_op"] == "aten::conv2d" and a["kernel_s"] == pytest.approx(4e-6)
    sync = next(n for n, d in g.nodes(data=True) if d["op"] == "sync")
    assert g.nodes[sync]["attrs"]["call"] == "cudaDeviceSynchronize"
    # the sync waits for the last work of both streams
    assert {g.nodes[p]["attrs"]["stream"] for p in g.nx.predecessors(sync)} == {7, 20}


def test_default_step_is_the_last_profiler_step_that_launched_work():
    assert quiet(DATA / "event-sync-a100.json.gz").meta["step"] == "ProfilerStep#100"
    # the MI250 trace's ProfilerStep#2 is the profiler's cut-off stub: step 1 is taken
    g = quiet(DATA / "minitoy-mi250-train.json.gz")
    assert g.meta["step"] == "ProfilerStep#1" and g.meta["runtime"] == "hip"
    assert len(g.meta["host_threads"]) == 2  # forward and autograd's backward thread


def test_a_multi_stream_trace_orders_waits_from_its_cuda_sync_records():
    g = quiet(DATA / "event-sync-multi-stream-a100.json.gz")
    assert g.meta["streams"] == [20, 24, 28]
    cross = [(u, v) for u, v in g.nx.edges
             if g.nodes[u]["op"] != "sync" and g.nodes[v]["op"] != "sync"
             and g.nodes[u]["attrs"]["stream"] != g.nodes[v]["attrs"]["stream"]]
    assert cross, "the stream-wait-event record gives a cross-stream edge"
    for u, v in cross:
        assert g.nodes[u]["attrs"]["end_s"] <= g.nodes[v]["attrs"]["start_s"] + 1e-9


def test_a_named_step_the_trace_lacks_is_one_line_listing_what_it_has():
    with pytest.raises(GraphError) as e:
        quiet(ALEXNET, step="ProfilerStep#7")
    msg = str(e.value)
    assert "\n" not in msg and "no step or annotation named 'ProfilerStep#7'" in msg and "measure|forward" in msg


def test_whole_trace_and_graph_json_round_trip(tmp_path):
    g = quiet(ALEXNET, step="all")
    assert g.meta["step"] == "all" and len(g) == 41  # the shipped file holds that one step
    g.to_json(tmp_path / "g.json")
    back = load(tmp_path / "g.json")
    assert back.meta["step_time_s"] == g.meta["step_time_s"]
    assert not is_trace_file(tmp_path / "g.json") and is_trace_file(ALEXNET)


def test_execution_trace_adds_tensor_edges_between_ops():
    g = quiet(DATA / "simple-add-a100.json.gz", execution_trace=DATA / "simple-add-a100-et.json.gz")
    assert g.meta["tensor_edges"] == 3  # the two rand outputs into the adds (one was in stream order already)
    # each edge carries its tensors' bytes: 256 x 256 float32
    assert sorted({d["bytes"] for _, _, d in g.nx.edges(data=True)} - {0}) == [262144]
    with pytest.raises(GraphError, match="not a PyTorch execution trace"):
        quiet(DATA / "simple-add-a100.json.gz", execution_trace=DATA / "simple-add-a100.json.gz")


@pytest.mark.parametrize("content, message", [
    (b'{"traceEvents": [{"ph": "X", "cat": "kernel"', "truncated"),
    (b"not json at all", "not valid JSON"),
    (b'{"nodes": []}', "no 'traceEvents' list"),
    (b"\x1f\x8b\x08\x00garbage", "gzip stream is truncated or corrupt"),
])
def test_files_that_are_not_traces_are_one_line_errors(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(GraphError) as e:
        read_kineto(path)
    assert message in str(e.value) and "\n" not in str(e.value) and str(path) in str(e.value)


def test_a_truncated_gzip_trace_is_one_line(tmp_path):
    raw = gzip.compress(ALEXNET.read_bytes())
    path = tmp_path / "cut.json.gz"
    path.write_bytes(gzip.compress(gzip.decompress(ALEXNET.read_bytes()))[: len(raw) // 2])
    with pytest.raises(GraphError, match="cut.json.gz: gzip stream is truncated or corrupt"):
        read_kineto(path)


def test_a_trace_without_kernels_is_refused(tmp_path):
    path = write_trace(tmp_path / "cpu.json", [
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
        launch(1, 2, name="cudaGetDeviceCount")])
    with pytest.raises(GraphError, match="holds no GPU kernels, copies or fills; nothing to simulate"):
        from_trace(path)


def test_clock_skew_and_unknown_categories_are_named_warnings(tmp_path):
    path = write_trace(tmp_path / "skew.json", [
        launch(1, 100), kernel(1, 90, 20),  # the kernel starts 10 us before its launch
        launch(2, 110), kernel(2, 120, 5),
        {"ph": "X", "cat": "mystery_events", "name": "x", "pid": 1, "tid": 1, "ts": 105, "dur": 1}])
    with pytest.warns(TraceWarning) as rec:
        g = from_trace(path)
    text = " | ".join(str(w.message) for w in rec)
    assert "unknown categories (mystery_events x1)" in text
    assert "1 GPU activit(ies) start before their launch call" in text and "10.0 us" in text
    assert len(g) == 2


def test_kernel_classes_and_runtime_roles_read_cuda_and_hip_names():
    assert kernel_class("ampere_sgemm_128x64_tn") == "gemm"
    assert kernel_class("Cijk_Alik_Bljk_SB_MT64x16x32") == "gemm"
    assert kernel_class("void cudnn::cnn::conv2d_grouped_direct_kernel") == "conv"
    assert kernel_class("ncclKernel_AllReduce_RING_LL_Sum_float") == "collective"
    assert kernel_class("void at::native::vectorized_elementwise_kernel<4>") == "elementwise"
    assert runtime_role("cudaDeviceSynchronize") == runtime_role("hipDeviceSynchronize") == "sync_device"
    assert runtime_role("cudaStreamSynchronize") == "sync_stream"
    assert runtime_role("cudaStreamWaitEvent") == runtime_role("hipStreamWaitEvent") == "wait"
    assert runtime_role("cudaEventRecord") == "record"
    assert runtime_role("cudaMalloc") == "host"


def test_trimmed_trace_imports_as_the_step_of_the_whole(tmp_path):
    out = tmp_path / "one.json.gz"
    counts = trim_trace(ALEXNET, out, step=ALEXNET_STEP)
    assert counts["kept"] > 0
    a, b = quiet(ALEXNET, step=ALEXNET_STEP), quiet(out, step=ALEXNET_STEP)
    assert len(a) == len(b) and a.meta["step_time_s"] == b.meta["step_time_s"]
    assert sorted(a.nx.edges) == sorted(b.nx.edges)


def test_cuda_graph_launches_recorded_in_part_are_named():
    with pytest.warns(TraceWarning, match="4 CUDA-graph launch\\(es\\) whose recorded work leaves the stream idle"):
        from_trace(DATA / "queue-length-a100-train.json.gz")
