"""benchmarks/llm_published.py against its committed results: the shipped rates predict what
results.csv says, every row is predicted or skipped with a reason, and the data set's files agree."""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

import pytest

from hetsim.costmodel.llamacpp import AchievedRates, predict

ROOT = Path(__file__).resolve().parents[1]
_SPEC = importlib.util.spec_from_file_location("llm_published", ROOT / "benchmarks" / "llm_published.py")
bench = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(bench)


def _csv(name: str) -> list[dict[str, str]]:
    with (bench.DATA / name).open() as fh:
        return list(csv.DictReader(fh))


def test_the_shipped_rates_predict_the_committed_results() -> None:
    results = {r["id"]: r for r in _csv("results.csv")}
    rates = AchievedRates.load()
    rows = bench.rows()
    assert set(results) == {r["id"] for r in rows}
    for row in rows:
        c = bench.case(row)
        committed = results[row["id"]]
        if isinstance(c, str):
            assert committed["skipped"] == c, row["id"]
            continue
        if committed["skipped"]:  # a case the model refuses (host figures the run needs)
            continue
        p = predict(*c, rates)
        assert p.tokens_per_s == pytest.approx(float(committed["predicted"]), abs=0.01), row["id"]


def test_the_data_set_files_agree() -> None:
    rows, sources = _csv("measurements.csv"), {s["source_id"] for s in _csv("sources.csv")}
    assert len({r["id"] for r in rows}) == len(rows)
    assert {r["source_id"] for r in rows} <= sources
    for r in rows:
        assert r["test"] in ("pp", "tg") and float(r["tokens_per_s"]) > 0, r["id"]
        if r["gpu"] and r["backend"] == "cuda":
            bench.find_gpu(r["gpu"])  # every CUDA row's GPU has cited figures
    folds = _csv("cross_validation.csv")
    predicted = {r["id"] for r in _csv("results.csv") if not r["skipped"]}
    assert {r["id"] for r in folds} == predicted  # every predicted row is cross-validated


def test_a_build_is_read_from_its_source_date() -> None:
    row = {"source_id": "llamacpp-pr4766", "gpu": "RTX 4090"}  # January 2024
    assert not bench.mmq(row) and not bench.cuda_graphs(row)
    assert bench.mmq({"source_id": "llamacpp-pr4766", "gpu": "Tesla P40"})  # no tensor cores: dp4a MMQ
    assert bench.mmq({"source_id": "llamacpp-pr24127", "gpu": "RTX 4090"})
    assert not bench.cuda_graphs({"source_id": "llamacpp-pr24127", "gpu": "RTX 2080 Ti"})  # Turing


def test_a_cited_gpu_without_a_figure_the_machine_needs_names_the_flag() -> None:
    """An integrated GPU (no PCIe figure, no memory of its own) gets a one-line error naming the flags to give."""
    from hetsim.schedulers import SchedulerError

    with pytest.raises(SchedulerError, match=r"'Radeon 8060S' for --pcie, --gpu-mem-gb"):
        bench.machine_from_flags("Radeon 8060S", ram_gb=128, ram_bw=256, threads=16)
    m = bench.machine_from_flags("Radeon 8060S", ram_gb=128, ram_bw=256, threads=16, pcie="4x16", gpu_mem_gb=96)
    assert m.gpu_bandwidth == 256e9  # the cited unified-memory bandwidth
