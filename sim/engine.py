"""The discrete-event engine: replay a plan on a platform's resources, on SimPy.

Model
-----
* Every device stream and every link direction is a server that pulls work from
  its own ready queue (a heap keyed by ``(request, priority)``, lower first; the
  default priority is the topological index). A half-duplex link is one server
  for both directions. SimPy owns the clock: a server holds it for each kernel,
  dispatch and hop with one event of its own, scheduled again and again with
  ``env.schedule`` (:class:`sim.engine_servers.Due`), and waits on SimPy events
  (:mod:`sim.engine_servers`). (One server per resource rather than a
  ``simpy.Resource`` request per op, and callbacks rather than processes: a
  request/release pair costs ~11 us per op, a generator resume ~0.3 us per event.
  The whole call runs about 130 000-140 000 ops/s at 100 000 nodes, 113 000-125 000
  with records (kept as tuples: ``SimResult.records`` makes the dicts on first
  access), on the project's 2-core VM on a quiet hour (half that on a busy one):
  ``python benchmarks/sim_speed.py``; 10x a bare heapq replay of the same plan;
  about 60 % of the call is preparation: plan validation, pricing and the integer
  tables.)
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
  Ops priced at zero (view ops) complete the moment they are ready, on no stream.
* Graph inputs (``graph.meta["inputs"]``) start on the host when a request arrives;
  graph outputs (``meta["outputs"]``) are sent back to the host and count in the
  request's latency.
* Memory per device: the weights (``param_bytes``) of the ops placed there are
  resident from the start; an output buffer is allocated when its producer is
  launched (a transferred copy when its transfer starts) and freed when the last
  reader on that device has finished (the source copy: when its transfers have
  arrived). Graph outputs stay on the host until the request completes.
* A dynamic plan's ``policy.select(node, view)`` places a node when all its
  predecessors have finished; ``view`` is a :class:`sim.plan.SystemView`. As in
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

import gc
import math
from collections import deque
from heapq import heappush
from typing import TYPE_CHECKING, Any

import numpy as np
import simpy

from hetsim.sim.contention import Contention
from hetsim.sim.engine_ops import bind_op_handlers
from hetsim.sim.engine_prep import (
    Fanout,
    GraphTables,
    Prepared,
    PrepError,
    build_fanout,
    index_graph,
    prepare,
    priced_route,
    static_fanouts,
)
from hetsim.sim.engine_pricing import Prices
from hetsim.sim.engine_servers import start_servers
from hetsim.sim.engine_state import (
    DONE,
    STATE_NAMES,
    PolicyView,
    Request,
    SimulationError,
    Transfer,
    check_arrivals,
)
from hetsim.sim.plan import size_text
from hetsim.sim.platform import Platform
from hetsim.sim.result import SimResult

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.graphs.graph import Graph
    from hetsim.sim.plan import Plan

__all__ = ["SimulationError", "Simulator", "simulate"]


def simulate(
    graph: Graph,
    platform: Platform | str,
    plan: Plan,
    cost: Any = None,
    *,
    requests: int | None = None,
    interval_s: float = 0.0,
    record: bool = False,
    seed: int | None = None,
    noise: float = 0.0,
    check_memory: bool = True,
) -> SimResult:
    """Simulate ``plan`` running ``graph`` on ``platform``.

    Parameters
    ----------
    graph, platform, plan
        What runs, where, in which order. ``platform`` may be a preset name or a
        TOML path. The plan is validated first (:class:`sim.plan.PlanError`).
    cost
        A :class:`costmodel.CostModel`; ``None``: :class:`costmodel.roofline.Roofline`.
    requests
        Inference requests (or micro-batches) that flow through the plan, arriving
        every ``interval_s``. ``None``: ``plan.microbatches`` or 1.
    interval_s
        Time between request arrivals (0: all arrive at once, a batch).
    record
        Keep one record per op, transfer hop and dispatch (``SimResult.records``).
    seed, noise
        ``noise`` is the coefficient of variation of a mean-one log-normal factor
        applied to every kernel and transfer hop; ``seed`` seeds it (and
        ``view.rng``, a :class:`numpy.random.Generator` that dynamic policies may use).
    check_memory
        Raise :class:`SimulationError` when a device's memory overflows (default);
        ``False``: finish the run and report it in ``SimResult.failures``.

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
    # The collector is paused before anything is allocated (here: the Simulator), as
    # Simulator.simulate pauses it: an allocation before the pause would trigger, in a
    # sweep, a collection of everything the previous call allocated while it was paused
    # (0.2 s at 100 000 nodes) inside this call, and a second one after it.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return Simulator(graph, platform, cost).simulate(
            plan, requests=requests, interval_s=interval_s, record=record, seed=seed, noise=noise,
            check_memory=check_memory,
        )
    finally:
        if gc_was_enabled:
            gc.enable()


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
        if cost is None:
            from hetsim.costmodel.roofline import Roofline

            cost = Roofline()
        self.graph, self.platform, self.cost = graph, platform, cost
        self.tables: GraphTables | None = None  # sim.engine_prep.index_graph, at the first simulation

    def simulate(
        self,
        plan: Plan,
        *,
        requests: int | None = None,
        interval_s: float = 0.0,
        record: bool = False,
        seed: int | None = None,
        noise: float = 0.0,
        check_memory: bool = True,
    ) -> SimResult:
        """Simulate ``plan``; the keyword arguments are those of :func:`simulate`."""
        graph, platform = self.graph, self.platform
        # The run allocates many small objects that never form garbage cycles; pausing
        # the cyclic collector during it saves a third of the time on large graphs (and
        # the plan's check too: in a sweep, a full collection of a large graph's objects
        # would otherwise fall in it).
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            plan.validate(graph, platform)
            n_req = requests if requests is not None else (plan.microbatches or 1)  # microbatches: checked by validate
            check_arrivals(n_req, interval_s)
            if not isinstance(noise, int | float) or not math.isfinite(noise) or noise < 0:
                raise SimulationError(f"noise must be a finite number >= 0, got {noise!r}")
            if self.tables is None:
                self.tables = index_graph(graph)
            prep = prepare(graph, platform, plan, self.tables)
            run = EngineRun(graph, platform, plan, self.cost, prep, n_req=n_req, interval=float(interval_s))
            run.configure(record=record, seed=seed, noise=float(noise), check_memory=check_memory)
            return run.execute()
        except PrepError as e:
            raise SimulationError(str(e)) from None
        finally:
            if gc_was_enabled:
                gc.enable()


def _bytes(n: int) -> str:
    """``"1100 bytes"``, ``"6442450944 bytes (6.0 GiB)"``: exact, and readable when large."""
    return f"{n} bytes" if n < 2**20 else f"{n} bytes ({size_text(n)})"


class EngineRun:
    """One simulation: integer tables, mutable state and the handlers of its events.

    The servers (:mod:`sim.engine_servers`) call ``_start``/``_finish`` for ops
    and ``_xfer_start``/``_xfer_done`` for transfers; these update memory, wake
    successors and queue transfers.
    """

    def __init__(
        self,
        graph: Graph,
        platform: Platform,
        plan: Plan,
        cost: Any,
        prep: Prepared,
        *,
        n_req: int,
        interval: float,
    ) -> None:
        self.graph, self.platform, self.plan, self.cost = graph, platform, plan, cost
        self.prep, self.n_req, self.interval = prep, n_req, interval
        self.env = simpy.Environment()
        # memory-bandwidth contention (sim.contention): None unless the platform declares it
        self.contention = (Contention(self.env, platform, prep.dev_names, prep.res_names)
                           if platform.memory_domains else None)
        n_dev = len(prep.dev_names)
        self.n_dev = n_dev
        self.dev_index = {d: i for i, d in enumerate(prep.dev_names)}
        self.handoff = [float(d.handoff_s) for d in platform.devices]
        self.decision = float(getattr(platform, "decision_s", 0.0))
        self.dynamic = plan.policy is not None
        self.policy = plan.policy
        self.prices = Prices(graph, platform, cost, prep)
        self._price = self.prices.get
        self.sfo = static_fanouts(prep, platform, cost.transfer_time)
        self._dfo: dict[tuple[int, int], Fanout] = {}
        self._dyn_groups: dict[tuple[int, int, int, int], tuple] = {}
        n = prep.n_ops
        loc0 = prep.loc0
        self.static = [d >= 0 for d in loc0[:n]]
        self.top, self.tdsp = self.prices.op, self.prices.dispatch
        # reading inputs that another device of the same memory produced: priced into a
        # static op's time here when every producer is static, else when it is ready
        self.spb = [1.0 / d.handoff_bandwidth_bytes_per_s if d.handoff_bandwidth_bytes_per_s else 0.0
                    for d in platform.devices]
        self.baked = [True] * n
        if any(self.spb):
            top = self.top
            for u in range(n):
                d = loc0[u]
                if d >= 0 and all(loc0[p] >= 0 for p, _ in prep.preds[u] if p < n):
                    if top[u] > 0.0:
                        top[u] += self._xread(u, d, loc0)
                else:
                    self.baked[u] = False
        self.npred = [len(p) for p in prep.preds] + [0] * (len(prep.names) - n)
        # dynamic plans: how many policy-placed readers each tensor has (a moved copy
        # lives until they are all placed: a tensor moves to a device once per request)
        self.dyn_readers: dict[tuple[int, int], int] = {}
        if self.dynamic:
            for v in range(n):
                if loc0[v] < 0:
                    for key in prep.preds[v]:
                        self.dyn_readers[key] = self.dyn_readers.get(key, 0) + 1
        self.roots = [u for u in range(n) if not prep.preds[u]]
        # memory
        self.mem = [0] * n_dev
        params = prep.params
        for u in range(n):
            if loc0[u] >= 0 and params[u]:
                self.mem[loc0[u]] += params[u]
        self.peak = list(self.mem)
        self.weights = list(self.mem)
        self.placed: set[tuple[int, int]] = set()
        self.failures: list[str] = []
        self._overflowed: set[int] = set()
        # servers
        self.heaps: list[list[int]] = [[] for _ in range(n_dev)]
        self.idle: list[deque] = [deque() for _ in range(n_dev)]
        self.stream_end = [[0.0] * s for s in prep.streams]
        self.queued = [0.0] * n_dev
        self.busy = [0.0] * n_dev
        n_res = len(prep.res_names)
        self.lheaps: list[list] = [[] for _ in range(n_res)]
        self.lidle: list[deque] = [deque() for _ in range(n_res)]
        self.lbusy = [0.0] * n_res
        self.lbytes = [0] * n_res
        self.free_slots = list(range(platform.dispatch_threads - 1, -1, -1))
        self.slot_waiters: deque = deque()
        self.disp_busy = 0.0
        # dynamic plans: the placements a stream's finished op triggers, decided by that
        # stream holding a dispatch slot (sim.engine_servers); None outside such a batch
        self.deciding: list | None = None
        self.seq = 0
        self.zero: deque = deque()
        self.reqs: list[Request | None] = [None] * n_req
        self.arrivals = [0.0] * n_req
        self.completions = [math.nan] * n_req
        self.done = 0
        self.configure()
        bind_op_handlers(self)

    def configure(
        self,
        *,
        record: bool = False,
        seed: int | None = None,
        noise: float = 0.0,
        check_memory: bool = True,
    ) -> None:
        """Options of :func:`simulate` (before :meth:`execute`)."""
        self.seed, self.check_memory = seed, check_memory
        self.sigma = math.sqrt(math.log1p(noise * noise)) if noise > 0 else 0.0
        self.records: list[tuple] | None = [] if record else None
        self.node_bytes: list[int] = []
        if record:
            self.node_bytes = [int(d["bytes"]) for d in self.prep.node_data]
        self.view = PolicyView(self)
        self.seeds = np.random.SeedSequence(seed).spawn(self.n_req) if self.sigma > 0 else None

    def _xread(self, v: int, dv: int, loc: list[int]) -> float:
        """Time op ``v`` on device ``dv`` spends reading inputs produced on other devices
        of its memory domain (placements ``loc``)."""
        spb = self.spb[dv]
        if spb == 0.0:
            return 0.0
        prep = self.prep
        same, n, size = prep.domain_same[dv], prep.n_ops, prep.out_size
        return spb * sum(size[p][k] for p, k in prep.preds[v] if p < n and loc[p] != dv and same[loc[p]])

    def _fanout(self, u: int, du: int) -> Fanout:
        """The fan-out of a node placed at run time (:func:`sim.engine_prep.build_fanout`)."""
        fo = self._dfo.get((u, du))
        if fo is None:
            fo = build_fanout(self.prep, self.platform, self.cost.transfer_time, u, du, self.prep.loc0)
            self._dfo[(u, du)] = fo
        return fo

    # ----------------------------------------------------------------- memory
    def _alloc(self, di: int, size: int, req: Request, what: str, about: Any) -> None:
        m = self.mem[di] + size
        self.mem[di] = m
        if m > self.peak[di]:
            self.peak[di] = m
            if m > self.prep.capacity[di] and di not in self._overflowed:
                self._overflow(di, m, req, what, about)

    def _overflow(self, di: int, m: int, req: Request, what: str, about: Any) -> None:
        names = self.prep.names
        if what == "op":
            what = f"op {names[about]!r} started"
        elif what == "weights":
            what = f"the weights of op {names[about]!r} were placed"
        else:
            what = f"tensor {names[about.p]!r}[{about.k}] started moving to it"
        cap = self.prep.capacity[di]
        msg = (
            f"device {self.prep.dev_names[di]!r} out of memory at t={self.env.now:.6g} s: "
            f"{_bytes(m)} in use > capacity {_bytes(cap)}, "
            f"when {what} (request {req.r})"
        )
        if self.check_memory:
            raise SimulationError(msg)
        self._overflowed.add(di)
        self.failures.append(msg)

    def _decref(self, req: Request, key: int) -> None:
        refs = req.refs
        c = refs[key] - 1
        if c:
            refs[key] = c
        else:
            del refs[key]
            p, k, d = self.prep.unbuffer(key)
            self.mem[d] -= self.prep.out_size[p][k]

    # --------------------------------------------------------------- op events
    # _start, _fan, _finish, _ready, _drain: sim.engine_ops.bind_op_handlers
    def _handed_after(self, req: Request, v: int, delay: float) -> None:
        """:meth:`_handed` ``delay`` seconds from now (a decision, a handoff), or now."""
        if delay > 0.0:
            self.env.timeout(delay).callbacks.append(lambda _e: self._handed(req, v))
        else:
            self._handed(req, v)

    def _handed(self, req: Request, v: int) -> None:
        """An input from another device of ``v``'s memory domain, after the handoff."""
        c = req.pending[v] - 1
        req.pending[v] = c
        if c == 0:
            self._ready(req, v)
            self._drain()

    def _place(self, req: Request, v: int) -> None:
        prep = self.prep
        name = prep.names[v]
        self.view._req = req
        dev = self.policy.select(name, self.view)
        di = self.dev_index.get(dev)
        if di is None:
            raise SimulationError(
                f"policy {getattr(self.policy, 'name', self.policy)!r} placed node {name!r} on "
                f"unknown device {dev!r}; devices: {prep.dev_names}"
            )
        req.loc[v] = di
        if (v, di) not in self.placed:
            self.placed.add((v, di))
            self.weights[di] += prep.params[v]
            self._alloc(di, prep.params[v], req, "weights", v)
        same = prep.domain_same[di]
        refs, count, buffer = req.refs, 0, prep.buffer
        for p, k in prep.preds[v]:
            dp = req.loc[p]
            if same[dp]:
                continue
            key = buffer(p, k, di)
            x = req.xfers.get((p, k, di))
            if x is not None:  # on its way: ride along
                x.consumers.append(v)
                count += 1
                if x.started:
                    refs[key] += 1
                self._decref(req, buffer(p, k, dp))
            elif key in refs:  # already there
                refs[key] += 1
                self._decref(req, buffer(p, k, dp))
            else:  # the new transfer inherits v's reference to the source copy
                hops, times, nbytes = self._dyn_route(p, k, dp, di)
                x = Transfer(req, p, k, dp, di, hops, times, nbytes, [v], False, prep.rank[v])
                req.xfers[(p, k, di)] = x
                count += 1
                self._queue_hop(x)
        unplaced = req.unplaced
        for key in prep.preds[v]:  # the last reader of a tensor placed: its copies may go
            c = unplaced[key] - 1
            unplaced[key] = c
            if c == 0:
                for d in req.pinned.pop(key, ()):
                    self._decref(req, buffer(*key, d))
        # the decision itself (platform.decision_s), then waking a worker on another core
        h = self.handoff[di]
        h = h if h > 0.0 and any(
            same[req.loc[p]] and req.loc[p] != di for p, _ in prep.preds[v] if p < prep.n_ops) else 0.0
        if self.deciding is not None:  # decided by the stream that finished v's last input
            count += 1
            self.deciding.append((req, v, h))
        elif (delay := self.decision + h) > 0.0:
            count += 1
            self._handed_after(req, v, delay)
        req.pending[v] = count
        if count == 0:
            self._ready(req, v)

    def _dyn_route(self, p: int, k: int, dp: int, di: int) -> tuple:
        key = (p, k, dp, di)
        hit = self._dyn_groups.get(key)
        if hit is None:
            hit = self._dyn_groups[key] = priced_route(self.prep, self.platform, self.cost.transfer_time,
                                                       p, k, dp, di)
        return hit

    # ---------------------------------------------------------- transfer events
    def _queue_hop(self, x: Transfer) -> None:
        ri = x.hops[x.hop]
        self.seq += 1
        heappush(self.lheaps[ri], (x.req.base + x.rank, self.seq, x))
        idle = self.lidle[ri]
        if idle:
            idle.popleft()()

    def _xfer_start(self, x: Transfer) -> None:
        x.started = True
        req = x.req
        pin = self.dynamic and req.unplaced.get((x.p, x.k), 0) > 0
        if pin:  # readers of this tensor still to be placed may need this copy
            req.pinned.setdefault((x.p, x.k), []).append(x.dst)
        req.refs[self.prep.buffer(x.p, x.k, x.dst)] = len(x.consumers) + x.is_output + pin
        self._alloc(x.dst, x.nbytes, req, "transfer", x)

    def _xfer_done(self, x: Transfer) -> None:
        req = x.req
        if self.dynamic:
            req.xfers.pop((x.p, x.k, x.dst), None)
        self._decref(req, self.prep.buffer(x.p, x.k, x.src))
        pend = req.pending
        for v in x.consumers:
            c = pend[v] - 1
            pend[v] = c
            if c == 0:
                self._ready(req, v)
        if x.is_output:
            req.held.append(self.prep.buffer(x.p, x.k, x.dst))
            req.remaining -= 1
            if req.remaining == 0:
                self._complete(req)

    # ------------------------------------------------------------------ requests
    def _arrive(self, r: int) -> None:
        prep = self.prep
        req = Request()
        req.r, req.base, req.arrival = r, r * max(prep.n_ops, 1), self.env.now
        req.pending = list(self.npred)
        req.state = bytearray(len(prep.names))
        req.refs, req.held, req.xfers = {}, [], {}
        req.unplaced, req.pinned = dict(self.dyn_readers), {}
        req.loc = list(prep.loc0) if self.dynamic else prep.loc0
        req.remaining = prep.n_ops
        req.factors, req.rng = None, None
        req.extra = {}
        if self.seeds is not None:
            req.rng = np.random.default_rng(self.seeds[r])
            req.factors = req.rng.lognormal(-(self.sigma**2) / 2, self.sigma, prep.n_ops).tolist()
        self.reqs[r] = req
        self.arrivals[r] = self.env.now
        for p in range(prep.n_ops, len(prep.names)):
            self._start(req, p, prep.host)
            self._fan(req, p, prep.host)
        static = self.static
        for u in self.roots:
            if static[u]:
                self._ready(req, u)
            else:
                self._place(req, u)
        if req.remaining == 0:
            self._complete(req)

    def _complete(self, req: Request) -> None:
        for key in req.held:
            self._decref(req, key)
        req.held = []
        if req.refs:  # pragma: no cover - an engine bug, never a user error
            prep = self.prep
            leaked = sorted(prep.unbuffer(key) for key in req.refs)
            leaked = [(prep.names[p], k, prep.dev_names[d]) for p, k, d in leaked]
            raise SimulationError(f"internal error: request {req.r} leaked buffers {leaked[:5]}")
        self.completions[req.r] = self.env.now
        self.reqs[req.r] = None
        self.done += 1

    # ---------------------------------------------------------------------- run
    def execute(self) -> SimResult:
        start_servers(self)
        self.env.run()
        if self.done < self.n_req:
            self._deadlock()
        if self.mem != self.weights:  # pragma: no cover - an engine bug
            raise SimulationError(
                f"internal error: memory {self.mem} != weights {self.weights} at the end"
            )
        return SimResult.from_run(self)
    def _deadlock(self) -> None:
        prep = self.prep
        r = next(i for i, req in enumerate(self.reqs) if req is not None)
        req = self.reqs[r]
        u = next(i for i in range(prep.n_ops) if req.state[i] != DONE)
        missing = [
            prep.names[p] for p, _ in prep.preds[u] if p < prep.n_ops and req.state[p] != DONE
        ]
        waits = f"; unfinished inputs {missing}" if missing else ""
        raise SimulationError(
            f"deadlock: request {r} cannot finish; op {prep.names[u]!r} is stuck "
            f"({STATE_NAMES[req.state[u]]}{waits}) with no event left to run"
        )
