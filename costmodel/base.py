"""The cost-model contract shared by the simulator, the schedulers and the runtime."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.graphs.graph import Graph
    from hetsim.sim.platform import Device, Link, Platform

__all__ = ["CostModel", "CostModelError", "as_cost_model", "host_dispatch"]


class CostModelError(ValueError):
    """A cost model cannot price something (missing measurement, bad profile...)."""


@runtime_checkable
class CostModel(Protocol):
    """Prices operators and transfers, in seconds.

    ``op_time`` includes the device-side launch overhead of the kernel;
    ``transfer_time`` prices one hop over one link. A model may also define
    ``dispatch_time(graph, node, device)``, the host time to issue the op, which
    the simulator serialises on the host dispatcher; without it every consumer
    (simulator, schedulers, runtime) takes ``device.dispatch_s``
    (:func:`host_dispatch`).
    """

    def op_time(self, graph: Graph, node: str, device: Device) -> float: ...

    def transfer_time(self, nbytes: int, link: Link) -> float: ...


def host_dispatch(cost: Any, graph: Graph, node: str, device: Device) -> float:
    """Host time to issue ``node`` on ``device``: ``cost.dispatch_time(...)`` when the
    cost model defines it, else ``device.dispatch_s``.

    Examples
    --------
    >>> from hetsim.sim.platform import Platform
    >>> class OpAndTransfer:
    ...     def op_time(self, graph, node, device): return 1e-3
    ...     def transfer_time(self, nbytes, link): return 0.0
    >>> cpu = Platform.preset("xeon-p2200").device("cpu")
    >>> host_dispatch(OpAndTransfer(), None, "a", cpu) == cpu.dispatch_s
    True
    """
    fn = getattr(cost, "dispatch_time", None)
    if fn is None:
        return float(device.dispatch_s)
    t = fn(graph, node, device)
    try:
        return float(t)
    except (TypeError, ValueError):
        raise CostModelError(f"dispatch_time of {node!r} on {device.name!r} returned {t!r}, not seconds") from None


def as_cost_model(cost: Any = None, *, platform: Platform | None = None) -> Any:
    """The cost model that ``cost`` names: what every ``cost=`` argument accepts.

    Parameters
    ----------
    cost
        ``None`` (``from_spec("default")``: each device of ``platform`` priced by its
        own ``cost`` source, such as the measured profile a GPU preset names; the
        analytic :class:`~costmodel.roofline.Roofline` when no device names one or no
        platform is given), a spec string or path for :func:`costmodel.from_spec`
        (``"roofline"``, a profile folder, ``PROFILE:KIND``, a saved model,
        ``cpu=SPEC,gpu=SPEC``), or a cost model (returned as is).
    platform
        Passed to :func:`~costmodel.from_spec` (the platform the model prices).

    Raises
    ------
    CostModelError
        for an unknown spec, or an object without ``op_time`` and ``transfer_time``.
    """
    if cost is None and platform is None:
        from hetsim.costmodel.roofline import Roofline

        return Roofline()
    if cost is None or isinstance(cost, str | os.PathLike):
        from hetsim.costmodel.fit import from_spec

        return from_spec(None if cost is None else str(cost), platform=platform)
    missing = [m for m in ("op_time", "transfer_time") if not callable(getattr(cost, m, None))]
    if missing:
        raise CostModelError(
            f"{type(cost).__name__} is not a cost model: it lacks {' and '.join(missing)} "
            "(a cost model prices op_time(graph, node, device) and transfer_time(nbytes, link))"
        )
    return cost
