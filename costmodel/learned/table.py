"""Measured-time table: exact lookup of an operator's signature, per profile device.

The most faithful predictor for operators the profiler has measured: an operator
whose :func:`graphs.signature` (op kind, attributes, input shapes, dtypes) is in the
profile gets its measured median time on that device, nothing else. Unseen
signatures go to a fitted ``fallback`` predictor (:class:`~costmodel.learned.polynomial.Polynomial`
by default), and that is never silent: :meth:`Table.fallback_reasons` names each
one, :class:`~costmodel.learned.measured.MeasuredCostModel` counts them
(``fallbacks(graph, device)``, ``coverage(graph, device)``) and warns once per graph.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from hetsim.costmodel.base import CostModelError
from hetsim.costmodel.learned.measured import Predictor, predictor_class, predictor_from_state

__all__ = ["Table"]


class Table(Predictor):
    """Exact signature lookup per device, with a fitted fallback for the rest.

    Parameters
    ----------
    fallback
        Unfitted predictor for unmeasured signatures (a copy is fitted on the same
        rows); default :class:`~costmodel.learned.polynomial.Polynomial` ``()``.

    Attributes
    ----------
    times_
        ``device -> {signature: seconds}`` (median of duplicate rows).
    fallback_
        The fitted copy of ``fallback``.

    Examples
    --------
    >>> table = Table().fit(prof.ops, prof.ops["time_s"])     # doctest: +SKIP
    >>> table.lookup(prof.ops)                                # the measured times  # doctest: +SKIP
    """

    kind: ClassVar[str] = "table"

    def __init__(self, *, fallback: Predictor | None = None) -> None:
        self.fallback = fallback

    @property
    def required_columns(self) -> tuple[str, ...]:  # type: ignore[override]
        return ("signature", *self._fallback_template().required_columns)

    def _fallback_template(self) -> Predictor:
        if self.fallback is None:
            return predictor_class("polynomial")()
        if not isinstance(self.fallback, Predictor) or isinstance(self.fallback, Table):
            raise CostModelError(f"Table: fallback must be a Polynomial or XGBoost predictor, got {self.fallback!r}")
        return self.fallback

    def fit(self, X: pd.DataFrame, y: Any) -> Table:
        """Record every row's time under its (device, signature); fit the fallback."""
        X, t = self._check_Xy(X, y)
        frame = pd.DataFrame({"device": X["device"].astype(str).to_numpy(),
                              "signature": X["signature"].astype(str).to_numpy(), "t": t})
        med = frame.groupby(["device", "signature"], sort=False)["t"].median()
        times: dict[str, dict[str, float]] = {}
        for (d, sig), v in med.items():
            times.setdefault(d, {})[sig] = float(v)
        self.fallback_: Predictor = copy.deepcopy(self._fallback_template()).fit(X, y)
        self.times_ = times
        self.devices_: list[str] = sorted(times)
        return self

    def lookup(self, X: pd.DataFrame) -> np.ndarray:
        """Measured times of ``X``'s rows; NaN where the signature was not measured."""
        self.check_fitted()
        X = self._check_X(X)
        return np.array([self.times_[d].get(s, np.nan)
                         for d, s in zip(X["device"].astype(str), X["signature"].astype(str))], dtype=float)

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        """Measured time where the signature is known, else the fallback's."""
        found = self.lookup(X)
        miss = np.isnan(found)
        if miss.any():
            found[miss] = self.fallback_.predict(X[miss])
        return found

    def fallback_reasons(self, X: pd.DataFrame) -> list[str]:
        """Empty for measured signatures, else which model priced the row."""
        found = self.lookup(X)
        miss = np.isnan(found)
        out = [""] * len(X)
        if miss.any():
            inner = self.fallback_.fallback_reasons(X[miss])
            name = type(self.fallback_).__name__
            devices = X["device"].astype(str).to_numpy()
            for i, why in zip(np.flatnonzero(miss), inner):
                out[i] = f"signature not measured on {devices[i]}: {name}" + (f" ({why})" if why else "")
        return out

    # ------------------------------------------------------------ persistence
    def params_state(self) -> dict[str, Any]:
        fb = self.fallback
        return {"fallback": None if fb is None else {"kind": fb.kind, "params": fb.params_state()}}

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> Table:
        fb = params.get("fallback")
        if fb is None:
            return cls()
        return cls(fallback=predictor_class(fb["kind"]).from_params(dict(fb.get("params", {}))))

    def fitted_state(self) -> dict[str, Any]:
        return {"times": self.times_, "fallback": self.fallback_.get_state()}

    def load_fitted(self, state: Mapping[str, Any]) -> None:
        self.fallback_ = predictor_from_state(state["fallback"])
        self.times_ = {d: {s: float(v) for s, v in sigs.items()} for d, sigs in state["times"].items()}
        self.devices_ = sorted(self.times_)
