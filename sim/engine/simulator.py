"""The discrete-event engine: replay a plan on a platform's resources, on SimPy.

Model
-----
* Every device stream and every link direction is a server that pulls work from
  its own ready queue (a heap keyed by ``(request, priority)``, lower first; the
  default priority is the topological index). A half-duplex link is one server
  for both directions. SimPy owns the clock: a server holds it for each kernel,
  dispatch and hop with one event of its own, scheduled again and again with
  ``env.schedule`` (:class:`sim.engine.servers.Due`), and waits on SimPy events
  (:mod:`sim.engine.servers`). (One server per resource rather than a
  ``simpy.Resource`` request per op, and callbacks rather than processes: a
  request/release pair costs ~11 us per op, a generator resume ~0.3 us per event.
  Records are kept as tuples: ``SimResult.records`` makes the dicts on first access.
  The whole call's speed, and a prepared :class:`Simulator`'s, beside a naive heapq
  replay of the same plan: ``python benchmarks/sim_speed.py``.)
* An op is ready when every input tensor is on its device. A tensor crossing memory
  domains is a transfer over the links of ``platform.route(src, dst)``, hop by hop
  (store and forward); a tensor ``(producer, output)`` moves once per destination
  device, however many consumers read it there. An input produced by another
  device of the same memory domain needs no transfer, but reaches the consumer
  ``device.handoff_s`` (the consumer's) after its producer finished: a worker
  thread's wake-up on another core; and the consumer (unless it is a zero-time
  view) runs ``bytes / device.handoff_bandwidth_bytes_per_s`` longer, reading that
  input from the other core's caches.
* Every kernel launch first holds the host dispatcher (``platform.dispatch_threads``
  slots, FIFO) for :func:`costmodel.host_dispatch` (``cost.dispatch_time(...)``, or
  ``device.dispatch_s`` when the cost model has none) while its stream waits, then
  runs ``op_time``.
  Ops priced at zero (view ops) complete the moment they are ready, on no stream
  (except on a platform with a launching GPU, below, where every op goes through
  its worker, as in the executor).
* On a platform with a GPU whose ``launch`` is ``"eager"`` or ``"graph"``, the host
  runs as it does (:mod:`sim.engine.host`) instead of that shared dispatcher: each
  worker (device stream) has a host thread; a CPU worker runs an op's call, the op
  and its cross-device epilogue in series; a GPU worker's host thread launches ops
  (eager: one per op, its dispatch time; graph: one ``graph_launch_s`` per segment
  between cross-device edges, every op of the segment included), the free launch
  the plan ranks first (a launch waits for the launches of its device it reads and
  for its producers on other devices to issue their copies: a CPU producer when it
  has run, a GPU producer when its launch is issued), up to
  ``launch_queue_depth`` launches ahead of the kernels, and a kernel starts at
  max(launch issued, stream free, inputs ready); an idle host thread is woken per
  launch made free, the last to go idle first. Copies on a link direction go in
  their producers' launch order among those ready (the executor's copy streams
  serve copies in the order they are issued). Cross-device edges charge
  ``event_s`` (record on the producer's thread, wait on the consumer's) and
  ``copy_issue_s`` (per copy, on the producer's thread) of the GPU at either end,
  and a GPU's tensor moved to a CPU worker of another memory reaches it
  ``handoff_s`` (the CPU's) after it arrives. ``Platform.interpreter_lock``: every
  host part holds one shared lock. Host work is recorded as ``"launch"`` and
  ``"host"`` records on ``"DEVICE.host"`` resources (one stream per worker) and
  counted in ``dispatch_busy``.
* Graph inputs (``graph.meta["inputs"]``) start on the host when a request arrives;
  graph outputs (``meta["outputs"]``) are sent back to the host and count in the
  request's latency.
* Memory per device: the weights (``param_bytes``) of the ops placed there are
  resident from the start; an output buffer is allocated when its producer is
  launched (a transferred copy when its transfer starts) and freed when the last
  reader on that device has finished (the source copy: when its transfers have
  arrived). Graph outputs stay on the host until the request completes.
* A dynamic plan's ``policy.select(node, view)`` places a node when all its
  predecessors have finished (on a launching GPU: have been launched, as the
  executor's GPU worker places the readers of an op it has launched; the reader's
  kernel or transfer then waits for the op); ``view`` is a :class:`sim.plan.SystemView`. As in
  the executor, the stream whose op made nodes placeable runs the policy for each
  of them before it takes its next op: it holds a host dispatch slot (the
  interpreter) for ``platform.decision_s`` per node (a ``"decision"`` record), and
  the nodes are ready when it is done, plus the device's ``handoff_s`` when an
  input comes from another device of its memory domain. A node placeable without
  a stream's op (a request's root, a reader of a zero-time op completed by a
  transfer) is ready ``decision_s`` after, holding nothing.
* Memory contention (only for platforms with ``memory_domains``): while the
  devices and link directions drawing on one memory demand more than its
  bandwidth, their ops and transfers progress proportionally slower
  (:mod:`sim.contention`); records and busy times are the stretched durations.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import networkx as nx

from hetsim.costmodel.base import as_cost_model
from hetsim.costmodel.priced import PricedGraph
from hetsim.graphs.bulk_check import EdgeColumns, edge_columns
from hetsim.graphs.graph import validate
from hetsim.sim.collector import pause_collector, resume_collector
from hetsim.sim.engine.prep import GraphTables, PrepError, index_graph, prepare
from hetsim.sim.engine.run import EngineRun
from hetsim.sim.engine.state import SimulationError, check_arrivals
from hetsim.sim.options import SimOptions
from hetsim.sim.plan import NodeMemory, node_memory
from hetsim.sim.platform import Platform

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.graphs.graph import Graph
    from hetsim.sim.plan import Plan
    from hetsim.sim.result import SimResult

__all__ = ["SimulationError", "Simulator", "simulate"]


def simulate(
    graph: Graph,
    platform: Platform | str,
    plan: Plan,
    cost: Any = None,
    options: SimOptions | None = None,
    **option_keywords: Any,
) -> SimResult:
    """Simulate ``plan`` running ``graph`` on ``platform``.

    Parameters
    ----------
    graph, platform, plan
        What runs, where, in which order. ``platform`` may be a preset name or a
        TOML path. The plan is validated first (:class:`sim.plan.PlanError`).
    cost
        A cost model or spec (:func:`costmodel.as_cost_model`); ``None``: each device
        priced by its own source (``Device.cost``), the roofline where it names none.
    options
        How the simulation runs (:class:`~sim.options.SimOptions`: ``requests``,
        ``interval_s``, ``record``, ``seed``, ``noise``, ``check_memory``); each may
        also be given as a keyword (``requests=8``), which sets it in ``options``.

    Returns
    -------
    SimResult

    Examples
    --------
    >>> from hetsim.graphs import Graph
    >>> from hetsim.sim import Plan, Platform
    >>> g = Graph()
    >>> g.add_op("a", "matmul", flops=2e9, bytes=12_000_000)
    >>> g.add_op("b", "relu", bytes=8_000_000)
    >>> g.add_edge("a", "b", bytes=4_000_000)
    >>> res = simulate(g, Platform.preset("xeon-p2200"), Plan({"a": "gpu", "b": "cpu"}))
    >>> # dispatch 6 us, matmul 1007 us, copy 10 + 333.3 us, dispatch 5 us, relu 58.8 us
    >>> res.bytes_moved["gpu->cpu"], round(res.makespan * 1e6, 1)
    (4000000, 1420.2)
    """
    collecting = pause_collector()  # before the Simulator is allocated
    try:
        return Simulator(graph, platform, cost).simulate(plan, SimOptions.of(options, option_keywords, "simulate"))
    finally:
        resume_collector(collecting)


class Simulator:
    """Simulate plans of one graph on one platform with one cost model, reading the
    graph once.

    :func:`simulate` reads the graph's networkx dicts (node order, edges, tensor sizes,
    weights) at every call: about 0.2 s of a 0.7 s call at 100 000 nodes here. A
    Simulator reads them at its first simulation and keeps them for the next ones (a
    sweep over plans, a scheduler trying candidates); ``Simulator(graph, platform,
    cost).simulate(plan, ...)`` gives what ``simulate(graph, platform, plan, cost, ...)``
    gives, record for record. The graph must not change while a Simulator of it is in
    use: make a new one after changing it.

    Examples
    --------
    >>> from hetsim.graphs import Graph
    >>> from hetsim.sim import Plan
    >>> g = Graph()
    >>> g.add_op("a", "matmul", flops=2e9, bytes=12_000_000)
    >>> g.add_op("b", "relu", bytes=8_000_000)
    >>> g.add_edge("a", "b", bytes=4_000_000)
    >>> sim = Simulator(g, "xeon-p2200")
    >>> [round(sim.simulate(Plan({"a": a, "b": b})).makespan * 1e6, 1)
    ...  for a, b in [("gpu", "cpu"), ("gpu", "gpu"), ("cpu", "cpu")]]
    [1420.2, 1064.0, 1347.2]
    """

    def __init__(self, graph: Graph, platform: Platform | str, cost: Any = None) -> None:
        if isinstance(platform, str):
            platform = Platform.load(platform)
        cost = as_cost_model(cost, platform=platform)  # None: each device's own source
        # the edges read once, for the checks and the engine's tables (index_graph)
        self.columns: EdgeColumns | None = edge_columns(graph) if type(graph.nx) is nx.DiGraph else None
        validate(graph, columns=self.columns)  # values set through graph.nodes[n] or Graph(nx) are checked too
        self.graph, self.platform, self.cost = graph, platform, cost
        self.tables: GraphTables | None = None  # sim.engine.prep.index_graph, at the first simulation
        # the op, dispatch and transfer times, priced once for every plan: the given
        # PricedGraph of this graph and platform (Scheduler.run's), or one made at the
        # first simulation; ``positions``: engine index -> its position (None: the same)
        self.priced: PricedGraph | None = (cost if isinstance(cost, PricedGraph) and cost.prices(graph, platform)
                                           else None)
        self.positions: list[int] | None = None
        #: the nodes' bytes and weights as arrays for plan validation (sim.plan.node_memory), read once
        self.memory: NodeMemory | None = None

    def align(self) -> None:
        """Number the priced graph's tables like the engine's (after :func:`index_graph`)."""
        topo = self.tables.topo
        if self.priced is None:
            self.priced = PricedGraph(self.graph, self.platform, self.cost, nodes=topo)
        elif self.priced.nodes != topo:
            index = self.priced.index
            self.positions = [index[n] for n in topo]

    def simulate(
        self,
        plan: Plan,
        options: SimOptions | None = None,
        **option_keywords: Any,
    ) -> SimResult:
        """Simulate ``plan``; ``options`` and the keyword arguments are those of :func:`simulate`."""
        opts = SimOptions.of(options, option_keywords, "simulate")
        collecting = pause_collector()
        graph, platform = self.graph, self.platform
        try:
            if self.memory is None:
                self.memory = node_memory(graph)
            plan.validate(graph, platform, memory=self.memory)
            n_req = opts.requests if opts.requests is not None else (plan.microbatches or 1)  # checked by validate
            check_arrivals(n_req, opts.interval_s)
            if self.tables is None:
                self.tables = index_graph(graph, self.columns)
                self.columns = None  # read into the tables
                self.align()
            prep = prepare(self.tables, platform, plan)
            run = EngineRun(graph, platform, plan, self.priced, prep, n_req=n_req, interval=float(opts.interval_s),
                            positions=self.positions)
            run.configure(opts)
            return run.execute()
        except PrepError as e:
            raise SimulationError(str(e)) from None
        finally:
            resume_collector(collecting)
