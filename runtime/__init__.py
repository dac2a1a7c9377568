"""Real devices: kernel backends (torch, tvm), the profiler and the plan executor.

``import hetsim.runtime`` is light (no torch, no TVM); :func:`profile_models`,
:func:`execute`, :func:`calibrate`, :func:`validate_all` and the backends import them when used
(validation is the subpackage :mod:`runtime.validation`).

Examples
--------
>>> from hetsim.runtime import get_backend, parse_devices
>>> [d.name for d in parse_devices("cpu,cuda:0")]
['cpu', 'cuda:0']
"""

from __future__ import annotations

from typing import Any

from hetsim.runtime.backends import (
    BACKENDS,
    Backend,
    BackendError,
    DeviceSpec,
    Kernel,
    get_backend,
    parse_device,
    parse_devices,
)

_LAZY = {
    "profile_models": "hetsim.runtime.profiler",
    "profile_graphs": "hetsim.runtime.profiler",
    "execute": "hetsim.runtime.executor.execute",
    "ExecutionError": "hetsim.runtime.executor.execute",
    "RunResult": "hetsim.runtime.executor.execute",
    "ExecutionOptions": "hetsim.runtime.executor.options",
    "calibrate": "hetsim.runtime.calibration.calibrate",
    "Calibration": "hetsim.runtime.calibration.calibrate",
    "validate": "hetsim.runtime.validation.validate",
    "validate_all": "hetsim.runtime.validation.validate",
    "ValidationResult": "hetsim.runtime.validation.validate",
    "ValidationOptions": "hetsim.runtime.validation.options",
}

__all__ = [
    "BACKENDS",
    "Backend",
    "BackendError",
    "Calibration",
    "DeviceSpec",
    "ExecutionError",
    "ExecutionOptions",
    "Kernel",
    "RunResult",
    "ValidationOptions",
    "ValidationResult",
    "calibrate",
    "execute",
    "get_backend",
    "parse_device",
    "parse_devices",
    "profile_graphs",
    "profile_models",
    "validate",
    "validate_all",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'runtime' has no attribute {name!r}")
