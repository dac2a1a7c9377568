"""GPU cost models: features, calibrated roofline, own and cross-GPU models, cost model, eval."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hetsim.costmodel import CostModelError
from hetsim.costmodel.gpu.evaluate import (
    cv_predictions,
    format_gpu_eval,
    logo_predictions,
    split_predictions,
    summarize_gpu,
)
from hetsim.costmodel.gpu.features import design, gpu_ops
from hetsim.costmodel.gpu.model import (
    GPUBank,
    GPUCostModel,
    GPUData,
    device_spec,
    holdout,
    parse_fold,
    shape_fold,
)
from hetsim.costmodel.gpu.neusight import import_neusight
from hetsim.costmodel.gpu.roofline import fit_calibrated_roofline
from hetsim.graphs import Graph
from hetsim.graphs.features import features
from hetsim.sim import Platform

SAMPLE = Path(__file__).parent / "data" / "neusight-sample"
SMALL = {"n_estimators": 30, "max_depth": 4, "n_jobs": 1}


@pytest.fixture(scope="module")
def bank(tmp_path_factory: pytest.TempPathFactory) -> GPUBank:
    out = tmp_path_factory.mktemp("gpu")
    paths = import_neusight(SAMPLE, out / "profiles")
    return GPUBank.from_profiles(paths, params=SMALL, cache=out / "cache")


def _graph() -> Graph:
    g = Graph(name="mix")
    f32 = "float32"
    g.add_op("mm", "matmul", inputs=[([12, 128, 64], f32), ([12, 64, 128], f32)],
             outputs=[([12, 128, 128], f32)], flops=2.0 * 12 * 128 * 64 * 128)
    g.add_op("lin", "matmul", inputs=[([1, 197, 768], f32), ([768, 768], f32)], outputs=[([1, 197, 768], f32)],
             flops=2.0 * 197 * 768 * 768)
    g.add_op("c3", "conv2d", inputs=[([1, 64, 56, 56], f32), ([64, 64, 3, 3], f32)],
             outputs=[([1, 64, 56, 56], f32)], attrs={"strides": [1, 1], "padding": [1, 1, 1, 1], "groups": 1},
             flops=2.0 * 64 * 56 * 56 * 64 * 9)
    g.add_op("c1", "conv2d", inputs=[([1, 64, 56, 56], f32), ([256, 64, 1, 1], f32)],
             outputs=[([1, 256, 56, 56], f32)], attrs={"strides": [1, 1], "padding": [0, 0, 0, 0], "groups": 1},
             flops=2.0 * 256 * 56 * 56 * 64)
    g.add_op("sub", "subtract", inputs=[([4, 1024], f32), ([4, 1024], f32)], outputs=[([4, 1024], f32)],
             flops=4096)
    g.add_op("sm", "softmax", inputs=[([1, 12, 128, 128], f32)], outputs=[([1, 12, 128, 128], f32)],
             attrs={"axis": 3}, flops=4.0 * 12 * 128 * 128)
    g.add_op("pool", "max_pool2d", inputs=[([1, 64, 112, 112], f32)], outputs=[([1, 64, 56, 56], f32)],
             attrs={"pool_size": [3, 3], "strides": [2, 2]}, flops=9.0 * 64 * 56 * 56)
    g.add_op("view", "reshape", inputs=[([1, 64, 56, 56], f32)], outputs=[([64, 3136], f32)],
             attrs={"shape": [64, 3136]})
    return g


# ------------------------------------------------------------------ features
def test_canonical_dims_whatever_the_rank() -> None:
    ops = gpu_ops(features(_graph()))
    mm, lin, c3, c1 = (ops.loc[n] for n in ("mm", "lin", "c3", "c1"))
    assert (mm.family, mm.b, mm.m, mm.n, mm.k) == ("gemm", 12, 128, 128, 64)
    # a 3-D left operand against a 2-D weight is one GEMM over all the rows
    assert (lin.family, lin.b, lin.m, lin.n, lin.k) == ("gemm", 1, 197, 768, 768)
    assert (c3.family, c3.via, c3.m, c3.n, c3.k, c3.hout) == ("conv", "own", 56 * 56, 64, 64 * 9, 56)
    assert (c1.family, c1.via, c1.kind, c1.m, c1.n, c1.k) == ("gemm", "conv-as-gemm", "matmul", 3136, 256, 64)
    assert (ops.loc["sub", "family"], ops.loc["sub", "kind"], ops.loc["sub", "via"]) == ("elementwise", "add",
                                                                                          "proxy")
    assert bool(ops.loc["sub", "tensor_operand"])
    assert (ops.loc["sm", "rows"], ops.loc["sm", "cols"]) == (12 * 128, 128)
    assert ops.loc["pool", "family"] == "" and ops.loc["view", "family"] == ""


def test_design_adds_the_published_figures_for_the_cross_gpu_model() -> None:
    ops = gpu_ops(features(_graph()))
    spec = {"sm_count": 80, "clock_hz": 1.38e9, "peak_flops": 1.4e13, "mem_bandwidth_bytes_per_s": 9e11,
            "l2_bytes": 6 * 2**20, "tdp_w": 250.0}
    own, names = design(ops[ops.family == "gemm"], "gemm", spec)
    cross, cnames = design(ops[ops.family == "gemm"], "gemm", spec, with_spec=True)
    assert own.shape[0] == 3 and cnames[: len(names)] == names
    assert cross[0, cnames.index("log_sm_count")] == np.log2(80)
    # 12 GEMMs of 128x128 in 128x128 tiles on 80 SMs: 12/80 of a wave
    assert own[0, names.index("log_waves_128x128")] == pytest.approx(np.log2(12 / 80))


# ---------------------------------------------------------- calibrated roofline
def test_calibrated_roofline_recovers_floor_and_bandwidth_from_memory_bound_rows() -> None:
    g = Graph(name="e")
    for i, n in enumerate([1e3, 1e5, 1e6, 1e7, 3e7] * 3):
        g.add_op(f"r{i}", "relu", inputs=[([int(n)], "float32")], outputs=[([int(n)], "float32")], flops=n)
    g.add_op("mm", "matmul", inputs=[([512, 512], "float32"), ([512, 512], "float32")],
             outputs=[([512, 512], "float32")], flops=2.0 * 512**3)
    X = features(g)
    ops = gpu_ops(X)
    t = 3e-5 + X["bytes"].to_numpy(float) / 5e11
    t[-1] = 3e-5 + 2.0 * 512**3 / 1e13
    fit = fit_calibrated_roofline(ops.iloc[:-1], t[:-1], {"peak_flops": 2e13, "mem_bandwidth_bytes_per_s": 6e11})
    assert fit.floor_s == pytest.approx(3e-5, rel=1e-6)
    assert fit.bandwidth_bytes_per_s == pytest.approx(5e11, rel=1e-6)
    assert fit.flops_per_s == pytest.approx(1.4e13)  # no GEMM rows: 0.7 of the published peak
    assert fit.source == "element-wise rows"
    with pytest.raises(CostModelError, match="no element-wise rows"):
        fit_calibrated_roofline(ops.iloc[-1:], t[-1:], None)


def test_views_cost_nothing(bank: GPUBank) -> None:
    g = _graph()
    t, src = bank.predict(features(g), gpu="t4")
    i = list(g.nx).index("view")
    assert (t[i], src[i]) == (0.0, "view")


# ------------------------------------------------------------------- the bank
def test_sources_say_what_priced_each_op(bank: GPUBank) -> None:
    g = _graph()
    _, src = bank.predict(features(g), gpu="t4")
    got = dict(zip(g.nx, src))
    assert got == {"mm": "own:gemm", "lin": "own:gemm", "c3": "own:conv", "c1": "own:gemm+conv-as-gemm",
                   "sub": "own:elementwise+proxy", "pool": "calibrated-roofline", "view": "view",
                   # 25 softmax rows per GPU in the sample: fewer than a family model needs
                   "sm": "calibrated-roofline"}
    # the sample has no convolutions on the A100 40GB: the cross-GPU model prices them
    _, src = bank.predict(features(g), gpu="a100-40gb")
    assert dict(zip(g.nx, src))["c3"] == "cross-gpu:conv"


def test_own_model_reproduces_its_training_rows(bank: GPUBank) -> None:
    rows, ops, t = bank.gpus["v100"].load()
    on = (ops["family"] == "gemm").to_numpy()
    model = bank.own("v100", "gemm")
    pred = model.predict(ops[on], bank.spec("v100"), 0.0)
    ape = np.abs(pred - t[on]) / t[on]
    assert np.median(ape) < 0.1  # 30 trees on 150 rows: fits, and stays near its baseline
    assert model.n_rows == int(on.sum()) and model.mode == "own"


def test_models_are_cached_on_disk_and_reloaded(bank: GPUBank) -> None:
    first = bank.own("t4", "elementwise")
    again = GPUBank.from_profiles([bank.gpus[g].path for g in bank.gpus], params=SMALL, cache=bank.cache)
    loaded = again.own("t4", "elementwise")
    assert loaded is not first and again.own("t4", "norm") is None  # too few rows: cached as such
    X = bank.gpus["t4"].load()[1]
    X = X[X["family"] == "elementwise"]
    assert np.array_equal(first.predict(X, bank.spec("t4"), 0.0), loaded.predict(X, bank.spec("t4"), 0.0))
    assert len(list(bank.cache.glob("*.npz"))) >= 1


def test_h100_without_elementwise_rows_takes_a_bandwidth_fraction(bank: GPUBank) -> None:
    roof = bank.roofline("h100")
    assert roof.source.startswith("published x ")
    frac = bank.bandwidth_fraction(exclude="h100")
    assert roof.bandwidth_bytes_per_s == pytest.approx(bank.spec("h100")["mem_bandwidth_bytes_per_s"] * frac)


def test_the_bandwidth_fraction_is_cached_with_the_profiles_it_comes_from(bank: GPUBank) -> None:
    """A new bank on the same cache prices the H100 (no element-wise rows) without
    reading the other GPUs' profiles; a changed profile is not served the old value."""
    frac = bank.bandwidth_fraction(exclude="h100")
    fresh = [GPUData(g.name, g.spec, g.path, g.digest) for g in bank.gpus.values()]
    again = GPUBank(fresh, params=SMALL, cache=bank.cache)
    assert again.bandwidth_fraction(exclude="h100") == frac
    assert all(g._loaded is None for g in fresh)  # nothing read
    other = [GPUData(g.name, g.spec, g.path, "changed" if g.name == "t4" else g.digest) for g in fresh]
    changed = GPUBank(other, params=SMALL, cache=bank.cache)
    assert changed.bandwidth_fraction(exclude="h100") == pytest.approx(frac)
    assert next(g for g in other if g.name == "t4")._loaded is not None  # computed again, not served


def test_held_out_conv_shapes_are_stable() -> None:
    sigs = [f"conv2d|{{}}|{i}" for i in range(1000)]
    h = holdout(sigs)
    assert np.array_equal(h, holdout(sigs)) and 150 < h.sum() < 250


# ---------------------------------------------------------------- evaluation
def test_held_out_and_leave_one_gpu_out_tables(bank: GPUBank) -> None:
    pts = split_predictions(bank, ["t4"], ["gemm", "elementwise"])
    assert set(pts["protocol"]) == {"held-out shapes"} and set(pts["split"]) == {"test"}
    logo = logo_predictions(bank, ["v100"], ["gemm"])
    rows, ops, _ = bank.gpus["v100"].load()
    assert len(logo) == int((ops["family"] == "gemm").sum())
    summary = summarize_gpu(pd.concat([pts, logo]))
    all_t4 = summary.query("protocol == 'held-out shapes' and gpu == 't4' and family == 'ALL'").iloc[0]
    t4 = pts[pts.gpu == "t4"]["ape_pct"]
    assert all_t4["n"] == len(t4) and all_t4["mape_pct"] == pytest.approx(t4.mean())
    assert all_t4["p90_ape_pct"] == pytest.approx(t4.quantile(0.9))
    text = format_gpu_eval(summary)
    assert "leave one GPU out: MAPE % (median / p90), rows" in text and "v100" in text


def test_shape_cross_validation_predicts_each_test_row_once_from_the_other_folds(bank: GPUBank) -> None:
    pts = cv_predictions(bank, ["t4"], ["gemm"], folds=2)
    rows, ops, _ = bank.gpus["t4"].load()
    gemm = (ops["family"] == "gemm").to_numpy()
    test = (rows["split"] == "test").to_numpy()
    assert set(pts["protocol"]) == {"shape cross-validation"} and set(pts["split"]) == {"test"}
    assert sorted(pts["signature"]) == sorted(rows.loc[gemm & test, "signature"])  # each test row, once
    fold = shape_fold(rows["signature"], 2)
    for i in (0, 1):  # fold i's model was fitted on every gemm row of the other fold, both splits
        assert bank.own("t4", "gemm", subset=f"cv-{i}-of-2").n_rows == int((gemm & (fold != i)).sum())
    assert set(shape_fold(rows["signature"], 2)) == {0, 1}
    assert np.array_equal(holdout(rows["signature"]), shape_fold(rows["signature"], 5) == 0)
    with pytest.raises(CostModelError, match="folds >= 2, got 1"):
        cv_predictions(bank, ["t4"], ["gemm"], folds=1)
    assert parse_fold("cv-3-of-5") == (3, 5)
    for bad in ("cv-5-of-5", "cv-0-of-1", "cv-a-of-2", "test"):
        with pytest.raises(CostModelError, match=r"'all', 'train' or 'cv-I-of-K'"):
            parse_fold(bad)


def test_cli_gpu_eval_on_profile_folders(bank: GPUBank, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import hetsim.costmodel.gpu.model as gpu_model
    from hetsim.experiments.cli.main import main

    # the command's protocols, tables and files, not the forests' size: ten small trees
    # on a thousand rows per GPU (400 trees of depth 7 per fit take minutes on 2 cores)
    monkeypatch.setattr(gpu_model, "DEFAULT_PARAMS", {**gpu_model.DEFAULT_PARAMS, **SMALL, "n_estimators": 10,
                                                      "cross_rows_per_gpu": 1000})
    folders = [str(bank.gpus[g].path) for g in ("t4", "v100", "a100-40gb")]
    assert main(["costmodel", "eval", *folders, "--protocols", "held-out,cv", "--families", "gemm",
                 "--folds", "2", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "held-out shapes: MAPE % (median / p90), rows" in out
    assert "shape cross-validation: MAPE % (median / p90), rows" in out
    summary = pd.read_csv(tmp_path / "gpu_eval.csv")
    assert set(summary["protocol"]) == {"held-out shapes", "shape cross-validation"}
    assert set(summary["family"]) == {"gemm", "ALL"} and (tmp_path / "gpu_eval.png").is_file()
    assert main(["costmodel", "eval", *folders, "--protocols", "cv,bogus"]) == 2
    assert "--protocols must be a subset of held-out,cv,logo" in capsys.readouterr().err


def test_cli_refuses_logo_on_two_gpus_before_fitting_anything(
        bank: GPUBank, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import hetsim.costmodel.gpu.evaluate as gpu_eval
    from hetsim.experiments.cli.main import main

    def not_reached(*_: object, **__: object) -> None:
        raise AssertionError("held-out shapes ran before the leave-one-GPU-out check")

    monkeypatch.setattr(gpu_eval, "split_predictions", not_reached)
    folders = [str(bank.gpus[g].path) for g in ("t4", "v100")]
    assert main(["costmodel", "eval", *folders, "--protocols", "held-out,logo"]) == 2
    assert "leave one GPU out needs at least 3 GPU profiles, got ['t4', 'v100']" in capsys.readouterr().err


# ---------------------------------------------------------------- cost model
def test_op_time_is_the_call_less_the_floor_plus_the_launch(bank: GPUBank) -> None:
    g = _graph()
    p = Platform.preset("v100-server")
    gpu = dataclasses.replace(p.device("gpu"), launch_overhead_s=7e-6)
    cost = GPUCostModel(bank, "v100")
    calls, _ = bank.predict(features(g), gpu="v100")
    floor = bank.floor("v100")
    i = list(g.nx).index("mm")
    assert cost.op_time(g, "mm", gpu) == pytest.approx(max(calls[i] - floor, 0.0) + 7e-6)
    assert cost.op_time(g, "view", gpu) == 0.0 and cost.dispatch_time(g, "view", gpu) == 0.0
    assert cost.dispatch_time(g, "mm", gpu) == gpu.dispatch_s
    assert cost.sources(g, gpu)["c3"] == "own:conv"
    with pytest.raises(CostModelError, match="prices GPUs only, not cpu device 'cpu'"):
        cost.op_time(g, "mm", p.device("cpu"))


def test_cross_gpu_prices_a_gpu_from_its_published_figures(bank: GPUBank) -> None:
    g = _graph()
    p = Platform.preset("xeon-p2200")
    cost = GPUCostModel(bank, None)
    assert cost.op_time(g, "mm", p.device("gpu")) > 0
    assert set(cost.sources(g, p.device("gpu"))) >= {"cross-gpu:gemm", "cross-gpu:conv", "view"}
    bare = dataclasses.replace(p.device("gpu"), sm_count=None, l2_bytes=None)
    with pytest.raises(CostModelError, match=r"GPU 'gpu' has no 'sm_count', 'l2_bytes'"):
        device_spec(bare)
    with pytest.raises(CostModelError, match="GPU 'gpu' has no 'sm_count'"):
        GPUCostModel(bank, None).op_time(g, "mm", bare)


# ------------------------------------------------------- published latencies
def test_the_published_latencies_name_a_preset_for_every_gpu() -> None:
    from hetsim.costmodel.gpu.published import published_latencies

    table = published_latencies()
    assert len(table) == 27 and set(table["model"]) == {"bert_large", "gpt2_large"}
    assert set(table["gpu"]) == {"p4", "p100", "t4", "v100", "a100-40gb", "l4", "h100"}
    assert all(p in Platform.presets() for p in set(table["preset"]))
    h100 = table[(table["gpu"] == "h100") & (table["model"] == "bert_large") & (table["batch"] == 8)].iloc[0]
    assert (h100["seq_len"], h100["layers"], h100["latency_s"]) == (512, 24, 0.069842259)


def test_a_published_model_is_priced_as_one_layer_plus_the_others_at_the_second_layers_cost(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import functools

    from hetsim.costmodel import Roofline
    from hetsim.costmodel.gpu import published
    from hetsim.costmodel.gpu.published import busy_time, predict_published

    # the two graphs predict_published imports are the ones checked here: imported once
    layer_graphs = functools.cache(published.layer_graphs)
    monkeypatch.setattr(published, "layer_graphs", layer_graphs)
    rows = pd.DataFrame([{"gpu": "h100", "preset": "h100-server", "model": "bert_large", "batch": 1,
                          "seq_len": 8, "layers": 4, "latency_s": 1e-3}])
    got = predict_published(("roofline",), rows=rows).iloc[0]
    g1, g2 = layer_graphs("bert_large", 1, 8)
    assert g2.number_of_nodes() > g1.number_of_nodes()
    gpu = Platform.preset("h100-server").device("gpu")
    t1, t2 = busy_time(g1, Roofline(), gpu), busy_time(g2, Roofline(), gpu)
    assert got["predicted_s"] == pytest.approx(t1 + 3 * (t2 - t1), rel=1e-12)
    assert got["error_pct"] == pytest.approx(100 * (got["predicted_s"] - 1e-3) / 1e-3)
    with pytest.raises(CostModelError, match="unknown published model 'bert_huge'"):
        layer_graphs("bert_huge", 1, 8)


def test_cli_published_protocol_says_when_no_gpu_has_published_latencies(tmp_path: Path, capsys) -> None:
    from hetsim.experiments.cli.gpu_eval import run_published

    run_published(["a100-80gb"], tmp_path)
    assert capsys.readouterr().out.startswith("published latencies: none for ['a100-80gb'] (published for ['a100-40gb'")
    assert not (tmp_path / "published.csv").exists()


def test_a_measured_zoo_kernel_sum_is_compared_with_the_presets_busy_time() -> None:
    from hetsim.costmodel import Roofline
    from hetsim.costmodel.gpu.published import ZOO_COLUMNS, busy_time, predict_zoo
    from hetsim.graphs import zoo

    rows = pd.DataFrame([{"model": "lstm", "batch": 1, "gpu": "h200", "preset": "h200-server", "kernel_s": 1e-3}])
    got = predict_zoo(rows, ("roofline",))
    assert list(got.columns) == ZOO_COLUMNS and len(got) == 1
    gpu = Platform.preset("h200-server").device("gpu")
    want = busy_time(zoo.load("lstm", batch=1, cache=True), Roofline(), gpu)
    assert got.loc[0, "predicted_s"] == want and got.loc[0, "error_pct"] == pytest.approx(100 * (want - 1e-3) / 1e-3)
