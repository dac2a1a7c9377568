"""Per-op-kind polynomial cost model: time as a polynomial in FLOPs and bytes.

The "multi-parameter fusion" regression of the CPU-GPU partitioning literature: an
operator's time is a polynomial in several of its parameters at once (by default
FLOPs and bytes moved, with their cross terms), fitted separately per device and
per op kind. For every (device, op kind) the form is chosen by k-fold
cross-validation among

* ``raw`` space, degree d: ``t = sum c_ij (flops/F)^i (bytes/B)^j`` over ``i + j <= d``
  (F, B: the largest values in the training rows), least squares on *relative*
  error (each row weighted by ``1/t``), so small and large kernels count alike;
* ``log`` space, degree d: ``log10 t = sum c_ij log10(1+flops)^i log10(1+bytes)^j``,
  least squares on ``log10 t``;

for d in ``degrees``. The lowest cross-validated MAPE wins; a more complex form
(higher degree; log after raw at one degree) must beat a simpler one by more than
2 % of its MAPE plus 0.01 percentage points, so exact linear data yields the linear
form. ``selection()`` states what was chosen. Op kinds with fewer than
``min_samples`` rows on a device use the polynomial of their kernel family
(:mod:`costmodel.families`: ``clip`` and ``relu`` are both ``unary``, ``avg_pool2d``
and ``max_pool2d`` both ``pool``; a linear or power-law form, degree <= 1, since
the kind it prices is off the lines its members lie on) when the family has that
many rows there, else
the device's global polynomial (fitted on all its rows the same way); both
fallbacks are reported by ``fallback_reasons``.

Outside the range of its training rows a form of degree >= 2 is evaluated at the
nearest point of that range (degree 0 and 1 forms, linear or power laws, extrapolate
as they are); above the largest input it was fitted on, the result is scaled in
proportion to the input's excess (time linear in the work beyond what was
measured), below the smallest it is kept (a smaller kernel is no slower). A
degree-3 polynomial evaluated 10x past its data would otherwise answer with
anything, 10^30 s included. Predictions are always positive:
where a polynomial gives a time <= 0, the fastest time measured on the device in
the training rows replaces it (no kernel is faster than the launch floor).
"""

from __future__ import annotations

import itertools
import numbers
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from hetsim.costmodel.base import CostModelError
from hetsim.costmodel.families import family_column
from hetsim.costmodel.learned.measured import Predictor

__all__ = ["Polynomial"]

_SPACES = ("raw", "log")
_REL_TOL = 0.02  # a more complex form must beat a simpler one by 2 % of its MAPE...
_ABS_TOL = 1e-4  # ...plus 0.01 percentage points
_MAX_LOG10 = 300.0  # keeps 10**x finite when a log-space form extrapolates wildly


def _monomials(k: int, degree: int) -> list[tuple[int, ...]]:
    """Exponent tuples of every monomial of total degree <= ``degree`` in ``k`` variables."""
    out: list[tuple[int, ...]] = []
    for d in range(degree + 1):
        for combo in itertools.combinations_with_replacement(range(k), d):
            out.append(tuple(combo.count(j) for j in range(k)))
    return out


class _Form:
    """One fitted polynomial: space, degree, input scales and coefficients."""

    __slots__ = ("space", "degree", "scale", "coef", "n", "cv_mape", "lo", "hi")

    def __init__(self, space: str, degree: int, scale: np.ndarray, coef: np.ndarray, n: int, cv_mape: float,
                 lo: np.ndarray | None = None, hi: np.ndarray | None = None) -> None:
        self.space, self.degree, self.scale, self.coef = space, degree, scale, coef
        self.n, self.cv_mape = n, cv_mape
        self.lo, self.hi = lo, hi  # the inputs' range in the training rows (None: unguarded)

    def design(self, F: np.ndarray) -> np.ndarray:
        return _design(F, self.space, self.degree, self.scale)

    def _raw_predict(self, F: np.ndarray) -> np.ndarray:
        z = self.design(F) @ self.coef
        if self.space == "log":
            return 10.0 ** np.minimum(z, _MAX_LOG10)
        return z

    def predict(self, F: np.ndarray) -> np.ndarray:
        if self.lo is None or self.hi is None or self.degree <= 1:  # linear / power law: extrapolates sanely
            return self._raw_predict(F)
        Fc = np.clip(F, self.lo, self.hi)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(Fc > 0, F / Fc, 1.0)
        return self._raw_predict(Fc) * np.maximum(ratio.max(axis=1), 1.0)

    def to_dict(self) -> dict[str, Any]:
        d = {"space": self.space, "degree": self.degree, "scale": self.scale.tolist(),
             "coef": self.coef.tolist(), "n": self.n, "cv_mape": self.cv_mape}
        if self.lo is not None and self.hi is not None:
            d["lo"], d["hi"] = self.lo.tolist(), self.hi.tolist()
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> _Form:
        lo, hi = d.get("lo"), d.get("hi")
        return cls(str(d["space"]), int(d["degree"]), np.asarray(d["scale"], float),
                   np.asarray(d["coef"], float), int(d["n"]), float(d["cv_mape"]),
                   None if lo is None else np.asarray(lo, float), None if hi is None else np.asarray(hi, float))


def _design(F: np.ndarray, space: str, degree: int, scale: np.ndarray) -> np.ndarray:
    Z = F / scale if space == "raw" else np.log10(1.0 + F)
    cols = [np.prod([Z[:, j] ** e for j, e in enumerate(exps)], axis=0) if any(exps) else np.ones(len(Z))
            for exps in _monomials(F.shape[1], degree)]
    return np.column_stack(cols)


def _solve(F: np.ndarray, t: np.ndarray, space: str, degree: int) -> tuple[np.ndarray, np.ndarray]:
    scale = np.where(F.max(axis=0) > 0, F.max(axis=0), 1.0)
    A = _design(F, space, degree, scale)
    if space == "raw":
        coef, *_ = np.linalg.lstsq(A / t[:, None], np.ones_like(t), rcond=None)
    else:
        coef, *_ = np.linalg.lstsq(A, np.log10(t), rcond=None)
    return scale, coef


class Polynomial(Predictor):
    """Per-(device, op kind) polynomial in operator parameters, form chosen by CV.

    Parameters
    ----------
    inputs
        Numeric feature columns combined by the polynomial (default FLOPs and bytes).
    degrees
        Candidate total degrees.
    spaces
        Candidate spaces: ``"raw"`` and/or ``"log"`` (see the module docstring).
    folds
        Cross-validation folds (fewer when an op kind has fewer rows).
    min_samples
        Rows an op kind needs on a device for its own polynomial; fewer: its
        kernel family's polynomial (if the family has that many), else the
        device's global polynomial.
    random_state
        Seeds the fold assignment.

    Examples
    --------
    >>> poly = Polynomial().fit(prof.ops, prof.ops["time_s"])   # doctest: +SKIP
    >>> poly.selection()                                         # doctest: +SKIP
    """

    kind: ClassVar[str] = "polynomial"

    def __init__(
        self,
        *,
        inputs: Sequence[str] = ("flops", "bytes"),
        degrees: Sequence[int] = (1, 2, 3),
        spaces: Sequence[str] = _SPACES,
        folds: int = 5,
        min_samples: int = 8,
        random_state: int | None = 0,
    ) -> None:
        self.inputs = inputs
        self.degrees = degrees
        self.spaces = spaces
        self.folds = folds
        self.min_samples = min_samples
        self.random_state = random_state

    @property
    def required_columns(self) -> tuple[str, ...]:  # type: ignore[override]
        return ("op", *self.inputs)

    def _check_params(self) -> list[tuple[str, int]]:
        if not self.inputs or any(not isinstance(c, str) for c in self.inputs):
            raise CostModelError(f"Polynomial: inputs must be column names, got {self.inputs!r}")
        bad = [s for s in self.spaces if s not in _SPACES]
        if bad or not self.spaces:
            raise CostModelError(f"Polynomial: spaces must be among {list(_SPACES)}, got {self.spaces!r}")
        if not self.degrees or any(not isinstance(d, numbers.Integral) or d < 0 for d in self.degrees):
            raise CostModelError(f"Polynomial: degrees must be ints >= 0, got {self.degrees!r}")
        if not isinstance(self.folds, numbers.Integral) or self.folds < 2:
            raise CostModelError(f"Polynomial: folds must be an int >= 2, got {self.folds!r}")
        if not isinstance(self.min_samples, numbers.Integral) or self.min_samples < 2:
            raise CostModelError(f"Polynomial: min_samples must be an int >= 2, got {self.min_samples!r}")
        return [(s, d) for d in sorted(set(self.degrees)) for s in _SPACES if s in self.spaces]

    # -------------------------------------------------------------------- fit
    def fit(self, X: pd.DataFrame, y: Any) -> Polynomial:
        """Fit one polynomial per (device, op kind), per (device, kernel family) and
        one global per device."""
        candidates = self._check_params()
        X, t = self._check_Xy(X, y)
        rng = np.random.default_rng(self.random_state)
        F_all = X[list(self.inputs)].to_numpy(dtype=float)
        dev = X["device"].astype(str).to_numpy()
        ops = X["op"].astype(str).to_numpy()
        fams = family_column(X)
        self.devices_: list[str] = sorted(set(dev))
        self.forms_: dict[str, dict[str, _Form]] = {}
        self.families_: dict[str, dict[str, _Form]] = {}
        self.global_: dict[str, _Form] = {}
        self.counts_: dict[str, dict[str, int]] = {}
        self.floor_: dict[str, float] = {}
        for d in self.devices_:
            on = dev == d
            self.floor_[d] = float(t[on].min())
            self.global_[d] = self._select(F_all[on], t[on], candidates, rng, self.floor_[d])
            self.forms_[d] = {}
            self.counts_[d] = {}
            for op in dict.fromkeys(ops[on]):
                rows = on & (ops == op)
                n = int(rows.sum())
                self.counts_[d][op] = n
                if n >= self.min_samples:
                    self.forms_[d][op] = self._select(F_all[rows], t[rows], candidates, rng, self.floor_[d])
            # a family's op kinds lie on different lines in (flops, bytes) (relu: 1 FLOP per
            # element, clip: 2), and an op kind it lacks lies off them: a curved form
            # fitted along one line answers anything off it, so families get degree <= 1
            linear = [c for c in candidates if c[1] <= 1] or candidates[:1]
            self.families_[d] = {}
            for fam in dict.fromkeys(fams[on]):
                rows = on & (fams == fam)
                if int(rows.sum()) >= self.min_samples:
                    self.families_[d][fam] = self._select(F_all[rows], t[rows], linear, rng, self.floor_[d])
        return self

    def _form(self, d: str, op: str, fam: str) -> _Form:
        """The op kind's polynomial, else its family's, else the device's."""
        form = self.forms_[d].get(op)
        if form is None:
            form = self.families_[d].get(fam, self.global_[d])
        return form

    def _select(self, F: np.ndarray, t: np.ndarray, candidates: list[tuple[str, int]],
                rng: np.random.Generator, floor: float) -> _Form:
        n = len(t)
        k = min(self.folds, n)
        fold = np.empty(n, dtype=int)
        fold[rng.permutation(n)] = np.arange(n) % k
        smallest_train = n - int(np.ceil(n / k))
        scores: list[tuple[float, str, int]] = []
        for space, degree in candidates:
            n_terms = len(_monomials(F.shape[1], degree))
            if k < 2 or n_terms > smallest_train:
                continue
            pred = np.empty(n)
            for f in range(k):
                tr = fold != f
                scale, coef = _solve(F[tr], t[tr], space, degree)
                pred[~tr] = _Form(space, degree, scale, coef, 0, 0.0, F[tr].min(axis=0),
                                  F[tr].max(axis=0)).predict(F[~tr])
            ape = np.abs(np.where(pred > 0, pred, floor) - t) / t
            scores.append((float(np.mean(ape)) if np.all(np.isfinite(ape)) else np.inf, space, degree))
        if not scores:  # too few rows for any candidate under CV: the simplest one, unchecked
            space, degree = candidates[0]
            if len(_monomials(F.shape[1], degree)) > n:
                space, degree = candidates[0][0], 0
            scale, coef = _solve(F, t, space, degree)
            return _Form(space, degree, scale, coef, n, float("nan"), F.min(axis=0), F.max(axis=0))
        best = min(s for s, _, _ in scores)
        score, space, degree = next(c for c in scores if c[0] <= best * (1 + _REL_TOL) + _ABS_TOL)
        scale, coef = _solve(F, t, space, degree)
        return _Form(space, degree, scale, coef, n, score, F.min(axis=0), F.max(axis=0))

    # ---------------------------------------------------------------- predict
    def predict(self, X: pd.DataFrame) -> np.ndarray:
        """Predicted times in seconds, one per row of ``X``."""
        self.check_fitted()
        X = self._check_X(X)
        F = X[list(self.inputs)].to_numpy(dtype=float)
        dev = X["device"].astype(str).to_numpy()
        ops = X["op"].astype(str).to_numpy()
        fams = family_column(X)
        out = np.empty(len(X))
        for (d, op, fam), idx in pd.Series(np.arange(len(X))).groupby([dev, ops, fams], sort=False):
            out[idx.to_numpy()] = self._form(d, op, fam).predict(F[idx.to_numpy()])
        for d in set(dev):
            on = dev == d
            t = np.nan_to_num(out[on], nan=self.floor_[d], posinf=np.finfo(float).max)
            out[on] = np.where(t > 0, t, self.floor_[d])
        return out

    def fallback_reasons(self, X: pd.DataFrame) -> list[str]:
        """Empty for rows whose op kind has its own polynomial, else the reason."""
        self.check_fitted()
        X = self._check_X(X)
        out = []
        for d, op, fam in zip(X["device"].astype(str), X["op"].astype(str), family_column(X)):
            if op in self.forms_[d]:
                out.append("")
            else:
                n = self.counts_[d].get(op, 0)
                used = f"the {fam!r} family's polynomial" if fam in self.families_[d] else "global polynomial"
                out.append(f"op kind {op!r} has {n} sample(s) on {d} (< min_samples={self.min_samples}): {used}")
        return out

    def selection(self) -> pd.DataFrame:
        """The chosen form per (device, op kind): ``device, op, n, space, degree,
        cv_mape``; ``op`` is ``*`` for the device's global polynomial and
        ``family:NAME`` for a kernel family's."""
        self.check_fitted()
        rows = []
        for d in self.devices_:
            fams = [(f"family:{f}", form) for f, form in self.families_[d].items()]
            for op, form in [("*", self.global_[d]), *fams, *self.forms_[d].items()]:
                rows.append({"device": d, "op": op, "n": form.n, "space": form.space,
                             "degree": form.degree, "cv_mape": form.cv_mape})
        return pd.DataFrame(rows, columns=["device", "op", "n", "space", "degree", "cv_mape"])

    # ------------------------------------------------------------ persistence
    def fitted_state(self) -> dict[str, Any]:
        return {
            "devices": self.devices_,
            "floor": self.floor_,
            "counts": self.counts_,
            "global": {d: f.to_dict() for d, f in self.global_.items()},
            "forms": {d: {op: f.to_dict() for op, f in forms.items()} for d, forms in self.forms_.items()},
            "families": {d: {k: f.to_dict() for k, f in forms.items()} for d, forms in self.families_.items()},
        }

    def load_fitted(self, state: Mapping[str, Any]) -> None:
        self.floor_ = {d: float(v) for d, v in state["floor"].items()}
        self.counts_ = {d: dict(c) for d, c in state["counts"].items()}
        self.global_ = {d: _Form.from_dict(f) for d, f in state["global"].items()}
        self.forms_ = {d: {op: _Form.from_dict(f) for op, f in forms.items()} for d, forms in state["forms"].items()}
        # models saved before kernel families have none: op kind, else global
        self.families_ = {d: {k: _Form.from_dict(f) for k, f in state.get("families", {}).get(d, {}).items()}
                          for d in state["forms"]}
        self.devices_ = list(state["devices"])
