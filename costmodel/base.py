"""The cost-model contract shared by the simulator, the schedulers and the runtime."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.platform import Device, Link, Platform
    from hetsim.graphs.graph import Graph

__all__ = [
    "CostModel",
    "CostModelBase",
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
    numbers as the one-node methods: ``price_nodes(graph, nodes, device, *, attrs)``,
    two lists of seconds (op and dispatch times, in ``nodes`` order). The simulator
    and the schedulers' cost tables use it when it exists (:func:`price_nodes`);
    :class:`CostModelBase`, which hetsim's cost models derive from, has it.
    """

    def op_time(self, graph: Graph, node: str, device: Device) -> float: ...

    def transfer_time(self, nbytes: int, link: Link) -> float: ...


def host_dispatch(cost: Any, graph: Graph, node: str, device: Device) -> float:
    """Host time to issue ``node`` on ``device``: ``cost.dispatch_time(...)`` when the
    cost model defines it, else ``device.dispatch_s``.

    Examples
    --------
    >>> from hetsim.costmodel.platform import Platform
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


class CostModelBase:
    """Base class of hetsim's cost models: many nodes of a device priced in one call.

    A subclass defines ``op_time`` and ``transfer_time``, and ``dispatch_time`` when
    its host time to issue an op is not ``device.dispatch_s``. :meth:`price_nodes`
    prices many nodes of one device at once (node by node here); a model with a faster
    way over many nodes (:class:`~costmodel.roofline.Roofline`'s arrays, a wrapper's
    one call of the model it wraps) overrides it with the same numbers. A subclass
    that redefines ``op_time`` or ``dispatch_time`` without its own ``price_nodes``
    is priced by its one-node methods (node by node): a class's batch pricing never
    hides a subclass's change to a node's price.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = vars(cls)
        if ("op_time" in own or "dispatch_time" in own) and "price_nodes" not in own:
            cls.price_nodes = CostModelBase.price_nodes  # type: ignore[method-assign]

    def op_time(self, graph: Graph, node: str, device: Device) -> float:
        """Kernel time of ``node`` on ``device`` in seconds, launch overhead included."""
        raise NotImplementedError(f"{type(self).__name__} does not define op_time")

    def transfer_time(self, nbytes: int, link: Link) -> float:
        """Seconds to move ``nbytes`` over one hop of ``link``."""
        raise NotImplementedError(f"{type(self).__name__} does not define transfer_time")

    def dispatch_time(self, graph: Graph, node: str, device: Device) -> float:
        """Host time to issue ``node`` on ``device``: ``device.dispatch_s``."""
        return float(device.dispatch_s)

    def price_nodes(
        self,
        graph: Graph,
        nodes: Sequence[str],
        device: Device,
        *,
        attrs: Sequence[Mapping[str, Any]] | None = None,
    ) -> tuple[list[Any], list[Any]]:
        """Op and host dispatch times of ``nodes`` on ``device`` (two lists, in
        ``nodes`` order), as :meth:`op_time` and :meth:`dispatch_time` answer them; the
        answers are not checked (callers check them). ``attrs``: the nodes' attribute
        dicts (``graph.nx.nodes[n]``) in ``nodes`` order, when the caller has them at
        hand, for a model that reads them."""
        ops = [self.op_time(graph, n, device) for n in nodes]
        return ops, [host_dispatch(self, graph, n, device) for n in nodes]

    def op_times(self, graph: Graph, nodes: Sequence[str], device: Device) -> list[Any]:
        """The op times of :meth:`price_nodes`."""
        return self.price_nodes(graph, list(nodes), device)[0]

    def dispatch_times(self, graph: Graph, nodes: Sequence[str], device: Device) -> list[Any]:
        """The host dispatch times of :meth:`price_nodes`."""
        return self.price_nodes(graph, list(nodes), device)[1]


def price_nodes(
    cost: Any,
    graph: Graph,
    nodes: Sequence[str],
    device: Device,
    *,
    attrs: Sequence[Mapping[str, Any]] | None = None,
) -> tuple[list[Any], list[Any]]:
    """Op and host dispatch times of ``nodes`` on ``device``, as the model returns them:
    one call of ``cost.price_nodes`` (:meth:`CostModelBase.price_nodes`) when the model
    has it, else ``op_time`` and :func:`host_dispatch` node by node. The answers are
    not checked: callers check them.

    Examples
    --------
    >>> from hetsim.costmodel.roofline import Roofline
    >>> from hetsim.graphs import Graph
    >>> from hetsim.costmodel.platform import Platform
    >>> g = Graph()
    >>> g.add_op("mm", "matmul", flops=2e9, bytes=12_000_000)
    >>> g.add_op("view", "reshape", bytes=0)
    >>> ops, disp = price_nodes(Roofline(), g, ["mm", "view"], Platform.preset("xeon-p2200").device("gpu"))
    >>> [round(t * 1e6, 1) for t in ops], disp
    ([1007.0, 0.0], [6e-06, 0.0])
    """
    many = getattr(cost, "price_nodes", None)
    if many is not None:
        ops, disp = many(graph, nodes, device, attrs=attrs)
        return list(ops), list(disp)
    ops = [cost.op_time(graph, n, device) for n in nodes]
    return ops, [host_dispatch(cost, graph, n, device) for n in nodes]


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
        # import cycle: hetsim.costmodel.roofline -> hetsim.costmodel.base
        from hetsim.costmodel.roofline import Roofline

        return Roofline()
    if cost is None or isinstance(cost, str | os.PathLike):
        # import cycle: hetsim.costmodel.spec -> hetsim.costmodel.base
        from hetsim.costmodel.spec import from_spec

        return from_spec(None if cost is None else str(cost), platform=platform)
    missing = [m for m in ("op_time", "transfer_time") if not callable(getattr(cost, m, None))]
    if missing:
        raise CostModelError(
            f"{type(cost).__name__} is not a cost model: it lacks {' and '.join(missing)} "
            "(a cost model prices op_time(graph, node, device) and transfer_time(nbytes, link))"
        )
    return cost
