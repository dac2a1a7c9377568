"""Cost models: price every operator on every device and every transfer on every link.

``fit``, ``load``, ``from_spec`` and ``evaluate`` are light to import; the profile
reader, the learned predictors and the measured cost model (pandas, xgboost) load
on first use, so that ``import costmodel`` stays fast.
"""

from __future__ import annotations

from typing import Any

from costmodel.base import CostModel, CostModelError
from costmodel.evaluate import evaluate, plot_eval
from costmodel.fit import fit, from_spec, load
from costmodel.roofline import DEFAULT_EFFICIENCY, Roofline

_LAZY = {
    "Profile": "costmodel.profile",
    "ProfileWriter": "costmodel.profile",
    "read_profile": "costmodel.profile",
    "write_profile": "costmodel.profile",
    "fit_links": "costmodel.profile",
    "Table": "costmodel.table",
    "Polynomial": "costmodel.polynomial",
    "XGBoost": "costmodel.xgb",
    "MeasuredCostModel": "costmodel.measured",
    "CostModelWarning": "costmodel.measured",
    "NotFittedError": "costmodel.measured",
    "KERNEL_FEATURES": "costmodel.measured",
    "loo_predictions": "costmodel.evaluate",
    "summarize": "costmodel.evaluate",
    "format_eval": "costmodel.evaluate",
}

__all__ = [
    "DEFAULT_EFFICIENCY",
    "KERNEL_FEATURES",
    "CostModel",
    "CostModelError",
    "CostModelWarning",
    "MeasuredCostModel",
    "NotFittedError",
    "Polynomial",
    "Profile",
    "ProfileWriter",
    "Roofline",
    "Table",
    "XGBoost",
    "evaluate",
    "fit",
    "fit_links",
    "format_eval",
    "from_spec",
    "load",
    "loo_predictions",
    "plot_eval",
    "read_profile",
    "summarize",
    "write_profile",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'costmodel' has no attribute {name!r}")
