"""Gradient-boosted trees (XGBoost) on operator features, one model per device.

Inputs: :data:`~costmodel.learned.measured.KERNEL_FEATURES` (FLOPs, bytes, weight bytes,
arithmetic intensity, log FLOPs, log bytes, element counts, the last four dims of
the first two inputs and first output, ranks, kernel size, stride, groups, fused
member count) plus a one-hot of the op kind (``op=...``) and of its kernel family
(``family=...``, :mod:`costmodel.families`), which places an op kind the training
rows never had (``clip``, ``avg_pool2d``) beside its measured relatives.

Derived inputs (:data:`DERIVED_FEATURES`, computed from those columns and the
``signature`` by :mod:`costmodel.learned.xgb_features`): ratios trees cannot form
themselves, i.e. work per output element (``flops / out_elems``: the reduction
length of a matmul or convolution, ~1 for an elementwise op), bytes per output
element, the output's rows and last dim, the first input's last dim, the log of
the arithmetic intensity, whether a transpose moves the innermost axis, the M and
N of the GEMM that a matmul or convolution performs (K is half the work per output
element; for a convolution M is batch x output pixels and N the output channels of
one group), the window of a pooling op (elements read per output); and facts about
the kernel:

* ``math_calls_per_out``, ``log_math_calls``: math-library calls (exp, tanh,
  erf...) per output element and log10 of their total: ``sigmoid`` on a
  ``[4, 32, 112, 112]`` tensor costs ~4x a ``relu``, which its FLOPs (0) and
  bytes do not say;
* ``copies``: 0 when the torch kernel returns a view (a ``split`` whose axis has
  only 1s before it, a ``permute_dims`` that moves only size-1 dims, a
  ``broadcast_to`` that does not grow: the dispatch floor), 1 when it copies;
* ``dw_channel_align``: of a depthwise / grouped convolution, how many low bits of
  its channel count are 0 (up to 4: 16 channels fill the AVX-512 lanes; 58, 72 or
  116 channels run 1.5-3x slower per MAC); -1 for other ops.

Target: ``log(time / t0)``, where ``t0`` is a per-device baseline:

* ``baseline="family"`` (default): the ``"roofline"`` baseline below, views being
  also the moves that copy nothing, with kernel families (and op kinds) that have
  enough training rows (20; 10 for an op kind) priced by their own baseline,
  fitted on their rows (:func:`~costmodel.learned.xgb_features.fit_group_baselines`):

  - ``gemm``, ``dwconv``, ``norm``: ``t0 = a + flops / P + bytes / B``, a
    non-negative least-squares fit of relative error (torch's oneDNN kernels
    reorder data and weights on each call, serially with the compute; a depthwise
    convolution costs ~60 us before its first MAC);
  - ``pool``, ``transcendental`` and each pooling op kind: ``t0 = a + max(flops /
    P, bytes / B)`` with their own fixed cost ``a`` and compute peak ``P`` (a max
    pool runs at ~0.4 GFLOP/s, 200x below a convolution, an average pool 5x
    faster) and the device's ``B``.

  Trees then learn efficiencies near 1 where one device-wide roofline would leave
  them factors of 100 to learn from a few rows.
* ``baseline="roofline"``: ``t0 = c0 + max(flops / P, bytes / B)``,
  ``t0 = c0`` for view ops (``reshape``, ``broadcast_to``...: no data moves). ``c0``
  is 0.9x the 1st percentile of the training times (the per-call floor), ``P`` and
  ``B`` the 95th percentile of the achieved FLOP/s and byte/s of the training rows:
  the trees then learn each op's efficiency against the device's own roofline,
  which stays in range when an operator is larger than any in the training rows
  (trees alone cannot extrapolate: they would give it the time of the largest one).
* ``baseline="linear"``: ``t0 = c0 + c1 * flops + c2 * bytes``, a non-negative
  least-squares fit of relative error (``True`` means this, for models saved before
  the roofline baseline).
* ``baseline="none"`` (or ``False``): ``t0`` is the smallest training time.

Whatever the baseline, view ops (``reshape``, ``squeeze``, ``expand_dims``,
``flatten``) skip the trees: no data moves, so their time is the call itself,
whatever their size, and they are priced by the median of their training rows (per
op kind, else of all views).

``save(path)`` writes ``path`` (JSON sidecar: hyper-parameters, columns, baselines,
one booster file name per device) and, beside it, each device's booster in
XGBoost's own JSON model format (``STEM.N.xgb.json``); ``load`` restores identical
predictions. xgboost is imported on first use.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from hetsim.costmodel.base import CostModelError
from hetsim.costmodel.families import FAMILIES, family_column
from hetsim.costmodel.learned.measured import (
    COSTMODEL_FILE_VERSION,
    KERNEL_FEATURES,
    Predictor,
    read_model_file,
    write_json,
)
from hetsim.costmodel.learned.xgb_features import (
    DERIVED_FEATURES,
    GATHER_OPS,
    VIEW_OPS_BASELINE,
    derived_features,
    fit_group_baselines,
    group_baseline,
    sum_fit,
    view_like,
)
from hetsim.costmodel.learned.xgb_features import moved_bytes as _moved_bytes
from hetsim.costmodel.roofline import VIEW_OPS, op_class, op_key

__all__ = ["XGBoost", "DERIVED_FEATURES", "GATHER_OPS", "VIEW_OPS_BASELINE", "derived_features"]


#: the derived inputs of models saved before the GEMM and pooling inputs (``derived: true``)
_DERIVED_V1 = DERIVED_FEATURES[:7]


def _baseline_mode(baseline: Any) -> str | None:
    if baseline is True:
        return "linear"
    if baseline is False or baseline is None:
        return "none"
    return baseline if baseline in ("family", "roofline", "linear", "none") else None


def op_class_of(op: str) -> str:
    """``"fused:conv2d+add+relu"`` -> ``"conv2d"``, ``"relu"`` -> ``"elementwise"``."""
    return op_class(op_key(op))


def _train(params: Mapping[str, Any], num_boost_round: int, M: np.ndarray, target: np.ndarray) -> Any:
    """Fit the booster (what predicts and saves) with XGBoost's own training call: the
    model :class:`xgboost.XGBRegressor` fits from ``params``, byte for byte, without the
    scikit-learn package the regressor needs (``n_jobs`` and ``random_state`` are its
    names for ``nthread`` and ``seed``)."""
    import xgboost

    native = dict(params)
    native["nthread"] = native.pop("n_jobs")
    native["seed"] = native.pop("random_state")
    return xgboost.train(native, xgboost.DMatrix(M, label=target), num_boost_round=num_boost_round)


def _booster(raw: bytes | bytearray) -> Any:
    import xgboost

    booster = xgboost.Booster()
    try:
        booster.load_model(bytearray(raw))
    except xgboost.core.XGBoostError as e:
        raise CostModelError(f"not an XGBoost JSON model ({str(e).splitlines()[0]})") from None
    return booster


class XGBoost(Predictor):
    """XGBoost regressor per device on kernel features (scikit-learn style).

    Parameters
    ----------
    n_estimators, max_depth, learning_rate, subsample, colsample_bytree,
    min_child_weight, reg_lambda
        Passed to :class:`xgboost.XGBRegressor` (boosting rounds, tree depth,
        learning rate, row and column sampling, ``min_child_weight``, L2
        regularisation); one regressor is fitted per device on a squared-error
        objective, and its booster is kept for prediction and saving.
    baseline
        ``"family"``, ``"roofline"``, ``"linear"`` or ``"none"``: the per-device
        ``t0`` that the trees learn ``log(time / t0)`` over (see the module
        docstring).
    features
        Numeric feature columns (default :data:`~costmodel.learned.measured.KERNEL_FEATURES`).
    n_jobs
        Threads XGBoost may use.
    random_state
        Seed of XGBoost's row and column sampling.

    Examples
    --------
    >>> model = XGBoost(n_estimators=200).fit(prof.ops, prof.ops["time_s"])   # doctest: +SKIP
    >>> model.save("xgb.json"); XGBoost.load("xgb.json").predict(prof.ops)    # doctest: +SKIP
    """

    kind: ClassVar[str] = "xgboost"

    def __init__(
        self,
        *,
        n_estimators: int = 400,
        max_depth: int = 6,
        learning_rate: float = 0.05,
        subsample: float = 0.8,
        colsample_bytree: float = 0.8,
        min_child_weight: float = 1.0,
        reg_lambda: float = 1.0,
        baseline: str | bool = "family",
        features: Sequence[str] | None = None,
        n_jobs: int = 1,
        random_state: int | None = 0,
    ) -> None:
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.subsample = subsample
        self.colsample_bytree = colsample_bytree
        self.min_child_weight = min_child_weight
        self.reg_lambda = reg_lambda
        if _baseline_mode(baseline) is None:
            raise CostModelError(
                f"XGBoost: baseline must be 'family', 'roofline', 'linear' or 'none', got {baseline!r}")
        self.baseline = baseline
        self.features = features
        self.n_jobs = n_jobs
        self.random_state = random_state

    @property
    def required_columns(self) -> tuple[str, ...]:  # type: ignore[override]
        return ("op", "flops", "bytes", *self._feature_list())

    def _feature_list(self) -> list[str]:
        return list(self.features) if self.features is not None else list(KERNEL_FEATURES)

    def _xgb_params(self) -> dict[str, Any]:
        """Parameters as :class:`xgboost.XGBRegressor` names them (besides ``n_estimators``)."""
        return {
            "max_depth": self.max_depth,
            "learning_rate": self.learning_rate,
            "subsample": self.subsample,
            "colsample_bytree": self.colsample_bytree,
            "min_child_weight": self.min_child_weight,
            "reg_lambda": self.reg_lambda,
            "n_jobs": self.n_jobs,
            "random_state": self.random_state if self.random_state is not None else 0,
            "objective": "reg:squarederror",
            "tree_method": "hist",
        }

    def _design(self, X: pd.DataFrame) -> np.ndarray:
        num = X[self.features_].to_numpy(dtype=np.float64)
        ops = X["op"].astype(str).to_numpy()
        if self.grouping_ == "family":
            groups = family_column(X)
        else:  # models saved before kernel families
            groups = np.array([op_class_of(o) for o in ops])
        hot_op = (ops[:, None] == np.array(self.ops_, dtype=object)[None, :]).astype(np.float64)
        hot_cls = (groups[:, None] == np.array(self.classes_, dtype=object)[None, :]).astype(np.float64)
        return np.hstack([num, derived_features(X, self.derived_), hot_op, hot_cls])

    def _base(self, X: pd.DataFrame, device: str) -> np.ndarray:
        c = np.asarray(self.baseline_[device])
        flops, nbytes = X["flops"].to_numpy(float), X["bytes"].to_numpy(float)
        if self.baseline_mode_ in ("roofline", "family"):
            nbytes = _moved_bytes(X)
            view = view_like(X, copies_known=self.baseline_mode_ == "family")
            t0 = c[0] + np.where(view, 0.0, np.maximum(flops / c[1], nbytes / c[2]))
            t0 = group_baseline(X, t0, self.groups_.get(device, {}), view)
        else:
            t0 = c[0] + c[1] * flops + c[2] * nbytes
        return np.maximum(t0, self.floor_[device])

    def _fit_baseline(self, Xd: pd.DataFrame, td: np.ndarray) -> list[float]:
        """The device's ``[c0, P, B]`` (``[c0, c1, c2]`` for ``"linear"``); for
        ``"family"``, its group baselines go to ``groups_``."""
        flops, nbytes = Xd["flops"].to_numpy(float), Xd["bytes"].to_numpy(float)
        if self.baseline_mode_ in ("roofline", "family"):
            nbytes = _moved_bytes(Xd)
            c0 = 0.9 * float(np.percentile(td, 1))
            moving = ~view_like(Xd, copies_known=self.baseline_mode_ == "family")
            busy = np.maximum(td[moving] - c0, 1e-12)
            peak = [float(np.percentile(v[moving] / busy, 95)) for v in (flops, nbytes)]
            c = [c0, *(p if p > 0 else 1.0 for p in peak)]
            if self.baseline_mode_ == "family":
                self.groups_[str(Xd["device"].iloc[0])] = fit_group_baselines(Xd, td, moving, c0, c[2])
            return c
        if self.baseline_mode_ == "linear":
            return sum_fit(flops, nbytes, td).tolist()
        return [float(td.min()), 0.0, 0.0]

    # -------------------------------------------------------------------- fit
    def fit(self, X: pd.DataFrame, y: Any) -> XGBoost:
        """Fit one booster per device in ``X["device"]``."""
        X, t = self._check_Xy(X, y)
        self.features_: list[str] = self._feature_list()
        self.ops_: list[str] = sorted(set(X["op"].astype(str)))
        self.grouping_: str = "family"
        self.classes_: list[str] = [*FAMILIES, *sorted(set(family_column(X)) - set(FAMILIES))]
        self.derived_: list[str] = list(DERIVED_FEATURES)
        self.columns_: list[str] = [*self.features_, *self.derived_, *(f"op={o}" for o in self.ops_),
                                    *(f"family={c}" for c in self.classes_)]
        dev = X["device"].astype(str).to_numpy()
        devices = sorted(set(dev))
        self.floor_: dict[str, float] = {}
        self.baseline_: dict[str, list[float]] = {}
        self.seen_ops_: dict[str, list[str]] = {}
        self.baseline_mode_: str = str(_baseline_mode(self.baseline))
        self.groups_: dict[str, dict[str, dict[str, Any]]] = {}
        self.view_time_: dict[str, dict[str, float]] = {}
        models: dict[str, Any] = {}
        for d in devices:
            on = dev == d
            Xd, td = X[on], t[on]
            self.floor_[d] = float(td.min())
            self.seen_ops_[d] = sorted(set(Xd["op"].astype(str)))
            self.baseline_[d] = self._fit_baseline(Xd, td)
            ops_d = Xd["op"].astype(str).to_numpy()
            views = np.isin(ops_d, list(VIEW_OPS))
            self.view_time_[d] = {op: float(np.median(td[ops_d == op])) for op in sorted(set(ops_d[views]))}
            if views.any():
                self.view_time_[d]["*"] = float(np.median(td[views]))
            target = np.log(td) - np.log(self._base(Xd, d))
            models[d] = _train(self._xgb_params(), self.n_estimators, self._design(Xd), target)
        self.models_: dict[str, Any] = models
        self.devices_: list[str] = devices
        return self

    # ---------------------------------------------------------------- predict
    def predict(self, X: pd.DataFrame) -> np.ndarray:
        """Predicted times in seconds, one per row of ``X``."""
        self.check_fitted()
        X = self._check_X(X)
        dev = X["device"].astype(str).to_numpy()
        out = np.empty(len(X))
        for d in dict.fromkeys(dev):
            on = dev == d
            Xd = X[on]
            z = np.asarray(self.models_[d].inplace_predict(self._design(Xd)), dtype=np.float64)
            t = np.exp(z) * self._base(Xd, d)
            views = self.view_time_.get(d)
            if views:  # a view's time is its call, whatever its size
                ops = Xd["op"].astype(str).to_numpy()
                for i in np.flatnonzero(np.isin(ops, list(VIEW_OPS))):
                    t[i] = views.get(ops[i], views["*"])
            out[on] = t
        return out

    def fallback_reasons(self, X: pd.DataFrame) -> list[str]:
        """Empty for rows whose op kind was in the device's training rows."""
        self.check_fitted()
        X = self._check_X(X)
        seen = {d: set(v) for d, v in self.seen_ops_.items()}
        return [
            "" if op in seen[d] else
            f"op kind {op!r} not in the training rows of {d}: extrapolated from its features "
            f"and class {op_class_of(op)!r}"
            for d, op in zip(X["device"].astype(str), X["op"].astype(str))
        ]

    # ------------------------------------------------------------ persistence
    def fitted_state(self) -> dict[str, Any]:
        """State with each booster embedded in XGBoost's JSON model format."""
        state = self._meta_state()
        state["boosters"] = {d: json.loads(bytes(m.save_raw(raw_format="json")))
                             for d, m in self.models_.items()}
        return state

    def _meta_state(self) -> dict[str, Any]:
        return {"devices": self.devices_, "features": self.features_, "ops": self.ops_,
                "classes": self.classes_, "columns": self.columns_, "floor": self.floor_,
                "baseline": self.baseline_, "seen_ops": self.seen_ops_,
                "baseline_mode": self.baseline_mode_, "derived": self.derived_,
                "grouping": self.grouping_, "view_time": self.view_time_, "groups": self.groups_}

    def load_fitted(self, state: Mapping[str, Any]) -> None:
        self.features_ = list(state["features"])
        self.ops_ = list(state["ops"])
        self.classes_ = list(state["classes"])
        self.columns_ = list(state["columns"])
        self.floor_ = {d: float(v) for d, v in state["floor"].items()}
        self.baseline_ = {d: [float(c) for c in v] for d, v in state["baseline"].items()}
        self.seen_ops_ = {d: list(v) for d, v in state["seen_ops"].items()}
        # models saved before the roofline baseline and the derived inputs
        self.baseline_mode_ = str(state.get("baseline_mode") or _baseline_mode(self.baseline))
        # "derived": true / false in models saved before the inputs were listed by name
        derived = state.get("derived", False)
        self.derived_ = list(derived) if isinstance(derived, list) else (list(_DERIVED_V1) if derived else [])
        unknown = [n for n in self.derived_ if n not in DERIVED_FEATURES]
        if unknown:
            raise CostModelError(f"derived input(s) {unknown} unknown to this hetsim ({DERIVED_FEATURES})")
        self.grouping_ = str(state.get("grouping", "class"))
        self.view_time_ = {d: {op: float(t) for op, t in v.items()} for d, v in state.get("view_time", {}).items()}
        # models saved before the family baselines
        self.groups_ = {d: {g: {"kind": str(b["kind"]), "coef": [float(c) for c in b["coef"]]} for g, b in v.items()}
                        for d, v in state.get("groups", {}).items()}
        models = {}
        for d, booster in state["boosters"].items():
            raw = booster if isinstance(booster, bytes | bytearray) else json.dumps(booster).encode()
            models[d] = _booster(raw)
        self.models_ = models
        self.devices_ = list(state["devices"])

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the sidecar ``path`` and one XGBoost JSON model per device beside it."""
        self.check_fitted()
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        stem = path.name[: -len(".json")] if path.name.endswith(".json") else path.name
        files = {}
        for i, (d, m) in enumerate(self.models_.items()):
            name = f"{stem}.{i}.xgb.json"
            m.save_model(str(path.parent / name))
            files[d] = name
        meta = {**self._meta_state(), "booster_files": files}
        write_json(path, {"hetsim_costmodel": COSTMODEL_FILE_VERSION, "kind": self.kind,
                           "params": self.params_state(), "fitted": meta})
        return path

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> XGBoost:
        """Read a model written by :meth:`save` (or embedded by ``get_state``)."""
        data = read_model_file(path)
        if data.get("kind") != cls.kind:
            raise CostModelError(f"{path}: holds a {data.get('kind')!r} model, not an 'xgboost' one")
        fitted = dict(data.get("fitted", {}))
        if "booster_files" in fitted:
            boosters = {}
            for d, name in fitted.pop("booster_files").items():
                f = Path(path).parent / name
                if not f.is_file():
                    raise CostModelError(f"{path}: booster file {str(f)!r} of device {d!r} is missing")
                boosters[d] = f.read_bytes()
            fitted["boosters"] = boosters
        model = cls(**dict(data.get("params", {})))
        try:
            model.load_fitted(fitted)
        except (KeyError, TypeError, ValueError) as e:
            raise CostModelError(f"{path}: malformed xgboost model ({type(e).__name__}: {e})") from None
        return model
