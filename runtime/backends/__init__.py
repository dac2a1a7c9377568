"""Kernel backends: run one graph node on one device.

``torch`` maps each Relax operator to its torch function (vendor kernels: oneDNN on
the CPU, cuBLAS/cuDNN on GPUs); ``tvm`` compiles each node's PrimFunc with TVM.
Both follow :class:`~runtime.backends.base.Backend`.

Examples
--------
>>> from hetsim.graphs import Graph
>>> g = Graph()
>>> g.add_op("r", "relu", inputs=[([4], "float32")], outputs=[([4], "float32")])
>>> kernel = get_backend("torch").prepare(g, "r", "cpu")
>>> out = kernel()
"""

from __future__ import annotations

from hetsim.runtime.backends.base import (
    Backend,
    BackendError,
    DeviceSpec,
    Kernel,
    check_available,
    parse_device,
    parse_devices,
    to_numpy,
)

__all__ = [
    "BACKENDS",
    "Backend",
    "BackendError",
    "DeviceSpec",
    "Kernel",
    "check_available",
    "get_backend",
    "parse_device",
    "parse_devices",
    "to_numpy",
]

#: backend names :func:`get_backend` knows
BACKENDS = ("torch", "tvm")


def get_backend(name: str, **kw: object) -> Backend:
    """A new backend by name (``"torch"`` or ``"tvm"``); ``kw`` go to its constructor
    (``tvm``: ``cache=``, ``max_models=``). torch and TVM are imported here, on use."""
    if name == "torch":
        # import cycle: hetsim.runtime.backends.torch_backend -> hetsim.runtime.backends
        from hetsim.runtime.backends.torch_backend import TorchBackend

        return TorchBackend(**kw)
    if name == "tvm":
        # import cycle: hetsim.runtime.backends.tvm_backend -> hetsim.runtime.backends
        from hetsim.runtime.backends.tvm_backend import TvmBackend

        return TvmBackend(**kw)
    raise BackendError(f"unknown backend {name!r}; choose from {list(BACKENDS)}")
