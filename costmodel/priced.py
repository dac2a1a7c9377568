"""One priced graph: the op, dispatch and transfer times of a (graph, platform, cost
model), each asked of the cost model once and shared by whoever prices that graph
(the schedulers' :class:`~schedulers.base.CostTable`, the engine's
:class:`~sim.engine.pricing.Prices`).

:meth:`schedulers.base.Scheduler.run` makes one for the graph it plans and hands it
to the scheduler as its cost model and to the simulation of the plan; a
:class:`sim.Simulator` makes one at its first simulation and reuses it for every
later plan. The answers are kept as the cost model gave them; their consumers check
them (the engine names the op and device of a bad answer).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from hetsim.costmodel.base import host_dispatch, price_nodes

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.platform import Device, Link, Platform
    from hetsim.graphs.graph import Graph

__all__ = ["PricedGraph", "priced_graph"]


class PricedGraph:
    """Op, dispatch and transfer times of ``graph`` on ``platform`` by ``cost``,
    priced on first use and kept.

    It is a cost model itself (``op_time``, ``dispatch_time``, ``transfer_time``):
    the kept answers for the graph and platform it prices, the wrapped model's for
    anything else.

    Parameters
    ----------
    graph, platform, cost
        What to price; the graph must not change while this is in use.
    nodes
        Every node id of ``graph``, in the order that numbers the tables (the
        engine's topological order); None: the graph's insertion order.

    Examples
    --------
    >>> import hetsim
    >>> box = hetsim.Platform.preset("xeon-p2200")
    >>> chain = hetsim.graphs.Graph(name="one matmul")
    >>> chain.add_op("mm", "matmul", flops=2e9, bytes=12_000_000)
    >>> priced = PricedGraph(chain, box, hetsim.Roofline())
    >>> ops, disp = priced.times(box.device_names.index("gpu"), [0])  # priced now, then kept
    >>> round(ops[0] * 1e6, 1), disp, priced.op_time(chain, "mm", box.device("gpu")) == ops[0]
    (1007.0, [6e-06], True)
    """

    def __init__(self, graph: Graph, platform: Platform, cost: Any, *, nodes: list[str] | None = None) -> None:
        self.graph, self.platform, self.cost = graph, platform, cost
        #: node ids (``nodes``, else the graph's insertion order): the positions of the tables
        self.nodes: list[str] = list(graph.nx) if nodes is None else nodes
        self._index: dict[str, int] | None = None
        self.device_index: dict[str, int] = {d.name: i for i, d in enumerate(platform.devices)}
        self.link_ids: set[int] = {id(lk) for lk in platform.links}
        n = len(self.nodes)
        #: per device, per node position: the cost model's op and dispatch answers when
        #: they are floats (``known``: priced), and the other answers as given (``odd``)
        self.op_times: list[np.ndarray] = [np.zeros(n) for _ in platform.devices]
        self.dispatch_times: list[np.ndarray] = [np.zeros(n) for _ in platform.devices]
        self.known: list[np.ndarray] = [np.zeros(n, dtype=bool) for _ in platform.devices]
        self.odd: list[dict[int, tuple[Any, Any]]] = [{} for _ in platform.devices]
        self.transfers: dict[tuple[int, int], Any] = {}
        self.priced = [0] * len(platform.devices)  # per device: how many nodes are priced

    @property
    def index(self) -> dict[str, int]:
        """Node id -> position in the tables (made on first use)."""
        if self._index is None:
            self._index = {n: i for i, n in enumerate(self.nodes)}
        return self._index

    def prices(self, graph: Graph, platform: Platform) -> bool:
        """Whether this prices ``graph`` on ``platform`` (the very objects)."""
        return graph is self.graph and platform is self.platform

    def times(self, d: int, positions: Sequence[int] | np.ndarray,
              attrs_of: Callable[[np.ndarray], Sequence[Any]] | None = None,
              *, as_arrays: bool = False) -> tuple[Any, Any]:
        """Op and dispatch answers of the nodes at ``positions`` on device ``d`` (two
        lists; ``as_arrays``: two float arrays when every answer is a float); those not
        priced yet are priced now in one :func:`costmodel.price_nodes` call.
        ``attrs_of(js)``: the attribute dicts of the nodes at ``positions[js]``, if at
        hand. Answers of a malformed length are returned as they are (not kept)."""
        pos = np.asarray(positions, dtype=np.int64)
        missing = np.flatnonzero(~self.known[d][pos]) if self.priced[d] else np.arange(len(pos))
        if len(missing):
            todo = pos[missing] if len(missing) < len(pos) else pos
            malformed = self._price(d, todo, None if attrs_of is None else attrs_of(missing))
            if malformed is not None:
                return malformed
        ops, disp = self.op_times[d][pos], self.dispatch_times[d][pos]
        odd = self.odd[d]
        if not odd:
            return (ops, disp) if as_arrays else (ops.tolist(), disp.tolist())
        ops, disp = ops.tolist(), disp.tolist()
        for j, i in enumerate(pos.tolist()):
            hit = odd.get(i)
            if hit is not None:
                ops[j], disp[j] = hit
        return ops, disp

    def _price(self, d: int, todo: np.ndarray, attrs: Sequence[Any] | None) -> tuple[list, list] | None:
        """Price the nodes at positions ``todo`` on device ``d`` and keep the answers
        (None), or the answers when their lengths are not ``todo``'s."""
        nodes = self.nodes
        where = todo.tolist()
        ops, disp = price_nodes(self.cost, self.graph, list(map(nodes.__getitem__, where)), self.platform.devices[d],
                                attrs=attrs)
        if len(ops) != len(where) or len(disp) != len(where):
            return ops, disp  # malformed: the caller reports it
        if set(map(type, ops)) | set(map(type, disp)) <= {float}:
            self.op_times[d][todo] = ops
            self.dispatch_times[d][todo] = disp
        else:
            for i, t, ds in zip(where, ops, disp):
                self._keep(d, i, t, ds)
        self.known[d][todo] = True
        self.priced[d] += len(where)
        return None

    def _keep(self, d: int, i: int, t: Any, ds: Any) -> None:
        if type(t) is float and type(ds) is float:
            self.op_times[d][i] = t
            self.dispatch_times[d][i] = ds
        else:
            self.odd[d][i] = (t, ds)
        self.known[d][i] = True

    def time(self, d: int, i: int) -> tuple[Any, Any]:
        """Op and dispatch answers of the node at position ``i`` on device ``d``."""
        if not self.known[d][i]:
            node, device = self.nodes[i], self.platform.devices[d]
            t = self.cost.op_time(self.graph, node, device)
            self._keep(d, i, t, host_dispatch(self.cost, self.graph, node, device))
            self.priced[d] += 1
        odd = self.odd[d]
        if odd and i in odd:
            return odd[i]
        return float(self.op_times[d][i]), float(self.dispatch_times[d][i])

    # ------------------------------------------------------ as a cost model
    def _position(self, graph: Graph, node: str, device: Device) -> tuple[int, int] | None:
        if graph is not self.graph:
            return None
        d = self.device_index.get(device.name)
        if d is None or self.platform.devices[d] is not device:
            return None
        i = self.index.get(node)
        return None if i is None else (d, i)

    def op_time(self, graph: Graph, node: str, device: Device) -> Any:
        """The kept op time (the wrapped model's for another graph or device)."""
        at = self._position(graph, node, device)
        return self.cost.op_time(graph, node, device) if at is None else self.time(*at)[0]

    def dispatch_time(self, graph: Graph, node: str, device: Device) -> Any:
        """The kept host dispatch time (:func:`costmodel.host_dispatch` of the wrapped model)."""
        at = self._position(graph, node, device)
        return host_dispatch(self.cost, graph, node, device) if at is None else self.time(*at)[1]

    def transfer_time(self, nbytes: int, link: Link) -> Any:
        """The wrapped model's time to move ``nbytes`` over ``link``, kept per (bytes, link)
        for the platform's links (keyed by identity: they live as long as the platform)."""
        key = (nbytes, id(link))
        t = self.transfers.get(key)
        if t is None:
            t = self.cost.transfer_time(nbytes, link)
            if id(link) in self.link_ids:
                self.transfers[key] = t
        return t


def priced_graph(graph: Graph, platform: Platform, cost: Any) -> PricedGraph:
    """``cost`` itself when it is a :class:`PricedGraph` of ``graph`` on ``platform``,
    else a new one over ``cost``."""
    if isinstance(cost, PricedGraph) and cost.prices(graph, platform):
        return cost
    return PricedGraph(graph, platform, cost)
