"""benchmarks/gpu_kernels.py, the parts that run without a GPU: sums, ratios, target lines."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd
import pytest

from hetsim.graphs import Graph
from hetsim.graphs.features import features

_SPEC = importlib.util.spec_from_file_location(
    "gpu_kernels", Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_kernels.py")
gk = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(gk)


def graph() -> Graph:
    """matmul -> reshape (a view) -> relu."""
    g = Graph(name="tiny")
    g.add_op("mm", "matmul", inputs=[([2, 8], "float32"), ([8, 8], "float32")], outputs=[([2, 8], "float32")],
             flops=256)
    g.add_op("view", "reshape", inputs=[([2, 8], "float32")], outputs=[([16], "float32")])
    g.add_op("act", "relu", inputs=[([16], "float32")], outputs=[([16], "float32")])
    g.add_edge("mm", "view")
    g.add_edge("view", "act")
    return g


def test_profiled_sum_adds_the_device_times_of_the_nodes_views_free():
    g = graph()
    sig = features(g)["signature"]
    ops = pd.DataFrame({"signature": [sig["mm"], sig["act"], sig["mm"]], "device": ["cuda:0", "cuda:0", "cpu"],
                        "time_s": [10e-6, 3e-6, 1.0]})
    assert gk.profiled_sum(g, ops, "cuda:0") == pytest.approx(13e-6)
    with pytest.raises(KeyError, match=r"tiny: node 'act' \(relu\) has no row on cuda:0"):
        gk.profiled_sum(g, ops.iloc[[0]], "cuda:0")


def test_kernel_sum_reads_the_kernel_events_of_a_chrome_trace_per_iteration():
    trace = {"traceEvents": [{"cat": "kernel", "dur": 30.0}, {"cat": "cpu_op", "dur": 99.0},
                             {"cat": "gpu_memcpy", "dur": 7.0}, {"cat": "kernel", "dur": 10.0}, {"ph": "M"}]}
    assert gk.kernel_sum(trace, 4) == pytest.approx(10e-6)
    with pytest.raises(ValueError, match="iterations must be >= 1"):
        gk.kernel_sum(trace, 0)


def test_rows_ratios_and_target_lines():
    frame = gk.compare_rows([
        {"model": "resnet18", "batch": 1, "nodes": 60, "profiled_s": 0.408e-3, "kernel_s": 0.40e-3},
        {"model": "resnet18", "batch": 32, "nodes": 60, "profiled_s": 5.5e-3, "kernel_s": 5e-3},
    ])
    assert list(frame.columns) == gk.COLUMNS
    assert frame["ratio"].tolist() == pytest.approx([1.02, 1.1]) and frame["within"].tolist() == [True, False]
    lines = gk.target_lines(frame)
    assert lines[1] == ("resnet18 batch 32: profiled 5.500 ms, kernels 5.000 ms, ratio 1.100 "
                        "(target within 5%: missed)")
    assert lines[-1] == "1 of 2 within 5%; mean |ratio - 1| 6.0%"


def test_without_a_gpu_the_script_says_so_and_exits_2(tmp_path, capsys, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gk.main(["--out", str(tmp_path)]) == 2
    assert "torch sees no CUDA GPU" in capsys.readouterr().err
