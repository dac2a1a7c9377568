"""Vidur's LLM layer kernels: conversion (on a sample under tests/data), reading, the
kernel rows they give, and the kernel model left one GPU out over several data sets."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hetsim.costmodel.base import CostModelError
from hetsim.costmodel.gpu.evaluate import KERNEL_LOGO, kernel_logo_predictions, kernel_logo_protocol
from hetsim.costmodel.gpu.kernel import KernelConstants
from hetsim.costmodel.gpu.kernel_fit import KernelSet
from hetsim.costmodel.gpu.vidur import (
    DATA,
    LAYER_COLUMNS,
    OPS,
    convert,
    read_vidur,
    vidur_gpus,
    vidur_kernels,
    vidur_sets,
)

SAMPLE = Path(__file__).parent / "data" / "vidur"
LLAMA = SAMPLE / "data" / "profiling" / "compute" / "a40" / "meta-llama" / "Llama-2-7b-hf" / "mlp.csv"


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("vidur")
    convert(SAMPLE, out)
    return out


def test_convert_keeps_the_medians_and_the_licence(converted: Path) -> None:
    raw = pd.read_csv(LLAMA)
    with gzip.open(converted / "a40.csv.gz", "rt") as fh:
        table = pd.read_csv(fh)
    assert list(table.columns) == [*LAYER_COLUMNS, *OPS]
    llama = table[table["model"] == "meta-llama/Llama-2-7b-hf"].reset_index(drop=True)
    assert len(llama) == len(raw)
    np.testing.assert_allclose(llama["mlp_up_proj"], raw["time_stats.mlp_up_proj.median"], rtol=1e-5)
    phi = table[table["model"] == "microsoft/phi-2"]
    assert phi["post_attention_layernorm"].isna().all() and len(phi) > 0  # Phi-2 has no second norm
    assert "MIT License" in (converted / "LICENSE").read_text()
    assert "microsoft/vidur" in (converted / "NOTICE").read_text()


def test_kernel_rows_have_the_layer_shapes(converted: Path) -> None:
    table = read_vidur("a40", converted)
    rows, ops, t = vidur_kernels(table)
    assert len(rows) == len(ops) == len(t) and (t > 0).all()
    first = table.iloc[0]
    tokens, hidden = float(first["num_tokens"]), float(first["n_embd"])
    pre = ops[(rows["source_op"] == "vidur:attn_pre_proj").to_numpy()].iloc[0]
    assert (pre["m"], pre["k"], pre["n"]) == (tokens, hidden, 3 * hidden)  # q, k, v of 32 heads, one worker
    assert pre["flops"] == 2 * tokens * hidden * 3 * hidden
    up = ops[(rows["source_op"] == "vidur:mlp_up_proj").to_numpy()].iloc[0]
    assert up["n"] == 2 * float(first["n_expanded_embd"])  # gated: gate and up in one GEMM
    assert set(ops["family"]) == {"gemm", "norm", "elementwise"}
    # Phi-2's three-way add is two kernels: left out
    phi_adds = rows["signature"].str.startswith("microsoft/phi-2 add")
    assert not phi_adds.any() and rows["signature"].str.startswith("microsoft/phi-2").any()


def test_bad_tables_are_named_with_their_column(converted: Path, tmp_path: Path) -> None:
    table = pd.read_csv(converted / "a40.csv.gz")
    table.drop(columns=["mlp_act"]).to_csv(tmp_path / "a40.csv.gz", index=False)
    with pytest.raises(CostModelError, match=r"a40\.csv\.gz: no column 'mlp_act'"):
        read_vidur("a40", tmp_path)
    table.assign(num_tokens=-1).to_csv(tmp_path / "a40.csv.gz", index=False)
    with pytest.raises(CostModelError, match=r"column 'num_tokens' row 2: .* not a positive number"):
        read_vidur("a40", tmp_path)
    with pytest.raises(CostModelError, match=r"no Vidur table for GPU 'v100'"):
        read_vidur("v100", tmp_path)
    raw = pd.read_csv(LLAMA).drop(columns=["num_tokens"])
    src = tmp_path / "src" / "data" / "profiling" / "compute" / "a40" / "org" / "m"
    src.mkdir(parents=True)
    raw.to_csv(src / "mlp.csv", index=False)
    (tmp_path / "src" / "LICENSE").write_text("MIT")
    with pytest.raises(CostModelError, match=r"mlp\.csv: no column 'num_tokens'"):
        convert(tmp_path / "src", tmp_path / "out")
    with pytest.raises(CostModelError, match="not a Vidur checkout"):
        convert(tmp_path / "nowhere", tmp_path / "out")


def test_the_shipped_gpus_and_sets() -> None:
    gpus = vidur_gpus()
    assert {v: g.gpu for v, g in gpus.items()} == {"a100": "a100-80gb", "h100": "h100", "a40": "a40"}
    assert gpus["a100"].spec.sm_count == 108 and gpus["a40"].spec.sm_count == 84
    assert gpus["a40"].spec.mode_peak("fp16") > gpus["a40"].spec.peak_flops
    sets = vidur_sets()
    assert [s.gpu for s in sets] == ["a100-80gb", "h100", "a40"]
    assert all(len(s) > 10_000 and s.floor_s == 0.0 and (s.dtypes == "float16").all() for s in sets)
    assert (DATA / "LICENSE").is_file() and (DATA / "NOTICE").is_file()


def test_leave_one_gpu_out_names_each_data_set(converted: Path) -> None:
    rows, ops, t = vidur_kernels(read_vidur("a40", converted))
    spec = vidur_gpus()["a40"].spec
    dtypes = np.full(len(t), "float16", dtype=object)
    # three "GPUs" of the same spec sheet, one with its times in a second data set
    truth = KernelConstants(tensor_efficiency=0.5, launch_floor_s=3e-6)
    base = KernelSet("a", "g1", spec, rows, ops, t, dtypes)
    times = base.predict(truth)
    sets = [KernelSet("a", g, spec, rows, ops, times, dtypes) for g in ("g1", "g2")]
    sets.append(KernelSet("b", "g3", spec, rows, ops, times, dtypes))
    points = kernel_logo_predictions(sets, ["g1", "g3"])
    assert set(points["protocol"]) == {kernel_logo_protocol("a"), kernel_logo_protocol("b")}
    assert kernel_logo_protocol("b").startswith(KERNEL_LOGO)
    assert points.groupby("gpu")["ape_pct"].median().max() < 5.0  # the constants come back
    with pytest.raises(CostModelError, match=r"no measured kernels of GPU\(s\) \['g9'\]"):
        kernel_logo_predictions(sets, ["g9"])
    with pytest.raises(CostModelError, match="at least 3 GPUs"):
        kernel_logo_predictions(sets[:2])


@pytest.mark.slow  # prices and plots every Vidur kernel of three GPUs (about a minute)
def test_cli_kernel_logo_covers_the_profiles_and_vidur(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    import hetsim.costmodel.gpu.kernel_fit as kernel_fit
    from hetsim.costmodel.gpu.kernel import shipped_constants
    from hetsim.costmodel.gpu.neusight import import_neusight
    from hetsim.experiments.cli.main import main

    left_out = []

    def fit(sets: list[KernelSet], **_: object) -> KernelConstants:  # the fit itself: test_kernel_model
        left_out.append(sorted({s.gpu for s in sets}))
        return shipped_constants()

    monkeypatch.setattr(kernel_fit, "fit_constants", fit)
    folders = import_neusight(Path(__file__).parent / "data" / "neusight-sample", tmp_path / "profiles")
    assert main(["costmodel", "eval", *map(str, folders), "--protocols", "kernel-logo",
                 "--out", str(tmp_path / "out")]) == 0
    summary = pd.read_csv(tmp_path / "out" / "gpu_eval.csv")
    assert set(summary["protocol"]) == {kernel_logo_protocol("neusight"), kernel_logo_protocol("vidur")}
    gpus = set(summary["gpu"])
    assert {"a100-80gb", "h100", "a40"} <= gpus and len(left_out) == len(gpus)
    assert all(len(names) == len(gpus) - 1 for names in left_out)  # each fit leaves exactly one GPU out
    assert "leave one GPU out, kernel model, vidur" in capsys.readouterr().out
