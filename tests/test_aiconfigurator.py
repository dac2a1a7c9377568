"""The AIConfigurator GPU tables: conversion (on a sample under tests/data) and the cost model."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from hetsim.costmodel import Roofline
from hetsim.costmodel.base import CostModelError
from hetsim.costmodel.gpu.aiconfigurator import DATA, GPUS, AIConfiguratorCostModel, convert
from hetsim.costmodel.platform import Platform
from hetsim.costmodel.spec import from_spec
from hetsim.graphs.llm import Architecture, llm_graph

SAMPLE = Path(__file__).parent / "data" / "aiconfigurator"


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("pyarrow")
    out = tmp_path_factory.mktemp("aic")
    convert(SAMPLE, out, gpus=["h100_sxm"])
    return out


@pytest.fixture(scope="module")
def model(converted: Path) -> AIConfiguratorCostModel:
    return AIConfiguratorCostModel("h100_sxm", data=converted / "h100_sxm")


def test_convert_keeps_bf16_rows_and_the_licence(converted: Path) -> None:
    import gzip

    import pandas as pd

    raw = pd.read_parquet(SAMPLE / "h100_sxm" / "gemm_perf.parquet")
    with gzip.open(converted / "h100_sxm" / "gemm.csv.gz", "rt") as fh:
        rows = fh.read().splitlines()
    assert rows[0] == "m,n,k,latency_ms" and len(rows) == 1 + 8  # 2 m x 2 n x 2 k, bf16 only
    want = raw[(raw.gemm_dtype == "bfloat16") & (raw.m == 16) & (raw.n == 8192) & (raw.k == 4096)].latency
    assert f"16,8192,4096,{float(want.median()):.6g}" in rows
    with gzip.open(converted / "h100_sxm" / "generation_attention.csv.gz", "rt") as fh:
        gen = fh.read().splitlines()
    assert gen[0] == "batch,tokens,heads,kv_heads,head_dim,latency_ms"
    assert {r.split(",")[1] for r in gen[1:]} == {"128", "1024"}  # isl 1 + step 127 / 1023
    notice = (converted / "NOTICE").read_text()
    assert "Apache" in notice and "Changed by hetsim" in notice
    assert (converted / "LICENSE").read_text() == (SAMPLE / "LICENSE").read_text()


def test_gemm_interpolates_in_log_space_and_scales_beyond_the_table(model: AIConfiguratorCostModel) -> None:
    t1, t16 = model.gemm_time(1, 4096, 4096), model.gemm_time(16, 4096, 4096)
    assert model.gemm_time(4, 4096, 4096) == pytest.approx(math.sqrt(t1 * t16), rel=1e-12)
    assert model.gemm_time(1, 16384, 4096) == pytest.approx(2 * model.gemm_time(1, 8192, 4096), rel=1e-12)
    assert model.gemm_time(0.2, 4096, 4096) == t1


def small_llm() -> Architecture:
    # head shape of Llama-3-8B (32 heads, 8 KV heads, 128 wide) in one small layer
    return Architecture("aic-test", "llama", layers=1, hidden=4096, heads=32, kv_heads=8, head_dim=0, ffn=128,
                        vocab=64, max_context=2048)


def test_llm_ops_on_the_gpu_come_from_the_tables(model: AIConfiguratorCostModel) -> None:
    g = llm_graph(small_llm(), kv_length=1024, weights="bf16")
    gpu = Platform.preset("h100-server-bf16").device("gpu")
    cpu = Platform.preset("h100-server-bf16").device("cpu")
    assert model.op_time(g, "blk.0.attn_q", gpu) == pytest.approx(model.gemm_time(1, 4096, 4096) + gpu.launch_overhead_s)
    attn = model.attention_time("decode", 1, 1024, 32, 8, 128)
    assert model.op_time(g, "blk.0.attn", gpu) == pytest.approx(attn + gpu.launch_overhead_s)
    assert model.op_time(g, "blk.0.attn_q", cpu) == Roofline().op_time(g, "blk.0.attn_q", cpu)
    assert model.op_time(g, "blk.0.rope", gpu) == Roofline().op_time(g, "blk.0.rope", gpu)
    pre = llm_graph(small_llm(), phase="prefill", tokens=128, context=1024, weights="bf16")
    assert model.op_time(pre, "blk.0.attn", gpu) == pytest.approx(
        model.attention_time("prefill", 1, 128, 32, 8, 128) + gpu.launch_overhead_s)


def test_quantised_weights_shrink_a_memory_bound_gemm(model: AIConfiguratorCostModel) -> None:
    gpu = Platform.preset("h100-server-bf16").device("gpu")
    g = llm_graph(small_llm(), kv_length=1024, weights="q4_0")
    act = 2.0 * (4096 + 4096)
    want = model.gemm_time(1, 4096, 4096) * (act + 0.5625 * 4096 * 4096) / (act + 2.0 * 4096 * 4096)
    assert model.op_time(g, "blk.0.attn_q", gpu) == pytest.approx(want + gpu.launch_overhead_s)


def test_unknown_head_shape_falls_back_to_the_roofline(model: AIConfiguratorCostModel) -> None:
    g = llm_graph("tiny", kv_length=16)
    gpu = Platform.preset("h100-server-bf16").device("gpu")
    assert model.op_time(g, "blk.0.attn", gpu) == Roofline().op_time(g, "blk.0.attn", gpu)


def test_shipped_tables_and_spec() -> None:
    assert (DATA / "LICENSE").is_file() and "Changed by hetsim" in (DATA / "NOTICE").read_text()
    assert sorted(p.name for p in DATA.iterdir() if p.is_dir()) == sorted(GPUS)
    m = from_spec("aiconfigurator-h100_sxm")
    assert isinstance(m, AIConfiguratorCostModel) and m.gpu == "h100_sxm"
    # one token through a 4096 x 4096 bf16 projection: 32 MiB of weights at ~2.2 TB/s
    assert 10e-6 < m.gemm_time(1, 4096, 4096) < 20e-6
    with pytest.raises(CostModelError, match="unknown AIConfigurator GPU 'b200'; known: h100_sxm"):
        AIConfiguratorCostModel("b200")


def test_a_table_in_an_unknown_format_is_named_with_its_column(tmp_path: Path) -> None:
    import gzip
    import shutil

    folder = tmp_path / "h100_sxm"
    shutil.copytree(DATA / "h100_sxm", folder)
    gemm = folder / "gemm.csv.gz"
    with gzip.open(gemm, "wt") as fh:
        fh.write("m,n,kk,latency_ms\n1,1,1,0.01\n")
    with pytest.raises(CostModelError, match=r"gemm.csv.gz: unknown table format: column 3 is 'kk', expected 'k'"):
        AIConfiguratorCostModel("h100_sxm", data=folder)
    with gzip.open(gemm, "wt") as fh:
        fh.write("m,n,k,latency_ms\n1,1,1,fast\n")
    with pytest.raises(CostModelError, match=r"gemm.csv.gz: row 2, column 'latency_ms': 'fast' is not a number"):
        AIConfiguratorCostModel("h100_sxm", data=folder)
    gemm.write_text("m,n,k,latency_ms\n")  # not gzip
    with pytest.raises(CostModelError, match=r"gemm.csv.gz: not a gzip CSV table"):
        AIConfiguratorCostModel("h100_sxm", data=folder)
