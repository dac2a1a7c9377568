"""A cost model whose op times on some devices are another model's times a factor.

Two workers of one CPU are not always equally fast: on a shared virtual machine
each virtual core sits on a physical core with its own neighbours. A profile
measured on one core prices the other core's ops by that core's speed only after
scaling. :class:`DeviceScaled` wraps any cost model and multiplies the op times of
the devices it names (device names, as the platform spells them); everything else
(host dispatch, transfers, devices it does not name) is the wrapped model's.

``hetsim validate`` uses it with the ratio its host calibration measures in the
same rounds (:class:`runtime.validation.handoff.HostCalibration`: the second worker's kernel
time over the first's, on the same ops).

Examples
--------
>>> from hetsim.costmodel.roofline import Roofline
>>> from hetsim.graphs import Graph
>>> from hetsim.costmodel.platform import Platform
>>> g = Graph()
>>> g.add_op("mm", "matmul", flops=2e9, bytes=12_000_000)
>>> cpu2 = Platform.preset("cpu2")
>>> base, scaled = Roofline(), DeviceScaled(Roofline(), {"cpu1": 1.05})
>>> scaled.op_time(g, "mm", cpu2.device("cpu1")) / base.op_time(g, "mm", cpu2.device("cpu1"))
1.05
>>> scaled.op_time(g, "mm", cpu2.device("cpu0")) == base.op_time(g, "mm", cpu2.device("cpu0"))
True
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from hetsim.costmodel.base import CostModelBase, CostModelError, host_dispatch, price_nodes

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.platform import Device, Link
    from hetsim.graphs.graph import Graph

__all__ = ["DeviceScaled"]


class DeviceScaled(CostModelBase):
    """``cost`` with the op times of the devices in ``factors`` multiplied.

    Parameters
    ----------
    cost
        Any cost model (:class:`~costmodel.base.CostModel`).
    factors
        Device name -> factor (a finite number > 0); devices not named keep ``cost``'s times.

    Raises
    ------
    CostModelError
        For a factor that is not a finite positive number.
    """

    def __init__(self, cost: Any, factors: Mapping[str, float]) -> None:
        for name, f in factors.items():
            if isinstance(f, bool) or not isinstance(f, int | float) or not math.isfinite(f) or f <= 0:
                raise CostModelError(f"DeviceScaled: the factor of device {name!r} must be a finite number > 0, "
                                     f"got {f!r}")
        self.cost = cost
        self.factors = {str(k): float(v) for k, v in factors.items()}

    def __repr__(self) -> str:
        return f"DeviceScaled({self.cost!r}, {self.factors!r})"

    def op_time(self, graph: Graph, node: str, device: Device) -> float:
        t = self.cost.op_time(graph, node, device)
        f = self.factors.get(device.name)
        return t if f is None else float(t) * f

    def price_nodes(
        self,
        graph: Graph,
        nodes: Sequence[str],
        device: Device,
        *,
        attrs: Sequence[Mapping[str, Any]] | None = None,
    ) -> tuple[list[Any], list[Any]]:
        """Op and dispatch times of ``nodes`` on ``device`` from one
        :func:`~costmodel.base.price_nodes` call of the wrapped model (``attrs`` passed
        on to it), the op times scaled."""
        ops, disp = price_nodes(self.cost, graph, nodes, device, attrs=attrs)
        f = self.factors.get(device.name)
        return (ops if f is None else [float(t) * f for t in ops]), disp

    def dispatch_time(self, graph: Graph, node: str, device: Device) -> float:
        return host_dispatch(self.cost, graph, node, device)

    def transfer_time(self, nbytes: int, link: Link) -> float:
        return self.cost.transfer_time(nbytes, link)
