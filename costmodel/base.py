"""The cost-model contract shared by the simulator, the schedulers and the runtime."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.graphs.graph import Graph
    from hetsim.sim.platform import Device, Link

__all__ = ["CostModel", "CostModelError"]


class CostModelError(ValueError):
    """A cost model cannot price something (missing measurement, bad profile...)."""


@runtime_checkable
class CostModel(Protocol):
    """Prices operators and transfers, in seconds.

    ``op_time`` includes the device-side launch overhead of the kernel; host-side
    dispatch is priced separately by ``dispatch_time`` so that the simulator can
    serialise it on the host. ``transfer_time`` prices one hop over one link.
    """

    def op_time(self, graph: Graph, node: str, device: Device) -> float: ...

    def transfer_time(self, nbytes: int, link: Link) -> float: ...

    def dispatch_time(self, graph: Graph, node: str, device: Device) -> float: ...
