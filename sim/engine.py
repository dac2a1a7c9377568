"""The discrete-event engine: replay a plan on a platform's resources, on SimPy.

Model
-----
* Every device stream and every link direction is a server: one SimPy process per
  server pulls work from its own ready queue (a heap keyed by ``(request,
  priority)``, lower first; the default priority is the topological index). A
  half-duplex link is one server for both directions. SimPy owns the clock; the
  processes only ``yield env.timeout(...)`` and wait on SimPy events. (One process
  per server rather than one per op: ``simpy.Resource`` request/release costs
  ~11 us per op, one process per op more, and the engine must run 50 000 ops/s.)
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
  predecessors have finished; ``view`` is a :class:`sim.plan.SystemView`. The node
  is ready on its device ``platform.decision_s`` later (the runtime's time to run
  the policy), plus the device's ``handoff_s`` when an input comes from another
  device of its memory domain.
"""

from __future__ import annotations

import gc
import math
from collections import deque
from heapq import heappush
from typing import TYPE_CHECKING, Any

import numpy as np
import simpy

from hetsim.costmodel.base import host_dispatch
from hetsim.sim import engine_servers as _servers
from hetsim.sim.engine_prep import (
    Fanout,
    Prepared,
    PrepError,
    build_fanout,
    check_time,
    prepare,
    route,
)
from hetsim.sim.engine_state import (
    DONE,
    QUEUED,
    RUNNING,
    STATE_NAMES,
    PolicyView,
    Request,
    SimulationError,
    Transfer,
)
from hetsim.sim.plan import size_text
from hetsim.sim.platform import Platform
from hetsim.sim.result import SimResult

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.graphs.graph import Graph
    from hetsim.sim.plan import Plan

__all__ = ["SimulationError", "simulate"]


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
    if isinstance(platform, str):
        platform = Platform.load(platform)
    if cost is None:
        from hetsim.costmodel.roofline import Roofline

        cost = Roofline()
    plan.validate(graph, platform)
    n_req = requests if requests is not None else (plan.microbatches or 1)
    if isinstance(n_req, bool) or not isinstance(n_req, int) or n_req < 1:
        raise SimulationError(f"requests must be an int >= 1, got {requests!r}")
    if not isinstance(interval_s, int | float) or not math.isfinite(interval_s) or interval_s < 0:
        raise SimulationError(f"interval_s must be a finite number >= 0, got {interval_s!r}")
    if not isinstance(noise, int | float) or not math.isfinite(noise) or noise < 0:
        raise SimulationError(f"noise must be a finite number >= 0, got {noise!r}")
    # The run allocates many small objects that never form garbage cycles; pausing
    # the cyclic collector during it saves a third of the time on large graphs.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        prep = prepare(graph, platform, plan)
        run = EngineRun(graph, platform, plan, cost, prep, n_req=n_req, interval=float(interval_s))
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

    The SimPy processes (:mod:`sim.engine_servers`) call ``_start``/``_finish``
    for ops and ``_xfer_start``/``_xfer_done`` for transfers; these update memory,
    wake successors and queue transfers.
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
        n_dev = len(prep.dev_names)
        self.n_dev = n_dev
        self.dev_index = {d: i for i, d in enumerate(prep.dev_names)}
        self.handoff = [float(d.handoff_s) for d in platform.devices]
        self.decision = float(getattr(platform, "decision_s", 0.0))
        self.dynamic = plan.policy is not None
        self.policy = plan.policy
        self._prices: dict[tuple[int, int], tuple[float, float]] = {}
        self._fanouts: list[list[Fanout | None]] = [
            [None] * len(prep.names) for _ in prep.dev_names
        ]
        self._dyn_groups: dict[tuple[int, int, int, int], tuple] = {}
        n = prep.n_ops
        self.static = [d >= 0 for d in prep.loc0[:n]]
        self.top = [0.0] * n
        self.tdsp = [0.0] * n
        for u in range(n):
            d = prep.loc0[u]
            if d >= 0:
                self.top[u], self.tdsp[u] = self._price(u, d, cache=False)
        # reading inputs that another device of the same memory produced: priced into a
        # static op's time here when every producer is static, else when it is ready
        self.spb = [1.0 / d.handoff_bandwidth_bytes_per_s if d.handoff_bandwidth_bytes_per_s else 0.0
                    for d in platform.devices]
        self.baked = [True] * n
        if any(self.spb):
            for u in range(n):
                d = prep.loc0[u]
                if d >= 0 and all(prep.loc0[p] >= 0 for p, _ in prep.preds[u] if p < n):
                    if self.top[u] > 0.0:
                        self.top[u] += self._xread(u, d, prep.loc0)
                else:
                    self.baked[u] = False
        self.npred = [len(p) for p in prep.preds] + [0] * (len(prep.names) - n)
        # dynamic plans: how many policy-placed readers each tensor has (a moved copy
        # lives until they are all placed: a tensor moves to a device once per request)
        self.dyn_readers: dict[tuple[int, int], int] = {}
        if self.dynamic:
            for v in range(n):
                if prep.loc0[v] < 0:
                    for key in prep.preds[v]:
                        self.dyn_readers[key] = self.dyn_readers.get(key, 0) + 1
        self.roots = [u for u in range(n) if not prep.preds[u]]
        # memory
        self.mem = [0] * n_dev
        for u in range(n):
            if prep.loc0[u] >= 0:
                self.mem[prep.loc0[u]] += prep.params[u]
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
        self.seq = 0
        self.zero: deque = deque()
        self.reqs: list[Request | None] = [None] * n_req
        self.arrivals = [0.0] * n_req
        self.completions = [math.nan] * n_req
        self.done = 0
        self.configure()

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
        if record:
            graph, n = self.graph, self.prep.n_ops
            self.node_bytes = [int(graph.nx.nodes[u]["bytes"]) for u in self.prep.names[:n]]
        self.view = PolicyView(self)
        self.seeds = np.random.SeedSequence(seed).spawn(self.n_req) if self.sigma > 0 else None

    # ------------------------------------------------------------------ pricing
    def _price(self, u: int, d: int, cache: bool = True) -> tuple[float, float]:
        hit = self._prices.get((u, d)) if cache else None
        if hit is None:
            name = self.prep.names[u]
            dev = self.platform.devices[d]
            t = self.cost.op_time(self.graph, name, dev)
            if not (type(t) is float and 0.0 <= t < math.inf):
                t = check_time(t, f"op {name!r} on {dev.name!r}")
            ds = host_dispatch(self.cost, self.graph, name, dev)
            if not 0.0 <= ds < math.inf:
                ds = check_time(ds, f"dispatching {name!r} to {dev.name!r}")
            hit = (t, ds)
            if cache:
                self._prices[(u, d)] = hit
        return hit

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
        fo = self._fanouts[du][u]
        if fo is None:
            fo = build_fanout(
                self.prep, self.platform, self.cost.transfer_time, u, du, self.prep.loc0
            )
            self._fanouts[du][u] = fo
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

    def _decref(self, req: Request, key: tuple[int, int, int]) -> None:
        refs = req.refs
        c = refs[key] - 1
        if c:
            refs[key] = c
        else:
            del refs[key]
            self.mem[key[2]] -= self.prep.out_size[key[0]][key[1]]

    # --------------------------------------------------------------- op events
    def _start(self, req: Request, u: int, di: int) -> None:
        fo = self._fanouts[di][u] or self._fanout(u, di)
        refs = req.refs
        req.state[u] = RUNNING
        for k, _, nref in fo.alloc:
            refs[(u, k, di)] = nref
        if fo.total:
            self._alloc(di, fo.total, req, "op", u)
        for k in fo.held:
            req.held.append((u, k, di))

    def _finish(self, req: Request, u: int, di: int) -> None:
        same = self.prep.domain_same[di]
        loc, refs, mem, out_size = req.loc, req.refs, self.mem, self.prep.out_size
        for p, k in self.prep.preds[u]:  # release the inputs (inlined _decref)
            dp = loc[p]
            key = (p, k, dp if same[dp] else di)
            c = refs[key] - 1
            if c:
                refs[key] = c
            else:
                del refs[key]
                mem[key[2]] -= out_size[p][k]
        self._fan(req, u, di)
        req.remaining -= 1
        if req.remaining == 0:
            self._complete(req)

    def _fan(self, req: Request, u: int, di: int) -> None:
        fo = self._fanouts[di][u] or self._fanout(u, di)
        req.state[u] = DONE
        self.mem[di] -= fo.dead_total
        pend = req.pending
        for v in fo.local:
            c = pend[v] - 1
            pend[v] = c
            if c == 0:
                self._ready(req, v)
        for v, h in fo.handoff:
            self.env.timeout(h).callbacks.append(lambda _e, req=req, v=v: self._handed(req, v))
        for g in fo.groups:
            x = Transfer(
                req,
                u,
                g.k,
                di,
                g.dst,
                g.hops,
                g.times,
                g.nbytes,
                list(g.consumers),
                g.is_output,
                g.rank,
            )
            if g.is_output:
                req.remaining += 1
            if self.dynamic:
                req.xfers[(u, g.k, g.dst)] = x
            self._queue_hop(x)
        for v in fo.dyn:
            c = pend[v] - 1
            pend[v] = c
            if c == 0:
                self._place(req, v)

    def _handed(self, req: Request, v: int) -> None:
        """An input from another device of ``v``'s memory domain, after the handoff."""
        c = req.pending[v] - 1
        req.pending[v] = c
        if c == 0:
            self._ready(req, v)
            self._drain()

    def _ready(self, req: Request, v: int) -> None:
        di = req.loc[v]
        if self.static[v]:
            t, ds = self.top[v], self.tdsp[v]
        else:
            t, ds = self._price(v, di)
        if not self.baked[v] and t > 0.0:
            x = self._xread(v, di, req.loc)
            if x > 0.0:
                req.extra[v] = x
                t += x
        if t == 0.0 and ds == 0.0:
            self.zero.append((req, v, di))
            return
        req.state[v] = QUEUED
        heappush(self.heaps[di], req.base + self.prep.rank[v])
        self.queued[di] += t + ds
        idle = self.idle[di]
        if idle:
            idle.popleft().succeed()

    def _drain(self) -> None:
        """Complete the zero-cost ops made ready by the last event."""
        zero = self.zero
        while zero:
            req, v, di = zero.popleft()
            self._start(req, v, di)
            if self.records is not None:
                now, name = self.env.now, self.prep.names[v]
                rec = ("op", name, name, req.r, self.prep.dev_names[di], -1, now, now)
                _servers.record(self, *rec, self.node_bytes[v])
            self._finish(req, v, di)

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
        refs, count = req.refs, 0
        for p, k in prep.preds[v]:
            dp = req.loc[p]
            if same[dp]:
                continue
            key = (p, k, di)
            x = req.xfers.get(key)
            if x is not None:  # on its way: ride along
                x.consumers.append(v)
                count += 1
                if x.started:
                    refs[key] += 1
                self._decref(req, (p, k, dp))
            elif key in refs:  # already there
                refs[key] += 1
                self._decref(req, (p, k, dp))
            else:  # the new transfer inherits v's reference to the source copy
                hops, times, nbytes = self._dyn_route(p, k, dp, di)
                x = Transfer(req, p, k, dp, di, hops, times, nbytes, [v], False, prep.rank[v])
                req.xfers[key] = x
                count += 1
                self._queue_hop(x)
        unplaced = req.unplaced
        for key in prep.preds[v]:  # the last reader of a tensor placed: its copies may go
            c = unplaced[key] - 1
            unplaced[key] = c
            if c == 0:
                for d in req.pinned.pop(key, ()):
                    self._decref(req, (*key, d))
        # the decision itself (platform.decision_s), then waking a worker on another core
        h = self.handoff[di]
        delay = self.decision + (h if h > 0.0 and any(
            same[req.loc[p]] and req.loc[p] != di for p, _ in prep.preds[v] if p < prep.n_ops) else 0.0)
        if delay > 0.0:
            count += 1
            self.env.timeout(delay).callbacks.append(lambda _e, req=req, v=v: self._handed(req, v))
        req.pending[v] = count
        if count == 0:
            self._ready(req, v)

    def _dyn_route(self, p: int, k: int, dp: int, di: int) -> tuple:
        key = (p, k, dp, di)
        hit = self._dyn_groups.get(key)
        if hit is None:
            hops, links = route(self.prep, self.platform, dp, di)
            nbytes = self.prep.out_size[p].get(k, 0)
            times = tuple(
                check_time(self.cost.transfer_time(nbytes, lk), f"transfer over {lk.name!r}")
                for lk in links
            )
            hit = self._dyn_groups[key] = (hops, times, nbytes)
        return hit

    # ---------------------------------------------------------- transfer events
    def _queue_hop(self, x: Transfer) -> None:
        ri = x.hops[x.hop]
        self.seq += 1
        heappush(self.lheaps[ri], (x.req.base + x.rank, self.seq, x))
        idle = self.lidle[ri]
        if idle:
            idle.popleft().succeed()

    def _xfer_start(self, x: Transfer) -> None:
        x.started = True
        req = x.req
        pin = self.dynamic and req.unplaced.get((x.p, x.k), 0) > 0
        if pin:  # readers of this tensor still to be placed may need this copy
            req.pinned.setdefault((x.p, x.k), []).append(x.dst)
        req.refs[(x.p, x.k, x.dst)] = len(x.consumers) + x.is_output + pin
        self._alloc(x.dst, x.nbytes, req, "transfer", x)

    def _xfer_done(self, x: Transfer) -> None:
        req = x.req
        if self.dynamic:
            req.xfers.pop((x.p, x.k, x.dst), None)
        self._decref(req, (x.p, x.k, x.src))
        pend = req.pending
        for v in x.consumers:
            c = pend[v] - 1
            pend[v] = c
            if c == 0:
                self._ready(req, v)
        if x.is_output:
            req.held.append((x.p, x.k, x.dst))
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
        for u in self.roots:
            if self.static[u]:
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
            leaked = [
                (self.prep.names[p], k, self.prep.dev_names[d]) for p, k, d in sorted(req.refs)
            ]
            raise SimulationError(f"internal error: request {req.r} leaked buffers {leaked[:5]}")
        self.completions[req.r] = self.env.now
        self.reqs[req.r] = None
        self.done += 1

    # ---------------------------------------------------------------------- run
    def execute(self) -> SimResult:
        env, prep = self.env, self.prep
        for di, streams in enumerate(prep.streams):
            for s in range(streams):
                env.process(_servers.stream(self, di, s))
        for ri in range(len(prep.res_names)):
            env.process(_servers.link(self, ri))
        env.process(_servers.arrivals(self))
        env.run()
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
