"""The kernel model: a GPU kernel's time from the GPU's spec sheet and fitted constants."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hetsim.costmodel import CostModelError, from_spec
from hetsim.costmodel.gpu.features import gpu_ops
from hetsim.costmodel.gpu.kernel import (
    KernelConstants,
    KernelGPU,
    kernel_times,
    shipped_constants,
)
from hetsim.costmodel.gpu.kernel_cost import KernelCostModel
from hetsim.costmodel.gpu.kernel_fit import bank_gpus, bank_sets, fit_constants
from hetsim.costmodel.gpu.model import GPUBank
from hetsim.costmodel.gpu.neusight import import_neusight
from hetsim.graphs import Graph
from hetsim.graphs.features import features
from hetsim.sim import Platform

SAMPLE = Path(__file__).parent / "data" / "neusight-sample"
F32 = "float32"


def _gpu(preset: str) -> KernelGPU:
    return KernelGPU.from_device(Platform.preset(preset).device("gpu"))


def _ops(*nodes: tuple[str, str, list, list, float, dict]) -> pd.DataFrame:
    g = Graph(name="k")
    for name, op, ins, outs, flops, attrs in nodes:
        g.add_op(name, op, inputs=[(s, F32) for s in ins], outputs=[(s, F32) for s in outs], flops=flops,
                 attrs=attrs)
    return gpu_ops(features(g))


def _mm(name: str, m: int, n: int, k: int) -> tuple[str, str, list, list, float, dict]:
    return (name, "matmul", [[m, k], [k, n]], [[m, n]], 2.0 * m * n * k, {})


def test_a_gpu_spec_without_a_field_is_refused_naming_field_and_gpu() -> None:
    dev = Platform.preset("h200-server").device("gpu")
    with pytest.raises(CostModelError, match=r"GPU 'gpu' has no 'l2_bytes'"):
        KernelGPU.from_device(dataclasses.replace(dev, l2_bytes=None))
    with pytest.raises(CostModelError, match=r"GPU 'x': tdp_w must be a positive number"):
        KernelGPU.from_spec("x", {"sm_count": 10, "clock_hz": 1e9, "peak_flops": 1e12, "mem_bandwidth_bytes_per_s": 1e11,
                                  "l2_bytes": 1e6, "tdp_w": 0})
    with pytest.raises(CostModelError, match=r"GPU 'x' has no 'clock_hz'"):
        KernelGPU.from_spec("x", {"sm_count": 10, "peak_flops": 1e12, "mem_bandwidth_bytes_per_s": 1e11,
                                  "l2_bytes": 1e6, "tdp_w": 70})
    with pytest.raises(CostModelError, match="not cpu device 'cpu'"):
        KernelGPU.from_device(Platform.preset("h200-server").device("cpu"))


def test_a_precision_the_gpu_lacks_is_an_error_not_a_silent_fp32() -> None:
    t4, a100 = _gpu("t4-server"), _gpu("a100-server")
    ops = _ops(_mm("mm", 1024, 1024, 1024))
    c = KernelConstants()
    with pytest.raises(CostModelError, match=r"GPU 'gpu' has no bf16 math"):
        kernel_times(ops, t4, c, dtypes=["bfloat16"])
    half = kernel_times(ops, t4, c, dtypes=["float16"])
    assert half[0] < kernel_times(ops, t4, c)[0]  # FP16 tensor cores beat its FP32 pipes
    assert kernel_times(ops, a100, c, dtypes=["bfloat16"])[0] > 0


def test_fp32_convolutions_run_in_tf32_where_the_gpu_has_it() -> None:
    conv = ("c", "conv2d", [[8, 256, 28, 28], [256, 256, 3, 3]], [[8, 256, 28, 28]], 2.0 * 8 * 256 * 28 * 28 * 256 * 9,
            {"strides": [1, 1], "padding": [1, 1, 1, 1], "groups": 1})
    ops = _ops(conv, _mm("mm", 8 * 784, 256, 2304))
    # Winograd made slow: the conv runs as the implicit GEMM
    c = KernelConstants(tf32_speedup=3.0, compute_efficiency=0.8, winograd_efficiency=0.01, launch_floor_s=1e-9)
    a100 = _gpu("a100-server")
    t = kernel_times(ops, a100, c)
    assert t[0] == pytest.approx(t[1] / 3.0, rel=0.05)  # the same GEMM: the conv in TF32, the matmul in FP32
    capped = kernel_times(ops, a100, dataclasses.replace(c, tf32_speedup=100.0))  # at most the TF32 peak
    fp32 = min(0.8 * a100.peak_flops, a100.power_cap(c))
    assert capped[0] == pytest.approx(t[1] * fp32 / (0.8 * a100.mode_peak("tf32")), rel=0.05)
    high = kernel_times(ops, dataclasses.replace(a100, matmul_precision="high"), c)
    assert high[1] == pytest.approx(t[0], rel=0.05)
    v100 = _gpu("v100-server")  # no TF32: both FP32
    tv = kernel_times(ops, v100, c)
    assert tv[0] == pytest.approx(tv[1], rel=0.05)


def _conv3(name: str, batch: int, cin: int, cout: int, size: int) -> tuple[str, str, list, list, float, dict]:
    return (name, "conv2d", [[batch, cin, size, size], [cout, cin, 3, 3]], [[batch, cout, size, size]],
            2.0 * batch * cout * size * size * cin * 9, {"strides": [1, 1], "padding": [1, 1, 1, 1], "groups": 1})


def test_3x3_convolutions_take_winograd_where_it_is_faster() -> None:
    v100 = _gpu("v100-server")  # cuDNN's Winograd on the CUDA cores
    c = KernelConstants(winograd_efficiency=1.0, launch_floor_s=1e-9, tile_overhead_k=1.0)
    slow = dataclasses.replace(c, winograd_efficiency=1e-3)  # Winograd never taken: the implicit GEMM
    big = _ops(_conv3("big", 32, 256, 256, 28))
    direct, wino = kernel_times(big, v100, slow)[0], kernel_times(big, v100, c)[0]
    # 4x fewer multiplications, less the transforms' bytes: between 2x and 4x faster
    assert 2.0 < direct / wino < 4.0
    # the faster of the two, whatever the shape
    shapes = _ops(_conv3("thin", 32, 4, 4, 112), _conv3("small", 1, 64, 64, 7), _conv3("wide", 8, 512, 512, 14))
    assert (kernel_times(shapes, v100, c) <= kernel_times(shapes, v100, slow) * (1 + 1e-12)).all()



def test_tiles_run_in_waves_over_the_sms() -> None:
    h = _gpu("h200-server")  # 132 SMs
    c = KernelConstants(launch_floor_s=1e-9, tile_efficiency=1.0, tile_overhead_k=1e-9)
    k = 4096
    one = _ops(_mm("a", 128 * 132, 128, k))   # 132 tiles of 128 x 128: one wave
    more = _ops(_mm("b", 128 * 133, 128, k))  # one tile more: a second wave
    t1, t2 = kernel_times(one, h, c)[0], kernel_times(more, h, c)[0]
    # one tile more costs far more than its 1/132 share (the best tile shape for 133
    # rows of tiles is 128 x 64 in three waves of half the time: 1.5/1.333 of one wave)
    assert t2 / t1 == pytest.approx(1.125, rel=1e-6)
    small = _ops(_mm("s", 128, 128, k))       # under one wave: split along k, down to the sub-wave floor
    # the best of the small tiles: 64 x 32, 8 tiles, a wave of them an eighth of t1
    assert kernel_times(small, h, c)[0] == pytest.approx(c.subwave * t1 / 8, rel=1e-4)


def test_what_fits_in_the_l2_moves_faster() -> None:
    h = _gpu("h200-server")
    c = KernelConstants(launch_floor_s=1e-9, l2_speedup=3.0)
    small = _ops(("a", "add", [[1024, 1024], [1024, 1024]], [[1024, 1024]], 1024.0 * 1024, {}))
    big = _ops(("b", "add", [[16384, 4096], [16384, 4096]], [[16384, 4096]], 16384.0 * 4096, {}))
    ts, tb = kernel_times(small, h, c)[0], kernel_times(big, h, c)[0]
    per_byte_small = ts / small["bytes"].iloc[0]
    per_byte_big = tb / big["bytes"].iloc[0]
    assert per_byte_big / per_byte_small == pytest.approx(3.0, rel=1e-2)  # the floor aside


def test_constants_are_checked_and_the_shipped_ones_load() -> None:
    c = shipped_constants()
    assert 0 < c.compute_efficiency <= 1 and 1e-7 < c.launch_floor_s < 1e-4
    with pytest.raises(CostModelError, match=r"missing \['subwave'\]"):
        KernelConstants.from_dict({k: v for k, v in c.to_dict().items() if k != "subwave"})
    with pytest.raises(CostModelError, match="dram_fraction must be a positive number"):
        KernelConstants.from_dict({**c.to_dict(), "dram_fraction": "fast"})


def test_the_kernel_cost_model_prices_a_preset_gpu_from_its_spec_sheet() -> None:
    platform = Platform.preset("h200-server")
    g = Graph(name="two")
    g.add_op("mm", "matmul", inputs=[([512, 1024], F32), ([1024, 1024], F32)], outputs=[([512, 1024], F32)],
             flops=2.0 * 512 * 1024 * 1024)
    g.add_op("r", "reshape", inputs=[([512, 1024], F32)], outputs=[([1024, 512], F32)], flops=0.0)
    g.add_edge("mm", "r", bytes=512 * 1024 * 4)
    cost = from_spec("kernel", platform=platform)
    gpu = platform.device("gpu")
    assert cost.op_time(g, "mm", gpu) > shipped_constants().launch_floor_s
    assert cost.op_time(g, "r", gpu) == 0.0 and cost.dispatch_time(g, "r", gpu) == 0.0
    assert cost.dispatch_time(g, "mm", gpu) == gpu.dispatch_s
    assert from_spec("cpu=roofline,gpu=kernel", platform=platform).describe() == "cpu=roofline,gpu=kernel"
    assert KernelCostModel().kernel_times(g, gpu)["r"] == 0.0


def test_constants_fit_on_measured_gpus_in_seconds(tmp_path: Path) -> None:
    bank = GPUBank.from_profiles(import_neusight(SAMPLE, tmp_path / "profiles"), cache=tmp_path / "cache")
    sets = bank_sets(bank)
    assert [s.gpu for s in sets] == list(bank.gpus) and all(s.floor_s == bank.floor(s.gpu) for s in sets)
    start = KernelConstants(compute_efficiency=0.3, dram_fraction=0.4)
    fitted = fit_constants(sets, start=start)

    def error(c: KernelConstants) -> float:
        return float(np.median(np.concatenate([np.abs(np.log(s.predict(c) / s.times)) for s in sets])))

    assert error(fitted) < error(start)
    with pytest.raises(CostModelError, match="at least one set"):
        fit_constants([])


def test_the_fit_prices_a_measured_gpu_from_its_presets_spec_sheet() -> None:
    # the data set's own figures give the L4 60 SMs and 31.3 TFLOP/s; its datasheet 58 and 30.3
    gpus = bank_gpus(GPUBank.builtin())
    l4 = Platform.preset("l4-server").device("gpu")
    assert gpus["l4"].name == "l4"
    assert (gpus["l4"].sm_count, gpus["l4"].peak_flops) == (l4.sm_count, l4.peak_flops) == (58, 3.03e13)
    assert gpus["l4"].tensor_flops == l4.tensor_flops


def test_a_gpu_rated_at_more_flops_per_watt_sustains_more_per_watt() -> None:
    c = KernelConstants(fp32_flops_per_watt=5e10, watt_exponent=0.5, launch_floor_s=1e-9, board_power_w=1e-9)
    l4, t4 = _gpu("l4-server"), _gpu("t4-server")  # 72 W and 70 W: power-bound on their CUDA cores
    rated = (l4.peak_flops / l4.tdp_w) / (t4.peak_flops / t4.tdp_w)
    assert l4.power_cap(c) / l4.tdp_w == pytest.approx(rated**0.5 * t4.power_cap(c) / t4.tdp_w)
    big = _ops(_mm("mm", 8192, 8192, 8192))
    # the same L4 rated at half the peak per watt (twice the power) sustains 2**0.5 x its rate
    hot = dataclasses.replace(l4, tdp_w=2 * l4.tdp_w)
    assert kernel_times(big, l4, c)[0] == pytest.approx(2**0.5 * kernel_times(big, hot, c)[0], rel=0.02)
    assert kernel_times(big, l4, c)[0] > 2.0 * big["flops"].iloc[0] / l4.peak_flops  # far from its peak


def test_what_the_board_draws_anyway_is_not_the_sms_to_spend() -> None:
    t4, h100 = _gpu("t4-server"), _gpu("h100-server")
    c = KernelConstants(board_power_w=1e-9)
    drawn = dataclasses.replace(c, board_power_w=20.0)
    assert t4.power_cap(drawn) / t4.power_cap(c) == pytest.approx(50.0 / 70.0)
    assert h100.power_cap(drawn) / h100.power_cap(c) == pytest.approx(680.0 / 700.0)
    # at most half the board's power
    assert t4.power_cap(dataclasses.replace(c, board_power_w=60.0)) / t4.power_cap(c) == pytest.approx(0.5)


def test_row_kernels_move_at_most_their_bytes_per_sm_cycle() -> None:
    c = KernelConstants(launch_floor_s=1e-9, row_bytes_per_cycle=4.0, dram_fraction=0.8)
    rows = [[65536, 4096]]
    ln = ("ln", "layer_norm", [rows[0], [4096], [4096]], rows, 5.0 * 65536 * 4096, {"axes": [-1]})
    add = ("add", "add", [rows[0], rows[0]], rows, 65536.0 * 4096, {})
    h100, t4 = _gpu("h100-server"), _gpu("t4-server")
    ops = _ops(ln, add)
    per_byte = kernel_times(ops, h100, c) / ops["bytes"].to_numpy()
    # the H100's 132 SMs x 1.98 GHz x 4 B: 1.05 TB/s, under its DRAM's 0.8 x 3.35 TB/s
    assert per_byte[0] == pytest.approx(1.0 / (132 * 1.98e9 * 4.0), rel=1e-3)
    assert per_byte[1] == pytest.approx(1.0 / (0.8 * 3.35e12), rel=1e-3)
    # the T4's slow DRAM binds first: both at its DRAM's rate
    per_byte = kernel_times(ops, t4, c) / ops["bytes"].to_numpy()
    assert per_byte[0] == pytest.approx(per_byte[1], rel=1e-3)

