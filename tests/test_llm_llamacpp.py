"""llama.cpp as it runs (hetsim.costmodel.llamacpp, schedulers.llm.llamacpp_fit): placement, memory,
speed on a tiny hand-computed model; the command line; calibration behind a fake GPU."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from gguf_files import TINY_CONFIGS, write_gguf

from hetsim.costmodel.base import CostModelError
from hetsim.costmodel.llamacpp import (
    AchievedRates,
    BackendRates,
    LlamaCppRun,
    Machine,
    place,
    predict,
)
from hetsim.experiments.cli import main
from hetsim.experiments.llm_machine import find_gpu, machine_from_flags, machine_from_platform
from hetsim.graphs.llm.architecture import Architecture, ModelWeights
from hetsim.graphs.llm.gguf_header import TensorInfo
from hetsim.graphs.llm.hf_config import architecture_from_hf
from hetsim.graphs.llm.model_source import load_model
from hetsim.graphs.llm.quant_recipe import recipe_tensors
from hetsim.schedulers import SchedulerError
from hetsim.schedulers.llm.llamacpp_fit import evaluate_run, fitting_runs, suggest_run


def tiny() -> ModelWeights:
    """Two F32 layers: attention 208 bytes (52 weights), FFN 400 bytes (100), embeddings 256, output 272."""
    a = Architecture("t", "llama", layers=2, hidden=4, heads=2, kv_heads=1, head_dim=2, ffn=8, vocab=16,
                     max_context=64)
    t = [TensorInfo("token_embd.weight", (4, 16), "F32")]
    for i in range(2):
        t += [TensorInfo(f"blk.{i}.attn_norm.weight", (4,), "F32"), TensorInfo(f"blk.{i}.attn_q.weight", (4, 4), "F32"),
              TensorInfo(f"blk.{i}.attn_k.weight", (4, 2), "F32"), TensorInfo(f"blk.{i}.attn_v.weight", (4, 2), "F32"),
              TensorInfo(f"blk.{i}.attn_output.weight", (4, 4), "F32"), TensorInfo(f"blk.{i}.ffn_norm.weight", (4,), "F32"),
              TensorInfo(f"blk.{i}.ffn_gate.weight", (4, 8), "F32"), TensorInfo(f"blk.{i}.ffn_up.weight", (4, 8), "F32"),
              TensorInfo(f"blk.{i}.ffn_down.weight", (8, 4), "F32")]
    t += [TensorInfo("output_norm.weight", (4,), "F32"), TensorInfo("output.weight", (4, 16), "F32")]
    return ModelWeights(a, tuple(t), "F32", "test")


RATES = AchievedRates(gpu_bw_frac=0.5, gpu_token_s=0.01, gpu_layer_s=0.2, graph_layer_s=0.1, gemm_frac_quant=0.25,
                      gemm_frac_float=0.5, expert_rows_half=32, cpu_bw_frac=0.5, cpu_thread_bw=1e9,
                      cpu_thread_flops=1000, cpu_tiled_flops=2000, pcie_frac=0.5, switch_s=0.5)
BOX = Machine("box", host_memory=1e6, host_bandwidth=1000, threads=2, gpu="g", gpu_memory=50600, gpu_bandwidth=1000,
              gpu_flops=1e4, gpu_int8_ops=2e4, pcie_bandwidth=1000)


def test_groups_and_bytes_of_a_layer() -> None:
    m = tiny()
    assert [(lb.attn, lb.ffn, lb.exps) for lb in m.layer_bytes] == [(208, 400, 0)] * 2
    assert [(le.attn, le.ffn) for le in m.layer_elements] == [(52, 100)] * 2
    assert (m.token_embd_bytes, m.output_bytes, m.file_bytes, m.float_weights) == (256, 272, 1744, True)


def test_placement_and_memory_follow_llama_cpp() -> None:
    pl = place(tiny(), LlamaCppRun(ngl=1), context=10)
    assert [d["attn"] for d in pl.layers] == ["host", "gpu"] and pl.output_device == "host"
    # GPU: layer 1 (608) + its KV (10 cells x 1 head x (2 + 2) x 2 bytes = 80) + compute: activations
    # 4 x 512 x (2 x 4 + 2 x 8) = 49152 and layer 0's 608 bytes staged for prompt processing
    assert pl.breakdown["gpu"] == {"weights": 608, "kv": 80, "compute": 49760}
    assert pl.breakdown["host"] == {"weights": 256 + 608 + 272, "kv": 80, "compute": 49152}
    assert pl.memory == {"gpu": 50448, "host": 50368}
    all_gpu = place(tiny(), LlamaCppRun(ngl=100), context=10)
    assert all_gpu.ngl == 3 and all_gpu.output_device == "gpu" and all_gpu.notes == (
        "-ngl 100 clamped to 3 (the model has 2 layers and an output layer)",)
    nkvo = place(tiny(), LlamaCppRun(ngl=3, kv_offload=False), context=10)
    assert nkvo.kv_device == ("host", "host") and nkvo.breakdown["gpu"]["kv"] == 0
    ot = place(tiny(), LlamaCppRun(ngl=3, override_cpu=(r"blk\.1\.ffn_(up|down|gate)",)), context=10)
    assert ot.layers[1]["ffn"] == "split" and ot.breakdown["gpu"]["weights"] == 1216 + 272 - 384


def test_moe_experts_stay_on_host_with_n_cpu_moe() -> None:
    a = architecture_from_hf(TINY_CONFIGS["qwen3moe"])
    m = ModelWeights(a, recipe_tensors(a, "Q8_0"), "Q8_0", "test")
    pl = place(m, LlamaCppRun(ngl=99, n_cpu_moe=1), context=16)
    assert pl.layers[0] == {"attn": "gpu", "ffn": "gpu", "exps": "host"} and pl.layers[1]["exps"] == "gpu"
    exps = m.layer_bytes[0].exps
    assert exps == 3 * tensor_q8(256 * 256 * 8)
    assert pl.breakdown["host"]["weights"] == m.token_embd_bytes + exps
    # one token reads top_k / experts of the routed experts; 512 tokens touch 1 - (1 - 2/8)^512 of them
    assert m.active_layer_bytes(0) == m.layer_bytes[0].attn + m.layer_bytes[0].ffn + exps * 2 / 8
    assert m.expert_read_fraction(512) == pytest.approx(1.0)


def _moe_on_a_big_gpu() -> tuple[ModelWeights, Machine, AchievedRates]:
    """A tiny 8-expert model, a GPU of 1e12 B/s and 2e12 INT8 op/s, and the rates without the
    few-rows penalty of routed experts."""
    a = architecture_from_hf(TINY_CONFIGS["qwen3moe"])
    m = ModelWeights(a, recipe_tensors(a, "Q8_0"), "Q8_0", "test")
    big = Machine("big", host_memory=1e12, host_bandwidth=1e12, threads=8, gpu="g", gpu_memory=1e12,
                  gpu_bandwidth=1e12, gpu_flops=1e12, gpu_int8_ops=2e12, pcie_bandwidth=1e12)
    rates = RATES.to_dict() | {"expert_rows_half": 0.0}
    rates.pop("fitted_on"), rates.pop("undetermined")
    return m, big, AchievedRates(**rates)


def test_routed_experts_run_slower_the_fewer_rows_each_gets() -> None:
    m, big, flat = _moe_on_a_big_gpu()
    full = predict(m, big, LlamaCppRun(ubatch=64), "pp", 64, flat).seconds["gpu"]
    slow = predict(m, big, LlamaCppRun(ubatch=64), "pp", 64, RATES).seconds["gpu"]
    # 64 rows x 2 of 8 experts: 16 rows an expert, at 16 / (16 + 32) of the rate: the routed products take 3x
    exps = 2 * 64 * sum(le.exps for le in m.layer_elements) * 2 / 8 / (2e12 * 0.25)
    assert slow - full == pytest.approx(2 * exps)


def test_a_micro_batch_of_a_few_rows_runs_matrix_vector_kernels() -> None:
    """At most VECTOR_KERNEL_MAX_ROWS rows a micro-batch, routed experts cost the bytes of those the rows
    reach, no tile of a matrix kernel left idle; above it, a grouped product slower the fewer rows."""
    from hetsim.costmodel.llamacpp.predict import VECTOR_KERNEL_MAX_ROWS

    m, big, flat = _moe_on_a_big_gpu()
    for ub, penalised in ((1, False), (VECTOR_KERNEL_MAX_ROWS, False), (VECTOR_KERNEL_MAX_ROWS + 8, True)):
        run = LlamaCppRun(ubatch=ub)
        with_half = predict(m, big, run, "pp", 32, RATES).seconds["gpu"]
        without = predict(m, big, run, "pp", 32, flat).seconds["gpu"]
        assert with_half > without if penalised else with_half == pytest.approx(without), ub


def test_cpu_prompt_processing_of_q4_0_and_q8_0_runs_tiled() -> None:
    m, cpu = tiny_q8(), Machine("cpu", host_memory=1e6, host_bandwidth=1000, threads=2)
    tiled = predict(m, cpu, LlamaCppRun(ngl=0), "pp", 32, RATES).seconds["host"]
    rows = predict(m, cpu, LlamaCppRun(ngl=0, cpu_tiled_gemm=False), "pp", 32, RATES).seconds["host"]
    el = m.layer_elements[0]
    # the matrix products (not the attention) run at cpu_tiled_flops = 2 x cpu_thread_flops
    assert rows - tiled == pytest.approx(2 * 32 * (el.attn + el.ffn) / (2 * 2000))


def test_layers_split_over_several_gpus_as_llama_cpp_does() -> None:
    a = Architecture("t4", "llama", layers=4, hidden=4, heads=2, kv_heads=1, head_dim=2, ffn=8, vocab=16,
                     max_context=64)
    m = ModelWeights(a, tuple(t for t in tiny().tensors if not t.name.startswith("blk."))
                     + tuple(TensorInfo(t.name.replace("blk.0.", f"blk.{i}."), t.shape, t.type_name)
                             for i in range(4) for t in tiny().tensors if t.name.startswith("blk.0.")), "F32", "test")
    # -ngl 5 on two GPUs: (layer - first) / 5 of the way, in halves: layers 0-2 on GPU 0, layer 3 and the output on 1
    pl = place(m, LlamaCppRun(ngl=5), context=10, gpus=2)
    assert pl.gpu_of_layer == (0, 0, 0, 1) and pl.output_device == "gpu"
    assert pl.memory["gpu"] == max(pl.gpu_bytes) == pl.gpu_bytes[0]
    one = place(m, LlamaCppRun(ngl=5), context=10)
    assert sum(pl.gpu_bytes) > one.memory["gpu"]  # each GPU has a compute buffer of its own
    assert place(m, LlamaCppRun(ngl=2), context=10, gpus=2).gpu_of_layer == (-1, -1, 0, 1)
    big = Machine("2x", host_memory=1e6, host_bandwidth=1000, threads=2, gpu="g", gpu_memory=1e6,
                  gpu_bandwidth=1000, gpu_flops=1e4, gpu_int8_ops=2e4, pcie_bandwidth=1000, gpu_count=2)
    single = Machine("1x", host_memory=1e6, host_bandwidth=1000, threads=2, gpu="g", gpu_memory=1e6,
                     gpu_bandwidth=1000, gpu_flops=1e4, gpu_int8_ops=2e4, pcie_bandwidth=1000)
    two, alone = (predict(m, box, LlamaCppRun(ngl=5), "tg", 4, RATES).seconds for box in (big, single))
    # the GPUs read their layers one after the other: the same bytes; one hand-over from GPU 0 to GPU 1
    assert two["gpu"] == pytest.approx(alone["gpu"]) and two["switch"] - alone["switch"] == pytest.approx(0.5)
    with pytest.raises(CostModelError, match=r"gpus must be an int >= 1, got 0"):
        place(m, LlamaCppRun(), context=10, gpus=0)
    with pytest.raises(CostModelError, match=r"gpu_count must be an int >= 1, got 0"):
        Machine("x", host_memory=1, host_bandwidth=1, threads=1, gpu_count=0)


def test_two_gpus_hold_what_one_cannot() -> None:
    model = load_model("llama-3-70b")
    one = machine_from_flags("RTX 3090", ram_gb=64, ram_bw=90, threads=16)
    two = machine_from_flags("RTX 3090", ram_gb=64, ram_bw=90, threads=16, gpus=2)
    assert two.name == "2x RTX 3090 + 64 GB RAM" and two.gpu_count == 2
    assert suggest_run(model, one, context=4096, rates=AchievedRates.load()).placement.ngl < 81
    best = suggest_run(model, two, context=4096, rates=AchievedRates.load())
    assert best.placement.ngl == 81 and best.fits and best.placement.memory["host"] < 2**30
    with pytest.raises(SchedulerError, match=r"--gpus must be an int >= 1 with --gpu, got 0"):
        machine_from_flags("RTX 3090", ram_gb=64, ram_bw=90, threads=16, gpus=0)
    # a platform with two identical GPUs is a machine with two
    import dataclasses

    from hetsim.costmodel.platform import Platform

    p = Platform.load("desktop-rtx4090")
    link = p.links[0]
    p2 = p.replace(devices=(*p.devices, dataclasses.replace(p.device("gpu"), name="gpu1")),
                   links=(*p.links, dataclasses.replace(link, dst="gpu1")), memory_domains=())
    assert machine_from_platform(p2).gpu_count == 2 and machine_from_platform(p).gpu_count == 1


def tensor_q8(n: int) -> int:
    return n // 32 * 34


def test_generation_speed_by_hand() -> None:
    # tg4: mean cache 2 tokens, 16 KV bytes per layer. host reads layer 0 (608) + its KV (16) + output (272) =
    # 896 B at min(1000 x 0.5, 2 x 1e9) = 500 B/s: 1.792 s; GPU reads 608 + 16 at 1000 x 0.5: 1.248 s + 0.01
    # per token + 0.1 per layer (CUDA graph); host -> GPU -> host: one hand-over beyond the first, 0.5 s
    p = predict(tiny(), BOX, LlamaCppRun(ngl=1), "tg", 4, RATES)
    assert p.seconds == pytest.approx({"host": 1.792, "gpu": 1.358, "switch": 0.5})
    assert p.tokens_per_s == pytest.approx(1 / 3.65)
    eager = predict(tiny(), BOX, LlamaCppRun(ngl=1, cuda_graphs=False), "tg", 4, RATES)
    assert eager.seconds["gpu"] == pytest.approx(1.248 + 0.01 + 0.2)


def test_prompt_processing_speed_by_hand() -> None:
    # pp64 in micro-batches of 32: attention 16 FLOP per cached token per query; layer 0's on the CPU
    # (its KV is there): (32 x 16 x 16 + 32 x 16 x 48) / (2 x 1000) = 16.384 s. Matrix products run on the GPU at
    # 1e4 x 0.5 FLOP/s: 2 x 32 x (52 + 100) per layer and micro-batch, twice, both layers (7.7824 s) + layer
    # 1's attention (6.5536 s); layer 0's weights cross PCIe each micro-batch at 500 B/s: 2 x 608 / 500 = 2.432 s
    # Each micro-batch also reads both layers' weights on the GPU (2 x 608 B at 500 B/s) and launches its
    # kernels (0.01 s + 0.2 s for the one GPU layer): 2 x (2.432 + 0.21) = 5.284 s more on the GPU; flash
    # attention reads layer 1's F16 cache (8 bytes a cell) once a micro-batch: (16 + 48) x 8 / 500 = 1.024 s
    p = predict(tiny(), BOX, LlamaCppRun(ngl=1, ubatch=32, flash_attn=True), "pp", 64, RATES)
    assert p.seconds == pytest.approx({"gpu": 14.336 + 5.284 + 1.024, "host": 16.384, "pcie": 2.432})
    assert p.tokens_per_s == pytest.approx(64 / 39.46)
    # without flash attention the scores (4 bytes x 2 heads x 32 rows x cells, three passes) cross memory:
    # cells 16 then 48 per micro-batch; layer 0's at the host's 500 B/s, layer 1's at the GPU's 500 B/s
    no_fa = predict(tiny(), BOX, LlamaCppRun(ngl=1, ubatch=32), "pp", 64, RATES)
    scores = 3 * 4 * 2 * 32 * (16 + 48) / 500
    assert no_fa.seconds["host"] - p.seconds["host"] == pytest.approx(scores)
    assert no_fa.seconds["gpu"] - p.seconds["gpu"] == pytest.approx(scores - 1.024)
    # at depth 100 every micro-batch attends to 100 more cached tokens
    deep = predict(tiny(), BOX, LlamaCppRun(ngl=1, ubatch=32, flash_attn=True, depth=100), "pp", 64, RATES)
    assert deep.seconds["host"] - p.seconds["host"] == pytest.approx(2 * 32 * 16 * 100 / 2000)
    small = predict(tiny(), BOX, LlamaCppRun(ngl=1, ubatch=16), "pp", 16, RATES)
    assert small.seconds["pcie"] == 0  # below 32 rows the host layer runs on the CPU


def tiny_q8() -> ModelWeights:
    """One layer of Q8_0 weights (34 bytes per 32 weights) 32 wide."""
    a = Architecture("q", "llama", layers=1, hidden=32, heads=2, kv_heads=1, head_dim=16, ffn=32, vocab=32,
                     max_context=64)
    t = [TensorInfo("token_embd.weight", (32, 32), "Q8_0"), TensorInfo("blk.0.attn_norm.weight", (32,), "F32")]
    t += [TensorInfo(f"blk.0.attn_{n}.weight", (32, w), "Q8_0") for n, w in (("q", 32), ("k", 16), ("v", 16),
                                                                              ("output", 32))]
    t += [TensorInfo("blk.0.ffn_norm.weight", (32,), "F32")]
    t += [TensorInfo(f"blk.0.ffn_{n}.weight", (32, 32), "Q8_0") for n in ("gate", "up", "down")]
    t += [TensorInfo("output_norm.weight", (32,), "F32"), TensorInfo("output.weight", (32, 32), "Q8_0")]
    return ModelWeights(a, tuple(t), "Q8_0", "test")


def test_quantised_products_run_as_mmq_or_dequantised_for_cublas() -> None:
    m = tiny_q8()
    mmq = predict(m, BOX, LlamaCppRun(ubatch=32), "pp", 32, RATES)
    cublas = predict(m, BOX, LlamaCppRun(ubatch=32, mmq=False), "pp", 32, RATES)
    # BOX's INT8 rate x gemm_frac_quant equals its FP16 rate x gemm_frac_float: the products cost the same;
    # cuBLAS first dequantises each weight to F16 (read its Q8_0 bytes, write 2 bytes) and its product reads
    # that 2-byte copy where MMQ reads the Q8_0 bytes, at 1000 x 0.5 B/s
    el, by = m.layer_elements[0], m.layer_bytes[0]
    q, f16 = by.attn + by.ffn, 2 * (el.attn + el.ffn)
    assert cublas.seconds["gpu"] - mmq.seconds["gpu"] == pytest.approx((q + f16 + f16 - q) / 500)
    no_int8 = Machine("volta", host_memory=1e6, host_bandwidth=1000, threads=2, gpu="g", gpu_memory=50600,
                      gpu_bandwidth=1000, gpu_flops=1e4, gpu_int8_ops=0, pcie_bandwidth=1000)
    # without INT8 tensor cores llama.cpp always dequantises
    assert predict(m, no_int8, LlamaCppRun(ubatch=32), "pp", 32, RATES).seconds == pytest.approx(cublas.seconds)
    # F16/F32 weights go to cuBLAS as they are: the flag changes nothing
    assert (predict(tiny(), BOX, LlamaCppRun(ngl=1, ubatch=32, mmq=False), "pp", 64, RATES).seconds
            == predict(tiny(), BOX, LlamaCppRun(ngl=1, ubatch=32), "pp", 64, RATES).seconds)


def test_quantised_products_stream_the_weights_once_per_block_of_columns(monkeypatch) -> None:
    """A micro-batch of 300 rows reads Q8_0 weights three times under CUDA (128 columns a block),
    ten times under Metal (32); a dequantised product (cuBLAS) reads them once."""
    import importlib

    from hetsim.costmodel.llamacpp.predict import weight_passes

    predict_module = importlib.import_module("hetsim.costmodel.llamacpp.predict")

    assert [weight_passes(dataclasses.replace(BOX, backend=b), 300) for b in ("cuda", "metal")] == [3, 10]
    assert weight_passes(BOX, 1) == 1
    m = tiny_q8()
    by = m.layer_bytes[0]
    three = predict(m, BOX, LlamaCppRun(ubatch=300), "pp", 300, RATES).seconds["gpu"]
    cublas = predict(m, BOX, LlamaCppRun(ubatch=300, mmq=False), "pp", 300, RATES).seconds["gpu"]
    monkeypatch.setitem(predict_module.COLUMN_TILE, "cuda", 1000)
    once = predict(m, BOX, LlamaCppRun(ubatch=300), "pp", 300, RATES).seconds["gpu"]
    # two more reads of the layer's weights at 1000 x 0.5 B/s
    assert three - once == pytest.approx(2 * (by.attn + by.ffn) / 500)
    assert predict(m, BOX, LlamaCppRun(ubatch=300, mmq=False), "pp", 300, RATES).seconds["gpu"] == pytest.approx(cublas)


def test_flash_attention_streams_the_cache_once_per_block_of_queries(monkeypatch) -> None:
    """Flash attention over 128 queries after 1,000 cached tokens reads the layer's F16 cache
    (mean 1,064 cells x 64 bytes) twice under CUDA (64 queries a block); without flash
    attention the scores cross memory instead."""
    import importlib

    from hetsim.costmodel.llamacpp.predict import attention_passes

    assert [attention_passes(dataclasses.replace(BOX, backend=b), 128) for b in ("cuda", "metal")] == [2, 16]
    predict_module = importlib.import_module("hetsim.costmodel.llamacpp.predict")
    m = tiny_q8()
    run = LlamaCppRun(ubatch=128, flash_attn=True, depth=1000)
    twice = predict(m, BOX, run, "pp", 128, RATES).seconds["gpu"]
    monkeypatch.setitem(predict_module.ATTENTION_TILE, "cuda", 1000)
    once = predict(m, BOX, run, "pp", 128, RATES).seconds["gpu"]
    assert m.arch.kv_bytes(0, 1064) == 1064 * 64
    assert twice - once == pytest.approx(1064 * 64 / 500)


def test_suggested_placement_is_the_largest_that_fits() -> None:
    # GPU memory at context 10: -ngl 2 needs 50528 bytes, -ngl 3 (output too) 50800; the box has 50600
    runs = fitting_runs(tiny(), BOX, context=10, reserve=0)
    assert [r.ngl for r in runs] == [2]
    best = suggest_run(tiny(), BOX, context=10, rates=RATES, reserve=0)
    assert best.flags() == "-ngl 2" and best.fits and best.placement.memory["gpu"] == 50528
    # beyond the trained maximum (64) llama.cpp runs with rope scaling: planned as any context
    roomy = dataclasses.replace(BOX, gpu_memory=1e7)
    assert suggest_run(tiny(), roomy, context=100, rates=RATES, reserve=0).placement.ngl == 3
    tight = Machine("tight", host_memory=1e6, host_bandwidth=1000, threads=2, gpu="g", gpu_memory=1000,
                    gpu_bandwidth=1000, gpu_flops=1e4, gpu_int8_ops=2e4, pcie_bandwidth=1000)
    with pytest.raises(SchedulerError, match=r"'t' fits no placement on 'tight': with -ngl 0 the GPU needs"):
        fitting_runs(tiny(), tight, context=10, reserve=0)


def test_machine_figures_and_missing_ones() -> None:
    m = machine_from_flags("GeForce RTX 4090", ram_gb=64, ram_bw="90GB/s", threads=16)
    # the table's FP16 tensor figure is with FP32 accumulation; GeForce runs FP16 accumulation at twice it
    assert (m.gpu, m.gpu_bandwidth, m.gpu_flops, m.gpu_int8_ops) == ("RTX 4090", 1008e9, 330.3e12, 660.6e12)
    assert machine_from_flags("RTX 3090 Ti", ram_gb=64, ram_bw=90, threads=16).gpu_flops == 160e12  # GeForce too
    # a memory size in the name picks that card where the table has two; otherwise it is ignored
    assert find_gpu("A100 80GB")["name"] == "A100 80GB" and find_gpu("A100 40GB")["name"] == "A100 40GB"
    assert find_gpu("Tesla V100-PCIE-16GB")["name"] == "V100 PCIe 16GB" and find_gpu("RTX 3090 24GB")["name"] == "RTX 3090"
    assert machine_from_flags("L4", ram_gb=64, ram_bw=90, threads=16).gpu_flops == pytest.approx(121e12)
    assert m.pcie_bandwidth == pytest.approx(16 * 1.969e9) and m.gpu_memory == 24 * 2**30
    with pytest.raises(SchedulerError, match=r"the machine needs --ram-bw"):
        machine_from_flags("RTX 4090", ram_gb=64, ram_bw=None, threads=16)
    with pytest.raises(SchedulerError, match=r"GPU 'RTX 9999' has no cited figures; known: "):
        machine_from_flags("RTX 9999", ram_gb=64, ram_bw=90, threads=16)
    unknown_host = Machine("x", host_memory=0, host_bandwidth=0, threads=0, gpu="g", gpu_memory=1e9,
                           gpu_bandwidth=1e9, gpu_flops=1e12, gpu_int8_ops=1e12, pcie_bandwidth=1e9)
    with pytest.raises(CostModelError, match=r"host memory bandwidth or threads not known .* --ram-bw"):
        predict(tiny(), unknown_host, LlamaCppRun(ngl=1), "tg", 4, RATES)
    platform = machine_from_platform("desktop-rtx4090")
    assert (platform.threads, platform.host_bandwidth, platform.pcie_bandwidth) == (16, 7.5e10, 2.5e10)
    assert machine_from_platform("t4-server").gpu_int8_ops == 130e12  # "Tesla T4" in its description
    # a platform whose GPU states its tensor rates is a machine with them, whatever its description says
    h100 = machine_from_platform("h100-server")
    assert h100.gpu_flops > 0 and h100.backend == "cuda"


def test_cli_plans_a_gguf_file(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    a = architecture_from_hf(TINY_CONFIGS["qwen3"], name="tiny-qwen3")
    gg = write_gguf(tmp_path / "tiny.gguf", a, recipe_tensors(a, "Q4_K_M"))
    rc = main(["llm", "plan", str(gg), "--gpu", "RTX 4090", "--ram-gb", "64", "--ram-bw", "90GB/s",
               "--threads", "16", "--ngl", "50"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "| model" in out and "pp512" in out and "tg128" in out
    assert "given: -ngl 3" in out and "note: -ngl 50 clamped to 3 (the model has 2 layers and an output layer)" in out
    data = json.loads((tmp_path / "out" / "llm-plan.json").read_text())
    assert data["flags"] == "-ngl 3" and data["weights"] == "Q4_K_M" and data["fits"]
    # the build's flags: dequantising for cuBLAS slows prompt processing, eager launches generation
    rc = main(["llm", "plan", str(gg), "--gpu", "RTX 4090", "--ram-gb", "64", "--ram-bw", "90GB/s",
               "--threads", "16", "--ngl", "3", "--force-cublas", "--no-cuda-graphs", "--out", "out/old.json"])
    old = json.loads((tmp_path / "out" / "old.json").read_text())
    assert rc == 0 and old["flags"] == "-ngl 3"
    assert old["pp"]["tokens_per_s"] < data["pp"]["tokens_per_s"] and old["tg"]["tokens_per_s"] < data["tg"]["tokens_per_s"]
    assert data["gpu_memory_bytes"] == [data["memory_bytes"]["gpu"]]  # one GPU: its bytes
    rc = main(["llm", "plan", str(gg), "--ram-gb", "64", "--ram-bw", "90GB/s", "--threads", "16", "--ngl", "10"])
    out = capsys.readouterr().out
    assert rc == 0 and "| CPU     |   0 |        pp512 |" in out and "note: no GPU: -ngl 10 puts nothing on a GPU" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["llama-3-70b", "--gpu", "RTX 4090", "--ram-gb", "128", "--ram-bw", "90", "--threads", "16", "--ngl", "70"],
         "-ngl 70 does not fit: gpu needs"),
        (["llama-3-8b", "--gpu", "RTX 4090", "--ram-gb", "64", "--threads", "16"], "the machine needs --ram-bw"),
        (["llama-3-8b", "--platform", "this"], "run hetsim llm calibrate first"),
        (["llama-3-8b", "--platform", "desktop-rtx4090", "--gpus", "2"], "--gpus describes the GPUs of --gpu"),
        (["llama-2-7b", "--platform", "desktop-rtx4090", "--context", "0"], "--context must be an int >= 2, got 0"),
        (["llama-2-7b", "--platform", "desktop-rtx4090", "--prompt", "0"], "--prompt must be an int >= 1, got 0"),
        (["llama-9b", "--platform", "desktop-rtx4090"], "unknown model 'llama-9b'; known: codellama-7b"),
        (["llama-3-8b", "--gpu", "RTX 4090", "--gpu-mem-gb", "0", "--ram-gb", "64", "--ram-bw", "90",
          "--threads", "16"], "--gpu-mem-gb must be a positive number, got 0"),
        (["llama-3-8b", "--gpu", "RTX 4090", "--gpu-bw", "0", "--ram-gb", "64", "--ram-bw", "90",
          "--threads", "16"], "--gpu-bw must be a positive rate, got '0'"),
        (["llama-3-8b", "--gpu", "RTX 4090", "--gpu-tflops", "0", "--ram-gb", "64", "--ram-bw", "90",
          "--threads", "16"], "--gpu-tflops must be a positive number, got 0"),
        (["llama-3-8b", "--platform", "desktop-rtx4090", "--weights", "Q9"], "unknown llama.cpp weight type 'Q9'"),
        (["llama-3-8b"], "describe the machine: --platform this|NAME|FILE, or --gpu NAME"),
    ],
)
def test_cli_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch, args: list[str], message: str) -> None:
    monkeypatch.chdir(tmp_path)
    rc = main(["llm", "plan", *args])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and err.startswith("hetsim llm: error: ")
    assert message in err
    assert not (tmp_path / "out" / "llm-plan.json").exists()


class _FakeTensor:
    def copy_(self, src: object, non_blocking: bool = False) -> _FakeTensor:
        return self

    def __matmul__(self, other: object) -> _FakeTensor:
        return self


class _FakeEvent:
    def __init__(self, enable_timing: bool = False) -> None:
        pass

    def record(self) -> None:
        pass

    def elapsed_time(self, end: _FakeEvent) -> float:
        return 2.0  # milliseconds


def fake_torch(gpus: int = 1) -> SimpleNamespace:
    cuda = SimpleNamespace(is_available=lambda: True, get_device_name=lambda i: "NVIDIA GeForce RTX 4090",
                           get_device_properties=lambda i: SimpleNamespace(total_memory=24 * 2**30),
                           Event=_FakeEvent, synchronize=lambda: None, device_count=lambda: gpus)
    return SimpleNamespace(cuda=cuda, uint8="uint8", float16="float16",
                           empty=lambda *a, **k: _FakeTensor(), empty_like=lambda t: _FakeTensor(),
                           ones=lambda *a, **k: _FakeTensor())


def test_calibrate_writes_a_platform_that_plans(tmp_path: Path) -> None:
    from hetsim.experiments.llm_calibrate import calibrate, platform_toml

    m = calibrate(mib=4, gpu_mib=1, torch_module=fake_torch())
    gpu = m["gpu"]
    # 2 ms per timed call: copy of 1 MiB read and written, 1 MiB over the link, a 4096^3 FP16 product
    assert (gpu["bandwidth"], gpu["link"], gpu["flops"]) == (2 * 2**20 / 0.002, 2**20 / 0.002, 2 * 4096**3 / 0.002)
    assert m["host_bandwidth"] > 0 and m["threads"] >= 1
    path = tmp_path / "this.toml"
    path.write_text(platform_toml(m))
    machine = machine_from_platform(path)
    assert machine.gpu_memory == 24 * 2**30 and machine.pcie_bandwidth == 2**20 / 0.002
    assert machine.gpu_int8_ops == 660.6e12 and machine.host_bandwidth == pytest.approx(m["host_bandwidth"], 1e-3)
    assert machine.gpu_count == 1
    # two GPUs like GPU 0: the platform lists both, and the machine splits the layers over them
    two = calibrate(mib=4, gpu_mib=1, torch_module=fake_torch(gpus=2))
    path.write_text(platform_toml(two))
    assert two["gpu"]["count"] == 2 and machine_from_platform(path).gpu_count == 2


def test_shipped_rates_are_fitted_and_say_what_the_fit_did_not_determine(tmp_path: Path) -> None:
    r = AchievedRates.load()
    assert r.fitted_on.startswith("experiments/llm_published (every row)")
    assert set(r.undetermined) <= set(AchievedRates.names())
    assert all(getattr(r, n) == 1.0 for n in r.undetermined if n.endswith("_frac"))
    # another backend's figure its rows do not determine is CUDA's; its HBM fraction its own GDDR
    # fraction times CUDA's ratio of the two
    vulkan = BackendRates.load().for_backend("vulkan")
    assert "hbm_bw_frac" in vulkan.undetermined
    assert all(getattr(vulkan, n) == getattr(r, n) for n in vulkan.undetermined
               if n not in ("hbm_bw_frac", "gddr7_bw_frac"))
    assert vulkan.hbm_bw_frac == pytest.approx(vulkan.gpu_bw_frac * r.hbm_bw_frac / r.gpu_bw_frac, rel=1e-3)
    bad = tmp_path / "rates.json"
    bad.write_text('{"gpu_bw_frac": 0.5}')
    with pytest.raises(CostModelError, match=r"rates\.json: not a llama.cpp rates file"):
        AchievedRates.load(bad)


def test_a_tied_head_is_copied_only_onto_the_gpu() -> None:
    a = architecture_from_hf(TINY_CONFIGS["qwen2"])  # tie_word_embeddings
    m = ModelWeights(a, recipe_tensors(a, "Q8_0"), "Q8_0", "test")
    embd = m.token_embd_bytes
    assert m.output_is_embedding and m.output_bytes == embd + 256 * 4  # + output_norm (F32)
    layers = sum(lb.total for lb in m.layer_bytes)
    on_host = place(m, LlamaCppRun(ngl=0), context=8)
    assert on_host.breakdown["host"]["weights"] == embd + layers + 256 * 4
    on_gpu = place(m, LlamaCppRun(ngl=3), context=8)
    assert on_gpu.breakdown["host"]["weights"] == embd and on_gpu.breakdown["gpu"]["weights"] == layers + embd + 1024


def test_a_context_beyond_the_trained_maximum_is_planned_with_a_note(capsys: pytest.CaptureFixture[str],
                                                                     tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["llm", "plan", "llama-2-7b", "--platform", "desktop-rtx4090", "--context", "8192"]) == 0
    assert "note: context 8192 is beyond 'llama-2-7b''s trained maximum of 4096: llama.cpp runs it with rope " \
           "scaling" in capsys.readouterr().out


def test_a_kv_cache_in_host_memory_puts_attention_on_the_cpu() -> None:
    # tg4 with every layer on the GPU and -nkvo: each layer hands over to the CPU and back (4 hand-overs beyond
    # the first), the KV cache is read at the host's bandwidth and its attention computed by the CPU threads
    on_gpu = predict(tiny(), BOX, LlamaCppRun(ngl=3), "tg", 4, RATES)
    nkvo = predict(tiny(), BOX, LlamaCppRun(ngl=3, kv_offload=False), "tg", 4, RATES)
    assert nkvo.seconds["switch"] - on_gpu.seconds["switch"] == pytest.approx(4 * 0.5)
    assert nkvo.seconds["host attention"] == pytest.approx(2 * 2 * 2 * 2 * (2 + 2) / (2 * 1000))
    assert nkvo.tokens_per_s < on_gpu.tokens_per_s


def test_decode_is_priced_at_the_depth_the_prompt_leaves() -> None:
    model = load_model("llama-3-8b")
    m = machine_from_flags("RTX 4090", ram_gb=64, ram_bw=90, threads=16)
    shallow = predict(model, m, LlamaCppRun(), "tg", 128, AchievedRates.load())
    deep = predict(model, m, LlamaCppRun(depth=8192), "tg", 128, AchievedRates.load())
    # 8192 more cached tokens: 8192 x 128 KiB of KV cache more per token, read at the GPU's achieved bandwidth
    extra = 8192 * model.arch.kv_bytes_per_token() / (m.gpu_bandwidth * AchievedRates.load().gpu_bw_frac)
    assert 1 / deep.tokens_per_s - 1 / shallow.tokens_per_s == pytest.approx(extra, rel=1e-6)
    assert deep.label == "tg128 @ d8192"
    # the planner's decode follows its prompt
    e = evaluate_run(model, m, LlamaCppRun(), context=8192, rates=AchievedRates.load(), prompt=4096)
    assert e.tg.depth == 4096 and e.tg.tokens_per_s < shallow.tokens_per_s


def test_a_front_end_adds_its_own_costs() -> None:
    rates = dataclasses.replace(RATES, server_request_s=0.25, server_token_s=0.125)
    bench_pp = predict(tiny(), BOX, LlamaCppRun(ngl=3), "pp", 16, rates)
    server_pp = predict(tiny(), BOX, LlamaCppRun(ngl=3, harness="llama-server"), "pp", 16, rates)
    assert sum(server_pp.seconds.values()) - sum(bench_pp.seconds.values()) == pytest.approx(0.25)
    server_tg = predict(tiny(), BOX, LlamaCppRun(ngl=3, harness="llama-server"), "tg", 4, rates)
    assert server_tg.seconds["front end"] == 0.125
    with pytest.raises(CostModelError, match=r"unknown harness 'curl'; known: llama-bench"):
        LlamaCppRun(harness="curl")


def test_each_backend_has_its_rates_and_apple_memory_is_one_pool() -> None:
    rates = BackendRates.load()
    assert set(rates.backends) == {"cuda", "vulkan", "rocm", "sycl", "metal", "cpu"}
    amd = machine_from_flags("RX 6800 XT", ram_gb=64, ram_bw=90, threads=16)
    assert amd.backend == "rocm" and amd.gpu_int8_ops == pytest.approx(4 * 20.74e12)  # v_dot4: 4 x FP32
    assert machine_from_flags("RX 6800 XT", ram_gb=64, ram_bw=90, threads=16, backend="vulkan").backend == "vulkan"
    m = load_model("llama-3-8b")
    rocm = predict(m, amd, LlamaCppRun(), "tg", 128, rates)
    vulkan = predict(m, dataclasses.replace(amd, backend="vulkan"), LlamaCppRun(), "tg", 128, rates)
    assert rocm.tokens_per_s != vulkan.tokens_per_s  # each backend's own achieved rates
    # an Apple GPU shares the host's memory: no PCIe link, and layers left on the host run on the CPU
    apple = machine_from_flags("Apple M1 Ultra 64-core GPU", ram_gb=128, ram_bw=800, threads=16)
    assert apple.backend == "metal" and apple.unified_memory and apple.pcie_bandwidth == 0
    assert apple.gpu_memory == pytest.approx(128e9)
    part = predict(m, apple, LlamaCppRun(ngl=16), "pp", 512, rates)
    assert part.seconds["pcie"] == 0 and part.seconds["host"] > 0
    with pytest.raises(CostModelError, match=r"no achieved rates for llama.cpp backend 'opencl'; fitted: cuda"):
        rates.for_backend("opencl")


def test_one_registry_gives_one_answer_for_either_spelling(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    outs = []
    for name in ("llama-3-70b", "llama3-70b"):
        assert main(["llm", "plan", name, "--platform", "desktop-rtx4090", "--out", f"{name}.json"]) == 0
        outs.append(json.loads((tmp_path / f"{name}.json").read_text()))
    assert outs[0]["flags"] == outs[1]["flags"] and outs[0]["tg"] == outs[1]["tg"]
    assert "engine llama.cpp" in capsys.readouterr().out
