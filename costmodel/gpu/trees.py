"""A fitted XGBoost tree ensemble as plain arrays: what the GPU models predict with.

The GPU models (:mod:`costmodel.gpu.model`) are boosted regression trees that XGBoost
fits. Only what prediction needs is kept of each fitted booster: per node its split
feature, its threshold (a leaf: its value), its children and where a missing value
goes; the whole ensemble is six arrays, about a seventh of XGBoost's own model
file once compressed, and prediction is a few hundred NumPy operations, without
importing XGBoost. :meth:`TreeEnsemble.predict` gives XGBoost's own predictions bit
for bit: features compared as float32 (``x < threshold`` goes left, a NaN the
node's default way), leaf values summed in float32 in tree order from the base score.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from hetsim.costmodel.base import CostModelError

__all__ = ["TreeEnsemble", "fit_trees", "progress_bar"]

#: the arrays of :meth:`TreeEnsemble.arrays`, in the order they are written
ARRAYS = ("offsets", "left", "right", "feature", "value", "default_left")


@dataclass(frozen=True, eq=False)
class TreeEnsemble:
    """Regression trees as flat node arrays.

    ``offsets[t]``: the first node of tree ``t`` (``offsets[-1]``: the node count);
    ``left``/``right``: the children of each node as indices into the flat arrays
    (-1: a leaf); ``feature``, ``value``: the split column and threshold (a leaf's
    ``value`` is its output); ``default_left``: where a NaN goes; ``base_score``:
    the margin every prediction starts from; ``n_features``: the input's columns.
    """

    base_score: float
    n_features: int
    offsets: np.ndarray
    left: np.ndarray
    right: np.ndarray
    feature: np.ndarray
    value: np.ndarray
    default_left: np.ndarray

    @property
    def n_trees(self) -> int:
        return len(self.offsets) - 1

    @classmethod
    def from_booster(cls, booster: Any) -> TreeEnsemble:
        """The ensemble of a fitted ``xgboost.Booster`` (squared-error regression)."""
        model = json.loads(bytes(booster.save_raw(raw_format="json")))
        learner = model["learner"]
        base = str(learner["learner_model_param"]["base_score"]).strip("[]")
        trees = learner["gradient_booster"]["model"]["trees"]
        sizes = np.array([len(t["left_children"]) for t in trees], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

        def flat(key: str, dtype: Any) -> np.ndarray:
            return np.concatenate([np.asarray(t[key], dtype=dtype) for t in trees]) if trees else np.zeros(0, dtype)

        left, right = flat("left_children", np.int64), flat("right_children", np.int64)
        start = np.repeat(offsets[:-1], sizes)
        return cls(base_score=float(np.float32(float(base))),
                   n_features=int(learner["learner_model_param"]["num_feature"]), offsets=offsets,
                   left=np.where(left >= 0, left + start, -1).astype(np.int32),
                   right=np.where(right >= 0, right + start, -1).astype(np.int32),
                   feature=flat("split_indices", np.int32), value=flat("split_conditions", np.float32),
                   default_left=flat("default_left", np.int8).astype(bool))

    def predict(self, M: np.ndarray) -> np.ndarray:
        """The ensemble's output for each row of ``M`` (float32 sums, returned as float64)."""
        X = np.asarray(M, dtype=np.float32)
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise CostModelError(f"tree ensemble: expects {self.n_features} input columns, got shape {X.shape}")
        n = X.shape[0]
        node = np.broadcast_to(self.offsets[:-1].astype(np.int32), (n, self.n_trees)).copy()
        rows = np.arange(n)[:, None]
        while True:
            left = self.left[node]
            inner = left >= 0
            if not inner.any():
                break
            x = X[rows, self.feature[node]]
            go_left = np.where(np.isnan(x), self.default_left[node], x < self.value[node])
            node = np.where(inner, np.where(go_left, left, self.right[node]), node)
        leaves = self.value[node]
        margin = np.concatenate([np.full((n, 1), self.base_score, dtype=np.float32), leaves], axis=1)
        return np.cumsum(margin, axis=1, dtype=np.float32)[:, -1].astype(np.float64)

    def arrays(self) -> dict[str, np.ndarray]:
        """What :meth:`to_bytes` writes: ``head`` (``[base_score, n_features]``),
        ``offsets``, the children as indices within their tree (int16 when every tree
        is small enough: they compress several times better), the split features,
        values and default ways."""
        sizes = np.diff(self.offsets)
        start = np.repeat(self.offsets[:-1], sizes)
        small = np.int16 if len(sizes) == 0 or int(sizes.max()) < 2**15 else np.int32

        def local(child: np.ndarray) -> np.ndarray:
            return np.where(child >= 0, child - start, -1).astype(small)

        return {"head": np.array([self.base_score, self.n_features], dtype=np.float64), "offsets": self.offsets,
                "left": local(self.left), "right": local(self.right),
                "feature": self.feature.astype(np.int16 if self.n_features < 2**15 else np.int32),
                "value": self.value, "default_left": self.default_left}

    def to_bytes(self) -> bytes:
        """A compressed ``.npz`` of :meth:`arrays`."""
        buf = io.BytesIO()
        np.savez_compressed(buf, **self.arrays())
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, raw: bytes, *, where: str = "tree ensemble") -> TreeEnsemble:
        """Read :meth:`to_bytes`; a damaged or foreign file is a :class:`CostModelError` naming ``where``."""
        try:
            with np.load(io.BytesIO(raw), allow_pickle=False) as z:
                arrays = {k: z[k] for k in ("head", *ARRAYS)}
        except (OSError, ValueError, KeyError, EOFError) as e:
            raise CostModelError(f"{where}: not a tree ensemble ({e})") from None
        head = arrays.pop("head")
        offsets = arrays["offsets"].astype(np.int64)
        sizes = np.diff(offsets)
        if len(offsets) == 0 or (sizes < 0).any() or any(len(arrays[k]) != offsets[-1] for k in ARRAYS[1:]):
            raise CostModelError(f"{where}: tree ensemble arrays do not agree in length")
        start = np.repeat(offsets[:-1], sizes)

        def flat(child: np.ndarray) -> np.ndarray:
            child = child.astype(np.int64)
            return np.where(child >= 0, child + start, -1).astype(np.int32)

        ens = cls(base_score=float(np.float32(head[0])), n_features=int(head[1]),
                  offsets=offsets, left=flat(arrays["left"]),
                  right=flat(arrays["right"]), feature=arrays["feature"].astype(np.int32),
                  value=arrays["value"].astype(np.float32), default_left=arrays["default_left"].astype(bool))
        nodes = int(offsets[-1])
        if nodes and (ens.left.max() >= nodes or ens.right.max() >= nodes
                      or ens.feature.min() < 0 or ens.feature.max() >= ens.n_features):
            raise CostModelError(f"{where}: a node points outside its tree ensemble")
        return ens


def fit_trees(M: np.ndarray, target: np.ndarray, params: Mapping[str, Any], desc: str) -> TreeEnsemble:
    """Fit ``params["n_estimators"]`` squared-error trees of ``target`` on ``M`` with
    XGBoost (``hist``), a progress bar named ``desc`` after two seconds."""
    # OpenMP threads that spin while they wait for each other make XGBoost's training
    # 10-20x slower on a host whose cores are busy with other work (measured here: a
    # GPU bank's held-out fits took 40 min with spinning threads, 2 min without).
    # Effective when this is the first import of XGBoost in the process.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import xgboost

    p = {"objective": "reg:squarederror", "tree_method": "hist", "max_depth": int(params["max_depth"]),
         "eta": float(params["learning_rate"]), "subsample": float(params["subsample"]),
         "colsample_bytree": float(params["colsample_bytree"]),
         "min_child_weight": float(params["min_child_weight"]), "seed": int(params["seed"]),
         "nthread": int(params.get("n_jobs") or os.cpu_count() or 1)}
    rounds = int(params["n_estimators"])
    with progress_bar(rounds, desc) as bar:
        booster = xgboost.train(p, xgboost.DMatrix(M, label=target), num_boost_round=rounds,
                                callbacks=[round_callback(bar.update)])
    return TreeEnsemble.from_booster(booster)


def progress_bar(total: int, desc: str, unit: str = "round") -> Any:
    """A progress bar on stderr that shows itself once the work has taken two seconds."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, delay=2.0, leave=False)


def round_callback(step: Callable[[int], Any]) -> Any:
    """An XGBoost training callback that calls ``step(1)`` after each boosting round."""
    import xgboost

    class Report(xgboost.callback.TrainingCallback):
        def after_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
            step(1)
            return False

    return Report()
