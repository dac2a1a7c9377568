"""benchmarks/llm_published.py against its committed results: the shipped rates predict what
results.csv says, every row is predicted or failed with a reason in both result files, the
fit's linearisation is the cost model, and the data set's files agree."""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from hetsim.costmodel.llamacpp import BackendRates, predict

ROOT = Path(__file__).resolve().parents[1]
_SPEC = importlib.util.spec_from_file_location("llm_published", ROOT / "benchmarks" / "llm_published.py")
bench = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(bench)


def _csv(name: str) -> list[dict[str, str]]:
    with (bench.DATA / name).open() as fh:
        return list(csv.DictReader(fh))


def test_the_shipped_rates_predict_the_committed_results() -> None:
    results = {r["id"]: r for r in _csv("results.csv")}
    rates = BackendRates.load()
    table, failed = bench.cases()
    assert set(results) == {r["id"] for r in bench.rows()}  # every row, none skipped
    for row, why in failed:
        assert results[row["id"]]["failed"] == why, row["id"]
    for row, c, _ in table:
        p = predict(*c, rates)
        assert p.tokens_per_s == pytest.approx(float(results[row["id"]]["predicted"]), abs=0.01), row["id"]


def test_every_row_is_cross_validated_or_failed_with_a_reason() -> None:
    folds = _csv("cross_validation.csv")
    assert {r["id"] for r in folds} == {r["id"] for r in bench.rows()}
    for r in folds:
        assert bool(r["failed"]) != bool(r["predicted"]), r["id"]


def test_every_external_run_is_predicted_without_its_source_or_failed() -> None:
    """external.csv holds runs that are not rows of the data set; each is predicted (or failed) in
    external_results.csv."""
    external = _csv("external_results.csv")
    assert {r["id"] for r in external} == {r["id"] for r in bench.rows("external.csv")}
    assert not {r["id"] for r in external} & {r["id"] for r in bench.rows()}
    for r in external:
        assert bool(r["failed"]) != bool(r["predicted"]), r["id"]
    assert bench.fold("xiongjiedai-gpu-bench", 5) == next(
        int(r["fold"]) for r in _csv("cross_validation.csv") if r["source_id"] == "xiongjiedai-gpu-bench")


def test_the_fit_s_linearisation_is_the_cost_model() -> None:
    table, _ = bench.cases()
    sample = table[:: max(1, len(table) // 40)]
    lin = bench.Linear(sample)
    for rates in (bench.START, BackendRates.load().for_backend("cuda")):
        assert np.allclose(lin.log_errors(rates), bench.evaluate(sample, rates), atol=1e-9)


def test_the_data_set_files_agree() -> None:
    rows, sources = _csv("measurements.csv"), {s["source_id"] for s in _csv("sources.csv")}
    assert len({r["id"] for r in rows}) == len(rows)
    assert {r["source_id"] for r in rows} <= sources
    for r in rows:
        assert r["test"] in ("pp", "tg") and float(r["tokens_per_s"]) > 0, r["id"]
        assert bench.backend(r) in bench.BACKENDS, r["id"]


def test_a_build_is_read_from_its_source_date() -> None:
    row = {"source_id": "llamacpp-pr4766", "gpu": "RTX 4090"}  # January 2024
    assert not bench.mmq(row) and not bench.cuda_graphs(row)
    assert bench.mmq({"source_id": "llamacpp-pr4766", "gpu": "Tesla P40"})  # no tensor cores: dp4a MMQ
    assert bench.mmq({"source_id": "llamacpp-pr24127", "gpu": "RTX 4090"})
    assert not bench.cuda_graphs({"source_id": "llamacpp-pr24127", "gpu": "RTX 2080 Ti"})  # Turing


def test_an_integrated_gpu_is_one_pool_and_a_rate_not_cited_is_not_known() -> None:
    """An integrated GPU (no PCIe figure, no memory of its own) shares the host's memory; a GPU
    without a cited compute rate decodes but its prompt processing names the flag to give."""
    from hetsim.costmodel.base import CostModelError
    from hetsim.costmodel.llamacpp import LlamaCppRun
    from hetsim.graphs.llm.model_source import load_model

    m = bench.machine_from_flags("Radeon 8060S", ram_gb=128, ram_bw=256, threads=16)
    assert m.unified_memory and m.gpu_memory == 128e9 and m.gpu_bandwidth == 256e9 and m.backend == "rocm"
    apple = bench.machine_from_flags("Apple M2 GPU (core count not stated)", ram_gb=24, ram_bw=100, threads=8)
    assert apple.backend == "metal" and apple.gpu_flops == 0
    model, rates = load_model("llama-2-7b", "Q4_0"), BackendRates.load()
    assert predict(model, apple, LlamaCppRun(), "tg", 128, rates).tokens_per_s > 0
    with pytest.raises(CostModelError, match=r"the GPU's compute rate is not known .*\(give --gpu-tflops\)"):
        predict(model, apple, LlamaCppRun(), "pp", 512, rates)
    # an integrated GPU without a cited bandwidth, on a host whose memory the row does not state: not known
    iris = next(r for r in bench.rows() if r["id"] == "pr5301-i7-1165g7-irisxe-7.24b-q4_k_m-vulkan-tg128")
    assert bench.case(iris) == ("the memory bandwidth of 'Iris Xe Graphics G7 96EU' is not known (it shares the "
                                "host's memory, which the row does not state)")


def test_metal_before_partial_offload_runs_every_layer_on_the_gpu() -> None:
    """A 2023 Metal row's ``-ngl 1`` is the whole model on the GPU; a 2024 row's is one layer."""
    old = next(r for r in bench.rows() if r["id"] == "pr2917-m2ultra-l7b-q4_0-tg128")
    assert old["ngl"] == "1" and bench.date(old) < bench.METAL_PARTIAL_OFFLOAD
    model, machine, run, _, tokens = bench.case(old)
    pl = bench.place(model, run, tokens, gpus=1)
    assert pl.gpu_layers == model.arch.layers and pl.output_device == "gpu"
    later = dict(old, source_id="llamacpp-pr5021")  # April 2024
    assert bench.case(later)[2].ngl == 1


def test_a_model_named_by_its_printed_shape_is_its_preset() -> None:
    """``llama 7B`` of 7.24 B parameters is Mistral 7B's shape, ``qwen2 14B`` of 14.77 B Qwen2.5-14B's:
    the presets' parameter counts are the ones the rows print."""
    from hetsim.graphs.llm.model_source import load_model

    for row in bench.rows():
        if row["model"] in ("llama-7.24b", "qwen2-14b"):
            model = load_model(bench.MODEL_ALIASES[row["model"]], row["quant"])
            assert model.parameters() / 1e9 == pytest.approx(float(row["params_b"]), abs=0.01), row["id"]
            assert model.arch.layers == int(row["n_layers"]), row["id"]


def test_a_gpu_with_hbm_draws_its_own_fraction_of_its_bandwidth() -> None:
    """A100 and MI50 (HBM) decode at ``hbm_bw_frac`` of their bandwidth, an RTX 4090 (GDDR6X) at
    ``gpu_bw_frac``; a rates file without ``hbm_bw_frac`` (0) gives every GPU ``gpu_bw_frac``."""
    from dataclasses import replace

    from hetsim.costmodel.llamacpp import LlamaCppRun
    from hetsim.graphs.llm.model_source import load_model

    a100 = bench.machine_from_flags("A100 80GB", ram_gb=256, ram_bw=200, threads=32)
    mi50 = bench.machine_from_flags("Radeon Instinct MI50", ram_gb=64, ram_bw=50, threads=16)
    rtx = bench.machine_from_flags("RTX 4090", ram_gb=64, ram_bw=90, threads=16)
    assert a100.gpu_hbm and mi50.gpu_hbm and not rtx.gpu_hbm
    rates = BackendRates.load().for_backend("cuda")
    assert 0 < rates.hbm_bw_frac < rates.gpu_bw_frac  # the fit on the published rows
    model, run = load_model("llama-2-7b", "Q4_0"), LlamaCppRun()
    slow = predict(model, a100, run, "tg", 128, rates).seconds["gpu"]
    same = predict(model, a100, run, "tg", 128, replace(rates, hbm_bw_frac=0.0)).seconds["gpu"]
    gap = model.file_bytes / a100.gpu_bandwidth * (1 / rates.hbm_bw_frac - 1 / rates.gpu_bw_frac)
    assert slow - same == pytest.approx(gap, rel=0.05)
    assert predict(model, rtx, run, "tg", 128, replace(rates, hbm_bw_frac=0.1)).tokens_per_s == pytest.approx(
        predict(model, rtx, run, "tg", 128, rates).tokens_per_s)
    # GDDR7 (Blackwell GeForce cards) has a fraction of its own too, the others' where not fitted
    rtx5090 = bench.machine_from_flags("RTX 5090", ram_gb=64, ram_bw=90, threads=16)
    assert rtx5090.gpu_memory_type == "GDDR7" and rtx.gpu_memory_type == "GDDR6X"
    assert rates.gpu_bandwidth_fraction("GDDR7") == (rates.gddr7_bw_frac or rates.gpu_bw_frac)
    assert replace(rates, gddr7_bw_frac=0.0).gpu_bandwidth_fraction("GDDR7") == rates.gpu_bw_frac
    fast = predict(model, rtx5090, run, "tg", 128, replace(rates, gddr7_bw_frac=0.9)).seconds["gpu"]
    slow = predict(model, rtx5090, run, "tg", 128, replace(rates, gddr7_bw_frac=0.45)).seconds["gpu"]
    assert slow - fast == pytest.approx(model.file_bytes / rtx5090.gpu_bandwidth * (1 / 0.45 - 1 / 0.9), rel=0.05)


def test_every_assumed_value_is_the_row_s_value() -> None:
    """A value a source leaves unstated is filled in and recorded as ``field=value: why`` in ``assumed``."""
    assumed = [r for r in _csv("measurements.csv") if r["assumed"]]
    assert assumed
    for r in assumed:
        for entry in r["assumed"].split("; "):
            field, _, rest = entry.partition("=")
            value, sep, why = rest.partition(": ")
            assert field in r and sep and why, (r["id"], entry)
            assert r[field].startswith(value), (r["id"], field)
