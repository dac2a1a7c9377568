"""Scheduler base class and the helpers the algorithms share.

Every scheduler is a :class:`Scheduler` subclass whose ``_schedule`` returns a
:class:`~sim.plan.Plan`; :meth:`Scheduler.schedule` adds the bookkeeping (empty-graph
and applicability checks, ``plan.meta`` with name, parameters and scheduling time,
plan validation).

Helpers
-------
:class:`CostTable`
    op, dispatch and transfer times of one (graph, platform, cost model), priced
    once: the tensors of the graph (one per producer output, as the simulator
    counts them), their consumers, routes and link-direction resources.
:func:`upward_rank`, :func:`downward_rank`
    HEFT's ``rank_u`` / ``rank_d`` with mean computation and communication costs.
:func:`ready_order`, :func:`topo_priority`
    orderings: the ready node with the smallest key first; a node order made
    consistent with the dependencies.

The partial schedule that HEFT, CPOP, PEFT, DONF and the list-scheduling estimator
build (``EFTState``, ``list_schedule``) is :mod:`schedulers.eft_state`.
"""

from __future__ import annotations

import copy
import functools
import heapq
import inspect
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from hetsim.costmodel.base import as_cost_model
from hetsim.costmodel.platform import Platform as _Platform
from hetsim.costmodel.priced import PricedGraph, priced_graph
from hetsim.graphs.graph import check_io, tensor_bytes
from hetsim.schedulers.hyperparams import check_params
from hetsim.schedulers.run import PlanRun
from hetsim.sim.options import SimOptions
from hetsim.sim.plan import Plan

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.base import CostModel
    from hetsim.costmodel.platform import Link, Platform
    from hetsim.graphs.graph import Graph

__all__ = [
    "CostTable",
    "Scheduler",
    "SchedulerError",
    "Tensor",
    "downward_rank",
    "quantize",
    "ready_order",
    "topo_priority",
    "upward_rank",
]

INPUT_PREFIX = "<input>"


def answer(value: Any, what: str, cost: Any) -> float:
    """A cost model's time for WHAT as a float, when it is a finite number >= 0; else a
    :class:`SchedulerError` naming WHAT and the cost model (a NaN divided HEFT's mean
    op time by zero)."""
    try:
        t = float(value)
    except (TypeError, ValueError):
        t = math.nan
    if not math.isfinite(t) or t < 0:
        name = type(getattr(cost, "cost", cost)).__name__
        raise SchedulerError(f"cost model {name} returned {value!r} for {what} (need a finite time >= 0)")
    return t


class SchedulerError(ValueError):
    """A scheduler cannot plan this graph on this platform; the message says why."""


# --------------------------------------------------------------------------- costs
@dataclass
class Tensor:
    """One tensor: output ``key[1]`` of producer ``key[0]``, or a graph input.

    ``producer`` is None for a graph input (it starts on the platform host).
    ``is_output``: the tensor is a graph output, delivered to the host.
    """

    key: tuple[str, int]
    producer: str | None
    nbytes: int
    consumers: list[str] = field(default_factory=list)
    is_output: bool = False


class CostTable:
    """Op, dispatch and transfer times of a graph on a platform, priced once.

    Parameters
    ----------
    graph, platform, cost
        What to price. ``op_time`` is ``inf`` on a device whose memory cannot hold
        the op's working set.

    Attributes
    ----------
    devices : list[str]
        Device names in platform order.
    w : dict[str, dict[str, float]]
        ``w[node][device]``: op time (launch overhead included).
    disp : dict[str, dict[str, float]]
        ``disp[node][device]``: host dispatch time.
    tensors : dict[tuple[str, int], Tensor]
        Every tensor (producer outputs that are read or are graph outputs; graph
        inputs keyed ``("<input>name", 0)``).
    reads : dict[str, list[tuple[str, int]]]
        Tensors each node reads (deduplicated).
    outputs : dict[str, list[tuple[str, int]]]
        Graph-output tensors of each producer.
    """

    def __init__(self, graph: Graph, platform: Platform, cost: CostModel) -> None:
        check_io(graph)
        self.graph = graph
        self.platform = platform
        #: the priced graph (:class:`costmodel.priced.PricedGraph`): ``cost`` itself when
        #: it prices this graph on this platform (Scheduler.run's), else one over ``cost``
        self.cost = priced = priced_graph(graph, platform, cost)
        self.devices: list[str] = platform.device_names
        self.topo: list[str] = graph.topological_order()
        self.index: dict[str, int] = {n: i for i, n in enumerate(self.topo)}
        nodes = graph.nx.nodes
        positions = [priced.index[n] for n in self.topo]
        priced_times = [priced.times(d, positions) for d in range(len(platform.devices))]
        self.w: dict[str, dict[str, float]] = {}
        self.disp: dict[str, dict[str, float]] = {}
        for j, n in enumerate(self.topo):
            wn: dict[str, float] = {}
            dn: dict[str, float] = {}
            for dev, (ops, disp) in zip(platform.devices, priced_times):
                fits = nodes[n]["bytes"] <= dev.memory_bytes
                wn[dev.name] = answer(ops[j], f"node {n!r} on device {dev.name!r}", cost) if fits else math.inf
                dn[dev.name] = answer(disp[j], f"the dispatch of node {n!r} on device {dev.name!r}", cost)
            if all(math.isinf(t) for t in wn.values()):
                raise SchedulerError(f"node {n!r} fits in the memory of no device of {platform.name!r}")
            self.w[n] = wn
            self.disp[n] = dn
        self.tensors: dict[tuple[str, int], Tensor] = {}
        self.reads: dict[str, list[tuple[str, int]]] = {n: [] for n in self.topo}
        for u in self.topo:
            for v, ed in graph.nx.succ[u].items():
                key = (u, int(ed.get("output", 0)))
                t = self.tensors.get(key)
                if t is None:
                    t = self.tensors[key] = Tensor(key, u, 0)
                t.nbytes = max(t.nbytes, int(ed["bytes"]))
                if v not in t.consumers:
                    t.consumers.append(v)
                    self.reads[v].append(key)
        self.outputs: dict[str, list[tuple[str, int]]] = {}
        for spec in graph.meta.get("outputs") or []:
            node = spec.get("node")
            if node not in self.index:
                continue
            key = (node, int(spec.get("output", 0)))
            t = self.tensors.get(key)
            if t is None:  # sized like the simulator: the node's output spec first
                outs = nodes[node]["outputs"]
                size = (
                    tensor_bytes(outs[key[1]]["shape"], outs[key[1]]["dtype"])
                    if key[1] < len(outs)
                    else int(spec.get("bytes", 0))
                )
                t = self.tensors[key] = Tensor(key, node, size)
            t.is_output = True
            if key not in self.outputs.setdefault(node, []):
                self.outputs[node].append(key)
        for j, spec in enumerate(graph.meta.get("inputs") or []):
            key = (INPUT_PREFIX + str(spec.get("name", f"input{j}")), 0)
            t = Tensor(key, None, int(spec.get("bytes", 0)))
            for c in spec.get("consumers") or []:
                if c in self.index and c not in t.consumers:
                    t.consumers.append(c)
                    self.reads[c].append(key)
            self.tensors[key] = t
        self._hops: dict[tuple[str, str], list[tuple[str, Link]]] = {}
        self._comm: dict[tuple[int, str, str], float] = {}
        self._mean_comm: dict[int, float] = {}
        self._wbar: dict[str, float] = {}

    # --------------------------------------------------------------- transfers
    def hops(self, src: str, dst: str) -> list[tuple[str, Link]]:
        """``(resource, link)`` per hop from ``src`` to ``dst``; resources are named
        like the simulator's link directions (``"a->b"``; ``link.name`` when not
        duplex). Empty for devices sharing memory."""
        key = (src, dst)
        hit = self._hops.get(key)
        if hit is not None:
            return hit
        out = list(self.platform.link_directions(src, dst))
        self._hops[key] = out
        return out

    def comm(self, nbytes: int, src: str, dst: str) -> float:
        """Contention-free time to move ``nbytes`` from ``src`` to ``dst`` (all hops);
        between two devices of one memory domain, :meth:`handoff` plus
        :meth:`read_time` (the simulator's wake-up of the consuming worker and its
        slower read of the other core's output)."""
        key = (nbytes, src, dst)
        hit = self._comm.get(key)
        if hit is None:
            hops = self.hops(src, dst)
            if hops:
                hit = sum(answer(self.cost.transfer_time(nbytes, lk), f"{nbytes} bytes over link {lk.name!r}",
                                 self.cost) for _, lk in hops)
            else:
                hit = self.handoff(src, dst) + self.read_time(nbytes, src, dst)
            self._comm[key] = hit
        return hit

    def handoff(self, src: str, dst: str) -> float:
        """Delay of an input produced on ``src`` for an op on ``dst`` when both share
        memory: ``dst``'s ``handoff_s``, 0 on the same device."""
        return 0.0 if src == dst else float(self.platform.device(dst).handoff_s)

    def read_time(self, nbytes: int, src: str, dst: str) -> float:
        """Extra time an op on ``dst`` spends reading ``nbytes`` that ``src`` produced
        when both share memory (``dst``'s ``handoff_bandwidth_bytes_per_s``); 0 on
        the same device, across memory domains (a transfer) or without that rate."""
        bw = self.platform.device(dst).handoff_bandwidth_bytes_per_s
        if src == dst or not bw or not self.platform.shares_memory(src, dst):
            return 0.0
        return nbytes / bw

    def mean_comm(self, nbytes: int) -> float:
        """Mean of :meth:`comm` over ordered pairs of distinct devices (HEFT's c-bar)."""
        hit = self._mean_comm.get(nbytes)
        if hit is None:
            devs = self.devices
            pairs = [(a, b) for a in devs for b in devs if a != b]
            hit = sum(self.comm(nbytes, a, b) for a, b in pairs) / len(pairs) if pairs else 0.0
            self._mean_comm[nbytes] = hit
        return hit

    def edge_bytes(self, u: str, v: str) -> int:
        """Bytes of the tensor on edge ``u -> v``."""
        return self.tensors[(u, int(self.graph.nx.edges[u, v].get("output", 0)))].nbytes

    # -------------------------------------------------------------- op times
    def wbar(self, n: str) -> float:
        """Mean op time of ``n`` over the devices it fits on."""
        hit = self._wbar.get(n)
        if hit is None:
            finite = [t for t in self.w[n].values() if math.isfinite(t)]
            hit = self._wbar[n] = sum(finite) / len(finite)
        return hit

    def fastest(self, n: str) -> str:
        """Device with the smallest op time for ``n`` (first in platform order on ties)."""
        wn = self.w[n]
        return min(self.devices, key=wn.__getitem__)

    def total(self, device: str, nodes: Iterable[str] | None = None) -> float:
        """Sum of op times of ``nodes`` (default: all) on ``device``."""
        return sum(self.w[n][device] for n in (self.topo if nodes is None else nodes))


# --------------------------------------------------------------------------- ranks
def quantize(values: Mapping[str, float]) -> dict[str, int]:
    """Values rounded to 1e-9 of the largest magnitude, so that float noise does not
    break ties (two ranks that are equal on paper compare equal)."""
    scale = max((abs(v) for v in values.values() if math.isfinite(v)), default=0.0) or 1.0
    return {k: round(v / scale * 1e9) if math.isfinite(v) else (1 << 62) for k, v in values.items()}


def upward_rank(table: CostTable) -> dict[str, float]:
    """HEFT's ``rank_u(n) = wbar(n) + max_s (cbar(n, s) + rank_u(s))``.

    Topcuoglu et al. 2002, eq. (5): mean op time over devices and mean transfer
    time over device pairs. O(V + E).
    """
    rank: dict[str, float] = {}
    g = table.graph.nx
    for n in reversed(table.topo):
        best = 0.0
        for s in g.successors(n):
            best = max(best, table.mean_comm(table.edge_bytes(n, s)) + rank[s])
        rank[n] = table.wbar(n) + best
    return rank


def downward_rank(table: CostTable) -> dict[str, float]:
    """HEFT's ``rank_d(n) = max_p (rank_d(p) + wbar(p) + cbar(p, n))`` (eq. 6). O(V + E)."""
    rank: dict[str, float] = {}
    g = table.graph.nx
    for n in table.topo:
        rank[n] = max(
            (rank[p] + table.wbar(p) + table.mean_comm(table.edge_bytes(p, n)) for p in g.predecessors(n)),
            default=0.0,
        )
    return rank


def ready_order(graph: Graph, key: Callable[[str], Any]) -> list[str]:
    """Topological order that always takes the ready node with the smallest ``key``.

    Ties fall to the graph's deterministic topological index. O((V + E) log V).
    """
    topo = graph.topological_order()
    index = {n: i for i, n in enumerate(topo)}
    g = graph.nx
    missing = {n: g.in_degree(n) for n in topo}
    heap = [(key(n), index[n], n) for n in topo if missing[n] == 0]
    heapq.heapify(heap)
    out: list[str] = []
    while heap:
        _, _, n = heapq.heappop(heap)
        out.append(n)
        for s in g.successors(n):
            missing[s] -= 1
            if missing[s] == 0:
                heapq.heappush(heap, (key(s), index[s], s))
    return out


def topo_priority(graph: Graph, order: Sequence[str] | None = None) -> dict[str, float]:
    """Integer priorities from a node ordering, made consistent with dependencies.

    The result is the position of each node in the topological order closest to
    ``order`` (a stable topological sort keyed by position in ``order``); None
    gives the graph's own topological order.
    """
    if order is None:
        return {n: float(i) for i, n in enumerate(graph.topological_order())}
    pos = {n: i for i, n in enumerate(order)}
    return {n: float(i) for i, n in enumerate(ready_order(graph, pos.__getitem__))}


# -------------------------------------------------------------------------- base
class Scheduler:
    """Base class: ``schedule(graph, platform, cost) -> Plan``.

    Subclasses set ``name``, take their hyper-parameters as keyword constructor
    arguments stored under the same attribute names (:meth:`get_params` reads
    them back, scikit-learn style), implement ``_schedule`` and, when they do not
    apply everywhere, ``why_not``.

    Two optional steps around scheduling:

    * :meth:`transform` rewrites the graph before scheduling (identity by default;
      tensor-split splits operators). :meth:`run` transforms, schedules and
      simulates the plan on the rewritten graph: what every caller uses.
    * :meth:`applies_to` tells a comparison whether to run this scheduler at all.
    """

    name: ClassVar[str] = ""
    min_devices: ClassVar[int] = 1
    #: the smallest value of a numeric hyper-parameter where it is above 0 (``{"microbatches": 1}``)
    minimum: ClassVar[Mapping[str, float]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Every subclass's hyper-parameters are checked against their declared types
        (:func:`schedulers.hyperparams.check_params`) before its ``__init__`` runs."""
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is None or getattr(init, "checks_hyperparams", False):
            return

        @functools.wraps(init)
        def checked_init(self: Scheduler, *args: Any, **params: Any) -> None:
            init(self, *args, **check_params(cls.name or cls.__name__, init, params, cls.minimum))

        checked_init.checks_hyperparams = True  # type: ignore[attr-defined]
        cls.__init__ = checked_init  # type: ignore[method-assign]

    # ------------------------------------------------------------- parameters
    def get_params(self) -> dict[str, Any]:
        """Constructor keyword arguments and their current values."""
        sig = inspect.signature(type(self).__init__)
        return {
            p: getattr(self, p)
            for p, spec in sig.parameters.items()
            if p != "self" and spec.kind is inspect.Parameter.KEYWORD_ONLY
        }

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    # ----------------------------------------------------------- applicability
    def why_not(self, graph: Graph, platform: Platform) -> str | None:
        """Why this scheduler cannot plan ``graph`` on ``platform`` (None: it can)."""
        if len(platform.devices) < self.min_devices:
            return (
                f"{self.name} needs at least {self.min_devices} devices; "
                f"platform {platform.name!r} has {len(platform.devices)}"
            )
        return None

    def applies_to(self, graph: Graph, platform: Platform) -> bool:
        """True when :meth:`schedule` can plan ``graph`` on ``platform``."""
        return graph.number_of_nodes() > 0 and self.why_not(graph, platform) is None

    # -------------------------------------------------------------- scheduling
    def transform(self, graph: Graph, platform: Platform, cost: CostModel) -> Graph:
        """Rewrite the graph before scheduling; identity unless overridden."""
        return graph

    def schedule(self, graph: Graph, platform: Platform, cost: CostModel) -> Plan:
        """Plan ``graph`` on ``platform``; the plan is validated before it is returned.

        Raises
        ------
        SchedulerError
            on an empty graph or a platform/graph this scheduler does not handle.
        """
        if graph.number_of_nodes() == 0:
            raise SchedulerError(f"{self.name}: graph {graph.name!r} is empty: nothing to schedule")
        reason = self.why_not(graph, platform)
        if reason is not None:
            raise SchedulerError(reason)
        t0 = time.perf_counter()
        plan = self._schedule(graph, platform, cost)
        elapsed = time.perf_counter() - t0
        plan.meta = {
            **plan.meta,
            "scheduler": self.name,
            "params": self.get_params(),
            "scheduling_time_s": elapsed,
        }
        return plan.validate(graph, platform)

    def run(
        self,
        graph: Graph,
        platform: Platform | str,
        cost: Any = None,
        options: SimOptions | None = None,
        *,
        simulate: bool = True,
        **option_keywords: Any,
    ) -> PlanRun:
        """Plan ``graph`` and simulate the plan: the one path every caller takes.

        :meth:`transform` rewrites the graph, :meth:`schedule` plans the rewritten
        graph, and the plan is simulated on it.

        Parameters
        ----------
        graph
            The model graph.
        platform
            A :class:`~sim.platform.Platform`, preset name or TOML path.
        cost
            A cost model or spec (:func:`costmodel.as_cost_model`; None: each device's default source);
            the same model plans and prices, through one :class:`costmodel.priced.PricedGraph`
            of the planned graph that the scheduler gets as its cost model and the
            simulation reuses (``PlanRun.priced``).
        simulate
            False: plan only (``result`` None), e.g. to simulate later with
            :meth:`PlanRun.simulate`.
        options
            Options of :func:`sim.simulate` (:class:`~sim.options.SimOptions`:
            ``requests``, default the plan's ``microbatches``, else 1; ``interval_s``,
            ``record``, ``seed``, ``noise``, ``check_memory``); each may also be given
            as a keyword (``requests=8``), which sets it in ``options``.

        Returns
        -------
        PlanRun
            The graph the plan is for, the plan, the simulation, the wall times;
            :meth:`PlanRun.metrics` is its results row.

        Raises
        ------
        SchedulerError
            when this scheduler cannot plan the graph on the platform; whatever the
            plan's validation (:class:`~sim.plan.PlanError`) or the simulation
            (:class:`~sim.engine.simulator.SimulationError`, e.g. out of memory) raise.
        """
        platform = _Platform.load(platform)
        cost = as_cost_model(cost, platform=platform)
        opts = SimOptions.of(options, option_keywords, "run")
        sched = self.for_requests(opts.requests, opts.interval_s)
        t0 = time.perf_counter()
        g2 = sched.transform(graph, platform, cost)
        priced = PricedGraph(g2, platform, cost)  # priced once: the scheduler's and the simulation's
        plan = sched.schedule(g2, platform, priced)
        run = PlanRun(g2, platform, cost, plan, scheduling_time_s=time.perf_counter() - t0, priced=priced)
        return run.simulate(opts) if simulate else run

    def for_requests(self, requests: int | None, interval_s: float = 0.0) -> Scheduler:
        """This scheduler set up for the requests its plan will serve (:meth:`run` calls it).

        A scheduler whose plan depends on them takes hyper-parameters ``requests``
        (and ``interval_s``) whose default None means "those of the run": it gets a
        copy with them set (``requests`` None: 1), so that ``plan.meta["params"]``
        says what the plan was made for. Others are returned as they are.
        """
        params = self.get_params()
        if params.get("requests", 0) is not None:
            return self
        out = copy.copy(self)
        out.requests = int(requests or 1)
        if "interval_s" in params and params["interval_s"] is None:
            out.interval_s = float(interval_s or 0.0)
        return out

    def _schedule(self, graph: Graph, platform: Platform, cost: CostModel) -> Plan:
        raise NotImplementedError
