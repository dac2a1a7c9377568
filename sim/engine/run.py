"""One simulation of :mod:`sim.engine.simulator`: its integer tables, its mutable state and the
handlers of its events (the servers, :mod:`sim.engine.servers`, and the op handlers,
:mod:`sim.engine.ops`, call them). The model is described in :mod:`sim.engine.simulator`."""

from __future__ import annotations

import math
from collections import deque
from heapq import heappush
from itertools import compress
from typing import TYPE_CHECKING, Any

import numpy as np

from hetsim.sim.contention import Contention
from hetsim.sim.engine.array_replay import replay_run, replayable
from hetsim.sim.engine.host import HostModel
from hetsim.sim.engine.host_costs import gpu_to_cpu_handoffs
from hetsim.sim.engine.ops import bind_op_handlers
from hetsim.sim.engine.prep import Fanout, Prepared, build_fanout, priced_route, static_fanouts
from hetsim.sim.engine.pricing import Prices
from hetsim.sim.engine.servers import Clock, start_servers
from hetsim.sim.engine.state import (
    DONE,
    STATE_NAMES,
    PolicyView,
    Request,
    SimulationError,
    Transfer,
)
from hetsim.sim.options import SimOptions
from hetsim.sim.plan import policy_select, size_text
from hetsim.sim.result import SimResult

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.priced import PricedGraph
    from hetsim.graphs.graph import Graph
    from hetsim.sim.plan import Plan
    from hetsim.sim.platform import Platform

__all__ = ["EngineRun"]


def _bytes(n: int) -> str:
    """``"1100 bytes"``, ``"6442450944 bytes (6.0 GiB)"``: exact, and readable when large."""
    return f"{n} bytes" if n < 2**20 else f"{n} bytes ({size_text(n)})"


class EngineRun:
    """One simulation: integer tables, mutable state and the handlers of its events.

    The engine's pieces use its public members only (the engine's internal
    interface; ``tests/test_namespace.py`` checks that nothing reaches into private
    ones):

    * tables: ``prep``, ``prices`` (``top``/``tdsp``: static op and dispatch times,
      ``price(u, d)``: any op on any device), ``static``, ``baked``, ``sfo`` and
      ``fanout(u, d)`` (fan-outs), ``host`` (:class:`sim.engine.host.HostModel` or None);
    * state: ``env``, ``reqs``, ``heaps``/``idle`` (per device), ``lheaps``/``lidle``
      (per link direction), ``busy``, ``lbusy``, ``lbytes``, ``disp_busy``, ``mem``,
      ``peak``, ``overflowed``, ``queued``, ``stream_end``, ``zero``, ``records``,
      ``deciding``, the dispatch slots ``free_slots``/``slot_waiters``;
    * op handlers (bound by :func:`sim.engine.ops.bind_op_handlers`): ``start_op``,
      ``finish_op``, ``fan_out``, ``ready``, ``drain``;
    * events: ``arrive`` (a request), ``transfer_started``/``transfer_done`` (a
      transfer's first hop starts, its last hop ends), ``queue_hop``, ``place`` (a
      dynamic placement), ``handed``/``handed_after`` (an input after a hand-over),
      ``overflow`` (a device out of memory), ``complete`` (a request), ``extra_read``.
    """

    def __init__(
        self,
        graph: Graph,
        platform: Platform,
        plan: Plan,
        priced: PricedGraph,
        prep: Prepared,
        *,
        n_req: int,
        interval: float,
        positions: list[int] | None = None,
    ) -> None:
        self.graph, self.platform, self.plan, self.cost = graph, platform, plan, priced.cost
        self.prep, self.n_req, self.interval = prep, n_req, interval
        self.env = Clock()
        # memory-bandwidth contention (sim.contention): None unless the platform declares it
        self.contention = (Contention(self.env, platform, prep.dev_names, prep.res_names)
                           if platform.memory_domains else None)
        n_dev = len(prep.dev_names)
        self.n_dev, self.n_out = n_dev, prep.n_out
        self.dev_index = {d: i for i, d in enumerate(prep.dev_names)}
        self.handoff = [float(d.handoff_s) for d in platform.devices]
        self.decision = float(getattr(platform, "decision_s", 0.0))
        self.dynamic = plan.policy is not None
        self.policy = plan.policy
        self.prices = Prices(priced, prep, positions)
        self.transfer_time = priced.transfer_time
        self.price = self.prices.get
        # the fan-outs of the plan's ops, made when the SimPy engine runs (:meth:`execute`;
        # the array replay makes its own tables, sim.engine.array_prep)
        self.sfo: list[Fanout | None] = []
        self.dynamic_fanouts: dict[tuple[int, int], Fanout] = {}
        self.dynamic_routes: dict[tuple[int, int, int, int], tuple] = {}
        n = prep.n_ops
        loc0 = prep.loc0
        self.static = [d >= 0 for d in loc0[:n]] if self.dynamic else [True] * n  # validated: all placed
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
                        top[u] += self.extra_read(u, d, loc0)
                else:
                    self.baked[u] = False
        npred = prep.tables.links.in_degrees(n)
        self.npred = npred.tolist() + [0] * (len(prep.names) - n)
        # dynamic plans: how many policy-placed readers each tensor has (a moved copy
        # lives until they are all placed: a tensor moves to a device once per request)
        self.dyn_readers: dict[tuple[int, int], int] = {}
        if self.dynamic:
            for v in range(n):
                if loc0[v] < 0:
                    for key in prep.preds[v]:
                        self.dyn_readers[key] = self.dyn_readers.get(key, 0) + 1
        self.roots = np.flatnonzero(npred == 0).tolist()
        # memory: the weights of the ops placed on each device
        weights = prep.tables.param_array
        if weights is not None:  # int64 holds every sum
            loc = prep.loc_array[:n]
            self.mem = [int(weights[loc == d].sum()) for d in range(n_dev)]
        else:
            self.mem = [0] * n_dev
            params = prep.params
            for u in compress(range(n), params[:n]):  # the ops with weights
                if loc0[u] >= 0:
                    self.mem[loc0[u]] += params[u]
        self.peak = list(self.mem)
        self.weights = list(self.mem)
        self.placed: set[tuple[int, int]] = set()
        self.failures: list[str] = []
        self.overflowed: set[int] = set()
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
        # stream holding a dispatch slot (sim.engine.servers); None outside such a batch
        self.deciding: list | None = None
        self.seq = 0
        self.zero: deque = deque()
        self.reqs: list[Request | None] = [None] * n_req
        self.arrivals = [0.0] * n_req
        self.completions = [math.nan] * n_req
        self.done = 0
        # the host as it runs (sim.engine.host): platforms with a launching GPU only
        self.host: HostModel | None = None
        #: the placements a worker makes that wait for copies, and the transfers it
        #: issues for them (HostModel.placing)
        self.collect: tuple[list, list] | None = None
        self.arrival_delay: list[list[float]] | None = None
        if any(d.launch is not None for d in platform.devices):
            self.host = HostModel(self)
            self.arrival_delay = gpu_to_cpu_handoffs(platform)
        self.configure()

    def configure(self, options: SimOptions | None = None) -> None:
        """The options of :func:`simulate` that the run reads (before :meth:`execute`):
        ``record``, ``seed``, ``noise``, ``check_memory`` (None: the defaults)."""
        options = options or SimOptions()
        record, seed, noise = options.record, options.seed, float(options.noise)
        self.seed, self.check_memory = seed, options.check_memory
        self.sigma = math.sqrt(math.log1p(noise * noise)) if noise > 0 else 0.0
        self.records: list[tuple] | None = [] if record else None
        self.node_bytes: list[int] = []
        if record:
            self.node_bytes = [int(d["bytes"]) for d in self.prep.node_data]
        self.view = PolicyView(self)
        self.seeds = np.random.SeedSequence(seed).spawn(self.n_req) if self.sigma > 0 else None

    def extra_read(self, v: int, dv: int, loc: list[int]) -> float:
        """Time op ``v`` on device ``dv`` spends reading inputs produced on other devices
        of its memory domain (placements ``loc``)."""
        spb = self.spb[dv]
        if spb == 0.0:
            return 0.0
        prep = self.prep
        same, n, size = prep.domain_same[dv], prep.n_ops, prep.out_size
        return spb * sum(size[p][k] for p, k in prep.preds[v] if p < n and loc[p] != dv and same[loc[p]])

    def fanout(self, u: int, du: int) -> Fanout:
        """The fan-out of a node placed at run time (:func:`sim.engine.prep.build_fanout`)."""
        fo = self.dynamic_fanouts.get((u, du))
        if fo is None:
            fo = build_fanout(self.prep, self.platform, self.transfer_time, u, du, self.prep.loc0)
            self.dynamic_fanouts[(u, du)] = fo
        return fo

    # ----------------------------------------------------------------- memory
    def _alloc(self, di: int, size: int, req: Request, what: str, about: Any) -> None:
        m = self.mem[di] + size
        self.mem[di] = m
        if m > self.peak[di]:
            self.peak[di] = m
            if m > self.prep.capacity[di] and di not in self.overflowed:
                self.overflow(di, m, req, what, about)

    def overflow(self, di: int, m: int, req: Request, what: str, about: Any) -> None:
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
        self.overflowed.add(di)
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
    # start_op, fan_out, finish_op, ready, drain: sim.engine.ops.bind_op_handlers
    def handed_after(self, req: Request, v: int, delay: float) -> None:
        """:meth:`_handed` ``delay`` seconds from now (a decision, a handoff), or now."""
        if delay > 0.0:
            self.env.timeout(delay).callbacks.append(lambda _e: self.handed(req, v))
        else:
            self.handed(req, v)

    def handed(self, req: Request, v: int) -> None:
        """An input from another device of ``v``'s memory domain, after the handoff."""
        c = req.pending[v] - 1
        req.pending[v] = c
        if c == 0:
            self.ready(req, v)
            self.drain()

    def place(self, req: Request, v: int) -> None:
        """Place ``v`` by the policy (its producers finished, or launched on a GPU
        whose host thread runs ahead, :meth:`launched`), start the transfers of its
        inputs, and make it ready once they are on its device."""
        prep = self.prep
        name = prep.names[v]
        self.view.request = req
        di = policy_select(self.policy, name, self.view, self.dev_index, prep.dev_names, SimulationError)
        req.loc[v] = di
        if (v, di) not in self.placed:
            self.placed.add((v, di))
            self.weights[di] += prep.params[v]
            self._alloc(di, prep.params[v], req, "weights", v)
        same, buffer = prep.domain_same[di], prep.buffer
        count, state = 0, req.state
        for p, k in prep.preds[v]:
            if state[p] != DONE:  # launched, still running: its output follows (fan_out)
                req.after.setdefault(p, []).append((v, k))
                count += 1
            elif not same[req.loc[p]]:
                count += self.fetch(req, v, p, k, di)
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
            self.handed_after(req, v, delay)
        req.pending[v] = count
        if self.host is not None:  # queued once its copies are issued (sim.engine.host)
            if self.collect is not None and any(not same[req.loc[p]] for p, _ in prep.preds[v]):
                self.collect[0].append((req, v, di))
            else:
                self.host.placed(req, v, di)
        if count == 0:
            self.ready(req, v)

    def fetch(self, req: Request, v: int, p: int, k: int, di: int) -> int:
        """Output ``k`` of finished ``p``, read by placed ``v`` on device ``di`` of another
        memory domain: 1 when ``v`` waits for its transfer (started now unless it is on
        its way), 0 when a copy is there already."""
        buffer, refs = self.prep.buffer, req.refs
        dp = req.loc[p]
        key = buffer(p, k, di)
        x = req.xfers.get((p, k, di))
        if x is not None:  # on its way: ride along
            x.consumers.append(v)
            if x.started:
                refs[key] += 1
            self._decref(req, buffer(p, k, dp))
            return 1
        if key in refs:  # already there
            refs[key] += 1
            self._decref(req, buffer(p, k, dp))
            return 0
        # the new transfer inherits v's reference to the source copy
        hops, times, nbytes = self.dynamic_route(p, k, dp, di)
        x = Transfer(req, p, k, dp, di, hops, times, nbytes, [v], False, self.prep.rank[v])
        req.xfers[(p, k, di)] = x
        if self.collect is not None:  # placed by a worker: it issues the copy (HostModel.issue_placed)
            self.collect[1].append(x)
        else:
            self.queue_hop(x)
        return 1

    def launched(self, req: Request, u: int, di: int) -> None:
        """Op ``u`` of a dynamic plan is launched on GPU ``di`` (its kernel still to run),
        or has run on a CPU worker (its host epilogue still to run): the readers it was
        the last unplaced producer of are placed now, as the executor's worker places
        them (:meth:`produced` gives them ``u``'s output when it is done)."""
        fo = self.sfo[u] or self.fanout(u, di)
        pend = req.pending
        for v in fo.dyn:
            c = pend[v] - 1
            pend[v] = c
            if c == 0:
                self.place(req, v)

    def produced(self, req: Request, u: int, di: int) -> None:
        """Launched op ``u`` is done on device ``di``: its readers placed meanwhile
        (:meth:`place`) get their input, in place or by a transfer."""
        pend, loc, same = req.pending, req.loc, self.prep.domain_same[di]
        for v, k in req.after.pop(u, ()):
            dv = loc[v]
            if not same[dv] and self.fetch(req, v, u, k, dv):
                continue
            c = pend[v] - 1
            pend[v] = c
            if c == 0:
                self.ready(req, v)

    def dynamic_route(self, p: int, k: int, dp: int, di: int) -> tuple:
        key = (p, k, dp, di)
        hit = self.dynamic_routes.get(key)
        if hit is None:
            hit = self.dynamic_routes[key] = priced_route(self.prep, self.platform, self.transfer_time,
                                                       p, k, dp, di)
        return hit

    # ---------------------------------------------------------- transfer events
    def queue_hop(self, x: Transfer) -> None:
        """Queue ``x``'s next hop on its link direction, keyed by request, then by the
        rank of its most urgent consumer, or, on a platform whose GPUs launch their
        work (``launch`` set), by its producer's rank: the executor issues copies in
        its launch order, and the first issued of those ready goes first."""
        ri = x.hops[x.hop]
        self.seq += 1
        if self.host is not None:
            p = x.p  # a graph input's copies are issued before any op's
            key = x.req.base + (self.prep.rank[p] if p < self.prep.n_ops else -1)
        else:
            key = x.req.base + x.rank
        heappush(self.lheaps[ri], (key, self.seq, x))
        idle = self.lidle[ri]
        if idle:
            idle.popleft()()

    def transfer_started(self, x: Transfer) -> None:
        x.started = True
        req, dst = x.req, x.dst
        pin = self.dynamic and req.unplaced.get((x.p, x.k), 0) > 0
        if pin:  # readers of this tensor still to be placed may need this copy
            req.pinned.setdefault((x.p, x.k), []).append(dst)
        req.refs[(x.p * self.n_out + x.k) * self.n_dev + dst] = len(x.consumers) + x.is_output + pin
        mem = self.mem
        m = mem[dst] + x.nbytes  # self._alloc, inline: once per transfer
        mem[dst] = m
        if m > self.peak[dst]:
            self.peak[dst] = m
            if m > self.prep.capacity[dst] and dst not in self.overflowed:
                self.overflow(dst, m, req, "transfer", x)

    def transfer_done(self, x: Transfer) -> None:
        req, p, k = x.req, x.p, x.k
        if self.dynamic:
            req.xfers.pop((p, k, x.dst), None)
        refs = req.refs
        key = (p * self.n_out + k) * self.n_dev + x.src  # the source copy: self._decref, inline
        c = refs[key] - 1
        if c:
            refs[key] = c
        else:
            del refs[key]
            self.mem[x.src] -= self.prep.out_size[p][k]
        pend = req.pending
        if self.arrival_delay is not None and (h := self.arrival_delay[x.src][x.dst]) > 0.0:
            for v in x.consumers:  # a GPU's tensor handed over to a CPU worker
                self.env.timeout(h).callbacks.append(lambda _e, v=v: self.handed(req, v))
        else:
            ready = self.ready
            for v in x.consumers:
                c = pend[v] - 1
                pend[v] = c
                if c == 0:
                    ready(req, v)
        if x.is_output:
            req.held.append((p * self.n_out + k) * self.n_dev + x.dst)
            req.remaining -= 1
            if req.remaining == 0:
                self.complete(req)

    # ------------------------------------------------------------------ requests
    def arrive(self, r: int) -> None:
        prep = self.prep
        req = Request()
        req.r, req.base, req.arrival = r, r * max(prep.n_ops, 1), self.env.now
        req.pending = list(self.npred)
        req.state = bytearray(len(prep.names))
        req.refs, req.held, req.xfers = {}, [], {}
        req.unplaced, req.pinned, req.after = dict(self.dyn_readers), {}, {}
        req.loc = list(prep.loc0) if self.dynamic else prep.loc0
        req.remaining = prep.n_ops
        req.factors, req.rng = None, None
        req.extra = {}
        if self.seeds is not None:
            req.rng = np.random.default_rng(self.seeds[r])
            req.factors = req.rng.lognormal(-(self.sigma**2) / 2, self.sigma, prep.n_ops).tolist()
        self.reqs[r] = req
        self.arrivals[r] = self.env.now
        if self.host is not None:
            self.host.arrive(req)
        if self.host is not None:  # the executor's main thread issues the inputs' copies, one by one
            self.collect = ([], [])
        try:
            for p in range(prep.n_ops, len(prep.names)):
                self.start_op(req, p, prep.host)
                self.fan_out(req, p, prep.host)
        finally:
            collected, self.collect = self.collect, None
        if collected is not None:
            self.host.issue_inputs(collected)
        static = self.static
        for u in self.roots:
            if static[u]:
                self.ready(req, u)
            else:
                self.place(req, u)
        if req.remaining == 0:
            self.complete(req)

    def complete(self, req: Request) -> None:
        for key in req.held:
            self._decref(req, key)
        req.held = []
        if req.refs:  # pragma: no cover - an engine bug, never a user error
            prep = self.prep
            leaked = sorted(prep.unbuffer(key) for key in req.refs)
            leaked = [(prep.names[p], k, prep.dev_names[d]) for p, k, d in leaked]
            raise SimulationError(f"internal error: request {req.r} leaked buffers {leaked[:5]}")
        self.completions[req.r] = self.env.now
        if self.host is not None:
            self.host.retire(req)
        self.reqs[req.r] = None
        self.done += 1

    # ---------------------------------------------------------------------- run
    def execute(self) -> SimResult:
        if replayable(self):  # the same events on arrays (sim.engine.array_replay)
            res = replay_run(self)
            if res is not None:
                return res
        self.sfo = static_fanouts(self.prep, self.platform, self.transfer_time)
        bind_op_handlers(self)
        start_servers(self)
        self.env.run()
        if self.done < self.n_req:
            self.report_deadlock()
        if self.mem != self.weights:  # pragma: no cover - an engine bug
            raise SimulationError(
                f"internal error: memory {self.mem} != weights {self.weights} at the end"
            )
        return SimResult.from_run(self)
    def report_deadlock(self) -> None:
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
