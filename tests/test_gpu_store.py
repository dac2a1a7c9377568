"""Fitted GPU models: the tree arrays, the store, the models shipped for the built-in GPUs."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import numpy as np
import pytest

from hetsim.costmodel import CostModelError
from hetsim.costmodel.gpu.model import GPUBank, GPUCostModel
from hetsim.costmodel.gpu.store import SHIPPED, ModelStore, store_key
from hetsim.costmodel.gpu.trees import TreeEnsemble, fit_trees
from hetsim.graphs import Graph
from hetsim.graphs.private_cache import CacheWarning
from hetsim.sim import Platform


def _data(n: int = 2000, cols: int = 6) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(n, cols)) * 4
    y = np.sin(X[:, 0]) + 0.3 * X[:, 1] ** 2 - X[:, 2]
    X[::7, 3] = np.nan  # missing values take each node's default way
    return X, y


def test_tree_arrays_predict_what_xgboost_predicts_bit_for_bit() -> None:
    import xgboost

    X, y = _data()
    booster = xgboost.train({"max_depth": 6, "eta": 0.2, "tree_method": "hist", "seed": 0},
                            xgboost.DMatrix(X, label=y), num_boost_round=40)
    trees = TreeEnsemble.from_booster(booster)
    want = booster.predict(xgboost.DMatrix(X)).astype(np.float64)
    assert np.array_equal(trees.predict(X), want)
    again = TreeEnsemble.from_bytes(trees.to_bytes())
    assert np.array_equal(again.predict(X), want) and again.n_trees == 40


def test_fit_trees_fits_and_refuses_a_wrong_input_width() -> None:
    X, y = _data(600)
    trees = fit_trees(X, y, {"n_estimators": 30, "max_depth": 4, "learning_rate": 0.3, "subsample": 1.0,
                             "colsample_bytree": 1.0, "min_child_weight": 1.0, "seed": 0, "n_jobs": 1}, "test fit")
    assert np.corrcoef(trees.predict(X), y)[0, 1] > 0.9
    with pytest.raises(CostModelError, match="expects 6 input columns"):
        trees.predict(X[:, :5])


def test_a_damaged_trees_file_is_named_and_a_store_passes_over_it(tmp_path: Path) -> None:
    with pytest.raises(CostModelError, match="broken.npz: not a tree ensemble"):
        TreeEnsemble.from_bytes(b"not a zip", where="broken.npz")
    X, y = _data(300)
    trees = fit_trees(X, y, {"n_estimators": 5, "max_depth": 3, "learning_rate": 0.3, "subsample": 1.0,
                             "colsample_bytree": 1.0, "min_child_weight": 1.0, "seed": 0, "n_jobs": 1}, "t")
    first, second = tmp_path / "a", tmp_path / "b"
    ModelStore([first], first).put("k", {"what": "one"}, trees)
    ModelStore([second], second).put("k", {"what": "two"}, trees)
    (first / "k.npz").write_bytes(b"damaged")  # its SHA-1 no longer matches: the next folder answers
    meta, got = ModelStore([first, second], None).get("k")
    assert meta["what"] == "two" and np.array_equal(got.predict(X), trees.predict(X))
    assert ModelStore([first], None).get("k") is None
    assert store_key({"a": 1}) == store_key({"a": 1}) != store_key({"a": 2})


def test_the_fitted_model_cache_is_private_and_one_others_may_write_is_not_used(tmp_path: Path) -> None:
    mine, shared = tmp_path / "mine", tmp_path / "shared"
    ModelStore([mine], mine).put("k", {"what": "mine"})
    assert stat.S_IMODE(mine.stat().st_mode) == 0o700  # created private
    assert ModelStore([mine], mine).get("k")[0]["what"] == "mine"
    shared.mkdir(mode=0o700)
    ModelStore([shared], shared).put("k", {"what": "theirs?"})
    shared.chmod(0o777)  # opened to every user after it was written: neither read nor written
    with pytest.warns(CacheWarning, match=r"GPU model cache .*shared may be written by other users \(mode 0777\)"):
        assert ModelStore([shared], shared).get("k") is None
    with pytest.warns(CacheWarning, match="GPU model cache"):
        ModelStore([shared], shared).put("j", {"what": "mine"})
    assert not (shared / "j.json").exists()


def test_the_shipped_models_are_the_built_in_banks_and_nothing_else() -> None:
    """Everything the built-in GPUs price with is shipped (re-run ``costmodel.gpu.store.ship()``
    when a built-in profile, the features or the default parameters change)."""
    keys = GPUBank.builtin(cache=False).model_keys()
    missing = [k for k in keys if not (SHIPPED / f"{k}.json").is_file()]
    assert not missing, f"{len(missing)} of {len(keys)} models not shipped: run costmodel.gpu.store.ship()"
    shipped = {p.stem for p in SHIPPED.glob("*.json")}
    assert shipped == set(keys)
    for k in keys:
        meta = json.loads((SHIPPED / f"{k}.json").read_text())
        assert ("trees_sha1" in meta) == (SHIPPED / f"{k}.npz").is_file()


def test_a_built_in_gpu_is_priced_without_fitting_or_reading_a_profile() -> None:
    bank = GPUBank.builtin(cache=False)
    g = Graph(name="two")
    g.add_op("mm", "matmul", inputs=[([256, 512], "float32"), ([512, 512], "float32")],
             outputs=[([256, 512], "float32")], flops=2.0 * 256 * 512 * 512)
    g.add_op("c", "conv2d", inputs=[([1, 64, 56, 56], "float32"), ([64, 64, 3, 3], "float32")],
             outputs=[([1, 64, 56, 56], "float32")], attrs={"strides": [1, 1], "padding": [1, 1, 1, 1], "groups": 1},
             flops=2.0 * 64 * 56 * 56 * 64 * 9)
    gpu = Platform.preset("h100-server").device("gpu")
    model = GPUCostModel(bank, "h100")
    times = [model.op_time(g, n, gpu) for n in ("mm", "c")]
    assert all(t > gpu.launch_overhead_s for t in times)
    assert list(model.sources(g, gpu)) == ["own:gemm", "cross-gpu:conv"]
    assert not any(d.loaded for d in bank.gpus.values())  # no profile read, nothing fitted
