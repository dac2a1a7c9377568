"""The kernel model (:mod:`costmodel.gpu.kernel`) as a cost model: ``--cost gpu=kernel``.

Every GPU device is priced from its platform entry (its spec sheet: ``sm_count``,
``peak_flops``, ``tensor_flops``, ``mem_bandwidth_bytes_per_s``, ``l2_bytes``,
``tdp_w``, ``matmul_precision``) with the shipped constants, nothing measured on it
and nothing fitted at run time.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from hetsim.costmodel.base import CostModelBase, CostModelError
from hetsim.costmodel.gpu.features import gpu_ops
from hetsim.costmodel.gpu.kernel import KernelConstants, KernelGPU, kernel_times, shipped_constants
from hetsim.costmodel.math_mode import node_dtype
from hetsim.graphs.features import features

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.platform import Device, Link
    from hetsim.graphs.graph import Graph

__all__ = ["KernelCostModel"]


class KernelCostModel(CostModelBase):
    """A :class:`~costmodel.base.CostModel` of GPU devices from their spec sheets.

    ``op_time`` = the kernel model's device time, with the device's
    ``launch_overhead_s`` as its per-launch floor (views: 0); ``dispatch_time`` = ``device.dispatch_s`` (views: 0);
    ``transfer_time`` = the link's latency + bytes / bandwidth.

    Parameters
    ----------
    constants
        The model's constants (default: the shipped ones, :func:`shipped_constants`).

    Examples
    --------
    >>> from hetsim.costmodel.platform import Platform
    >>> from hetsim.graphs import Graph
    >>> g = Graph(name="one")
    >>> _ = g.add_op("mm", "matmul", inputs=[([512, 512], "float32"), ([512, 512], "float32")],
    ...              outputs=[([512, 512], "float32")], flops=2 * 512**3)
    >>> gpu = Platform.preset("h200-server").device("gpu")
    >>> 5e-6 < KernelCostModel().op_time(g, "mm", gpu) < 1e-4
    True
    """

    name = "kernel"

    def __init__(self, constants: KernelConstants | None = None) -> None:
        self.constants = constants or shipped_constants()
        self._graphs: dict[tuple[int, str], tuple[Any, dict[str, int], np.ndarray, np.ndarray]] = {}

    def __repr__(self) -> str:
        return "KernelCostModel()"

    def describe(self) -> str:
        return "kernel"

    def _priced(self, graph: Graph, device: Device) -> tuple[dict[str, int], np.ndarray, np.ndarray]:
        key = (id(graph), device.name)
        hit = self._graphs.get(key)
        if hit is None or hit[0]() is not graph or len(hit[1]) != graph.number_of_nodes():
            # lazy: at the top it would load scipy with this module
            from hetsim.costmodel.gpu.roofline import views
            from hetsim.costmodel.learned.xgb_features import moved_bytes

            gpu = KernelGPU.from_device(device)
            X = features(graph)
            dtypes = np.array([node_dtype(graph.nodes[n]) for n in X.index], dtype=object)
            t = kernel_times(gpu_ops(X), gpu, self.constants, dtypes=dtypes, moved=moved_bytes(X),
                             floor_s=device.launch_overhead_s)
            view = views(X)
            hit = (weakref.ref(graph), {n: i for i, n in enumerate(X.index)}, np.where(view, 0.0, t), view)
            self._graphs[key] = hit
            while len(self._graphs) > 16:
                self._graphs.pop(next(iter(self._graphs)))
        return hit[1], hit[2], hit[3]

    def op_time(self, graph: Graph, node: str, device: Device) -> float:
        """Device time of ``node`` on GPU ``device`` (seconds)."""
        index, kernel, _ = self._priced(graph, device)
        return float(kernel[index[node]])

    def dispatch_time(self, graph: Graph, node: str, device: Device) -> float:
        """Host time to issue ``node``: ``device.dispatch_s`` (views: 0)."""
        index, _, view = self._priced(graph, device)
        return 0.0 if view[index[node]] else float(device.dispatch_s)

    def transfer_time(self, nbytes: int, link: Link, **_: Any) -> float:
        """The link's own latency and bandwidth."""
        return link.latency_s + nbytes / link.bandwidth_bytes_per_s

    def kernel_times(self, graph: Graph, device: Device) -> pd.Series:
        """Node -> device time (seconds; views: 0)."""
        index, kernel, _ = self._priced(graph, device)
        if not index:
            raise CostModelError(f"graph {graph.name!r} has no nodes")
        return pd.Series(kernel, index=list(index), name="kernel_s")
