"""Cost models: price every operator on every device and every transfer on every link.

``fit``, ``load``, ``from_spec`` and ``evaluate`` are light to import; the profile
reader, the learned predictors and the measured cost model (pandas, xgboost) load
on first use, so that ``import hetsim.costmodel`` stays fast.
"""

from __future__ import annotations

from typing import Any

from hetsim.costmodel.base import (
    CostModel,
    CostModelBase,
    CostModelError,
    as_cost_model,
    host_dispatch,
)
from hetsim.costmodel.learned.evaluate import evaluate, plot_eval
from hetsim.costmodel.roofline import DEFAULT_EFFICIENCY, Roofline
from hetsim.costmodel.spec import fit, from_spec, load, register_cost_source

_LAZY = {
    "Profile": "hetsim.costmodel.profile_reader",
    "ProfileWriter": "hetsim.costmodel.profile_writer",
    "read_profile": "hetsim.costmodel.profile_reader",
    "write_profile": "hetsim.costmodel.profile_writer",
    "fit_links": "hetsim.costmodel.profile_writer",
    "Table": "hetsim.costmodel.learned.table",
    "Polynomial": "hetsim.costmodel.learned.polynomial",
    "XGBoost": "hetsim.costmodel.learned.xgb",
    "MeasuredCostModel": "hetsim.costmodel.learned.measured",
    "CostModelWarning": "hetsim.costmodel.learned.measured",
    "NotFittedError": "hetsim.costmodel.learned.measured",
    "KERNEL_FEATURES": "hetsim.costmodel.learned.measured",
    "loo_predictions": "hetsim.costmodel.learned.evaluate",
    "summarize": "hetsim.costmodel.learned.evaluate",
    "format_eval": "hetsim.costmodel.learned.evaluate",
    "GPUBank": "hetsim.costmodel.gpu.model",
    "GPUCostModel": "hetsim.costmodel.gpu.model",
    "CalibratedRoofline": "hetsim.costmodel.gpu.roofline",
    "PlatformCostModel": "hetsim.costmodel.composite",
    "DeviceScaled": "hetsim.costmodel.device_scaled",
    "builtin_profiles": "hetsim.costmodel.builtin",
    "builtin_profile": "hetsim.costmodel.builtin",
    "import_neusight": "hetsim.costmodel.gpu.neusight",
    "split_predictions": "hetsim.costmodel.gpu.evaluate",
    "logo_predictions": "hetsim.costmodel.gpu.evaluate",
    "summarize_gpu": "hetsim.costmodel.gpu.evaluate",
    "format_gpu_eval": "hetsim.costmodel.gpu.evaluate",
    "plot_gpu_eval": "hetsim.costmodel.gpu.evaluate",
}

__all__ = [
    "DEFAULT_EFFICIENCY",
    "CalibratedRoofline",
    "DeviceScaled",
    "GPUBank",
    "GPUCostModel",
    "PlatformCostModel",
    "builtin_profile",
    "builtin_profiles",
    "format_gpu_eval",
    "import_neusight",
    "logo_predictions",
    "plot_gpu_eval",
    "split_predictions",
    "summarize_gpu",
    "KERNEL_FEATURES",
    "CostModel",
    "CostModelBase",
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
    "as_cost_model",
    "evaluate",
    "fit",
    "fit_links",
    "format_eval",
    "from_spec",
    "host_dispatch",
    "load",
    "register_cost_source",
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
