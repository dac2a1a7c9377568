"""The cost-model contract shared by the simulator, the schedulers and the runtime."""

from __future__ import annotations

import inspect
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.graphs.graph import Graph
    from hetsim.sim.platform import Device, Link, Platform

__all__ = [
    "CostModel",
    "CostModelError",
    "as_cost_model",
    "host_dispatch",
    "price_nodes",
]


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

    A model may also price many nodes of one device at once, with the same
    numbers as the one-node methods: ``op_times(graph, nodes, device)`` and
    ``dispatch_times(graph, nodes, device)`` (lists of seconds, in ``nodes``
    order). The simulator and the schedulers' cost tables use them when they exist
    (:func:`price_nodes`); :class:`~costmodel.roofline.Roofline` has both, and
    ``op_and_dispatch_times`` (both lists at once, each node read once).
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


def price_nodes(
    cost: Any,
    graph: Graph,
    nodes: Sequence[str],
    device: Device,
    *,
    attrs: Sequence[Mapping[str, Any]] | None = None,
) -> tuple[list[Any], list[Any]]:
    """Op and host dispatch times of ``nodes`` on ``device``, as the model returns them.

    One call of ``cost.op_and_dispatch_times`` when the model has it (defined in
    the class that defines ``op_times`` and ``dispatch_times``, or below it), else
    of ``cost.op_times`` / ``cost.dispatch_times`` when it has them, else
    ``op_time`` and :func:`host_dispatch` node by node (in that order, node after
    node). The answers are not checked: callers check them. ``attrs`` (the nodes'
    attribute dicts, in ``nodes`` order) is handed to an ``op_and_dispatch_times``
    that takes it, to save it the look-ups by name.

    Examples
    --------
    >>> from hetsim.costmodel.roofline import Roofline
    >>> from hetsim.graphs import Graph
    >>> from hetsim.sim.platform import Platform
    >>> g = Graph()
    >>> g.add_op("mm", "matmul", flops=2e9, bytes=12_000_000)
    >>> g.add_op("view", "reshape", bytes=0)
    >>> ops, disp = price_nodes(Roofline(), g, ["mm", "view"], Platform.preset("xeon-p2200").device("gpu"))
    >>> [round(t * 1e6, 1) for t in ops], disp
    ([1007.0, 0.0], [6e-06, 0.0])
    """
    many_ops = _batched(cost, "op_times", "op_time")
    many_disp = _batched(cost, "dispatch_times", "dispatch_time")
    both = getattr(cost, "op_and_dispatch_times", None)
    if both is not None and many_ops is not None and many_disp is not None:
        mro = type(cost).__mro__
        if _defined_in(mro, "op_and_dispatch_times") <= min(_defined_in(mro, "op_times"),
                                                           _defined_in(mro, "dispatch_times")):
            if attrs is not None and _takes_attrs(both):
                ops, disp = both(graph, nodes, device, attrs=attrs)
            else:
                ops, disp = both(graph, nodes, device)
            return list(ops), list(disp)
    if many_ops is None or (many_disp is None and hasattr(cost, "dispatch_time")):
        ops, disp = [], []
        for n in nodes:
            ops.append(cost.op_time(graph, n, device))
            disp.append(host_dispatch(cost, graph, n, device))
        return ops, disp
    ops = list(many_ops(graph, nodes, device))
    if many_disp is None:
        return ops, [float(device.dispatch_s)] * len(ops)
    return ops, list(many_disp(graph, nodes, device))


def _batched(cost: Any, many: str, one: str) -> Any:
    """``cost.<many>`` when it prices what ``cost.<one>`` does: not when a subclass
    overrides the one-node method below the class that defines the batch one (a
    ``Roofline`` subclass with its own ``dispatch_time`` keeps it)."""
    method = getattr(cost, many, None)
    if method is None:
        return None
    mro = type(cost).__mro__
    return method if _defined_in(mro, many) <= _defined_in(mro, one) else None


def _takes_attrs(method: Any) -> bool:
    """Whether a bound ``op_and_dispatch_times`` has an ``attrs`` keyword."""
    try:
        return "attrs" in inspect.signature(method).parameters
    except (TypeError, ValueError):  # no signature to read (a builtin or C method)
        return False


def _defined_in(mro: tuple[type, ...], name: str) -> int:
    """Position in ``mro`` of the class that defines ``name`` (``len(mro)``: none)."""
    return next((i for i, c in enumerate(mro) if name in vars(c)), len(mro))


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
        from hetsim.costmodel.spec import from_spec

        return from_spec(None if cost is None else str(cost), platform=platform)
    missing = [m for m in ("op_time", "transfer_time") if not callable(getattr(cost, m, None))]
    if missing:
        raise CostModelError(
            f"{type(cost).__name__} is not a cost model: it lacks {' and '.join(missing)} "
            "(a cost model prices op_time(graph, node, device) and transfer_time(nbytes, link))"
        )
    return cost
